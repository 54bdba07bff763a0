//! Swaps with no compile cache: how long from a rename in the plugins directory of a `wazoo serve`
//! started with `--cache none` until `Admin.ListRecipes` lists the component under its new name
//! with its version, and how many compiles that took; how long `Admin.ListRecipes` takes while
//! a big component compiles.
//!
//! Set-up: one ZooKeeper 3.8.0 (standalone, started here unless `WAZOO_ZOOKEEPER` names one), one
//! `wazoo serve --cache none --watch-every 1h` as a process of its own (a copy of
//! `target/release/wazoo` and `wazoo-compile` made at the start; `WAZOO_BENCH_BIN=DIR` takes
//! them from DIR instead, to measure another build), its plugins directory holding `lock.wasm`,
//! `config.wasm`, the JavaScript election (`election-js.wasm`, 13 MB) and the Python semaphore
//! (`semaphore-py.wasm`, 18 MB), and `bench-0.wasm` (`lock.wasm` with a custom section appended:
//! a recipe of its own name and digest); it also serves the recipes embedded in its binary.
//! The daemon sees the directory's changes through inotify (its hourly look never comes).
//!
//! Measured:
//! 1. The start: from the daemon's spawn to its "serving" line (every component compiled, none
//!    cached).
//! 2. 10 renames `bench-I.wasm` → `bench-I+1.wasm`, each timed from the `rename(2)` until a
//!    listing shows `bench-I+1` with the version `bench-0` had (the client lists back to back);
//!    the daemon's compiles (`Admin.Health`) before and after each. Target: listed ≤ 1 s after
//!    the rename (issue 32), with no compile.
//! 3. A new component, `big.wasm` (the Python semaphore with a custom section appended: another
//!    digest, compiled in full), deployed by write and rename: the listings made back to back
//!    until it shows with its version (each one's latency: none waits for the compile), the
//!    time until then, and the compiles it took (one).
//!
//! Run with `cargo bench -p wazoo-cli --bench swap` after `make recipes` and a release build of
//! the CLI (`cargo build --release -p wazoo-cli`); about a minute on 2 cores.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{describe, ms, percentile, plugin, with_section, zookeeper};
use tokio::process::{Child, Command};
use tonic::transport::Channel;
use wazoo_proto::admin_client::AdminClient;
use wazoo_proto::{Empty, Recipe};
use wazoo_testkit::ServerOptions;

const RENAMES: usize = 10;
const TICK_MS: u32 = 2000;
/// How long one step may take before it counts as stuck.
const LIMIT: Duration = Duration::from_secs(240);
/// Issue 32's target for a rename, listed.
const TARGET: Duration = Duration::from_secs(1);

fn main() -> anyhow::Result<()> {
    let (plugins, lock) = plugin("lock")?;
    for name in ["config", "election-js", "semaphore-py"] {
        plugin(name)?;
    }
    let bin = common::binaries()?;
    let (server, address) = zookeeper(ServerOptions { tick_ms: TICK_MS, ..ServerOptions::default() })?;
    let described = describe(&server, &address, TICK_MS);
    let scratch = std::env::temp_dir().join(format!("wazoo-bench-swap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    for dir in ["bin", "plugins"] {
        std::fs::create_dir_all(scratch.join(dir))?;
    }
    // `wazoo serve` looks for `wazoo-compile` beside itself; a build during the run changes nothing.
    for name in ["wazoo", "wazoo-compile"] {
        std::fs::copy(bin.join(name), scratch.join("bin").join(name))?;
    }
    for name in ["lock", "config", "election-js", "semaphore-py"] {
        std::fs::copy(plugins.join(format!("{name}.wasm")), scratch.join(format!("plugins/{name}.wasm")))?;
    }
    let lock = std::fs::read(lock)?;
    std::fs::write(scratch.join("plugins/bench-0.wasm"), with_section(&lock, "wazoo-bench", b"renamed"))?;
    let python = std::fs::read(plugins.join("semaphore-py.wasm"))?;

    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = runtime.block_on(run(&scratch, &address, &described, &bin, python));
    common::conclude(
        runtime,
        server,
        started,
        &scratch,
        outcome,
        "renames that compiled, or listings that never showed a swap",
    )
}

async fn run(
    scratch: &Path,
    zookeeper: &str,
    described: &str,
    bin: &Path,
    python: Vec<u8>,
) -> anyhow::Result<u64> {
    let spawned = Instant::now();
    let mut daemon = spawn(scratch, zookeeper).await?;
    let start = spawned.elapsed();
    let channel = Channel::from_shared(format!("http://{}", daemon.1))?.connect().await?;
    let mut admin = AdminClient::new(channel);
    let listed = listing(&mut admin).await?;
    let embedded = listed.iter().filter(|r| r.embedded).count();
    let bench = listed.iter().find(|r| r.name == "bench-0");
    let version = bench
        .map(|r| r.version.clone())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| anyhow::anyhow!("bench-0 is not served: {bench:?}"))?;
    let mut failures = 0u64;

    // 2. Renames.
    let (mut renames, mut rename_compiles, mut rename_listings) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..RENAMES {
        let before = compiles(&mut admin).await?;
        let (from, to) = (format!("bench-{i}"), format!("bench-{}", i + 1));
        let at = Instant::now();
        std::fs::rename(
            scratch.join(format!("plugins/{from}.wasm")),
            scratch.join(format!("plugins/{to}.wasm")),
        )?;
        let (took, latencies) = until(&mut admin, &to, |r| r.version == version).await?;
        renames.push(took.unwrap_or(at.elapsed()));
        rename_listings.extend(latencies);
        if took.is_none() {
            failures += 1;
        }
        let compiled = compiles(&mut admin).await? - before;
        rename_compiles.push(compiled);
        if compiled != 0 {
            failures += 1;
        }
    }

    // 3. A new big component.
    let before = compiles(&mut admin).await?;
    let big = with_section(&python, "wazoo-bench", b"big");
    let tmp = scratch.join("plugins/big.tmp");
    std::fs::write(&tmp, &big)?;
    let at = Instant::now();
    std::fs::rename(&tmp, scratch.join("plugins/big.wasm"))?;
    let (took, mut during) =
        until(&mut admin, "big", |r| !r.version.is_empty() || !r.refused.is_empty()).await?;
    let big_took = took.unwrap_or(at.elapsed());
    let big_compiles = compiles(&mut admin).await? - before;
    let refused = listing(&mut admin).await?.into_iter().find(|r| r.name == "big").map(|r| r.refused);
    if took.is_none() || big_compiles != 1 || refused.is_some_and(|r| !r.is_empty()) {
        failures += 1;
    }
    let _ = daemon.0.kill().await;

    println!("# Swaps with `wazoo serve --cache none`");
    println!();
    println!("{described}; {}", bin.join("wazoo").display());
    println!(
        "{} recipes served ({embedded} embedded; plugins: lock, config, election-js 13 MB, semaphore-py 18 MB, bench-N)",
        listed.len()
    );
    println!();
    let rename_p50 = percentile(&mut renames.clone(), 50.0);
    let rename_max = percentile(&mut renames, 100.0);
    let met = if rename_max <= TARGET { "met" } else { "MISSED" };
    println!("| measure | p50 | max | target |");
    println!("|---|---:|---:|---|");
    println!("| start, every component compiled (no cache) | {} | | |", ms(start));
    println!(
        "| rename → listed with its version ({RENAMES} renames) | {} | {} | ≤ {} ({met}) |",
        ms(rename_p50),
        ms(rename_max),
        ms(TARGET)
    );
    println!(
        "| compiles per rename | {} | {} | 0 |",
        rename_compiles.iter().copied().min().unwrap_or(0),
        rename_compiles.iter().copied().max().unwrap_or(0)
    );
    if !rename_listings.is_empty() {
        println!(
            "| ListRecipes during the renames ({}) | {} | {} | |",
            rename_listings.len(),
            ms(percentile(&mut rename_listings.clone(), 50.0)),
            ms(percentile(&mut rename_listings, 100.0))
        );
    }
    println!(
        "| ListRecipes while big.wasm (18 MB) compiles ({}) | {} | {} | never waits |",
        during.len(),
        ms(percentile(&mut during.clone(), 50.0)),
        ms(percentile(&mut during, 100.0))
    );
    println!("| big.wasm added → listed with its version (its compile) | {} | | |", ms(big_took));
    println!("| compiles for big.wasm | {big_compiles} | | 1 |");
    Ok(failures)
}

/// The daemon and its gRPC address.
async fn spawn(scratch: &Path, zookeeper: &str) -> anyhow::Result<(Child, String)> {
    let log = std::fs::File::create(scratch.join("log"))?;
    let mut child = Command::new(scratch.join("bin/wazoo"))
        .env("WAZOO_ZOOKEEPER", zookeeper)
        .env("WAZOO_PLUGINS", scratch.join("plugins"))
        .env("WAZOO_CACHE", "none")
        .env("WAZOO_LOG", "wazoo=info")
        .env("NO_COLOR", "1")
        .env_remove("WAZOO_SERVER")
        .env_remove("WAZOO_LOG_FORMAT")
        .env_remove("WAZOO_REGISTRY")
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics", "off", "--json", "--watch-every", "1h"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let grpc = common::daemon_ready(&mut child, LIMIT, "the daemon", &scratch.join("log")).await?;
    Ok((child, grpc))
}

async fn listing(admin: &mut AdminClient<Channel>) -> anyhow::Result<Vec<Recipe>> {
    Ok(admin.list_recipes(Empty {}).await?.into_inner().recipes)
}

async fn compiles(admin: &mut AdminClient<Channel>) -> anyhow::Result<u64> {
    Ok(admin.health(Empty {}).await?.into_inner().compiles)
}

/// Lists back to back until `name` shows and `ready` holds of it: the time until then (`None`
/// past [`LIMIT`]), and each listing's latency.
async fn until(
    admin: &mut AdminClient<Channel>,
    name: &str,
    ready: impl Fn(&Recipe) -> bool,
) -> anyhow::Result<(Option<Duration>, Vec<Duration>)> {
    let at = Instant::now();
    let mut latencies = Vec::new();
    while at.elapsed() < LIMIT {
        let asked = Instant::now();
        let listed = listing(admin).await?;
        latencies.push(asked.elapsed());
        if listed.iter().any(|r| r.name == name && ready(r)) {
            return Ok((Some(at.elapsed()), latencies));
        }
    }
    Ok((None, latencies))
}
