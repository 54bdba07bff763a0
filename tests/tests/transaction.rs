//! Two-phase commit against a real ZooKeeper, in both of the seed's variants.

use std::time::Duration;

use wazoo::{Ballot, Host, Outcome, TxMode};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn sites(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Starts the coordinator in the background and waits until the transaction exists.
async fn coordinator(
    host: &Host,
    tx: &str,
    names: &[&str],
    mode: TxMode,
    timeout: Duration,
) -> tokio::task::JoinHandle<Outcome> {
    let checker = client(&zk().address()).await;
    let mut handle = host.transaction("transaction").await.unwrap();
    let (tx_path, names) = (tx.to_string(), sites(names));
    let running = tokio::spawn(async move {
        handle.coordinate(&tx_path, &names, b"move 10 from A to B", mode, Some(timeout)).await.unwrap()
    });
    wait_children(&checker, tx, 1).await; // `meta` is there: sites may vote
    running
}

fn vote(host: &Host, tx: &str, site: &'static str, ballot: Ballot) -> tokio::task::JoinHandle<Outcome> {
    let (host, tx) = (host.clone(), tx.to_string());
    tokio::spawn(async move {
        let mut handle = host.transaction("transaction").await.unwrap();
        assert_eq!(handle.payload(&tx).await.unwrap(), b"move 10 from A to B");
        handle.vote(&tx, site, ballot, Some(LIMIT)).await.unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unanimous_commit_commits_everywhere_in_both_modes() {
    let host = host().await;
    for mode in [TxMode::AllToAll, TxMode::Coordinated] {
        let tx = unique("tx-commit");
        let coordinating = coordinator(&host, &tx, &["a", "b", "c"], mode, LIMIT).await;
        let votes: Vec<_> =
            ["a", "b", "c"].into_iter().map(|s| vote(&host, &tx, s, Ballot::Commit)).collect();
        for v in votes {
            assert_eq!(within(LIMIT, "site outcome", v).await.unwrap(), Outcome::Committed, "{mode:?}");
        }
        assert_eq!(within(LIMIT, "coordinator outcome", coordinating).await.unwrap(), Outcome::Committed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_abort_aborts_everyone_without_waiting_for_the_rest() {
    let host = host().await;
    for mode in [TxMode::AllToAll, TxMode::Coordinated] {
        let tx = unique("tx-abort");
        // Site c never votes; the transaction would only time out after a minute.
        let coordinating = coordinator(&host, &tx, &["a", "b", "c"], mode, LIMIT).await;
        let a = vote(&host, &tx, "a", Ballot::Commit);
        let b = vote(&host, &tx, "b", Ballot::Abort);
        let quick = Duration::from_secs(20);
        assert_eq!(within(quick, "abort decided early", b).await.unwrap(), Outcome::Aborted, "{mode:?}");
        assert_eq!(within(quick, "a learns the abort", a).await.unwrap(), Outcome::Aborted, "{mode:?}");
        assert_eq!(
            within(quick, "coordinator learns the abort", coordinating).await.unwrap(),
            Outcome::Aborted
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_site_that_fails_after_voting_aborts_the_transaction() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host().await;
    let tx = unique("tx-failed-site");
    let coordinating =
        coordinator(&host, &tx, &["a", "b", "c"], TxMode::Coordinated, Duration::from_secs(10)).await;
    // Site c votes commit through a proxy, then its session dies before the others vote.
    let proxy = Proxy::start(&address).await;
    let c_host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
    let mut c = c_host.transaction("transaction").await.unwrap();
    let c_tx = tx.clone();
    let _c_waits = tokio::spawn(async move { c.vote(&c_tx, "c", Ballot::Commit, None).await });
    wait_children(&checker, &tx, 2).await;
    proxy.freeze();
    within(LIMIT, "site c's session dies", wait_gone(&checker, &format!("{tx}/site-c"))).await;
    let a = vote(&host, &tx, "a", Ballot::Commit);
    let b = vote(&host, &tx, "b", Ballot::Commit);
    assert_eq!(within(LIMIT, "coordinator", coordinating).await.unwrap(), Outcome::Aborted);
    assert_eq!(within(LIMIT, "site a", a).await.unwrap(), Outcome::Aborted);
    assert_eq!(within(LIMIT, "site b", b).await.unwrap(), Outcome::Aborted);
    proxy.thaw();
}
