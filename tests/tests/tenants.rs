//! Two tenants on one ZooKeeper, each a host with its own session, digest identity and
//! namespace (chroot): alice does lock and queue work while mallory, under tight limits, runs
//! every attack of `tests/guests/misbehave`. Mallory gets an error or a trap each time; alice's
//! operations all succeed, her nodes are untouched and unreadable to anyone else, and neither
//! session drops.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Channel;
use wazoo_proto::{
    admin_client::AdminClient, recipes_client::RecipesClient, sessions_client::SessionsClient,
    AcquireRequest, Empty, Family, HandleRef, InvokeRequest, OpenRequest,
};
use wazoo_runtime::{Host, HostConfig, RecipeError, SandboxLimits};
use wazoo_tests::daemon::Daemon;
use wazoo_tests::*;
use zookeeper_client::{Acls, Client, CreateMode};

const LIMIT: Duration = Duration::from_secs(120);

fn tenant(name: &str, limits: SandboxLimits) -> (HostConfig, String, String) {
    let root = format!("/tenants/{name}-{}", std::process::id());
    let digest = format!("{name}-{}:secret of {name}", std::process::id());
    let mut config = config(&format!("{}{root}", zk().address()), Duration::from_secs(10));
    config.keeper.digest = Some(digest.clone());
    config.limits = limits;
    (config, root, digest)
}

/// Mallory's limits: tight, so every flood ends quickly.
fn tight() -> SandboxLimits {
    SandboxLimits {
        memory_bytes: 32 << 20,
        cpu_per_call: Duration::from_millis(300),
        wasm_stack_bytes: 256 << 10,
        max_instances: 50,
        max_data_bytes: 64 << 10,
        max_children: 50,
        max_watches: 20,
        ops_per_sec: 300,
        max_znodes: 100,
        bytes_per_sec: 200_000,
    }
}

/// Runs misbehave `args` on a fresh mallory handle.
async fn attack(mallory: &Host, args: &[&str]) -> Result<Result<String, String>, RecipeError> {
    let mut h = mallory.custom("misbehave").await.expect("a misbehave handle");
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let outcome = h.run(&args).await;
    h.close().await;
    outcome
}

fn refused(outcome: &Result<Result<String, String>, RecipeError>, what: &str) -> bool {
    matches!(outcome, Ok(Err(text)) if text.contains(what))
}

async fn authed(digest: &str) -> Client {
    Client::connector().with_auth("digest", digest.as_bytes()).connect(&zk().address()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mallory_attacks_alice_works_on_untouched() {
    let (alice_config, alice_root, alice_digest) = tenant("alice", SandboxLimits::default());
    let (mallory_config, _, _) = tenant("mallory", tight());
    let alice = Host::start(alice_config).await.unwrap();
    let mallory = Host::start(mallory_config).await.unwrap();
    let alice_session = alice.live().await.unwrap().session_id();
    let mallory_session = mallory.live().await.unwrap().session_id();

    // Alice's marker, written through her own recipe (so with her ACL).
    let mut cfg = alice.config("config").await.unwrap();
    cfg.set("/marker", b"alice's", None).await.unwrap();
    cfg.close().await;

    // Alice works until mallory is done.
    let done = Arc::new(AtomicBool::new(false));
    let (ops, failures) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let work = {
        let (alice, done, ops, failures) = (alice.clone(), done.clone(), ops.clone(), failures.clone());
        tokio::spawn(async move {
            let mut lock = alice.lock("lock").await.unwrap();
            let mut queue = alice.queue("queue").await.unwrap();
            while !done.load(Ordering::SeqCst) || ops.load(Ordering::SeqCst) < 20 {
                let held = lock.acquire("/locks/report", Some(LIMIT)).await;
                let released = lock.release().await;
                let put = queue.put("/jobs", b"job", None, false).await;
                let taken = queue.take("/jobs", Some(LIMIT)).await;
                match (held, released, put, taken) {
                    (Ok(_), Ok(()), Ok(_), Ok(item)) if item.data == b"job" => {
                        ops.fetch_add(1, Ordering::SeqCst)
                    }
                    other => {
                        eprintln!("alice failed: {other:?}");
                        failures.fetch_add(1, Ordering::SeqCst)
                    }
                };
            }
        })
    };

    // CPU, memory, stack: traps.
    for args in [&["hold-then-spin", "/x"][..], &["hold-then-grow", "/x"], &["recurse"]] {
        let outcome = attack(&mallory, args).await;
        assert!(matches!(outcome, Err(RecipeError::Trapped(_))), "{args:?}: {outcome:?}");
    }
    // Memory kept across calls: a trap once the instance's limit is reached.
    let mut hoarder = mallory.custom("misbehave").await.unwrap();
    let mut trapped = false;
    for _ in 0..10 {
        if let Err(e) = hoarder.run(&["hoard".into(), "8".into()]).await {
            assert!(matches!(e, RecipeError::Trapped(_)), "{e:?}");
            trapped = true;
            break;
        }
    }
    assert!(trapped, "hoarding 80 MiB under a 32 MiB limit never trapped");
    hoarder.close().await;

    // Floods: each stops at its limit with limit-exceeded.
    let flood = attack(&mallory, &["flood", "/flood", "500"]).await;
    assert!(refused(&flood, "LimitExceeded"), "{flood:?}");
    let listing = attack(&mallory, &["list", "/flood"]).await;
    assert!(
        refused(&listing, "LimitExceeded"),
        "listing a 100-child node under a 50-child limit: {listing:?}"
    );
    let watches = attack(&mallory, &["watch-flood", "/w", "100"]).await;
    assert!(refused(&watches, "LimitExceeded"), "{watches:?}");
    let big = attack(&mallory, &["write", "/big", "1000000"]).await;
    assert!(refused(&big, "LimitExceeded"), "{big:?}");
    // Writes within the node limit, but more bytes per second than her budget.
    let mut writes = Vec::new();
    for _ in 0..10 {
        writes.push(attack(&mallory, &["write", "/medium", "60000"]).await);
    }
    assert!(writes.iter().any(|w| refused(w, "bytes written per second")), "{writes:?}");

    // Escapes: refused paths, or paths that resolve inside mallory's own namespace.
    for path in ["../alice", "/a/../marker", "//marker", "/a\0b", "/zookeeper/quota", "/zookeeper"] {
        let probe = attack(&mallory, &["probe", path]).await;
        assert!(refused(&probe, "InvalidPath"), "{path:?}: {probe:?}");
    }
    for path in [
        format!("{alice_root}/marker"),
        "/marker".to_string(),
        format!("/tenants\u{2215}alice-{}/marker", std::process::id()),
    ] {
        let probe = attack(&mallory, &["probe", &path]).await;
        assert!(
            matches!(&probe, Ok(Ok(text)) if text.starts_with("exists false;") && text.ends_with("NoNode")),
            "{path:?} must not reach alice's marker: {probe:?}"
        );
    }

    // Last, as it spends mallory's operations for a second.
    let spam = attack(&mallory, &["spam", "/x", "5000"]).await;
    assert!(refused(&spam, "operations per second"), "{spam:?}");

    done.store(true, Ordering::SeqCst);
    within(LIMIT, "alice's work ends", work).await.unwrap();
    assert_eq!(failures.load(Ordering::SeqCst), 0, "alice's operations failed");
    assert!(ops.load(Ordering::SeqCst) >= 20);

    // Alice's nodes: untouched, and private to her identity.
    let alice_zk = authed(&alice_digest).await;
    assert_eq!(alice_zk.get_data(&format!("{alice_root}/marker")).await.unwrap().0, b"alice's");
    let mut names = children(&alice_zk, &alice_root).await;
    // Her queue's claims directory, a container, is there until ZooKeeper reaps it.
    names.retain(|name| name != "jobs-claims");
    names.sort();
    assert_eq!(names, ["jobs", "locks", "marker"]);
    let anyone = client(&zk().address()).await;
    let peek = anyone.get_data(&format!("{alice_root}/marker")).await;
    assert!(matches!(peek, Err(zookeeper_client::Error::NoAuth)), "{peek:?}");
    let write = anyone
        .create(&format!("{alice_root}/intruder"), b"", &CreateMode::Persistent.with_acls(Acls::anyone_all()))
        .await;
    assert!(matches!(write, Err(zookeeper_client::Error::NoAuth)), "{write:?}");

    // Nobody's session dropped.
    assert_eq!(alice.live().await.unwrap().session_id(), alice_session);
    assert_eq!(mallory.live().await.unwrap().session_id(), mallory_session);
    assert!(mallory.stats().limit_hits.load(Ordering::Relaxed) >= 5);
    assert_eq!(alice.stats().limit_hits.load(Ordering::Relaxed), 0);
}

type Authed = tonic::service::interceptor::InterceptedService<Channel, Bearer>;

/// Adds `authorization: Bearer TOKEN` to every call.
#[derive(Clone)]
struct Bearer(Option<String>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.0 {
            request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        Ok(request)
    }
}

fn as_tenant(
    channel: &Channel,
    token: Option<&str>,
) -> (SessionsClient<Authed>, RecipesClient<Authed>, AdminClient<Authed>) {
    let bearer = Bearer(token.map(str::to_string));
    (
        SessionsClient::with_interceptor(channel.clone(), bearer.clone()),
        RecipesClient::with_interceptor(channel.clone(), bearer.clone()),
        AdminClient::with_interceptor(channel.clone(), bearer),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_daemon_serves_each_tenant_its_own_namespace_recipes_and_limits() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("wazoo-tenants-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (alice_root, mallory_root) = (format!("/tenants/d-alice-{pid}"), format!("/tenants/d-mallory-{pid}"));
    // Mallory's own plugins: the recipes she may use, and components built to hurt the host:
    // one importing an interface the host does not offer, one that traps while it starts, and a
    // compile bomb (its compile worker runs out of memory).
    let mallory_plugins = dir.join("mallory-plugins");
    std::fs::create_dir_all(&mallory_plugins).unwrap();
    for recipe in ["config", "misbehave"] {
        std::fs::copy(
            plugins().join(format!("{recipe}.wasm")),
            mallory_plugins.join(format!("{recipe}.wasm")),
        )
        .unwrap();
    }
    let tree = std::fs::read(plugins().join("tree.wasm")).unwrap();
    std::fs::write(
        mallory_plugins.join("evil-import.wasm"),
        replace_all(&tree, b"wazoo:zk/znode@", b"wazoo:zk/zn0de@"),
    )
    .unwrap();
    std::fs::write(mallory_plugins.join("evil-start.wasm"), wazoo_tests::components::traps_at_start(&tree))
        .unwrap();
    std::fs::write(mallory_plugins.join("evil-bomb.wasm"), wazoo_tests::components::compile_bomb(1_000_000))
        .unwrap();
    let file = dir.join("tenants.json");
    let tenants = serde_json::json!({"tenants": [
        {"name": "alice", "token": "alice-token-0123456789", "zookeeper_secret": "alice-zk", "root": alice_root},
        {"name": "mallory", "token": "mallory-token-0123456789", "zookeeper_secret": "mallory-zk", "root": mallory_root,
         "recipes": ["config", "misbehave", "evil-*"], "plugins": mallory_plugins,
         "limits": {"memory_mib": 32, "cpu_ms": 300, "data_bytes": 65536, "watches": 20},
         "quota": {"znodes": 30}}
    ]});
    std::fs::write(&file, tenants.to_string()).unwrap();
    let daemon = Daemon::start_with(
        &plugins(),
        &root().join("target/component-cache"),
        &["--tenants", file.to_str().unwrap()],
    )
    .await;
    let channel = daemon.channel().await;

    // No token, or an unknown one: UNAUTHENTICATED, for every service.
    for token in [None, Some("not-a-tenant-token")] {
        let (mut sessions, mut recipes, mut admin) = as_tenant(&channel, token);
        let open = sessions.open(OpenRequest { ttl_ms: 5000, name: "x".into() }).await.unwrap_err();
        assert_eq!(open.code(), tonic::Code::Unauthenticated, "{open:?}");
        let list = admin.list_recipes(Empty {}).await.unwrap_err();
        assert_eq!(list.code(), tonic::Code::Unauthenticated);
        let call = recipes.invoke(InvokeRequest::default()).await.unwrap_err();
        assert_eq!(call.code(), tonic::Code::Unauthenticated);
    }

    // Alice takes a lock in her namespace.
    let (mut sessions, mut alice, _) = as_tenant(&channel, Some("alice-token-0123456789"));
    let id =
        sessions.open(OpenRequest { ttl_ms: 5000, name: "alice".into() }).await.unwrap().into_inner().session;
    let request = AcquireRequest {
        session: id,
        path: "/locks/report".into(),
        family: Family::Lock as i32,
        timeout_ms: Some(10_000),
        ..Default::default()
    };
    let claim = alice.acquire(request).await.unwrap().into_inner();
    let alice_zk =
        Client::connector().with_auth("digest", b"alice:alice-zk").connect(&zk().address()).await.unwrap();
    assert_eq!(children(&alice_zk, &format!("{alice_root}/locks/report")).await.len(), 1);
    assert!(
        claim.node.starts_with("/locks/report/_c_"),
        "nodes are named inside the namespace: {}",
        claim.node
    );

    // Mallory: her own session ids mean nothing to alice's tenant and the other way round.
    let (mut m_sessions, mut mallory, mut m_admin) = as_tenant(&channel, Some("mallory-token-0123456789"));
    let foreign = mallory.release(HandleRef { session: id, handle: claim.handle }).await.unwrap_err();
    assert_eq!(foreign.code(), tonic::Code::NotFound, "{foreign:?}");
    let m_id = m_sessions
        .open(OpenRequest { ttl_ms: 5000, name: "mallory".into() })
        .await
        .unwrap()
        .into_inner()
        .session;
    // Only her recipes.
    let lock = mallory
        .acquire(AcquireRequest {
            session: m_id,
            path: "/l".into(),
            family: Family::Lock as i32,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(lock.message().contains("not one this tenant may load"), "{lock:?}");
    let listed = m_admin.list_recipes(Empty {}).await.unwrap().into_inner();
    assert!(listed.recipes.iter().any(|r| r.name == "misbehave"));
    assert!(!listed.recipes.iter().any(|r| r.name == "lock"), "mallory sees her own plugins only");
    for (evil, why) in
        [("evil-import", "zn0de"), ("evil-start", "fails when instantiated"), ("evil-bomb", "")]
    {
        let entry = listed.recipes.iter().find(|r| r.name == evil).unwrap_or_else(|| panic!("{evil} listed"));
        assert!(
            entry.world.is_empty() && !entry.refused.is_empty() && entry.refused.contains(why),
            "{evil}: {entry:?}"
        );
        let call = mallory
            .invoke(InvokeRequest { recipe: evil.into(), args_json: "[]".into(), ..Default::default() })
            .await
            .unwrap_err();
        assert_eq!(call.code(), tonic::Code::FailedPrecondition, "{evil}: {call:?}");
    }
    // Her attacks: errors or traps.
    let invoke = |args: serde_json::Value| InvokeRequest {
        recipe: "misbehave".into(),
        args_json: args.to_string(),
        ..Default::default()
    };
    let spin = mallory.invoke(invoke(serde_json::json!(["hold-then-spin", "/x"]))).await.unwrap_err();
    assert_eq!(spin.code(), tonic::Code::Internal, "{spin:?}");
    let big =
        mallory.invoke(invoke(serde_json::json!(["write", "/big", "1000000"]))).await.unwrap().into_inner();
    assert!(big.result_json.contains("LimitExceeded"), "{}", big.result_json);
    let probe = mallory
        .invoke(invoke(serde_json::json!([
            "probe",
            format!("{alice_root}/locks/report/{}", claim.node.rsplit('/').next().unwrap())
        ])))
        .await
        .unwrap()
        .into_inner();
    assert!(probe.result_json.contains("exists false"), "{}", probe.result_json);
    let escape = mallory.invoke(invoke(serde_json::json!(["probe", "../alice"]))).await.unwrap().into_inner();
    assert!(escape.result_json.contains("InvalidPath"), "{}", escape.result_json);
    // Without a node limit in the host, ZooKeeper's own hard quota on her root stops a flood.
    let flood =
        mallory.invoke(invoke(serde_json::json!(["flood", "/flood", "100"]))).await.unwrap().into_inner();
    assert!(flood.result_json.contains("QuotaExceeded"), "{}", flood.result_json);
    let anyone = client(&zk().address()).await;
    let stats = anyone.get_data(&format!("/zookeeper/quota{mallory_root}/zookeeper_stats")).await.unwrap().0;
    assert!(String::from_utf8_lossy(&stats).starts_with("count=30,"), "{}", String::from_utf8_lossy(&stats));

    // The CLI goes through the daemon as a tenant with --token (or WAZOO_TOKEN).
    let wazoo = |token: Option<&str>| {
        let mut c = wazoo_tests::daemon::cli();
        c.env_remove("WAZOO_TOKEN").args(["--server", &daemon.grpc]);
        if let Some(t) = token {
            c.args(["--token", t]);
        }
        c
    };
    let (code, stdout, stderr) = wazoo_tests::daemon::output(
        wazoo(Some("alice-token-0123456789")).args(["config", "set", "/cfg", "on"]),
    )
    .await;
    assert_eq!((code, stdout.trim()), (0, "0"), "{stderr}");
    assert_eq!(alice_zk.get_data(&format!("{alice_root}/cfg")).await.unwrap().0, b"on");
    let (code, _, stderr) = wazoo_tests::daemon::output(wazoo(None).args(["config", "get", "/cfg"])).await;
    assert_eq!(code, 70, "an unknown token is refused, not a missing value");
    assert!(stderr.contains("no tenant has this token"), "{stderr}");

    // Alice's lock is still hers and releases cleanly; the metrics name the tenants.
    alice.release(HandleRef { session: id, handle: claim.handle }).await.unwrap();
    // Released without waiting for ZooKeeper's answer: the node goes a moment later.
    within(LIMIT, "alice's node goes", wait_children(&alice_zk, &format!("{alice_root}/locks/report"), 0))
        .await;
    let metrics = daemon.metrics().await;
    assert!(metrics.contains("{tenant=\"alice\",method=\"Acquire\",recipe=\"lock\""), "{metrics}");
    assert!(metrics.contains("{tenant=\"mallory\",method=\"Invoke\",recipe=\"misbehave\""), "{metrics}");
    assert!(!metrics.contains("recipe=\"alice/") && !metrics.contains("recipe=\"mallory/"), "{metrics}");
    assert!(!metrics.contains("wazoo_tenant_"), "tenants are labels, not names: {metrics}");
    for tenant in ["alice", "mallory"] {
        assert!(metrics.contains(&format!("wazoo_compiles_total{{tenant=\"{tenant}\"}}")), "{metrics}");
    }
    let limit_hits = "wazoo_limit_hits_total{tenant=\"mallory\"} ";
    let hits = metrics.lines().find_map(|l| l.strip_prefix(limit_hits)?.parse::<u64>().ok());
    assert!(hits >= Some(1), "her oversized write is a limit hit: {metrics}");

    // Reloaded on SIGHUP: alice's token changes, carol joins, mallory leaves (her session and
    // what it holds go with her).
    let held = mallory
        .invoke(InvokeRequest {
            recipe: "config".into(),
            function: "config.get".into(),
            args_json: "[\"/\"]".into(),
            session: m_id,
            keep: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(held.handle, 0);
    let before = daemon.metrics().await;
    assert!(before.contains("wazoo_client_sessions{tenant=\"mallory\"} 1"), "{before}");
    let tenants = serde_json::json!({"tenants": [
        {"name": "alice", "token": "alice-new-token-0123456789", "zookeeper_secret": "alice-zk", "root": alice_root},
        {"name": "carol", "token": "carol-token-0123456789", "zookeeper_secret": "carol-zk", "root": format!("/tenants/d-carol-{pid}")}
    ]});
    std::fs::write(&file, tenants.to_string()).unwrap();
    unsafe { libc::kill(daemon.pid() as i32, libc::SIGHUP) };
    let (_, _, mut carol_admin) = as_tenant(&channel, Some("carol-token-0123456789"));
    within(Duration::from_secs(60), "carol is served", async {
        while carol_admin.list_recipes(Empty {}).await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let (_, _, mut old_alice) = as_tenant(&channel, Some("alice-token-0123456789"));
    assert_eq!(old_alice.list_recipes(Empty {}).await.unwrap_err().code(), tonic::Code::Unauthenticated);
    let (mut new_alice, _, _) = as_tenant(&channel, Some("alice-new-token-0123456789"));
    new_alice.open(OpenRequest { ttl_ms: 5000, name: "alice".into() }).await.unwrap();
    assert_eq!(m_admin.list_recipes(Empty {}).await.unwrap_err().code(), tonic::Code::Unauthenticated);
    let gone = mallory.release(HandleRef { session: m_id, handle: held.handle }).await.unwrap_err();
    assert_eq!(gone.code(), tonic::Code::Unauthenticated, "{gone:?}");
}

/// `bytes` with every occurrence of `from` replaced by `to` (same length).
fn replace_all(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut hits = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            hits += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(hits > 0, "{:?} not found", String::from_utf8_lossy(from));
    out
}

/// The tenants file is read strictly: a misspelt key, which once switched a tenant's allow-list
/// off or dropped its limits, stops the daemon from starting with one line naming the key and
/// the tenant, in JSON and in TOML.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_file_with_a_typo_stops_the_daemon_from_starting() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("wazoo-tenants-typo-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json = serde_json::json!({"tenants": [
        {"name": "alice", "token": "typo-alice-token-0123", "zookeeper_secret": "a", "root": format!("/tenants/typo-alice-{pid}")},
        {"name": "bob", "token": "typo-bob-token-0123", "zookeeper_secret": "b", "root": format!("/tenants/typo-bob-{pid}"),
         "recipe": ["lock"]}
    ]})
    .to_string();
    let toml = format!(
        "[[tenants]]\nname = \"alice\"\ntoken = \"typo-alice-token-0123\"\nzookeeper_secret = \"a\"\n\
         root = \"/tenants/typo-alice-{pid}\"\nlimts = {{ memory_mib = 32 }}\n"
    );
    for (name, text, wrong) in [
        ("tenants.json", json, "tenant \"bob\": unknown field `recipe`, expected one of"),
        ("tenants.toml", toml, "tenant \"alice\": unknown field `limts`, expected one of"),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        let (code, stdout, stderr) = serve_tenants(&file).await;
        assert_ne!(code, 0, "{name}: the daemon must not start: {stdout}");
        assert!(!stdout.contains("serving"), "{name}: {stdout}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: one line of error: {stderr}");
        assert!(lines[0].contains(&format!("{}: {wrong}", file.display())), "{name}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `wazoo serve --tenants FILE` run to its end (for files it must refuse): status, stdout, stderr.
async fn serve_tenants(file: &std::path::Path) -> (i32, String, String) {
    let serve = ["serve", "--listen", "127.0.0.1:0", "--metrics", "off", "--tenants"];
    wazoo_tests::daemon::output(wazoo_tests::daemon::cli().args(serve).arg(file)).await
}

/// The SHA-256 of `token` in hex, as `sha256sum` prints it.
fn sha256_hex(token: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "printf %s \"$1\" | sha256sum", "sh", token])
        .output()
        .expect("running sha256sum");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
}

/// A running daemon reloaded (SIGHUP) with a misspelt key logs the refusal and goes on serving
/// the tenants it had; once the file is mended, the next reload applies it. The file is TOML,
/// and alice is given by the SHA-256 of her token.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_with_a_typo_keeps_the_tenants_that_serve() {
    use std::process::Stdio;
    use tokio::io::AsyncBufReadExt;

    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("wazoo-tenants-reload-typo-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (alice_token, new_alice_token, carol_token) =
        ("reload-alice-token-0123", "reload-alice-new-token-0123", "reload-carol-token-0123");
    let alice_root = format!("/tenants/reload-alice-{pid}");
    let tenant = |name: &str, token: &str, extra: &str| {
        format!(
            "[[tenants]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\nzookeeper_secret = \"{name}-zk\"\n\
             root = \"/tenants/reload-{name}-{pid}\"\n{extra}\n",
            sha256_hex(token)
        )
    };
    let file = dir.join("tenants.toml");
    std::fs::write(&file, tenant("alice", alice_token, "")).unwrap();

    let mut child = tokio::process::Command::new(wazoo_bin())
        .env("WAZOO_ZOOKEEPER", zk().address())
        .env("WAZOO_PLUGINS", plugins())
        .env("WAZOO_CACHE", root().join("target/component-cache"))
        .env("WAZOO_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("WAZOO_SERVER")
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics", "off", "--watch-every", "1h", "--tenants"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting wazoo serve");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready =
        within(LIMIT, "wazoo serve is ready", stdout.next_line()).await.unwrap().expect("a ready line");
    // "serving gRPC on ADDR"
    let grpc = ready.split_whitespace().nth(3).expect("an address").to_string();
    // The log, read as it comes (so the daemon never blocks on a full pipe).
    let (log_tx, mut log) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            if log_tx.send(line).is_err() {
                break;
            }
        }
    });
    /// The next line of the log that contains `what`.
    async fn logged(log: &mut tokio::sync::mpsc::UnboundedReceiver<String>, what: &str) -> String {
        within(Duration::from_secs(60), what, async {
            loop {
                let line = log.recv().await.expect("the daemon's log goes on");
                if line.contains(what) {
                    return line;
                }
            }
        })
        .await
    }
    let channel = Channel::from_shared(format!("http://{grpc}")).unwrap().connect().await.unwrap();
    let alice_zk =
        Client::connector().with_auth("digest", b"alice:alice-zk").connect(&zk().address()).await.unwrap();
    let takes_a_lock = |token: &'static str, path: &'static str| {
        let channel = channel.clone();
        async move {
            let (mut sessions, mut recipes, _) = as_tenant(&channel, Some(token));
            let id = sessions
                .open(OpenRequest { ttl_ms: 5000, name: "alice".into() })
                .await
                .unwrap()
                .into_inner()
                .session;
            let request = AcquireRequest {
                session: id,
                path: path.into(),
                family: Family::Lock as i32,
                timeout_ms: Some(10_000),
                ..Default::default()
            };
            recipes.acquire(request).await.unwrap().into_inner()
        }
    };
    let claim = takes_a_lock(alice_token, "/locks/before").await;
    assert!(claim.node.starts_with("/locks/before/"), "{}", claim.node);
    assert_eq!(children(&alice_zk, &format!("{alice_root}/locks/before")).await.len(), 1);

    // A reload that would change alice's token and add carol, but for bob's misspelt limits.
    let typo = [
        tenant("alice", new_alice_token, ""),
        tenant("bob", "reload-bob-token-0123", "limts = { memory_mib = 32 }"),
        tenant("carol", carol_token, ""),
    ]
    .concat();
    std::fs::write(&file, &typo).unwrap();
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGHUP) };
    let refusal = logged(&mut log, "tenants not reloaded").await;
    assert!(refusal.contains("tenant \"bob\": unknown field `limts`"), "{refusal}");
    // Nothing changed: alice's old token still takes a lock, the file's new tokens are unknown.
    let claim = takes_a_lock(alice_token, "/locks/after").await;
    assert!(claim.node.starts_with("/locks/after/"), "{}", claim.node);
    assert_eq!(children(&alice_zk, &format!("{alice_root}/locks/after")).await.len(), 1);
    for token in [new_alice_token, carol_token] {
        let (_, _, mut admin) = as_tenant(&channel, Some(token));
        assert_eq!(admin.list_recipes(Empty {}).await.unwrap_err().code(), tonic::Code::Unauthenticated);
    }

    // Mended, the same change is applied on the next reload.
    std::fs::write(&file, typo.replace("limts", "limits")).unwrap();
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGHUP) };
    logged(&mut log, "tenants reloaded from").await;
    let (_, _, mut carol_admin) = as_tenant(&channel, Some(carol_token));
    within(Duration::from_secs(60), "carol is served", async {
        while carol_admin.list_recipes(Empty {}).await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let (_, _, mut old_alice) = as_tenant(&channel, Some(alice_token));
    assert_eq!(old_alice.list_recipes(Empty {}).await.unwrap_err().code(), tonic::Code::Unauthenticated);
    takes_a_lock(new_alice_token, "/locks/mended").await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tenants file of one tenant, `refused`, whose `recipes` are `patterns` (`config` not among
/// them), in `dir`; its token is `token`.
fn tenants_with_patterns(dir: &std::path::Path, token: &str, patterns: &[String]) -> std::path::PathBuf {
    let pid = std::process::id();
    let file = dir.join("tenants.json");
    let tenants = serde_json::json!({"tenants": [
        {"name": "refused", "token": token, "zookeeper_secret": "refused-zk",
         "root": format!("/tenants/patterns-{pid}-{}", dir.file_name().unwrap().to_string_lossy()),
         "recipes": patterns}
    ]});
    std::fs::write(&file, tenants.to_string()).unwrap();
    file
}

/// The daemon's resident memory, in KiB (`VmRSS` of /proc/PID/status).
fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A tenant with a thousand recipe patterns (21 KB of them) asks for a recipe it may not load:
/// the refusal is the daemon's typed one (RECIPE_UNAVAILABLE, exit status 70 through the CLI as
/// for any recipe refused), naming a few patterns and counting the rest, not an HTTP/2 protocol
/// error from a message too long for gRPC's headers. A recipe name of 20,000 characters, which
/// the refusal repeats, is refused as briefly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_recipe_list_gives_a_short_typed_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let token = "patterns-token-0123456789";
    let patterns: Vec<String> = (0..1_000).map(|i| format!("team-{i:04}-recipes-*")).collect();
    assert!(patterns.iter().map(|p| p.len() + 3).sum::<usize>() > 21_000);
    let file = tenants_with_patterns(dir.path(), token, &patterns);
    let daemon = Daemon::start_with(
        &plugins(),
        &root().join("target/component-cache"),
        &["--tenants", file.to_str().unwrap()],
    )
    .await;

    // The CLI: one short line, the refusal's own words, the status of a refused recipe.
    let (code, stdout, stderr) =
        wazoo_tests::daemon::output(wazoo_tests::daemon::cli().env_remove("WAZOO_TOKEN").args([
            "--server",
            &daemon.grpc,
            "--token",
            token,
            "config",
            "get",
            "/x",
        ]))
        .await;
    assert_eq!((code, stdout.as_str()), (70, ""), "{stderr}");
    assert!(!stderr.contains("protocol error"), "{stderr}");
    assert!(stderr.contains("\"config\" is not one this tenant may load"), "{stderr}");
    assert!(stderr.contains("team-0000-recipes-*") && stderr.contains("and 995 more"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.len() < 600, "a short message: {} bytes", stderr.len());

    // Over gRPC: typed, and bounded even when the client's own text is long.
    let channel = daemon.channel().await;
    let (_, mut recipes, _) = as_tenant(&channel, Some(token));
    let refusals = [
        ("config".to_string(), "is not one this tenant may load"),
        // A name longer than any file name is refused before it is matched.
        ("x".repeat(20_000), "a recipe's name is at most 255 bytes"),
    ];
    for (recipe, says) in refusals {
        let request = wazoo_proto::PathRequest { path: "/x".into(), recipe: recipe.clone() };
        let refused = recipes.config_get(request).await.expect_err("a recipe the tenant may not load");
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{:.200}", refused.message());
        assert_eq!(wazoo_proto::ErrorKind::of(&refused), Some(wazoo_proto::ErrorKind::RecipeUnavailable));
        assert!(refused.message().contains(says), "{:.200}", refused.message());
        assert!(refused.message().len() < 400, "{} bytes", refused.message().len());
    }
}

/// A hundred thousand recipe patterns are compiled once: the daemon starts within seconds and
/// stays small (it took 20 s and 1.1 GB when each pattern was a matcher of its own), and a
/// refusal is as quick and as short, while the recipe the list's last glob allows serves. The
/// bounds are generous; what they catch is the cost growing with the list again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_patterns_start_quickly_in_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    let token = "many-patterns-token-0123456789";
    // Literal names, prefixes, suffixes and patterns with `?` and classes, as lists are written;
    // the last allows `config`.
    let mut patterns: Vec<String> = (0..100_000)
        .map(|i| match i % 4 {
            0 => format!("team-{i}-lock"),
            1 => format!("team-{i}-*"),
            2 => format!("*-team-{i}"),
            _ => format!("team-{i}-[ab]?"),
        })
        .collect();
    patterns.push("c[o]nfig".into());
    let file = tenants_with_patterns(dir.path(), token, &patterns);
    // The shared ZooKeeper is up before the clock starts.
    zk();
    let started = std::time::Instant::now();
    let daemon = Daemon::start_with(
        &plugins(),
        &root().join("target/component-cache"),
        &["--tenants", file.to_str().unwrap()],
    )
    .await;
    let start = started.elapsed();
    let channel = daemon.channel().await;
    let (_, mut recipes, _) = as_tenant(&channel, Some(token));
    let asked = std::time::Instant::now();
    let request = wazoo_proto::PathRequest { path: "/x".into(), recipe: "lock".into() };
    let refused = recipes.config_get(request).await.expect_err("a recipe the tenant may not load");
    let refusal = asked.elapsed();
    // What it cost first (a refusal too long for the headers must not hide that), then what it said.
    let rss_mib = resident_kib(daemon.pid()) / 1024;
    println!("100,000 patterns: started in {start:?}, refused in {refusal:?}, {rss_mib} MiB resident");
    assert!(start < Duration::from_secs(10), "started in {start:?}");
    assert!(refusal < Duration::from_secs(1), "refused in {refusal:?}");
    assert!(rss_mib < 300, "{rss_mib} MiB resident");
    assert_eq!(wazoo_proto::ErrorKind::of(&refused), Some(wazoo_proto::ErrorKind::RecipeUnavailable));
    assert!(refused.message().contains("\"lock\" is not one this tenant may load"), "{}", refused.message());
    assert!(refused.message().contains("and 99996 more"), "{}", refused.message());
    let request = wazoo_proto::PathRequest { path: "/x".into(), recipe: "config".into() };
    match recipes.config_get(request).await {
        Ok(_) => {}
        Err(e) => assert_ne!(
            wazoo_proto::ErrorKind::of(&e),
            Some(wazoo_proto::ErrorKind::RecipeUnavailable),
            "{e:?}"
        ),
    }
}

/// A token is 1 or more visible ASCII characters (0x21–0x7E), for every client and the tenants
/// file alike: a tenant's token with a space stops the daemon from starting, with one line
/// naming the tenant (not the token); the CLI refuses one before it connects (exit status 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_a_space_is_refused_by_the_tenants_file_and_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tenants.json");
    let tenants = serde_json::json!({"tenants": [
        {"name": "spaced", "token": "a token with spaces in it", "zookeeper_secret": "spaced-zk",
         "root": format!("/tenants/spaced-{}", std::process::id())}
    ]});
    std::fs::write(&file, tenants.to_string()).unwrap();
    let (code, stdout, stderr) = serve_tenants(&file).await;
    assert_ne!(code, 0, "the daemon must not start: {stdout}");
    assert!(!stdout.contains("serving"), "{stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("tenant \"spaced\": the token must be visible ASCII characters (0x21–0x7E)"),
        "{stderr}"
    );
    assert!(!stderr.contains("with spaces"), "the token is not repeated: {stderr}");

    // As --token or as WAZOO_TOKEN; an empty --token is no token either.
    let cases = [
        ("--token", "a token with spaces"),
        ("--token", "tab\tbetween"),
        ("--token", "non-ascii-é"),
        ("--token", ""),
        ("WAZOO_TOKEN", "a token with spaces"),
    ];
    for (how, token) in cases {
        let mut command = wazoo_tests::daemon::cli();
        command.env_remove("WAZOO_TOKEN").args(["--server", "127.0.0.1:1"]);
        match how {
            "--token" => command.args(["--token", token]),
            _ => command.env("WAZOO_TOKEN", token),
        };
        let (code, stdout, stderr) = wazoo_tests::daemon::output(command.args(["config", "get", "/x"])).await;
        assert_eq!((code, stdout.as_str()), (2, ""), "{how} {token:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("visible ASCII characters (0x21–0x7E), no spaces"), "{stderr}");
        assert!(token.is_empty() || !stderr.contains(token), "the token is not repeated: {stderr}");
    }
}
