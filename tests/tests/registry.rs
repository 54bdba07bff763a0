//! The registry's hot swap, refusals and compile cache, through a host on a real ZooKeeper: a
//! changed component serves new handles at once while handles already open keep theirs; a file
//! that fails a check changes nothing; a second host start compiles nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wazoo_runtime::registry::World;
use wazoo_runtime::Host;
use wazoo_tests::components::{compile_bomb, deploy, relabelled, traps_at_start};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// A plugins directory of this test's own, holding the built lock component, and a private
/// compile cache of its own.
fn private_plugins(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("wazoo-registry-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::copy(plugins().join("lock.wasm"), dir.join("plugins/lock.wasm")).unwrap();
    (dir.join("plugins"), dir.join("cache"))
}

async fn host_on(plugins: &Path, cache: &Path) -> Host {
    let mut settings = config(&zk().address(), Duration::from_secs(10));
    settings.plugins = plugins.to_path_buf();
    settings.cache = Some(cache.to_path_buf());
    Host::start(settings).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_swap_under_load_fails_no_call_and_new_handles_use_the_new_version() {
    let (plugins, cache) = private_plugins("swap");
    let host = host_on(&plugins, &cache).await;
    let checker = client(&zk().address()).await;
    let v1 = host.version("lock", World::Lock).await.unwrap();
    let path = unique("swap");

    // A lock held across the swap, on a path of its own.
    let across = unique("swap-held");
    let mut holder = host.lock("lock").await.unwrap();
    let held = holder.acquire(&across, None).await.unwrap();

    let busy = Arc::new(AtomicBool::new(false));
    let last_token = Arc::new(AtomicI64::new(0));
    let swapped = Arc::new(AtomicBool::new(false));
    let (turns, failures) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let v2_hash = Arc::new(std::sync::Mutex::new(String::new()));
    let mut clients = Vec::new();
    for _ in 0..16 {
        let (host, path, busy, last_token) = (host.clone(), path.clone(), busy.clone(), last_token.clone());
        let (swapped, turns, failures, v1_hash) =
            (swapped.clone(), turns.clone(), failures.clone(), v1.sha256.clone());
        clients.push(tokio::spawn(async move {
            let mut versions_after_swap = Vec::new();
            for _ in 0..12 {
                let after = swapped.load(Ordering::SeqCst);
                let mut lock = match host.lock("lock").await {
                    Ok(lock) => lock,
                    Err(e) => {
                        eprintln!("no handle: {e:#}");
                        failures.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                };
                let hash = lock.version().unwrap().sha256.clone();
                if after {
                    versions_after_swap.push(hash != v1_hash);
                }
                match lock.acquire(&path, Some(LIMIT)).await {
                    Ok(held) => {
                        assert!(!busy.swap(true, Ordering::SeqCst), "two holders at once");
                        let previous = last_token.swap(held.token, Ordering::SeqCst);
                        assert!(held.token > previous, "token {} after {previous}", held.token);
                        busy.store(false, Ordering::SeqCst);
                        if lock.release().await.is_err() {
                            failures.fetch_add(1, Ordering::SeqCst);
                        }
                        turns.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        eprintln!("acquire failed: {e}");
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                }
                lock.close().await;
            }
            versions_after_swap
        }));
    }
    // Swap once a quarter of the turns are done.
    within(LIMIT, "a quarter of the turns", async {
        while turns.load(Ordering::SeqCst) < 48 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let v2_bytes = relabelled(&std::fs::read(plugins.join("lock.wasm")).unwrap(), "v2");
    deploy(&plugins.join("lock.wasm"), &v2_bytes);
    swapped.store(true, Ordering::SeqCst);
    let mut after = Vec::new();
    within(LIMIT, "every client finishes", async {
        for c in clients {
            after.extend(c.await.unwrap());
        }
    })
    .await;
    *v2_hash.lock().unwrap() = host.version("lock", World::Lock).await.unwrap().sha256.clone();

    assert_eq!(failures.load(Ordering::SeqCst), 0, "calls failed during the swap");
    assert_eq!(turns.load(Ordering::SeqCst), 16 * 12);
    assert!(!after.is_empty(), "no handle was made after the swap");
    assert!(after.iter().all(|v2| *v2), "a handle made after the file changed ran the old version");
    assert_ne!(*v2_hash.lock().unwrap(), v1.sha256);
    assert_eq!(host.registry().stats().swaps.load(Ordering::SeqCst), 1);

    // The lock held across the swap is still held, by the old version, and releases cleanly.
    assert_eq!(holder.version().unwrap().sha256, v1.sha256);
    assert_eq!(children(&checker, &across).await.len(), 1);
    let again = holder.acquire(&across, None).await.unwrap();
    assert_eq!(again.token, held.token, "re-entering the held lock on the old version");
    holder.release().await.unwrap();
    holder.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the lock node goes", wait_children(&checker, &across, 0)).await;
    assert!(children(&checker, &path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_that_fails_a_check_changes_nothing() {
    let (plugins, cache) = private_plugins("refuse");
    let host = host_on(&plugins, &cache).await;
    let v1 = host.version("lock", World::Lock).await.unwrap();
    let good = std::fs::read(plugins.join("lock.wasm")).unwrap();
    // The same component claiming wazoo:recipes 0.2.0 (same length, so still well-formed).
    let newer = String::from_utf8_lossy(&good).contains("@0.1.2");
    assert!(newer, "the lock component names its WIT versions");
    let mut major = good.clone();
    for i in 0..major.len().saturating_sub(6) {
        if &major[i..i + 6] == b"@0.1.2" {
            major[i..i + 6].copy_from_slice(b"@0.2.0");
        }
    }
    let broken: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not wasm", b"#!/bin/sh\necho not a component\n".to_vec(), "not a valid wasm component"),
        ("a core module", b"\0asm\x01\0\0\0".to_vec(), "not a valid wasm component"),
        (
            "another world",
            std::fs::read(wazoo_tests::plugins().join("barrier.wasm")).unwrap(),
            "barrier-recipe",
        ),
        ("another WIT version", major, "0.2.0"),
        ("a trap while it starts", traps_at_start(&good), "fails when instantiated"),
    ];
    let checker = client(&zk().address()).await;
    let path = unique("refused");
    for (what, bytes, reason) in broken {
        deploy(&plugins.join("lock.wasm"), &bytes);
        let refusals = host.registry().stats().refusals.load(Ordering::SeqCst);
        // New handles still get version 1, and it works.
        let mut lock = host.lock("lock").await.unwrap_or_else(|e| panic!("{what}: no handle: {e:#}"));
        assert_eq!(lock.version().unwrap().sha256, v1.sha256, "{what}: the version before must keep serving");
        lock.acquire(&path, None).await.unwrap();
        lock.release().await.unwrap();
        lock.close().await;
        assert_eq!(
            host.registry().stats().refusals.load(Ordering::SeqCst),
            refusals + 1,
            "{what}: refused once"
        );
        // The refusal and its reason are reported.
        let listed = host.reload().await.unwrap();
        let entry = listed.iter().find(|r| r.name == "lock").unwrap();
        let refusal = entry.refused.as_ref().unwrap_or_else(|| panic!("{what}: no refusal reported"));
        assert!(
            refusal.reason.contains(reason),
            "{what}: reason {:?} should mention {reason:?}",
            refusal.reason
        );
        assert_eq!(entry.serving.as_ref().unwrap().sha256, v1.sha256);
    }
    // The last release is sent without waiting for ZooKeeper's answer: its node goes a moment
    // later, and then none is left.
    within(LIMIT, "the last lock node goes", wait_children(&checker, &path, 0)).await;
    // A good file again is taken.
    deploy(&plugins.join("lock.wasm"), &relabelled(&good, "fixed"));
    let lock = host.lock("lock").await.unwrap();
    assert_ne!(lock.version().unwrap().sha256, v1.sha256);
    lock.close().await;
    // A removed file stops new handles; open ones carry on.
    let mut open = host.lock("lock").await.unwrap();
    std::fs::remove_file(plugins.join("lock.wasm")).unwrap();
    let gone = host.lock("lock").await.err().expect("no new handles of a removed recipe");
    assert!(format!("{gone:#}").contains("not found"), "{gone:#}");
    open.acquire(&path, None).await.unwrap();
    open.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_start_takes_compiled_code_from_the_cache() {
    let (plugins, cache) = private_plugins("cache");
    let first = host_on(&plugins, &cache).await;
    let v = first.version("lock", World::Lock).await.unwrap();
    assert!(!v.from_cache, "a fresh cache cannot hold it");
    assert_eq!(first.registry().stats().compiles.load(Ordering::SeqCst), 1);
    drop(first);
    let second = host_on(&plugins, &cache).await;
    let v = second.version("lock", World::Lock).await.unwrap();
    assert!(v.from_cache, "the second start must not compile");
    assert_eq!(second.registry().stats().compiles.load(Ordering::SeqCst), 0);
    assert_eq!(second.registry().stats().cache_hits.load(Ordering::SeqCst), 1);
    let mut lock = second.lock("lock").await.unwrap();
    let path = unique("cached");
    lock.acquire(&path, None).await.unwrap();
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compile_bomb_costs_a_refused_file_not_the_host() {
    let (plugins, cache) = private_plugins("bomb");
    let host = host_on(&plugins, &cache).await;
    let worker = wazoo_bin().with_file_name("wazoo-compile");
    host.registry().use_compile_worker(worker, 256 << 20, host.limits());
    host.registry().set_compile_limit(Duration::from_secs(20));
    std::fs::write(plugins.join("bomb.wasm"), compile_bomb(1_000_000)).unwrap();
    let refused = host.custom("bomb").await.err().expect("the bomb must be refused");
    let why = format!("{refused:#}");
    assert!(why.contains("memory limit") || why.contains("took longer"), "{why}");
    // The host is untouched: the lock compiles through the same worker and serves.
    let mut lock = host.lock("lock").await.unwrap();
    assert!(!lock.version().unwrap().from_cache);
    let path = unique("after-bomb");
    lock.acquire(&path, None).await.unwrap();
    lock.release().await.unwrap();
    let listed = host.registry().list().unwrap();
    let bomb = listed.iter().find(|r| r.name == "bomb").unwrap();
    assert!(bomb.refused.is_some() && bomb.serving.is_none());
}
