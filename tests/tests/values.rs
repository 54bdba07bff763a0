//! Group membership, configuration values and the shared counter against a real ZooKeeper;
//! the counter also against kazoo's Counter, in each of its formats, and from a config component
//! built against `wazoo:recipes@0.1.0`.

use std::time::Duration;

use wazoo_runtime::{CounterFormat, Host, RecipeError, ZkError};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;
use zookeeper_client::{Acls, CreateMode};

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

fn is_invalid_argument(result: &Result<i64, RecipeError>, part: &str) -> bool {
    matches!(result, Err(RecipeError::Zk(ZkError::InvalidArgument(why))) if why.contains(part))
}

fn is_other(result: &Result<i64, RecipeError>, part: &str) -> bool {
    matches!(result, Err(RecipeError::Zk(ZkError::Other(why))) if why.contains(part))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_counter_format_stores_its_bytes_checks_its_range_and_never_rewrites_foreign_data() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let mut counter = host.config("config").await.unwrap();
    let base = unique("counter-formats");
    let data = |path: String| {
        let checker = &checker;
        async move { checker.get_data(&path).await.unwrap() }
    };
    let put = |path: String, bytes: Vec<u8>| {
        let checker = &checker;
        async move {
            let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
            checker.create(&path, &bytes, &mode).await.unwrap();
        }
    };
    checker.create(&base, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();

    // Absent counts as 0; the first add creates the node holding the format's bytes.
    for (name, format, bytes) in [
        ("kazoo", CounterFormat::Kazoo, b"-5".to_vec()),
        ("shared", CounterFormat::CuratorShared, (-5i32).to_be_bytes().to_vec()),
        ("atomic", CounterFormat::CuratorAtomic, (-5i64).to_be_bytes().to_vec()),
    ] {
        let path = format!("{base}/{name}");
        assert_eq!(counter.counter_in(&path, format).await.unwrap(), 0, "{name}");
        assert_eq!(counter.add_in(&path, -5, format).await.unwrap(), -5, "{name}");
        assert_eq!(data(path.clone()).await.0, bytes, "{name}");
        assert_eq!(counter.add_in(&path, 12, format).await.unwrap(), 7, "{name}");
        assert_eq!(counter.counter_in(&path, format).await.unwrap(), 7, "{name}");
    }

    // SharedCount is 32 bits: a sum past them is refused and the node keeps its value.
    let shared = format!("{base}/shared-edge");
    put(shared.clone(), (i32::MAX - 1).to_be_bytes().to_vec()).await;
    assert_eq!(counter.add_in(&shared, 1, CounterFormat::CuratorShared).await.unwrap(), i64::from(i32::MAX));
    let over = counter.add_in(&shared, 1, CounterFormat::CuratorShared).await;
    assert!(is_invalid_argument(&over, "overflow 32 bits"), "{over:?}");
    let under = counter.add_in(&shared, i64::from(i32::MIN) * 3, CounterFormat::CuratorShared).await;
    assert!(is_invalid_argument(&under, "overflow 32 bits"), "{under:?}");
    assert_eq!(data(shared.clone()).await.0, i32::MAX.to_be_bytes());
    // A delta beyond 32 bits whose sum is within them is fine.
    let back = counter.add_in(&shared, i64::from(i32::MIN) - 1, CounterFormat::CuratorShared).await;
    assert_eq!(back.unwrap(), -2);

    // DistributedAtomicLong wraps, as its add does; empty data counts as 0, as there.
    let atomic = format!("{base}/atomic-edge");
    put(atomic.clone(), i64::MAX.to_be_bytes().to_vec()).await;
    assert_eq!(counter.add_in(&atomic, 1, CounterFormat::CuratorAtomic).await.unwrap(), i64::MIN);
    let empty = format!("{base}/empty");
    put(empty.clone(), Vec::new()).await;
    assert_eq!(counter.counter_in(&empty, CounterFormat::CuratorAtomic).await.unwrap(), 0);
    assert_eq!(counter.counter_in(&empty, CounterFormat::Kazoo).await.unwrap(), 0);
    let shared_empty = counter.counter_in(&empty, CounterFormat::CuratorShared).await;
    assert!(is_other(&shared_empty, "is 0 bytes, not the 4"), "{shared_empty:?}");

    // Data of another format is an error, and the node is not rewritten.
    let text = format!("{base}/text");
    put(text.clone(), b"12".to_vec()).await;
    let nine = format!("{base}/nine");
    put(nine.clone(), vec![0; 9]).await;
    let binary = format!("{base}/binary");
    put(binary.clone(), 12i32.to_be_bytes().to_vec()).await;
    for (path, format, part) in [
        (&text, CounterFormat::CuratorShared, "is 2 bytes, not the 4"),
        (&text, CounterFormat::CuratorAtomic, "is 2 bytes, not the 8"),
        (&nine, CounterFormat::CuratorAtomic, "is 9 bytes, not the 8"),
        (&binary, CounterFormat::Kazoo, "not"),
    ] {
        let before = data(path.clone()).await;
        let read = counter.counter_in(path, format).await;
        assert!(is_other(&read, part), "{path} read as {format:?}: {read:?}");
        let added = counter.add_in(path, 1, format).await;
        assert!(is_other(&added, part), "{path} added to as {format:?}: {added:?}");
        let after = data(path.clone()).await;
        assert_eq!((after.0, after.1.version), (before.0, before.1.version), "{path} was rewritten");
    }
    counter.close().await;
}

/// `bytes` (a recipe built against `wazoo:recipes@0.1.2`) as built against 0.1.0: its export
/// names say 0.1.0 and, for the config recipe, its counter has neither `value-in` nor `add-in`
/// (renamed, same length, so the component stays valid). Only the recipes package is at 0.1.2.
fn as_built_against_0_1_0(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (from, to) in [(&b"@0.1.2"[..], &b"@0.1.0"[..]), (b"value-in", b"value-xx"), (b"add-in", b"add-xx")] {
        let mut i = 0;
        while let Some(at) = out[i..].windows(from.len()).position(|w| w == from) {
            out[i + at..i + at + to.len()].copy_from_slice(to);
            i += at + to.len();
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn components_built_against_wazoo_recipes_0_1_0_still_serve_and_their_counter_is_kazoo_only() {
    let dir = std::env::temp_dir().join(format!("wazoo-recipes-old-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for recipe in ["config", "lock"] {
        let old = as_built_against_0_1_0(&std::fs::read(plugins().join(format!("{recipe}.wasm"))).unwrap());
        let text = String::from_utf8_lossy(&old);
        assert!(text.contains(&format!("wazoo:recipes/{recipe}@0.1.0")) && !text.contains("@0.1.2"));
        assert!(!text.contains("value-in") && !text.contains("add-in"));
        std::fs::write(dir.join(format!("{recipe}-0-1-0.wasm")), &old).unwrap();
    }
    let mut settings = config(&zk().address(), Duration::from_secs(10));
    settings.plugins = dir.clone();
    let host = Host::start(settings).await.unwrap();
    let path = format!("{}/hits", unique("counter-0-1-0"));

    let mut old = host.config("config-0-1-0").await.expect("a 0.1.0 config component serves");
    assert_eq!(old.add(&path, 4).await.unwrap(), 4);
    assert_eq!(old.add_in(&path, 1, CounterFormat::Kazoo).await.unwrap(), 5);
    assert_eq!(old.counter_in(&path, CounterFormat::Kazoo).await.unwrap(), 5);
    for format in [CounterFormat::CuratorShared, CounterFormat::CuratorAtomic] {
        for asked in [old.counter_in(&path, format).await, old.add_in(&path, 1, format).await] {
            assert!(
                is_invalid_argument(&asked, "built against wazoo:recipes@0.1.0"),
                "{format:?}: {asked:?}"
            );
            assert!(is_invalid_argument(&asked, format.name()), "{format:?}: {asked:?}");
        }
    }
    assert!(!old.is_retired(), "a refused format is an answer, not a failure of the handle");
    assert_eq!(old.counter(&path).await.unwrap(), 5);
    // Its config interface is today's.
    assert_eq!(old.set(&format!("{path}-value"), b"v", None).await.unwrap(), 0);
    old.close().await;

    // A recipe of another family built against 0.1.0 serves too.
    let mut lock = host.lock("lock-0-1-0").await.expect("a 0.1.0 lock component serves");
    let lock_path = unique("lock-0-1-0");
    lock.acquire(&lock_path, None).await.unwrap();
    lock.release().await.unwrap();
    lock.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
