//! A daemon group (`wazoo serve --group`) on the real ZooKeeper, daemons as real processes: a
//! claim held, or waited for, through a daemon that is killed (SIGKILL) or told to stop
//! (SIGTERM) carries on through another member. The guarded command keeps running, the claim
//! keeps its node and fencing token, nobody else holds it meanwhile, and a waiter keeps its
//! place in the queue.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use wazoo_tests::daemon::{cli, output, wazoo_at, Daemon};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn cache() -> PathBuf {
    root().join("target/component-cache")
}

/// Two members of a group of their own.
async fn group(name: &str) -> (Daemon, Daemon) {
    let secret = std::env::temp_dir().join(format!("wazoo-group-secret-{}-{name}", std::process::id()));
    std::fs::write(&secret, "a-group-secret-of-the-tests\n").unwrap();
    let group = format!("g{}-{name}", std::process::id());
    let args = ["--group", group.as_str(), "--group-secret-file", secret.to_str().unwrap()];
    let a = Daemon::start_with(&plugins(), &cache(), &args).await;
    let b = Daemon::start_with(&plugins(), &cache(), &args).await;
    (a, b)
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// `wazoo lock PATH -- CMD` through `servers` (first answering first), its stderr read line by
/// line.
fn lock_through(servers: &str, path: &str, cmd: &str) -> tokio::process::Child {
    let mut command = wazoo_at(servers);
    command
        .env("WAZOO_LOG", "wazoo=info,wazoo_client=warn")
        .args(["--server", servers, "lock", path, "--", "sh", "-c", cmd])
        .stderr(Stdio::piped());
    command.spawn().unwrap()
}

/// Waits for a line of `lines` containing `what`; every line read is kept in `seen`.
async fn line_with(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
    what: &str,
    seen: &mut Vec<String>,
) {
    within(LIMIT, what, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let found = line.contains(what);
            seen.push(line);
            if found {
                return;
            }
        }
        panic!("stderr ended without {what:?}: {seen:#?}");
    })
    .await
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
