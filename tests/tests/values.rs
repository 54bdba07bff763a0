//! Group membership, configuration values and the shared counter against a real ZooKeeper;
//! the counter also against kazoo's Counter.

use std::time::Duration;

use wazoo_runtime::{Host, RecipeError, ZkError};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn names(m: &wazoo_runtime::Membership) -> Vec<&str> {
    m.members.iter().map(|m| m.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_join_leave_and_die_and_watchers_see_each_change() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("group");
    let host = host().await;
    let mut alice = host.group("group").await.unwrap();
    let mut bob = host.group("group").await.unwrap();
    alice.join(&path, "alice", b"10.0.0.1:80").await.unwrap();
    bob.join(&path, "bob", b"10.0.0.2:80").await.unwrap();
    let mut observer = host.group("group").await.unwrap();
    let now = observer.members(&path).await.unwrap();
    assert_eq!(names(&now), vec!["alice", "bob"]);
    assert_eq!(now.members[0].data, b"10.0.0.1:80");

    let mut impostor = host.group("group").await.unwrap();
    let taken = impostor.join(&path, "alice", b"").await;
    assert!(matches!(taken, Err(RecipeError::Zk(ZkError::NodeExists))), "{taken:?}");
    let bad = impostor.join(&path, "a/b", b"").await;
    assert!(matches!(bad, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))), "{bad:?}");

    // A watcher sees carol join; carol's session then dies and she is gone.
    let watching = {
        let (path, version) = (path.clone(), now.version);
        tokio::spawn(async move {
            let seen = observer.watch(&path, version, None).await.unwrap();
            (observer, seen)
        })
    };
    let proxy = Proxy::start(&address).await;
    let carol_host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
    let mut carol = carol_host.group("group").await.unwrap();
    carol.join(&path, "carol", b"").await.unwrap();
    let (mut observer, seen) = within(LIMIT, "watcher sees carol join", watching).await.unwrap();
    assert_eq!(names(&seen), vec!["alice", "bob", "carol"]);
    proxy.freeze();
    within(LIMIT, "carol's session expires", wait_gone(&checker, &format!("{path}/carol"))).await;
    bob.leave().await.unwrap();
    assert_eq!(names(&observer.members(&path).await.unwrap()), vec!["alice"]);
    proxy.thaw();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn config_compare_and_set_and_watch() {
    let host = host().await;
    let path = format!("{}/service/endpoint", unique("config"));
    let mut writer = host.config("config").await.unwrap();
    let mut reader = host.config("config").await.unwrap();
    assert!(reader.get(&path).await.unwrap().is_none());
    let absent = writer.set(&path, b"x", Some(0)).await;
    assert!(matches!(absent, Err(RecipeError::Zk(ZkError::NoNode))), "CAS on an absent value: {absent:?}");

    // A watcher on an absent value wakes when it is created.
    let watching = {
        let path = path.clone();
        tokio::spawn(async move {
            let seen = reader.watch(&path, None, None).await.unwrap();
            (reader, seen)
        })
    };
    assert_eq!(writer.set(&path, b"10.0.0.1:80", None).await.unwrap(), 0);
    let (mut reader, seen) = within(LIMIT, "watcher sees the value appear", watching).await.unwrap();
    assert_eq!(seen.unwrap().data, b"10.0.0.1:80");

    assert_eq!(writer.set(&path, b"10.0.0.2:80", Some(0)).await.unwrap(), 1);
    let stale = writer.set(&path, b"10.0.0.3:80", Some(0)).await;
    assert!(matches!(stale, Err(RecipeError::Zk(ZkError::BadVersion))), "a stale CAS must fail: {stale:?}");
    let entry = reader.get(&path).await.unwrap().unwrap();
    assert_eq!((entry.data.as_slice(), entry.version), (b"10.0.0.2:80".as_slice(), 1));
    let unchanged = reader.watch(&path, Some(1), Some(Duration::from_millis(200))).await;
    assert!(matches!(unchanged, Err(RecipeError::Zk(ZkError::Timeout))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_counting_loses_no_increment_even_with_kazoo_counting_too() {
    let address = zk().address();
    let host = host().await;
    let path = unique("counter");
    let mut kazoo = Kazoo::start(&address, &path).await;
    kazoo.send("add 1 50").await;
    let mut adders = Vec::new();
    for _ in 0..8 {
        let (host, path) = (host.clone(), path.clone());
        adders.push(tokio::spawn(async move {
            let mut counter = host.config("config").await.unwrap();
            for _ in 0..25 {
                counter.add(&path, 1).await.unwrap();
            }
        }));
    }
    for a in adders {
        within(LIMIT, "adders finish", a).await.unwrap();
    }
    let counted = kazoo.line().await;
    assert!(counted.starts_with("counted "), "{counted}");
    let mut counter = host.config("config").await.unwrap();
    assert_eq!(counter.counter(&path).await.unwrap(), 250, "200 wazoo and 50 kazoo increments");
    assert_eq!(counter.add(&path, -50).await.unwrap(), 200);
    kazoo.send("quit").await;
}
