//! One daemon, many client sessions: what 10,000 client sessions cost one `wazoo serve` process
//! while each holds a lock or waits for one.
//!
//! Set-up: one ZooKeeper 3.8.0 (standalone, started here unless `WAZOO_ZOOKEEPER` names one) and
//! one `wazoo serve` as a process of its own (a copy of `target/release/wazoo` and
//! `wazoo-compile` made at the start; `WAZOO_BENCH_BIN=DIR` takes them from DIR instead). The
//! one host of a daemon without `--tenants` has a pool of 1000 recipe instances unless
//! `--max-instances` says otherwise, and every waiting claim keeps an instance (a held lock is
//! held as data, with none); the
//! daemon here serves one tenant (`--tenants`), whose `limits` raise
//! `instances` and `client_sessions` to the count, and `--max-sessions`, `--max-streams` and
//! `--max-ttl` are raised to match (what each does: `wazoo serve --help`, docs
//! reference/tenants.md).
//!
//! The bench opens N client sessions (`WAZOO_SCALE_SESSIONS`, default 10000) with
//! `wazoo_client` in this process (one tokio runtime, 200 sessions per gRPC connection), kept
//! alive as `wazoo_client::Session` keeps them: a keepalive every sixth of the TTL
//! (`WAZOO_SCALE_TTL`, default 10s, the CLI's `--session-timeout`), on one KeepAlive stream per
//! connection, the keepalives due together sent as one batch. N/2 sessions each take
//! a lock of their own path (`Contender::acquire` + `hold`: the claim followed by a Lost
//! stream), and N/2 others each wait for one of those locks (an Acquire with no timeout).
//! Measured:
//!
//! 1. The daemon's resident memory (`VmRSS` of its `/proc/PID/status`) before the sessions
//!    open, with all of them open and idle (every session opens before any claim is asked
//!    for), and with all of them holding or waiting, per session. Target: at most 20 KiB each.
//!    Where it grew: the daemon's `/proc/PID/smaps` before and after, mappings grouped by name
//!    and size, the largest growths.
//! 2. The daemon's CPU (`utime + stime` of `/proc/PID/stat`) over a quiet window
//!    (`WAZOO_SCALE_QUIET`, default 20s) with every session open and idle: keepalives, HTTP/2
//!    pings, the daemon's reaper, as a share of one core. Target: at most 10%. Beside it, the
//!    daemon's CPU over a quarter of that window (5 s at least) before any session opened.
//! 3. One more client's acquire+release of a lock nobody else takes (unary Acquire and
//!    Release in a session of its own), 200 times with no other session open (after 500 to
//!    warm up), 200 times with all N open, and 200 times again once all have closed: p50 and
//!    p99 side by side.
//! 4. Closing every session at once (`Session::close`, the waiters' Acquire dropped first):
//!    until every Close has returned, until ZooKeeper counts no more ephemeral nodes than
//!    before (`mntr`'s `zk_ephemerals_count`, polled every 20 ms), and until the daemon's
//!    `wazoo_client_sessions` gauge counts the probe's session alone (its /metrics, polled).
//!
//! Run with `cargo bench -p wazoo-cli --bench scale` after `make build` (and `make recipes`);
//! about 40 seconds on 2 cores.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{describe, ms, percentile, plugin, zookeeper};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{watch, Semaphore};
use wazoo_client::{Ask, Client, Options, Session};
use wazoo_proto::{AcquireRequest, Family, HandleRef};
use wazoo_testkit::ServerOptions;

const TOKEN: &str = "scale-bench-token-0123456789";
const TENANT: &str = "scale";
/// Client sessions per gRPC connection (the daemon allows 1024 streams on one; each session
/// has a Lost stream or a waiting Acquire, and the connection one KeepAlive stream).
const PER_CONNECTION: usize = 200;
/// Sessions being opened at once.
const OPENING: usize = 32;
/// The extra client's acquire+release, per series.
const PROBES: usize = 200;
const WARMUP: usize = 500;
/// Room above the count for the probe's session.
const SPARE: usize = 64;
const TICK_MS: u32 = 2000;
/// How long one phase may take before it counts as stuck.
const LIMIT: Duration = Duration::from_secs(180);
const TARGET_RSS_KIB: f64 = 20.0;
const TARGET_CPU_PCT: f64 = 10.0;

fn main() -> anyhow::Result<()> {
    let count: usize =
        std::env::var("WAZOO_SCALE_SESSIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000).max(2);
    let ttl = duration_env("WAZOO_SCALE_TTL", Duration::from_secs(10))?;
    let quiet = duration_env("WAZOO_SCALE_QUIET", Duration::from_secs(20))?;
    let nofile = raise_nofile();
    let (plugins, _) = plugin("lock")?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = common::binaries()?;
    let (server, address) =
        zookeeper(ServerOptions { tick_ms: TICK_MS, heap: "1g".into(), ..ServerOptions::default() })?;
    let described = describe(&server, &address, TICK_MS);
    let scratch = std::env::temp_dir().join(format!("wazoo-bench-scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("bin"))?;
    for name in ["wazoo", "wazoo-compile"] {
        std::fs::copy(bin.join(name), scratch.join("bin").join(name))?;
    }
    let setup = Setup {
        count,
        ttl,
        quiet,
        nofile,
        zookeeper: address,
        described,
        plugins,
        cache: root.join("target/component-cache"),
        scratch: scratch.clone(),
    };
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = runtime.block_on(run(setup));
    common::conclude(
        runtime,
        server,
        started,
        &scratch,
        outcome,
        "sessions that failed to hold, wait or close (see above)",
    )
}

struct Setup {
    count: usize,
    ttl: Duration,
    quiet: Duration,
    nofile: String,
    zookeeper: String,
    described: String,
    plugins: PathBuf,
    cache: PathBuf,
    scratch: PathBuf,
}

/// Failures of the sessions' tasks: how many, and the first one's words.
#[derive(Default)]
struct Failures {
    count: AtomicU64,
    first: Mutex<Option<String>>,
}

impl Failures {
    fn add(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first.lock().unwrap();
        if first.is_none() {
            *first = Some(what);
        }
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn first(&self) -> String {
        self.first.lock().unwrap().clone().unwrap_or_default()
    }
}

async fn run(setup: Setup) -> anyhow::Result<u64> {
    let count = setup.count;
    let cap = count + SPARE;
    let tenants = serde_json::json!({"tenants": [
        {"name": TENANT, "token": TOKEN, "zookeeper_secret": "scale-secret", "recipes": ["lock"],
         "limits": {"instances": cap, "client_sessions": cap}},
    ]});
    let tenants_file = setup.scratch.join("tenants.json");
    std::fs::write(&tenants_file, tenants.to_string())?;
    let log = setup.scratch.join("daemon.log");
    let flags = [
        "--max-sessions".to_string(),
        cap.to_string(),
        "--max-streams".to_string(),
        (3 * cap).to_string(),
        "--max-ttl".to_string(),
        "1h".to_string(),
    ];
    let mut daemon = tokio::process::Command::new(setup.scratch.join("bin/wazoo"))
        .env("WAZOO_ZOOKEEPER", &setup.zookeeper)
        .env("WAZOO_PLUGINS", &setup.plugins)
        .env("WAZOO_CACHE", &setup.cache)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
            "--json",
            "--watch-every",
            "1h",
        ])
        .args(["--no-registry", "--tenants"])
        .arg(&tenants_file)
        .args(&flags)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()?;
    let pid = daemon.id().ok_or_else(|| anyhow::anyhow!("wazoo serve has no pid"))?;
    let (grpc, metrics) = ready(&mut daemon, &log).await?;
    let options = Options { token: Some(TOKEN.into()), timeout: Duration::from_secs(10), tls: None };
    let probe_client = Client::connect_with(&grpc, &options).await?;

    let machine = common::machine();
    println!(
        "wazoo serve at scale: `cargo bench -p wazoo-cli --bench scale`; {machine}; {}; one `wazoo serve` process (pid {pid}) with one tenant (--tenants: instances and \
         client_sessions {cap}) and {}; {count} client sessions (TTL {:.1} s, a keepalive every {:.2} s each, \
         {PER_CONNECTION} sessions per gRPC connection) from this process; open files: {}",
        setup.described,
        flags.join(" "),
        setup.ttl.as_secs_f64(),
        (setup.ttl / 6).as_secs_f64(),
        setup.nofile
    );

    // The extra client, with a session of its own for the whole run; warmed up, then timed alone.
    let probe = probe_client.session(setup.ttl, "scale-probe".into()).await?;
    let probe_path = format!("/scale-probe/{}", uuid::Uuid::new_v4().simple());
    lock_loop(&probe_client, &probe, &probe_path, WARMUP).await?;
    let mut alone = lock_loop(&probe_client, &probe, &probe_path, PROBES).await?;

    // The daemon's CPU with no session but the probe's, idle: what it spends whatever the count.
    let idle_window = (setup.quiet / 4).max(Duration::from_secs(5));
    let (idle_cpu_before, idle_started) = (cpu_ticks(pid)?, Instant::now());
    tokio::time::sleep(idle_window).await;
    let idle_cpu = (cpu_ticks(pid)? - idle_cpu_before) as f64 / clock_tick();
    let idle_pct = 100.0 * idle_cpu / idle_started.elapsed().as_secs_f64();

    let ephemerals_before = ephemerals(&setup.zookeeper).await?;
    let rss_before = rss(pid)?;
    let maps_before = smaps(pid)?;

    // Open every session first (idle: kept alive, nothing asked); then the holders each take a
    // lock of their own; then the waiters each queue for one of those locks.
    let holders = count.div_ceil(2);
    let waiters = count - holders;
    let mut clients = Vec::new();
    for _ in 0..count.div_ceil(PER_CONNECTION) {
        clients.push(Client::connect_with(&grpc, &options).await?);
    }
    let failures = Arc::new(Failures::default());
    // 0: open; 1: holders take their locks; 2: waiters queue; 3: close.
    let (phase_tx, phase_rx) = watch::channel(0u8);
    let opening = Arc::new(Semaphore::new(OPENING));
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let (held_tx, mut held_rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let mut tasks = tokio::task::JoinSet::new();
    let open_started = Instant::now();
    for i in 0..count {
        let client = clients[i / PER_CONNECTION].clone();
        let (failures, mut phase, opening, opened, held) =
            (failures.clone(), phase_rx.clone(), opening.clone(), opened_tx.clone(), held_tx.clone());
        let ttl = setup.ttl;
        let holder = i < holders;
        tasks.spawn(async move {
            let permit = opening.clone().acquire_owned().await;
            let session = match client.session(ttl, "scale".into()).await {
                Ok(session) => session,
                Err(e) => {
                    failures.add(format!("session {i}: {e}"));
                    let _ = opened.send(false);
                    return;
                }
            };
            drop(permit);
            let _ = opened.send(true);
            let mut contender = session.contender(Ask::Acquire { family: Family::Lock, leases: 0 }, "");
            if holder {
                if phase.wait_for(|p| *p >= 1).await.is_err() {
                    return;
                }
                let permit = opening.acquire_owned().await;
                if let Err(e) = contender.acquire(&lock_path(i), Some(LIMIT)).await {
                    failures.add(format!("holder {i}: {e:?}"));
                    let _ = held.send(false);
                    contender.close().await;
                    return;
                }
                let claim = match contender.hold().await {
                    Ok(claim) => claim,
                    Err(e) => {
                        failures.add(format!("holder {i}: {e}"));
                        let _ = held.send(false);
                        return;
                    }
                };
                drop(permit);
                let _ = held.send(true);
                let _ = phase.wait_for(|p| *p >= 3).await;
                claim.close().await;
            } else {
                let w = i - holders;
                if phase.wait_for(|p| *p >= 2).await.is_err() {
                    return;
                }
                let (path, closing) = (lock_path(w), phase.clone());
                tokio::select! {
                    acquired = contender.acquire(&path, None) => {
                        let what = match acquired {
                            Ok(_) => "acquired a lock its holder holds".to_string(),
                            Err(e) => format!("{e:?}"),
                        };
                        if *closing.borrow() < 3 {
                            failures.add(format!("waiter {w}: {what}"));
                        }
                    }
                    _ = phase.wait_for(|p| *p >= 3) => {}
                }
                contender.close().await;
            }
        });
    }
    drop((opened_tx, held_tx));
    let mut opened = 0usize;
    for _ in 0..count {
        match tokio::time::timeout(LIMIT, opened_rx.recv()).await {
            Ok(Some(true)) => opened += 1,
            Ok(Some(false)) => {}
            _ => anyhow::bail!("the sessions did not all open within {LIMIT:?}"),
        }
    }
    let open_took = open_started.elapsed();
    // Let the opening's buffers go before the reading.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_sessions = rss(pid)?;
    let sessions_idle = metric(&metrics, "wazoo_client_sessions").await? as usize;

    let holders_started = Instant::now();
    phase_tx.send_replace(1);
    let mut held = 0usize;
    for _ in 0..holders {
        match tokio::time::timeout(LIMIT, held_rx.recv()).await {
            Ok(Some(true)) => held += 1,
            Ok(Some(false)) => {}
            // A holder whose session never opened says nothing.
            Ok(None) => break,
            Err(_) => anyhow::bail!("the holders did not all answer within {LIMIT:?}"),
        }
    }
    let holders_took = holders_started.elapsed();
    let waiters_started = Instant::now();
    phase_tx.send_replace(2);
    // Every waiter is queued once ZooKeeper counts its node and the daemon its wait.
    let expected_waiting = waiters.min(held).min(opened.saturating_sub(held));
    let expected_nodes = ephemerals_before + (held + expected_waiting) as u64;
    let deadline = Instant::now() + LIMIT;
    let mut queued = false;
    while Instant::now() < deadline {
        let nodes = ephemerals(&setup.zookeeper).await?;
        let waits = metric(&metrics, "wazoo_claims_waiting").await?;
        if nodes >= expected_nodes && waits >= expected_waiting as f64 {
            queued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waiters_took = waiters_started.elapsed();
    let sessions_open = metric(&metrics, "wazoo_client_sessions").await? as usize;
    let held_now = metric(&metrics, "wazoo_claims_held").await? as usize;
    let waiting_now = metric(&metrics, "wazoo_claims_waiting").await? as usize;
    let nodes_now = ephemerals(&setup.zookeeper).await?;
    // The probe's session is open too.
    let reached = sessions_open.saturating_sub(1);
    let rss_loaded = rss(pid)?;

    // Quiet: every session open, nothing asked but keepalives.
    let (cpu_before, self_before, quiet_started) = (cpu_ticks(pid)?, cpu_ticks_self()?, Instant::now());
    tokio::time::sleep(setup.quiet).await;
    let (cpu_after, self_after, quiet_took) = (cpu_ticks(pid)?, cpu_ticks_self()?, quiet_started.elapsed());
    let rss_quiet = rss(pid)?;
    let maps_quiet = smaps(pid)?;
    // By now the held locks are held as data (after a second each): the instances left are
    // the waiters'.
    let instances_quiet = metric(&metrics, "wazoo_instances").await? as usize;
    let tick = clock_tick();
    let daemon_cpu = (cpu_after - cpu_before) as f64 / tick;
    let bench_cpu = (self_after - self_before) as f64 / tick;
    let cpu_pct = 100.0 * daemon_cpu / quiet_took.as_secs_f64();

    // The extra client under that load.
    let mut loaded = lock_loop(&probe_client, &probe, &probe_path, PROBES).await?;
    let rss_probed = rss(pid)?;

    // Close them all at once.
    let closing = Instant::now();
    phase_tx.send_replace(3);
    let (mut calls_done, mut zk_done, mut daemon_done) = (None, None, None);
    let closed = async { while tasks.join_next().await.is_some() {} };
    tokio::pin!(closed);
    let deadline = closing + LIMIT;
    while Instant::now() < deadline && (calls_done.is_none() || zk_done.is_none() || daemon_done.is_none()) {
        tokio::select! {
            _ = &mut closed, if calls_done.is_none() => calls_done = Some(closing.elapsed()),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if zk_done.is_none() && ephemerals(&setup.zookeeper).await? <= ephemerals_before {
            zk_done = Some(closing.elapsed());
        }
        if daemon_done.is_none() && metric(&metrics, "wazoo_client_sessions").await? <= 1.0 {
            daemon_done = Some(closing.elapsed());
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_closed = rss(pid)?;
    let hwm = vm_field(pid, "VmHWM:")?;
    // The extra client again, everything else closed.
    let mut after = lock_loop(&probe_client, &probe, &probe_path, PROBES).await?;
    probe.close().await;

    // Tables.
    let kib = |bytes: u64| bytes as f64 / 1024.0;
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64);
    let per_session = |rss: u64| {
        if reached == 0 {
            0.0
        } else {
            kib(rss.saturating_sub(rss_before)) / reached as f64
        }
    };
    let reached_note = if reached >= count {
        format!("{reached} (the target count)")
    } else {
        format!(
            "{reached} — TARGET COUNT {count} NOT REACHED: {} failures; first: {}",
            failures.count(),
            failures.first()
        )
    };
    println!();
    println!("Sessions: {reached_note}.");
    println!(
        "Opened: {opened} sessions in {:.1} s (the daemon counted {sessions_idle}, the probe's included); then \
         {held} holders took their locks in {:.1} s, then {expected_waiting} waiters queued in {:.1} s{}; the daemon \
         counted {sessions_open} client sessions, {held_now} claims held, {waiting_now} waiting; ZooKeeper {} \
         ephemeral nodes more than before.",
        open_took.as_secs_f64(),
        holders_took.as_secs_f64(),
        waiters_took.as_secs_f64(),
        if queued { "" } else { " (NOT ALL QUEUED within the limit)" },
        nodes_now.saturating_sub(ephemerals_before)
    );
    println!();
    println!(
        "After the quiet window the daemon's `wazoo_instances` counted {instances_quiet} recipe instances alive \
         (a held lock is held as data after a second; a waiting one keeps its instance)."
    );
    println!();
    println!("| daemon resident memory (VmRSS) | MiB | per client session | target | vs target |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| before the sessions (the probe's session and warm handles only) | {} | | | |",
        mib(rss_before)
    );
    let idle_each =
        kib(rss_sessions.saturating_sub(rss_before)) / sessions_idle.saturating_sub(1).max(1) as f64;
    println!(
        "| {} sessions open, idle (opened and kept alive; no claim yet) | {} | {idle_each:.1} KiB | | |",
        sessions_idle.saturating_sub(1),
        mib(rss_sessions)
    );
    let claims = (held_now + waiting_now).max(1);
    println!(
        "| then {held_now} holding + {waiting_now} waiting: what the claims add, per claim | +{} | {:.1} KiB per claim | | |",
        mib(rss_loaded.saturating_sub(rss_sessions)),
        kib(rss_loaded.saturating_sub(rss_sessions)) / claims as f64
    );
    for (what, bytes) in [
        ("all sessions holding or waiting, just opened", rss_loaded),
        ("**the same after the quiet window**", rss_quiet),
        ("after the loaded probe", rss_probed),
    ] {
        let each = per_session(bytes);
        println!(
            "| {what} | {} | {each:.1} KiB | ≤ {TARGET_RSS_KIB:.0} KiB | {:.2}× ({}) |",
            mib(bytes),
            each / TARGET_RSS_KIB,
            if each <= TARGET_RSS_KIB { "met" } else { "missed" }
        );
    }
    println!("| after every session closed (1 s after) | {} | | | |", mib(rss_closed));
    println!("| peak (VmHWM) | {} | | | |", mib(hwm));
    println!();
    println!(
        "Where the daemon's resident memory grew, before the sessions → after the quiet window \
         (/proc/PID/smaps, mappings grouped by name and size; the largest growths):"
    );
    println!();
    println!(
        "| mappings (name, size each) | count before → after | Rss before → after | growth per session |"
    );
    println!("|---|---:|---:|---:|");
    let mut grown: Vec<(&String, &(u64, u64))> = maps_quiet.iter().collect();
    let growth = |key: &String, rss: u64| rss as i64 - maps_before.get(key).map(|b| b.1 as i64).unwrap_or(0);
    grown.sort_by_key(|(key, (_, rss))| -growth(key, *rss));
    for (key, (n, rss_kib)) in grown.into_iter().take(6) {
        let (n0, rss0) = maps_before.get(key).copied().unwrap_or((0, 0));
        println!(
            "| {key} | {n0} → {n} | {:.1} → {:.1} MiB | {:.1} KiB |",
            rss0 as f64 / 1024.0,
            *rss_kib as f64 / 1024.0,
            growth(key, *rss_kib) as f64 / reached.max(1) as f64
        );
    }
    println!();
    let keepalives = reached as f64 / (setup.ttl / 6).as_secs_f64();
    println!("| quiet window, every session open and idle | figure | target | vs target |");
    println!("|---|---:|---:|---:|");
    println!(
        "| **daemon CPU, share of one core** ({daemon_cpu:.2} s over {:.1} s) | **{cpu_pct:.1}%** | ≤ {TARGET_CPU_PCT:.0}% | {:.2}× ({}) |",
        quiet_took.as_secs_f64(),
        cpu_pct / TARGET_CPU_PCT,
        if cpu_pct <= TARGET_CPU_PCT { "met" } else { "missed" }
    );
    println!(
        "| the same daemon before the sessions opened ({:.0} s, the probe's session alone) | {idle_pct:.1}% | | |",
        idle_window.as_secs_f64()
    );
    println!("| keepalives the clients send (one per session every TTL/6) | {keepalives:.0}/s | | |");
    println!(
        "| daemon CPU per keepalive (all of its CPU over the keepalives) | {:.1} µs | | |",
        if keepalives > 0.0 { daemon_cpu / quiet_took.as_secs_f64() / keepalives * 1e6 } else { 0.0 }
    );
    println!(
        "| this bench process's CPU meanwhile (the clients' keepalives) | {:.1}% | | |",
        100.0 * bench_cpu / quiet_took.as_secs_f64()
    );
    println!();
    println!("| one more client: acquire+release of its own lock | runs | p50 | p99 |");
    println!("|---|---:|---:|---:|");
    let (alone_p50, alone_p99) = (percentile(&mut alone, 50.0), percentile(&mut alone, 99.0));
    let (loaded_p50, loaded_p99) = (percentile(&mut loaded, 50.0), percentile(&mut loaded, 99.0));
    println!("| no other session open | {} | {} | {} |", alone.len(), ms(alone_p50), ms(alone_p99));
    println!(
        "| {reached} other sessions holding or waiting | {} | {} | {} |",
        loaded.len(),
        ms(loaded_p50),
        ms(loaded_p99)
    );
    let (after_p50, after_p99) = (percentile(&mut after, 50.0), percentile(&mut after, 99.0));
    println!(
        "| no other session open, again (after all closed) | {} | {} | {} |",
        after.len(),
        ms(after_p50),
        ms(after_p99)
    );
    println!(
        "| **under load vs alone** (vs the first; vs the second) | | **{:.2}×; {:.2}×** | **{:.2}×; {:.2}×** |",
        loaded_p50.as_secs_f64() / alone_p50.as_secs_f64(),
        loaded_p50.as_secs_f64() / after_p50.as_secs_f64(),
        loaded_p99.as_secs_f64() / alone_p99.as_secs_f64(),
        loaded_p99.as_secs_f64() / after_p99.as_secs_f64()
    );
    println!();
    let shown = |d: Option<Duration>| match d {
        Some(d) => format!("{:.2} s", d.as_secs_f64()),
        None => format!("NOT within {:.0} s", LIMIT.as_secs_f64()),
    };
    println!("| closing all {reached} sessions at once, from the signal until | time |");
    println!("|---|---:|");
    println!("| every client's Close call returned | {} |", shown(calls_done));
    println!(
        "| ZooKeeper counts no ephemeral node more than before (`mntr` zk_ephemerals_count) | {} |",
        shown(zk_done)
    );
    println!("| the daemon's `wazoo_client_sessions` counts the probe's alone | {} |", shown(daemon_done));

    let _ = daemon.start_kill();
    let _ = daemon.wait().await;
    let mut failed = failures.count();
    if calls_done.is_none() || zk_done.is_none() || daemon_done.is_none() {
        failed += 1;
    }
    if failed > 0 {
        println!();
        println!("failures: {failed}; first: {}", failures.first());
    }
    Ok(failed)
}

fn lock_path(i: usize) -> String {
    format!("/scale/lock-{i:05}")
}

/// `n` acquire+release round trips of the lock at `path` in `session` (unary Acquire and
/// Release): each one's time.
async fn lock_loop(
    client: &Client,
    session: &Session,
    path: &str,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut recipes = client.recipes();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let claim = recipes
            .acquire(AcquireRequest {
                session: session.id(),
                path: path.into(),
                family: Family::Lock as i32,
                timeout_ms: Some(30_000),
                ..Default::default()
            })
            .await?
            .into_inner();
        recipes.release(HandleRef { session: session.id(), handle: claim.handle }).await?;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// The gRPC and metrics addresses a `wazoo serve --json` says it serves on; its stdout is
/// drained from then on.
async fn ready(child: &mut tokio::process::Child, log: &Path) -> anyhow::Result<(String, String)> {
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("stdout is not piped"))?;
    let mut lines = BufReader::new(stdout).lines();
    let line = match tokio::time::timeout(Duration::from_secs(120), lines.next_line()).await {
        Ok(Ok(Some(line))) => line,
        other => anyhow::bail!("wazoo serve did not start ({other:?}); its log: {}", log.display()),
    };
    let said: serde_json::Value = serde_json::from_str(&line)?;
    let grpc = said["grpc"].as_str().ok_or_else(|| anyhow::anyhow!("wazoo serve said {line:?}"))?;
    let metrics = said["metrics"].as_str().ok_or_else(|| anyhow::anyhow!("wazoo serve said {line:?}"))?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((grpc.to_string(), metrics.to_string()))
}

/// The sum of the daemon's metric `name` over its labels (`/metrics` on `addr`).
async fn metric(addr: &str, name: &str) -> anyhow::Result<f64> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut body)).await??;
    Ok(body
        .lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// ZooKeeper's count of ephemeral nodes (`mntr`), from the first server of `connect`.
async fn ephemerals(connect: &str) -> anyhow::Result<u64> {
    let server = connect.split(',').next().unwrap_or(connect);
    let server = server.split('/').next().unwrap_or(server).to_string();
    let mut stream = tokio::net::TcpStream::connect(&server).await?;
    stream.write_all(b"mntr").await?;
    let mut reply = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut reply)).await??;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("zk_ephemerals_count"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no zk_ephemerals_count in mntr from {server}: {reply:?}"))
}

fn vm_field(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/{pid}/status"))?;
    Ok(kb * 1024)
}

/// The process's mappings grouped by name (or `anonymous`) and size: each group's count and
/// resident KiB.
fn smaps(pid: u32) -> anyhow::Result<std::collections::HashMap<String, (u64, u64)>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
    let mut groups = std::collections::HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if let Some((from, to)) = first.split_once('-').filter(|(a, _)| u64::from_str_radix(a, 16).is_ok()) {
            let (from, to) = (u64::from_str_radix(from, 16)?, u64::from_str_radix(to, 16)?);
            let perms = words.next().unwrap_or("");
            let name = words.nth(3).unwrap_or("anonymous");
            let name = name.rsplit('/').next().unwrap_or(name);
            current = Some(format!("{name} {perms}, {} KiB", (to - from) / 1024));
        } else if first == "Rss:" {
            let kib: u64 = words.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            if let Some(key) = current.take() {
                let entry = groups.entry(key).or_insert((0, 0));
                entry.0 += 1;
                entry.1 += kib;
            }
        }
    }
    Ok(groups)
}

fn rss(pid: u32) -> anyhow::Result<u64> {
    vm_field(pid, "VmRSS:")
}

/// `utime + stime` of `/proc/PID/stat`, in clock ticks.
fn cpu_ticks_of(stat: &str) -> anyhow::Result<u64> {
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); `after` starts at field 3.
    let field = |n: usize| -> anyhow::Result<u64> {
        Ok(fields.get(n - 3).ok_or_else(|| anyhow::anyhow!("short /proc stat"))?.parse()?)
    };
    Ok(field(14)? + field(15)?)
}

fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    cpu_ticks_of(&std::fs::read_to_string(format!("/proc/{pid}/stat"))?)
}

fn cpu_ticks_self() -> anyhow::Result<u64> {
    cpu_ticks_of(&std::fs::read_to_string("/proc/self/stat")?)
}

fn clock_tick() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if tick > 0 {
        tick as f64
    } else {
        100.0
    }
}

/// Raises the soft limit of open files to the hard one (the daemon, started from here,
/// inherits it): what it is now, for the heading.
fn raise_nofile() -> String {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid rlimit to write to and read from.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return "unknown".into();
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    format!("{} (soft, raised to the hard limit)", limit.rlim_cur)
}

fn duration_env(name: &str, default: Duration) -> anyhow::Result<Duration> {
    match std::env::var(name) {
        Ok(v) => humantime::parse_duration(&v).map_err(|e| anyhow::anyhow!("{name}={v:?}: {e}")),
        Err(_) => Ok(default),
    }
}
