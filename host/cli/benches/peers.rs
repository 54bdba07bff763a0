//! Lock acquire+release beside its peers, in one run against one ZooKeeper: the wazoo `lock`
//! recipe through the host (wasm), zookeeper-client's `Client::lock` with Curator's prefix
//! (native), Curator 5.4's `InterProcessMutex` (a child JVM, `peers/CuratorBench.java`) and
//! kazoo 2.11's `Lock` (a child python3, `peers/kazoo_bench.py`).
//!
//! Uncontended: one client, a path of its own, `WAZOO_BENCH_OPS` operations (default 4000) after
//! a warm-up; wasm and native interleaved round by round, then Curator and kazoo one after the
//! other. Contended: 16 contenders on one path for a fixed time, ops/s counted over every
//! operation started before the deadline.
//!
//! Run with `make bench` (or `cargo bench -p wazoo-cli --bench peers` after `make recipes`).
//! `WAZOO_ZOOKEEPER` uses an existing ZooKeeper instead of starting one. Needs java, javac,
//! Debian's Curator jars and kazoo for python3 (all installed by `make setup`).

mod common;

use common::{percentile, us};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use wazoo_runtime::{Host, HostConfig, KeeperConfig, LockHandle, SandboxLimits};
use wazoo_testkit::ServerOptions;
use zookeeper_client::{Acls, Client, CreateMode, LockOptions, LockPrefix};

/// Interleaved rounds of the uncontended wasm and native runs.
const ROUNDS: usize = 20;
/// Untimed uncontended operations before the timed ones (in-process and Curator).
const WARMUP: usize = 3000;
/// kazoo's warm-up: CPython has no JIT to warm, only the server.
const KAZOO_WARMUP: usize = 500;
/// Contenders on the one contended path.
const CONTENDERS: usize = 16;
/// Timed contended run of each side (each after an untimed run of the same length, for peers).
const CONTENDED: Duration = Duration::from_secs(5);
/// kazoo's contended run, shorter: its operations are slow.
const KAZOO_CONTENDED: Duration = Duration::from_secs(3);
/// Interleaved rounds of the contended wasm and native runs, `CONTENDED` split among them.
const CONTENDED_ROUNDS: u32 = 4;
/// Debian's Curator jars and the no-op logger they need.
const CURATOR_JARS: &str = "/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar";
/// The longest a child bench may take.
const CHILD_LIMIT: Duration = Duration::from_secs(150);

/// Uncontended figures of one client.
struct Uncontended {
    p50: Duration,
    p99: Duration,
    ops_per_s: f64,
}

/// Contended figures of one client: operations done and their rate.
struct Contended {
    ops: u64,
    ops_per_s: f64,
}

fn main() -> anyhow::Result<()> {
    let ops: usize = std::env::var("WAZOO_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(4000);
    let (plugins, _) = common::plugin("lock")?;
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/peers");

    // The peers' tools first, so a missing one fails before anything starts.
    check_tools()?;
    let classes = TempDir::new()?;
    compile_curator(&peers.join("CuratorBench.java"), &classes.0)?;

    // WAZOO_ZOOKEEPER points the bench at an existing ensemble; otherwise it starts a server.
    let (server, address) = common::zookeeper(ServerOptions::default())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let bench = Bench { address, plugins, peers, classes: classes.0.clone(), ops };
    // Everything runs in a spawned task, as the CLI's and a daemon's calls do.
    let outcome = runtime.block_on(async move { tokio::spawn(bench.run()).await? });
    drop(server);
    outcome
}

struct Bench {
    address: String,
    plugins: PathBuf,
    peers: PathBuf,
    classes: PathBuf,
    ops: usize,
}

impl Bench {
    async fn run(self) -> anyhow::Result<()> {
        let config = HostConfig {
            keeper: KeeperConfig { zookeeper: self.address.clone(), ..KeeperConfig::default() },
            plugins: self.plugins.clone(),
            limits: SandboxLimits::default(),
            allowed: None,
            cache: None,
        };
        let host = Host::start(config).await?;
        let native = Client::connector().connect(&self.address).await?;
        // A unique root, so an existing ensemble's leftovers never meet this run.
        let root = format!("/bench-peers/{}", std::process::id());

        let (wasm, native_one) = uncontended(&host, &native, &root, self.ops).await?;
        let (wasm_many, native_many) = contended(&host, &native, &format!("{root}/contended")).await?;
        drop(host);
        drop(native);

        let seconds = |d: Duration| format!("{}", d.as_secs_f64());
        let classpath = format!("{}:{CURATOR_JARS}", self.classes.display());
        let mut java = tokio::process::Command::new("java");
        java.args(["-cp", &classpath, "CuratorBench", &self.address, &format!("{root}/curator")]).args([
            WARMUP.to_string(),
            self.ops.to_string(),
            CONTENDERS.to_string(),
            seconds(CONTENDED),
        ]);
        let (curator, curator_many) = peer("Curator", java).await?;

        let mut python = tokio::process::Command::new("python3");
        python.arg(self.peers.join("kazoo_bench.py")).args([&self.address, &format!("{root}/kazoo")]).args([
            KAZOO_WARMUP.to_string(),
            self.ops.to_string(),
            CONTENDERS.to_string(),
            seconds(KAZOO_CONTENDED),
        ]);
        let (kazoo, kazoo_many) = peer("kazoo", python).await?;

        println!(
            "wazoo lock beside its peers: ZooKeeper 3.8.0 standalone on 127.0.0.1, one run; uncontended: {} acquire+release per client ({WARMUP} warm-up, kazoo {KAZOO_WARMUP}), wasm and native in {ROUNDS} interleaved rounds",
            self.ops
        );
        println!();
        println!("| uncontended | p50 | p99 | ops/s | p50 vs native | ops/s vs Curator | ops/s vs kazoo | p99 vs Curator |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        let rows = [
            ("wasm: wazoo `lock` recipe through the host", &wasm),
            ("native: zookeeper-client `Client::lock`, Curator prefix", &native_one),
            ("Curator 5.4 `InterProcessMutex` (JVM)", &curator),
            ("kazoo 2.11 `Lock` (CPython)", &kazoo),
        ];
        for (name, row) in rows {
            println!(
                "| {name} | {} | {} | {:.0} | {:.3}× | {:.2}× | {:.2}× | {:.3}× |",
                us(row.p50),
                us(row.p99),
                row.ops_per_s,
                row.p50.as_secs_f64() / native_one.p50.as_secs_f64(),
                row.ops_per_s / curator.ops_per_s,
                row.ops_per_s / kazoo.ops_per_s,
                row.p99.as_secs_f64() / curator.p99.as_secs_f64(),
            );
        }
        println!();
        println!(
            "| {CONTENDERS} contenders, one path ({} s each, kazoo {} s) | acquire+release pairs | ops/s | ops/s vs Curator |",
            CONTENDED.as_secs(),
            KAZOO_CONTENDED.as_secs()
        );
        println!("|---|---:|---:|---:|");
        let rows = [
            ("wasm: one host, a handle per tokio task", &wasm_many),
            ("native: one shared `Client`, a tokio task each", &native_many),
            ("Curator: one `CuratorFramework`, a thread and a mutex each", &curator_many),
            ("kazoo: one `KazooClient`, a thread and a `Lock` each", &kazoo_many),
        ];
        for (name, row) in rows {
            println!(
                "| {name} | {} | {:.0} | {:.2}× |",
                row.ops,
                row.ops_per_s,
                row.ops_per_s / curator_many.ops_per_s
            );
        }
        println!();
        println!(
            "targets: wasm p50 ≤ 0.85× native; wasm ops/s ≥ 2× Curator, ≥ 4.5× kazoo; wasm p99 ≤ ¼ Curator's"
        );
        Ok(())
    }
}

/// Uncontended acquire+release, wasm and native on paths of their own, warmed up, then
/// alternated round by round so server-side drift hits both alike.
async fn uncontended(
    host: &Host,
    native: &Client,
    root: &str,
    ops: usize,
) -> anyhow::Result<(Uncontended, Uncontended)> {
    let mut wasm = host.lock("lock").await?;
    let (wasm_dir, native_dir) = (format!("{root}/wasm"), format!("{root}/native"));
    for _ in 0..WARMUP {
        wasm.acquire(&wasm_dir, None).await?;
        wasm.release().await?;
        native_lock(native, &native_dir).await?;
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
                    wasm.acquire(&wasm_dir, None).await?;
                    wasm.release().await?;
                    wasm_times.push(started.elapsed());
                } else {
                    native_lock(native, &native_dir).await?;
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
    let figures = |times: &mut Vec<Duration>, total: Duration| Uncontended {
        p50: percentile(times, 50.0),
        p99: percentile(times, 99.0),
        ops_per_s: times.len() as f64 / total.as_secs_f64(),
    };
    Ok((figures(&mut wasm_times, wasm_total), figures(&mut native_times, native_total)))
}

/// `CONTENDERS` contenders on one path, wasm (a handle each, one host) and native (one shared
/// client, a task each), in alternating rounds that add up to `CONTENDED` per side, after an
/// untimed round of each.
async fn contended(host: &Host, native: &Client, dir: &str) -> anyhow::Result<(Contended, Contended)> {
    let mut handles = Vec::with_capacity(CONTENDERS);
    for _ in 0..CONTENDERS {
        handles.push(host.lock("lock").await?);
    }
    let round = CONTENDED / CONTENDED_ROUNDS;
    handles = contend_wasm(handles, dir, round).await?.0;
    contend_native(native, dir, round).await?;
    let (mut wasm, mut native_sum) = ((0, Duration::ZERO), (0, Duration::ZERO));
    for r in 0..CONTENDED_ROUNDS {
        for side in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
            if side == 0 {
                let (back, ops, elapsed) = contend_wasm(handles, dir, round).await?;
                handles = back;
                wasm = (wasm.0 + ops, wasm.1 + elapsed);
            } else {
                let (ops, elapsed) = contend_native(native, dir, round).await?;
                native_sum = (native_sum.0 + ops, native_sum.1 + elapsed);
            }
        }
    }
    let figures =
        |(ops, elapsed): (u64, Duration)| Contended { ops, ops_per_s: ops as f64 / elapsed.as_secs_f64() };
    Ok((figures(wasm), figures(native_sum)))
}

/// Each handle loops acquire+release on `dir` in its own task until `length` has passed; every
/// operation started before then counts, over the time until the last task is done. Gives the
/// handles back with the operations and that time.
async fn contend_wasm(
    handles: Vec<LockHandle>,
    dir: &str,
    length: Duration,
) -> anyhow::Result<(Vec<LockHandle>, u64, Duration)> {
    let started = Instant::now();
    let deadline = started + length;
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|mut handle| {
            let dir = dir.to_string();
            tokio::spawn(async move {
                let mut done = 0u64;
                while Instant::now() < deadline {
                    handle.acquire(&dir, None).await?;
                    handle.release().await?;
                    done += 1;
                }
                anyhow::Ok((handle, done))
            })
        })
        .collect();
    let (mut handles, mut total) = (Vec::with_capacity(CONTENDERS), 0);
    for task in tasks {
        let (handle, done) = task.await??;
        handles.push(handle);
        total += done;
    }
    Ok((handles, total, started.elapsed()))
}

/// As [`contend_wasm`], with `CONTENDERS` tasks sharing one native client (one session, as the
/// host's handles share the host's).
async fn contend_native(native: &Client, dir: &str, length: Duration) -> anyhow::Result<(u64, Duration)> {
    let started = Instant::now();
    let deadline = started + length;
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let (client, dir) = (native.clone(), dir.to_string());
            tokio::spawn(async move {
                let mut done = 0u64;
                while Instant::now() < deadline {
                    native_lock(&client, &dir).await?;
                    done += 1;
                }
                anyhow::Ok(done)
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok((total, started.elapsed()))
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

/// Fails with one line naming the first missing tool: java, javac, the Curator jars, python3
/// or kazoo.
fn check_tools() -> anyhow::Result<()> {
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
