//! The chaos suite's bounded CI run: every scenario once, with fixed parameters, against real
//! ZooKeeper (a standalone server, and a 3-member ensemble whose links run through proxies).
//! Scenarios run one at a time: faults must not overlap, and convergence bounds are timed.
//!
//! The randomised soak run is `cargo run --release -p wazoo-tests --bin chaos-soak`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use wazoo_tests::chaos::{Cluster, Lab};
use wazoo_tests::scenarios::{self, EnsembleFault};
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

/// The 3-member ensemble of this binary, its links between members through proxies.
fn cluster() -> Arc<Cluster> {
    static CLUSTER: OnceLock<Arc<Cluster>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            let started = std::thread::spawn(|| Cluster::start(200).expect("starting the chaos ensemble"));
            Arc::new(started.join().unwrap())
        })
        .clone()
}

async fn ensemble(cluster: &Cluster) -> Lab {
    Lab::new(cluster.members.clone(), SESSION, "/chaos").await
}

async fn ensemble_fault(fault: EnsembleFault) {
    let _turn = turn().await;
    let cluster = cluster();
    scenarios::ensemble_fault(&ensemble(&cluster).await, &cluster, fault, 7).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zookeeper_leader_killed() {
    ensemble_fault(EnsembleFault::LeaderKilled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zookeeper_leader_frozen() {
    ensemble_fault(EnsembleFault::LeaderFrozen(SESSION * 2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zookeeper_leader_isolated() {
    ensemble_fault(EnsembleFault::LeaderIsolated(SESSION * 2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_connected_only_to_a_minority_member() {
    ensemble_fault(EnsembleFault::MinorityMember(SESSION * 2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zookeeper_leader_restarted_every_3s_for_a_minute() {
    let every = Duration::from_secs(3);
    ensemble_fault(EnsembleFault::LeaderRestarts { every, total: Duration::from_secs(60) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_ensemble_down_longer_than_the_session_timeout() {
    ensemble_fault(EnsembleFault::AllDown(SESSION * 2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_guest_that_traps_holding_a_lock_loses_it_at_once() {
    let _turn = turn().await;
    scenarios::guest_traps_holding_a_lock(&standalone().await).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_replies_do_not_make_two_holders() {
    let _turn = turn().await;
    scenarios::slow_replies(&standalone().await, SESSION / 6, SESSION * 2).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wazoo_process_frozen_for_twice_the_session_timeout() {
    let _turn = turn().await;
    scenarios::host_process_frozen(&standalone().await, 2).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemon_client_sessions_end_with_calls_waiting() {
    let _turn = turn().await;
    scenarios::daemon_sessions_end_with_calls_waiting(&standalone().await, 6).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemon_frozen_with_claims_held_and_calls_waiting() {
    let _turn = turn().await;
    scenarios::daemon_frozen(&standalone().await, 2).await.assert_clean();
}

/// The soak run's daemon group scenario, short: three faults (one SIGKILL, one SIGSTOP, one
/// SIGTERM, in a seeded order) on a group of three members while clients take locks, a semaphore
/// and an election through it, on the 3-member ensemble.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemon_group_members_killed_frozen_and_stopped_under_load() {
    let _turn = turn().await;
    let cluster = cluster();
    wazoo_tests::group_soak::daemons_faulted(&ensemble(&cluster).await, 3, 7).await.assert_clean();
}
