//! Two-phase commit against a real ZooKeeper, in both of the seed's variants.

use std::process::Stdio;
use std::time::Duration;

use wazoo_runtime::{Ballot, Host, Outcome, RecipeError, TxMode};
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::proxy::{op, Proxy};
use wazoo_tests::*;
use zookeeper_client::{Acls, CreateMode};

const LIMIT: Duration = Duration::from_secs(60);
/// How long a site may take to learn the outcome once its coordinator is gone (the coordinator's
/// session timeout, where it applies, is 1 s).
const BOUND: Duration = Duration::from_secs(20);

fn sites(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The coordinator's liveness node, beside the transaction's.
fn coordinator_node(tx: &str) -> String {
    format!("{tx}-coordinator")
}

/// Starts the coordinator in the background and waits until the transaction exists.
async fn coordinator(
    host: &Host,
    tx: &str,
    names: &[&str],
    mode: TxMode,
    timeout: Duration,
) -> tokio::task::JoinHandle<Result<Outcome, RecipeError>> {
    let checker = client(&zk().address()).await;
    let mut handle = host.transaction("transaction").await.unwrap();
    let (tx_path, names) = (tx.to_string(), sites(names));
    let running = tokio::spawn(async move {
        handle.coordinate(&tx_path, &names, b"move 10 from A to B", mode, Some(timeout)).await
    });
    wait_children(&checker, tx, 1).await; // `meta` is there: sites may vote
    running
}

fn vote(host: &Host, tx: &str, site: &'static str, ballot: Ballot) -> tokio::task::JoinHandle<Outcome> {
    vote_within(host, tx, site, ballot, Some(LIMIT))
}

/// A site's vote, waiting for the outcome up to `timeout` (none: no limit of its own).
fn vote_within(
    host: &Host,
    tx: &str,
    site: &'static str,
    ballot: Ballot,
    timeout: Option<Duration>,
) -> tokio::task::JoinHandle<Outcome> {
    let (host, tx) = (host.clone(), tx.to_string());
    tokio::spawn(async move {
        let mut handle = host.transaction("transaction").await.unwrap();
        assert_eq!(handle.payload(&tx).await.unwrap(), b"move 10 from A to B");
        handle.vote(&tx, site, ballot, timeout).await.unwrap()
    })
}

async fn decision(checker: &zookeeper_client::Client, tx: &str) -> String {
    let (data, _) = checker.get_data(&format!("{tx}/decision")).await.expect("a decision");
    String::from_utf8(data).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unanimous_commit_commits_everywhere_in_both_modes() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    for mode in [TxMode::AllToAll, TxMode::Coordinated] {
        let tx = unique("tx-commit");
        let coordinating = coordinator(&host, &tx, &["a", "b", "c"], mode, LIMIT).await;
        let votes: Vec<_> =
            ["a", "b", "c"].into_iter().map(|s| vote(&host, &tx, s, Ballot::Commit)).collect();
        for v in votes {
            assert_eq!(within(LIMIT, "site outcome", v).await.unwrap(), Outcome::Committed, "{mode:?}");
        }
        let outcome = within(LIMIT, "coordinator outcome", coordinating).await.unwrap().unwrap();
        assert_eq!(outcome, Outcome::Committed);
        assert!(checker.check_stat(&coordinator_node(&tx)).await.unwrap().is_none(), "coordinator done");
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
            within(quick, "coordinator learns the abort", coordinating).await.unwrap().unwrap(),
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
    assert_eq!(within(LIMIT, "coordinator", coordinating).await.unwrap().unwrap(), Outcome::Aborted);
    assert_eq!(within(LIMIT, "site a", a).await.unwrap(), Outcome::Aborted);
    assert_eq!(within(LIMIT, "site b", b).await.unwrap(), Outcome::Aborted);
    proxy.thaw();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sites_without_a_timeout_learn_aborted_when_the_coordinator_handle_is_dropped() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    for mode in [TxMode::Coordinated, TxMode::AllToAll] {
        let tx = unique("tx-coordinator-dropped");
        // Site c never votes: only the coordinator could end the wait.
        let coordinating = coordinator(&host, &tx, &["a", "b", "c"], mode, LIMIT).await;
        let a = vote_within(&host, &tx, "a", Ballot::Commit, None);
        wait_children(&checker, &tx, 2).await; // a voted and waits
        coordinating.abort();
        assert!(coordinating.await.unwrap_err().is_cancelled());
        // b votes once the coordinator is gone.
        let b = vote_within(&host, &tx, "b", Ballot::Commit, None);
        assert_eq!(within(BOUND, "a learns the outcome", a).await.unwrap(), Outcome::Aborted, "{mode:?}");
        assert_eq!(within(BOUND, "b learns the outcome", b).await.unwrap(), Outcome::Aborted, "{mode:?}");
        assert_eq!(decision(&checker, &tx).await, "aborted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sites_without_a_timeout_learn_aborted_when_the_coordinators_session_expires() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host().await;
    for mode in [TxMode::Coordinated, TxMode::AllToAll] {
        let tx = unique("tx-coordinator-expired");
        // The coordinator reaches ZooKeeper through a proxy that can silence it.
        let proxy = Proxy::start(&address).await;
        let k_host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
        let coordinating = coordinator(&k_host, &tx, &["a", "b"], mode, LIMIT).await;
        let a = vote_within(&host, &tx, "a", Ballot::Commit, None);
        wait_children(&checker, &tx, 2).await;
        proxy.freeze();
        within(LIMIT, "the coordinator's session expires", wait_gone(&checker, &coordinator_node(&tx))).await;
        let b = vote_within(&host, &tx, "b", Ballot::Commit, None);
        assert_eq!(within(BOUND, "a learns the outcome", a).await.unwrap(), Outcome::Aborted, "{mode:?}");
        assert_eq!(within(BOUND, "b learns the outcome", b).await.unwrap(), Outcome::Aborted, "{mode:?}");
        assert_eq!(decision(&checker, &tx).await, "aborted");
        proxy.thaw();
        // The coordinator never reports another outcome than the one recorded.
        let reported = within(LIMIT, "the coordinator returns", coordinating).await.unwrap();
        assert!(!matches!(reported, Ok(Outcome::Committed)), "the coordinator says {reported:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_reply_creating_the_transaction_leaves_one_well_formed_transaction() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host().await;
    // The parent exists, so the request that creates the transaction succeeds on the server.
    let dir = unique("tx-lost-reply");
    checker.mkdir(&dir, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let tx = format!("{dir}/tx");
    let proxy = Proxy::start(&address).await;
    let k_host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let mut k = k_host.transaction("transaction").await.unwrap();
    proxy.lose_reply(&[op::CREATE, op::CREATE2, op::MULTI], 1);
    let (k_tx, k_sites) = (tx.clone(), sites(&["a"]));
    let coordinating = tokio::spawn(async move {
        let outcome =
            k.coordinate(&k_tx, &k_sites, b"move 10 from A to B", TxMode::Coordinated, Some(LIMIT)).await;
        (k, outcome)
    });
    within(LIMIT, "the reply is lost", proxy.replies_lost(1)).await;
    // The request whose reply was lost took effect: the whole transaction is there.
    assert!(checker.check_stat(&tx).await.unwrap().is_some(), "the transaction node");
    assert!(
        checker.check_stat(&format!("{tx}/meta")).await.unwrap().is_some(),
        "the transaction was created without its site list"
    );
    let a = vote(&host, &tx, "a", Ballot::Commit);
    assert_eq!(within(LIMIT, "site a", a).await.unwrap(), Outcome::Committed);
    let (k, outcome) = within(LIMIT, "the coordinator", coordinating).await.unwrap();
    assert_eq!(outcome.expect("the coordinator resolves its lost reply"), Outcome::Committed);
    assert_eq!(proxy.lost_replies(), 1);
    assert_eq!(proxy.lost_errors(), [0], "the request whose reply was lost succeeded on the server");
    assert_eq!(children(&checker, &dir).await, ["tx"], "one transaction, and no coordinator left");
    assert_eq!(decision(&checker, &tx).await, "committed");
    let (payload, _) = checker.get_data(&tx).await.unwrap();
    assert_eq!(payload, b"move 10 from A to B");
    k.close().await;
}

/// `wazoo 2pc coordinate` killed: a `wazoo 2pc vote` given no `--timeout` learns `aborted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cli_site_learns_aborted_when_the_cli_coordinator_is_killed() {
    let checker = client(&zk().address()).await;
    let tx = unique("tx-cli-killed");
    let mut coordinator = cli()
        .args(["--session-timeout", "1s", "2pc", "coordinate", &tx, "--sites", "a,b"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    within(LIMIT, "the transaction starts", wait_children(&checker, &tx, 1)).await;
    coordinator.start_kill().unwrap();
    coordinator.wait().await.unwrap();
    let mut voting = cli();
    voting.args(["2pc", "vote", &tx, "--site", "a", "commit"]);
    let (code, stdout, stderr) = within(BOUND, "the site learns the outcome", output(&mut voting)).await;
    assert_eq!((code, stdout.trim()), (6, "aborted"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clean_refuses_a_transaction_in_progress_and_deletes_a_decided_one() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let tx = unique("tx-clean");
    let coordinating = coordinator(&host, &tx, &["a"], TxMode::Coordinated, LIMIT).await;
    let (code, stdout, stderr) = output(cli().args(["2pc", "clean", &tx])).await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("in progress"), "{stderr}");
    assert_eq!(children(&checker, &tx).await, ["meta"], "a transaction in progress is left alone");
    let a = vote(&host, &tx, "a", Ballot::Commit);
    assert_eq!(within(LIMIT, "site a", a).await.unwrap(), Outcome::Committed);
    assert_eq!(within(LIMIT, "coordinator", coordinating).await.unwrap().unwrap(), Outcome::Committed);
    let (code, stdout, stderr) = output(cli().args(["2pc", "clean", &tx])).await;
    assert_eq!((code, stdout.trim()), (0, format!("cleaned {tx}: committed").as_str()), "{stderr}");
    assert!(checker.check_stat(&tx).await.unwrap().is_none(), "the transaction is gone");
    assert!(checker.check_stat(&coordinator_node(&tx)).await.unwrap().is_none());
    let (code, _, stderr) = output(cli().args(["2pc", "clean", &tx])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no transaction"), "{stderr}");
    let (code, _, stderr) = output(cli().args(["2pc", "clean", "relative/tx"])).await;
    assert_eq!((code, stderr.lines().count()), (2, 1), "an invalid path is bad usage: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clean_aborts_a_transaction_whose_coordinator_is_gone_and_clears_an_orphan() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let tx = unique("tx-clean-orphan");
    let coordinating = coordinator(&host, &tx, &["a", "b"], TxMode::Coordinated, LIMIT).await;
    coordinating.abort();
    let _ = coordinating.await;
    within(LIMIT, "the coordinator's node goes", wait_gone(&checker, &coordinator_node(&tx))).await;
    let (code, stdout, stderr) = output(cli().args(["2pc", "clean", &tx])).await;
    assert_eq!((code, stdout.trim()), (0, format!("cleaned {tx}: aborted").as_str()), "{stderr}");
    assert!(checker.check_stat(&tx).await.unwrap().is_none(), "the transaction is gone");
    // A transaction node without its site list, as a coordinator that crashed between two
    // creates left it.
    let orphan = unique("tx-orphan");
    checker.mkdir(&orphan, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let (code, stdout, stderr) = output(cli().args(["2pc", "clean", &orphan])).await;
    assert_eq!((code, stdout.trim()), (0, format!("cleaned {orphan}: aborted").as_str()), "{stderr}");
    assert!(checker.check_stat(&orphan).await.unwrap().is_none(), "the orphan is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clean_through_the_daemon() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    let through = || {
        let mut command = cli();
        command.env("WAZOO_ZOOKEEPER", "127.0.0.1:1").arg("--server").arg(&daemon.grpc);
        command
    };
    let tx = unique("tx-clean-remote");
    let coordinating = coordinator(&host, &tx, &["a"], TxMode::AllToAll, LIMIT).await;
    let (code, _, stderr) = output(through().args(["2pc", "clean", &tx])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("in progress"), "{stderr}");
    let a = vote(&host, &tx, "a", Ballot::Abort);
    assert_eq!(within(LIMIT, "site a", a).await.unwrap(), Outcome::Aborted);
    assert_eq!(within(LIMIT, "coordinator", coordinating).await.unwrap().unwrap(), Outcome::Aborted);
    let (code, stdout, stderr) = output(through().args(["2pc", "clean", &tx])).await;
    assert_eq!((code, stdout.trim()), (0, format!("cleaned {tx}: aborted").as_str()), "{stderr}");
    assert!(checker.check_stat(&tx).await.unwrap().is_none(), "the transaction is gone");
    let (code, _, stderr) = output(through().args(["2pc", "clean", &tx])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no transaction"), "{stderr}");
}
