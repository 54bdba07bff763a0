//! Claims held as data. A lock, read/write lock or semaphore lease taken by Acquire gives its
//! recipe instance back once it has held for a second, or at once when a new claim finds no
//! instance left, and is kept as its node, fencing token and recipe version. With a real `wazoo
//! serve` on the real ZooKeeper: every build of those families is held so (one instance serves
//! them all, one after another), an election is not; a lock held for a second keeps no instance
//! and still excludes; such a claim is revoked, lost and let go of as before; and its release,
//! whose reply is lost after the server applied it, hands the lock over and leaves nothing
//! behind.

use std::time::Duration;

use wazoo_client::{Client, LockOptions, Lost};
use wazoo_proto::Family;
use wazoo_tests::daemon::Daemon;
use wazoo_tests::proxy::{op, Proxy};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn cache() -> std::path::PathBuf {
    root().join("target/component-cache")
}

fn options(family: Family, recipe: &str) -> LockOptions {
    let leases = if family == Family::Semaphore { 2 } else { 0 };
    LockOptions { family, leases, recipe: recipe.to_string(), ..LockOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_family_build_is_held_as_data_on_one_instance() {
    // One instance: a claim that kept it would leave none for the next.
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--max-instances", "1"]).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let checker = client_of_zk().await;
    let builds = [
        (Family::Lock, "lock"),
        (Family::Lock, "lock-kazoo"),
        (Family::Lock, "lock-c"),
        (Family::ReadLock, "rwlock"),
        (Family::WriteLock, "rwlock"),
        (Family::ReadLock, "rwlock-kazoo"),
        (Family::WriteLock, "rwlock-kazoo"),
        (Family::Semaphore, "semaphore"),
        (Family::Semaphore, "semaphore-kazoo"),
        (Family::Semaphore, "semaphore-py"),
    ];
    let mut held = Vec::new();
    for (family, recipe) in builds {
        let path = unique(&format!("data-{recipe}"));
        let claim = client
            .lock(&path, options(family, recipe))
            .await
            .unwrap_or_else(|e| panic!("{recipe} {family:?} while {} are held: {e}", held.len()));
        let stat = checker.check_stat(claim.node()).await.unwrap().expect("its node");
        assert_eq!(claim.token(), stat.czxid, "{recipe}: the token is the node's czxid");
        assert_eq!(claim.recipe_version().len(), 12, "{recipe}: {}", claim.recipe_version());
        held.push(claim);
    }

    // A leadership keeps its instance (it acknowledges through it): the next claim finds none.
    let session = client.session(Duration::from_secs(10), "leader".into()).await.unwrap();
    let mut contender = session.contender(wazoo_client::Ask::Campaign { id: "me".into() }, String::new());
    let _leading = contender.acquire(&unique("data-election"), Some(Duration::from_secs(10))).await.unwrap();
    let refused = client.lock(&unique("data-after-election"), options(Family::Lock, "lock")).await;
    let refused = refused.err().expect("no instance left");
    assert_eq!(refused.code, tonic::Code::ResourceExhausted, "{refused}");

    // Each let go of deletes its node.
    let nodes: Vec<String> = held.iter().map(|c| c.node().to_string()).collect();
    for claim in held {
        claim.release().await.unwrap();
    }
    for node in nodes {
        within(LIMIT, "a released claim's node goes", wait_gone(&checker, &node)).await;
    }
}

/// The daemon's `wazoo_instances` gauge (the one host's).
async fn instances(daemon: &Daemon) -> u64 {
    let metrics = daemon.metrics().await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("wazoo_instances{tenant=\"\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no instances gauge: {metrics}"))
}

/// Until the daemon keeps no instance: every claim it holds is held as data.
async fn all_as_data(daemon: &Daemon) {
    within(Duration::from_secs(10), "the held claims give their instances back", async {
        while instances(daemon).await != 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_for_a_second_keeps_no_instance_and_still_excludes() {
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let checker = client_of_zk().await;
    let path = unique("data-after-a-second");
    let held = client.lock(&path, LockOptions::default()).await.unwrap();
    // No other claim asks for an instance: the held one gives its own back after a second.
    all_as_data(&daemon).await;
    // Still held: another client waits, and gets it once it is let go of.
    let bounded = LockOptions { timeout: Some(Duration::from_millis(300)), ..LockOptions::default() };
    let refused = client.lock(&path, bounded).await.err().expect("the lock is held");
    assert_eq!(refused.code, tonic::Code::DeadlineExceeded, "{refused}");
    let waiting = tokio::spawn({
        let (client, path) = (client.clone(), path.clone());
        async move { client.lock(&path, LockOptions::default()).await }
    });
    wait_children(&checker, &path, 2).await;
    let token = held.token();
    held.release().await.unwrap();
    let next = within(LIMIT, "the waiter holds", waiting).await.unwrap().unwrap();
    assert!(next.token() > token);
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_held_as_data_is_revoked_lost_and_ended_as_before() {
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let checker = client_of_zk().await;

    // Revoked: the holder is told.
    let revoked = client.lock(&unique("data-revoke"), LockOptions::default()).await.unwrap();
    all_as_data(&daemon).await;
    let lost = revoked.lost();
    checker.set_data(revoked.node(), b"__REVOKE__", None).await.unwrap();
    assert_eq!(within(LIMIT, "the revocation is reported", lost).await, Lost::Revoked);

    // Its node deleted by someone else: lost, and a release then deletes nothing of anyone's.
    let path = unique("data-deleted");
    let deleted = client.lock(&path, LockOptions::default()).await.unwrap();
    all_as_data(&daemon).await;
    let lost = deleted.lost();
    checker.delete(deleted.node(), None).await.unwrap();
    assert_eq!(within(LIMIT, "the loss is reported", lost).await, Lost::NodeDeleted);
    let next = client.lock(&path, LockOptions::default()).await.unwrap();
    all_as_data(&daemon).await;
    deleted.release().await.unwrap();
    let (stat, watcher) = checker.check_and_watch_stat(next.node()).await.unwrap();
    assert!(stat.is_some(), "the next holder's node is there");
    // The next holder's session goes on: its node is untouched a while after.
    let changed = tokio::time::timeout(Duration::from_secs(1), watcher.changed()).await;
    assert!(changed.is_err(), "the next holder's node changed: {changed:?}");

    // Its session ended (the claim dropped): the node goes with it.
    let node = next.node().to_string();
    drop(next);
    within(LIMIT, "the dropped claim's node goes", wait_gone(&checker, &node)).await;
    drop(revoked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_is_lost_hands_over_and_leaves_nothing() {
    let proxy = Proxy::start(&zk().address()).await;
    let daemon = Daemon::start_on(&proxy.address(), &plugins(), &cache(), &[]).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let checker = client_of_zk().await;
    let path = unique("data-lost-reply");
    let first = client.lock(&path, LockOptions::default()).await.unwrap();
    all_as_data(&daemon).await;
    let waiting = tokio::spawn({
        let (client, path) = (client.clone(), path.clone());
        async move { client.lock(&path, LockOptions::default()).await }
    });
    wait_children(&checker, &path, 2).await;

    // The release's delete reaches the server; its reply is lost and the connection cut.
    proxy.tap(None);
    proxy.lose_reply(&[op::DELETE], 1);
    let (old, old_token) = (first.node().to_string(), first.token());
    first.release().await.unwrap();
    within(LIMIT, "the delete's reply is lost", proxy.replies_lost(1)).await;
    assert_eq!(proxy.lost_errors(), [0], "the delete had succeeded on the server");
    // The fault hit the first delete sent since: the released node's, applied on the server.
    let deletes: Vec<_> = proxy.untap().into_iter().filter(|r| r.kind == op::DELETE).collect();
    let first_delete = deletes.first().expect("a delete was sent");
    assert_eq!((first_delete.path.as_str(), first_delete.err), (old.as_str(), Some(0)), "{deletes:?}");

    // The waiter holds, with a greater token; the old node is gone and nothing else is.
    let second = within(LIMIT, "the waiter takes the lock", waiting).await.unwrap().unwrap();
    assert!(second.token() > old_token);
    assert!(checker.check_stat(&old).await.unwrap().is_none(), "the released node is gone");
    let left = checker.list_children(&path).await.unwrap();
    assert_eq!(left.len(), 1, "only the new holder's node is left: {left:?}");
    // The daemon's ZooKeeper session lived through the cut: the new holder still holds, and
    // another claim is served.
    let third = client.lock(&unique("data-after-cut"), LockOptions::default()).await.unwrap();
    assert!(checker.check_stat(second.node()).await.unwrap().is_some());
    assert_eq!(proxy.lost_replies(), 1, "one fault, no other");
    third.release().await.unwrap();
    second.release().await.unwrap();
}

async fn client_of_zk() -> zookeeper_client::Client {
    client(&zk().address()).await
}
