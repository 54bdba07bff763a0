//! Group membership when the group's node itself goes: ZooKeeper deletes an empty container
//! (the group node is one) after a while, and a member joining later creates it again. A
//! watcher carries on through both and sees the members who come back.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;
use wazoo_runtime::Membership;
use wazoo_tests::daemon::cli;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// The next line `wazoo group watch` prints; none once it has ended.
async fn next(lines: &mut Lines<BufReader<ChildStdout>>) -> Option<String> {
    within(LIMIT, "group watch prints", lines.next_line()).await.unwrap()
}

fn names(m: &Membership) -> Vec<&str> {
    m.members.iter().map(|m| m.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watcher_survives_the_empty_group_node_being_reaped_and_sees_members_come_back() {
    let checker = client(&zk().address()).await;
    let path = format!("{}/workers", unique("group-reaped"));
    let host = host().await;
    let mut alice = host.group("group").await.unwrap();
    alice.join(&path, "alice", b"a").await.unwrap();
    let mut observer = host.group("group").await.unwrap();
    let known = observer.members(&path).await.unwrap();
    assert_eq!(names(&known), ["alice"]);
    alice.leave().await.unwrap();
    let empty = observer.watch(&path, known.version, Some(LIMIT)).await.unwrap();
    assert!(empty.members.is_empty(), "{empty:?}");

    // The watcher follows the group as `wazoo group watch` does, each change in turn.
    let watching = {
        let path = path.clone();
        tokio::spawn(async move {
            let mut now = empty;
            loop {
                now = observer.watch(&path, now.version, Some(LIMIT)).await.unwrap();
                if !now.members.is_empty() {
                    return now;
                }
            }
        })
    };
    // What ZooKeeper's container reaper does to the empty group node.
    checker.delete(&path, None).await.unwrap();
    let mut bob = host.group("group").await.unwrap();
    bob.join(&path, "bob", b"b").await.unwrap();
    let seen = within(LIMIT, "the watcher sees bob", watching).await.unwrap();
    assert_eq!(names(&seen), ["bob"]);
    bob.leave().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_group_watch_carries_on_after_the_group_node_is_reaped() {
    let checker = client(&zk().address()).await;
    let path = format!("{}/workers", unique("group-reaped-cli"));
    let host = host().await;
    let mut alice = host.group("group").await.unwrap();
    alice.join(&path, "alice", b"a").await.unwrap();
    let mut watch =
        cli().args(["group", "watch", &path]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert_eq!(next(&mut lines).await.as_deref(), Some("alice a"));
    assert_eq!(next(&mut lines).await.as_deref(), Some("--"));
    alice.leave().await.unwrap();
    assert_eq!(next(&mut lines).await.as_deref(), Some("--"), "alice left");

    checker.delete(&path, None).await.unwrap();
    let mut bob = host.group("group").await.unwrap();
    bob.join(&path, "bob", b"b").await.unwrap();
    loop {
        match next(&mut lines).await {
            Some(line) if line == "bob b" => break,
            Some(line) => assert_eq!(line, "--", "only empty memberships before bob"),
            None => {
                let status = watch.wait().await.unwrap();
                let mut stderr = String::new();
                tokio::io::AsyncReadExt::read_to_string(&mut watch.stderr.take().unwrap(), &mut stderr)
                    .await
                    .unwrap();
                panic!("group watch ended ({status}) before bob came: {stderr}");
            }
        }
    }
    assert!(watch.try_wait().unwrap().is_none(), "group watch still runs");
    watch.kill().await.unwrap();
    bob.leave().await.unwrap();
}
