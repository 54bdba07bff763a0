//! A release that rides with the next request (`znode.delete-unwaited`, `wazoo:zk@0.1.5`), as the
//! lock family releases: the delete is sent before the release returns, every later request of
//! the session is applied after it, no other session is handed the claim before it is applied,
//! and a lost reply (or a delete lost on its way) leaves nothing behind: the host's ledger
//! settles it. Against a real ZooKeeper, the host reaching it through a proxy where a test
//! needs to hold or lose its replies.

use std::time::{Duration, Instant};

use wazoo_runtime::{Host, Mode};
use wazoo_tests::proxy::{op, Proxy};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(90);
/// How long the proxy holds every reply back where a test needs the delete's reply outstanding.
const DELAY: Duration = Duration::from_millis(400);

/// The releasing host's own next request comes after the delete, and is sent before the delete's
/// reply is back: the release did not wait for it, and a read of the same session right after
/// the release already sees the node gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sessions_next_request_is_applied_after_the_delete() {
    let address = zk().address();
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let path = unique("unwaited-order");
    let mut lock = host.lock("lock").await.unwrap();
    let held = within(LIMIT, "acquire", lock.acquire(&path, None)).await.unwrap();

    proxy.delay(DELAY);
    proxy.tap(None);
    let started = Instant::now();
    within(LIMIT, "release", lock.release()).await.unwrap();
    let released_in = started.elapsed();
    // The same session's next request: sent while the delete's reply is still held back.
    let seen = within(LIMIT, "a read after the release", lock.live().zk().exists(&held.node)).await.unwrap();
    let log = proxy.untap();
    proxy.delay(Duration::ZERO);

    assert!(
        released_in < DELAY,
        "the release waited {released_in:?} for the delete's reply (held {DELAY:?})"
    );
    assert!(seen.is_none(), "a read of the releasing session after the release still saw {}", held.node);
    let delete = log.iter().position(|r| r.kind == op::DELETE && r.path == held.node);
    let read = log.iter().position(|r| r.kind == op::EXISTS && r.path == held.node);
    let (Some(delete), Some(read)) = (delete, read) else {
        panic!("no delete and read of the node: {log:?}")
    };
    assert!(delete < read, "the read went out before the delete: {log:?}");
    assert_eq!(
        log[delete].answered_before, log[read].answered_before,
        "the read waited for the delete's reply: {log:?}"
    );
    assert_eq!(log[delete].err, Some(0), "the delete failed on the server: {log:?}");
    assert!(lock.ledger().is_empty() && !lock.tracks_nodes(), "the released node is still in the ledger");

    // The handle serves the next claim at once.
    let again = within(LIMIT, "acquire again", lock.acquire(&path, Some(Duration::ZERO))).await.unwrap();
    assert_ne!(again.node, held.node);
    within(LIMIT, "release again", lock.release()).await.unwrap();
    lock.close().await;
}

/// A contender of another session watching the holder's node is handed the lock only once the
/// delete is applied (the checker, which reads after the hand-over, never sees the node), and
/// the holder's acquire right after its release queues behind that contender: its create came
/// after the delete, so after the contender's node too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_session_is_handed_the_lock_only_after_the_delete() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let holder_host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let contender_host = host().await;
    let path = unique("unwaited-hand-over");

    let mut holder = holder_host.lock("lock").await.unwrap();
    let held = within(LIMIT, "holder acquires", holder.acquire(&path, None)).await.unwrap();
    let armed = contender_host.stats().watches_armed();
    let mut contender = contender_host.lock("lock").await.unwrap();
    let waiting = {
        let (path, checker, node) = (path.clone(), client(&address).await, held.node.clone());
        tokio::spawn(async move {
            let taken = contender.acquire(&path, None).await.unwrap();
            // Read as soon as the contender holds: the holder's node must be gone already.
            let still = checker.check_stat(&node).await.unwrap();
            (contender, taken, still)
        })
    };
    wait_children(&checker, &path, 2).await;
    within(LIMIT, "the contender watches the holder", contender_host.stats().armed_at_least(armed + 1)).await;

    // The holder's replies come late: its release returns before the delete is answered, and
    // its next acquire goes out right behind the delete.
    proxy.delay(DELAY);
    within(LIMIT, "holder releases", holder.release()).await.unwrap();
    let holder_again = tokio::spawn(async move {
        let again = holder.acquire(&path, None).await.unwrap();
        (holder, again)
    });
    let (mut contender, taken, still) =
        within(LIMIT, "the contender is handed the lock", waiting).await.unwrap();
    assert!(still.is_none(), "the contender held while {} was still there: {still:?}", held.node);
    assert!(taken.token > held.token);
    proxy.delay(Duration::ZERO);

    // The holder queued behind the contender: it holds only once the contender lets go.
    let queued = wait_children(&checker, &unique_parent(&taken.node), 2).await;
    assert!(queued.iter().any(|c| taken.node.ends_with(c.as_str())), "{queued:?}");
    assert!(!holder_again.is_finished(), "the holder took the lock back ahead of the contender");
    within(LIMIT, "contender releases", contender.release()).await.unwrap();
    let (holder, again) = within(LIMIT, "the holder acquires again", holder_again).await.unwrap();
    assert!(again.token > taken.token, "the holder's new node was created before the contender's");
    let mut holder = holder;
    within(LIMIT, "holder releases again", holder.release()).await.unwrap();
    holder.close().await;
    contender.close().await;
    within(LIMIT, "every node gone", wait_children(&checker, &unique_parent(&taken.node), 0)).await;
}

fn unique_parent(node: &str) -> String {
    node[..node.rfind('/').unwrap()].to_string()
}

/// A lost reply to the unwaited delete (the connection cut once the server applied it): the
/// release has returned already; the host settles the delete once it is connected again, finds
/// the node gone, and deletes nothing more. The handle keeps serving claims on the same session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_reply_to_the_delete_leaves_nothing_behind() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let path = unique("unwaited-lost");
    let mut lock = host.lock("lock").await.unwrap();
    let held = within(LIMIT, "acquire", lock.acquire(&path, None)).await.unwrap();
    let session = lock.live().zk().session_id();

    proxy.tap(None);
    proxy.lose_reply(&[op::DELETE], 1);
    within(LIMIT, "release", lock.release()).await.unwrap();
    within(LIMIT, "the delete's reply is lost", proxy.replies_lost(1)).await;
    let log = proxy.untap();
    let deletes: Vec<_> = log.iter().filter(|r| r.kind == op::DELETE).collect();
    assert_eq!(deletes.len(), 1, "the fault fired on the delete, the only one sent: {log:?}");
    assert_eq!(deletes[0].path, held.node, "{log:?}");
    assert_eq!(proxy.lost_errors(), vec![0], "the lost delete had succeeded on the server");

    let deleted_again =
        within(LIMIT, "the host settles the delete", host.faults().settled_after_loss(1)).await;
    assert_eq!(deleted_again, 0, "the node was gone: nothing to delete again");
    assert!(checker.check_stat(&held.node).await.unwrap().is_none());
    let again = within(LIMIT, "acquire on the same session", lock.acquire(&path, Some(Duration::ZERO)))
        .await
        .unwrap();
    assert_eq!(lock.live().zk().session_id(), session, "the session survived the cut");
    within(LIMIT, "release again", lock.release()).await.unwrap();
    within(LIMIT, "the second node goes", wait_gone(&checker, &again.node)).await;
    assert!(ephemerals(&checker, &path).await.is_empty());
    lock.close().await;
}

/// A delete lost on its way (never sent: the host's fault hook), for each recipe of the lock
/// family (the C lock and the Python semaphore among them, which release with `delete-unwaited`
/// through their SDKs): the release returns, the host settles the delete as a lost reply, finds
/// the node still there and still the one it created, and deletes it. The session stays open
/// throughout, so only the ledger can have removed the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_lost_on_its_way_is_done_again_by_the_ledger() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = Host::start(config(&address, Duration::from_secs(10))).await.unwrap();
    let faults = host.faults();
    let mut settled = 0;
    // The Rust builds in both layouts, then the C lock and the Python semaphore (guest/c, guest/python).
    let family = ["lock", "rwlock", "semaphore", "lock-kazoo", "rwlock-kazoo", "semaphore-kazoo"];
    for recipe in family.into_iter().chain(["lock-c", "semaphore-py"]) {
        let path = unique(&format!("unwaited-dropped-{recipe}"));
        let (node, session) = match recipe {
            "lock" | "lock-kazoo" | "lock-c" => {
                let mut h = host.lock(recipe).await.unwrap();
                let node = within(LIMIT, "acquire", h.acquire(&path, None)).await.unwrap().node;
                faults.drop_unwaited_deletes(1);
                within(LIMIT, "release", h.release()).await.unwrap();
                (node, h.live().zk().session_id())
            }
            "rwlock" | "rwlock-kazoo" => {
                let mut h = host.rwlock(recipe).await.unwrap();
                let node = within(LIMIT, "acquire", h.acquire(&path, Mode::Write, None)).await.unwrap().node;
                faults.drop_unwaited_deletes(1);
                within(LIMIT, "release", h.release()).await.unwrap();
                (node, h.live().zk().session_id())
            }
            _ => {
                let mut h = host.semaphore(recipe).await.unwrap();
                let node = within(LIMIT, "acquire", h.acquire(&path, 2, None)).await.unwrap().node;
                faults.drop_unwaited_deletes(1);
                within(LIMIT, "release", h.release()).await.unwrap();
                (node, h.live().zk().session_id())
            }
        };
        assert_eq!(
            faults.pending_dropped_unwaited_deletes(),
            0,
            "{recipe}: the release sent no unwaited delete"
        );
        settled += 1;
        let deleted_again =
            within(LIMIT, "the host settles the delete", faults.settled_after_loss(settled)).await;
        assert_eq!(deleted_again, settled, "{recipe}: the ledger did not delete the node again");
        within(LIMIT, "the node goes", wait_gone(&checker, &node)).await;
        assert!(ephemerals(&checker, &path).await.is_empty(), "{recipe}: nodes left behind");
        // The node did not go with the session: the host's session is the one it was.
        assert_eq!(host.lock("lock").await.unwrap().live().zk().session_id(), session, "{recipe}");
    }
}
