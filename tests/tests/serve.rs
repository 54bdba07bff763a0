//! `wazoo serve`, the real daemon process, on a real ZooKeeper: recipes over gRPC, hot swap
//! under load, refused files, client sessions that die, the compile cache across restarts,
//! metrics, and the Python example client.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tonic::transport::Channel;
use wazoo_proto::{
    admin_client::AdminClient, recipes_client::RecipesClient, sessions_client::SessionsClient,
    AcquireRequest, Empty, Family, GroupJoinRequest, HandleRef, InvokeRequest, KeepAliveRequest, OpenRequest,
    PathRequest, QueueClaimRequest, QueuePutRequest, WaitRequest,
};
use wazoo_tests::components::{deploy, relabelled, traps_at_start};
use wazoo_tests::daemon::Daemon;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

fn private_plugins(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("wazoo-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    for recipe in ["lock", "election", "config"] {
        std::fs::copy(plugins().join(format!("{recipe}.wasm")), dir.join(format!("plugins/{recipe}.wasm")))
            .unwrap();
    }
    (dir.join("plugins"), dir.join("cache"))
}

/// A client session kept alive over a KeepAlive stream for as long as the returned sender lives.
async fn session(channel: &Channel, ttl_ms: u64) -> (u64, tokio::sync::mpsc::Sender<KeepAliveRequest>) {
    let mut sessions = SessionsClient::new(channel.clone());
    let id = sessions.open(OpenRequest { ttl_ms, name: "test".into() }).await.unwrap().into_inner().session;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut replies =
        sessions.keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    let keeper = tx.clone();
    tokio::spawn(async move {
        loop {
            if keeper.send(KeepAliveRequest { session: id, end: false }).await.is_err() {
                break;
            }
            match tokio::time::timeout(Duration::from_millis(ttl_ms / 3), replies.message()).await {
                Ok(Ok(Some(_))) | Err(_) => {}
                _ => break,
            }
            tokio::time::sleep(Duration::from_millis(ttl_ms / 3)).await;
        }
    });
    (id, tx)
}

fn acquire(session: u64, path: &str) -> AcquireRequest {
    AcquireRequest {
        session,
        path: path.into(),
        family: Family::Lock as i32,
        timeout_ms: Some(60_000),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hot_swap_under_load_through_the_daemon() {
    let (plugins, cache) = private_plugins("swap");
    let daemon = Daemon::start(&plugins, &cache).await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let path = unique("serve-swap");

    // A lock held across the swap.
    let (held_session, _keep) = session(&channel, 5000).await;
    let across = unique("serve-held");
    let mut recipes = RecipesClient::new(channel.clone());
    let held = recipes.acquire(acquire(held_session, &across)).await.unwrap().into_inner();
    let v1 = held.recipe_version.clone();

    let tag_of = |node: String| {
        let checker = checker.clone();
        async move { checker.get_data(&node).await.unwrap().0 }
    };
    // The node names its holder: the client session (no holder id given) and its address.
    let holder = tag_of(held.node.clone()).await;
    let holder = String::from_utf8(holder).unwrap();
    assert!(holder.contains("(session ") && holder.contains(" from 127.0.0.1:"), "{holder}");
    let busy = Arc::new(AtomicBool::new(false));
    let last_token = Arc::new(AtomicI64::new(0));
    let (turns, failures) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let swapped_at: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let mut clients = Vec::new();
    for _ in 0..16 {
        let channel = daemon.channel().await;
        let (path, busy, last_token) = (path.clone(), busy.clone(), last_token.clone());
        let (turns, failures, swapped_at, v1) =
            (turns.clone(), failures.clone(), swapped_at.clone(), v1.clone());
        let checker = checker.clone();
        clients.push(tokio::spawn(async move {
            let (id, _keep) = session(&channel, 5000).await;
            let mut recipes = RecipesClient::new(channel);
            let mut late_v1 = 0;
            let mut saw_v2 = false;
            for _ in 0..25 {
                let asked = Instant::now();
                match recipes.acquire(acquire(id, &path)).await {
                    Ok(claim) => {
                        let claim = claim.into_inner();
                        assert!(!busy.swap(true, Ordering::SeqCst), "two holders at once");
                        let previous = last_token.swap(claim.fencing_token, Ordering::SeqCst);
                        assert!(claim.fencing_token > previous, "token fell");
                        // The node is there, held by this client's session.
                        let (_, stat) = checker.get_data(&claim.node).await.unwrap();
                        assert_eq!(stat.czxid, claim.fencing_token, "the node is the claim's");
                        busy.store(false, Ordering::SeqCst);
                        let swap = *swapped_at.lock().unwrap();
                        if claim.recipe_version != v1 {
                            saw_v2 = true;
                        } else if swap.is_some_and(|t| asked > t + Duration::from_secs(1)) {
                            late_v1 += 1;
                        }
                        if recipes.release(HandleRef { session: id, handle: claim.handle }).await.is_err() {
                            failures.fetch_add(1, Ordering::SeqCst);
                        }
                        turns.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        eprintln!("acquire failed: {e}");
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            (late_v1, saw_v2)
        }));
    }
    within(LIMIT, "a quarter of the turns", async {
        while turns.load(Ordering::SeqCst) < 100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    // v2 is the same recipe in another file (another digest).
    let v2 = relabelled(&std::fs::read(plugins.join("lock.wasm")).unwrap(), "v2");
    deploy(&plugins.join("lock.wasm"), &v2);
    *swapped_at.lock().unwrap() = Some(Instant::now());
    let (mut late, mut saw) = (0, 0);
    within(LIMIT, "every client finishes", async {
        for c in clients {
            let (l, s) = c.await.unwrap();
            late += l;
            saw += s as u32;
        }
    })
    .await;
    assert_eq!(failures.load(Ordering::SeqCst), 0, "calls failed during the swap");
    assert_eq!(turns.load(Ordering::SeqCst), 16 * 25);
    assert_eq!(late, 0, "acquisitions asked for over 1 s after the swap ran the old version");
    assert!(saw > 0, "no acquisition ran the new version");

    // The lock held across the swap is still held and is released cleanly.
    assert_eq!(children(&checker, &across).await, vec![held.node.rsplit('/').next().unwrap().to_string()]);
    assert_eq!(
        String::from_utf8(tag_of(held.node.clone()).await).unwrap(),
        holder,
        "the lock held across the swap is untouched"
    );
    recipes.release(HandleRef { session: held_session, handle: held.handle }).await.unwrap();
    // Released without waiting for ZooKeeper's answer: the node goes a moment later.
    within(LIMIT, "the released node goes", wait_children(&checker, &across, 0)).await;
    assert!(children(&checker, &path).await.is_empty());
    let metrics = daemon.metrics().await;
    assert!(metrics.contains("wazoo_calls_total{tenant=\"\",method=\"Acquire\""), "{metrics}");
    assert!(metrics.contains("wazoo_recipe_swaps_total{tenant=\"\",recipe=\"lock\"} 1"), "{metrics}");
    // Released lock handles are kept warm for the next Acquire, at most 32 of them.
    let warm: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("wazoo_warm_handles{tenant=\"\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no warm handles gauge: {metrics}"));
    assert!((1..=32).contains(&warm), "{warm} warm handles");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broken_file_is_refused_and_the_old_version_serves() {
    let (plugins, cache) = private_plugins("broken");
    let daemon = Daemon::start(&plugins, &cache).await;
    let channel = daemon.channel().await;
    let (id, _keep) = session(&channel, 5000).await;
    let mut recipes = RecipesClient::new(channel.clone());
    let mut admin = AdminClient::new(channel.clone());
    let path = unique("serve-broken");
    let v1 = recipes.acquire(acquire(id, &path)).await.unwrap().into_inner();
    recipes.release(HandleRef { session: id, handle: v1.handle }).await.unwrap();

    let good = std::fs::read(plugins.join("lock.wasm")).unwrap();
    let mut major = good.clone();
    for i in 0..major.len().saturating_sub(6) {
        if &major[i..i + 6] == b"@0.1.2" {
            major[i..i + 6].copy_from_slice(b"@0.2.0");
        }
    }
    let broken: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not wasm", b"not a component".to_vec(), "not a valid wasm component"),
        ("another world", std::fs::read(plugins.join("election.wasm")).unwrap(), "election-recipe"),
        ("another major WIT version", major, "0.2.0"),
        ("a trap while it starts", traps_at_start(&good), "fails when instantiated"),
    ];
    for (what, bytes, reason) in broken {
        deploy(&plugins.join("lock.wasm"), &bytes);
        let listed = admin.reload(Empty {}).await.unwrap().into_inner();
        let lock = listed.recipes.iter().find(|r| r.name == "lock").unwrap();
        assert!(lock.refused.contains(reason), "{what}: {lock:?}");
        assert_eq!(lock.version, v1.recipe_version, "{what}: the version before keeps serving");
        let again = recipes.acquire(acquire(id, &path)).await.unwrap().into_inner();
        assert_eq!(again.recipe_version, v1.recipe_version, "{what}");
        recipes.release(HandleRef { session: id, handle: again.handle }).await.unwrap();
    }
    let health = admin.health(Empty {}).await.unwrap().into_inner();
    assert_eq!(health.status, "serving");
    assert!(health.refusals >= 4, "{health:?}");
    let metrics = daemon.metrics().await;
    // The series is there at zero from the start: the refusals moved it.
    let refusals = metrics
        .lines()
        .find_map(|l| l.strip_prefix("wazoo_recipe_refusals_total{tenant=\"\",recipe=\"lock\"} "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(refusals >= Some(1), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_stops_keeping_alive_loses_what_it_holds() {
    let (plugins, cache) = private_plugins("ttl");
    let daemon = Daemon::start(&plugins, &cache).await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let path = unique("serve-ttl");
    // A session kept alive by nobody: its TTL runs out.
    let mut sessions = SessionsClient::new(channel.clone());
    let id = sessions
        .open(OpenRequest { ttl_ms: 1000, name: "silent".into() })
        .await
        .unwrap()
        .into_inner()
        .session;
    let mut recipes = RecipesClient::new(channel.clone());
    let claim = recipes.acquire(acquire(id, &path)).await.unwrap().into_inner();
    let node = claim.node.clone();
    within(Duration::from_secs(3), "the node goes with the session's TTL", wait_gone(&checker, &node)).await;
    let late = recipes.release(HandleRef { session: id, handle: claim.handle }).await;
    assert_eq!(late.unwrap_err().code(), tonic::Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_daemon_compiles_nothing() {
    let (plugins, cache) = private_plugins("restart");
    let first = Daemon::start(&plugins, &cache).await;
    let health = AdminClient::new(first.channel().await).health(Empty {}).await.unwrap().into_inner();
    assert!(health.compiles >= 3, "a fresh cache: every component compiled ({health:?})");
    drop(first);
    let second = Daemon::start(&plugins, &cache).await;
    let health = AdminClient::new(second.channel().await).health(Empty {}).await.unwrap().into_inner();
    assert_eq!(health.compiles, 0, "the second start must take every component from the cache ({health:?})");
    assert!(health.cache_hits >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_client_takes_a_lock_and_a_sigkill_releases_it() {
    let (plugins, cache) = private_plugins("python");
    let daemon = Daemon::start(&plugins, &cache).await;
    let checker = client(&zk().address()).await;
    let stubs = python_stubs("python-stubs");
    let path = unique("serve-python");
    let mut python = Command::new("python3")
        .arg(root().join("tests/python/wazoo_lock.py"))
        .args([&daemon.grpc, &path, "--ttl-ms", "2000"])
        .env("WAZOO_PY_STUBS", &stubs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(python.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "the Python client holds the lock", lines.next_line()).await.unwrap().unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "held", "{line}");
    let token: i64 = words[1].parse().unwrap();
    let node = words[2].to_string();
    let stat = checker.check_stat(&node).await.unwrap().expect("the lock node exists");
    assert_eq!(stat.czxid, token, "the fencing token is the node's czxid");
    python.kill().await.unwrap();
    within(Duration::from_secs(2), "the lock goes within the client's TTL", wait_gone(&checker, &node)).await;
}

/// A daemon on every standard recipe (the shared plugins and compile cache).
async fn every_recipe() -> Daemon {
    Daemon::start(&plugins(), &root().join("target/component-cache")).await
}

/// A session that nobody keeps alive: it ends when its TTL passes.
async fn silent_session(channel: &Channel, ttl_ms: u64) -> u64 {
    let mut sessions = SessionsClient::new(channel.clone());
    sessions.open(OpenRequest { ttl_ms, name: "silent".into() }).await.unwrap().into_inner().session
}

fn names(m: &wazoo_proto::Membership) -> Vec<String> {
    m.members.iter().map(|m| m.name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_member_whose_session_ends_leaves_the_group() {
    let daemon = every_recipe().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let group = format!("{}/members", unique("serve-group"));
    let mut recipes = RecipesClient::new(channel.clone());
    let join = |session: u64, name: &str| GroupJoinRequest {
        session,
        path: group.clone(),
        name: name.into(),
        data: format!("data of {name}").into_bytes(),
        recipe: String::new(),
    };
    let (kept, _keep) = session(&channel, 5000).await;
    let silent = silent_session(&channel, 1000).await;
    let a = recipes.group_join(join(silent, "a")).await.unwrap().into_inner();
    assert_eq!(a.node, format!("{group}/a"));
    let b = recipes.group_join(join(kept, "b")).await.unwrap().into_inner();
    let taken = recipes.group_join(join(kept, "b")).await.unwrap_err();
    assert_eq!(taken.code(), tonic::Code::AlreadyExists, "{taken:?}");
    assert!(taken.message().starts_with("node-exists:"), "{taken:?}");
    let path = || PathRequest { path: group.clone(), recipe: String::new() };
    let now = recipes.group_members(path()).await.unwrap().into_inner();
    assert_eq!(names(&now), ["a", "b"]);
    assert_eq!(now.members[0].data, b"data of a");
    let mut watch = recipes.group_watch(path()).await.unwrap().into_inner();
    let first = within(LIMIT, "the members now", watch.message()).await.unwrap().unwrap();
    assert_eq!(names(&first), ["a", "b"]);
    // a's session is kept alive by nobody: a leaves with it.
    let after = within(Duration::from_secs(5), "a leaves with its session", watch.message()).await.unwrap();
    assert_eq!(names(&after.unwrap()), ["b"]);
    assert_eq!(names(&recipes.group_members(path()).await.unwrap().into_inner()), ["b"]);
    assert_eq!(children(&checker, &group).await, ["b"]);
    let late = recipes.release(HandleRef { session: silent, handle: a.handle }).await.unwrap_err();
    assert_eq!(late.code(), tonic::Code::NotFound);
    // Release leaves.
    recipes.release(HandleRef { session: kept, handle: b.handle }).await.unwrap();
    let empty = within(LIMIT, "b leaves", watch.message()).await.unwrap().unwrap();
    assert!(empty.members.is_empty(), "{empty:?}");
    assert!(children(&checker, &group).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_claim_not_acked_goes_back_and_is_taken_once() {
    let daemon = every_recipe().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let queue = unique("serve-claim");
    let mut recipes = RecipesClient::new(channel.clone());
    for data in ["one", "two"] {
        let put = QueuePutRequest { path: queue.clone(), data: data.into(), ..Default::default() };
        recipes.queue_put(put).await.unwrap();
    }
    let claim = |session: u64, timeout_ms: u64| QueueClaimRequest {
        session,
        path: queue.clone(),
        timeout_ms: Some(timeout_ms),
        recipe: String::new(),
    };
    let len = |recipes: &mut RecipesClient<Channel>| {
        let request = PathRequest { path: queue.clone(), recipe: String::new() };
        let mut recipes = recipes.clone();
        async move { recipes.queue_len(request).await.unwrap().into_inner().items }
    };
    // A consumer that claims "one" and goes silent before acking.
    let silent = silent_session(&channel, 1000).await;
    let lost = recipes.queue_claim(claim(silent, 5000)).await.unwrap().into_inner();
    let lost_item = lost.item.unwrap();
    assert_eq!(lost_item.data, b"one");
    assert_eq!(children(&checker, &format!("{queue}-claims")).await.len(), 1, "the claim node");
    // Another consumer gets "two" while "one" is claimed.
    let (kept, _keep) = session(&channel, 5000).await;
    let second = recipes.queue_claim(claim(kept, 5000)).await.unwrap().into_inner();
    assert_eq!(second.item.as_ref().unwrap().data, b"two");
    recipes.queue_ack(HandleRef { session: kept, handle: second.handle }).await.unwrap();
    assert_eq!(len(&mut recipes).await, 1, "\"two\" is gone, \"one\" is still claimed");
    // Once the silent session ends, "one" is claimable again: taken exactly once.
    let again =
        within(Duration::from_secs(10), "the item comes back", recipes.queue_claim(claim(kept, 5000)))
            .await
            .unwrap()
            .into_inner();
    let item = again.item.unwrap();
    assert_eq!((item.data.as_slice(), &item.node), (b"one".as_slice(), &lost_item.node));
    let late = recipes.queue_ack(HandleRef { session: silent, handle: lost.handle }).await.unwrap_err();
    assert_eq!(late.code(), tonic::Code::NotFound, "the silent consumer's claim is over");
    recipes.queue_ack(HandleRef { session: kept, handle: again.handle }).await.unwrap();
    assert_eq!(len(&mut recipes).await, 0);
    let none = recipes.queue_claim(claim(kept, 300)).await.unwrap_err();
    assert_eq!(none.code(), tonic::Code::DeadlineExceeded, "nothing else is left: {none:?}");
    let take = WaitRequest { path: queue.clone(), timeout_ms: Some(200), recipe: String::new() };
    assert_eq!(recipes.queue_take(take).await.unwrap_err().code(), tonic::Code::DeadlineExceeded);
    assert!(children(&checker, &format!("{queue}-claims")).await.is_empty(), "no claim is left");
    // An ack of a handle that is not a queue claim is refused and leaves the claim held.
    let lock = recipes.acquire(acquire(kept, &unique("serve-claim-lock"))).await.unwrap().into_inner();
    let wrong = recipes.queue_ack(HandleRef { session: kept, handle: lock.handle }).await.unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::FailedPrecondition, "{wrong:?}");
    recipes.release(HandleRef { session: kept, handle: lock.handle }).await.unwrap();
}

/// Invoke on a fresh instance (no session): the result as JSON.
async fn invoke(
    recipes: &mut RecipesClient<Channel>,
    recipe: &str,
    function: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let request = InvokeRequest {
        recipe: recipe.into(),
        function: function.into(),
        args_json: args.to_string(),
        ..Default::default()
    };
    let reply = recipes.invoke(request).await.unwrap().into_inner();
    assert_eq!(reply.handle, 0, "nothing kept");
    serde_json::from_str(&reply.result_json).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generic_invoke_calls_any_export_with_json_and_keeps_claims_in_the_session() {
    let daemon = every_recipe().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let mut recipes = RecipesClient::new(channel.clone());
    let mut admin = AdminClient::new(channel.clone());
    let path = unique("serve-invoke");

    // The functions are listed with their types, as Invoke names them.
    let listed = admin.list_recipes(Empty {}).await.unwrap().into_inner();
    let lock = listed.recipes.iter().find(|r| r.name == "lock").unwrap();
    assert!(
        lock.functions.iter().any(|f| f == "lock.acquire(path: string, timeout-ms: option<u64>) -> result<record{node: string, token: s64}, zk-error>"),
        "{:?}",
        lock.functions
    );

    // A lock taken by Invoke and kept in the session stays held after the call.
    let (id, _keep) = session(&channel, 5000).await;
    let request = InvokeRequest {
        recipe: "lock".into(),
        function: "lock.acquire".into(),
        args_json: serde_json::json!([path, 10_000]).to_string(),
        session: id,
        keep: true,
        ..Default::default()
    };
    let kept = recipes.invoke(request).await.unwrap().into_inner();
    assert_ne!(kept.handle, 0);
    let held: serde_json::Value = serde_json::from_str(&kept.result_json).unwrap();
    let node = held["ok"]["node"].as_str().unwrap().to_string();
    let token = held["ok"]["token"].as_i64().unwrap();
    let (_, stat) = checker.get_data(&node).await.unwrap();
    assert_eq!(stat.czxid, token, "the token is the node's czxid");
    // Someone else, by name and with snake_case keys, finds it taken.
    let other = invoke(&mut recipes, "lock", "try-acquire", serde_json::json!({ "path": path })).await;
    assert_eq!(other, serde_json::json!({ "ok": null }));
    // A recipe's own error is a result, not a status.
    let bad_path = invoke(&mut recipes, "lock", "lock.acquire", serde_json::json!(["no-slash", 0])).await;
    assert!(bad_path["err"]["invalid-path"].is_string(), "{bad_path}");
    // Bad arguments are refused by the host before the recipe runs.
    let refused = recipes
        .invoke(InvokeRequest {
            recipe: "lock".into(),
            function: "lock.acquire".into(),
            args_json: "[1]".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("argument path: expected a string"), "{refused:?}");
    let unknown = recipes
        .invoke(InvokeRequest { recipe: "lock".into(), function: "lock.steal".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert!(unknown.message().contains("lock.acquire, lock.try-acquire"), "{unknown:?}");

    // Lost tells the holder when its node goes.
    let mut lost = recipes.lost(HandleRef { session: id, handle: kept.handle }).await.unwrap().into_inner();
    checker.delete(&node, None).await.unwrap();
    let event = within(LIMIT, "the Lost event", lost.message()).await.unwrap().unwrap();
    assert_eq!(event.reason, "node-deleted");
    // Calls go on on the kept handle: acquire again, release through Invoke, then end it.
    let again = InvokeRequest {
        function: "lock.release".into(),
        session: id,
        handle: kept.handle,
        ..Default::default()
    };
    let released = recipes.invoke(again).await.unwrap().into_inner();
    assert_eq!(released.handle, kept.handle);
    recipes.release(HandleRef { session: id, handle: kept.handle }).await.unwrap();

    // Structured values both ways: bytes as text, options, records.
    let cfg = format!("{path}-cfg");
    let set =
        invoke(&mut recipes, "config", "config.set", serde_json::json!({ "path": cfg, "data": "hello" }))
            .await;
    assert_eq!(set, serde_json::json!({ "ok": 0 }));
    let got = invoke(&mut recipes, "config", "config.get", serde_json::json!([cfg])).await;
    assert_eq!(got, serde_json::json!({ "ok": { "data": "hello", "version": 0 } }));
    let cas = invoke(&mut recipes, "config", "set", serde_json::json!([cfg, [104, 105], 7])).await;
    assert_eq!(cas, serde_json::json!({ "err": "bad-version" }));

    // A kept claim whose session nobody keeps alive goes with it.
    let silent = silent_session(&channel, 1000).await;
    let request = InvokeRequest {
        recipe: "lock".into(),
        function: "acquire".into(),
        args_json: serde_json::json!([path]).to_string(),
        session: silent,
        keep: true,
        ..Default::default()
    };
    let orphan = recipes.invoke(request).await.unwrap().into_inner();
    let orphan: serde_json::Value = serde_json::from_str(&orphan.result_json).unwrap();
    let orphan_node = orphan["ok"]["node"].as_str().unwrap().to_string();
    within(Duration::from_secs(5), "the lock goes with its session", wait_gone(&checker, &orphan_node)).await;
    assert!(children(&checker, &path).await.is_empty());
}

/// `GET PATH` on `addr` over plain HTTP/1.1: the whole answer, head and body.
async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    within(LIMIT, "the metrics address answers", stream.read_to_string(&mut answer)).await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn healthz_answers_ok_while_the_zookeeper_session_is_up() {
    let (plugins, cache) = private_plugins("healthz");
    let mut daemon = Command::new(wazoo_bin())
        .env("WAZOO_ZOOKEEPER", zk().address())
        .env("WAZOO_PLUGINS", &plugins)
        .env("WAZOO_CACHE", &cache)
        .env_remove("WAZOO_LOG")
        .env_remove("WAZOO_SERVER")
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--watch-every", "1h"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(daemon.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "wazoo serve is ready", lines.next_line()).await.unwrap().unwrap();
    // "serving gRPC on ADDR, metrics on http://ADDR/metrics, console on http://ADDR/"
    let addr = line.split("http://").nth(1).unwrap().split('/').next().unwrap().to_string();
    assert!(line.ends_with(&format!(", console on http://{addr}/")), "{line}");

    let health = http_get(&addr, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200 "), "{health}");
    assert!(health.ends_with("\r\n\r\nok"), "{health}");
    let metrics = http_get(&addr, "/metrics").await.to_ascii_lowercase();
    assert!(metrics.contains("content-type: application/openmetrics-text; version=1.0.0"), "{metrics}");
    assert!(metrics.contains("# type wazoo_compiles counter"), "{metrics}");
    assert!(metrics.contains("wazoo_client_sessions{tenant=\"\"} 0"), "{metrics}");
    assert!(metrics.ends_with("# eof\n"), "{metrics}");
    assert!(http_get(&addr, "/nothing").await.starts_with("HTTP/1.1 404 "));
}
