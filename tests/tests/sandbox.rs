//! What the host does when a guest misbehaves while it owns a ZooKeeper node: traps, runs past
//! its CPU limit, or grows past its memory limit. The test-only guest `misbehave`
//! (tests/guests/misbehave) creates an ephemeral sequential `PATH/_c_<uuid>-lock-<seq>`, named as
//! the lock recipe names its nodes, and then misbehaves on command. The host must retire the
//! handle and delete the node at once, on the session it still holds, so a lock on `PATH` is free
//! again immediately and every other handle carries on.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use wazoo_runtime::{CustomHandle, Host, RecipeError};
use wazoo_tests::*;
use zookeeper_client::{Acls, Client, CreateMode};

const LIMIT: Duration = Duration::from_secs(60);

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// A fresh persistent directory: its child version then counts exactly what the guest did in it.
async fn prepared(name: &str) -> (Client, String) {
    let checker = client(&zk().address()).await;
    let path = unique(name);
    checker.mkdir(&path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    (checker, path)
}

/// Runs `hold PATH` on `handle`: the node it now owns.
async fn hold(handle: &mut CustomHandle, path: &str) -> String {
    within(LIMIT, "hold", handle.run(&args(&["hold", path]))).await.unwrap().unwrap()
}

/// Runs `command` (a `hold-then-…`) on a fresh handle of `host` and checks everything the host
/// owes when the guest dies holding a node; returns why the guest was stopped.
async fn dies_holding(host: &Host, command: &str) -> String {
    let (checker, path) = prepared(command).await;
    let session = host.live().await.unwrap().session_id();

    // A bystander on the same host, holding a node of its own.
    let mut bystander = host.custom("misbehave").await.unwrap();
    let (_, other_dir) = prepared("bystander").await;
    let other = hold(&mut bystander, &other_dir).await;

    let mut guest = host.custom("misbehave").await.unwrap();
    assert_eq!(guest.live().session_id(), session);
    let traps = host.stats().traps.load(Ordering::SeqCst);
    let started = Instant::now();
    let why = match within(LIMIT, command, guest.run(&args(&[command, &path]))).await {
        Err(RecipeError::Trapped(why)) => why,
        other => panic!("{command}: expected a trap, got {other:?}"),
    };
    let took = started.elapsed();
    assert!(host.stats().traps.load(Ordering::SeqCst) > traps, "{command}: trap counted");

    // The node was created and is already deleted (two child changes, no child), while the
    // session that owned it lives on: the host deleted it, not the session's end.
    let stat = checker.check_stat(&path).await.unwrap().expect("the lock directory is still there");
    assert!(children(&checker, &path).await.is_empty(), "{command}: node left behind");
    assert_eq!(stat.cversion, 2, "{command}: the guest's node should be created, then deleted");
    assert!(guest.live().ended().is_none(), "{command}: the session must not end");
    assert_eq!(host.live().await.unwrap().session_id(), session, "{command}: same session");

    // The handle is retired and tracks nothing.
    assert!(guest.is_retired(), "{command}: handle retired");
    assert!(!guest.tracks_nodes() && guest.ledger().is_empty(), "{command}: ledger emptied");
    match guest.run(&args(&["hold", &path])).await {
        Err(RecipeError::Retired) => {}
        other => panic!("{command}: a retired handle was called again: {other:?}"),
    }
    assert!(children(&checker, &path).await.is_empty());

    // The bystander still holds its node and still works.
    let stat = checker.check_stat(&other).await.unwrap().expect("the bystander's node survives");
    assert_eq!(stat.ephemeral_owner, session);
    assert_eq!(bystander.ledger(), vec![other.clone()]);
    let (_, another_dir) = prepared("bystander-again").await;
    let another = hold(&mut bystander, &another_dir).await;
    bystander.close().await;
    assert!(checker.check_stat(&other).await.unwrap().is_none());
    assert!(checker.check_stat(&another).await.unwrap().is_none());

    // A new lock handle on the same path gets the lock at once.
    let mut lock = host.lock("lock").await.unwrap();
    let held = within(LIMIT, "try_acquire", lock.try_acquire(&path))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{command}: the lock on {path} should be free at once"));
    assert_eq!(lock.live().session_id(), session);
    lock.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the released node goes", wait_gone(&checker, &held.node)).await;
    lock.close().await;

    eprintln!("{command}: stopped after {took:?}: {why}");
    why
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_guest_that_traps_holding_a_node_loses_it_at_once() {
    let host = host().await;
    let why = dies_holding(&host, "hold-then-trap").await;
    assert!(why.contains("unreachable"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_guest_that_spins_holding_a_node_is_stopped_by_the_cpu_limit() {
    let mut config = config(&zk().address(), Duration::from_secs(10));
    config.limits.cpu_per_call = Duration::from_millis(200);
    let host = Host::start(config).await.unwrap();
    let started = Instant::now();
    let why = dies_holding(&host, "hold-then-spin").await;
    assert!(why.contains("CPU limit of 200ms"), "{why}");
    // Well within the session timeout (10 s): nothing waited for the session to expire.
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_guest_that_grows_holding_a_node_is_stopped_by_the_memory_limit() {
    let mut config = config(&zk().address(), Duration::from_secs(10));
    config.limits.memory_bytes = 16 << 20;
    let host = Host::start(config).await.unwrap();
    let why = dies_holding(&host, "hold-then-grow").await;
    assert!(why.contains("growing memory"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_a_holding_handle_deletes_its_node() {
    let host = host().await;
    let (checker, path) = prepared("hold-close").await;
    let mut handle = host.custom("misbehave").await.unwrap();
    let node = hold(&mut handle, &path).await;
    assert!(node.starts_with(&format!("{path}/_c_")) && node.contains("-lock-"), "{node}");
    let stat = checker.check_stat(&node).await.unwrap().expect("held node exists");
    assert_eq!(stat.ephemeral_owner, handle.live().session_id());
    assert_eq!(handle.ledger(), vec![node.clone()]);
    assert!(!handle.is_retired());
    let session = handle.live().clone();

    handle.close().await;
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "close deletes the node at once");
    assert!(session.ended().is_none());
    assert_eq!(host.live().await.unwrap().session_id(), session.session_id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dropping_a_holding_handle_deletes_its_node() {
    let host = host().await;
    let (checker, path) = prepared("hold-drop").await;
    let mut handle = host.custom("misbehave").await.unwrap();
    let node = hold(&mut handle, &path).await;
    assert!(checker.check_stat(&node).await.unwrap().is_some());
    let session = handle.live().clone();

    drop(handle);
    // Drop hands the cleanup to the runtime; it must come well before the session would end.
    within(Duration::from_secs(5), "the dropped handle's node goes", wait_gone(&checker, &node)).await;
    assert!(session.ended().is_none(), "the node went with the drop, not with the session");
    assert_eq!(host.live().await.unwrap().session_id(), session.session_id());
    let mut lock = host.lock("lock").await.unwrap();
    assert!(lock.try_acquire(&path).await.unwrap().is_some(), "the lock is free after the drop");
    lock.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_commands_get_the_usage_line() {
    let host = host().await;
    let mut handle = host.custom("misbehave").await.unwrap();
    for words in [&["hold-then-dance", "/t/x"][..], &["hold"][..], &[][..]] {
        let answer = handle.run(&args(words)).await.unwrap();
        let usage = answer.expect_err("an unknown command is an error");
        assert!(usage.starts_with("usage: misbehave"), "{usage}");
    }
    assert!(!handle.is_retired() && !handle.tracks_nodes());
}

/// What a recipe prints goes to the log, tagged with the recipe, its instance and the stream,
/// shown by `wazoo -v` and not without it; an instance that prints a flood has at most 20 lines
/// a second logged, and the rest counted.
#[tokio::test(flavor = "multi_thread")]
async fn a_recipes_output_is_logged_tagged_and_rate_limited() {
    let call = |verbose: bool| {
        let mut command = wazoo_tests::daemon::cli();
        if verbose {
            command.arg("-v");
        }
        command.args(["call", "misbehave", "run", r#"[["print", "50"]]"#]);
        command
    };
    let (code, stdout, stderr) = wazoo_tests::daemon::output(&mut call(true)).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("printed 50"), "{stdout}");
    let tagged: Vec<&str> = stderr.lines().filter(|l| l.contains("wazoo::guest")).collect();
    assert!(
        tagged.iter().any(|l| l.contains("recipe=\"misbehave\"")
            && l.contains("stream=\"stderr\"")
            && l.contains("to stderr")),
        "the stderr line, tagged: {stderr}"
    );
    let lines = tagged.iter().filter(|l| l.contains("stream=\"stdout\"") && l.contains(" line ")).count();
    assert!((1..=19).contains(&lines), "at most 20 lines a second in all: {lines} of stdout: {stderr}");
    assert!(
        tagged.iter().any(|l| l.contains(&format!("{} lines of output left out", 50 - lines))),
        "the rest counted: {stderr}"
    );
    let (code, _, quiet) = wazoo_tests::daemon::output(&mut call(false)).await;
    assert_eq!(code, 0, "{quiet}");
    assert!(!quiet.contains("wazoo::guest") && !quiet.contains("to stderr"), "shown with -v only: {quiet}");
}
