//! Lock acquire+release beside its peers, in one run: the wazoo `lock` recipe through the host
//! (wasm, in-process), zookeeper-client's `Client::lock` with Curator's prefix (native), the
//! protocol's floor measured by a plain zookeeper-client program (`peers/floor.rs`: the requests
//! of a lock and nothing else, in 2 round trips and in 1), the wazoo daemon (`wazoo serve`, run
//! in-process by `wazoo_daemon::serve::run` on 127.0.0.1, its clients over gRPC), Curator 5.4's
//! `InterProcessMutex` (a child JVM, `peers/CuratorBench.java`) and kazoo 2.11's `Lock` (a child
//! python3, `peers/kazoo_bench.py`), all against one ZooKeeper; and etcd 3.4's lock service
//! (`/usr/bin/etcd`, a child process) through the etcd-client crate.
//!
//! Every table twice, each run with servers of its own:
//! - no fsync: ZooKeeper with `forceSync=no`, etcd with its data on tmpfs (`/dev/shm`; etcd 3.4
//!   has no `--unsafe-no-fsync`, so it fsyncs, which costs nothing there);
//! - fsync: ZooKeeper with `forceSync=yes` and etcd (which fsyncs its WAL by default), both with
//!   their data on the temporary directory's filesystem (a real disk on the project's machine:
//!   the heading names the filesystem). Every write waits for a disk flush, so this run does
//!   `WAZOO_BENCH_FSYNC_OPS` (default 1000) operations after a shorter warm-up.
//!
//! Uncontended: one client, a path (or etcd lock name) of its own, `WAZOO_BENCH_OPS` operations
//! (default 4000) after a warm-up; wasm, native, the two floors, the daemon and etcd interleaved
//! round by round, then Curator and kazoo one after the other, then the 2-round-trip floor
//! again (how far the server drifted meanwhile). A daemon operation is one `Acquire` (family
//! LOCK) and its `Release` in a client session kept alive by the client; an etcd operation is
//! one `Lock` with the client's lease and its `Unlock`. Contended: 16
//! contenders on one path for a fixed time, ops/s counted over every operation started before
//! the deadline; the daemon's and etcd's contenders each have a connection of their own (and a
//! client session, or a lease). Under the two tables, the speed targets (issue 32) beside what
//! the run measured.
//!
//! Run with `make bench`, or after `make recipes`:
//! `cargo bench -p wazoo-cli --bench peers --features etcd`. Without `--features etcd` (whose
//! build needs protoc) etcd is not measured. `WAZOO_ZOOKEEPER` uses an existing ZooKeeper
//! instead of starting one (one run then, with that server's own settings; etcd on tmpfs).
//! `WAZOO_BENCH_RUNS=nosync` or `fsync` does one of the two runs. `WAZOO_BENCH_RUNTIME=current`
//! runs everything in-process on a current-thread tokio runtime instead of the multi-thread one
//! (what the CLI and the daemon use); `WAZOO_BENCH_RUNTIME=compare` only measures the wasm
//! recipe, the native lock and the floors on a multi-thread runtime, a current-thread one and a
//! current-thread one without the host, in one process, alternating. Needs java, javac,
//! Debian's Curator jars and kazoo for python3 (all installed by `make setup`), and Debian's
//! etcd-server and protoc (`.ci/setup-bench`).

mod common;
#[path = "peers/floor.rs"]
mod floor;

use anyhow::Context;
use common::{percentile, us};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use wazoo_runtime::{Claim, Host, HostConfig, KeeperConfig, LockHandle, SandboxLimits, Want};
use wazoo_testkit::ServerOptions;
use zookeeper_client::{Acls, Client, CreateMode, LockOptions, LockPrefix};

/// Interleaved rounds of the uncontended in-process, daemon and etcd runs.
const ROUNDS: usize = 20;
/// Untimed uncontended operations before the timed ones (all but kazoo), without fsync.
const WARMUP: usize = 3000;
/// kazoo's warm-up: CPython has no JIT to warm, only the server.
const KAZOO_WARMUP: usize = 500;
/// Timed uncontended operations per client of the fsync run, unless `WAZOO_BENCH_FSYNC_OPS`.
const FSYNC_OPS: usize = 1000;
/// Untimed uncontended operations of the fsync run (all sides, kazoo too): the code is warm from
/// the first run, and every operation waits for the disk.
const FSYNC_WARMUP: usize = 100;
/// Untimed operations of the floor measured again after Curator and kazoo, at most.
const AGAIN_WARMUP: usize = 500;
/// Contenders on the one contended path.
const CONTENDERS: usize = 16;
/// Timed contended run of each side (each after an untimed run of the same length, for peers).
const CONTENDED: Duration = Duration::from_secs(5);
/// kazoo's contended run, shorter: its operations are slow.
const KAZOO_CONTENDED: Duration = Duration::from_secs(3);
/// Interleaved rounds of the contended in-process, daemon and etcd runs, `CONTENDED` split
/// among them.
const CONTENDED_ROUNDS: u32 = 4;
/// Debian's Curator jars and the no-op logger they need.
const CURATOR_JARS: &str = "/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar";
/// The longest a child bench may take.
const CHILD_LIMIT: Duration = Duration::from_secs(150);
/// The daemon's fallback look at the plugins directory (inotify sees changes first).
const WATCH_EVERY: Duration = Duration::from_secs(5);
/// TTL of a daemon client's session, kept alive by the client.
const DAEMON_TTL: Duration = Duration::from_secs(10);
/// Acquire timeout on the daemon: far above any wait in a run, so a stuck lock fails the bench.
const ACQUIRE_TIMEOUT_MS: u64 = 60_000;

/// Uncontended figures of one client.
struct Uncontended {
    p50: Duration,
    p99: Duration,
    ops_per_s: f64,
}

/// Contended figures of one side: operations done and their rate.
struct Contended {
    ops: u64,
    ops_per_s: f64,
}

/// One of the bench's runs: whether the servers flush to disk, and how many operations.
#[derive(Clone, Copy)]
struct Plan {
    fsync: bool,
    ops: usize,
    warmup: usize,
    kazoo_warmup: usize,
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn main() -> anyhow::Result<()> {
    let ops = env_usize("WAZOO_BENCH_OPS").unwrap_or(4000);
    let fsync_ops = env_usize("WAZOO_BENCH_FSYNC_OPS").unwrap_or(FSYNC_OPS);
    let current = match std::env::var("WAZOO_BENCH_RUNTIME").as_deref() {
        Ok("current") => true,
        Ok("multi") | Err(_) => false,
        Ok("compare") => return compare_runtimes(ops),
        Ok(other) => {
            anyhow::bail!("WAZOO_BENCH_RUNTIME={other}: `multi` (the default), `current` or `compare`")
        }
    };
    let external = std::env::var_os("WAZOO_ZOOKEEPER").is_some();
    let nosync = Plan { fsync: false, ops, warmup: WARMUP, kazoo_warmup: KAZOO_WARMUP };
    let fsync = Plan { fsync: true, ops: fsync_ops, warmup: FSYNC_WARMUP, kazoo_warmup: FSYNC_WARMUP };
    let plans = match std::env::var("WAZOO_BENCH_RUNS").as_deref() {
        // An existing ZooKeeper runs with its own settings: one run.
        _ if external => vec![nosync],
        Ok("nosync") => vec![nosync],
        Ok("fsync") => vec![fsync],
        Ok("both") | Err(_) => vec![nosync, fsync],
        Ok(other) => anyhow::bail!("WAZOO_BENCH_RUNS={other}: `both` (the default), `nosync` or `fsync`"),
    };
    let (plugins, _) = common::plugin("lock")?;
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/peers");

    // The peers' tools first, so a missing one fails before anything starts.
    check_tools()?;
    let classes = TempDir::new()?;
    compile_curator(&peers.join("CuratorBench.java"), &classes.0)?;

    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let (runtime, flavour) = if current {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        (runtime, "tokio current-thread runtime (`WAZOO_BENCH_RUNTIME=current`)".to_string())
    } else {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        (runtime, format!("tokio multi-thread runtime ({cores} workers)"))
    };
    for (i, plan) in plans.iter().enumerate() {
        // WAZOO_ZOOKEEPER points the bench at an existing ensemble; otherwise it starts a server.
        let options = ServerOptions { force_sync: plan.fsync, ..ServerOptions::default() };
        let (server, address) = common::zookeeper(options)?;
        let zookeeper = match &server {
            Some(server) => format!(
                "ZooKeeper 3.8.0 standalone on 127.0.0.1 with `forceSync={}`, its data on {}",
                if plan.fsync { "yes" } else { "no" },
                filesystem(server.data_dir())
            ),
            None => format!("ZooKeeper at {address} (`WAZOO_ZOOKEEPER`, its own `forceSync`)"),
        };
        let title = match (external, plan.fsync) {
            (true, _) => "one run against an existing ZooKeeper".to_string(),
            (false, false) => format!("run {} of {}: no fsync", i + 1, plans.len()),
            (false, true) => format!("run {} of {}: fsync", i + 1, plans.len()),
        };
        let bench = Bench {
            address,
            plugins: plugins.clone(),
            peers: peers.clone(),
            classes: classes.0.clone(),
            plan: *plan,
            // etcd's data on disk only where ZooKeeper's is flushed too.
            etcd_on_disk: plan.fsync && !external,
            heading: Heading { title, zookeeper, flavour: flavour.clone(), cores },
        };
        if i > 0 {
            println!();
        }
        // Everything runs in a spawned task, as the CLI's and a daemon's calls do.
        let outcome = runtime.block_on(async move { tokio::spawn(bench.run()).await? });
        drop(server);
        outcome?;
    }
    Ok(())
}

/// `WAZOO_BENCH_RUNTIME=compare`: the wasm recipe, the native lock and the two floors on a
/// multi-thread and on a current-thread tokio runtime, in one process against one ZooKeeper
/// (`forceSync=no`), the two runtimes' sides alternating round by round; one table of p50s.
fn compare_runtimes(ops: usize) -> anyhow::Result<()> {
    let (plugins, _) = common::plugin("lock")?;
    let (server, address) = common::zookeeper(ServerOptions::default())?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    // The third: a current-thread runtime with no host on it, as a minimal program has it.
    let runtimes = [
        (
            tokio::runtime::Builder::new_multi_thread().enable_all().build()?,
            format!("multi-thread ({cores} workers)"),
            true,
        ),
        (
            tokio::runtime::Builder::new_current_thread().enable_all().build()?,
            "current-thread".to_string(),
            true,
        ),
        (
            tokio::runtime::Builder::new_current_thread().enable_all().build()?,
            "current-thread, no host on it".to_string(),
            false,
        ),
    ];
    const NAMES: [&str; 4] = [
        "wasm: wazoo `lock` recipe through the host",
        "native: zookeeper-client `Client::lock` (3 round trips)",
        "floor: create + list together, then delete (2 round trips)",
        "floor: the delete sent with the next create + list (1 round trip)",
    ];
    // Each runtime's sides are made on it (a host and clients of their own) and only ever run
    // there, in a spawned task as the CLI's and the daemon's calls do.
    let mut hosts = Vec::new();
    let mut sides = Vec::new();
    for (i, (runtime, _, with_host)) in runtimes.iter().enumerate() {
        let root = format!("/bench-peers/{}-runtime-{i}", std::process::id());
        let (address, plugins, with_host) = (address.clone(), plugins.clone(), *with_host);
        let (host, lockers) = runtime.block_on(async move {
            let host = match with_host {
                true => Some(
                    Host::start(HostConfig {
                        keeper: KeeperConfig { zookeeper: address.clone(), ..KeeperConfig::default() },
                        plugins,
                        limits: SandboxLimits::default(),
                        allowed: None,
                        embedded: None,
                        cache: None,
                    })
                    .await?,
                ),
                false => None,
            };
            let native = Client::connector().connect(&address).await?;
            let wasm = match &host {
                Some(host) => Some(Locker::Wasm(host.lock("lock").await?, format!("{root}/wasm"))),
                None => None,
            };
            let lockers = vec![
                wasm,
                Some(Locker::Native(native, format!("{root}/native"))),
                Some(Locker::Floor(Box::new(
                    floor::Floor::start(&address, &format!("{root}/floor2"), false).await?,
                ))),
                Some(Locker::Floor(Box::new(
                    floor::Floor::start(&address, &format!("{root}/floor1"), true).await?,
                ))),
            ];
            anyhow::Ok((host, lockers))
        })?;
        hosts.push(host);
        sides.push(lockers);
    }
    // `n` operations of each side on `runtime`, the sides in round `round`'s order.
    let run = |runtime: &tokio::runtime::Runtime, lockers: Vec<Option<Locker>>, n: usize, round: usize| {
        runtime.block_on(async move {
            tokio::spawn(async move {
                let mut lockers = lockers;
                let mut times = vec![Vec::with_capacity(n); lockers.len()];
                for side in order(round, lockers.len()) {
                    if let Some(locker) = &mut lockers[side] {
                        for _ in 0..n {
                            let started = Instant::now();
                            locker.once().await?;
                            times[side].push(started.elapsed());
                        }
                    }
                }
                anyhow::Ok((lockers, times))
            })
            .await?
        })
    };
    // A current-thread runtime serves its sessions only while it runs: the warm-up alternates
    // too, so no session waits long enough to expire.
    for round in 0..ROUNDS {
        for i in order(round, runtimes.len()) {
            sides[i] = run(&runtimes[i].0, std::mem::take(&mut sides[i]), WARMUP / ROUNDS, round)?.0;
        }
    }
    let per_round = ops.div_ceil(ROUNDS);
    let mut times = vec![vec![Vec::new(); NAMES.len()]; runtimes.len()];
    for round in 0..ROUNDS {
        for i in order(round, runtimes.len()) {
            let (back, took) = run(&runtimes[i].0, std::mem::take(&mut sides[i]), per_round, round)?;
            sides[i] = back;
            for (all, new) in times[i].iter_mut().zip(took) {
                all.extend(new);
            }
        }
    }
    for (i, (runtime, _, _)) in runtimes.iter().enumerate() {
        let (mut lockers, host) = (std::mem::take(&mut sides[i]), hosts.remove(0));
        runtime.block_on(async move {
            for side in lockers.iter_mut() {
                if let Some(Locker::Floor(floor)) = side {
                    floor.finish().await?;
                }
            }
            drop(lockers);
            drop(host);
            anyhow::Ok(())
        })?;
    }
    drop(server);

    // p50 and p99 of each runtime's sides (`None`: not run there).
    let figures: Vec<Vec<Option<(Duration, Duration)>>> = times
        .iter_mut()
        .map(|sides| {
            sides
                .iter_mut()
                .map(|t| (!t.is_empty()).then(|| (percentile(t, 50.0), percentile(t, 99.0))))
                .collect()
        })
        .collect();
    println!("### tokio runtime flavour: multi-thread and current-thread in one process");
    println!();
    println!(
        "ZooKeeper 3.8.0 standalone on 127.0.0.1 with `forceSync=no`; {cores} cores; each runtime with clients \
         (and a host) of its own; {ops} acquire+release per side and runtime ({WARMUP} warm-up), the runtimes \
         alternating in {ROUNDS} rounds; p50 (p99), and p50 vs the 2-round-trip floor on the same runtime"
    );
    println!();
    print!("| uncontended |");
    for (_, name, _) in &runtimes {
        print!(" {name} | vs floor |");
    }
    println!();
    println!("|---|{}", "---:|---:|".repeat(runtimes.len()));
    for (side, name) in NAMES.iter().enumerate() {
        print!("| {name} |");
        for runtime in &figures {
            match (runtime[side], runtime[2]) {
                (Some((p50, p99)), Some((floor, _))) => {
                    print!(" {} ({}) | {:.3}× |", us(p50), us(p99), p50.as_secs_f64() / floor.as_secs_f64())
                }
                _ => print!(" – | – |"),
            }
        }
        println!();
    }
    Ok(())
}

/// What a run's heading says beside its figures.
struct Heading {
    title: String,
    zookeeper: String,
    flavour: String,
    cores: usize,
}

struct Bench {
    address: String,
    plugins: PathBuf,
    peers: PathBuf,
    classes: PathBuf,
    plan: Plan,
    /// etcd's data in the temporary directory (flushed to disk), else on tmpfs.
    etcd_on_disk: bool,
    heading: Heading,
}

/// What the in-process sides measured: wasm, native, the two floors, the daemon and (with
/// `--features etcd`) etcd.
struct InProcess {
    wasm: (Uncontended, Contended),
    /// The `lock` recipe's claim taken again in a loop (`Claim::requeue`: one `multi` a turn).
    retake: (Uncontended, Contended),
    native: (Uncontended, Contended),
    /// The 2-round-trip floor: create and list together, then the delete awaited.
    floor2: Uncontended,
    /// The 1-round-trip floor: the delete sent with the next create and list.
    floor1: Uncontended,
    daemon: (Uncontended, Contended),
    /// Through the daemon, a `Hold` stream taking its claim again (`requeue`).
    daemon_retake: (Uncontended, Contended),
    etcd: Option<(Uncontended, Contended)>,
    /// The daemon's gRPC address, for the heading.
    grpc: SocketAddr,
    /// etcd's version and where its data is, for the heading.
    etcd_note: Option<String>,
}

impl Bench {
    async fn run(self) -> anyhow::Result<()> {
        let plan = self.plan;
        // A unique root, so an existing ensemble's leftovers never meet this run.
        let root =
            format!("/bench-peers/{}-{}", std::process::id(), if plan.fsync { "fsync" } else { "nosync" });
        let measured = self.in_process(&root).await?;
        let InProcess { wasm, retake, native, floor2, floor1, daemon, daemon_retake, etcd, grpc, etcd_note } =
            measured;
        let (wasm, wasm_many) = wasm;
        let (retake, retake_many) = retake;
        let (native_one, native_many) = native;
        let (daemon_one, daemon_many) = daemon;
        let (daemon_retake_one, daemon_retake_many) = daemon_retake;
        let (etcd_one, etcd_many) = match etcd {
            Some((one, many)) => (Some(one), Some(many)),
            None => (None, None),
        };

        let seconds = |d: Duration| format!("{}", d.as_secs_f64());
        let classpath = format!("{}:{CURATOR_JARS}", self.classes.display());
        let mut java = tokio::process::Command::new("java");
        java.args(["-cp", &classpath, "CuratorBench", &self.address, &format!("{root}/curator")]).args([
            plan.warmup.to_string(),
            plan.ops.to_string(),
            CONTENDERS.to_string(),
            seconds(CONTENDED),
        ]);
        let (curator, curator_many) = peer("Curator", java).await?;

        let mut python = tokio::process::Command::new("python3");
        python.arg(self.peers.join("kazoo_bench.py")).args([&self.address, &format!("{root}/kazoo")]).args([
            plan.kazoo_warmup.to_string(),
            plan.ops.to_string(),
            CONTENDERS.to_string(),
            seconds(KAZOO_CONTENDED),
        ]);
        let (kazoo, kazoo_many) = peer("kazoo", python).await?;

        // The 2-round-trip floor again, after the children: how far the server (and the disk,
        // with fsync) drifted between the in-process sides and Curator's and kazoo's runs.
        let again = floor::Floor::start(&self.address, &format!("{root}/floor2-again"), false).await?;
        let mut again = [Locker::Floor(Box::new(again))];
        let floor2_again = uncontended(&mut again, plan.ops, plan.warmup.min(AGAIN_WARMUP))
            .await?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("the floor measured again has no figures"))?;
        if let [Locker::Floor(floor)] = &mut again {
            floor.finish().await?;
        }

        let Heading { title, zookeeper, flavour, cores } = &self.heading;
        println!("### {title}");
        println!();
        println!(
            "{zookeeper}{}; {cores} cores, one run, in-process sides on a {flavour}; daemon in-process on {grpc}; \
             uncontended: {} acquire+release per client ({} warm-up, kazoo {}{}), {} in {ROUNDS} interleaved rounds, then Curator and kazoo, then the 2-round-trip floor again",
            match &etcd_note {
                Some(note) => format!("; {note}"),
                None => String::new(),
            },
            plan.ops,
            plan.warmup,
            plan.kazoo_warmup,
            if plan.fsync { "; fewer than without fsync, as every write waits for the disk" } else { "" },
            if etcd_one.is_some() {
                "wasm, native, the two floors, the daemon and etcd"
            } else {
                "wasm, native, the two floors and the daemon"
            }
        );
        if etcd_one.is_none() {
            println!();
            println!("etcd not measured: build the bench with `--features etcd` (`make bench` does)");
        }

        let ratio = |a: f64, b: f64| a / b;
        println!();
        print!(
            "| uncontended | p50 | p99 | ops/s | p50 vs 2-RT floor | p50 vs native | ops/s vs Curator | ops/s vs kazoo \
             | p99 vs Curator | p50 vs wasm |"
        );
        println!("{}", if etcd_one.is_some() { " p50 vs etcd |" } else { "" });
        println!(
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|{}",
            if etcd_one.is_some() { "---:|" } else { "" }
        );
        let mut rows = vec![
            ("wasm: wazoo `lock` recipe through the host", &wasm),
            (
                "wasm: the claim taken again in a loop (`Claim::requeue`: release and create in one `multi`)",
                &retake,
            ),
            ("native: zookeeper-client `Client::lock`, Curator prefix (3 round trips)", &native_one),
            ("floor: zookeeper-client, create + list together, then delete (2 round trips)", &floor2),
            ("floor: the delete sent with the next create + list (1 round trip)", &floor1),
            ("Curator 5.4 `InterProcessMutex` (JVM)", &curator),
            ("kazoo 2.11 `Lock` (CPython)", &kazoo),
            ("floor (2 round trips) again, after Curator and kazoo ran", &floor2_again),
            ("wazoo daemon, 1 gRPC client (`Hold` stream: acquire + release)", &daemon_one),
            (
                "wazoo daemon, 1 gRPC client taking its claim again (`Hold` stream: `requeue`)",
                &daemon_retake_one,
            ),
        ];
        let etcd_row = format!(
            "etcd 3.4 Lock + Unlock over gRPC ({})",
            if self.etcd_on_disk { "data on disk" } else { "data on tmpfs" }
        );
        if let Some(etcd) = &etcd_one {
            rows.push((etcd_row.as_str(), etcd));
        }
        for (name, row) in rows {
            let p50 = row.p50.as_secs_f64();
            print!(
                "| {name} | {} | {} | {:.0} | {:.3}× | {:.3}× | {:.2}× | {:.2}× | {:.3}× | {:.3}× |",
                us(row.p50),
                us(row.p99),
                row.ops_per_s,
                ratio(p50, floor2.p50.as_secs_f64()),
                ratio(p50, native_one.p50.as_secs_f64()),
                ratio(row.ops_per_s, curator.ops_per_s),
                ratio(row.ops_per_s, kazoo.ops_per_s),
                ratio(row.p99.as_secs_f64(), curator.p99.as_secs_f64()),
                ratio(p50, wasm.p50.as_secs_f64()),
            );
            match &etcd_one {
                Some(etcd) => println!(" {:.3}× |", ratio(p50, etcd.p50.as_secs_f64())),
                None => println!(),
            }
        }
        println!();
        println!(
            "| {CONTENDERS} contenders, one path ({} s each, kazoo {} s) | acquire+release pairs | ops/s | ops/s vs Curator |",
            CONTENDED.as_secs(),
            KAZOO_CONTENDED.as_secs()
        );
        println!("|---|---:|---:|---:|");
        let mut rows = vec![
            ("wasm: one host, a handle per tokio task", &wasm_many),
            ("wasm, each taking its claim again (`Claim::requeue`: one `multi` per hand-over)", &retake_many),
            ("native: one shared `Client`, a tokio task each", &native_many),
            ("Curator: one `CuratorFramework`, a thread and a mutex each", &curator_many),
            ("kazoo: one `KazooClient`, a thread and a `Lock` each", &kazoo_many),
            ("wazoo daemon: 16 gRPC clients, one path", &daemon_many),
            ("wazoo daemon: 16 gRPC clients, each taking its claim again (`requeue`)", &daemon_retake_many),
        ];
        if let Some(etcd) = &etcd_many {
            rows.push(("etcd 3.4: 16 clients, one name", etcd));
        }
        for (name, row) in rows {
            println!(
                "| {name} | {} | {:.0} | {:.2}× |",
                row.ops,
                row.ops_per_s,
                ratio(row.ops_per_s, curator_many.ops_per_s)
            );
        }

        const NO_ETCD: &str = "not measured (`--features etcd`)";
        let targets = [
            Target::at_most(
                "wasm lock acquire+release vs the 2-round-trip floor, p50",
                1.1,
                Ok(ratio(wasm.p50.as_secs_f64(), floor2.p50.as_secs_f64())),
            ),
            Target::at_most(
                "wasm lock acquire+release vs native `Client::lock`, p50",
                0.85,
                Ok(ratio(wasm.p50.as_secs_f64(), native_one.p50.as_secs_f64())),
            ),
            Target::at_most(
                "a client re-taking the same lock in a loop (release and re-acquire in one `multi`) vs native \
                 `Client::lock` in a loop, p50",
                0.6,
                Ok(ratio(retake.p50.as_secs_f64(), native_one.p50.as_secs_f64())),
            ),
            Target::at_least(
                "wasm lock ops/s vs Curator's (uncontended)",
                2.0,
                Ok(ratio(wasm.ops_per_s, curator.ops_per_s)),
            ),
            Target::at_least(
                "wasm lock ops/s vs kazoo's (uncontended)",
                5.0,
                Ok(ratio(wasm.ops_per_s, kazoo.ops_per_s)),
            ),
            Target::at_least(
                "16 contenders, one path, in-process (wasm) vs Curator's contended rate",
                1.5,
                Ok(ratio(wasm_many.ops_per_s, curator_many.ops_per_s)),
            ),
            Target::at_most(
                "daemon, one client (`Hold`), vs the in-process recipe, p50",
                1.2,
                Ok(ratio(daemon_one.p50.as_secs_f64(), wasm.p50.as_secs_f64())),
            ),
            Target::at_most(
                "daemon, one client, vs etcd 3.4 Lock+Unlock, p50",
                0.8,
                etcd_one.as_ref().map(|etcd| ratio(daemon_one.p50.as_secs_f64(), etcd.p50.as_secs_f64())).ok_or(NO_ETCD),
            ),
            Target::at_least(
                "daemon, 16 contending clients, vs Curator's contended rate",
                1.3,
                Ok(ratio(daemon_many.ops_per_s, curator_many.ops_per_s)),
            ),
        ];
        println!();
        println!("| target (issue 32) | target | measured | met? |");
        println!("|---|---:|---:|---|");
        for target in targets {
            println!("{}", target.row());
        }
        Ok(())
    }

    /// Starts the daemon (and etcd), runs the uncontended and contended in-process, floor, daemon
    /// and etcd sides, and stops what it started.
    async fn in_process(&self, root: &str) -> anyhow::Result<InProcess> {
        let config = HostConfig {
            keeper: KeeperConfig { zookeeper: self.address.clone(), ..KeeperConfig::default() },
            plugins: self.plugins.clone(),
            limits: SandboxLimits::default(),
            allowed: None,
            embedded: None,
            cache: None,
        };
        let host = Host::start(config).await?;
        let native = Client::connector().connect(&self.address).await?;

        // The daemon on the same Host, as `wazoo serve` runs it.
        let served = common::Served::start(&host, WATCH_EVERY).await?;
        let grpc = served.grpc;

        #[cfg(feature = "etcd")]
        let etcd = etcd::Etcd::start(self.etcd_on_disk).await?;

        // Uncontended: one client each, a path of its own.
        #[cfg_attr(not(feature = "etcd"), allow(unused_mut))]
        let mut one = vec![
            Locker::Wasm(host.lock("lock").await?, format!("{root}/wasm")),
            Locker::retake(&host, format!("{root}/retake")).await?,
            Locker::Native(native.clone(), format!("{root}/native")),
            Locker::Floor(Box::new(
                floor::Floor::start(&self.address, &format!("{root}/floor2"), false).await?,
            )),
            Locker::Floor(Box::new(
                floor::Floor::start(&self.address, &format!("{root}/floor1"), true).await?,
            )),
            Locker::Daemon(Box::new(DaemonClient::connect(grpc).await?), format!("{root}/daemon")),
            Locker::DaemonRetake(
                Box::new(DaemonClient::connect(grpc).await?),
                format!("{root}/daemon-retake"),
                false,
            ),
        ];
        #[cfg(feature = "etcd")]
        one.push(Locker::Etcd(Box::new(etcd.client(&format!("{root}/etcd")).await?)));
        let figures = uncontended(&mut one, self.plan.ops, self.plan.warmup).await?;
        for side in one.iter_mut() {
            if let Locker::Floor(floor) = side {
                floor.finish().await?;
            }
            side.let_go().await?;
        }
        drop(one);
        let mut figures = figures.into_iter();
        let mut next_one =
            || figures.next().ok_or_else(|| anyhow::anyhow!("a side of the bench has no figures"));
        let (wasm_one, retake_one, native_one, floor2, floor1, daemon_one, daemon_retake_one) =
            (next_one()?, next_one()?, next_one()?, next_one()?, next_one()?, next_one()?, next_one()?);
        #[cfg(feature = "etcd")]
        let etcd_one = next_one()?;

        // Contended: CONTENDERS of each on one path (or name) per side.
        let dir = format!("{root}/contended");
        let mut groups = Vec::new();
        let mut handles = Vec::with_capacity(CONTENDERS);
        for _ in 0..CONTENDERS {
            handles.push(Locker::Wasm(host.lock("lock").await?, format!("{dir}/wasm")));
        }
        groups.push(handles);
        let mut retakers = Vec::with_capacity(CONTENDERS);
        for _ in 0..CONTENDERS {
            retakers.push(Locker::Retake(host.clone(), None, format!("{dir}/retake")));
        }
        groups.push(retakers);
        // One shared client (one session, as the host's handles share the host's).
        groups
            .push((0..CONTENDERS).map(|_| Locker::Native(native.clone(), format!("{dir}/native"))).collect());
        let mut clients = Vec::with_capacity(CONTENDERS);
        for _ in 0..CONTENDERS {
            clients
                .push(Locker::Daemon(Box::new(DaemonClient::connect(grpc).await?), format!("{dir}/daemon")));
        }
        groups.push(clients);
        let mut retakers = Vec::with_capacity(CONTENDERS);
        for _ in 0..CONTENDERS {
            retakers.push(Locker::DaemonRetake(
                Box::new(DaemonClient::connect(grpc).await?),
                format!("{dir}/daemon-retake"),
                false,
            ));
        }
        groups.push(retakers);
        #[cfg(feature = "etcd")]
        {
            let mut clients = Vec::with_capacity(CONTENDERS);
            for _ in 0..CONTENDERS {
                clients.push(Locker::Etcd(Box::new(etcd.client(&format!("{dir}/etcd")).await?)));
            }
            groups.push(clients);
        }
        let mut many = contended(groups).await?.into_iter();
        let mut next_many =
            || many.next().ok_or_else(|| anyhow::anyhow!("a side of the bench has no figures"));
        let (wasm_many, retake_many, native_many, daemon_many, daemon_retake_many) =
            (next_many()?, next_many()?, next_many()?, next_many()?, next_many()?);
        #[cfg(feature = "etcd")]
        let (etcd_side, etcd_note) = (
            Some((etcd_one, next_many()?)),
            Some(format!(
                "etcd {} (one member, its data on {}{}) on 127.0.0.1",
                etcd.version,
                filesystem(&etcd.scratch),
                if self.etcd_on_disk {
                    ", its WAL fsynced per commit as by default"
                } else {
                    "; etcd 3.4 has no `--unsafe-no-fsync`, and its fsyncs cost nothing on tmpfs"
                }
            )),
        );
        #[cfg(not(feature = "etcd"))]
        let (etcd_side, etcd_note) = (None, None);

        #[cfg(feature = "etcd")]
        drop(etcd);
        served.stop().await?;
        drop(host);
        drop(native);
        Ok(InProcess {
            wasm: (wasm_one, wasm_many),
            retake: (retake_one, retake_many),
            native: (native_one, native_many),
            floor2,
            floor1,
            daemon: (daemon_one, daemon_many),
            daemon_retake: (daemon_retake_one, daemon_retake_many),
            etcd: etcd_side,
            grpc,
            etcd_note,
        })
    }
}

/// The filesystem `path` is on, by its type, and the path: `ext4 (/tmp/…)`.
fn filesystem(path: &Path) -> String {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return format!("{}", path.display());
    };
    // SAFETY: statfs fills the struct it is given for a NUL-terminated path.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c_path.as_ptr(), &mut stat) } != 0 {
        return format!("{}", path.display());
    }
    let kind = match stat.f_type as i64 {
        0x0102_1994 => "tmpfs".to_string(),
        0xEF53 => "ext4".to_string(),
        0x5846_5342 => "xfs".to_string(),
        0x9123_683E => "btrfs".to_string(),
        0x794C_7630 => "overlayfs".to_string(),
        other => format!("a filesystem of type {other:#x}"),
    };
    format!("{kind} ({})", path.display())
}

/// One target of the speed issue: a ratio this run measured, at most or at least `bound`.
struct Target {
    measure: &'static str,
    at_most: bool,
    bound: f64,
    /// `Err`: why this run did not measure it.
    measured: Result<f64, &'static str>,
}

impl Target {
    fn at_most(measure: &'static str, bound: f64, measured: Result<f64, &'static str>) -> Target {
        Target { measure, at_most: true, bound, measured }
    }

    fn at_least(measure: &'static str, bound: f64, measured: Result<f64, &'static str>) -> Target {
        Target { measure, at_most: false, bound, measured }
    }

    /// The target as a row of `| measure | target | measured | met? |`.
    fn row(&self) -> String {
        let target = format!("{} {}×", if self.at_most { "≤" } else { "≥" }, self.bound);
        match self.measured {
            Ok(m) => {
                let met = if self.at_most { m <= self.bound } else { m >= self.bound };
                format!("| {} | {target} | {m:.3}× | {} |", self.measure, if met { "yes" } else { "no" })
            }
            Err(why) => format!("| {} | {target} | {why} | – |", self.measure),
        }
    }
}

/// One client of one lock service, looping acquire+release on one lock.
enum Locker {
    /// A `lock` recipe handle on the in-process host, and its path.
    Wasm(LockHandle, String),
    /// A claim of the `lock` recipe taken again each time ([`Claim::requeue`]), taken first
    /// through the host when there is none yet, and its path.
    Retake(Host, Option<Claim>, String),
    /// zookeeper-client's lock, and its path.
    Native(Client, String),
    /// The protocol's floor, a client of its own.
    Floor(Box<floor::Floor>),
    /// A gRPC client of the daemon, and its path.
    Daemon(Box<DaemonClient>, String),
    /// A gRPC client of the daemon taking its claim again each time (`Holder::requeue`), its
    /// path, and whether it holds the claim yet.
    DaemonRetake(Box<DaemonClient>, String, bool),
    /// An etcd client with a lease of its own, and its lock name.
    #[cfg(feature = "etcd")]
    Etcd(Box<etcd::EtcdClient>),
}

impl Locker {
    /// A claim of the `lock` recipe at `path`, held, to be taken again in a loop.
    async fn retake(host: &Host, path: String) -> anyhow::Result<Locker> {
        let claim = Self::take(host, &path).await?;
        Ok(Locker::Retake(host.clone(), Some(claim), path))
    }

    async fn take(host: &Host, path: &str) -> anyhow::Result<Claim> {
        let mut contender = host.contender(Want::Lock, "lock").await?;
        let granted = contender.acquire(path, None).await?;
        Ok(contender.claim(granted))
    }

    /// Lets go of a claim taken again, held between its turns; nothing for the others.
    async fn let_go(&mut self) -> anyhow::Result<()> {
        match self {
            Locker::Retake(_, held, _) => {
                if let Some(claim) = held.take() {
                    claim.release().await?;
                }
            }
            Locker::DaemonRetake(client, _, held) if *held => {
                client.holder.release().await.context("daemon Hold release")?;
                *held = false;
            }
            _ => {}
        }
        Ok(())
    }

    /// One acquire and its release (for a claim taken again: its release and the next acquire).
    async fn once(&mut self) -> anyhow::Result<()> {
        match self {
            Locker::Retake(host, held, path) => {
                let claim = match held.take() {
                    Some(claim) => claim.requeue(path, None).await?,
                    None => Self::take(host, path).await?,
                };
                *held = Some(claim);
            }
            Locker::Wasm(handle, path) => {
                handle.acquire(path, None).await?;
                handle.release().await?;
            }
            Locker::Native(client, path) => native_lock(client, path).await?,
            Locker::Floor(floor) => floor.once().await?,
            Locker::Daemon(client, path) => daemon_lock_once(client, path).await?,
            Locker::DaemonRetake(client, path, held) => {
                if *held {
                    client.holder.requeue().await.context("daemon Hold requeue")?;
                } else {
                    let options = wazoo_client::LockOptions {
                        timeout: Some(Duration::from_millis(ACQUIRE_TIMEOUT_MS)),
                        ..Default::default()
                    };
                    client.holder.acquire(path, &options).await.context("daemon Hold acquire")?;
                    *held = true;
                }
            }
            #[cfg(feature = "etcd")]
            Locker::Etcd(client) => etcd::lock_once(client).await?,
        }
        Ok(())
    }
}

/// The order of `sides` sides in round `round`: rotated by one each round, so no side always
/// follows another.
fn order(round: usize, sides: usize) -> impl Iterator<Item = usize> {
    (0..sides).map(move |i| (i + round) % sides)
}

/// Uncontended acquire+release, a client per side on a path of its own, `warmup` operations each
/// together, then alternated round by round so server-side drift hits every side alike. Figures
/// in the order of `sides`.
async fn uncontended(sides: &mut [Locker], ops: usize, warmup: usize) -> anyhow::Result<Vec<Uncontended>> {
    for _ in 0..warmup {
        for side in sides.iter_mut() {
            side.once().await?;
        }
    }
    let per_round = ops.div_ceil(ROUNDS);
    let mut times = vec![Vec::with_capacity(per_round * ROUNDS); sides.len()];
    let mut totals = vec![Duration::ZERO; sides.len()];
    for round in 0..ROUNDS {
        for side in order(round, sides.len()) {
            let started_round = Instant::now();
            for _ in 0..per_round {
                let started = Instant::now();
                sides[side].once().await?;
                times[side].push(started.elapsed());
            }
            totals[side] += started_round.elapsed();
        }
    }
    Ok(times
        .iter_mut()
        .zip(totals)
        .map(|(times, total)| Uncontended {
            p50: percentile(times, 50.0),
            p99: percentile(times, 99.0),
            ops_per_s: times.len() as f64 / total.as_secs_f64(),
        })
        .collect())
}

/// Each group's contenders on their one path, in alternating rounds that add up to `CONTENDED`
/// per group, after an untimed round of each. Figures in the order of `groups`.
async fn contended(mut groups: Vec<Vec<Locker>>) -> anyhow::Result<Vec<Contended>> {
    let round = CONTENDED / CONTENDED_ROUNDS;
    for group in groups.iter_mut() {
        *group = contend(std::mem::take(group), round).await?.0;
    }
    let mut sums = vec![(0u64, Duration::ZERO); groups.len()];
    for r in 0..CONTENDED_ROUNDS as usize {
        for side in order(r, groups.len()) {
            let (back, ops, elapsed) = contend(std::mem::take(&mut groups[side]), round).await?;
            groups[side] = back;
            sums[side] = (sums[side].0 + ops, sums[side].1 + elapsed);
        }
    }
    Ok(sums
        .into_iter()
        .map(|(ops, elapsed)| Contended { ops, ops_per_s: ops as f64 / elapsed.as_secs_f64() })
        .collect())
}

/// Each contender loops acquire+release in its own task until `length` has passed; every
/// operation started before then counts, over the time until the last task is done. Gives the
/// contenders back with the operations and that time.
async fn contend(lockers: Vec<Locker>, length: Duration) -> anyhow::Result<(Vec<Locker>, u64, Duration)> {
    let started = Instant::now();
    let deadline = started + length;
    let tasks: Vec<_> = lockers
        .into_iter()
        .map(|mut locker| {
            tokio::spawn(async move {
                let mut done = 0u64;
                while Instant::now() < deadline {
                    locker.once().await?;
                    done += 1;
                }
                // A claim taken again is held when its turn ends: let go, so the others' turns
                // end too.
                locker.let_go().await?;
                anyhow::Ok((locker, done))
            })
        })
        .collect();
    let (mut lockers, mut total) = (Vec::with_capacity(tasks.len()), 0);
    for task in tasks {
        let (locker, done) = task.await??;
        lockers.push(locker);
        total += done;
    }
    Ok((lockers, total, started.elapsed()))
}

/// The native baseline: acquire, then an awaited delete (the `LockClient` drop would delete in
/// the background, which would flatter the native side).
async fn native_lock(client: &Client, dir: &str) -> anyhow::Result<()> {
    let options = LockOptions::new(Acls::anyone_all())
        .with_ancestor_options(CreateMode::Container.with_acls(Acls::anyone_all()))?;
    let lock = client.lock(LockPrefix::new_curator(dir, "lock-")?, b"", options).await?;
    client.delete(lock.lock_path(), None).await?;
    // Already deleted: skip the drop's second, background delete.
    std::mem::forget(lock);
    Ok(())
}

/// A gRPC client of the daemon: a connection, a client session of its own (kept alive by the
/// client until dropped) and a `Hold` stream in it.
struct DaemonClient {
    holder: wazoo_client::Holder,
    _session: wazoo_client::Session,
}

impl DaemonClient {
    async fn connect(grpc: SocketAddr) -> anyhow::Result<DaemonClient> {
        let client = wazoo_client::Client::connect(&grpc.to_string(), None, Duration::from_secs(5)).await?;
        let session = client.session(DAEMON_TTL, "bench-peers".into()).await?;
        let holder = client.holder(&session).await?;
        Ok(DaemonClient { holder, _session: session })
    }
}

/// One lock operation through the daemon, as a client taking locks over and over does it: the
/// lock at `path` taken and released on the client's `Hold` stream.
async fn daemon_lock_once(daemon: &mut DaemonClient, path: &str) -> anyhow::Result<()> {
    let options = wazoo_client::LockOptions {
        timeout: Some(Duration::from_millis(ACQUIRE_TIMEOUT_MS)),
        ..Default::default()
    };
    daemon.holder.acquire(path, &options).await.context("daemon Hold acquire")?;
    daemon.holder.release().await.context("daemon Hold release")?;
    Ok(())
}

/// etcd 3.4 as a child process, and its lock service through etcd-client.
#[cfg(feature = "etcd")]
mod etcd {
    use anyhow::Context;
    use std::path::PathBuf;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    /// Debian's etcd-server.
    pub const ETCD: &str = "/usr/bin/etcd";
    /// The longest etcd may take to answer after it starts.
    const START_LIMIT: Duration = Duration::from_secs(20);
    /// TTL of each client's lease, kept alive every third of it.
    const LEASE_TTL: i64 = 60;

    /// A one-member etcd on 127.0.0.1, its data on tmpfs or on disk: killed, and its data
    /// removed, when dropped.
    pub struct Etcd {
        child: std::process::Child,
        /// The directory of its data and logs.
        pub scratch: PathBuf,
        endpoint: String,
        /// The server's version, as its status reports it.
        pub version: String,
    }

    impl Etcd {
        /// Starts etcd in a fresh directory, under the temporary directory when `on_disk` (etcd
        /// fsyncs its WAL there, as by default) else under /dev/shm (tmpfs, where the fsyncs
        /// cost nothing: etcd 3.4 has no `--unsafe-no-fsync`), and waits until it answers.
        pub async fn start(on_disk: bool) -> anyhow::Result<Etcd> {
            let base = if on_disk { std::env::temp_dir() } else { PathBuf::from("/dev/shm") };
            anyhow::ensure!(
                base.is_dir(),
                "{} missing: the peers bench keeps etcd's data there",
                base.display()
            );
            let scratch = base.join(format!("wazoo-bench-etcd-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&scratch);
            std::fs::create_dir_all(&scratch)?;
            let log = scratch.join("etcd.log");
            let (client_port, peer_port) = (wazoo_testkit::free_port()?, wazoo_testkit::free_port()?);
            let endpoint = format!("http://127.0.0.1:{client_port}");
            let peer = format!("http://127.0.0.1:{peer_port}");
            let spawned = std::process::Command::new(ETCD)
                .arg("--name=default")
                .arg(format!("--data-dir={}", scratch.join("data").display()))
                .arg(format!("--listen-client-urls={endpoint}"))
                .arg(format!("--advertise-client-urls={endpoint}"))
                .arg(format!("--listen-peer-urls={peer}"))
                .arg(format!("--initial-advertise-peer-urls={peer}"))
                .arg(format!("--initial-cluster=default={peer}"))
                .args(["--logger=zap", "--log-level=error", "--log-outputs=stderr"])
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(scratch.join("etcd.out"))?)
                .stderr(std::fs::File::create(&log)?)
                .spawn();
            let child = match spawned {
                Ok(child) => child,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&scratch);
                    anyhow::bail!("cannot start {ETCD}: {e}");
                }
            };
            // From here on, dropping `etcd` kills it and removes its directory.
            let mut etcd = Etcd { child, scratch, endpoint, version: String::new() };
            etcd.version = etcd.wait_until_ready().await?;
            Ok(etcd)
        }

        /// Asks etcd for its status until it answers (its version), it exits, or `START_LIMIT`
        /// passes.
        async fn wait_until_ready(&mut self) -> anyhow::Result<String> {
            let deadline = Instant::now() + START_LIMIT;
            let options = etcd_client::ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(1))
                .with_timeout(Duration::from_secs(1));
            loop {
                if let Some(status) = self.child.try_wait()? {
                    anyhow::bail!("etcd exited at start ({status}): {}", self.last_log_line());
                }
                let asked = async {
                    let mut client =
                        etcd_client::Client::connect([&self.endpoint], Some(options.clone())).await?;
                    let status = client.status().await?;
                    anyhow::Ok(status.version().to_string())
                };
                let last = match tokio::time::timeout(Duration::from_secs(2), asked).await {
                    Ok(Ok(version)) => return Ok(version),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "no answer within 2 s".to_string(),
                };
                if Instant::now() > deadline {
                    anyhow::bail!(
                        "etcd at {} did not answer within {START_LIMIT:?} ({last}); its log: {}",
                        self.endpoint,
                        self.last_log_line()
                    );
                }
                // Nothing to watch for a listener coming up: look again shortly.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }

        /// The last line etcd logged, for errors.
        fn last_log_line(&self) -> String {
            std::fs::read_to_string(self.scratch.join("etcd.log"))
                .ok()
                .and_then(|log| log.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string))
                .unwrap_or_else(|| "no log".to_string())
        }

        /// A client of its own (one connection) with a lease of its own, locking `name`.
        pub async fn client(&self, name: &str) -> anyhow::Result<EtcdClient> {
            let mut client = etcd_client::Client::connect([&self.endpoint], None).await?;
            let lease = client.lease_grant(LEASE_TTL, None).await?.id();
            let (mut keeper, mut replies) = client.lease_keep_alive(lease).await?;
            let keepalive = tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_secs(LEASE_TTL as u64 / 3));
                loop {
                    every.tick().await;
                    if keeper.keep_alive().await.is_err() {
                        break;
                    }
                    match replies.message().await {
                        Ok(Some(reply)) if reply.ttl() > 0 => {}
                        _ => break,
                    }
                }
            });
            Ok(EtcdClient { client, lease, name: name.as_bytes().to_vec(), keepalive })
        }
    }

    impl Drop for Etcd {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_dir_all(&self.scratch);
        }
    }

    /// An etcd client, its lease (kept alive until dropped) and the lock name it takes.
    pub struct EtcdClient {
        client: etcd_client::Client,
        lease: i64,
        name: Vec<u8>,
        keepalive: tokio::task::JoinHandle<()>,
    }

    impl Drop for EtcdClient {
        fn drop(&mut self) {
            self.keepalive.abort();
        }
    }

    /// One lock operation on etcd: `Lock` of the client's name with its lease, then `Unlock` of
    /// the key it returned.
    pub async fn lock_once(etcd: &mut EtcdClient) -> anyhow::Result<()> {
        let options = etcd_client::LockOptions::new().with_lease(etcd.lease);
        let locked = etcd.client.lock(etcd.name.clone(), Some(options)).await.context("etcd Lock")?;
        etcd.client.unlock(locked.key()).await.context("etcd Unlock")?;
        Ok(())
    }
}
/// Runs one peer's bench to the end and reads its two lines:
/// `uncontended <p50_us> <p99_us> <ops_per_s>` and `contended <ops> <ops_per_s>`.
async fn peer(name: &str, mut command: tokio::process::Command) -> anyhow::Result<(Uncontended, Contended)> {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let output = tokio::time::timeout(CHILD_LIMIT, command.output())
        .await
        .map_err(|_| anyhow::anyhow!("the {name} bench did not finish within {CHILD_LIMIT:?}"))??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
        anyhow::bail!("the {name} bench failed ({}): {last}", output.status);
    }
    let numbers = |tag: &str| -> anyhow::Result<Vec<f64>> {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(tag).and_then(|rest| rest.strip_prefix(' ')))
            .ok_or_else(|| anyhow::anyhow!("the {name} bench printed no `{tag}` line"))?;
        line.split_whitespace()
            .map(|w| {
                w.parse()
                    .map_err(|_| anyhow::anyhow!("the {name} bench printed a bad number in `{tag} {line}`"))
            })
            .collect()
    };
    let one = numbers("uncontended")?;
    let many = numbers("contended")?;
    anyhow::ensure!(one.len() == 3 && many.len() == 2, "the {name} bench printed lines of the wrong length");
    let micros = |v: f64| Duration::from_secs_f64(v / 1e6);
    Ok((
        Uncontended { p50: micros(one[0]), p99: micros(one[1]), ops_per_s: one[2] },
        Contended { ops: many[0] as u64, ops_per_s: many[1] },
    ))
}

/// Fails with one line naming the first missing tool: etcd (with `--features etcd`), java,
/// javac, the Curator jars, python3 or kazoo.
fn check_tools() -> anyhow::Result<()> {
    #[cfg(feature = "etcd")]
    anyhow::ensure!(
        Path::new(etcd::ETCD).exists(),
        "{} missing: the peers bench needs Debian's etcd-server (run `bash .ci/setup-bench`)",
        etcd::ETCD
    );
    for (tool, args, package) in [("java", &["-version"][..], "a JRE"), ("javac", &["-version"][..], "a JDK")]
    {
        let ran =
            std::process::Command::new(tool).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status();
        anyhow::ensure!(
            ran.map(|s| s.success()).unwrap_or(false),
            "{tool} not found: the peers bench needs {package} (run `make setup`)"
        );
    }
    for jar in CURATOR_JARS.split(':') {
        anyhow::ensure!(
            Path::new(jar).exists(),
            "{jar} missing: the peers bench needs Debian's Curator jars (run `make setup`)"
        );
    }
    let kazoo = std::process::Command::new("python3")
        .args(["-c", "import kazoo"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match kazoo {
        Err(_) => anyhow::bail!("python3 not found: the peers bench runs kazoo with it (run `make setup`)"),
        Ok(s) if !s.success() => {
            anyhow::bail!("kazoo missing: the peers bench needs `python3 -m pip install kazoo==2.11.0` (or `make setup`)")
        }
        Ok(_) => Ok(()),
    }
}

/// Compiles the Curator bench into `out`.
fn compile_curator(source: &Path, out: &Path) -> anyhow::Result<()> {
    let output = std::process::Command::new("javac")
        .args(["-cp", CURATOR_JARS, "-d"])
        .arg(out)
        .arg(source)
        .output()?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().next().unwrap_or("no output");
        anyhow::bail!("compiling {} failed: {first}", source.display());
    }
    Ok(())
}

/// A directory under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<TempDir> {
        let dir = std::env::temp_dir().join(format!("wazoo-bench-peers-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
