//! A claim taken again (`Claim::requeue`): the release and the new node's create go to ZooKeeper
//! as one `multi`, so a client that takes a lock in a loop pays one write per turn, and still
//! goes to the back of the queue. Against a real ZooKeeper, the taking host reaching it through a
//! proxy where a test reads its requests.

use std::sync::atomic::Ordering;
use std::time::Duration;

use wazoo_client::{Client, LockOptions};
use wazoo_runtime::{Claim, Host, Mode, Want};
use wazoo_tests::daemon::Daemon;
use wazoo_tests::proxy::{op, Proxy};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(90);

async fn claim(host: &Host, want: Want, recipe: &str, path: &str) -> Claim {
    let mut contender = host.contender(want, recipe).await.unwrap();
    let granted = within(LIMIT, "acquire", contender.acquire(path, None)).await.unwrap();
    contender.claim(granted)
}

fn folded(host: &Host) -> u64 {
    host.stats().folded.load(Ordering::SeqCst)
}

/// With a second client waiting, the holder that takes the lock again goes behind it: the waiter
/// holds first, the old node leaves in the same write that queues the new one, and no delete of
/// the old node is ever sent on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn taken_again_it_goes_behind_the_waiter_in_one_write() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let other = host_at(&address).await;
    let path = unique("retake-fair");

    let first = claim(&host, Want::Lock, "lock", &path).await;
    let old = first.node().to_string();
    let armed = other.stats().watches_armed();
    let waiter = {
        let (other, path) = (other.clone(), path.clone());
        tokio::spawn(async move { claim(&other, Want::Lock, "lock", &path).await })
    };
    wait_children(&checker, &path, 2).await;
    within(LIMIT, "the waiter watches the holder", other.stats().armed_at_least(armed + 1)).await;

    proxy.tap(None);
    let again = {
        let path = path.clone();
        tokio::spawn(async move { first.requeue(&path, None).await.unwrap() })
    };
    let waited = within(LIMIT, "the waiter is handed the lock", waiter).await.unwrap();
    assert!(waited.token() > 0);
    // The holder queued behind the waiter, in the write that deleted its old node.
    let children = wait_children(&checker, &path, 2).await;
    assert!(checker.check_stat(&old).await.unwrap().is_none(), "the old node {old} is still there");
    assert!(!again.is_finished(), "the holder took the lock again ahead of the waiter: {children:?}");
    let log = proxy.untap();
    let multis: Vec<_> = log.iter().filter(|r| r.kind == op::MULTI).collect();
    assert_eq!(multis.len(), 1, "one multi for the hand-over: {log:?}");
    assert_eq!(multis[0].err, Some(0), "the multi failed on the server: {log:?}");
    assert!(
        !log.iter().any(|r| r.kind == op::DELETE && r.path == old),
        "the old node was deleted on its own: {log:?}"
    );

    within(LIMIT, "the waiter releases", waited.release()).await.unwrap();
    let again = within(LIMIT, "the holder holds again", again).await.unwrap();
    assert_eq!(folded(&host), 1);
    assert!(again.token() > 0 && again.node() != old);
    within(LIMIT, "release", again.release()).await.unwrap();
    within(LIMIT, "every node gone", wait_children(&checker, &path, 0)).await;
}

/// Every standard lock-family recipe, in both layouts, taken again in a loop: the old node is gone
/// when the claim is held again, and the fencing token rises. Each turn is one folded write, but
/// for kazoo's semaphore, whose acquire first reads (or makes) the semaphore's node: the release
/// held back goes before that read, on its own, as ordering requires.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_lock_family_recipe_folds_its_turns() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host_at(&address).await;
    let wants = [
        ("lock", Want::Lock, true),
        ("lock-kazoo", Want::Lock, true),
        ("rwlock", Want::ReadWrite(Mode::Write), true),
        ("rwlock", Want::ReadWrite(Mode::Read), true),
        ("rwlock-kazoo", Want::ReadWrite(Mode::Write), true),
        ("semaphore", Want::Lease { max_leases: 2 }, true),
        ("semaphore-kazoo", Want::Lease { max_leases: 2 }, false),
    ];
    for (recipe, want, folds) in wants {
        let path = unique(&format!("retake-{recipe}"));
        let mut held = claim(&host, want.clone(), recipe, &path).await;
        let before = folded(&host);
        for turn in 0..10 {
            let (old, token) = (held.node().to_string(), held.token());
            held = within(LIMIT, "taken again", held.requeue(&path, None)).await.unwrap();
            assert!(held.token() > token, "{recipe} {want:?}, turn {turn}: the token did not rise");
            let stat = checker.check_stat(held.node()).await.unwrap().expect("the new node is there");
            assert_eq!(
                held.token(),
                stat.czxid,
                "{recipe} {want:?}, turn {turn}: the token is not the czxid"
            );
            assert!(
                checker.check_stat(&old).await.unwrap().is_none(),
                "{recipe} {want:?}, turn {turn}: the old node {old} is still there"
            );
        }
        let expected = if folds { 10 } else { 0 };
        assert_eq!(folded(&host) - before, expected, "{recipe} {want:?}: folded turns");
        let last = held.node().to_string();
        within(LIMIT, "release", held.release()).await.unwrap();
        within(LIMIT, "the node gone", wait_gone(&checker, &last)).await;
    }
}

/// The hand-over's reply is lost after ZooKeeper applied it: the host finds its new node by its
/// unique prefix, the old one is gone with it, and nothing is left over or deleted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_reply_to_the_hand_over_is_found_again() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let path = unique("retake-lost");

    let first = claim(&host, Want::Lock, "lock", &path).await;
    let (old, token) = (first.node().to_string(), first.token());
    host.faults().lose_fold_replies(1);
    proxy.tap(None);
    let again = within(LIMIT, "taken again", first.requeue(&path, None)).await.unwrap();
    let log = proxy.untap();
    assert_eq!(host.faults().pending_lost_fold_replies(), 0, "the fault did not fire");
    let multi = log.iter().find(|r| r.kind == op::MULTI).unwrap_or_else(|| panic!("no multi: {log:?}"));
    assert_eq!(multi.err, Some(0), "the faulted multi had not succeeded on the server: {log:?}");
    assert!(again.token() > token);
    assert!(checker.check_stat(&old).await.unwrap().is_none(), "the old node is still there");
    let children = checker.list_children(&path).await.unwrap();
    assert_eq!(children.len(), 1, "one node, the new one: {children:?}");
    assert!(again.node().ends_with(&children[0]), "{} is not {children:?}", again.node());
    assert!(
        !log.iter().any(|r| r.kind == op::CREATE2 || (r.kind == op::DELETE && r.path == old)),
        "the hand-over was sent again after it applied: {log:?}"
    );
    assert_eq!(folded(&host), 1);
    within(LIMIT, "release", again.release()).await.unwrap();
    within(LIMIT, "every node gone", wait_children(&checker, &path, 0)).await;
}

/// A leadership, whose recipe resigns with a waited delete, is taken again the ordinary way:
/// nothing is held back, nothing folded, the new node behind the old one's place, the token
/// rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_released_the_waited_way_is_taken_again_unfolded() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host_at(&address).await;
    let path = unique("retake-leader");
    let want = Want::Leadership { id: "alpha".into() };
    let first = claim(&host, want, "election", &path).await;
    let (old, token) = (first.node().to_string(), first.token());
    let again = within(LIMIT, "taken again", first.requeue(&path, None)).await.unwrap();
    assert!(again.token() > token);
    assert!(checker.check_stat(&old).await.unwrap().is_none(), "the old node is still there");
    assert_eq!(folded(&host), 0, "a waited release was folded");
    let last = again.node().to_string();
    within(LIMIT, "release", again.release()).await.unwrap();
    within(LIMIT, "the node gone", wait_gone(&checker, &last)).await;
}

/// The old node went before the hand-over (deleted by someone else): the `multi` fails as a
/// whole, and the claim is taken again the ordinary way, with nothing left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_old_node_already_gone_is_taken_again_the_ordinary_way() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host_at(&address).await;
    let path = unique("retake-gone");

    let first = claim(&host, Want::Lock, "lock", &path).await;
    let old = first.node().to_string();
    checker.delete(&old, None).await.unwrap();
    let again = within(LIMIT, "taken again", first.requeue(&path, None)).await.unwrap();
    assert_eq!(folded(&host), 0, "a multi that could not apply counted as a hand-over");
    let children = checker.list_children(&path).await.unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    assert!(again.node().ends_with(&children[0]));
    within(LIMIT, "release", again.release()).await.unwrap();
    within(LIMIT, "every node gone", wait_children(&checker, &path, 0)).await;
}

/// Through a daemon: a `Hold` stream's `requeue` takes the claim again behind the waiter, as a new
/// handle with a greater token, and the daemon sends the hand-over to ZooKeeper as one `multi`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_stream_takes_its_claim_again_behind_the_waiter() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let daemon =
        Daemon::start_on(&proxy.address(), &plugins(), &root().join("target/component-cache"), &[]).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let path = unique("retake-daemon");
    let (one, two) = (
        client.session(Duration::from_secs(10), "retaker".into()).await.unwrap(),
        client.session(Duration::from_secs(10), "waiter".into()).await.unwrap(),
    );
    let mut a = client.holder(&one).await.unwrap();
    let mut b = client.holder(&two).await.unwrap();
    let first = a.acquire(&path, &LockOptions::default()).await.unwrap();
    let waiting = tokio::spawn({
        let path = path.clone();
        async move {
            let claim = b.acquire(&path, &LockOptions::default()).await.unwrap();
            (b, claim)
        }
    });
    wait_children(&checker, &path, 2).await;

    proxy.tap(None);
    let again = tokio::spawn(async move {
        let claim = a.requeue().await.unwrap();
        (a, claim)
    });
    let (mut b, second) = within(LIMIT, "the waiter is handed the lock", waiting).await.unwrap();
    assert!(second.fencing_token > first.fencing_token);
    wait_children(&checker, &path, 2).await;
    assert!(checker.check_stat(&first.node).await.unwrap().is_none(), "the old node is still there");
    assert!(!again.is_finished(), "the requeue took the lock again ahead of the waiter");
    b.release().await.unwrap();
    let (mut a, third) = within(LIMIT, "the lock is taken again", again).await.unwrap();
    let log = proxy.untap();
    assert!(third.fencing_token > second.fencing_token, "{third:?} after {second:?}");
    assert_ne!(third.handle, first.handle, "the claim taken again is a new handle");
    let multis: Vec<_> = log.iter().filter(|r| r.kind == op::MULTI).collect();
    assert_eq!(multis.len(), 1, "one multi for the hand-over: {log:?}");
    assert_eq!(multis[0].err, Some(0), "the multi failed on the server: {log:?}");
    assert!(
        !log.iter().any(|r| r.kind == op::DELETE && r.path == first.node),
        "the old node was deleted on its own: {log:?}"
    );

    // The stream goes on: released, and another requeue with nothing held is refused.
    a.release().await.unwrap();
    let refused = a.requeue().await.unwrap_err();
    assert_eq!(refused.code, tonic::Code::InvalidArgument, "{refused:?}");
    within(LIMIT, "every node gone", wait_children(&checker, &path, 0)).await;
}

async fn host_at(address: &str) -> std::sync::Arc<Host> {
    std::sync::Arc::new(Host::start(config(address, Duration::from_secs(10))).await.unwrap())
}
