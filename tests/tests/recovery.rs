//! Failure cases across recipes: a create whose reply is lost, a holder whose session expires
//! mid-protocol, a timed-out campaign. Every recipe that creates a sequential node must recover
//! it by its unique prefix, claim nothing it does not own, and leave nothing behind.

use std::time::Duration;

use wazoo_runtime::SessionEnd;
use wazoo_runtime::{Host, Lost, Mode, RecipeError, ZkError};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;
use zookeeper_client::{Acls, CreateMode};

const LIMIT: Duration = Duration::from_secs(60);

/// A fresh directory that exists, so the next successful create is the recipe's own node.
async fn prepared(name: &str) -> (zookeeper_client::Client, String) {
    let checker = client(&zk().address()).await;
    let path = unique(name);
    checker.mkdir(&path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    (checker, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_create_replies_leave_one_node_for_every_sequential_recipe() {
    let host = host().await;

    let (checker, path) = prepared("lost-rw").await;
    host.faults().lose_create_replies(1);
    let mut rw = host.rwlock("rwlock").await.unwrap();
    let held = rw.acquire(&path, Mode::Write, Some(LIMIT)).await.unwrap();
    assert_eq!(host.faults().pending_lost_create_replies(), 0);
    assert_eq!(children(&checker, &path).await.len(), 1, "rwlock: one node after a lost reply");
    assert!(held.node.contains("-__WRIT__"));
    rw.release().await.unwrap();

    let (checker, path) = prepared("lost-elect").await;
    host.faults().lose_create_replies(1);
    let mut candidate = host.election("election").await.unwrap();
    candidate.campaign(&path, "solo", Some(LIMIT)).await.unwrap();
    assert_eq!(host.faults().pending_lost_create_replies(), 0);
    assert_eq!(children(&checker, &path).await.len(), 1, "election: one proposal after a lost reply");
    candidate.resign().await.unwrap();

    let (checker, path) = prepared("lost-sem").await;
    for dir in ["locks", "leases"] {
        checker
            .mkdir(&format!("{path}/{dir}"), &CreateMode::Persistent.with_acls(Acls::anyone_all()))
            .await
            .unwrap();
    }
    // Both the semaphore's mutex node and its lease lose their replies.
    host.faults().lose_create_replies(2);
    let mut sem = host.semaphore("semaphore").await.unwrap();
    sem.acquire(&path, 1, Some(LIMIT)).await.unwrap();
    assert_eq!(host.faults().pending_lost_create_replies(), 0);
    assert_eq!(children(&checker, &format!("{path}/leases")).await.len(), 1, "semaphore: one lease");
    assert!(children(&checker, &format!("{path}/locks")).await.is_empty(), "semaphore: mutex let go");
    sem.release().await.unwrap();

    let (checker, path) = prepared("lost-group").await;
    host.faults().lose_create_replies(1);
    let mut member = host.group("group").await.unwrap();
    member.join(&path, "m1", b"").await.unwrap();
    assert_eq!(children(&checker, &path).await, vec!["m1".to_string()], "group: joined once");
    member.leave().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expired_holders_of_a_write_lock_and_a_lease_let_waiters_in() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host().await;
    let proxy = Proxy::start(&address).await;
    let doomed_host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();

    let rw_path = unique("expire-rw");
    let mut writer = doomed_host.rwlock("rwlock").await.unwrap();
    let write = writer.acquire(&rw_path, Mode::Write, None).await.unwrap();
    let writer_lost = writer.lost();
    let sem_path = unique("expire-sem");
    let mut lessee = doomed_host.semaphore("semaphore").await.unwrap();
    let lease = lessee.acquire(&sem_path, 1, None).await.unwrap();

    let mut reader = host.rwlock("rwlock").await.unwrap();
    let rw_for_reader = rw_path.clone();
    let reading =
        tokio::spawn(async move { reader.acquire(&rw_for_reader, Mode::Read, None).await.map(|_| reader) });
    let mut waiter = host.semaphore("semaphore").await.unwrap();
    let sem_for_waiter = sem_path.clone();
    let leasing = tokio::spawn(async move { waiter.acquire(&sem_for_waiter, 1, None).await.map(|_| waiter) });
    wait_children(&checker, &rw_path, 2).await;

    proxy.freeze();
    within(LIMIT, "the write lock goes with the session", wait_gone(&checker, &write.node)).await;
    within(LIMIT, "the lease goes with the session", wait_gone(&checker, &lease.node)).await;
    let mut reader = within(LIMIT, "the reader gets in", reading).await.unwrap().unwrap();
    let mut waiter = within(LIMIT, "the waiter gets the lease", leasing).await.unwrap().unwrap();
    proxy.thaw();
    // Cut off from ZooKeeper for 2/3 of its session timeout, the writer may be told so first.
    let told = within(LIMIT, "the writer is told", writer_lost).await;
    assert!(matches!(told, Lost::Session(SessionEnd::Expired) | Lost::CutOff(_)), "{told:?}");
    reader.release().await.unwrap();
    waiter.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_timed_out_campaign_leaves_no_proposal() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("elect-timeout");
    let mut leader = host.election("election").await.unwrap();
    leader.campaign(&path, "leader", None).await.unwrap();
    let mut hopeful = host.election("election").await.unwrap();
    let outcome = hopeful.campaign(&path, "hopeful", Some(Duration::from_millis(300))).await;
    assert!(matches!(outcome, Err(RecipeError::Zk(ZkError::Timeout))), "{outcome:?}");
    assert_eq!(children(&checker, &path).await.len(), 1, "the timed-out proposal is gone");
    leader.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_closing_handle_deletes_only_the_nodes_it_created_not_a_later_node_of_the_same_name() {
    let (checker, path) = prepared("ledger-same-name").await;
    let host = host().await;
    let mut first = host.group("group").await.unwrap();
    first.join(&path, "m", b"first").await.unwrap();
    let node = format!("{path}/m");
    // Someone else deletes the first handle's node; a second handle on the same session then
    // creates a node of the same name.
    checker.delete(&node, None).await.unwrap();
    let mut second = host.group("group").await.unwrap();
    second.join(&path, "m", b"second").await.unwrap();
    let (data, stat) = checker.get_data(&node).await.unwrap();
    assert_eq!(data, b"second");
    assert_eq!(stat.ephemeral_owner, first.live().session_id(), "both handles share one session");

    first.close().await;
    let after = checker.get_data(&node).await.ok();
    assert_eq!(after, Some((data, stat)), "the first handle's cleanup left the second's node alone");
    second.close().await;
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "the second handle's node went with it");
}
