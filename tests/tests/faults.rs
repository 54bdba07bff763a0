//! The exhaustive single-fault matrix (`wazoo_tests::matrix`, cases in `wazoo_tests::cases`):
//! every export of every recipe, in Rust, Python and JavaScript, faulted at every ZooKeeper
//! request it makes (reply lost, session expired, participant killed), with each recipe's
//! promise checked after every run. A request whose reply comes after the call returned (the
//! delete of a release by `znode.delete-unwaited`) is one of them: the matrix waits for the
//! session's replies before it reads the log. Two workers, each with a ZooKeeper of its own, share the
//! cases. It prints the figure docs/src/testing/faults.md quotes and fails on any violation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wazoo_testkit::{ServerOptions, ZkServer};
use wazoo_tests::matrix::{Bench, Figure};
use wazoo_tests::{cases, plugins};

/// The faulted site's session timeout (each worker's server ticks every 200 ms).
const SESSION: Duration = Duration::from_secs(4);
const WORKERS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_recipe_keeps_its_promise_under_every_single_fault() {
    plugins();
    let only = std::env::var("WAZOO_MATRIX_ONLY").ok();
    let cases: Arc<Vec<_>> = Arc::new(
        cases::all()
            .into_iter()
            .filter(|c| only.as_deref().is_none_or(|o| c.name.contains(o) || c.recipe == o))
            .collect(),
    );
    assert!(!cases.is_empty(), "no case matches WAZOO_MATRIX_ONLY={only:?}");
    let next = Arc::new(AtomicUsize::new(0));
    let rows = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (cases, next, rows) = (cases.clone(), next.clone(), rows.clone());
        workers.push(tokio::spawn(async move {
            let server = tokio::task::spawn_blocking(|| {
                ZkServer::start(ServerOptions { tick_ms: 200, ..ServerOptions::default() })
                    .expect("starting ZooKeeper")
            })
            .await
            .unwrap();
            let bench = Bench::new(&server.address(), SESSION).await;
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                let row = bench.run(case).await;
                println!(
                    "{:<44} {} requests, {} injected, {} violations, {:.1}s",
                    row.case,
                    row.requests,
                    row.injected,
                    row.violations.len(),
                    row.took.as_secs_f64()
                );
                rows.lock().unwrap().push((i, row));
            }
            drop(server);
        }));
    }
    for w in workers {
        w.await.expect("a matrix worker panicked");
    }
    let mut rows = std::mem::take(&mut *rows.lock().unwrap());
    rows.sort_by_key(|(i, _)| *i);
    let figure = Figure { rows: rows.into_iter().map(|(_, r)| r).collect() };
    println!("{figure}");
    assert!(figure.injected() > 0, "no fault was injected");
    assert_eq!(figure.violations(), 0, "{}", figure.summary());
}
