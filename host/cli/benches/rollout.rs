//! Rolling a recipe out through the registry (`wazoo recipes publish|rollback`): how long from
//! the command's start until every daemon serves the new version, while clients take locks
//! through every daemon with that recipe, and whether any of their calls fails.
//!
//! Set-up: one ZooKeeper 3.8.0 (standalone, started here unless `WAZOO_ZOOKEEPER` names one;
//! tick 2000 ms), three `wazoo serve --group` daemons as processes of their own, each with a
//! plugins directory and a private compile cache of its own (empty at the start), all following
//! the registry (`wazoo serve`'s default) and all started with `--trusted-keys` (a key made here
//! with `wazoo recipes keygen`: every version published here is signed with it, but the canaries
//! of step 3). The daemons and the commands run `target/release/wazoo`, which must have been
//! built before (`cargo build --release -p wazoo-cli`; the bench copies it and `wazoo-compile`
//! at the start, so that a build during the run changes nothing). The commands are run as an
//! operator runs them: `wazoo recipes publish …` as a process of its own, on ZooKeeper directly
//! (no `--server`), with a compile cache of its own.
//!
//! Clients: one loop per daemon, in this process (`wazoo-client`), each on a `Hold` stream of
//! its own (`Client::holder`): acquire the lock at a path of its own with the recipe being rolled
//! out (`LockOptions::recipe`), release, and again every `WAZOO_BENCH_PACE_MS` (default 20 ms;
//! 0: flat out). Every acquire is a fresh handle of the version the daemon serves at that instant
//! (its claim says which: `recipe_version`). Every failed call is counted (a failed step ends its
//! stream; the loop opens a new session and goes on); the bench fails if any did.
//!
//! How the bench sees the hosts: a persistent recursive ZooKeeper watch on the registry's
//! `recipes/` (a ZooKeeper client of its own, `zookeeper-client`); at each event it reads the
//! recipe's pointer and every host's report (`recipes/NAME/serving/HOST`), and, for the
//! canaries, the newest events of its history. No polling of `wazoo recipes status`.
//!
//! Measured:
//! 1. 20 publishes of `bench-lock`: 21 versions of `plugins/lock.wasm`, each the file with a
//!    top-level custom section `wazoo-bench-version` holding its number appended (same recipe, new
//!    SHA-256); version 0 is published (untimed) before the clients start, then 1 to 20, each
//!    timed from the start of `wazoo recipes publish bench-lock FILE --sign KEY --json` until the
//!    3 daemons report that SHA-256 as `serving`; also when the command exited, when the pointer
//!    changed, and when each daemon's clients first got a claim made with it.
//! 2. 20 rollbacks (`wazoo recipes rollback bench-lock DIGEST --json`) to versions 19, 18, …, 0,
//!    each seen before by every daemon (its file fetched, its code in the compile cache).
//! 3. 5 canaries withdrawn: no lock-world component among `tests/guests` traps on acquire
//!    (`misbehave` is a custom recipe, `baton` a claim family; `traps_at_start` of
//!    tests/src/components.rs traps while instantiated, which `publish` itself refuses), so the
//!    withdrawal is by refusal: an unsigned version published with `--canary 1 --canary-for 30s`,
//!    refused by the daemon that takes the canary place (it trusts signed versions only), which
//!    withdraws it. Timed from the command's start until the history's `withdraw` event of that
//!    SHA-256, and until, besides, the 3 daemons report the current version again.
//! 4. `plugins/semaphore-py.wasm` (the Python semaphore, 18 MB) published under a new name
//!    (`bench-semaphore-py`): bytes, bytes stored (deflated), chunks, and the time until the 3
//!    daemons serve it, compile included (each daemon compiles it in its `wazoo-compile` worker;
//!    the publishing command compiles it in-process for its check); then the same file under a
//!    second new name (`bench-semaphore-py-2`): every compile cache warm, the blob stored already.
//!
//! Also shown: the clients' acquire+release latency in each phase beside a quiet phase (5 s with
//! no rollout), and the time a registry-reading command (`recipes status --json`) takes, the
//! fixed cost of any `wazoo recipes` process.
//!
//! Run with `cargo bench -p wazoo-cli --bench rollout` (after `make recipes` and a release build
//! of the CLI); about 2 minutes on 2 cores. The daemons' logs are kept in the scratch directory
//! named at the end when something failed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use common::{describe, ms, percentile, plugin, zookeeper};
use tokio::process::{Child, Command};
use wazoo_client::{Client, LockOptions};
use wazoo_runtime::rollout::{Event, Pointer, Report};
use wazoo_testkit::ServerOptions;

const DAEMONS: usize = 3;
const PUBLISHES: usize = 20;
const CANARIES: usize = 5;
const TICK_MS: u32 = 2000;
const NAME: &str = "bench-lock";
const PY_NAME: &str = "bench-semaphore-py";
const PY_NAME_WARM: &str = "bench-semaphore-py-2";
const REGISTRY: &str = "/wazoo/registry";
/// How long one rollout may take before it counts as stuck.
const LIMIT: Duration = Duration::from_secs(60);
const PY_LIMIT: Duration = Duration::from_secs(240);
const QUIET: Duration = Duration::from_secs(5);
const GROUP_SECRET: &str = "the-rollout-bench-group-secret\n";

fn main() -> anyhow::Result<()> {
    let (_, lock) = plugin("lock")?;
    let (_, python) = plugin("semaphore-py")?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let wazoo = root.join("target/release/wazoo");
    let compile = root.join("target/release/wazoo-compile");
    for bin in [&wazoo, &compile] {
        anyhow::ensure!(
            bin.exists(),
            "{} missing: build it first (`cargo build --release -p wazoo-cli`)",
            bin.display()
        );
    }
    let help = std::process::Command::new(&wazoo).args(["recipes", "publish", "--help"]).output()?;
    anyhow::ensure!(
        help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--canary"),
        "{} has no `recipes publish --canary`: rebuild it (`cargo build --release -p wazoo-cli`)",
        wazoo.display()
    );
    let pace = Duration::from_millis(
        std::env::var("WAZOO_BENCH_PACE_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(20),
    );

    let (server, address) = zookeeper(ServerOptions { tick_ms: TICK_MS, ..ServerOptions::default() })?;
    let described = describe(&server, &address, TICK_MS);
    let scratch = std::env::temp_dir().join(format!("wazoo-bench-rollout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    for dir in ["bin", "versions", "cli/plugins"] {
        std::fs::create_dir_all(scratch.join(dir))?;
    }
    // A copy of the binaries made now, so that a build during the run changes nothing
    // (`wazoo serve` looks for `wazoo-compile` beside itself).
    std::fs::copy(&wazoo, scratch.join("bin/wazoo"))?;
    std::fs::copy(&compile, scratch.join("bin/wazoo-compile"))?;
    std::fs::write(scratch.join("group-secret"), GROUP_SECRET)?;
    let built = std::fs::metadata(&wazoo)?.modified()?;

    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let bench = Bench {
        zookeeper: address,
        described,
        scratch: scratch.clone(),
        lock,
        python,
        pace,
        built: humantime::format_rfc3339_seconds(built).to_string(),
        group: format!("bench-rollout-{}", std::process::id()),
    };
    let outcome = runtime.block_on(async move { tokio::spawn(bench.run()).await? });
    common::conclude(runtime, server, started, &scratch, outcome, "failed client calls or stuck rollouts")
}

struct Bench {
    zookeeper: String,
    described: String,
    scratch: PathBuf,
    lock: PathBuf,
    python: PathBuf,
    pace: Duration,
    built: String,
    group: String,
}

struct Daemon {
    child: Child,
    grpc: String,
}

/// Every client call, as the loops record it.
#[derive(Default)]
struct Calls {
    ok: AtomicU64,
    failed: AtomicU64,
    /// (started, took, daemon, the claim's recipe version); failed calls have no version.
    log: Mutex<Vec<(Instant, Duration, usize, Option<String>)>>,
    errors: Mutex<Vec<String>>,
}

/// What the bench read of a recipe: its pointer, every host's report, its newest events.
#[derive(Debug, Default)]
struct Look {
    pointer: Option<Pointer>,
    reports: Vec<Report>,
    events: Vec<Event>,
}

impl Look {
    fn current(&self) -> Option<&str> {
        self.pointer.as_ref().and_then(|p| p.current.as_ref()).map(|c| c.sha256.as_str())
    }

    /// Whether every one of the `n` hosts reports serving `sha`.
    fn all_serving(&self, sha: &str, n: usize) -> bool {
        self.reports.len() >= n && self.reports.iter().all(|r| r.state == "serving" && r.sha256 == sha)
    }

    /// Whether every one of the `n` hosts reports `sha`, in any state.
    fn all_on(&self, sha: &str, n: usize) -> bool {
        self.reports.len() >= n && self.reports.iter().all(|r| r.sha256 == sha)
    }

    fn withdrawn(&self, sha: &str) -> Option<&Event> {
        self.events.iter().find(|e| e.action == "withdraw" && e.sha256 == sha)
    }

    fn hosts(&self) -> String {
        self.reports
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}{}",
                    r.host,
                    r.state,
                    short(&r.sha256),
                    r.reason.as_deref().map(|w| format!(" ({w})")).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One timed rollout.
#[derive(Clone, Copy, Default)]
struct Timed {
    /// The command exited.
    command: Duration,
    /// The pointer names the version (publish, rollback), or the history has the withdrawal.
    pointer: Option<Duration>,
    /// Every host reports serving it (a canary: the current version, in any state).
    hosts: Option<Duration>,
    /// Every daemon's clients got a claim made with it.
    clients: Option<Duration>,
    /// A canary: every host reports `serving` the current version.
    serving: Option<Duration>,
}

impl Bench {
    async fn run(self) -> anyhow::Result<u64> {
        let machine = common::machine();
        println!(
            "wazoo registry rollout benchmark: `cargo bench -p wazoo-cli --bench rollout`; {machine}; {}; \
             {DAEMONS} daemons (`wazoo serve --group --trusted-keys`, processes, each its own plugins directory and compile \
             cache, empty at the start); target/release/wazoo built {}; commands run as processes on ZooKeeper directly; \
             clients: one Hold-stream loop per daemon (wazoo-client), acquire+release of `{NAME}` every {}",
            self.described,
            self.built,
            if self.pace.is_zero() { "call (flat out)".to_string() } else { format!("{} ms", self.pace.as_millis()) },
        );

        // The key every daemon trusts.
        let key = self.scratch.join("bench.key");
        let made = self.wazoo(&["recipes", "keygen", "bench-rollout", "--out", path(&key)]).await?;
        anyhow::ensure!(made.status == Some(0), "keygen failed: {}", made.err);
        let trusted = self.scratch.join("trusted-keys.toml");
        std::fs::write(&trusted, &made.out)?;

        // The versions: lock.wasm with a custom section naming each.
        let lock = std::fs::read(&self.lock)?;
        let mut versions = Vec::new();
        for i in 0..=PUBLISHES {
            let file = self.scratch.join(format!("versions/lock-v{i}.wasm"));
            let bytes = labelled(&lock, &format!("version {i}"));
            versions.push((file.clone(), wazoo_runtime::rollout::digest(&bytes)));
            std::fs::write(&file, bytes)?;
        }
        let mut canaries = Vec::new();
        for i in 0..CANARIES {
            let file = self.scratch.join(format!("versions/lock-canary-{i}.wasm"));
            let bytes = labelled(&lock, &format!("unsigned canary {i}"));
            canaries.push((file.clone(), wazoo_runtime::rollout::digest(&bytes)));
            std::fs::write(&file, bytes)?;
        }

        let zk = zookeeper_client::Client::connect(&self.zookeeper).await?;
        // One watch on every recipe's nodes: each event wakes the waits below.
        let (woke_tx, woke) = tokio::sync::watch::channel(0u64);
        let mut watcher = zk
            .watch(&format!("{REGISTRY}/recipes"), zookeeper_client::AddWatchMode::PersistentRecursive)
            .await?;
        let watching = tokio::spawn(async move {
            loop {
                let _ = watcher.changed().await;
                woke_tx.send_modify(|n| *n += 1);
            }
        });

        let mut daemons = Vec::new();
        for n in 0..DAEMONS {
            daemons.push(self.spawn_daemon(n, &trusted).await?);
        }
        let state = State { bench: self, zk, woke, key };
        let outcome = state.measure(&daemons, &versions, &canaries).await;
        for d in &mut daemons {
            let _ = d.child.start_kill();
        }
        for d in &mut daemons {
            let _ = d.child.wait().await;
        }
        watching.abort();
        outcome
    }

    /// Starts daemon `n`; returns once it serves.
    async fn spawn_daemon(&self, n: usize, trusted: &Path) -> anyhow::Result<Daemon> {
        let dir = self.scratch.join(format!("daemon-{n}"));
        std::fs::create_dir_all(dir.join("plugins"))?;
        std::fs::copy(&self.lock, dir.join("plugins/lock.wasm"))?;
        let log = std::fs::File::create(dir.join("log"))?;
        let mut command = Command::new(self.scratch.join("bin/wazoo"));
        command
            .env("WAZOO_ZOOKEEPER", &self.zookeeper)
            .env("WAZOO_PLUGINS", dir.join("plugins"))
            .env("WAZOO_CACHE", dir.join("cache"))
            .env("WAZOO_LOG", "wazoo=info")
            .env("NO_COLOR", "1")
            .env_remove("WAZOO_SERVER")
            .env_remove("WAZOO_SESSION_TIMEOUT")
            .env_remove("WAZOO_LOG_FORMAT")
            .env_remove("WAZOO_REGISTRY")
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics", "off", "--json", "--group", &self.group])
            .arg("--group-secret-file")
            .arg(self.scratch.join("group-secret"))
            .arg("--trusted-keys")
            .arg(trusted)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let grpc = common::daemon_ready(&mut child, LIMIT, &format!("daemon {n}"), &dir.join("log")).await?;
        Ok(Daemon { child, grpc })
    }

    /// Runs `wazoo ARGS` as an operator would (see [`wazoo`]).
    async fn wazoo(&self, args: &[&str]) -> anyhow::Result<Ran> {
        wazoo(self.scratch.clone(), self.zookeeper.clone(), args.iter().map(|a| a.to_string()).collect())
            .await
    }
}

struct State {
    bench: Bench,
    zk: zookeeper_client::Client,
    woke: tokio::sync::watch::Receiver<u64>,
    key: PathBuf,
}

impl State {
    async fn measure(
        &self,
        daemons: &[Daemon],
        versions: &[(PathBuf, String)],
        canaries: &[(PathBuf, String)],
    ) -> anyhow::Result<u64> {
        let mut failures = 0u64;
        let key = self.key.to_str().expect("a UTF-8 scratch path").to_string();
        let addrs: Vec<String> = daemons.iter().map(|d| d.grpc.clone()).collect();

        // Version 0, before the clients.
        let (file0, sha0) = &versions[0];
        let first = Instant::now();
        let out =
            self.bench.wazoo(&["recipes", "publish", NAME, path(file0), "--sign", &key, "--json"]).await?;
        anyhow::ensure!(out.status == Some(0), "publishing version 0 failed: {}", out.err);
        let look = self.wait(NAME, LIMIT, |l| l.all_serving(sha0, DAEMONS)).await?;
        anyhow::ensure!(look.is_some(), "version 0 was not served by every daemon within {LIMIT:?}");
        println!(
            "set-up: version 0 published and served by the {DAEMONS} daemons in {} (the first publish: each process \
             compiles it for the first time); daemons: {}",
            ms(first.elapsed()),
            addrs.join(", ")
        );

        // A registry-reading command: what any `wazoo recipes` process costs.
        let mut reads = Vec::new();
        for _ in 0..5 {
            let out = self.bench.wazoo(&["recipes", "status", NAME, "--json"]).await?;
            anyhow::ensure!(out.status == Some(0), "status failed: {}", out.err);
            reads.push(out.took);
        }

        // The clients.
        let calls = Arc::new(Calls::default());
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let base = format!("/bench-rollout/{}", uuid::Uuid::new_v4().simple());
        let mut loops = Vec::new();
        for (i, addr) in addrs.iter().enumerate() {
            loops.push(tokio::spawn(client_loop(
                i,
                addr.clone(),
                format!("{base}/d{i}"),
                self.bench.pace,
                stop.clone(),
                calls.clone(),
            )));
        }
        let mut phases: Vec<(&str, Instant, Instant)> = Vec::new();
        let quiet = Instant::now();
        tokio::time::sleep(QUIET).await;
        phases.push(("quiet: no rollout", quiet, Instant::now()));

        // 1. Publishes.
        let at = Instant::now();
        let mut published = Vec::new();
        for (i, (file, sha)) in versions.iter().enumerate().skip(1) {
            let args = ["recipes", "publish", NAME, path(file), "--sign", &key, "--json"];
            let (timed, _, _) = self
                .rollout(NAME, &args, sha, LIMIT, Some(&calls), &mut failures, &format!("publish {i}"))
                .await?;
            published.push(timed);
        }
        phases.push(("20 publishes", at, Instant::now()));

        // 2. Rollbacks, to 19, 18, …, 0.
        let at = Instant::now();
        let mut rolled = Vec::new();
        for i in (0..PUBLISHES).rev() {
            let sha = &versions[i].1;
            let args = ["recipes", "rollback", NAME, &sha[..16], "--json"];
            let (timed, _, _) = self
                .rollout(NAME, &args, sha, LIMIT, Some(&calls), &mut failures, &format!("rollback to {i}"))
                .await?;
            rolled.push(timed);
        }
        phases.push(("20 rollbacks", at, Instant::now()));

        // 3. Canaries withdrawn: unsigned, refused by the daemon that takes the place.
        let at = Instant::now();
        let mut withdrawn = Vec::new();
        let mut reason = String::new();
        let current = versions[0].1.clone();
        let mut refused_after = 0;
        for (i, (file, sha)) in canaries.iter().enumerate() {
            let args =
                ["recipes", "publish", NAME, path(file), "--canary", "1", "--canary-for", "30s", "--json"];
            let t0 = Instant::now();
            let command = self.command_in_background(&args);
            let (mut withdraw, mut hosts, mut serving) = (None, None, None);
            let end = t0 + LIMIT;
            let mut last = Look::default();
            while Instant::now() < end && serving.is_none() {
                let look = self.look_after(NAME, true, end).await?;
                let now = t0.elapsed();
                if let Some(e) = look.withdrawn(sha) {
                    if withdraw.is_none() {
                        withdraw = Some(now);
                        reason = e.reason.clone().unwrap_or_default();
                    }
                    if hosts.is_none()
                        && look.all_on(&current, DAEMONS)
                        && look.pointer.as_ref().is_some_and(|p| p.canary.is_none())
                    {
                        hosts = Some(now);
                    }
                    if look.all_serving(&current, DAEMONS)
                        && look.pointer.as_ref().is_some_and(|p| p.canary.is_none())
                    {
                        serving = Some(now);
                    }
                    // Every host back on the current version: the states are given 2 s more.
                    if hosts.is_some_and(|h| now > h + Duration::from_secs(2)) {
                        break;
                    }
                }
                last = look;
            }
            let ran = command.await??;
            let command = ran.took;
            if ran.status != Some(0) {
                println!(
                    "  !! canary {i}: the command failed ({:?}): {} {}",
                    ran.status,
                    ran.out.trim(),
                    ran.err.trim()
                );
                failures += 1;
            }
            if withdraw.is_none() || hosts.is_none() {
                println!(
                    "  !! canary {i} {}: not withdrawn, or the hosts not back, within {LIMIT:?}: {}",
                    short(sha),
                    last.hosts()
                );
                failures += 1;
            }
            if serving.is_none() {
                refused_after += 1;
                if i == 0 {
                    println!(
                        "  canary {i} {}: withdrawn, every daemon on the current version, but not every report `serving` \
                         2 s later: {}",
                        short(sha),
                        last.hosts()
                    );
                }
            }
            withdrawn.push(Timed { command, pointer: withdraw, hosts, clients: None, serving });
        }
        phases.push(("5 canaries withdrawn", at, Instant::now()));
        let after = self.look(NAME, false).await?;
        println!(
            "  after the {CANARIES} withdrawals: current {}; {}",
            after.current().map(short).unwrap_or("-"),
            after.hosts()
        );
        // What `recipes status --wait` says now.
        let waited = self.bench.wazoo(&["recipes", "status", NAME, "--wait", "--timeout", "5s"]).await?;
        let status_wait = (waited.status, waited.took, waited.err.trim().to_string());

        // 4. The Python component, under a new name: cold, then warm.
        let mut python = Vec::new();
        for (name, what) in [
            (PY_NAME, "first time: every compile cache cold"),
            (PY_NAME_WARM, "the same file under a second new name: compile caches warm, the blob stored"),
        ] {
            let at = Instant::now();
            let sha = wazoo_runtime::rollout::digest(&std::fs::read(&self.bench.python)?);
            let args = ["recipes", "publish", name, path(&self.bench.python), "--sign", &key, "--json"];
            let (timed, ran, pointer_wall) =
                self.rollout(name, &args, &sha, PY_LIMIT, None, &mut failures, name).await?;
            let said: serde_json::Value = serde_json::from_str(ran.out.trim()).unwrap_or_default();
            python.push((name, what, said, timed, pointer_wall));
            phases.push((if name == PY_NAME { "Python cold" } else { "Python warm" }, at, Instant::now()));
        }

        let _ = stop_tx.send(true);
        for l in loops {
            let _ = l.await;
        }

        // ---- the tables ----
        let lock_bytes = std::fs::metadata(&self.bench.lock)?.len();
        let section_bytes: Vec<u64> = versions
            .iter()
            .filter_map(|(f, _)| std::fs::metadata(f).ok())
            .map(|m| m.len() - lock_bytes)
            .collect();
        println!();
        println!(
            "Rollouts of `{NAME}` (lock.wasm, {lock_bytes} bytes, plus a custom section of {}–{} bytes), from the \
             command's start; `every daemon serving`: the 3 reports name it, state `serving`; `claims`: each daemon's \
             clients got a claim made with it:",
            section_bytes.iter().min().unwrap_or(&0),
            section_bytes.iter().max().unwrap_or(&0),
        );
        println!();
        println!("| rollout | n | command exited p50 | pointer changed p50 | every daemon serving p50 | max | every daemon's claims on it p50 | max |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        let row = |what: &str, t: &[Timed]| {
            let mut c: Vec<Duration> = t.iter().map(|t| t.command).collect();
            let mut p: Vec<Duration> = t.iter().filter_map(|t| t.pointer).collect();
            let mut h: Vec<Duration> = t.iter().filter_map(|t| t.hosts).collect();
            let mut k: Vec<Duration> = t.iter().filter_map(|t| t.clients).collect();
            let missing = t.len() - h.len();
            println!(
                "| {what} | {}{} | {} | {} | {} | {} | {} | {} |",
                t.len(),
                if missing > 0 { format!(" ({missing} stuck)") } else { String::new() },
                p50(&mut c),
                p50(&mut p),
                p50(&mut h),
                max(&mut h),
                p50(&mut k),
                max(&mut k),
            );
        };
        row("publish (a new version; signed)", &published);
        row("rollback (to a version served before, by digest)", &rolled);
        let ratio = |a: &[Timed], b: &[Timed]| {
            let mut a: Vec<Duration> = a.iter().filter_map(|t| t.hosts).collect();
            let mut b: Vec<Duration> = b.iter().filter_map(|t| t.hosts).collect();
            if a.is_empty() || b.is_empty() {
                return "-".to_string();
            }
            format!("{:.2}", percentile(&mut a, 50.0).as_secs_f64() / percentile(&mut b, 50.0).as_secs_f64())
        };
        println!();
        println!("rollback / publish, every daemon serving, p50: {}", ratio(&rolled, &published));
        let mut reads = reads;
        println!(
            "a command that only reads the registry (`wazoo recipes status {NAME} --json`, a process, its ZooKeeper session): \
             p50 {} over 5",
            ms(percentile(&mut reads, 50.0))
        );

        println!();
        println!(
            "Canaries withdrawn: an unsigned version published with `--canary 1 --canary-for 30s`, refused by the daemon \
             that takes the canary place (--trusted-keys), from the command's start:"
        );
        println!();
        println!("| canary | n | command exited p50 | `withdraw` in the history p50 | max | every daemon on the current version p50 | max | every report `serving` it again p50 | max |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        {
            let mut c: Vec<Duration> = withdrawn.iter().map(|t| t.command).collect();
            let mut w: Vec<Duration> = withdrawn.iter().filter_map(|t| t.pointer).collect();
            let mut h: Vec<Duration> = withdrawn.iter().filter_map(|t| t.hosts).collect();
            let mut s: Vec<Duration> = withdrawn.iter().filter_map(|t| t.serving).collect();
            let late = withdrawn.len() - s.len();
            println!(
                "| refused (unsigned) | {} | {} | {} | {} | {} | {} | {} | {}{} |",
                withdrawn.len(),
                p50(&mut c),
                p50(&mut w),
                max(&mut w),
                p50(&mut h),
                max(&mut h),
                p50(&mut s),
                max(&mut s),
                if late > 0 { format!(" ({late} not within 2 s)") } else { String::new() },
            );
        }
        println!();
        println!("withdrawal reason (the last): {reason}");
        println!(
            "`wazoo recipes status {NAME} --wait --timeout 5s` after the withdrawals: exit {:?} in {}{}",
            status_wait.0,
            ms(status_wait.1),
            if status_wait.2.is_empty() { String::new() } else { format!(": {}", status_wait.2) }
        );
        if refused_after > 0 {
            println!(
                "!! after {refused_after} of {CANARIES} withdrawals a daemon that serves the current version still reports \
                 state `refused` (see above)"
            );
        }

        println!();
        println!("The Python semaphore (plugins/semaphore-py.wasm) published under a new name, signed:");
        println!();
        println!("| publish | bytes | stored (deflated) | chunks | command exited | pointer changed | every daemon serving |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        let mut cold_warm = Vec::new();
        for (name, what, said, timed, _) in &python {
            println!(
                "| `{name}`: {what} | {} | {} | {} | {} | {} | {} |",
                said["bytes"],
                said["stored"],
                said["chunks"],
                ms(timed.command),
                timed.pointer.map(ms).unwrap_or_else(|| "-".into()),
                timed.hosts.map(ms).unwrap_or_else(|| "-".into()),
            );
            cold_warm.push(timed.hosts);
        }
        if let [Some(cold), Some(warm)] = cold_warm[..] {
            println!();
            println!("warm / cold, every daemon serving: {:.2}", warm.as_secs_f64() / cold.as_secs_f64());
        }
        // Each daemon's own account (its log): when it began compiling, when it served.
        println!();
        println!("Each daemon, from the pointer's change as the bench saw it (the daemons' logs: `compiling …` and `serving version …`):");
        println!();
        println!(
            "| publish | daemon | fetched, began compiling | compile + checks + trial instance | serving |"
        );
        println!("|---|---|---:|---:|---:|");
        for (name, _, _, _, pointer_wall) in &python {
            let Some(seen) = pointer_wall else { continue };
            for n in 0..DAEMONS {
                let log = std::fs::read_to_string(self.bench.scratch.join(format!("daemon-{n}/log")))
                    .unwrap_or_default();
                let compiling = stamp_of(&log, &format!("/{name}.wasm ("), "compiling ");
                let serving = stamp_of(&log, &format!("recipe {name}: serving version"), "");
                let since = |t: Option<SystemTime>| {
                    t.and_then(|t| t.duration_since(*seen).ok()).map(ms).unwrap_or_else(|| "-".into())
                };
                let compile = match (compiling, serving) {
                    (Some(c), Some(s)) => s.duration_since(c).map(ms).unwrap_or_else(|_| "-".into()),
                    _ => "- (from the compile cache)".into(),
                };
                println!("| `{name}` | {n} | {} | {compile} | {} |", since(compiling), since(serving));
            }
        }

        // The clients.
        let log = std::mem::take(&mut *calls.log.lock().unwrap());
        println!();
        println!(
            "Client calls (acquire+release through each of the {DAEMONS} daemons with `{NAME}`, one loop per daemon), \
             by phase:"
        );
        println!();
        println!("| phase | calls | failed | p50 | p99 | max | p99 vs quiet |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        let mut quiet_p99 = None;
        for (what, from, to) in &phases {
            let mut took: Vec<Duration> = log
                .iter()
                .filter(|(at, _, _, v)| at >= from && at < to && v.is_some())
                .map(|(_, d, _, _)| *d)
                .collect();
            let failed = log.iter().filter(|(at, _, _, v)| at >= from && at < to && v.is_none()).count();
            if took.is_empty() {
                println!("| {what} | 0 | {failed} | - | - | - | - |");
                continue;
            }
            let p99 = percentile(&mut took, 99.0);
            let versus = match quiet_p99 {
                None => {
                    quiet_p99 = Some(p99);
                    "1.00".to_string()
                }
                Some(q) => format!("{:.2}", p99.as_secs_f64() / q.as_secs_f64()),
            };
            println!(
                "| {what} | {} | {failed} | {} | {} | {} | {versus} |",
                took.len() + failed,
                ms(percentile(&mut took, 50.0)),
                ms(p99),
                ms(percentile(&mut took, 100.0)),
            );
        }
        let (ok, failed) = (calls.ok.load(Ordering::Relaxed), calls.failed.load(Ordering::Relaxed));
        println!();
        println!("**failed client calls: {failed}** of {}", ok + failed);
        for e in calls.errors.lock().unwrap().iter().take(10) {
            println!("  !! {e}");
        }
        Ok(failures + failed)
    }

    /// Runs a publish or rollback of `sha` and times it (see [`Timed`]).
    #[allow(clippy::too_many_arguments)]
    async fn rollout(
        &self,
        name: &str,
        args: &[&str],
        sha: &str,
        limit: Duration,
        calls: Option<&Calls>,
        failures: &mut u64,
        what: &str,
    ) -> anyhow::Result<(Timed, Ran, Option<SystemTime>)> {
        let t0 = Instant::now();
        let command = self.command_in_background(args);
        let end = t0 + limit;
        let (mut pointer, mut hosts, mut pointer_wall) = (None, None, None);
        let mut last = Look::default();
        while Instant::now() < end && hosts.is_none() {
            let look = self.look_after(name, false, end).await?;
            if pointer.is_none() && look.current() == Some(sha) {
                pointer = Some(t0.elapsed());
                pointer_wall = Some(SystemTime::now());
            }
            if look.all_serving(sha, DAEMONS) {
                hosts = Some(t0.elapsed());
            }
            last = look;
        }
        let ran = command.await??;
        let took = ran.took;
        if ran.status != Some(0) {
            println!(
                "  !! {what}: the command failed ({:?}): {} {}",
                ran.status,
                ran.out.trim(),
                ran.err.trim()
            );
            *failures += 1;
        }
        if hosts.is_none() {
            println!(
                "  !! {what} {}: not served by every daemon within {limit:?}: {}",
                short(sha),
                last.hosts()
            );
            *failures += 1;
        }
        // Each daemon's clients: their first claim made with it (the loops call every pace).
        let short_sha = short(sha).to_string();
        let mut clients = None;
        if let (Some(_), Some(calls)) = (hosts, calls) {
            let give_up = Instant::now() + Duration::from_secs(5);
            loop {
                let firsts: Vec<Option<Instant>> = {
                    let log = calls.log.lock().unwrap();
                    (0..DAEMONS)
                        .map(|d| {
                            log.iter()
                                .rev()
                                .take_while(|(at, _, _, _)| *at >= t0)
                                .filter(|(_, _, i, v)| *i == d && v.as_deref() == Some(short_sha.as_str()))
                                .map(|(at, _, _, _)| *at)
                                .min()
                        })
                        .collect()
                };
                if firsts.iter().all(Option::is_some) {
                    clients = firsts.into_iter().flatten().max().map(|at| at - t0);
                    break;
                }
                if Instant::now() > give_up {
                    println!(
                        "  !! {what}: some daemon's clients got no claim made with {} within 5 s",
                        short(sha)
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok((Timed { command: took, pointer, hosts, clients, serving: None }, ran, pointer_wall))
    }

    /// Starts `wazoo ARGS`; its outcome once it ends.
    fn command_in_background(&self, args: &[&str]) -> tokio::task::JoinHandle<anyhow::Result<Ran>> {
        let args = args.iter().map(|a| a.to_string()).collect();
        tokio::spawn(wazoo(self.bench.scratch.clone(), self.bench.zookeeper.clone(), args))
    }

    /// Waits until `ready` holds of `name` (or `limit` passes: `None`).
    async fn wait(
        &self,
        name: &str,
        limit: Duration,
        ready: impl Fn(&Look) -> bool,
    ) -> anyhow::Result<Option<Look>> {
        let end = Instant::now() + limit;
        let mut last = Look::default();
        while Instant::now() < end {
            let look = self.look_after(name, false, end).await?;
            if ready(&look) {
                return Ok(Some(look));
            }
            last = look;
        }
        println!("  !! {name}: waited {limit:?}: current {:?}; {}", last.current().map(short), last.hosts());
        Ok(None)
    }

    /// Reads `name` now the first time, then after the next event under the registry (at most
    /// 100 ms later in any case, or at `end`).
    async fn look_after(&self, name: &str, events: bool, end: Instant) -> anyhow::Result<Look> {
        let mut woke = self.woke.clone();
        // An event since the last read makes the read now.
        if !woke.has_changed().unwrap_or(false) {
            let wait = end.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
            let _ = tokio::time::timeout(wait, woke.changed()).await;
        }
        woke.mark_unchanged();
        self.look(name, events).await
    }

    async fn look(&self, name: &str, events: bool) -> anyhow::Result<Look> {
        use zookeeper_client::Error as ZkError;
        let recipe = format!("{REGISTRY}/recipes/{name}");
        let mut look = Look::default();
        match self.zk.get_data(&recipe).await {
            Ok((data, _)) => look.pointer = Some(serde_json::from_slice(&data)?),
            Err(ZkError::NoNode) => return Ok(look),
            Err(e) => return Err(e.into()),
        }
        let serving = format!("{recipe}/serving");
        let hosts = match self.zk.list_children(&serving).await {
            Ok(h) => h,
            Err(ZkError::NoNode) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        for host in hosts {
            match self.zk.get_data(&format!("{serving}/{host}")).await {
                Ok((data, _)) => {
                    let mut r: Report = serde_json::from_slice(&data)?;
                    r.host = host;
                    look.reports.push(r);
                }
                Err(ZkError::NoNode) => {}
                Err(e) => return Err(e.into()),
            }
        }
        look.reports.sort_by(|a, b| a.host.cmp(&b.host));
        if events {
            let history = format!("{recipe}/history");
            let mut names = self.zk.list_children(&history).await?;
            names.sort();
            for n in names.iter().rev().take(3) {
                if let Ok((data, _)) = self.zk.get_data(&format!("{history}/{n}")).await {
                    look.events.push(serde_json::from_slice(&data)?);
                }
            }
        }
        Ok(look)
    }
}

/// Acquire+release through daemon `i` at `path`, every `pace`, until `stop`.
async fn client_loop(
    i: usize,
    addr: String,
    path: String,
    pace: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
    calls: Arc<Calls>,
) {
    let options = LockOptions {
        recipe: NAME.to_string(),
        timeout: Some(Duration::from_secs(10)),
        ..LockOptions::default()
    };
    let fail = |at: Instant, why: String| {
        calls.failed.fetch_add(1, Ordering::Relaxed);
        calls.log.lock().unwrap().push((at, at.elapsed(), i, None));
        let line = format!("daemon {i} ({addr}): {why}");
        println!("  !! failed call: {line}");
        calls.errors.lock().unwrap().push(line);
    };
    'connect: while !*stop.borrow() {
        let at = Instant::now();
        let client = match Client::connect(&addr, None, Duration::from_secs(10)).await {
            Ok(c) => c,
            Err(e) => {
                fail(at, format!("connect: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let session = match client.session(Duration::from_secs(10), format!("rollout bench client {i}")).await
        {
            Ok(s) => s,
            Err(e) => {
                fail(at, format!("session: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut holder = match client.holder(&session).await {
            Ok(h) => h,
            Err(e) => {
                fail(at, format!("hold stream: {e}"));
                session.close().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        loop {
            if *stop.borrow() {
                drop(holder);
                session.close().await;
                break 'connect;
            }
            let at = Instant::now();
            let claim = match holder.acquire(&path, &options).await {
                Ok(c) => c,
                Err(e) => {
                    fail(at, format!("acquire: {e}"));
                    drop(holder);
                    session.close().await;
                    continue 'connect;
                }
            };
            if let Err(e) = holder.release().await {
                fail(at, format!("release: {e}"));
                drop(holder);
                session.close().await;
                continue 'connect;
            }
            calls.ok.fetch_add(1, Ordering::Relaxed);
            calls.log.lock().unwrap().push((at, at.elapsed(), i, Some(claim.recipe_version)));
            tokio::time::sleep_until((at + pace).into()).await;
        }
    }
}

/// `component` with a top-level custom section `wazoo-bench-version` holding `label` appended:
/// the same recipe, another file and SHA-256.
/// The time stamp of the first line of `log` holding `what` (and `also`).
fn stamp_of(log: &str, what: &str, also: &str) -> Option<SystemTime> {
    let line = log.lines().find(|l| l.contains(what) && l.contains(also))?;
    humantime::parse_rfc3339(line.split_whitespace().next()?).ok()
}

/// What a command did: its exit status, stdout, stderr, and how long it took.
struct Ran {
    status: Option<i32>,
    out: String,
    err: String,
    took: Duration,
}

/// Runs `wazoo ARGS` as an operator would: a process of its own, on ZooKeeper directly (no
/// `--server`), with a compile cache and an (empty) plugins directory of its own.
async fn wazoo(scratch: PathBuf, zookeeper: String, args: Vec<String>) -> anyhow::Result<Ran> {
    let t0 = Instant::now();
    let out = Command::new(scratch.join("bin/wazoo"))
        .env("WAZOO_ZOOKEEPER", &zookeeper)
        .env("WAZOO_PLUGINS", scratch.join("cli/plugins"))
        .env("WAZOO_CACHE", scratch.join("cli/cache"))
        .env("USER", "bench")
        .env_remove("WAZOO_SERVER")
        .env_remove("WAZOO_REGISTRY")
        .env_remove("WAZOO_TRUSTED_KEYS")
        .env_remove("WAZOO_LOG")
        .env_remove("WAZOO_SESSION_TIMEOUT")
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .await?;
    Ok(Ran {
        took: t0.elapsed(),
        status: out.status.code(),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn labelled(component: &[u8], label: &str) -> Vec<u8> {
    common::with_section(component, "wazoo-bench-version", label.as_bytes())
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 scratch path")
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

fn p50(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "-".into();
    }
    ms(percentile(samples, 50.0))
}

fn max(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "-".into();
    }
    ms(percentile(samples, 100.0))
}
