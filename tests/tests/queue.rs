//! The queue recipe against a real ZooKeeper: volume with exactly-once delivery, consumers that
//! die mid-item, priority order, and puts and takes whose replies are lost.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wazoo_runtime::{Host, QueueHandle, RecipeError, ZkError};
use wazoo_tests::proxy::{op, Proxy};
use wazoo_tests::*;
use zookeeper_client::{Acls, CreateMode};

const LIMIT: Duration = Duration::from_secs(120);

async fn handle(host: &Host) -> QueueHandle {
    host.queue("queue").await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_items_through_four_producers_and_four_consumers_each_taken_once() {
    const PRODUCERS: usize = 4;
    const PER_PRODUCER: usize = 2500;
    const TOTAL: usize = PRODUCERS * PER_PRODUCER;
    let host = host().await;
    let path = unique("queue-volume");
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let taken = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        let (host, path) = (host.clone(), path.clone());
        tasks.push(tokio::spawn(async move {
            let mut q = host.queue("queue").await.unwrap();
            for i in 0..PER_PRODUCER {
                q.put(&path, format!("p{p}-{i}").as_bytes(), None, false).await.unwrap();
            }
        }));
    }
    for _ in 0..4 {
        let (host, path, seen, taken) = (host.clone(), path.clone(), seen.clone(), taken.clone());
        tasks.push(tokio::spawn(async move {
            let mut q = host.queue("queue").await.unwrap();
            while taken.load(Ordering::SeqCst) < TOTAL {
                match q.take(&path, Some(Duration::from_millis(500))).await {
                    Ok(item) => {
                        let fresh = seen.lock().unwrap().insert(String::from_utf8(item.data).unwrap());
                        assert!(fresh, "an item was delivered twice");
                        taken.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(RecipeError::Zk(ZkError::Timeout)) => {}
                    Err(e) => panic!("take failed: {e}"),
                }
            }
        }));
    }
    within(LIMIT, "10,000 items through the queue", async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), TOTAL, "every item delivered exactly once");
    for p in 0..PRODUCERS {
        for i in 0..PER_PRODUCER {
            assert!(seen.contains(&format!("p{p}-{i}")), "lost p{p}-{i}");
        }
    }
    let mut q = handle(&host).await;
    assert_eq!(q.len(&path).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_consumer_that_dies_mid_item_loses_nothing() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("queue-claim");
    let host = host().await;
    let mut producer = handle(&host).await;
    for name in ["first", "second", "third"] {
        producer.put(&path, name.as_bytes(), None, false).await.unwrap();
    }

    // A consumer claims the head item, then its session is killed.
    let proxy = Proxy::start(&address).await;
    let doomed_host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
    let mut doomed = handle(&doomed_host).await;
    let item = doomed.claim(&path, None).await.unwrap();
    assert_eq!(item.data, b"first");
    let claim = format!("{path}-claims/{}", item.node.rsplit('/').next().unwrap());
    assert!(checker.check_stat(&claim).await.unwrap().is_some());
    proxy.freeze();
    within(LIMIT, "the dead consumer's claim expires", wait_gone(&checker, &claim)).await;

    // Another consumer gets the same item; a consumer whose handle is dropped gives its back too.
    let mut survivor = handle(&host).await;
    let again = survivor.claim(&path, None).await.unwrap();
    assert_eq!((again.node.as_str(), again.data.as_slice()), (item.node.as_str(), b"first".as_slice()));
    let mut dropped = handle(&host).await;
    let second = dropped.claim(&path, None).await.unwrap();
    assert_eq!(second.data, b"second");
    drop(dropped);
    let second_claim = format!("{path}-claims/{}", second.node.rsplit('/').next().unwrap());
    within(LIMIT, "the dropped consumer's claim is cleaned", wait_gone(&checker, &second_claim)).await;
    let mut delivered = vec![again.data.clone()];
    survivor.ack(&again.node).await.unwrap();
    for _ in 0..2 {
        let next = survivor.claim(&path, Some(LIMIT)).await.unwrap();
        delivered.push(next.data.clone());
        survivor.ack(&next.node).await.unwrap();
    }
    assert_eq!(delivered, vec![b"first".to_vec(), b"second".to_vec(), b"third".to_vec()]);
    assert_eq!(survivor.len(&path).await.unwrap(), 0);
    assert!(matches!(survivor.ack(&again.node).await, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))));
    proxy.thaw();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn priority_order_holds_and_a_new_urgent_item_is_not_passed_over() {
    let host = host().await;
    let path = unique("queue-priority");
    let mut producer = handle(&host).await;
    for (priority, name) in [(50, "p50"), (10, "p10a"), (90, "p90"), (10, "p10b"), (0, "p0")] {
        producer.put(&path, name.as_bytes(), Some(priority), false).await.unwrap();
    }
    let mut consumer = handle(&host).await;
    let mut order = Vec::new();
    for _ in 0..2 {
        order.push(String::from_utf8(consumer.take(&path, None).await.unwrap().data).unwrap());
    }
    // The consumer has a cached batch; a more urgent item arrives and must come next.
    producer.put(&path, b"p5", Some(5), false).await.unwrap();
    while order.len() < 6 {
        order.push(String::from_utf8(consumer.take(&path, Some(LIMIT)).await.unwrap().data).unwrap());
    }
    assert_eq!(order, vec!["p0", "p10a", "p5", "p10b", "p50", "p90"]);
    assert!(matches!(
        producer.put(&path, b"x", Some(100), false).await,
        Err(RecipeError::Zk(ZkError::InvalidArgument(_)))
    ));
}

/// Items with and without a priority in one queue: every item with a priority (0 first) before
/// every item without one (kazoo's default priority, 100), each group in put order, also once
/// the sequence numbers pass 99 (a 10-digit and a 12-digit name do not sort as text).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn items_without_a_priority_come_after_every_item_with_one_past_a_hundred_puts() {
    let host = host().await;
    let path = unique("queue-mixed");
    let mut producer = handle(&host).await;
    let mut consumer = handle(&host).await;
    for name in ["plain-a", "plain-b"] {
        producer.put(&path, name.as_bytes(), None, false).await.unwrap();
    }
    // Push the sequence past a hundred: items put and taken again.
    for _ in 0..100 {
        producer.put(&path, b"filler", Some(99), false).await.unwrap();
    }
    for _ in 0..100 {
        assert_eq!(consumer.take(&path, Some(LIMIT)).await.unwrap().data, b"filler");
    }
    producer.put(&path, b"plain-c", None, false).await.unwrap();
    producer.put(&path, b"urgent-1", Some(1), false).await.unwrap();
    producer.put(&path, b"urgent-0", Some(0), false).await.unwrap();
    let mut fresh = handle(&host).await;
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(String::from_utf8(fresh.take(&path, Some(LIMIT)).await.unwrap().data).unwrap());
    }
    assert_eq!(order, ["urgent-0", "urgent-1", "plain-a", "plain-b", "plain-c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ephemeral_items_vanish_with_their_producer_and_empty_takes_time_out() {
    let host = host().await;
    let path = unique("queue-ephemeral");
    let mut consumer = handle(&host).await;
    let empty = consumer.take(&path, Some(Duration::from_millis(200))).await;
    assert!(matches!(empty, Err(RecipeError::Zk(ZkError::Timeout))), "{empty:?}");
    let mut producer = handle(&host).await;
    producer.put(&path, b"short-lived", None, true).await.unwrap();
    producer.put(&path, b"durable", None, false).await.unwrap();
    assert_eq!(consumer.len(&path).await.unwrap(), 2);
    producer.close().await;
    assert_eq!(consumer.len(&path).await.unwrap(), 1, "the ephemeral item went with its producer");
    assert_eq!(consumer.take(&path, None).await.unwrap().data, b"durable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claimer_waits_quietly_while_every_item_is_claimed() {
    let host = host().await;
    let path = unique("all-claimed");
    let mut producer = handle(&host).await;
    producer.put(&path, b"only", None, false).await.unwrap();
    let mut first = handle(&host).await;
    let held = first.claim(&path, Some(Duration::from_secs(5))).await.unwrap();

    // Every item is claimed: a second claimer times out, having waited, not spun.
    let mut second = handle(&host).await;
    let calls = host.stats().calls.load(Ordering::SeqCst);
    let timed_out = second.claim(&path, Some(Duration::from_secs(1))).await;
    assert!(matches!(timed_out, Err(RecipeError::Zk(ZkError::Timeout))), "{timed_out:?}");
    let made = host.stats().calls.load(Ordering::SeqCst) - calls;
    assert!(made < 100, "{made} host calls in one second of waiting: the claimer spun");

    // The first claimer goes without acking: the waiting claimer gets the item.
    let waiting = tokio::spawn(async move { second.claim(&path, Some(LIMIT)).await });
    first.close().await;
    let item = within(LIMIT, "the freed item is claimed", waiting).await.unwrap().unwrap();
    assert_eq!(item.node, held.node);
    assert_eq!(item.data, b"only");
}

/// The requests a put writes with: a create, or a multi.
const PUT_WRITES: &[i32] = &[op::CREATE, op::CREATE2, op::MULTI];

/// The items (not the producers' markers) under `path`, sorted.
async fn items(checker: &zookeeper_client::Client, path: &str) -> Vec<String> {
    children(checker, path).await.into_iter().filter(|c| c.contains("queue-")).collect()
}

/// A queue directory that exists, so the next create under it is an item's.
async fn existing_queue(checker: &zookeeper_client::Client, name: &str) -> String {
    let path = unique(name);
    checker.mkdir(&path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    path
}

/// A host whose connection goes through `proxy`.
async fn proxied_host(proxy: &Proxy) -> Host {
    Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_put_whose_reply_is_lost_leaves_one_item() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = existing_queue(&checker, "queue-lost-put").await;
    let proxy = Proxy::start(&address).await;
    let producer_host = proxied_host(&proxy).await;
    let mut producer = handle(&producer_host).await;
    proxy.lose_reply(PUT_WRITES, 1);
    let putting = {
        let path = path.clone();
        tokio::spawn(async move { producer.put(&path, b"once", None, false).await })
    };
    within(LIMIT, "the put's reply is lost", proxy.replies_lost(1)).await;
    proxy.freeze();
    let on_server = items(&checker, &path).await;
    assert_eq!(on_server.len(), 1, "the put whose reply was lost took effect: {on_server:?}");
    proxy.thaw();
    let node = within(LIMIT, "the put returns", putting).await.unwrap().unwrap();
    assert_eq!(proxy.lost_replies(), 1);
    assert_eq!(items(&checker, &path).await, on_server, "one put, one item");
    assert_eq!(node, format!("{path}/{}", on_server[0]), "put names the item it made");

    let mut consumer = handle(&host().await).await;
    assert_eq!(consumer.take(&path, Some(LIMIT)).await.unwrap().data, b"once");
    let empty = consumer.take(&path, Some(Duration::from_millis(300))).await;
    assert!(matches!(empty, Err(RecipeError::Zk(ZkError::Timeout))), "{empty:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_put_whose_reply_is_lost_while_a_consumer_takes_the_item_is_delivered_once() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = existing_queue(&checker, "queue-lost-put-taken").await;
    let consumer_host = host().await;
    let mut consumer = handle(&consumer_host).await;
    let taking = {
        let path = path.clone();
        tokio::spawn(async move { consumer.take(&path, Some(LIMIT)).await.map(|item| (consumer, item)) })
    };
    let proxy = Proxy::start(&address).await;
    let producer_host = proxied_host(&proxy).await;
    let mut producer = handle(&producer_host).await;
    proxy.lose_reply(PUT_WRITES, 1);
    let putting = {
        let path = path.clone();
        tokio::spawn(async move { producer.put(&path, b"once", None, false).await })
    };
    within(LIMIT, "the put's reply is lost", proxy.replies_lost(1)).await;
    // The producer stays away until the consumer has taken the item it put.
    proxy.freeze();
    let (mut consumer, item) = within(LIMIT, "the consumer takes the item", taking).await.unwrap().unwrap();
    assert_eq!(item.data, b"once", "the put whose reply was lost took effect");
    proxy.thaw();
    let node = within(LIMIT, "the put returns", putting).await.unwrap().unwrap();
    assert_eq!(proxy.lost_replies(), 1);
    assert_eq!(node, item.node, "put names the item it made, though it is gone");
    assert!(items(&checker, &path).await.is_empty(), "one put, one item, taken once");
    assert_eq!(consumer.len(&path).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_take_whose_delete_reply_is_lost_returns_the_item() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = existing_queue(&checker, "queue-lost-take").await;
    let mut producer = handle(&host().await).await;
    producer.put(&path, b"only", None, false).await.unwrap();
    let proxy = Proxy::start(&address).await;
    let consumer_host = proxied_host(&proxy).await;
    let mut consumer = handle(&consumer_host).await;
    proxy.lose_reply(&[op::DELETE, op::MULTI], 1);
    let taking = {
        let path = path.clone();
        tokio::spawn(async move { consumer.take(&path, Some(Duration::from_secs(8))).await })
    };
    within(LIMIT, "the take's reply is lost", proxy.replies_lost(1)).await;
    proxy.freeze();
    assert!(items(&checker, &path).await.is_empty(), "the delete whose reply was lost took effect");
    proxy.thaw();
    let item = within(LIMIT, "the take returns", taking).await.unwrap();
    assert_eq!(item.map(|i| i.data).unwrap(), b"only", "the item taken is returned, not lost");
    assert_eq!(proxy.lost_replies(), 1);
    assert!(children(&checker, &format!("{path}-claims")).await.is_empty(), "no claim left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_take_whose_claim_reply_is_lost_returns_the_item_once() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = existing_queue(&checker, "queue-lost-claim").await;
    let claims = format!("{path}-claims");
    checker.mkdir(&claims, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let mut producer = handle(&host().await).await;
    for data in ["first", "second"] {
        producer.put(&path, data.as_bytes(), None, false).await.unwrap();
    }
    let proxy = Proxy::start(&address).await;
    let consumer_host = proxied_host(&proxy).await;
    let mut consumer = handle(&consumer_host).await;
    proxy.lose_reply(&[op::CREATE, op::CREATE2], 1);
    let taking = {
        let path = path.clone();
        tokio::spawn(async move { consumer.take(&path, Some(LIMIT)).await.map(|item| (consumer, item)) })
    };
    within(LIMIT, "the claim's reply is lost", proxy.replies_lost(1)).await;
    proxy.freeze();
    assert_eq!(children(&checker, &claims).await.len(), 1, "the claim whose reply was lost took effect");
    proxy.thaw();
    let (mut consumer, item) = within(LIMIT, "the take returns", taking).await.unwrap().unwrap();
    assert_eq!(item.data, b"first");
    assert_eq!(proxy.lost_replies(), 1);
    assert!(children(&checker, &claims).await.is_empty(), "no claim left");
    assert_eq!(consumer.take(&path, Some(LIMIT)).await.unwrap().data, b"second");
    assert!(items(&checker, &path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn take_skips_an_item_claimed_by_another_consumer() {
    let host = host().await;
    let path = unique("queue-take-claimed");
    let mut producer = handle(&host).await;
    for data in ["first", "second"] {
        producer.put(&path, data.as_bytes(), None, false).await.unwrap();
    }
    let mut claimer = handle(&host).await;
    let claimed = claimer.claim(&path, Some(LIMIT)).await.unwrap();
    assert_eq!(claimed.data, b"first");
    let mut taker = handle(&host).await;
    assert_eq!(taker.take(&path, Some(LIMIT)).await.unwrap().data, b"second", "the claimed head is skipped");
    let none = taker.take(&path, Some(Duration::from_millis(300))).await;
    assert!(matches!(none, Err(RecipeError::Zk(ZkError::Timeout))), "{none:?}");
    claimer.ack(&claimed.node).await.unwrap();
    assert_eq!(producer.len(&path).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn items_in_the_old_format_are_counted_and_taken_in_order() {
    let checker = client(&zk().address()).await;
    let path = existing_queue(&checker, "queue-old-format").await;
    let old = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    checker.create(&format!("{path}/queue-"), b"old", &old).await.unwrap();
    let host = host().await;
    let mut queue = handle(&host).await;
    let node = queue.put(&path, b"new", None, false).await.unwrap();
    let name = node.rsplit('/').next().unwrap();
    assert!(name.starts_with("_c_") && name.contains("-queue-"), "a protected item name: {node}");
    assert_eq!(queue.len(&path).await.unwrap(), 2);
    assert_eq!(queue.take(&path, Some(LIMIT)).await.unwrap().data, b"old");
    assert_eq!(queue.take(&path, Some(LIMIT)).await.unwrap().data, b"new");
    assert_eq!(queue.len(&path).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_take_whose_delete_reply_is_lost_prints_the_item_once() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = existing_queue(&checker, "queue-cli-lost-take").await;
    let mut producer = handle(&host().await).await;
    producer.put(&path, b"only", None, false).await.unwrap();
    let proxy = Proxy::start(&address).await;
    proxy.lose_reply(&[op::DELETE, op::MULTI], 1);
    let taken = wazoo_tests::daemon::output(
        wazoo_tests::daemon::cli().env("WAZOO_ZOOKEEPER", proxy.address()).args([
            "queue",
            "take",
            &path,
            "--timeout",
            "8s",
        ]),
    )
    .await;
    assert_eq!(proxy.lost_replies(), 1);
    assert_eq!((taken.0, taken.1.as_str()), (0, "only\n"), "{}", taken.2);
    assert!(items(&checker, &path).await.is_empty(), "the item was taken");
}
