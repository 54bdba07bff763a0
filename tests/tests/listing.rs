//! Listings: every claim under a prefix (`wazoo claims`, `Admin.ListClaims`, read from ZooKeeper
//! by `wazoo_runtime::holders::under`), holders first and waiters in queue order, for wazoo's,
//! Curator's and kazoo's claims alike, the same on this process's own session and through a
//! daemon; a daemon's client sessions (`wazoo sessions`, `Admin.ListSessions`) with their names,
//! peers and claims; both scoped to the caller's tenant; the Rust and Python clients' calls; and
//! the one-line refusals (a malformed prefix, too many nodes, `sessions` without a daemon).

use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use wazoo_client::{Ask, Client};
use wazoo_proto as pb;
use wazoo_runtime::holders::{self, State};
use wazoo_runtime::zk::Zk;
use wazoo_runtime::{Mode, ZkError};
use wazoo_tests::daemon::{output, Daemon};
use wazoo_tests::*;
use zookeeper_client::{Acls, CreateMode};

const LIMIT: Duration = Duration::from_secs(60);

fn cache() -> std::path::PathBuf {
    root().join("target/component-cache")
}

/// `wazoo … claims PREFIX --json`'s document, each contender's age left out (it differs from one
/// look to the next).
async fn claims_json(command: &mut Command, prefix: &str) -> Value {
    let (code, stdout, stderr) = output(command.args(["claims", prefix, "--json"])).await;
    assert_eq!(code, 0, "claims {prefix}: {stdout}\n{stderr}");
    let mut doc: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(stdout.trim().lines().count(), 1, "one JSON document: {stdout}");
    for claim in doc["claims"].as_array_mut().unwrap() {
        for c in claim["contenders"].as_array_mut().unwrap() {
            assert!(c["age_ms"].as_i64().unwrap() >= 0, "{c}");
            assert!(c["since_ms"].as_i64().unwrap() > 1_600_000_000_000, "a ctime: {c}");
            c.as_object_mut().unwrap().remove("age_ms");
        }
    }
    doc
}

/// `(path, kind, [(state, mode, node)])` of every claim of a `claims --json` document.
fn summary(doc: &Value) -> Vec<(String, String, Vec<(String, Value, String)>)> {
    doc["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let contenders = c["contenders"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    (
                        x["state"].as_str().unwrap().to_string(),
                        x["mode"].clone(),
                        x["node"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            (c["path"].as_str().unwrap().to_string(), c["kind"].as_str().unwrap().to_string(), contenders)
        })
        .collect()
}

fn holds(node: &str) -> (String, Value, String) {
    ("holds".into(), Value::Null, node.into())
}

fn waits(node: &str) -> (String, Value, String) {
    ("waits".into(), Value::Null, node.into())
}

/// The one node of `dir` that is not `held`.
async fn other_child(checker: &zookeeper_client::Client, dir: &str, held: &str) -> String {
    let names = wait_children(checker, dir, 2).await;
    let nodes: Vec<String> = names.iter().map(|n| format!("{dir}/{n}")).filter(|n| n != held).collect();
    assert_eq!(nodes.len(), 1, "{names:?} besides {held}");
    nodes[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_under_a_prefix_show_holders_then_waiters_locally_and_through_a_daemon() {
    let checker = client(&zk().address()).await;
    let base = unique("listing");
    let (one, two) = (host().await, host().await);

    // A lock: one holds, the other waits.
    let lock_path = format!("{base}/app/lock");
    let mut a = one.lock("lock").await.unwrap();
    let held_a = a.acquire(&lock_path, None).await.unwrap();
    let mut b = two.lock("lock").await.unwrap();
    let p = lock_path.clone();
    let lock_waiter = tokio::spawn(async move {
        let held = b.acquire(&p, None).await.unwrap();
        (b, held)
    });
    let lock_waiting = other_child(&checker, &lock_path, &held_a.node).await;
    // A read/write lock: a reader holds, a writer waits.
    let rw_path = format!("{base}/app/rw");
    let mut r = one.rwlock("rwlock").await.unwrap();
    let held_r = r.acquire(&rw_path, Mode::Read, None).await.unwrap();
    let mut w = two.rwlock("rwlock").await.unwrap();
    let p = rw_path.clone();
    let rw_waiter = tokio::spawn(async move {
        let held = w.acquire(&p, Mode::Write, None).await.unwrap();
        (w, held)
    });
    let rw_waiting = other_child(&checker, &rw_path, &held_r.node).await;
    // A semaphore of two leases, one taken; and a plain node beside, which is no claim.
    let sem_path = format!("{base}/sem");
    let mut s = one.semaphore("semaphore").await.unwrap();
    let lease = s.acquire(&sem_path, 2, None).await.unwrap();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    checker.create(&format!("{base}/config"), b"x", &persistent).await.unwrap();

    let expected = vec![
        (lock_path.clone(), "lock".to_string(), vec![holds(&held_a.node), waits(&lock_waiting)]),
        (
            rw_path.clone(),
            "rwlock".to_string(),
            vec![
                ("holds".into(), Value::from("read"), held_r.node.clone()),
                ("waits".into(), Value::from("write"), rw_waiting.clone()),
            ],
        ),
        (sem_path.clone(), "semaphore".to_string(), vec![holds(&lease.node)]),
    ];
    let local = claims_json(&mut wazoo_tests::daemon::cli(), &base).await;
    assert_eq!(local["prefix"], base.as_str());
    assert_eq!(summary(&local), expected, "{local:#}");
    let tokens: Vec<i64> = local["claims"][0]["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["token"].as_i64().unwrap())
        .collect();
    assert_eq!(tokens[0], held_a.token);

    // A narrower prefix: only what is under it.
    let narrow = claims_json(&mut wazoo_tests::daemon::cli(), &format!("{base}/app/rw")).await;
    assert_eq!(summary(&narrow), expected[1..2].to_vec());

    // The table: a row per contender, holders first, a read/write lock's side shown.
    let (code, table, _) = output(wazoo_tests::daemon::cli().args(["claims", &base])).await;
    assert_eq!(code, 0);
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["PATH", "KIND", "STATE", "TOKEN", "SINCE", "IDENTITY"], "{table}");
    assert_eq!(rows.len(), 6, "{table}");
    assert_eq!(rows[1][..3], [lock_path.as_str(), "lock", "holds"], "{table}");
    assert_eq!(rows[2][..3], [lock_path.as_str(), "lock", "waits"], "{table}");
    assert_eq!(rows[3][..3], [rw_path.as_str(), "rwlock", "holds(r)"], "{table}");
    assert_eq!(rows[4][..3], [rw_path.as_str(), "rwlock", "waits(w)"], "{table}");
    // The token and the age, then the identity, whole (it may have spaces in it).
    assert_eq!(rows[1][3], held_a.token.to_string(), "{table}");
    assert!(rows[1][4].ends_with('s'), "an age: {table}");
    // (These hosts have no identity: `-`.)
    let identity = local["claims"][0]["contenders"][0]["identity"].as_str().unwrap();
    let shown = if identity.is_empty() { "-" } else { identity };
    assert!(table.lines().nth(1).unwrap().ends_with(&format!("  {shown}")), "{identity:?}: {table}");

    // Through a daemon: the same claims.
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let remote = claims_json(&mut daemon.wazoo(), &base).await;
    assert_eq!(remote, local, "through the daemon as on this process's own session");

    // The waiters hold once the holders let go, and the listing follows.
    a.release().await.unwrap();
    r.release().await.unwrap();
    let (mut b, held_b) = within(LIMIT, "the lock's waiter acquires", lock_waiter).await.unwrap();
    let (mut w, held_w) = within(LIMIT, "the writer acquires", rw_waiter).await.unwrap();
    assert_eq!((held_b.node.as_str(), held_w.node.as_str()), (lock_waiting.as_str(), rw_waiting.as_str()));
    let after = claims_json(&mut daemon.wazoo(), &format!("{base}/app")).await;
    assert_eq!(
        summary(&after),
        vec![
            (lock_path.clone(), "lock".to_string(), vec![holds(&lock_waiting)]),
            (
                rw_path.clone(),
                "rwlock".to_string(),
                vec![("holds".into(), Value::from("write"), rw_waiting.clone())]
            ),
        ]
    );
    b.release().await.unwrap();
    w.release().await.unwrap();
    s.release().await.unwrap();

    // Nothing under a prefix: exit status 1, said on stderr; the JSON document is still printed.
    let (code, stdout, stderr) =
        output(wazoo_tests::daemon::cli().args(["claims", &format!("{base}/app")])).await;
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert_eq!(stderr.trim(), format!("wazoo: no claims under {base}/app"));
    let (code, stdout, _) =
        output(daemon.wazoo().args(["claims", &format!("{base}/nothing-here"), "--json"])).await;
    assert_eq!(code, 1);
    assert_eq!(serde_json::from_str::<Value>(stdout.trim()).unwrap()["claims"], serde_json::json!([]));
    for handle in [a, b] {
        handle.close().await;
    }
    for handle in [r, w] {
        handle.close().await;
    }
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_and_kazoo_locks_show_with_their_holders_identities() {
    let address = zk().address();
    let checker = client(&address).await;
    let base = unique("listing-peers");

    // Curator: one holds, another waits.
    let curator_path = format!("{base}/curator");
    let mut first = Curator::start(&address, &curator_path, "mutex").await;
    let mut second = Curator::start(&address, &curator_path, "mutex").await;
    first.send("acquire -1").await;
    let curator_holder = first.line().await.strip_prefix("acquired ").expect("Curator acquired").to_string();
    second.send("acquire -1").await;
    let curator_waiter = other_child(&checker, &curator_path, &curator_holder).await;

    // kazoo's own Lock (`__lock__` nodes): one holds, another waits.
    let kazoo_path = format!("{base}/kazoo");
    let mut k1 = Kazoo::run("tests/python/kazoo_lock_peer.py", &[&address, &kazoo_path, "lock"]).await;
    let mut k2 = Kazoo::run("tests/python/kazoo_lock_peer.py", &[&address, &kazoo_path, "lock"]).await;
    let kazoo_holder =
        k1.ask("acquire 30").await.strip_prefix("acquired ").expect("kazoo acquired").to_string();
    k2.send("acquire -1").await;
    let kazoo_waiter = other_child(&checker, &kazoo_path, &kazoo_holder).await;

    let daemon = Daemon::start(&plugins(), &cache()).await;
    let local = claims_json(&mut wazoo_tests::daemon::cli(), &base).await;
    assert_eq!(
        summary(&local),
        vec![
            (curator_path.clone(), "lock".to_string(), vec![holds(&curator_holder), waits(&curator_waiter)]),
            (kazoo_path.clone(), "lock".to_string(), vec![holds(&kazoo_holder), waits(&kazoo_waiter)]),
        ],
        "{local:#}"
    );
    // kazoo stores the identifier its caller chose; Curator, the client's address.
    for c in local["claims"][1]["contenders"].as_array().unwrap() {
        assert_eq!(c["identity"], "kazoo peer", "{c}");
    }
    for c in local["claims"][0]["contenders"].as_array().unwrap() {
        assert!(!c["identity"].as_str().unwrap().is_empty(), "Curator's node data: {c}");
    }
    assert_eq!(claims_json(&mut daemon.wazoo(), &base).await, local, "the same through the daemon");

    // kazoo's next holder shows once the first lets go.
    assert_eq!(k1.ask("release").await, "released");
    assert_eq!(k2.line().await, format!("acquired {kazoo_waiter}"));
    let now = claims_json(&mut daemon.wazoo(), &kazoo_path).await;
    assert_eq!(summary(&now), vec![(kazoo_path.clone(), "lock".to_string(), vec![holds(&kazoo_waiter)])]);

    assert_eq!(k2.ask("release").await, "released");
    first.send("release").await;
    assert_eq!(first.line().await, "released");
    assert_eq!(second.line().await, format!("acquired {curator_waiter}"));
    second.send("release").await;
    assert_eq!(second.line().await, "released");
    for mut peer in [first, second] {
        peer.send("quit").await;
    }
    for mut peer in [k1, k2] {
        peer.send("quit").await;
    }
}

/// Holds the lock at `path` through `client` in a client session named `name`.
async fn hold(client: &Client, name: &str, path: &str) -> wazoo_client::Claim {
    let session = client.session(Duration::from_secs(10), name.to_string()).await.unwrap();
    let mut contender = session.contender(Ask::Acquire { family: pb::Family::Lock, leases: 0 }, "");
    contender.acquire(path, Some(LIMIT)).await.unwrap();
    contender.hold().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenant_lists_its_own_sessions_and_claims_and_never_anothers() {
    let pid = std::process::id();
    let dir = tempfile::tempdir().unwrap();
    let (alice_root, bob_root) = (format!("/tenants/l-alice-{pid}"), format!("/tenants/l-bob-{pid}"));
    let (alice_token, bob_token) = ("alice-listing-token-0123456789", "bob-listing-token-0123456789");
    let file = dir.path().join("tenants.json");
    let tenants = serde_json::json!({"tenants": [
        {"name": "alice", "token": alice_token, "zookeeper_secret": "alice-zk", "root": alice_root},
        {"name": "bob", "token": bob_token, "zookeeper_secret": "bob-zk", "root": bob_root},
    ]});
    std::fs::write(&file, tenants.to_string()).unwrap();
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--tenants", file.to_str().unwrap()]).await;
    let alice = Client::connect(&daemon.grpc, Some(alice_token), LIMIT).await.unwrap();
    let bob = Client::connect(&daemon.grpc, Some(bob_token), LIMIT).await.unwrap();

    // The same path in each namespace, and one more of bob's.
    let alice_claim = hold(&alice, "alice worker", "/locks/report").await;
    let bob_claim = hold(&bob, "bob worker", "/locks/report").await;
    let bob_other = hold(&bob, "bob batch", "/batch/nightly").await;

    let listed = alice.list_claims("/").await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!((listed[0].path.as_str(), listed[0].kind()), ("/locks/report", pb::HoldersKind::Lock));
    let nodes: Vec<&str> = listed[0].contenders.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(nodes, [alice_claim.node()], "alice's own node, named in her namespace");
    assert!(listed[0].contenders[0].holds && listed[0].contenders[0].since_ms > 0);
    let listed = bob.list_claims("/").await.unwrap();
    let paths: Vec<&str> = listed.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["/batch/nightly", "/locks/report"]);
    assert_eq!(listed[1].contenders[0].node, bob_claim.node());
    assert_eq!(listed[0].contenders[0].node, bob_other.node());

    // Sessions: each tenant's own, with name, peer and claims.
    let sessions = alice.list_sessions().await.unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let s = &sessions[0];
    assert_eq!(s.name, "alice worker");
    assert!(s.peer.starts_with("127.0.0.1:"), "the client's address: {s:?}");
    assert!(s.opened_ms > 1_600_000_000_000, "{s:?}");
    assert_eq!(s.claims.len(), 1, "{s:?}");
    let c = &s.claims[0];
    assert_eq!((c.path.as_str(), c.family.as_str(), c.holds), ("/locks/report", "lock", true));
    assert_eq!((c.node.as_str(), c.fencing_token), (alice_claim.node(), alice_claim.token()));
    assert!(c.since_ms >= s.opened_ms, "{s:?}");
    let mut names: Vec<String> = bob.list_sessions().await.unwrap().into_iter().map(|s| s.name).collect();
    names.sort();
    assert_eq!(names, ["bob batch", "bob worker"]);

    // The CLI, with a tenant's token: the same views.
    let as_alice = |args: &[&str]| {
        let mut command = daemon.wazoo();
        command.args(["--token", alice_token]).args(args);
        command
    };
    let (code, stdout, stderr) = output(&mut as_alice(&["sessions", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap();
    let shown = doc["sessions"].as_array().unwrap();
    assert_eq!(shown.len(), 1, "{doc:#}");
    assert_eq!(shown[0]["name"], "alice worker");
    assert_eq!(shown[0]["claims"][0]["path"], "/locks/report");
    assert_eq!(shown[0]["claims"][0]["state"], "holds");
    let (code, table, _) = output(&mut as_alice(&["sessions"])).await;
    assert_eq!(code, 0);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "a header and alice's one session: {table}");
    assert!(lines[0].starts_with("SESSION") && lines[0].contains("PEER"), "{table}");
    assert!(lines[1].contains("alice worker") && lines[1].contains("127.0.0.1:"), "{table}");
    assert!(lines[1].contains("holds lock /locks/report"), "{table}");
    let claims = claims_json(&mut as_alice(&[]), "/").await;
    assert_eq!(claims["claims"].as_array().unwrap().len(), 1, "{claims:#}");

    // Without a daemon, sessions are bad usage: one line, exit status 2.
    let (code, stdout, stderr) = output(wazoo_tests::daemon::cli().args(["sessions"])).await;
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--server"), "{stderr}");

    alice_claim.release().await.unwrap();
    assert!(alice.list_claims("/").await.unwrap().is_empty());
    bob_claim.release().await.unwrap();
    bob_other.release().await.unwrap();
}

/// A listing's walk is spent from its tenant's operations per second, as a guest's calls are: a
/// tree wider than what a second allows is refused in one line (RESOURCE_EXHAUSTED,
/// `limit-exceeded`), a narrower prefix is answered, and the tenant's budget is what it is for
/// its other calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_listing_is_spent_from_its_tenants_operations_per_second() {
    let pid = std::process::id();
    let dir = tempfile::tempdir().unwrap();
    let root = format!("/tenants/l-carol-{pid}");
    let token = "carol-listing-token-0123456789";
    let file = dir.path().join("tenants.json");
    let tenants = serde_json::json!({"tenants": [
        {"name": "carol", "token": token, "zookeeper_secret": "carol-zk", "root": root,
         "limits": {"ops_per_sec": 20}},
    ]});
    std::fs::write(&file, tenants.to_string()).unwrap();
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--tenants", file.to_str().unwrap()]).await;
    // 30 nodes in carol's namespace, made from outside the daemon with her ZooKeeper identity.
    let checker = zookeeper_client::Client::connector()
        .with_auth("digest", b"carol:carol-zk")
        .connect(&zk().address())
        .await
        .unwrap();
    let persistent = CreateMode::Persistent.with_acls(Acls::creator_all());
    checker.mkdir(&format!("{root}/wide"), &persistent).await.unwrap();
    for i in 0..30 {
        checker.create(&format!("{root}/wide/n{i}"), b"", &persistent).await.unwrap();
    }
    let carol = Client::connect(&daemon.grpc, Some(token), LIMIT).await.unwrap();
    // The root, then `wide`, then its 30 children at once: more than 20 a second.
    let refused = carol.list_claims("/").await.unwrap_err();
    assert_eq!(refused.code, tonic::Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message.contains("20 operations per second"), "{refused:?}");
    assert!(!refused.message.contains('\n'), "{refused:?}");
    let (code, _, stderr) = output(daemon.wazoo().args(["--token", token, "claims", "/"])).await;
    assert_eq!(code, 70, "limit-exceeded is exit status 70: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    // A narrower prefix costs two requests, and is answered.
    assert!(carol.list_claims("/wide/n7").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_prefix_and_too_many_nodes_are_refused_in_one_line() {
    let daemon = Daemon::start(&plugins(), &cache()).await;
    for prefix in ["no-slash", "/trailing/", "/a//b"] {
        for (how, mut command) in [("local", wazoo_tests::daemon::cli()), ("daemon", daemon.wazoo())] {
            let (code, stdout, stderr) = output(command.args(["claims", prefix])).await;
            assert_eq!((code, stdout.as_str()), (2, ""), "{how} {prefix}: {stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "{how} {prefix}: {stderr}");
            assert!(stderr.contains("invalid prefix"), "{how} {prefix}: {stderr}");
        }
    }
    // The daemon refuses it too, to a client that did not check.
    let client = Client::connect(&daemon.grpc, None, LIMIT).await.unwrap();
    let refused = client.list_claims("no-slash").await.unwrap_err();
    assert_eq!(refused.code, tonic::Code::InvalidArgument, "{refused:?}");
    assert!(!refused.message.contains('\n'), "{refused:?}");

    // The walk stops past its bound, and says to narrow the prefix.
    let checker = client_of_zk().await;
    let base = unique("listing-bound");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    checker.mkdir(&format!("{base}/wide"), &persistent).await.unwrap();
    let names: Vec<String> = (0..30).map(|i| format!("{base}/wide/n{i}")).collect();
    let made: Vec<_> = names.iter().map(|name| checker.create(name, b"", &persistent)).collect();
    for create in made {
        create.await.unwrap();
    }
    let zk = Zk::from_client(checker.clone());
    match holders::under(&zk, &base, 20, &|_| Ok(())).await {
        Err(ZkError::LimitExceeded(why)) => {
            assert!(why.contains("more than 20 nodes") && why.contains("narrower prefix"), "{why}");
            assert!(!why.contains('\n'));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        holders::under(&zk, &base, 40, &|_| Ok(())).await.unwrap().is_empty(),
        "no claims among 31 nodes"
    );
    // A node named like a semaphore's directory that holds a lock is that lock, not a semaphore.
    let host = host().await;
    let mut lock = host.lock("lock").await.unwrap();
    let held = lock.acquire(&format!("{base}/app/leases"), None).await.unwrap();
    let found = holders::under(&zk, &base, 100, &|_| Ok(())).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].0.as_str(), found[0].1.kind.name), (format!("{base}/app/leases").as_str(), "lock"));
    assert_eq!(found[0].1.contenders[0].node, held.node);
    assert_eq!(found[0].1.contenders[0].state, State::Holds);
    lock.close().await;
}

async fn client_of_zk() -> zookeeper_client::Client {
    client(&zk().address()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_client_lists_claims_and_sessions() {
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let installed = wazoo_tests::python::install().await;
    let base = unique("listing-python");
    let mut command = Command::new("python3");
    command
        .arg(wazoo_tests::python::package().join("tests/listing.py"))
        .args([&daemon.grpc, &base])
        .env("PYTHONPATH", installed.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true);
    let (code, stdout, stderr) = output(&mut command).await;
    assert_eq!(code, 0, "listing.py failed:\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let words = |key: &str| -> Vec<&str> {
        let found: Vec<&&str> = lines.iter().filter(|l| l.split(' ').next() == Some(key)).collect();
        assert_eq!(found.len(), 1, "one {key} line: {stdout}");
        found[0].split(' ').skip(1).collect()
    };
    let held = words("held")[0];
    let claim = words("claim");
    assert_eq!(claim[..3], [format!("{base}/lock").as_str(), "lock", &format!("holds:{held}")], "{stdout}");
    assert!(claim.len() == 4 && claim[3].starts_with(&format!("waits:{base}/lock/")), "{stdout}");
    assert_eq!(words("aged"), ["True"]);
    let sessions: Vec<&&str> = lines.iter().filter(|l| l.starts_with("session ")).collect();
    assert_eq!(sessions.len(), 2, "{stdout}");
    assert_eq!(*sessions[0], format!("session listing-a True True lock:{base}/lock:True"), "{stdout}");
    assert_eq!(
        *sessions[1],
        format!("session listing-b True True lock:{base}/lock:False"),
        "a waiting claim shows as waiting: {stdout}"
    );
    assert_eq!(words("bad-prefix"), ["INVALID_PATH", "False"]);
    let aio_held = words("aio-held")[0];
    assert_eq!(words("aio-claim"), [format!("{base}/aio").as_str(), "lock", &format!("holds:{aio_held}")]);
    assert_eq!(words("aio-sessions"), ["listing-a", "listing-aio", "listing-b"]);
    assert_eq!(lines.last(), Some(&"done"));
}

/// A client session taken up by another member of a daemon group shows there with its client's
/// address, told by its `Reattach`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_taken_up_by_another_member_shows_its_clients_address_there() {
    let (a, b) = wazoo_tests::daemon::group("listing").await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let rust = Client::connect(&servers, None, LIMIT).await.unwrap();
    let path = unique("listing-moved");
    let held = hold(&rust, "mover", &path).await;
    let on_a = rust.list_sessions().await.unwrap();
    let mover: Vec<_> = on_a.iter().filter(|s| s.name == "mover").collect();
    assert_eq!(mover.len(), 1, "{on_a:?}");
    assert!(mover[0].peer.starts_with("127.0.0.1:"), "{on_a:?}");

    wazoo_tests::daemon::signal(a.pid(), "-KILL");
    let moved = within(LIMIT, "the session is taken up", held.session().taken_up_after(0)).await;
    let on_b = moved.expect("taken up, not ended");
    assert_eq!(on_b.addr(), b.grpc);
    let listed = on_b.list_sessions().await.unwrap();
    let mover: Vec<_> = listed.iter().filter(|s| s.name == "mover").collect();
    assert_eq!(mover.len(), 1, "{listed:?}");
    assert!(mover[0].peer.starts_with("127.0.0.1:"), "the address its Reattach came from: {listed:?}");
    held.release().await.unwrap();
}
