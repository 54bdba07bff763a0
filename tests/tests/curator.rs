//! Interop: Apache Curator 5.4's InterProcessMutex (Debian's jars, run as a real JVM) and
//! wazoo's lock recipe on the same path exclude each other, both ways; Curator's `SharedCount`
//! and `DistributedAtomicLong` and wazoo's counter in their formats count together.

use std::time::Duration;

use wazoo_runtime::{CounterFormat, RecipeError, ZkError};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn is_curator_name(name: &str) -> bool {
    // _c_<36-char uuid>-lock-<10 digits>
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    let Some((uuid, seq)) = rest.split_once("-lock-") else { return false };
    uuid.len() == 36 && seq.len() == 10 && seq.chars().all(|c| c.is_ascii_digit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_and_wazoo_exclude_each_other_both_ways() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("curator");
    let host = host().await;
    let mut curator = Curator::start(&address, &path, "mutex").await;
    let mut lock = host.lock("lock").await.unwrap();

    // wazoo holds: Curator cannot take it.
    let held = lock.acquire(&path, None).await.unwrap();
    assert!(is_curator_name(held.node.rsplit('/').next().unwrap()), "wazoo's node {}", held.node);
    curator.send("acquire 300").await;
    assert_eq!(curator.line().await, "timeout");

    // Curator waits on wazoo's node; wazoo's release wakes it.
    curator.send("acquire -1").await;
    wait_children(&checker, &path, 2).await;
    lock.release().await.unwrap();
    let acquired = curator.line().await;
    let curator_node = acquired.strip_prefix("acquired ").expect("Curator acquired").to_string();
    assert!(is_curator_name(curator_node.rsplit('/').next().unwrap()), "Curator's node {curator_node}");

    // Curator holds: wazoo cannot take it, then waits on Curator's node.
    assert!(matches!(
        lock.acquire(&path, Some(Duration::from_millis(300))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    assert_eq!(children(&checker, &path).await.len(), 1, "the timed-out wazoo attempt left nothing");
    let path2 = path.clone();
    let waiting = tokio::spawn(async move {
        let held = lock.acquire(&path2, None).await.unwrap();
        (lock, held)
    });
    wait_children(&checker, &path, 2).await;
    curator.send("release").await;
    assert_eq!(curator.line().await, "released");
    let (mut lock, taken) = within(LIMIT, "wazoo acquires after Curator releases", waiting).await.unwrap();
    assert!(taken.token > held.token);
    lock.release().await.unwrap();

    // Both contend at full speed; an append-only log shows whether two ever held at once.
    let log = std::env::temp_dir().join(format!("wazoo-curator-{}.log", std::process::id()));
    std::fs::write(&log, "").unwrap();
    curator.send(&format!("loop 25 {}", log.display())).await;
    for _ in 0..25 {
        lock.acquire(&path, None).await.unwrap();
        append(&log, "W enter\n");
        tokio::time::sleep(Duration::from_millis(2)).await;
        append(&log, "W exit\n");
        lock.release().await.unwrap();
    }
    assert_eq!(curator.line().await, "looped");
    let history = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 100, "{history}");
    for pair in lines.chunks(2) {
        let who = pair[0].strip_suffix(" enter").unwrap_or_else(|| panic!("overlap:\n{history}"));
        assert_eq!(pair[1], format!("{who} exit"), "two holders at once:\n{history}");
    }
    assert!(lines.iter().any(|l| l.starts_with('C')) && lines.iter().any(|l| l.starts_with('W')));
    curator.send("quit").await;
    lock.close().await;
}

fn append(path: &std::path::Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

/// `value` as `format` stores it in the node.
fn stored(value: i64, format: CounterFormat) -> Vec<u8> {
    match format {
        CounterFormat::CuratorShared => i32::try_from(value).unwrap().to_be_bytes().to_vec(),
        CounterFormat::CuratorAtomic => value.to_be_bytes().to_vec(),
        CounterFormat::Kazoo => value.to_string().into_bytes(),
    }
}

/// Curator (`kind`, the peer's counter) and wazoo (`format`) on one counter: each reads what the
/// other wrote, and 50 Curator increments racing 8 wazoo adders of 25 each lose none.
async fn counting_together(kind: &str, format: CounterFormat) {
    let address = zk().address();
    let checker = client(&address).await;
    let path = format!("{}/hits", unique(kind));
    let host = host().await;
    let mut curator = Curator::start(&address, &path, kind).await;
    let mut counter = host.config("config").await.unwrap();

    // wazoo creates it (with its parent), in the format Curator reads.
    assert_eq!(counter.counter_in(&path, format).await.unwrap(), 0, "absent counts as 0");
    assert_eq!(counter.add_in(&path, 7, format).await.unwrap(), 7);
    assert_eq!(checker.get_data(&path).await.unwrap().0, stored(7, format));
    curator.send("get").await;
    assert_eq!(curator.line().await, "value 7");

    // Curator adds; wazoo reads it, negative values too.
    curator.send("add -10 1").await;
    assert_eq!(curator.line().await, "counted -3");
    assert_eq!(counter.counter_in(&path, format).await.unwrap(), -3);
    assert_eq!(checker.get_data(&path).await.unwrap().0, stored(-3, format));

    curator.send("add 1 50").await;
    let mut adders = Vec::new();
    for _ in 0..8 {
        let (host, path) = (host.clone(), path.clone());
        adders.push(tokio::spawn(async move {
            let mut counter = host.config("config").await.unwrap();
            for _ in 0..25 {
                counter.add_in(&path, 1, format).await.unwrap();
            }
            counter.close().await;
        }));
    }
    for a in adders {
        within(LIMIT, "wazoo's adders finish", a).await.unwrap();
    }
    let counted = curator.line().await;
    assert!(counted.starts_with("counted "), "Curator's adds: {counted}");
    assert_eq!(counter.counter_in(&path, format).await.unwrap(), 247, "-3, 200 wazoo and 50 Curator adds");
    curator.send("get").await;
    assert_eq!(curator.line().await, "value 247");
    assert_eq!(checker.get_data(&path).await.unwrap().0, stored(247, format));
    curator.send("quit").await;
    counter.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_shared_count_and_wazoo_count_together_in_4_bytes() {
    counting_together("shared-count", CounterFormat::CuratorShared).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_distributed_atomic_long_and_wazoo_count_together_in_8_bytes() {
    counting_together("atomic-long", CounterFormat::CuratorAtomic).await;
}

/// wazoo refuses a `DistributedAtomicLong` node as a `SharedCount` and the reverse, and rewrites
/// neither (Curator's `SharedCount` would read the first 4 of the 8 bytes); Curator's
/// `DistributedAtomicLong` refuses the 4 bytes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_counter_of_the_other_curator_format_is_refused_and_left_as_it_is() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host().await;
    let mut counter = host.config("config").await.unwrap();
    let long = format!("{}/long", unique("counter-mismatch"));
    let mut atomic = Curator::start(&address, &long, "atomic-long").await;
    atomic.send("add 5 1").await;
    assert_eq!(atomic.line().await, "counted 5");
    let int = format!("{}/int", unique("counter-mismatch"));
    let mut shared = Curator::start(&address, &int, "shared-count").await;
    shared.send("add 5 1").await;
    assert_eq!(shared.line().await, "counted 5");

    for (path, format, size) in
        [(&long, CounterFormat::CuratorShared, 8), (&int, CounterFormat::CuratorAtomic, 4)]
    {
        let before = checker.get_data(path).await.unwrap();
        for result in [counter.counter_in(path, format).await, counter.add_in(path, 1, format).await] {
            match result {
                Err(RecipeError::Zk(ZkError::Other(why))) => {
                    assert!(why.contains(&format!("is {size} bytes")), "{format:?}: {why}")
                }
                other => panic!("{format:?} on a node of {size} bytes: {other:?}"),
            }
        }
        let after = checker.get_data(path).await.unwrap();
        assert_eq!((after.0, after.1.version), (before.0, before.1.version), "{path} was rewritten");
    }
    // DistributedAtomicLong refuses SharedCount's 4 bytes too.
    let mut reader = Curator::start(&address, &int, "atomic-long").await;
    reader.send("get").await;
    let said = reader.line().await;
    assert!(said.starts_with("error") && said.contains("Corrupted data"), "{said}");
    for peer in [&mut atomic, &mut shared, &mut reader] {
        peer.send("quit").await;
    }
    counter.close().await;
}
