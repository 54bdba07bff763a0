//! What the benchmarks share: percentiles and how durations are printed.
#![allow(dead_code)] // each bench uses some of these

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use wazoo_testkit::{ServerOptions, ZkServer};

/// The plugins directory (`WAZOO_PLUGINS`, else the workspace's `plugins/`) and in it
/// `name.wasm`, which must exist.
pub fn plugin(name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let plugins = std::env::var_os("WAZOO_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../plugins"));
    let component = plugins.join(format!("{name}.wasm"));
    anyhow::ensure!(component.exists(), "{} missing: run `make recipes` first", component.display());
    Ok((plugins, component))
}

/// The ZooKeeper a bench runs against: `WAZOO_ZOOKEEPER`'s ensemble, else a server started
/// with `options` (stopped when the returned server is dropped), and its address.
pub fn zookeeper(options: ServerOptions) -> anyhow::Result<(Option<ZkServer>, String)> {
    Ok(match std::env::var("WAZOO_ZOOKEEPER") {
        Ok(address) => (None, address),
        Err(_) => {
            let server = ZkServer::start(options)?;
            let address = server.address();
            (Some(server), address)
        }
    })
}

/// What [`zookeeper`] gave, for a bench's heading: the version of the server it started (its
/// tick too), or the address of `WAZOO_ZOOKEEPER`.
pub fn describe(server: &Option<ZkServer>, address: &str, tick_ms: u32) -> String {
    match server {
        Some(s) => {
            let version = wazoo_testkit::four_letter(s.port, "srvr")
                .ok()
                .and_then(|r| {
                    r.lines().next().map(|l| l.trim_start_matches("Zookeeper version: ").to_string())
                })
                .and_then(|v| v.split(['-', ','].as_ref()).next().map(str::to_string))
                .unwrap_or_else(|| "?".into());
            format!("ZooKeeper {version} standalone on 127.0.0.1 (tick {tick_ms} ms)")
        }
        None => format!("ZooKeeper at {address}"),
    }
}

/// The `p`th percentile of `samples` (sorted in place).
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let index = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[index]
}

pub fn us(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 10.0 {
        format!("{micros:.2} µs")
    } else {
        format!("{micros:.0} µs")
    }
}

pub fn ms(d: Duration) -> String {
    let millis = d.as_secs_f64() * 1e3;
    if millis < 10.0 {
        format!("{millis:.2} ms")
    } else {
        format!("{millis:.1} ms")
    }
}

/// This process's resident set size, in bytes.
pub fn rss_bytes() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/self/status"))?;
    Ok(kb * 1024)
}

/// A `wazoo serve` on `host`, in this process, as the command runs it, on a free port of
/// 127.0.0.1. Stopped by [`Served::stop`].
pub struct Served {
    pub grpc: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Served {
    pub async fn start(host: &wazoo_runtime::Host, watch_every: Duration) -> anyhow::Result<Served> {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let settings = wazoo_daemon::serve::ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics: None,
            watch_every,
            tls: None,
            token: None,
            bounds: Default::default(),
            group: None,
            // The benches serve the plugins directory's recipes, as before the registry.
            registry: false,
            trusted_keys: None,
            advertise: None,
        };
        let task = tokio::spawn(wazoo_daemon::serve::run(
            host.clone(),
            settings,
            move |grpc, _| {
                let _ = ready_tx.send(grpc);
            },
            async {
                let _ = stop_rx.await;
            },
        ));
        match ready_rx.await {
            Ok(grpc) => Ok(Served { grpc, stop, task }),
            Err(_) => {
                task.await??;
                anyhow::bail!("the daemon stopped before it listened")
            }
        }
    }

    /// Stops the daemon and waits for it to end.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

/// The gRPC address a `wazoo serve --json` process (`what`) says it serves on, in its first line
/// on stdout, read within `limit`; its stdout is drained from then on. A daemon that does not
/// start is an error that names its `log`.
#[allow(dead_code)]
pub async fn daemon_ready(
    child: &mut tokio::process::Child,
    limit: Duration,
    what: &str,
    log: &std::path::Path,
) -> anyhow::Result<String> {
    use tokio::io::AsyncBufReadExt as _;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("{what}: stdout is not piped"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = match tokio::time::timeout(limit, lines.next_line()).await {
        Ok(Ok(Some(line))) => line,
        other => anyhow::bail!("{what} did not start ({other:?}); its log: {}", log.display()),
    };
    let said: serde_json::Value = serde_json::from_str(&line)?;
    let grpc = said["grpc"].as_str().ok_or_else(|| anyhow::anyhow!("{what} said {line:?}"))?.to_string();
    // Nothing more is read from its stdout: keep it drained.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(grpc)
}

/// Where the `wazoo` and `wazoo-compile` a benchmark runs as processes are: `WAZOO_BENCH_BIN`,
/// else the workspace's `target/release`; both must be there.
pub fn binaries() -> anyhow::Result<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = std::env::var_os("WAZOO_BENCH_BIN").map(PathBuf::from).unwrap_or(root.join("target/release"));
    for name in ["wazoo", "wazoo-compile"] {
        anyhow::ensure!(
            bin.join(name).exists(),
            "{} missing: build it first (`cargo build --release -p wazoo-cli`)",
            bin.join(name).display()
        );
    }
    Ok(bin)
}

/// The machine's 1-minute load average (`/proc/loadavg`), empty if it cannot be read.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// The machine for a heading: `2 cores, MODEL, load average L at start` (other work on the
/// machine shows in every figure, so the heading says how busy it was).
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.to_string()))
        .and_then(|l| l.split(':').nth(1).map(|m| format!(", {}", m.trim())))
        .unwrap_or_default();
    match loadavg() {
        load if load.is_empty() => format!("{cores} cores{cpu}"),
        load => format!("{cores} cores{cpu}, load average {load} at start"),
    }
}

/// The last line of a benchmark of daemon processes, after a blank one: its wall time since
/// `started`, and the machine's load average now (what else ran beside it).
#[allow(dead_code)]
pub fn wall_time(started: std::time::Instant) {
    println!();
    println!("wall time {:.1} s; load average {} at the end", started.elapsed().as_secs_f64(), loadavg());
}

/// Ends a benchmark of daemon processes that ran on `runtime`: the runtime shut down (its clients
/// dropped), then ZooKeeper (`server`), its wall time printed, and [`finish`].
#[allow(dead_code)]
pub fn conclude<N: Into<u64>>(
    runtime: tokio::runtime::Runtime,
    server: Option<ZkServer>,
    started: std::time::Instant,
    scratch: &std::path::Path,
    outcome: anyhow::Result<N>,
    failed: &str,
) -> anyhow::Result<()> {
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(server);
    wall_time(started);
    finish(scratch, outcome, failed)
}

/// How a benchmark of daemon processes ended: its scratch directory goes when nothing failed,
/// and is kept (with the daemons' logs) otherwise; `failed` says what the failures counted.
#[allow(dead_code)]
pub fn finish<N: Into<u64>>(
    scratch: &std::path::Path,
    outcome: anyhow::Result<N>,
    failed: &str,
) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(scratch.join("bin"));
    match outcome.map(Into::into) {
        Ok(0) => {
            let _ = std::fs::remove_dir_all(scratch);
            Ok(())
        }
        Ok(failures) => {
            println!("daemon logs kept in {}", scratch.display());
            anyhow::bail!("BENCH FAILURE: {failures} {failed} (see above)")
        }
        Err(e) => {
            println!("daemon logs kept in {}", scratch.display());
            Err(e)
        }
    }
}

/// `component` with a top-level custom section `name` holding `payload` appended: the same
/// recipe, another file and sha256.
#[allow(dead_code)]
pub fn with_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}
