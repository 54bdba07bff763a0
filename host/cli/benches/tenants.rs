//! Tenant isolation under attack, and instance density.
//!
//! 1. Alice's lock acquire+release latency alone, then while tenant mallory (her own host,
//!    session, namespace and tight limits, on the same ZooKeeper and in the same process) runs
//!    each attack of the test-only `misbehave` component in a loop: p50/p99 and the ratio to
//!    alone, same run.
//! 2. Live lock instances per GiB: resident memory of many idle handles (pooling allocator).
//! 3. A tenant's allowed-recipe list of 100,000 patterns: the host's start, its memory, and a
//!    refused check.
//!
//! Run with `make bench` (or build `wazoo-misbehave` for wasm32-wasip2 into target/guests and
//! `cargo bench -p wazoo-cli --bench tenants`). `WAZOO_BENCH_OPS` sets alice's operations per phase
//! (default 1500).

mod common;

use common::{ms, percentile, rss_bytes};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wazoo_runtime::{Host, HostConfig, KeeperConfig, SandboxLimits};
use wazoo_testkit::{ServerOptions, ZkServer};

const ATTACKS: &[(&str, &[&str])] = &[
    ("none (alice alone)", &[]),
    ("infinite loop", &["hold-then-spin", "/x"]),
    ("memory bomb", &["hold-then-grow", "/x"]),
    ("deep recursion", &["recurse"]),
    ("znode flood", &["flood", "/flood", "1000"]),
    ("watch flood", &["watch-flood", "/w", "1000"]),
    ("1 MB writes", &["write", "/big", "1000000"]),
    ("operation spam", &["spam", "/x", "100000"]),
    ("escape attempts", &["probe", "../alice"]),
];

fn main() -> anyhow::Result<()> {
    let ops: usize = std::env::var("WAZOO_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let plugins = std::env::temp_dir().join(format!("wazoo-bench-tenants-{}", std::process::id()));
    std::fs::create_dir_all(&plugins)?;
    let misbehave = root.join("target/guests/wasm32-wasip2/release/wazoo_misbehave.wasm");
    anyhow::ensure!(misbehave.exists(), "{} missing: run `make bench`", misbehave.display());
    std::fs::copy(&misbehave, plugins.join("misbehave.wasm"))?;
    std::fs::copy(root.join("plugins/lock.wasm"), plugins.join("lock.wasm"))?;
    let server = ZkServer::start(ServerOptions::default())?;
    let address = server.address();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = runtime.block_on(async move { tokio::spawn(run(address, plugins.clone(), ops)).await? });
    drop(server);
    outcome
}

fn tenant(address: &str, plugins: &PathBuf, name: &str, limits: SandboxLimits) -> HostConfig {
    HostConfig {
        keeper: KeeperConfig {
            zookeeper: format!("{address}/tenants/{name}"),
            digest: Some(format!("{name}:{name}-secret")),
            ..KeeperConfig::default()
        },
        plugins: plugins.clone(),
        limits,
        allowed: None,
        embedded: None,
        cache: Some(plugins.join("cache")),
    }
}

async fn run(address: String, plugins: PathBuf, ops: usize) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!(
        "wazoo tenants benchmark: `cargo bench -p wazoo-cli --bench tenants`; {cores} cores; ZooKeeper at {address}; \
         {ops} lock acquire+release by alice per phase"
    );
    let alice = Host::start(tenant(&address, &plugins, "alice", SandboxLimits::default())).await?;
    let tight = SandboxLimits {
        memory_bytes: 32 << 20,
        cpu_per_call: Duration::from_millis(300),
        wasm_stack_bytes: 256 << 10,
        max_instances: 50,
        max_data_bytes: 64 << 10,
        max_children: 50,
        max_watches: 20,
        ops_per_sec: 300,
        max_znodes: 100,
        bytes_per_sec: 200_000,
    };
    let mallory = Host::start(tenant(&address, &plugins, "mallory", tight)).await?;
    // Warm both up (compiles, ZooKeeper's JIT).
    lock_loop(&alice, 300).await?;
    let _ = mallory.custom("misbehave").await?;

    let mut rows = Vec::new();
    for (name, args) in ATTACKS {
        let stop = Arc::new(AtomicBool::new(false));
        let attacks = Arc::new(AtomicU64::new(0));
        let attacker = (!args.is_empty()).then(|| {
            let (mallory, stop, attacks) = (mallory.clone(), stop.clone(), attacks.clone());
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(mut h) = mallory.custom("misbehave").await {
                        let _ = h.run(&args).await;
                        h.close().await;
                    }
                    attacks.fetch_add(1, Ordering::Relaxed);
                }
            })
        });
        let mut samples = lock_loop(&alice, ops).await?;
        stop.store(true, Ordering::Relaxed);
        if let Some(a) = attacker {
            a.await?;
        }
        rows.push((
            name,
            percentile(&mut samples, 50.0),
            percentile(&mut samples, 99.0),
            attacks.load(Ordering::Relaxed),
        ));
    }
    let (alone50, alone99) = (rows[0].1, rows[0].2);
    println!();
    println!("| mallory's attack (in a loop) | attacks run | alice p50 | alice p99 | p50 vs alone | p99 vs alone |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, p50, p99, n) in &rows {
        println!(
            "| {name} | {n} | {} | {} | {:.2}× | {:.2}× |",
            ms(*p50),
            ms(*p99),
            p50.as_secs_f64() / alone50.as_secs_f64(),
            p99.as_secs_f64() / alone99.as_secs_f64()
        );
    }

    // Density: idle lock handles, each having taken and released a lock once.
    const LIVE: usize = 4000;
    let dense = Host::start(tenant(
        &address,
        &plugins,
        "density",
        SandboxLimits { max_instances: LIVE as u32 + 10, ..SandboxLimits::default() },
    ))
    .await?;
    let mut warm = dense.lock("lock").await?;
    warm.acquire("/d", None).await?;
    warm.release().await?;
    let before = rss_bytes()?;
    let mut handles = Vec::with_capacity(LIVE);
    for _ in 0..LIVE {
        handles.push(dense.lock("lock").await?);
    }
    let grown = rss_bytes()?.saturating_sub(before) as f64;
    let per = grown / LIVE as f64;
    println!();
    println!(
        "{LIVE} live lock instances: {:.1} MiB resident in all, {:.1} KiB each: {:.0} instances per GiB",
        grown / (1 << 20) as f64,
        per / 1024.0,
        (1u64 << 30) as f64 / per
    );
    drop(handles);
    drop(dense);

    allowed_lists(&address, &plugins).await
}

/// A tenant's list of allowed recipes, compiled when its host starts: 100,000 patterns of
/// which a quarter are `?` and `[…]` globs (the rest plain names, `PREFIX*` and `*SUFFIX`),
/// then 100,000 such globs. The host's start beside one with no list, the memory it keeps, and
/// a refused check (a name no pattern matches, the slowest answer).
async fn allowed_lists(address: &str, plugins: &PathBuf) -> anyhow::Result<()> {
    const PATTERNS: usize = 100_000;
    const CHECKS: u32 = 10_000;
    let glob = |i: usize| if i % 2 == 0 { format!("svc{i}-?") } else { format!("app{i}-[ab]") };
    let mixed: Vec<String> = (0..PATTERNS)
        .map(|i| match i % 4 {
            0 => format!("tenant-{i}"),
            1 => format!("team{i}-*"),
            2 => format!("*-{i}"),
            _ => glob(i),
        })
        .collect();
    let globs: Vec<String> = (0..PATTERNS).map(glob).collect();
    let started = Instant::now();
    drop(Host::start(tenant(address, plugins, "listless", SandboxLimits::default())).await?);
    let bare = started.elapsed();
    println!();
    println!(
        "| allowed recipes ({PATTERNS} patterns) | host start | beside no list | resident | refused check |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (what, patterns) in [("a quarter ? and […] globs", mixed), ("all ? and […] globs", globs)] {
        let before = rss_bytes()?;
        let started = Instant::now();
        let config = HostConfig {
            allowed: Some(patterns),
            ..tenant(address, plugins, "listed", SandboxLimits::default())
        };
        let host = Host::start(config).await?;
        let start = started.elapsed();
        let kept = rss_bytes()?.saturating_sub(before) as f64;
        let started = Instant::now();
        for _ in 0..CHECKS {
            anyhow::ensure!(host.serving("no-such-recipe").await.is_err(), "an unlisted recipe was allowed");
        }
        let check = started.elapsed() / CHECKS;
        println!(
            "| {what} | {} | +{} | {:.0} MiB | {:.1} µs |",
            ms(start),
            ms(start.saturating_sub(bare)),
            kept / (1 << 20) as f64,
            check.as_secs_f64() * 1e6
        );
        drop(host);
    }
    Ok(())
}

async fn lock_loop(host: &Host, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut lock = host.lock("lock").await?;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        lock.acquire("/locks/report", None).await?;
        lock.release().await?;
        samples.push(started.elapsed());
    }
    lock.close().await;
    Ok(samples)
}
