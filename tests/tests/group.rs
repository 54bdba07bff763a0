//! Group membership when the group's node itself goes: ZooKeeper deletes an empty container
//! (the group node is one) after a while, and a member joining later creates it again. A
//! watcher carries on through both and sees the members who come back. A malformed member name
//! is bad usage, refused before anyone is asked.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;
use wazoo_runtime::Membership;
use wazoo_tests::daemon::{cli, output, wazoo_at};
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

/// Two handles on one host share a ZooKeeper session, so "the member node is this session's" does
/// not say which handle made it. Two handles joining one name at once on a group that does not
/// exist yet (both first find no parent) must not both be told they are the member: one joins,
/// the other gets `node-exists`, and the loser's leave cannot delete the winner's node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_handles_of_one_host_never_both_join_as_one_name() {
    use wazoo_runtime::{RecipeError, ZkError};
    let checker = client(&zk().address()).await;
    let host = host().await;
    for round in 0..20 {
        let path = format!("{}/workers", unique(&format!("group-same-name-{round}")));
        let (mut a, mut b) = (host.group("group").await.unwrap(), host.group("group").await.unwrap());
        let (ja, jb) = tokio::join!(a.join(&path, "alice", b"a"), b.join(&path, "alice", b"b"));
        let joined = [ja.is_ok(), jb.is_ok()];
        assert_eq!(joined.iter().filter(|j| **j).count(), 1, "round {round}: joins {ja:?} {jb:?}");
        let (winner, mut loser, refused) = if ja.is_ok() { (a, b, jb) } else { (b, a, ja) };
        assert!(matches!(refused, Err(RecipeError::Zk(ZkError::NodeExists))), "round {round}: {refused:?}");
        let (data, _) = checker.get_data(&format!("{path}/alice")).await.unwrap();
        assert!(data == b"a" || data == b"b", "round {round}: {data:?}");
        // The loser is no member: its leave is refused and the winner's node stays.
        assert!(loser.leave().await.is_err(), "round {round}: the loser could leave");
        loser.close().await;
        assert!(checker.check_stat(&format!("{path}/alice")).await.unwrap().is_some(), "round {round}");
        winner.close().await;
        within(LIMIT, "the winner's node goes", wait_gone(&checker, &format!("{path}/alice"))).await;
    }
}

/// A create whose reply was lost is cleaned up, when its handle ends, by the name it asked for:
/// exactly that name (or it with a sequence), never every name that merely begins the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_uncertain_member_cleaned_up_spares_a_member_whose_name_begins_the_same() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let path = format!("{}/workers", unique("group-prefix"));
    let mut ten = host.group("group").await.unwrap();
    ten.join(&path, "worker-10", b"10").await.unwrap();
    let mut one = host.group("group").await.unwrap();
    host.faults().lose_create_replies(1);
    one.join(&path, "worker-1", b"1").await.unwrap();
    assert_eq!(host.faults().pending_lost_create_replies(), 0, "the lost reply did not fire");
    assert!(
        checker.check_stat(&format!("{path}/worker-1")).await.unwrap().is_some(),
        "the create did not apply"
    );
    // Ended without leaving: its ledger cleans up what the uncertain create may have made.
    one.close().await;
    assert!(checker.check_stat(&format!("{path}/worker-1")).await.unwrap().is_none(), "worker-1 stayed");
    assert!(
        checker.check_stat(&format!("{path}/worker-10")).await.unwrap().is_some(),
        "cleaning up worker-1 deleted worker-10"
    );
    ten.close().await;
}

/// A member name that is no node name (a `/` in it, empty, `..`) is bad usage: exit status 2 and
/// one line, before ZooKeeper is asked (nothing made), and with `--server` before the daemon is
/// (none listens there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_member_name_is_a_usage_error_locally_and_through_a_daemon() {
    let checker = client(&zk().address()).await;
    let path = format!("{}/workers", unique("group-bad-name"));
    for name in ["a b/c", "", ".."] {
        let said = format!(
            "wazoo: member name {name:?} is not a node name (not empty, no '/', not . or .., printable)\n"
        );
        let join = ["group", "join", &path, name, "--", "echo", "ran"];
        let (code, stdout, stderr) = output(cli().args(join)).await;
        assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", said.as_str()), "{name:?}");
        let (code, stdout, stderr) = output(wazoo_at("127.0.0.1:1").args(join)).await;
        assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", said.as_str()), "--server, {name:?}");
    }
    assert!(checker.check_stat(&path).await.unwrap().is_none(), "the group was made");
}
