//! The counting semaphore recipe against a real ZooKeeper, and against Curator's
//! InterProcessSemaphoreV2 on the same path: every test runs on the Rust recipe and on the
//! Python one (`guest/python/semaphore`), and the two share one semaphore.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wazoo_runtime::{Host, RecipeError, SemaphoreHandle, ZkError};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

wazoo_tests::implementations!(rust: "semaphore", python: "semaphore-py"; [
    never_more_holders_than_leases,
    full_semaphore_times_out_cleanly_and_bad_counts_are_refused,
    curator_semaphore_and_wazoo_share_the_leases_both_ways,
]);

async fn handle(host: &Host, recipe: &str) -> SemaphoreHandle {
    host.semaphore(recipe).await.unwrap()
}

async fn never_more_holders_than_leases(recipe: &str) {
    mixed_holders(&[recipe; 6]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_and_python_share_one_semaphore() {
    mixed_holders(&["semaphore", "semaphore-py", "semaphore", "semaphore-py", "semaphore", "semaphore-py"])
        .await;
}

/// One worker per recipe named, each taking one of 2 leases 4 times: never more than 2 holders.
async fn mixed_holders(recipes: &[&str]) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("sem");
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for recipe in recipes {
        let (host, path, holding, most) = (host.clone(), path.clone(), holding.clone(), most.clone());
        let recipe = recipe.to_string();
        workers.push(tokio::spawn(async move {
            let mut sem = host.semaphore(&recipe).await.unwrap();
            for _ in 0..4 {
                sem.acquire(&path, 2, None).await.unwrap();
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                assert!(now <= 2, "{now} holders of 2 leases");
                // Hold for a moment so too many holders, if allowed, would overlap (and two
                // holders do overlap, even on a loaded machine).
                tokio::time::sleep(Duration::from_millis(50)).await;
                holding.fetch_sub(1, Ordering::SeqCst);
                sem.release().await.unwrap();
            }
        }));
    }
    within(LIMIT, "6 workers × 4 leases", async {
        for w in workers {
            w.await.unwrap();
        }
    })
    .await;
    assert_eq!(most.load(Ordering::SeqCst), 2, "both leases were used at once");
    // The last releases are sent unwaited: another session sees their nodes go a moment later.
    within(LIMIT, "no lease left behind", wait_children(&checker, &format!("{path}/leases"), 0)).await;
    within(LIMIT, "no mutex node left behind", wait_children(&checker, &format!("{path}/locks"), 0)).await;
}

async fn full_semaphore_times_out_cleanly_and_bad_counts_are_refused(recipe: &str) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("sem-full");
    let mut a = handle(&host, recipe).await;
    let mut b = handle(&host, recipe).await;
    a.acquire(&path, 1, None).await.unwrap();
    assert!(b.try_acquire(&path, 1).await.unwrap().is_none());
    let waited = b.acquire(&path, 1, Some(Duration::from_millis(300))).await;
    assert!(matches!(waited, Err(RecipeError::Zk(ZkError::Timeout))), "{waited:?}");
    assert_eq!(children(&checker, &format!("{path}/leases")).await.len(), 1, "the timed-out lease is gone");
    assert!(children(&checker, &format!("{path}/locks")).await.is_empty(), "the mutex was let go");
    let zero = b.acquire(&path, 0, None).await;
    assert!(matches!(zero, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))), "{zero:?}");
    a.release().await.unwrap();
    assert!(b.try_acquire(&path, 1).await.unwrap().is_some());
    b.release().await.unwrap();
}

async fn curator_semaphore_and_wazoo_share_the_leases_both_ways(recipe: &str) {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("sem-curator");
    let host = host().await;
    let mut curator = Curator::start(&address, &path, "semaphore:2").await;
    curator.send("acquire 5000").await;
    assert_eq!(curator.line().await, "leased");
    let mut first = handle(&host, recipe).await;
    let lease = first.acquire(&path, 2, Some(LIMIT)).await.unwrap();
    let name = lease.node.rsplit('/').next().unwrap();
    assert!(
        lease.node.contains("/leases/") && name.starts_with("_c_") && name.contains("-lease-"),
        "{}",
        lease.node
    );
    // Both leases taken, one each: a wazoo waiter waits until Curator returns its lease.
    let mut second = handle(&host, recipe).await;
    assert!(second.try_acquire(&path, 2).await.unwrap().is_none());
    let sem_path = path.clone();
    let waiting = tokio::spawn(async move {
        second.acquire(&sem_path, 2, None).await.unwrap();
        second
    });
    wait_children(&checker, &format!("{path}/leases"), 3).await;
    curator.send("release").await;
    assert_eq!(curator.line().await, "released");
    let mut second = within(LIMIT, "wazoo gets Curator's returned lease", waiting).await.unwrap();
    // Now wazoo holds both: Curator waits until wazoo returns one.
    curator.send("acquire 300").await;
    assert_eq!(curator.line().await, "timeout");
    curator.send("acquire 10000").await;
    second.release().await.unwrap();
    assert_eq!(curator.line().await, "leased");
    curator.send("release").await;
    assert_eq!(curator.line().await, "released");
    first.release().await.unwrap();
    curator.send("quit").await;
}
