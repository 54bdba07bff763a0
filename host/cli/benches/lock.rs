//! Uncontended lock acquire+release: the wasm lock recipe through the host versus the same
//! protocol done natively by zookeeper-client (`Client::lock` with Curator's prefix), on the same
//! server in the same run, interleaved round by round. Also: component compile time and the
//! cost of a new recipe handle.
//!
//! Run with `make bench` (or `cargo bench -p wazoo-cli --bench lock` after `make recipes`).
//! `WAZOO_BENCH_OPS` sets the operations per side (default 6000); `WAZOO_ZOOKEEPER` uses an
//! existing ZooKeeper instead of starting one.

mod common;

use common::{ms, percentile, us};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wazoo_runtime::{Host, HostConfig, KeeperConfig, SandboxLimits};
use wazoo_testkit::{ServerOptions, ZkServer};
use zookeeper_client::{Acls, Client, CreateMode, LockOptions, LockPrefix};

const ROUNDS: usize = 20;
const WARMUP: usize = 3000;

fn main() -> anyhow::Result<()> {
    let ops: usize = std::env::var("WAZOO_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(6000);
    let plugins = std::env::var_os("WAZOO_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugins"));
    let component = plugins.join("lock.wasm");
    anyhow::ensure!(component.exists(), "{} missing: run `make recipes` first", component.display());

    // WAZOO_ZOOKEEPER points the bench at an existing ensemble; otherwise it starts a server.
    let (server, address) = match std::env::var("WAZOO_ZOOKEEPER") {
        Ok(address) => (None, address),
        Err(_) => {
            let server = ZkServer::start(ServerOptions::default())?;
            let address = server.address();
            (Some(server), address)
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // Both sides run in a spawned task, as the CLI's and a daemon's calls do.
    let outcome = runtime.block_on(async move { tokio::spawn(run(address, plugins, component, ops)).await? });
    drop(server);
    outcome
}

async fn run(address: String, plugins: PathBuf, component: PathBuf, ops: usize) -> anyhow::Result<()> {
    let limits = SandboxLimits::default();
    let bytes = std::fs::metadata(&component)?.len();

    // Compile time: a fresh compile each time (no cache), same engine settings as the host.
    let engine = wazoo_runtime::sandbox::engine(&limits)?;
    let mut compiles = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        Component::from_file(&engine, &component).map_err(|e| anyhow::anyhow!("{e:#}"))?;
        compiles.push(started.elapsed());
    }

    let config = HostConfig {
        keeper: KeeperConfig { zookeeper: address.clone(), ..KeeperConfig::default() },
        plugins,
        limits,
        allowed: None,
        cache: None,
    };
    let host = Host::start(config).await?;

    // A new handle: registry check, a fresh store, instantiation from the cached InstancePre.
    drop(host.lock("lock").await?);
    let mut handles = Vec::new();
    for _ in 0..1000 {
        let started = Instant::now();
        let handle = host.lock("lock").await?;
        handles.push(started.elapsed());
        drop(handle);
    }

    // A guest call that never reaches ZooKeeper (the path is refused by one host call): the
    // fixed cost of entering the sandbox.
    let mut probe = host.lock("lock").await?;
    let mut calls = Vec::new();
    for _ in 0..10_000 {
        let started = Instant::now();
        let refused = probe.try_acquire("not-absolute").await;
        calls.push(started.elapsed());
        anyhow::ensure!(refused.is_err(), "a relative path must be refused");
    }
    drop(probe);

    let native = Client::connector().connect(&address).await?;
    let mut wasm = host.lock("lock").await?;
    let (wasm_dir, native_dir) = ("/bench/wasm", "/bench/native");
    let options = || {
        LockOptions::new(Acls::anyone_all())
            .with_ancestor_options(CreateMode::Container.with_acls(Acls::anyone_all()))
            .expect("lock options")
    };

    // Warm both paths up (the server's JIT compiler keeps a core busy for the first thousands of
    // requests), then alternate rounds so server-side drift hits both alike.
    for _ in 0..WARMUP {
        wasm.acquire(wasm_dir, None).await?;
        wasm.release().await?;
        native_lock(&native, native_dir, options()).await?;
    }
    let per_round = ops.div_ceil(ROUNDS);
    let (mut wasm_times, mut native_times) = (Vec::new(), Vec::new());
    let (mut wasm_total, mut native_total) = (Duration::ZERO, Duration::ZERO);
    for round in 0..ROUNDS {
        // Alternate which side goes first, so neither always follows the other.
        for side in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
            let started_round = Instant::now();
            for _ in 0..per_round {
                let started = Instant::now();
                if side == 0 {
                    wasm.acquire(wasm_dir, None).await?;
                    wasm.release().await?;
                    wasm_times.push(started.elapsed());
                } else {
                    native_lock(&native, native_dir, options()).await?;
                    native_times.push(started.elapsed());
                }
            }
            if side == 0 {
                wasm_total += started_round.elapsed();
            } else {
                native_total += started_round.elapsed();
            }
        }
    }

    let (w50, w99) = (percentile(&mut wasm_times, 50.0), percentile(&mut wasm_times, 99.0));
    let (n50, n99) = (percentile(&mut native_times, 50.0), percentile(&mut native_times, 99.0));
    let w_ops = wasm_times.len() as f64 / wasm_total.as_secs_f64();
    let n_ops = native_times.len() as f64 / native_total.as_secs_f64();
    println!("wazoo lock benchmark: ZooKeeper 3.8.0 standalone on 127.0.0.1, {} uncontended acquire+release per side, {ROUNDS} interleaved rounds", wasm_times.len());
    println!();
    println!("| path | p50 | p99 | ops/s | p50 vs native | p99 vs native |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!("| native: zookeeper-client `Client::lock`, Curator prefix | {} | {} | {n_ops:.0} | 1.000× | 1.000× |", us(n50), us(n99));
    println!(
        "| wasm: wazoo `lock` recipe through the host | {} | {} | {w_ops:.0} | {:.3}× | {:.3}× |",
        us(w50),
        us(w99),
        w50.as_secs_f64() / n50.as_secs_f64(),
        w99.as_secs_f64() / n99.as_secs_f64()
    );
    println!();
    println!("| cost | p50 | p99 |");
    println!("|---|---:|---:|");
    println!(
        "| compile lock.wasm ({bytes} bytes), 5 runs | {} | {} |",
        ms(percentile(&mut compiles, 50.0)),
        ms(percentile(&mut compiles, 99.0))
    );
    println!(
        "| new lock handle (store + instantiate), 1000 runs | {} | {} |",
        us(percentile(&mut handles, 50.0)),
        us(percentile(&mut handles, 99.0))
    );
    println!(
        "| guest call making one host call and no ZooKeeper request, 10000 runs | {} | {} |",
        us(percentile(&mut calls, 50.0)),
        us(percentile(&mut calls, 99.0))
    );
    Ok(())
}

/// The native baseline: acquire, then an awaited delete (the `LockClient` drop would delete in
/// the background, which would flatter the native side).
async fn native_lock(client: &Client, dir: &str, options: LockOptions<'_>) -> anyhow::Result<()> {
    let lock = client.lock(LockPrefix::new_curator(dir, "lock-")?, b"", options).await?;
    client.delete(lock.lock_path(), None).await?;
    // Already deleted: skip the drop's second, background delete.
    std::mem::forget(lock);
    Ok(())
}
