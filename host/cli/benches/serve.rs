//! The gRPC daemon (`wazoo serve`), run in-process by `wazoo_daemon::serve::run` on 127.0.0.1 against a
//! ZooKeeper this bench starts (standalone, tick 200 ms), with a scratch plugins directory holding
//! a copy of `plugins/lock.wasm` and a scratch compile cache. Measured:
//!
//! 1. Lock throughput and latency over gRPC. Each client has its own channel (one HTTP/2
//!    connection) and its own client session, kept alive over a KeepAlive stream; one operation
//!    is an Acquire (family LOCK, a new recipe handle in the daemon) and its Release, timed by the
//!    client from sending the Acquire to the Release's reply. Runs with 1, 16 and 64 clients all
//!    on one lock path (contended: throughput is bounded by the lock's hand-over), and with 16
//!    clients on a path each (uncontended), after a warm-up. ops/s is the run's operations over
//!    its wall time.
//! 2. Swap latency: while one client loops Acquire/Release, a relabelled `lock.wasm` (a custom
//!    section appended: same code, new hash) is deployed by write + rename; measured is the time
//!    from the rename to the reply of the first Claim whose `recipe_version` differs. A new
//!    handle stats its file, so the first Acquire after the rename loads the new version itself
//!    (or waits for the watcher's load, if that started first): the figure is the load (compile
//!    or cache read, checks, trial instance) plus less than one operation, not the watcher's
//!    interval. Three series: versions never seen, compiled on a thread of the daemon (as this
//!    in-process daemon has no `wazoo-compile` beside its executable); alternating between two
//!    versions already in the compile cache; versions never seen, compiled by the
//!    `wazoo-compile` worker process, as the installed `wazoo serve` does.
//! 3. In-process costs on the daemon's Host: a new lock handle (`Host::lock`: registry lookup, a
//!    fresh store, instantiation), and the first load of a component (`Host::version` on a new
//!    Host) with an empty compile cache versus a warm one.
//!
//! Run with `cargo bench -p wazoo-cli --bench serve` after `make recipes`. `WAZOO_BENCH_OPS` sets the
//! operations of the multi-client runs (default 4000; the one-client run does half);
//! `WAZOO_ZOOKEEPER` uses an existing ZooKeeper instead of starting one.

mod common;

use common::{ms, percentile, us};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Barrier};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use wazoo_proto::hold_event::Event;
use wazoo_proto::hold_request::Step;
use wazoo_proto::recipes_client::RecipesClient;
use wazoo_proto::sessions_client::SessionsClient;
use wazoo_proto::{
    AcquireRequest, Empty, Family, HandleRef, HoldEvent, HoldRequest, KeepAliveRequest, OpenRequest,
};
use wazoo_runtime::{Host, HostConfig, KeeperConfig, SandboxLimits, Want, World};
use wazoo_testkit::ServerOptions;

/// The daemon's fallback look at the plugins directory, as `wazoo serve --watch-every` defaults
/// to; swaps are seen through inotify well before it.
const WATCH_EVERY: Duration = Duration::from_secs(5);
/// Client session TTL; kept alive every third of it.
const TTL: Duration = Duration::from_secs(5);
/// Acquire timeout: far above any wait in a run, so a stuck lock fails the bench.
const ACQUIRE_TIMEOUT_MS: u64 = 60_000;
const SWAPS: usize = 10;
const HANDLES: usize = 1000;
const FIRST_LOADS: usize = 5;
const TICK_MS: u32 = 200;

fn main() -> anyhow::Result<()> {
    let ops: usize = std::env::var("WAZOO_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(4000);
    let (_, component) = common::plugin("lock")?;

    // WAZOO_ZOOKEEPER points the bench at an existing ensemble; otherwise it starts a server.
    let (server, address) =
        common::zookeeper(ServerOptions { tick_ms: TICK_MS, ..ServerOptions::default() })?;
    let zookeeper = common::describe(&server, &address, TICK_MS);
    let scratch = std::env::temp_dir().join(format!("wazoo-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("plugins"))?;
    std::fs::copy(&component, scratch.join("plugins/lock.wasm"))?;
    // What the swaps relabel (not a `.wasm`: the daemon does not serve it).
    std::fs::copy(&component, scratch.join("plugins/lock.wasm.original"))?;

    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let bench = Bench { address, scratch: scratch.clone(), ops, zookeeper };
    let outcome = runtime.block_on(async move { tokio::spawn(bench.run()).await? });
    drop(runtime);
    drop(server);
    let _ = std::fs::remove_dir_all(&scratch);
    outcome?;
    println!();
    println!("wall time {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

struct Bench {
    address: String,
    scratch: PathBuf,
    ops: usize,
    zookeeper: String,
}

impl Bench {
    fn config(&self, cache: &Path) -> HostConfig {
        HostConfig {
            keeper: KeeperConfig { zookeeper: self.address.clone(), ..KeeperConfig::default() },
            plugins: self.scratch.join("plugins"),
            limits: SandboxLimits::default(),
            allowed: None,
            embedded: None,
            cache: Some(cache.to_path_buf()),
        }
    }

    async fn run(self) -> anyhow::Result<()> {
        let bytes = std::fs::metadata(self.scratch.join("plugins/lock.wasm"))?.len();
        let host = Host::start(self.config(&self.scratch.join("cache"))).await?;
        let served = common::Served::start(&host, WATCH_EVERY).await?;
        let grpc = served.grpc;

        let machine = common::machine();
        println!(
            "wazoo serve benchmark: `cargo bench -p wazoo-cli --bench serve`; {machine}; {}; \
             daemon in-process (`wazoo_daemon::serve::run`) on {grpc}, plugins watched by inotify (and looked at \
             every {} s); lock.wasm {} bytes",
            self.zookeeper,
            WATCH_EVERY.as_secs(),
            bytes
        );

        // Throughput and latency. The warm-up lets ZooKeeper's JIT compiler and the daemon settle.
        load_run(grpc, 16, 1000, Paths::Shared, "warmup").await?;
        load_run(grpc, 16, 2000, Paths::Own, "warmup").await?;
        let runs =
            [(1, self.ops / 2, Paths::Shared), (16, self.ops, Paths::Shared), (64, self.ops, Paths::Shared)];
        let mut rows = Vec::new();
        for (clients, ops, paths) in runs.into_iter().chain([(16, self.ops, Paths::Own)]) {
            rows.push((clients, paths, load_run(grpc, clients, ops, paths, "run").await?));
        }
        println!();
        println!("| clients | lock paths | ops | ops/s | p50 | p99 |");
        println!("|---:|---|---:|---:|---:|---:|");
        for (clients, paths, mut run) in rows {
            let paths = match paths {
                Paths::Shared if clients == 1 => "one",
                Paths::Shared => "one, shared (contended)",
                Paths::Own => "one per client (uncontended)",
            };
            println!(
                "| {clients} | {paths} | {} | {:.0} | {} | {} |",
                run.times.len(),
                run.times.len() as f64 / run.wall.as_secs_f64(),
                ms(percentile(&mut run.times, 50.0)),
                ms(percentile(&mut run.times, 99.0))
            );
        }

        breakdown(&host, grpc, self.ops / 2).await?;

        // Swap latency: versions never seen (compiled on a thread of the daemon, as this in-process
        // daemon does), two already in the cache, then new ones compiled by the `wazoo-compile`
        // worker process (what the installed `wazoo serve` does, the worker being beside it).
        let fresh: Vec<String> = (0..SWAPS).map(|i| format!("fresh-{i:02}")).collect();
        let seen: Vec<String> = (0..SWAPS).map(|i| fresh[SWAPS - 2 + i % 2].clone()).collect();
        let worker: Vec<String> = (0..SWAPS).map(|i| format!("worker-{i:02}")).collect();
        let mut phases = Vec::new();
        phases.push(("never seen, compiled in-process", swap_latency(&host, grpc, &fresh, false).await?));
        phases.push(("seen before, from the compile cache", swap_latency(&host, grpc, &seen, true).await?));
        let program = PathBuf::from(env!("CARGO_BIN_EXE_wazoo-compile"));
        host.registry().use_compile_worker(program, wazoo_daemon::serve::COMPILE_MEMORY, host.limits());
        phases.push((
            "never seen, compiled by the `wazoo-compile` worker",
            swap_latency(&host, grpc, &worker, false).await?,
        ));
        println!();
        println!(
            "| deployed version | swaps | rename → first Claim of it: p50 | max | compile inside it, mean |"
        );
        println!("|---|---:|---:|---:|---:|");
        for (what, swaps) in phases {
            let compile = swaps.iter().map(|s| s.compile).sum::<Duration>() / swaps.len() as u32;
            let mut latencies: Vec<Duration> = swaps.iter().map(|s| s.latency).collect();
            let max = *latencies.iter().max().unwrap();
            println!(
                "| {what} | {} | {} | {} | {} |",
                latencies.len(),
                ms(percentile(&mut latencies, 50.0)),
                ms(max),
                ms(compile)
            );
        }

        // New handles on the daemon's Host (idle now: every client has gone).
        drop(host.lock("lock").await?);
        let mut handles = Vec::with_capacity(HANDLES);
        for _ in 0..HANDLES {
            let started = Instant::now();
            let handle = host.lock("lock").await?;
            handles.push(started.elapsed());
            drop(handle);
        }

        // First load on a new Host: an empty cache each time, then a warm one.
        let (mut cold, mut warm) = (Vec::new(), Vec::new());
        let warm_cache = self.scratch.join("cache-first-0");
        for i in 0..FIRST_LOADS {
            cold.push(first_load(self.config(&self.scratch.join(format!("cache-first-{i}"))), false).await?);
        }
        for _ in 0..FIRST_LOADS {
            warm.push(first_load(self.config(&warm_cache), true).await?);
        }
        println!();
        println!("| cost, in-process | runs | p50 | p99 / max |");
        println!("|---|---:|---:|---:|");
        println!(
            "| new lock handle: `host.lock(\"lock\")` (lookup, store, instantiate) | {HANDLES} | {} | {} |",
            us(percentile(&mut handles, 50.0)),
            us(percentile(&mut handles, 99.0))
        );
        for (what, times) in [("empty cache: compile", &mut cold), ("warm cache: no compile", &mut warm)] {
            println!(
                "| first load on a new Host, {what} (`Host::version`) | {} | {} | {} |",
                times.len(),
                ms(percentile(times, 50.0)),
                ms(*times.iter().max().unwrap())
            );
        }

        served.stop().await?;
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Paths {
    /// Every client on one lock path.
    Shared,
    /// A lock path per client.
    Own,
}

struct Run {
    /// One acquire+release each, as its client saw it.
    times: Vec<Duration>,
    wall: Duration,
}

/// `ops` acquire+release operations split over `clients` clients, started together.
async fn load_run(
    grpc: SocketAddr,
    clients: usize,
    ops: usize,
    paths: Paths,
    tag: &str,
) -> anyhow::Result<Run> {
    let per_client = ops.div_ceil(clients);
    let base = format!("/bench-serve/{tag}-{clients}-{}", uuid::Uuid::new_v4().simple());
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(Client::open(grpc).await?);
    }
    let start = Arc::new(Barrier::new(clients + 1));
    let mut tasks = Vec::with_capacity(clients);
    for (i, mut client) in connected.into_iter().enumerate() {
        let path = match paths {
            Paths::Shared => base.clone(),
            Paths::Own => format!("{base}/{i}"),
        };
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let mut times = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                let started = Instant::now();
                client.lock_unlock(&path).await?;
                times.push(started.elapsed());
            }
            anyhow::Ok(times)
        }));
    }
    start.wait().await;
    let started = Instant::now();
    let mut times = Vec::with_capacity(per_client * clients);
    for task in tasks {
        times.extend(task.await??);
    }
    Ok(Run { times, wall: started.elapsed() })
}

struct Swap {
    /// From the rename to the reply of the first Claim of the new version.
    latency: Duration,
    /// The new version's compile as the registry recorded it (zero from the cache).
    compile: Duration,
}

/// Deploys lock.wasm relabelled with each of `labels` in turn while a client loops
/// Acquire/Release; `cached`: whether each should come from the compile cache.
async fn swap_latency(
    host: &Host,
    grpc: SocketAddr,
    labels: &[String],
    cached: bool,
) -> anyhow::Result<Vec<Swap>> {
    let target = host.registry().dir().join("lock.wasm");
    let original = std::fs::read(target.with_file_name("lock.wasm.original"))?;
    let mut client = Client::open(grpc).await?;
    let path = format!("/bench-serve/swap-{}", uuid::Uuid::new_v4().simple());
    let (claims_tx, mut claims) = watch::channel((Instant::now(), String::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let looping = {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let version = client.lock_unlock(&path).await?;
                claims_tx.send_replace((Instant::now(), version));
            }
            anyhow::Ok(())
        })
    };
    claims.wait_for(|(_, v)| !v.is_empty()).await?;
    let mut swaps = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        // Vary the pause between swaps.
        let pause = 200 + (i as u64 * 137) % 500;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let before = claims.borrow_and_update().1.clone();
        let tmp = target.with_extension("tmp");
        std::fs::write(&tmp, relabelled(&original, label))?;
        let renamed = Instant::now();
        std::fs::rename(&tmp, &target)?;
        let at = tokio::time::timeout(Duration::from_secs(30), claims.wait_for(|(_, v)| *v != before))
            .await
            .map_err(|_| anyhow::anyhow!("no Claim of the new version 30 s after deploying {label}"))??
            .0;
        let latency = at.saturating_duration_since(renamed);
        let serving = host.registry().list()?.into_iter().find(|r| r.name == "lock").and_then(|r| r.serving);
        let serving = serving.ok_or_else(|| anyhow::anyhow!("lock.wasm not serving after {label}"))?;
        anyhow::ensure!(serving.from_cache == cached, "{label}: from the cache {}", serving.from_cache);
        swaps.push(Swap { latency, compile: serving.compile_time });
    }
    stop.store(true, Ordering::Relaxed);
    looping.await??;
    Ok(swaps)
}

/// `Host::version` of lock.wasm on a new Host whose compile cache is `config.cache`.
async fn first_load(config: HostConfig, cached: bool) -> anyhow::Result<Duration> {
    let host = Host::start(config).await?;
    let started = Instant::now();
    let version = host.version("lock", World::Lock).await?;
    let took = started.elapsed();
    anyhow::ensure!(version.from_cache == cached, "first load: from the cache {}", version.from_cache);
    Ok(took)
}

/// A gRPC client of the daemon with a client session of its own, kept alive until dropped.
struct Client {
    session: u64,
    recipes: RecipesClient<Channel>,
    keepalive: tokio::task::JoinHandle<()>,
}

impl Client {
    async fn open(grpc: SocketAddr) -> anyhow::Result<Client> {
        let channel = Channel::from_shared(format!("http://{grpc}"))?.connect().await?;
        let mut sessions = SessionsClient::new(channel.clone());
        let opened =
            sessions.open(OpenRequest { ttl_ms: TTL.as_millis() as u64, name: "bench".into() }).await?;
        let session = opened.into_inner().session;
        let (tx, rx) = mpsc::channel(4);
        tx.send(KeepAliveRequest { session, end: false }).await?;
        let mut replies = sessions.keep_alive(ReceiverStream::new(rx)).await?.into_inner();
        // Ends, and with it the stream and the session, when the client is dropped.
        let keepalive = tokio::spawn(async move {
            let mut every = tokio::time::interval(TTL / 3);
            loop {
                tokio::select! {
                    _ = every.tick() => {
                        if tx.send(KeepAliveRequest { session, end: false }).await.is_err() {
                            break;
                        }
                    }
                    reply = replies.message() => match reply {
                        Ok(Some(r)) if r.ttl_ms > 0 => {}
                        _ => break,
                    },
                }
            }
        });
        Ok(Client { session, recipes: RecipesClient::new(channel), keepalive })
    }

    /// Acquires the lock at `path` and releases it: the claim's recipe version.
    async fn lock_unlock(&mut self, path: &str) -> anyhow::Result<String> {
        let claim = self
            .recipes
            .acquire(AcquireRequest {
                session: self.session,
                path: path.into(),
                family: Family::Lock as i32,
                timeout_ms: Some(ACQUIRE_TIMEOUT_MS),
                ..Default::default()
            })
            .await?
            .into_inner();
        self.recipes.release(HandleRef { session: self.session, handle: claim.handle }).await?;
        Ok(claim.recipe_version)
    }
}

/// Where one client's Acquire+Release through the daemon goes, measured side by side, round
/// by round: the same lock work in-process with one handle kept, with a new handle each time,
/// and done the daemon's way (a contender, usually a warm handle, made a claim and released);
/// two gRPC calls that reach the daemon and do no ZooKeeper work (a Release of an unknown
/// handle: transport, routing, session lookup); and the daemon's Acquire+Release. What the
/// daemon's way in-process and the empty calls leave of the last is the daemon's own cost.
async fn breakdown(host: &Host, grpc: SocketAddr, ops: usize) -> anyhow::Result<()> {
    const ROUNDS: usize = 10;
    let per_round = ops.div_ceil(ROUNDS).max(1);
    let path = format!("/bench-serve/breakdown-{}", uuid::Uuid::new_v4().simple());
    let mut client = Client::open(grpc).await?;
    let mut kept = host.lock("lock").await?;
    let (mut fresh, mut one, mut empty, mut daemon) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut claimed, mut hold) = (Vec::new(), Vec::new());
    let mut held = Holder::open(&client).await?;
    for _ in 0..ROUNDS {
        for _ in 0..per_round {
            let started = Instant::now();
            let mut contender = host.contender(Want::Lock, "lock").await?;
            let granted = contender.acquire(&path, None).await?;
            contender.claim(granted).release().await?;
            claimed.push(started.elapsed());
        }
        for _ in 0..per_round {
            let started = Instant::now();
            let mut handle = host.lock("lock").await?;
            handle.acquire(&path, None).await?;
            handle.release().await?;
            handle.close().await;
            fresh.push(started.elapsed());
        }
        for _ in 0..per_round {
            let started = Instant::now();
            kept.acquire(&path, None).await?;
            kept.release().await?;
            one.push(started.elapsed());
        }
        for _ in 0..per_round {
            let started = Instant::now();
            for _ in 0..2 {
                let unknown = HandleRef { session: client.session, handle: u64::MAX };
                anyhow::ensure!(
                    client.recipes.release(unknown).await.is_err(),
                    "an unknown handle was released"
                );
            }
            empty.push(started.elapsed());
        }
        for _ in 0..per_round {
            let started = Instant::now();
            client.lock_unlock(&path).await?;
            daemon.push(started.elapsed());
        }
        for _ in 0..per_round {
            let started = Instant::now();
            held.lock_unlock(&path).await?;
            hold.push(started.elapsed());
        }
    }
    kept.close().await;
    let (fresh, one, claimed, empty, daemon, hold) = (
        percentile(&mut fresh, 50.0),
        percentile(&mut one, 50.0),
        percentile(&mut claimed, 50.0),
        percentile(&mut empty, 50.0),
        percentile(&mut daemon, 50.0),
        percentile(&mut hold, 50.0),
    );
    println!();
    println!(
        "Where one client's Acquire+Release goes ({ROUNDS} interleaved rounds of {per_round}, p50 each):"
    );
    println!();
    println!("| step | p50 | of the daemon's |");
    println!("|---|---:|---:|");
    let share = |d: Duration| format!("{:.0}%", 100.0 * d.as_secs_f64() / daemon.as_secs_f64());
    println!("| in-process, one lock handle kept: acquire + release | {} | {} |", us(one), share(one));
    println!(
        "| in-process, a new handle each time: new handle, acquire, release, close | {} | {} |",
        us(fresh),
        share(fresh)
    );
    println!(
        "| in-process, the daemon's way: contender (a warm handle), acquire, claim, release | {} | {} |",
        us(claimed),
        share(claimed)
    );
    println!(
        "| two gRPC calls doing no ZooKeeper work (Release of an unknown handle) | {} | {} |",
        us(empty),
        share(empty)
    );
    let rest = daemon.saturating_sub(claimed + empty);
    println!(
        "| the daemon's own work beyond both (claim bookkeeping, task hops) | {} | {} |",
        us(rest),
        share(rest)
    );
    println!("| **daemon Acquire + Release, one client** | **{}** | 100% |", us(daemon));
    println!(
        "| daemon vs in-process with one handle kept | {:.2}× | |",
        daemon.as_secs_f64() / one.as_secs_f64()
    );
    println!(
        "| **daemon `Hold` stream, one client: acquire + release** | **{}** | {} |",
        us(hold),
        share(hold)
    );
    println!(
        "| `Hold` vs in-process with one handle kept | {:.2}× | |",
        hold.as_secs_f64() / one.as_secs_f64()
    );
    Ok(())
}

/// Claims taken one after another on one `Hold` stream of a client's session.
struct Holder {
    session: u64,
    steps: mpsc::Sender<HoldRequest>,
    events: tonic::Streaming<HoldEvent>,
}

impl Holder {
    async fn open(client: &Client) -> anyhow::Result<Holder> {
        let (steps, rx) = mpsc::channel(2);
        let events = client.recipes.clone().hold(ReceiverStream::new(rx)).await?.into_inner();
        Ok(Holder { session: client.session, steps, events })
    }

    /// Acquires the lock at `path` on the stream and releases it.
    async fn lock_unlock(&mut self, path: &str) -> anyhow::Result<()> {
        let acquire = AcquireRequest {
            session: self.session,
            path: path.into(),
            family: Family::Lock as i32,
            timeout_ms: Some(ACQUIRE_TIMEOUT_MS),
            ..Default::default()
        };
        self.steps.send(HoldRequest { step: Some(Step::Acquire(acquire)) }).await?;
        let held = self.events.message().await?;
        anyhow::ensure!(matches!(held.and_then(|e| e.event), Some(Event::Claim(_))), "no claim");
        self.steps.send(HoldRequest { step: Some(Step::Release(Empty {})) }).await?;
        let released = self.events.message().await?;
        anyhow::ensure!(matches!(released.and_then(|e| e.event), Some(Event::Released(_))), "not released");
        Ok(())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

fn relabelled(component: &[u8], label: &str) -> Vec<u8> {
    common::with_section(component, "wazoo-bench-label", label.as_bytes())
}
