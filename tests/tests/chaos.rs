//! The chaos suite's bounded CI run: every scenario once, with fixed parameters, against real
//! ZooKeeper (a standalone server, and a 3-member ensemble whose links run through proxies).
//! Scenarios run one at a time: faults must not overlap, and convergence bounds are timed.
//!
//! The randomised soak run is `cargo run --release -p wazoo-tests --bin chaos-soak`.

use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use wazoo_tests::chaos::Lab;
use wazoo_tests::scenarios;
use wazoo_tests::zk;

/// Session timeout of the chaos sites (the servers' tick is 200 ms: 2 to 20 ticks allowed).
const SESSION: Duration = Duration::from_secs(3);

/// One scenario at a time in this binary.
async fn turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::const_new(());
    TURN.lock().await
}

async fn standalone() -> Lab {
    Lab::new(vec![zk().address()], SESSION, "/chaos").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holder_session_killed() {
    let _turn = turn().await;
    scenarios::holder_session_killed(&standalone().await).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_frozen_for_twice_the_session_timeout() {
    let _turn = turn().await;
    scenarios::host_frozen(&standalone().await, 2).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn brief_disconnect_keeps_the_lock_and_its_token() {
    let _turn = turn().await;
    scenarios::brief_disconnect(&standalone().await, SESSION / 3).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reply_lost_after_a_sequential_create() {
    let _turn = turn().await;
    scenarios::lost_create_reply(&standalone().await).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reply_lost_after_set_data() {
    let _turn = turn().await;
    scenarios::lost_set_data_reply(&standalone().await).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unlock_while_disconnected() {
    let _turn = turn().await;
    scenarios::unlock_while_disconnected(&standalone().await, SESSION / 3).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watched_nodes_change_during_a_disconnect() {
    let _turn = turn().await;
    scenarios::watched_nodes_change_while_disconnected(&standalone().await, SESSION / 3).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queue_consumer_killed_after_taking_an_item() {
    let _turn = turn().await;
    scenarios::queue_consumer_killed(&standalone().await, 30).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_phase_commit_coordinator_killed_between_votes_and_decision() {
    let _turn = turn().await;
    scenarios::coordinator_killed(&standalone().await).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn barrier_participant_session_expires() {
    let _turn = turn().await;
    scenarios::barrier_participant_expires(&standalone().await).await.assert_clean();
}
