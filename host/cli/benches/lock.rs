//! What the wasm lock recipe costs beside its ZooKeeper requests: component compile time, a new
//! recipe handle, and a guest call that reaches the host but not ZooKeeper. (Acquire+release
//! against the native client, Curator and kazoo is the `peers` bench.)
//!
//! Run with `make bench` (or `cargo bench -p wazoo-cli --bench lock` after `make recipes`).
//! `WAZOO_ZOOKEEPER` uses an existing ZooKeeper instead of starting one.

mod common;

use common::{ms, percentile, us};
use std::path::PathBuf;
use std::time::Instant;

use wasmtime::component::Component;
use wazoo_runtime::{Host, HostConfig, KeeperConfig, SandboxLimits, World};
use wazoo_testkit::ServerOptions;

fn main() -> anyhow::Result<()> {
    let (plugins, component) = common::plugin("lock")?;

    // WAZOO_ZOOKEEPER points the bench at an existing ensemble; otherwise it starts a server.
    let (server, address) = common::zookeeper(ServerOptions::default())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // Both sides run in a spawned task, as the CLI's and a daemon's calls do.
    let outcome = runtime.block_on(async move { tokio::spawn(run(address, plugins, component)).await? });
    drop(server);
    outcome
}

async fn run(address: String, plugins: PathBuf, component: PathBuf) -> anyhow::Result<()> {
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
        embedded: None,
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
    // Its first part: the registry's look at the file (a stat) for the version to instantiate.
    let mut lookups = Vec::new();
    for _ in 0..1000 {
        let started = Instant::now();
        host.version("lock", World::Lock).await?;
        lookups.push(started.elapsed());
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

    println!("wazoo lock recipe costs: ZooKeeper 3.8.0 standalone on 127.0.0.1 (acquire+release beside the native client, Curator and kazoo: the `peers` bench)");
    println!();
    println!("| cost | p50 | p99 |");
    println!("|---|---:|---:|");
    println!(
        "| compile lock.wasm ({bytes} bytes), 5 runs | {} | {} |",
        ms(percentile(&mut compiles, 50.0)),
        ms(percentile(&mut compiles, 99.0))
    );
    println!(
        "| new lock handle (registry look, store + instantiate), 1000 runs | {} | {} |",
        us(percentile(&mut handles, 50.0)),
        us(percentile(&mut handles, 99.0))
    );
    println!(
        "| of which the registry's look at the file (`Host::version`), 1000 runs | {} | {} |",
        us(percentile(&mut lookups, 50.0)),
        us(percentile(&mut lookups, 99.0))
    );
    println!(
        "| guest call making one host call and no ZooKeeper request, 10000 runs | {} | {} |",
        us(percentile(&mut calls, 50.0)),
        us(percentile(&mut calls, 99.0))
    );
    Ok(())
}
