//! The queue recipe against a real ZooKeeper: volume with exactly-once delivery, consumers that
//! die mid-item, priority order.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wazoo::{Host, QueueHandle, RecipeError, ZkError};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;

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
