//! Recipes in Rust, Python (componentize-py), JavaScript (componentize-js) and C (clang and
//! wasi-libc, then `wazoo componentize`), side by side in one run: component size, compile time,
//! new-handle (instantiation) time, resident memory per live instance, and the latency of one
//! acquire+release (semaphore), campaign+resign (election) or enter+leave of a one-participant
//! double barrier (barrier), the two implementations of a family interleaved round by round on
//! the same server.
//!
//! Run with `make bench` (or `cargo bench -p wazoo-cli --bench languages` after `make recipes`).
//! `WAZOO_BENCH_OPS` sets the operations per implementation (default 1000).

mod common;

use common::{ms, percentile, rss_bytes, us};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wazoo_runtime::{Host, HostConfig, KeeperConfig, SandboxLimits};
use wazoo_testkit::{ServerOptions, ZkServer};

const ROUNDS: usize = 10;
/// Live instances held at once to measure memory per instance.
const LIVE: usize = 50;

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Semaphore,
    Election,
    Barrier,
}

struct Implementation {
    label: &'static str,
    recipe: &'static str,
    family: Family,
}

const IMPLEMENTATIONS: &[Implementation] = &[
    Implementation { label: "semaphore, Rust", recipe: "semaphore", family: Family::Semaphore },
    Implementation { label: "semaphore, Python", recipe: "semaphore-py", family: Family::Semaphore },
    Implementation { label: "election, Rust", recipe: "election", family: Family::Election },
    Implementation { label: "election, JavaScript", recipe: "election-js", family: Family::Election },
    Implementation { label: "barrier, Rust", recipe: "barrier", family: Family::Barrier },
    Implementation { label: "barrier, C", recipe: "barrier-c", family: Family::Barrier },
];

fn main() -> anyhow::Result<()> {
    let ops: usize = std::env::var("WAZOO_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let plugins = std::env::var_os("WAZOO_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../plugins"));
    for i in IMPLEMENTATIONS {
        let file = plugins.join(format!("{}.wasm", i.recipe));
        anyhow::ensure!(file.exists(), "{} missing: run `make recipes` first", file.display());
    }
    let server = ZkServer::start(ServerOptions::default())?;
    let address = server.address();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = runtime.block_on(async move { tokio::spawn(run(address, plugins, ops)).await? });
    drop(server);
    outcome
}

struct Row {
    bytes: u64,
    compile: Duration,
    new_handle: (Duration, Duration),
    rss_per_instance: f64,
    op: (Duration, Duration),
}

async fn run(address: String, plugins: PathBuf, ops: usize) -> anyhow::Result<()> {
    let limits = SandboxLimits::default();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!(
        "wazoo languages benchmark: `cargo bench -p wazoo-cli --bench languages`; {cores} cores; ZooKeeper at {address}; \
         {ops} operations per implementation in {ROUNDS} interleaved rounds"
    );
    let engine = wazoo_runtime::sandbox::engine(&limits)?;
    let cache = std::env::temp_dir().join(format!("wazoo-bench-languages-{}", std::process::id()));
    let config = HostConfig {
        keeper: KeeperConfig {
            zookeeper: address,
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(20),
            ..KeeperConfig::default()
        },
        plugins: plugins.clone(),
        limits: limits.clone(),
        allowed: None,
        embedded: None,
        cache: Some(cache.clone()),
    };
    let host = Host::start(config).await?;
    let mut rows = Vec::new();
    for i in IMPLEMENTATIONS {
        let file = plugins.join(format!("{}.wasm", i.recipe));
        let bytes = std::fs::metadata(&file)?.len();
        // One fresh compile, off the host (same engine settings).
        let started = Instant::now();
        let (engine, file) = (engine.clone(), file.clone());
        tokio::task::spawn_blocking(move || {
            Component::from_file(&engine, &file).map_err(|e| anyhow::anyhow!("{e:#}"))
        })
        .await??;
        let compile = started.elapsed();
        // The host loads it once (compiling into the cache); then new handles are timed.
        host.serving(i.recipe).await?;
        let mut handles = Vec::new();
        for _ in 0..200 {
            let started = Instant::now();
            match i.family {
                Family::Semaphore => host.semaphore(i.recipe).await?.close().await,
                Family::Election => host.election(i.recipe).await?.close().await,
                Family::Barrier => host.barrier(i.recipe).await?.close().await,
            }
            handles.push(started.elapsed());
        }
        let new_handle = (percentile(&mut handles, 50.0), percentile(&mut handles, 99.0));
        // Resident memory of LIVE instances, each having served one call.
        let before = rss_bytes()?;
        let mut live_sem = Vec::new();
        let mut live_el = Vec::new();
        let mut live_bar = Vec::new();
        for n in 0..LIVE {
            match i.family {
                Family::Semaphore => {
                    let mut h = host.semaphore(i.recipe).await?;
                    h.try_acquire(&format!("/bench-lang/mem-{}-{n}", i.recipe), 1).await?;
                    live_sem.push(h);
                }
                Family::Election => {
                    let mut h = host.election(i.recipe).await?;
                    h.leader(&format!("/bench-lang/mem-{}", i.recipe)).await?;
                    live_el.push(h);
                }
                Family::Barrier => {
                    let mut h = host.barrier(i.recipe).await?;
                    h.wait(&format!("/bench-lang/mem-{}-{n}", i.recipe), Some(Duration::ZERO)).await?;
                    live_bar.push(h);
                }
            }
        }
        let rss_per_instance = (rss_bytes()?.saturating_sub(before)) as f64 / LIVE as f64;
        for h in live_sem {
            h.close().await;
        }
        for h in live_el {
            h.close().await;
        }
        for h in live_bar {
            h.close().await;
        }
        rows.push(Row { bytes, compile, new_handle, rss_per_instance, op: (Duration::ZERO, Duration::ZERO) });
    }

    // Latency: the two implementations of each family take turns, a round each, on one path.
    for family in [Family::Semaphore, Family::Election, Family::Barrier] {
        let members: Vec<usize> =
            (0..IMPLEMENTATIONS.len()).filter(|&k| IMPLEMENTATIONS[k].family == family).collect();
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); members.len()];
        let path = format!("/bench-lang/op-{}", IMPLEMENTATIONS[members[0]].recipe);
        for round in 0..=ROUNDS {
            for (slot, &k) in members.iter().enumerate() {
                let recipe = IMPLEMENTATIONS[k].recipe;
                // Round 0 warms up both.
                let n = if round == 0 { 100 } else { ops / ROUNDS };
                match family {
                    Family::Semaphore => {
                        let mut h = host.semaphore(recipe).await?;
                        for _ in 0..n {
                            let started = Instant::now();
                            h.acquire(&path, 1, None).await?;
                            h.release().await?;
                            if round > 0 {
                                samples[slot].push(started.elapsed());
                            }
                        }
                        h.close().await;
                    }
                    Family::Election => {
                        let mut h = host.election(recipe).await?;
                        for _ in 0..n {
                            let started = Instant::now();
                            h.campaign(&path, "bench", None).await?;
                            h.resign().await?;
                            if round > 0 {
                                samples[slot].push(started.elapsed());
                            }
                        }
                        h.close().await;
                    }
                    Family::Barrier => {
                        let mut h = host.barrier(recipe).await?;
                        for _ in 0..n {
                            let started = Instant::now();
                            h.enter(&path, 1, None).await?;
                            h.leave_double(None).await?;
                            if round > 0 {
                                samples[slot].push(started.elapsed());
                            }
                        }
                        h.close().await;
                    }
                }
            }
        }
        for (slot, &k) in members.iter().enumerate() {
            rows[k].op = (percentile(&mut samples[slot], 50.0), percentile(&mut samples[slot], 99.0));
        }
    }

    println!();
    println!("| recipe | component | compile | new handle p50 / p99 | resident memory per live instance | op p50 / p99 | op p50 vs Rust |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (k, i) in IMPLEMENTATIONS.iter().enumerate() {
        let r = &rows[k];
        let rust = IMPLEMENTATIONS.iter().position(|o| o.family == i.family).expect("a Rust row first");
        let ratio = r.op.0.as_secs_f64() / rows[rust].op.0.as_secs_f64();
        println!(
            "| {} | {:.1} MB | {} | {} / {} | {:.2} MiB | {} / {} | {ratio:.2}× |",
            i.label,
            r.bytes as f64 / 1e6,
            ms(r.compile),
            us(r.new_handle.0),
            us(r.new_handle.1),
            r.rss_per_instance / (1 << 20) as f64,
            ms(r.op.0),
            ms(r.op.1),
        );
    }
    println!();
    println!(
        "op: acquire+release of a 1-lease semaphore, campaign+resign of an uncontended election, or enter+leave of a \
         one-participant double barrier."
    );
    let _ = std::fs::remove_dir_all(&cache);
    Ok(())
}
