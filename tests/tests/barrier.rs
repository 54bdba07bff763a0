//! The barrier recipe against a real ZooKeeper, and against kazoo's Barrier on the same path;
//! the double barrier with dead participants and reused in a loop. Every test runs on the Rust
//! recipe and on the C one (`guest/c/barrier`), and the two share one barrier and one double
//! barrier.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wazoo_runtime::{BarrierHandle, Host, RecipeError, ZkError};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

wazoo_tests::implementations!(rust: "barrier", c: "barrier-c"; [
    waiters_block_while_the_barrier_is_up_and_all_go_when_it_is_removed,
    kazoo_barrier_and_wazoo_barrier_are_one_barrier,
    double_barrier_enters_together_and_a_dead_participant_does_not_block_leaving,
    a_lone_newcomer_does_not_pass_a_double_barrier_whose_participants_all_died_inside,
    a_double_barrier_reused_in_a_loop_across_a_slow_link_never_hangs,
    bad_calls_are_refused_and_leave_nothing,
    a_leave_that_timed_out_goes_on_when_called_again,
]);

async fn handle(host: &Host, recipe: &str) -> BarrierHandle {
    host.barrier(recipe).await.unwrap()
}

/// Waits, by watching `path`'s children, until no process node of a double barrier is left.
async fn processes_gone(checker: &zookeeper_client::Client, path: &str) {
    loop {
        let (children, watcher) = checker.list_and_watch_children(path).await.unwrap();
        if !children.iter().any(|c| c.contains("proc-")) {
            return;
        }
        watcher.changed().await;
    }
}

async fn waiters_block_while_the_barrier_is_up_and_all_go_when_it_is_removed(recipe: &str) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = format!("{}/gate", unique("barrier"));
    let mut owner = handle(&host, recipe).await;
    assert!(owner.wait(&path, Some(Duration::from_millis(1))).await.is_ok(), "no barrier: no wait");
    assert!(owner.set(&path).await.unwrap(), "set creates the node and its parents");
    assert!(!owner.set(&path).await.unwrap(), "a second set reports it was already up");
    assert!(checker.check_stat(&path).await.unwrap().is_some());

    let mut probe = handle(&host, recipe).await;
    let blocked = probe.wait(&path, Some(Duration::from_millis(300))).await;
    assert!(matches!(blocked, Err(RecipeError::Zk(ZkError::Timeout))), "{blocked:?}");

    let before = host.stats().watch_wakeups();
    let armed_before = host.stats().watches_armed();
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let mut waiter = handle(&host, recipe).await;
        let path = path.clone();
        waiters.push(tokio::spawn(async move { waiter.wait(&path, None).await }));
    }
    // Each waiter holds an exists watch on the barrier before it is removed.
    within(LIMIT, "waiters armed", host.stats().armed_at_least(armed_before + 5)).await;
    assert!(owner.remove(&path).await.unwrap());
    assert!(!owner.remove(&path).await.unwrap(), "a second remove reports it was not up");
    for w in waiters {
        within(LIMIT, "waiter released", w).await.unwrap().unwrap();
    }
    assert_eq!(host.stats().watch_wakeups() - before, 5, "one removal wakes each waiter once");
}

async fn kazoo_barrier_and_wazoo_barrier_are_one_barrier(recipe: &str) {
    let address = zk().address();
    let path = format!("{}/gate", unique("barrier-kazoo"));
    let host = host().await;
    let mut kazoo = Kazoo::start(&address, &path).await;
    let mut ours = handle(&host, recipe).await;

    // kazoo sets it: wazoo waits until kazoo removes it.
    kazoo.send("create").await;
    assert_eq!(kazoo.line().await, "created");
    assert!(!ours.set(&path).await.unwrap(), "wazoo sees kazoo's barrier as up");
    assert!(matches!(
        ours.wait(&path, Some(Duration::from_millis(300))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    let mut waiter = handle(&host, recipe).await;
    let wait_path = path.clone();
    let waiting = tokio::spawn(async move { waiter.wait(&wait_path, None).await });
    kazoo.send("remove").await;
    assert_eq!(kazoo.line().await, "removed");
    within(LIMIT, "wazoo waiter released by kazoo", waiting).await.unwrap().unwrap();

    // wazoo sets it: kazoo waits until wazoo removes it.
    assert!(ours.set(&path).await.unwrap());
    kazoo.send("wait 0.3").await;
    assert_eq!(kazoo.line().await, "timeout");
    kazoo.send("wait 30").await;
    assert!(ours.remove(&path).await.unwrap());
    assert_eq!(kazoo.line().await, "cleared");
    kazoo.send("remove").await;
    assert_eq!(kazoo.line().await, "absent");
    kazoo.send("quit").await;
}

async fn double_barrier_enters_together_and_a_dead_participant_does_not_block_leaving(recipe: &str) {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("double");
    let host = host().await;
    let mut entering = Vec::new();
    for _ in 0..3 {
        let mut p = handle(&host, recipe).await;
        let path = path.clone();
        entering.push(tokio::spawn(async move {
            p.enter(&path, 4, None).await.unwrap();
            p
        }));
    }
    // Three are in and waiting; the barrier is not open.
    within(LIMIT, "three participants wait", wait_children(&checker, &path, 3)).await;
    let (opened, _) = checker.get_data(&path).await.unwrap();
    assert!(opened.is_empty(), "opened too early: round {}", String::from_utf8_lossy(&opened));
    assert!(entering.iter().all(|t| !t.is_finished()), "someone entered before the fourth arrived");

    // The fourth participant reaches ZooKeeper through a proxy; its entry lets everyone in.
    let proxy = Proxy::start(&address).await;
    let doomed_host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
    let mut doomed = handle(&doomed_host, recipe).await;
    doomed.enter(&path, 4, Some(LIMIT)).await.unwrap();
    let mut inside = Vec::new();
    for t in entering {
        inside.push(within(LIMIT, "everyone enters", t).await.unwrap());
    }

    // The fourth dies before leaving; the other three still get out.
    // Process nodes carry a unique prefix, so the fourth is found by its owner, not its name.
    let mut doomed_node = None;
    for child in children(&checker, &path).await {
        let stat = checker.check_stat(&format!("{path}/{child}")).await.unwrap();
        if stat.map(|s| s.ephemeral_owner) == Some(doomed.live().session_id()) {
            doomed_node = Some(child);
        }
    }
    let doomed_node = doomed_node.expect("the fourth participant's node");
    proxy.freeze();
    within(LIMIT, "the dead participant's node goes", wait_gone(&checker, &format!("{path}/{doomed_node}")))
        .await;
    let mut leaving = Vec::new();
    for mut p in inside {
        leaving.push(tokio::spawn(async move { p.leave_double(None).await }));
    }
    for l in leaving {
        within(LIMIT, "everyone leaves", l).await.unwrap().unwrap();
    }
    assert!(children(&checker, &path).await.is_empty(), "no process node left");
    proxy.thaw();
}

async fn a_lone_newcomer_does_not_pass_a_double_barrier_whose_participants_all_died_inside(recipe: &str) {
    let checker = client(&zk().address()).await;
    let path = unique("double-dead");
    let host = host().await;
    let mut entering = Vec::new();
    for _ in 0..3 {
        let mut p = handle(&host, recipe).await;
        let path = path.clone();
        entering.push(tokio::spawn(async move { p.enter(&path, 3, Some(LIMIT)).await.map(|()| p) }));
    }
    let mut inside = Vec::new();
    for t in entering {
        inside.push(within(LIMIT, "three enter", t).await.unwrap().unwrap());
    }
    // Every participant dies inside: their handles end, their nodes go.
    for p in inside {
        p.close().await;
    }
    within(LIMIT, "the dead participants' nodes go", processes_gone(&checker, &path)).await;

    let mut newcomer = handle(&host, recipe).await;
    let alone = newcomer.enter(&path, 2, Some(Duration::from_secs(1))).await;
    assert!(matches!(alone, Err(RecipeError::Zk(ZkError::Timeout))), "a lone newcomer passed: {alone:?}");
    let left: Vec<String> =
        children(&checker, &path).await.into_iter().filter(|c| c.contains("proc-")).collect();
    assert!(left.is_empty(), "the timed-out newcomer left its node: {left:?}");

    let mut first = handle(&host, recipe).await;
    let waiting = {
        let path = path.clone();
        tokio::spawn(async move { first.enter(&path, 2, Some(LIMIT)).await.map(|()| first) })
    };
    within(LIMIT, "the first of the new round waits", wait_children(&checker, &path, 1)).await;
    newcomer.enter(&path, 2, Some(LIMIT)).await.unwrap();
    let mut first = within(LIMIT, "the second lets the first in", waiting).await.unwrap().unwrap();
    let leaving = tokio::spawn(async move { first.leave_double(Some(LIMIT)).await });
    newcomer.leave_double(Some(LIMIT)).await.unwrap();
    within(LIMIT, "both leave", leaving).await.unwrap().unwrap();
}

async fn a_double_barrier_reused_in_a_loop_across_a_slow_link_never_hangs(recipe: &str) {
    reused_in_a_loop([recipe, recipe]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_and_c_take_turns_through_one_double_barrier() {
    reused_in_a_loop(["barrier", "barrier-c"]).await;
    reused_in_a_loop(["barrier-c", "barrier"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_and_c_share_one_barrier_and_enter_one_double_barrier_together() {
    let host = host().await;
    let path = format!("{}/gate", unique("barrier-mixed"));
    let mut rust = handle(&host, "barrier").await;
    let mut c = handle(&host, "barrier-c").await;
    assert!(c.set(&path).await.unwrap());
    assert!(!rust.set(&path).await.unwrap(), "Rust sees C's barrier as up");
    let mut waiter = handle(&host, "barrier").await;
    let wait_path = path.clone();
    let waiting = tokio::spawn(async move { waiter.wait(&wait_path, None).await });
    assert!(matches!(
        c.wait(&path, Some(Duration::from_millis(200))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    assert!(rust.remove(&path).await.unwrap());
    within(LIMIT, "the Rust waiter released by the Rust remove", waiting).await.unwrap().unwrap();
    assert!(!c.remove(&path).await.unwrap(), "C sees it down");

    // Four participants, two of each, on one double barrier: all enter once the fourth is in,
    // and all leave.
    let checker = client(&zk().address()).await;
    let double = unique("double-mixed");
    let mut entering = Vec::new();
    for recipe in ["barrier", "barrier-c", "barrier", "barrier-c"] {
        let mut p = handle(&host, recipe).await;
        let at = double.clone();
        entering.push(tokio::spawn(async move { p.enter(&at, 4, Some(LIMIT)).await.map(|()| p) }));
        if entering.len() < 4 {
            within(LIMIT, "the participant waits", wait_children(&checker, &double, entering.len())).await;
            assert!(entering.iter().all(|t| !t.is_finished()), "entered before the fourth arrived");
        }
    }
    let mut leaving = Vec::new();
    for t in entering {
        let mut p = within(LIMIT, "everyone enters", t).await.unwrap().unwrap();
        leaving.push(tokio::spawn(async move { p.leave_double(Some(LIMIT)).await }));
    }
    for l in leaving {
        within(LIMIT, "everyone leaves", l).await.unwrap().unwrap();
    }
    assert!(children(&checker, &double).await.is_empty(), "no process node left");
}

async fn bad_calls_are_refused_and_leave_nothing(recipe: &str) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("double-bad");
    let mut p = handle(&host, recipe).await;
    let invalid = |r: Result<(), RecipeError>| matches!(r, Err(RecipeError::Zk(ZkError::InvalidArgument(_))));
    assert!(invalid(p.enter(&path, 0, Some(LIMIT)).await), "count 0 is refused");
    assert!(invalid(p.leave_double(Some(LIMIT)).await), "leaving without entering is refused");
    let bad = p.set("no-slash").await;
    assert!(matches!(bad, Err(RecipeError::Zk(ZkError::InvalidPath(_)))), "{bad:?}");
    p.enter(&path, 1, Some(LIMIT)).await.unwrap();
    assert!(invalid(p.enter(&path, 1, Some(LIMIT)).await), "entering twice is refused");
    assert_eq!(children(&checker, &path).await.len(), 1, "one process node, ours");
    p.leave_double(Some(LIMIT)).await.unwrap();
    assert!(children(&checker, &path).await.is_empty(), "no process node left");
}

async fn a_leave_that_timed_out_goes_on_when_called_again(recipe: &str) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("double-retry");
    let mut a = handle(&host, recipe).await;
    let mut b = handle(&host, recipe).await;
    let at = path.clone();
    let entering = tokio::spawn(async move { b.enter(&at, 2, Some(LIMIT)).await.map(|()| b) });
    a.enter(&path, 2, Some(LIMIT)).await.unwrap();
    let mut b = within(LIMIT, "both enter", entering).await.unwrap().unwrap();
    // b has not left, so a's leave times out; a is still in the barrier and leaves once b does.
    let first = a.leave_double(Some(Duration::from_millis(300))).await;
    assert!(matches!(first, Err(RecipeError::Zk(ZkError::Timeout))), "{first:?}");
    let retried = tokio::spawn(async move { a.leave_double(Some(LIMIT)).await.map(|()| a) });
    b.leave_double(Some(LIMIT)).await.unwrap();
    let mut a = within(LIMIT, "the leave called again ends", retried).await.unwrap().unwrap();
    let left: Vec<String> =
        children(&checker, &path).await.into_iter().filter(|c| c.contains("proc-")).collect();
    assert!(left.is_empty(), "no process node left: {left:?}");
    let again = a.leave_double(Some(LIMIT)).await;
    assert!(matches!(again, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))), "out now: {again:?}");
}

/// Two participants, of `recipes`, enter and leave one double barrier 25 times, one of them
/// through a link that adds a millisecond each way: neither passes a round the other has not
/// begun, and no one hangs.
async fn reused_in_a_loop(recipes: [&str; 2]) {
    const ROUNDS: usize = 25;
    const STEP: Duration = Duration::from_secs(15);
    let address = zk().address();
    let path = unique("double-loop");
    let proxy = Proxy::start(&address).await;
    proxy.delay(Duration::from_millis(1));
    let slow_host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let fast_host = host().await;
    // Calls begun by each participant: [entering, leaving].
    let begun: Arc<[[AtomicUsize; 2]; 2]> = Arc::new(Default::default());
    let mut participants = Vec::new();
    for (me, host) in [fast_host, slow_host].into_iter().enumerate() {
        let (path, begun) = (path.clone(), begun.clone());
        let mut p = handle(&host, recipes[me]).await;
        participants.push(tokio::spawn(async move {
            let other = 1 - me;
            for round in 1..=ROUNDS {
                begun[me][0].fetch_add(1, Ordering::SeqCst);
                p.enter(&path, 2, Some(STEP))
                    .await
                    .unwrap_or_else(|e| panic!("{me}: enter round {round}: {e}"));
                let seen = begun[other][0].load(Ordering::SeqCst);
                assert!(seen >= round, "{me} entered round {round} before the other began it ({seen})");
                begun[me][1].fetch_add(1, Ordering::SeqCst);
                p.leave_double(Some(STEP)).await.unwrap_or_else(|e| panic!("{me}: leave round {round}: {e}"));
                let seen = begun[other][1].load(Ordering::SeqCst);
                assert!(seen >= round, "{me} left round {round} before the other began leaving it ({seen})");
            }
            p.close().await;
            host
        }));
    }
    for p in participants {
        within(STEP * 2 * ROUNDS as u32, "every round of both participants", p).await.unwrap();
    }
    assert!(children(&client(&address).await, &path).await.is_empty(), "no process node left");
}
