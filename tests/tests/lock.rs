//! The lock recipe, through the host, against a real ZooKeeper.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use wazoo_runtime::{Host, LockHandle, Lost, RecipeError, ZkError};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(90);

/// Makes `path` a persistent node, so the next create under it is a lock node itself.
async fn made(checker: &zookeeper_client::Client, path: &str) {
    let open = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.mkdir(path, &open).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutual_exclusion_with_eight_contenders() {
    let host = host().await;
    let path = unique("mutex");
    let busy = Arc::new(AtomicBool::new(false));
    let last_token = Arc::new(AtomicI64::new(0));
    let mut contenders = Vec::new();
    for _ in 0..8 {
        let (host, path, busy, last_token) = (host.clone(), path.clone(), busy.clone(), last_token.clone());
        contenders.push(tokio::spawn(async move {
            let mut lock = host.lock("lock").await.unwrap();
            for _ in 0..5 {
                let held = lock.acquire(&path, None).await.unwrap();
                assert!(!busy.swap(true, Ordering::SeqCst), "two holders at once");
                let previous = last_token.swap(held.token, Ordering::SeqCst);
                assert!(held.token > previous, "fencing token {} not above {previous}", held.token);
                // Hold for a moment so an overlap, if the recipe allowed one, would be seen.
                tokio::time::sleep(Duration::from_millis(3)).await;
                busy.store(false, Ordering::SeqCst);
                lock.release().await.unwrap();
            }
            lock.close().await;
        }));
    }
    within(LIMIT, "8 contenders × 5 rounds", async {
        for c in contenders {
            c.await.unwrap();
        }
    })
    .await;
    let checker = client(&zk().address()).await;
    assert!(children(&checker, &path).await.is_empty(), "lock nodes left behind");
}

/// A holder plus `n` waiters queued in a known order (each one's node exists before the next
/// starts). Each waiter reports its index when it acquires, then releases.
async fn queue_waiters(host: &Host, path: &str, n: usize) -> (LockHandle, mpsc::UnboundedReceiver<usize>) {
    let checker = client(&zk().address()).await;
    let mut holder = host.lock("lock").await.unwrap();
    holder.acquire(path, None).await.unwrap();
    let armed = host.stats().watches_armed();
    let (tx, rx) = mpsc::unbounded_channel();
    for i in 0..n {
        let mut waiter = host.lock("lock").await.unwrap();
        let (lock_path, tx) = (path.to_string(), tx.clone());
        tokio::spawn(async move {
            waiter.acquire(&lock_path, None).await.unwrap();
            tx.send(i).unwrap();
            waiter.release().await.unwrap();
            waiter.close().await;
        });
        wait_children(&checker, path, i + 2).await;
    }
    // Every waiter watches its predecessor before the holder lets go.
    within(LIMIT, "waiters arm their watches", host.stats().armed_at_least(armed + n as u64)).await;
    (holder, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_acquire_in_arrival_order() {
    let host = host().await;
    let path = unique("fifo");
    let (mut holder, mut order) = queue_waiters(&host, &path, 6).await;
    holder.release().await.unwrap();
    let mut seen = Vec::new();
    within(LIMIT, "all waiters acquire", async {
        while seen.len() < 6 {
            seen.push(order.recv().await.unwrap());
        }
    })
    .await;
    assert_eq!(seen, vec![0, 1, 2, 3, 4, 5], "waiters must acquire first come, first served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_release_wakes_exactly_one_waiter() {
    let host = host().await;
    let path = unique("herd");
    let n = 6;
    let (mut holder, mut order) = queue_waiters(&host, &path, n).await;
    let before = host.stats().watch_wakeups();
    holder.release().await.unwrap();
    within(LIMIT, "first waiter acquires", order.recv()).await.unwrap();
    within(LIMIT, "every waiter acquires", async {
        for _ in 1..n {
            order.recv().await.unwrap();
        }
    })
    .await;
    // n releases happened (the holder's and n-1 waiters'); each must have woken one waiter.
    // A herd (every waiter watching the holder) would wake n + (n-1) + … guests.
    let woken = host.stats().watch_wakeups() - before;
    assert_eq!(woken, n as u64, "each release must wake exactly one waiter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timed_out_acquire_leaves_no_node() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("timeout");
    let mut holder = host.lock("lock").await.unwrap();
    holder.acquire(&path, None).await.unwrap();

    let mut waiter = host.lock("lock").await.unwrap();
    let started = std::time::Instant::now();
    let outcome = waiter.acquire(&path, Some(Duration::from_millis(400))).await;
    assert!(matches!(outcome, Err(RecipeError::Zk(ZkError::Timeout))), "{outcome:?}");
    assert!(started.elapsed() >= Duration::from_millis(400), "gave up before its timeout");
    assert_eq!(children(&checker, &path).await.len(), 1, "the timed-out waiter left its node");
    assert!(waiter.ledger().is_empty());

    // try-acquire: none while held, and nothing left behind.
    assert!(waiter.try_acquire(&path).await.unwrap().is_none());
    assert_eq!(children(&checker, &path).await.len(), 1);

    holder.release().await.unwrap();
    let held = waiter.try_acquire(&path).await.unwrap().expect("free lock taken by try-acquire");
    assert_eq!(children(&checker, &path).await, vec![held.node.rsplit('/').next().unwrap().to_string()]);
    waiter.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the lock node goes", wait_children(&checker, &path, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_acquire_leaves_no_node() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("cancel");
    let mut holder = host.lock("lock").await.unwrap();
    holder.acquire(&path, None).await.unwrap();

    // Closed explicitly after the cancel.
    let mut waiter = host.lock("lock").await.unwrap();
    {
        let acquire = waiter.acquire(&path, None);
        tokio::pin!(acquire);
        tokio::select! {
            outcome = &mut acquire => panic!("acquired a held lock: {outcome:?}"),
            _ = wait_children(&checker, &path, 2) => {}
        }
    } // the acquire future is dropped here: the caller cancelled
    assert!(waiter.is_retired(), "a cancelled instance must not be reused");
    assert!(matches!(waiter.acquire(&path, None).await, Err(RecipeError::Retired)));
    assert!(waiter.tracks_nodes(), "the host's ledger knows the waiter's node");
    waiter.close().await;
    assert_eq!(children(&checker, &path).await.len(), 1, "close deleted the cancelled waiter's node");

    // Dropped without close: the host still deletes its node.
    let mut dropped = host.lock("lock").await.unwrap();
    {
        let acquire = dropped.acquire(&path, None);
        tokio::pin!(acquire);
        tokio::select! {
            outcome = &mut acquire => panic!("acquired a held lock: {outcome:?}"),
            _ = wait_children(&checker, &path, 2) => {}
        }
    }
    drop(dropped);
    within(LIMIT, "dropped handle's node deleted", wait_children(&checker, &path, 1)).await;
    holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_create_reply_leaves_one_node_and_still_acquires() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("lostreply");
    // The lock's parent exists, so the next successful create is the lock node itself.
    made(&checker, &path).await;
    host.faults().lose_create_replies(1);
    let mut lock = host.lock("lock").await.unwrap();
    let held =
        within(LIMIT, "acquire after a lost reply", lock.acquire(&path, Some(Duration::from_secs(20))))
            .await
            .expect("the recipe recovers its node by its GUID prefix");
    assert_eq!(host.faults().pending_lost_create_replies(), 0, "the fault was not injected");
    let nodes = children(&checker, &path).await;
    assert_eq!(nodes.len(), 1, "exactly one node after a lost create reply: {nodes:?}");
    assert_eq!(format!("{path}/{}", nodes[0]), held.node);
    let stat = checker.check_stat(&held.node).await.unwrap().unwrap();
    assert_eq!(stat.ephemeral_owner, lock.live().session_id());
    assert_eq!(stat.czxid, held.token, "the fencing token is the node's czxid");
    lock.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the lock node goes", wait_children(&checker, &path, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expired_holder_is_told_and_a_contender_acquires() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("expiry");
    // The holder reaches ZooKeeper through a proxy that can silence it.
    let proxy = wazoo_tests::proxy::Proxy::start(&address).await;
    let holder_host = Host::start(config(&proxy.address(), Duration::from_secs(2))).await.unwrap();
    let contender_host = host().await;

    let mut holder = holder_host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    let lost = holder.lost();
    let mut contender = contender_host.lock("lock").await.unwrap();
    let path2 = path.clone();
    let waiting = tokio::spawn(async move {
        let held = contender.acquire(&path2, None).await.unwrap();
        (contender, held)
    });
    wait_children(&checker, &path, 2).await;

    // Silence the holder until the server expires its session and deletes its node.
    proxy.freeze();
    within(LIMIT, "server expires the silenced session", wait_gone(&checker, &held.node)).await;
    proxy.thaw();
    let reason = within(LIMIT, "holder told its lock is lost", lost).await;
    // Told before the server expired the session: nothing was answered for 2/3 of its timeout.
    assert!(matches!(reason, Lost::CutOff(_)), "{reason:?}");
    let (mut contender, taken) = within(LIMIT, "contender acquires", waiting).await.unwrap();
    assert!(taken.token > held.token, "the new holder's token must be higher");

    // Releasing a lost lock is harmless; the host builds a new session for new handles.
    holder.release().await.unwrap();
    let mut again = holder_host.lock("lock").await.unwrap();
    assert_eq!(again.live().generation, 2, "a new session after expiry");
    assert!(again.try_acquire(&path).await.unwrap().is_none(), "the contender holds it now");
    contender.release().await.unwrap();
    assert!(again.try_acquire(&path).await.unwrap().is_some());
    again.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_survives_ensemble_leader_kill() {
    let mut ensemble = tokio::task::spawn_blocking(|| Ensemble::start(3, 500)).await.unwrap().unwrap();
    let address = ensemble.address();
    let host = Host::start(config(&address, Duration::from_secs(10))).await.unwrap();
    let path = unique("ensemble");
    let mut holder = host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    let lost = holder.lost();
    tokio::pin!(lost);

    let leader = ensemble.leader().expect("a leader");
    ensemble.servers[leader].kill();
    let ensemble = tokio::task::spawn_blocking(move || {
        ensemble.wait_quorum(Duration::from_secs(60)).expect("a new quorum");
        ensemble
    })
    .await
    .unwrap();

    let checker = client(&ensemble.address()).await;
    let stat = checker.check_stat(&held.node).await.unwrap().expect("lock node kept");
    assert_eq!(stat.czxid, held.token, "same node, same fencing token");
    tokio::select! {
        biased;
        reason = &mut lost => panic!("holder told its lock was lost: {reason}"),
        _ = std::future::ready(()) => {}
    }
    let mut contender = host.lock("lock").await.unwrap();
    assert!(contender.try_acquire(&path).await.unwrap().is_none(), "the lock is still held");
    holder.release().await.unwrap();
    let taken = contender.try_acquire(&path).await.unwrap().expect("released lock taken");
    assert!(taken.token > held.token);
    contender.release().await.unwrap();
    drop(ensemble);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_paths_get_a_clear_error_and_create_nothing() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let base = unique("badpath");
    let trailing = format!("{base}/");
    let nul = format!("{base}\0x");
    let cases: [(&str, &str); 5] = [
        ("relative/lock", "absolute"),
        ("", "empty"),
        (&nul, "character"),
        (&trailing, "end with"),
        ("/a/../b", "relative component"),
    ];
    for (path, why) in cases {
        let mut lock = host.lock("lock").await.unwrap();
        match lock.acquire(path, Some(Duration::from_secs(1))).await {
            Err(RecipeError::Zk(ZkError::InvalidPath(message))) => {
                assert!(message.contains(why), "{path:?}: message {message:?} does not say {why:?}")
            }
            other => panic!("{path:?}: expected invalid-path, got {other:?}"),
        }
        assert!(!lock.is_retired(), "a refused path is an error, not a trap");
        assert!(lock.ledger().is_empty());
    }
    assert!(checker.check_stat(&base).await.unwrap().is_none(), "nothing created for bad paths");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_is_reentrant_and_release_without_hold_is_an_error() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("reentrant");
    let mut lock = host.lock("lock").await.unwrap();
    let first = lock.acquire(&path, None).await.unwrap();
    let second = lock.acquire(&path, None).await.unwrap();
    assert_eq!(
        (&first.node, first.token),
        (&second.node, second.token),
        "re-acquiring returns the same node"
    );
    assert_eq!(children(&checker, &path).await.len(), 1);
    lock.release().await.unwrap();
    assert_eq!(children(&checker, &path).await.len(), 1, "still held after one of two releases");
    lock.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the lock node goes", wait_children(&checker, &path, 0)).await;
    assert!(matches!(lock.release().await, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_for_the_lock_does_not_count_against_the_cpu_budget() {
    let mut settings = config(&zk().address(), Duration::from_secs(10));
    settings.limits.cpu_per_call = Duration::from_millis(200);
    let host = Host::start(settings).await.unwrap();
    let checker = client(&zk().address()).await;
    let path = unique("budget");
    let mut holder = host.lock("lock").await.unwrap();
    holder.acquire(&path, None).await.unwrap();
    let mut waiter = host.lock("lock").await.unwrap();
    let lock_path = path.clone();
    let waiting = tokio::spawn(async move {
        let outcome = waiter.acquire(&lock_path, None).await;
        (waiter, outcome)
    });
    wait_children(&checker, &path, 2).await;
    // Hold for four times the waiter's CPU budget: it is blocked on a watch, not running.
    tokio::time::sleep(Duration::from_millis(800)).await;
    holder.release().await.unwrap();
    let (mut waiter, outcome) = within(LIMIT, "waiter acquires", waiting).await.unwrap();
    outcome.expect("a guest blocked on ZooKeeper must not be stopped by its CPU limit");
    waiter.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revocation_is_seen_by_the_holder_and_forced_after_the_grace_period() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("revoke");
    let mut holder = host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    let lost = tokio::spawn(holder.lost());
    let mut revoker = host.lock("lock").await.unwrap();
    // Asked to let go, the holder is told so (its node stays until it releases)...
    assert!(revoker.revoke(&held.node, None).await.unwrap());
    assert_eq!(within(LIMIT, "the holder learns of the revocation", lost).await.unwrap(), Lost::Revoked);
    assert_eq!(children(&checker, &path).await.len(), 1);
    // ...and when it does not let go, the revoker deletes its node after the grace period.
    let released = revoker.revoke(&held.node, Some(Duration::from_millis(300))).await.unwrap();
    assert!(!released, "the revocation had to be forced");
    assert!(children(&checker, &path).await.is_empty(), "forced revocation deleted the node");
    assert!(revoker.revoke(&held.node, None).await.unwrap(), "revoking a node that is gone is done");
    // A contender takes the lock at once.
    let mut next = host.lock("lock").await.unwrap();
    let taken = next.try_acquire(&path).await.unwrap().expect("the revoked lock is free");
    assert!(taken.token > held.token);
    next.release().await.unwrap();
}

/// An uncontended acquire is one round trip: the create and the listing leave together, before
/// the create's reply is back (replies are held back a while so that "together" is certain).
/// And a hand-over is one notification: once the holder's node is deleted, the waiter, whose
/// predecessor was the lowest node, holds without asking ZooKeeper anything more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_acquire_is_one_round_trip_and_a_hand_over_needs_no_listing() {
    one_round_trip_and_a_hand_over_without_listing("lock").await
}

/// The same of the lock in C (`guest/c/lock`, `lock-c`): its contention is the host's too, so it
/// costs what the Rust lock's does. (The C layer's own loop, a protected create and then a
/// listing, took a round trip more, and listed again after every wait.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_c_acquire_is_one_round_trip_and_a_hand_over_needs_no_listing() {
    one_round_trip_and_a_hand_over_without_listing("lock-c").await
}

async fn one_round_trip_and_a_hand_over_without_listing(recipe: &str) {
    use wazoo_tests::proxy::{op, Proxy};
    let address = zk().address();
    let proxy = Proxy::start(&address).await;
    let waiter_host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let holder_host = host().await;
    let path = unique("round-trips");
    let checker = client(&address).await;
    made(&checker, &path).await;

    let mut waiter = waiter_host.lock(recipe).await.unwrap();
    proxy.delay(Duration::from_millis(40));
    proxy.tap(None);
    let held = within(LIMIT, "uncontended acquire", waiter.acquire(&path, None)).await.unwrap();
    let log = proxy.untap();
    proxy.delay(Duration::ZERO);
    let sent: Vec<_> = log.iter().filter(|r| r.path.starts_with(&path)).collect();
    assert_eq!(
        sent.iter().map(|r| r.kind).collect::<Vec<_>>(),
        vec![op::CREATE2, op::GET_CHILDREN2],
        "an uncontended acquire is a create and a listing: {log:?}"
    );
    assert_eq!(
        sent[0].answered_before, sent[1].answered_before,
        "the listing waited for the create: {log:?}"
    );
    waiter.release().await.unwrap();

    // The holder is another host; the waiter queues behind it.
    let mut holder = holder_host.lock("lock").await.unwrap();
    let first = holder.acquire(&path, None).await.unwrap();
    proxy.tap(None);
    let waiting = tokio::spawn({
        let path = path.clone();
        async move {
            let held = waiter.acquire(&path, None).await;
            (waiter, held)
        }
    });
    // The waiter has armed its watch on the holder's node.
    // The waiter has armed its watches: on its own node, and on the holder's, just before it.
    within(LIMIT, "the waiter watches", proxy.answered(|r| r.watch && r.path == first.node)).await;
    proxy.tap(None);
    holder.release().await.unwrap();
    let (mut waiter, second) = within(LIMIT, "the hand-over", waiting).await.unwrap();
    let second = second.unwrap();
    let after = proxy.untap();
    assert!(second.token > first.token && second.token > held.token);
    assert!(
        after.iter().all(|r| !r.path.starts_with(&path)),
        "the waiter asked ZooKeeper again after the notification: {after:?}"
    );
    waiter.release().await.unwrap();
    waiter.close().await;
    holder.close().await;
}

/// A waiter whose own node is deleted while it waits (a revocation with no grace, an operator)
/// does not take the lock when its predecessor goes, even though that predecessor was the
/// lowest node: it fails with `no-node`, and the contender that came after it holds alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_whose_node_was_deleted_does_not_take_the_hand_over() {
    let host = host().await;
    let other = Host::start(config(&zk().address(), Duration::from_secs(10))).await.unwrap();
    let checker = client(&zk().address()).await;
    let path = unique("deleted-waiter");
    let mut holder = host.lock("lock").await.unwrap();
    let first = holder.acquire(&path, None).await.unwrap();
    let mut waiter = other.lock("lock").await.unwrap();
    let waiting = tokio::spawn({
        let path = path.clone();
        async move {
            let held = waiter.acquire(&path, None).await;
            (waiter, held)
        }
    });
    // The waiter's node appears; then it is deleted behind its back.
    let mine = within(LIMIT, "the waiter queues", async {
        loop {
            let nodes = children(&checker, &path).await;
            if nodes.len() == 2 {
                break format!("{path}/{}", nodes.iter().find(|n| !first.node.ends_with(*n)).unwrap());
            }
            let (_, watcher) = checker.list_and_watch_children(&path).await.unwrap();
            if children(&checker, &path).await.len() < 2 {
                watcher.changed().await;
            }
        }
    })
    .await;
    checker.delete(&mine, None).await.unwrap();
    let mut third = host.lock("lock").await.unwrap();
    let later = tokio::spawn({
        let path = path.clone();
        async move {
            let held = third.acquire(&path, None).await;
            (third, held)
        }
    });
    holder.release().await.unwrap();
    let (waiter, refused) = within(LIMIT, "the waiter gives up", waiting).await.unwrap();
    assert!(
        matches!(refused, Err(RecipeError::Zk(ZkError::NoNode))),
        "the waiter without a node held: {refused:?}"
    );
    let (mut third, held) = within(LIMIT, "the later contender", later).await.unwrap();
    assert!(held.unwrap().token > first.token);
    third.release().await.unwrap();
    for h in [holder, waiter, third] {
        h.close().await;
    }
}
