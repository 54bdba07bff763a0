//! A daemon group (`wazoo serve --group`) on the real ZooKeeper, daemons as real processes: a
//! claim held, or waited for, through a daemon that is killed (SIGKILL) or told to stop
//! (SIGTERM) carries on through another member. The guarded command keeps running, the claim
//! keeps its node and fencing token, nobody else holds it meanwhile, and a waiter keeps its
//! place in the queue.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use wazoo_tests::daemon::{cache, cli, group, group_state, member_of, output, signal, wazoo_at, Daemon};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// `wazoo lock PATH -- CMD` through `servers` (first answering first), its stderr read line by
/// line.
fn lock_through(servers: &str, path: &str, cmd: &str) -> tokio::process::Child {
    lock_with(servers, &[], path, cmd)
}

/// As [`lock_through`], with `options` after the path.
fn lock_with(servers: &str, options: &[&str], path: &str, cmd: &str) -> tokio::process::Child {
    let mut command = wazoo_at(servers);
    command
        .env("WAZOO_LOG", "wazoo=info,wazoo_client=warn")
        .args(["--server", servers, "lock", path])
        .args(options)
        .args(["--", "sh", "-c", cmd])
        .stderr(Stdio::piped());
    command.spawn().unwrap()
}

/// Waits for a line of `lines` containing `what`; every line read is kept in `seen`.
async fn line_with(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
    what: &str,
    seen: &mut Vec<String>,
) {
    let found = tokio::time::timeout(LIMIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let found = line.contains(what);
            seen.push(line);
            if found {
                return true;
            }
        }
        false
    })
    .await;
    match found {
        Ok(true) => {}
        Ok(false) => panic!("stderr ended without {what:?}: {seen:#?}"),
        Err(_) => panic!("no {what:?} within {LIMIT:?}: {seen:#?}"),
    }
}

/// The lock nodes under `path` with their czxids.
async fn nodes(checker: &zookeeper_client::Client, path: &str) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for child in children(checker, path).await {
        let (_, stat) = checker.get_data(&format!("{path}/{child}")).await.unwrap();
        found.push((child, stat.czxid));
    }
    found.sort();
    found
}

/// Held through A; A is killed (or told to stop): the command runs on to its end and the claim
/// is held throughout, with the same node and token, and a contender on ZooKeeper cannot take it.
async fn held_through(signal_name: &str, name: &str) {
    let (a, b) = group(name).await;
    let checker = client(&zk().address()).await;
    let path = unique(name);
    let servers = format!("{},{}", a.grpc, b.grpc);
    let mut holder = lock_through(&servers, &path, "sleep 5; true");
    let mut lines = BufReader::new(holder.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    line_with(&mut lines, "held", &mut seen).await;
    let before = nodes(&checker, &path).await;
    assert_eq!(before.len(), 1, "one lock node: {before:?}");

    signal(a.pid(), signal_name);
    line_with(&mut lines, "safe", &mut seen).await;
    assert_eq!(nodes(&checker, &path).await, before, "the same node and token after the fail-over");
    // Nobody else can take it meanwhile.
    let (code, _, err) = output(cli().args(["lock", &path, "--timeout", "500ms", "--", "true"])).await;
    assert_eq!(code, 3, "the lock is still held through the group: {err}");

    let status = within(LIMIT, "the holder ends", holder.wait()).await.unwrap();
    let rest = within(LIMIT, "stderr", async {
        let mut rest = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            rest.push(line);
        }
        rest
    })
    .await;
    assert_eq!(status.code(), Some(0), "CMD ran to its end and its status is wazoo's: {seen:#?} {rest:#?}");
    wait_gone(&checker, &format!("{path}/{}", before[0].0)).await;
    drop(b);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lock_held_through_a_killed_daemon_carries_on_through_another() {
    held_through("-KILL", "killed").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_hands_a_daemons_claims_to_the_group() {
    held_through("-TERM", "handed").await;
}

/// A waiter queued through A keeps its node (its place) when A is killed, and takes the lock
/// when the holder before it lets go.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_keeps_its_place_through_a_killed_daemon() {
    let (a, b) = group("waiter").await;
    let checker = client(&zk().address()).await;
    let path = unique("waiter");
    let mut first = cli().args(["lock", &path, "--", "sh", "-c", "sleep 4; true"]).spawn().unwrap();
    wait_children(&checker, &path, 1).await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let mut waiter = lock_through(&servers, &path, "true");
    let queued = wait_children(&checker, &path, 2).await;
    let before = nodes(&checker, &path).await;
    signal(a.pid(), "-KILL");
    let mut lines = BufReader::new(waiter.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    line_with(&mut lines, "safe", &mut seen).await;
    // Taken up, the waiter still has the one node it queued.
    assert_eq!(nodes(&checker, &path).await, before, "the waiter's place after the fail-over: {queued:?}");
    assert_eq!(within(LIMIT, "the first holder ends", first.wait()).await.unwrap().code(), Some(0));
    let status = within(LIMIT, "the waiter ends", waiter.wait()).await.unwrap();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    assert_eq!(status.code(), Some(0), "the waiter took the lock: {seen:#?}");
    drop(b);
}

/// A member that was frozen (SIGSTOP) and cut off from ZooKeeper while another adopted its work
/// comes back. ZooKeeper would let it take its old sessions back by reconnecting; it would then
/// act on claims that are no longer its own (past its client's TTL, in its own eyes, end that
/// client's session and delete its lock under the client that holds it through the adopter).
/// Instead it finds it is out before any of its sessions reconnects, and exits 75 without
/// sending ZooKeeper a single write.
async fn frozen_member_comes_back(name: &str, past_ttl: bool) {
    let args = member_of(name);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // A reaches ZooKeeper through a proxy, so that its connections can be cut; B directly.
    let link = wazoo_tests::proxy::Proxy::start(&zk().address()).await;
    let mut a = Daemon::start_logged(&link.address(), &plugins(), &cache(), &args).await;
    let b = Daemon::start_with(&plugins(), &cache(), &args).await;
    let checker = client(&zk().address()).await;
    let path = unique(name);
    let servers = format!("{},{}", a.grpc, b.grpc);
    let ttl = Duration::from_secs(6);
    let mut holder = lock_with(&servers, &["--session-timeout", "6s"], &path, "sleep 20; true");
    let mut lines = BufReader::new(holder.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    line_with(&mut lines, "held", &mut seen).await;
    let before = nodes(&checker, &path).await;
    assert_eq!(before.len(), 1, "one lock node: {before:?}");

    let frozen = std::time::Instant::now();
    signal(a.pid(), "-STOP");
    line_with(&mut lines, "safe", &mut seen).await;
    // Its connections to ZooKeeper break while it sleeps; from now on every request it sends
    // is seen.
    link.tap(None);
    link.cut();
    if past_ttl {
        // When it wakes, the client's session has expired in its eyes (and so has its group
        // session: the test's ZooKeeper caps sessions at 4 s).
        let woken = frozen + ttl + Duration::from_secs(2);
        tokio::time::sleep(woken.saturating_duration_since(std::time::Instant::now())).await;
    }
    signal(a.pid(), "-CONT");
    let mut log = a.log();
    let status = within(Duration::from_secs(20), "the woken member exits", a.exited()).await;
    let mut said = Vec::new();
    while let Ok(Some(line)) = log.next_line().await {
        said.push(line);
    }
    assert_eq!(status.code(), Some(75), "the woken member stops at once: {said:#?}");
    let why = if past_ttl { "stopping at once" } else { "another member of the group adopted" };
    assert!(said.iter().any(|l| l.contains(why)), "it says why ({why:?}): {said:#?}");
    let sent = link.untap();
    if !past_ttl {
        // The cut broke its group session's connection, which came back through the proxy (the
        // tap sees the link the member uses) and read the adoption there.
        assert!(sent.iter().any(|r| r.path.contains("/adoptions/")), "it read its standing: {sent:#?}");
    }
    let writes: Vec<_> = sent
        .iter()
        .filter(|r| {
            use wazoo_tests::proxy::op;
            op::CREATES.contains(&r.kind)
                || [op::DELETE, op::SET_DATA, op::MULTI, op::CLOSE_SESSION].contains(&r.kind)
        })
        .collect();
    assert!(writes.is_empty(), "the woken member wrote nothing: {writes:#?}");

    // The claim is the client's still, on the same node, and nobody else can take it.
    assert_eq!(nodes(&checker, &path).await, before, "the same node and token: {seen:#?}");
    let (code, _, err) = output(cli().args(["lock", &path, "--timeout", "500ms", "--", "true"])).await;
    assert_eq!(code, 3, "the lock is still held through the group: {err}");
    let status = within(LIMIT, "the holder ends", holder.wait()).await.unwrap();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    assert_eq!(status.code(), Some(0), "CMD ran to its end, the claim held throughout: {seen:#?}");
    wait_gone(&checker, &format!("{path}/{}", before[0].0)).await;
    drop(b);
}

/// Woken as soon as its work is adopted: its group session lives, and it reads the adoption.
#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_member_woken_after_its_adoption_stops_before_reconnecting() {
    frozen_member_comes_back("woken", false).await;
}

/// Woken past its client's TTL: it would end that client's session and delete its lock.
#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_member_woken_past_its_clients_ttl_deletes_nothing() {
    frozen_member_comes_back("late", true).await;
}

/// Every node under `path` (and `path` itself), with its czxid and owner session.
async fn tree(checker: &zookeeper_client::Client, path: &str) -> Vec<(String, i64, i64)> {
    let mut found = Vec::new();
    let mut next = vec![path.to_string()];
    while let Some(node) = next.pop() {
        let Ok((_, stat)) = checker.get_data(&node).await else { continue };
        found.push((node.clone(), stat.czxid, stat.ephemeral_owner));
        if let Ok((names, _)) = checker.get_children(&node).await {
            next.extend(names.into_iter().map(|n| format!("{}/{n}", node.trim_end_matches('/'))));
        }
    }
    found.sort();
    found
}

/// `wazoo --server A,B ARGS -- sh -c 'sleep 5; true'` claims something under `path` (its log
/// says `what` once it holds); A is killed; the command runs to its end, the claim held
/// throughout: every node under `path` stays as it was (same czxid, same owner session), and
/// `contender` (a command on ZooKeeper that would get the claim were it free) exits `refused`.
async fn kind_held_through_a_kill(
    name: &str,
    args: &[&str],
    what: &str,
    path: &str,
    contender: &[&str],
    refused: i32,
) -> Vec<String> {
    let (a, b) = group(name).await;
    let checker = client(&zk().address()).await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let mut command = wazoo_at(&servers);
    command
        .env("WAZOO_LOG", "wazoo=info,wazoo_client=warn")
        .args(["--server", &servers])
        .args(args)
        .args(["--", "sh", "-c", "sleep 5; true"])
        .stderr(Stdio::piped());
    let mut holder = command.spawn().unwrap();
    let mut lines = BufReader::new(holder.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    line_with(&mut lines, what, &mut seen).await;
    let before = tree(&checker, path).await;
    assert!(before.iter().any(|(_, _, owner)| *owner != 0), "an ephemeral node under {path}: {before:?}");

    signal(a.pid(), "-KILL");
    line_with(&mut lines, "safe", &mut seen).await;
    assert_eq!(tree(&checker, path).await, before, "the same nodes after the fail-over: {seen:#?}");
    let (code, _, err) = output(cli().args(contender)).await;
    assert_eq!(code, refused, "the claim is still held through the group: {err}");

    let status = within(LIMIT, "the holder ends", holder.wait()).await.unwrap();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    assert_eq!(status.code(), Some(0), "CMD ran to its end, the claim held throughout: {seen:#?}");
    drop(b);
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_lock_is_held_through_a_killed_daemon() {
    let path = unique("rw");
    let contender = ["rwlock", "read", &path, "--timeout", "500ms", "--", "true"];
    kind_held_through_a_kill("rw", &["rwlock", "write", &path], "held", &path, &contender, 3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_semaphore_lease_is_held_through_a_killed_daemon() {
    let path = unique("sem");
    let contender = ["semaphore", "--leases", "1", &path, "--timeout", "500ms", "--", "true"];
    kind_held_through_a_kill("sem", &["semaphore", "--leases", "1", &path], "held", &path, &contender, 3)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leadership_is_held_through_a_killed_daemon() {
    let path = unique("elect");
    let contender = ["elect", &path, "--timeout", "500ms", "--", "true"];
    kind_held_through_a_kill("elect", &["elect", &path], "held", &path, &contender, 3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_requeued_leadership_is_held_through_a_killed_daemon() {
    let path = unique("requeue");
    let contender = ["elect", &path, "--timeout", "500ms", "--", "true"];
    // The second term is campaigned for after A's death: through B.
    let args = ["elect", "--requeue", "--max-terms", "2", &path];
    let seen = kind_held_through_a_kill("requeue", &args, "held", &path, &contender, 3).await;
    let terms = seen.iter().filter(|l| l.contains("leadership of") && l.contains(" held")).count();
    assert_eq!(terms, 2, "two terms, the second through the surviving member: {seen:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_membership_is_kept_through_a_killed_daemon() {
    let path = unique("members");
    let contender = ["group", "join", &path, "m1", "--", "true"];
    kind_held_through_a_kill("members", &["group", "join", &path, "m1"], "held", &path, &contender, 1).await;
}

/// A registration's node stays through its daemon's death: the instance that tended it stayed
/// behind, and a fresh one in the session the surviving member took up takes the same node
/// (czxid and owner unchanged: a watcher sees no blink), tends it, and deletes it at the end.
#[tokio::test(flavor = "multi_thread")]
async fn a_registration_is_kept_through_a_killed_daemon() {
    let path = unique("registered");
    let contender = ["register", &path, "--data", "another", "--", "true"];
    let seen = kind_held_through_a_kill(
        "registered",
        &["register", &path, "--data", "mine"],
        "registered",
        &path,
        &contender,
        3,
    )
    .await;
    assert!(
        seen.iter().any(|l| l.contains("taken up, the same node")),
        "taken up, not made again: {seen:#?}"
    );
    let checker = client(&zk().address()).await;
    wait_gone(&checker, &path).await;
}

/// Through the Rust client (`wazoo-client`, two addresses): a lock held and a waiter queued
/// behind it, both through A. A is killed; both sessions are taken up by B with their nodes as
/// they were, the holder is not told it lost anything, its release goes through B, and the
/// waiter gets the lock with the very node it queued with.
#[tokio::test(flavor = "multi_thread")]
async fn a_rust_clients_lock_and_waiter_go_on_through_another_daemon() {
    let (a, b) = group("rust-client").await;
    let checker = client(&zk().address()).await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let rust = wazoo_client::Client::connect(&servers, None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(rust.addr(), a.grpc, "the first address answers");
    let path = unique("rust-client");
    let held = rust.lock(&path, wazoo_client::LockOptions::default()).await.unwrap();
    let waiting = tokio::spawn({
        let (rust, path) = (rust.clone(), path.clone());
        async move { rust.lock(&path, wazoo_client::LockOptions::default()).await }
    });
    wait_children(&checker, &path, 2).await;
    let before = tree(&checker, &path).await;
    let queued =
        before.iter().map(|(n, _, _)| n).find(|n| *n != &path && n.as_str() != held.node()).unwrap().clone();
    let lost = held.lost();

    signal(a.pid(), "-KILL");
    let moved = within(LIMIT, "the holder's session is taken up", held.session().taken_up_after(0)).await;
    assert_eq!(moved.expect("taken up, not ended").addr(), b.grpc);
    assert_eq!(tree(&checker, &path).await, before, "the same nodes after the fail-over");
    assert!(tokio::time::timeout(Duration::from_millis(500), lost).await.is_err(), "nothing lost");

    let token = held.token();
    held.release().await.unwrap();
    let second = within(LIMIT, "the waiter gets the lock", waiting).await.unwrap().unwrap();
    assert_eq!(second.node(), queued, "the waiter kept its place: the node it queued with");
    assert!(second.token() > token, "{} > {token}", second.token());
    second.release().await.unwrap();
    within(LIMIT, "nothing is left", async {
        while tree(&checker, &path).await.len() > 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    drop(b);
}

/// A connection's sessions, taken up on B when A is killed, share one connection and one
/// KeepAlive stream there: six sessions go on through a B that allows two streams.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_taken_up_on_one_member_share_its_connection() {
    let args = member_of("shared-peer");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let a = Daemon::start_with(&plugins(), &cache(), &args).await;
    let narrow: Vec<&str> = args.iter().copied().chain(["--max-streams", "2"]).collect();
    let b = Daemon::start_with(&plugins(), &cache(), &narrow).await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let rust = wazoo_client::Client::connect(&servers, None, Duration::from_secs(5)).await.unwrap();
    let mut sessions = Vec::new();
    for i in 0..6 {
        sessions.push(rust.session(Duration::from_secs(10), format!("peer-{i}")).await.unwrap());
    }
    assert!(sessions.iter().all(|s| s.client().addr() == a.grpc), "opened on A");

    signal(a.pid(), "-KILL");
    for session in &sessions {
        let moved = within(LIMIT, "the session is taken up", session.taken_up_after(0)).await;
        assert_eq!(moved.expect("taken up, not ended").addr(), b.grpc);
    }
    // Kept there on the one stream: none ends meanwhile, and B lists all six.
    let mut ended = tokio::task::JoinSet::new();
    for session in &sessions {
        ended.spawn(session.ended());
    }
    let early = tokio::time::timeout(Duration::from_secs(3), ended.join_next()).await;
    assert!(early.is_err(), "a session taken up on B ended: {early:?}");
    let listed = sessions[0].client().list_sessions().await.unwrap();
    assert_eq!(listed.iter().filter(|s| s.name.starts_with("peer-")).count(), 6, "{listed:?}");
    drop(b);
}

/// A Rust client connected to A, which dies before the client asks for anything: its lock is
/// taken through B, the next address it was given.
#[tokio::test(flavor = "multi_thread")]
async fn a_rust_client_whose_daemon_died_since_it_connected_opens_through_another() {
    let (mut a, b) = group("rust-open").await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let rust = wazoo_client::Client::connect(&servers, None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(rust.addr(), a.grpc, "connected to A, the first");
    signal(a.pid(), "-KILL");
    let _ = a.exited().await;
    let path = unique("rust-open");
    let held = within(LIMIT, "the lock through B", rust.lock(&path, wazoo_client::LockOptions::default()))
        .await
        .unwrap();
    assert_eq!(held.session().client().addr(), b.grpc, "the session is B's");
    let checker = client(&zk().address()).await;
    assert!(checker.check_stat(held.node()).await.unwrap().is_some(), "the lock node exists");
    held.release().await.unwrap();
}

/// A `Hold` stream does not fail over, but its claim does not outlive it: when its daemon is
/// killed, the holder says `Disconnected`, and once the session is taken up by B the claim's
/// node is let go there, while the session lives on; a contender then gets the lock.
#[tokio::test(flavor = "multi_thread")]
async fn a_hold_streams_claim_is_let_go_once_its_session_moved() {
    let (a, b) = group("rust-hold").await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let rust = wazoo_client::Client::connect(&servers, None, Duration::from_secs(5)).await.unwrap();
    let session = rust.session(Duration::from_secs(10), "holder".into()).await.unwrap();
    let mut holder = rust.holder(&session).await.unwrap();
    let path = unique("rust-hold");
    let claim = holder.acquire(&path, &wazoo_client::LockOptions::default()).await.unwrap();
    signal(a.pid(), "-KILL");
    let lost = within(LIMIT, "the holder says the claim went", holder.lost()).await;
    assert!(matches!(lost, wazoo_client::Lost::Disconnected(_)), "{lost:?}");
    let checker = client(&zk().address()).await;
    within(LIMIT, "the claim's node is let go through B", wait_gone(&checker, &claim.node)).await;
    assert_eq!(session.client().addr(), b.grpc, "the session lives on, on B");
    let (code, _, stderr) = output(cli().args(["lock", &path, "--timeout", "10s", "--", "true"])).await;
    assert_eq!(code, 0, "a contender gets the lock: {stderr}");
    drop(session);
}

/// With `--stop-in-jeopardy`, a daemon that goes silent stops CMD at once (exit status 4), as a
/// lost claim would, rather than letting it run while another member takes the claim up; the
/// claim is then let go through the member that took its session up.
#[tokio::test(flavor = "multi_thread")]
async fn stop_in_jeopardy_stops_the_command_when_its_daemon_goes_silent() {
    let (a, b) = group("jeopardy").await;
    let checker = client(&zk().address()).await;
    let path = unique("jeopardy");
    let servers = format!("{},{}", a.grpc, b.grpc);
    let done = std::env::temp_dir().join(format!("wazoo-jeopardy-{}", std::process::id()));
    let _ = std::fs::remove_file(&done);
    let cmd = format!("sleep 20; touch {}", done.display());
    let mut holder = lock_with(&servers, &["--stop-in-jeopardy"], &path, &cmd);
    let mut lines = BufReader::new(holder.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    line_with(&mut lines, "held", &mut seen).await;
    let before = nodes(&checker, &path).await;
    signal(a.pid(), "-STOP");
    let status = within(LIMIT, "the holder ends", holder.wait()).await.unwrap();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    signal(a.pid(), "-CONT");
    assert_eq!(status.code(), Some(4), "stopped as lost: {seen:#?}");
    assert!(seen.iter().any(|l| l.contains("--stop-in-jeopardy")), "it says why: {seen:#?}");
    assert!(!done.exists(), "CMD was stopped before its end");
    wait_gone(&checker, &format!("{path}/{}", before[0].0)).await;
    drop(b);
}

/// The members of the group, and the member each client session is served by.
async fn served_by(state: &zookeeper_client::Client, root: &str) -> (Vec<String>, Vec<String>) {
    let members = children(state, &format!("{root}/members")).await;
    let mut serving = Vec::new();
    for client in children(state, &format!("{root}/clients")).await {
        if let Ok((data, _)) = state.get_data(&format!("{root}/clients/{client}")).await {
            let record: serde_json::Value = serde_json::from_slice(&data).unwrap();
            serving.push(record["member"].as_str().unwrap().to_string());
        }
    }
    (members, serving)
}

/// Every member of a group of three is stopped (SIGTERM) and replaced in turn, while six clients
/// hold a lock each through the group (each naming the members in another order): no claim is
/// lost, no node changes, and every command runs to its end.
#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_restart_of_every_member_costs_no_claim() {
    let args = member_of("rolling");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(Daemon::start_with(&plugins(), &cache(), &args).await);
    }
    let checker = client(&zk().address()).await;
    let (state, root) = group_state(&zk().address(), "rolling").await;
    let release = std::env::temp_dir().join(format!("wazoo-rolling-{}", std::process::id()));
    let _ = std::fs::remove_file(&release);
    let cmd = format!("while [ ! -e {} ]; do sleep 0.1; done", release.display());
    let mut holders = Vec::new();
    let mut paths = Vec::new();
    for i in 0..6 {
        let mut order: Vec<String> = members.iter().map(|m| m.grpc.clone()).collect();
        order.rotate_left(i % 3);
        let path = unique("rolling");
        let mut holder = lock_through(&order.join(","), &path, &cmd);
        let mut lines = BufReader::new(holder.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        line_with(&mut lines, "held", &mut seen).await;
        holders.push((holder, lines, seen));
        paths.push(path);
    }
    let mut before = Vec::new();
    for path in &paths {
        before.push(tree(&checker, path).await);
    }

    for round in 0..3 {
        let stopping = members.remove(0);
        signal(stopping.pid(), "-TERM");
        let mut stopping = stopping;
        assert_eq!(
            stopping.exited().await.code(),
            Some(0),
            "round {round}: the member hands over and exits 0"
        );
        members.push(Daemon::start_with(&plugins(), &cache(), &args).await);
        // Every client session is served by a member that is still there.
        let mut last = Default::default();
        let taken_up = tokio::time::timeout(LIMIT, async {
            loop {
                let (live, serving) = served_by(&state, &root).await;
                if serving.len() == 6 && serving.iter().all(|m| live.contains(m)) {
                    return;
                }
                last = (live, serving);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        if taken_up.is_err() {
            let mut said = Vec::new();
            for (holder, lines, seen) in holders.iter_mut() {
                let _ = holder.start_kill();
                while let Ok(Some(line)) = lines.next_line().await {
                    seen.push(line);
                }
                said.push(seen.clone());
            }
            panic!("round {round}: every client taken up by a live member: {last:?}: {said:#?}");
        }
        for (path, before) in paths.iter().zip(&before) {
            assert_eq!(&tree(&checker, path).await, before, "round {round}: {path} as it was");
        }
    }

    std::fs::write(&release, b"").unwrap();
    for (mut holder, mut lines, mut seen) in holders {
        let status = within(LIMIT, "a holder ends", holder.wait()).await.unwrap();
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line);
        }
        assert_eq!(status.code(), Some(0), "CMD ran to its end, the claim held throughout: {seen:#?}");
    }
    for path in &paths {
        wait_children(&checker, path, 0).await;
    }
    let _ = std::fs::remove_file(&release);
}
