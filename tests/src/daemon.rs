//! The `wazoo` CLI and a `wazoo serve` daemon as real processes, for the tests that drive them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tonic::transport::Channel;

use crate::{plugins, root, wazoo_bin, within, zk};

const LIMIT: Duration = Duration::from_secs(120);

/// The `wazoo` binary with WAZOO_SERVER=`server` in its environment and a ZooKeeper address
/// nothing listens on (and no plugins), so all it does goes through a daemon.
pub fn wazoo_at(server: &str) -> Command {
    let mut command = Command::new(wazoo_bin());
    command
        .env("WAZOO_SERVER", server)
        .env("WAZOO_ZOOKEEPER", "127.0.0.1:1")
        .env("WAZOO_PLUGINS", "/nonexistent")
        .env("WAZOO_CONNECT_TIMEOUT", "2s")
        .env_remove("WAZOO_LOG")
        .kill_on_drop(true);
    command
}

/// The local `wazoo` CLI on the shared server and the freshly built plugins.
pub fn cli() -> Command {
    let mut command = Command::new(wazoo_bin());
    command
        .env("WAZOO_ZOOKEEPER", zk().address())
        .env("WAZOO_PLUGINS", plugins())
        .env_remove("WAZOO_LOG")
        .env_remove("WAZOO_SERVER")
        .kill_on_drop(true);
    command
}

/// Runs `command` to its end: exit status, stdout, stderr.
pub async fn output(command: &mut Command) -> (i32, String, String) {
    let out = within(LIMIT, "wazoo finishes", command.output()).await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A running `wazoo serve` on the shared server, killed when dropped.
pub struct Daemon {
    _child: Child,
    /// The gRPC address.
    pub grpc: String,
    metrics: String,
}

impl Daemon {
    /// `wazoo --server ADDR` through this daemon, with no usable ZooKeeper or plugins of its own.
    pub fn wazoo(&self) -> Command {
        let mut command = wazoo_at(&self.grpc);
        command.arg("--server").arg(&self.grpc);
        command
    }

    /// Starts the daemon on `plugins` with the compile cache `cache`, on free ports; returns once
    /// it serves. Its fallback look at the directory is hourly, so the tests see swaps only
    /// through its change events.
    pub async fn start(plugins: &Path, cache: &Path) -> Daemon {
        Daemon::start_with(plugins, cache, &[]).await
    }

    /// As [`Daemon::start`], with more arguments to `wazoo serve` (e.g. `--tenants FILE`).
    pub async fn start_with(plugins: &Path, cache: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_on(&zk().address(), plugins, cache, extra).await
    }

    /// As [`Daemon::start_with`], on the ZooKeeper at `zookeeper` (its members' addresses,
    /// comma-separated).
    pub async fn start_on(zookeeper: &str, plugins: &Path, cache: &Path, extra: &[&str]) -> Daemon {
        Daemon::spawn(zookeeper, plugins, cache, extra, false).await
    }

    /// As [`Daemon::start_on`], its log (`WAZOO_LOG=wazoo=info`) piped: read it from
    /// [`Daemon::log`], or the daemon blocks once the pipe is full.
    pub async fn start_logged(zookeeper: &str, plugins: &Path, cache: &Path, extra: &[&str]) -> Daemon {
        Daemon::spawn(zookeeper, plugins, cache, extra, true).await
    }

    async fn spawn(zookeeper: &str, plugins: &Path, cache: &Path, extra: &[&str], logged: bool) -> Daemon {
        let mut command = Command::new(wazoo_bin());
        command
            .env("WAZOO_ZOOKEEPER", zookeeper)
            .env("WAZOO_PLUGINS", plugins)
            .env("WAZOO_CACHE", cache)
            .env_remove("WAZOO_LOG")
            .env_remove("WAZOO_SERVER")
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--watch-every", "1h"])
            .args(extra)
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if logged {
            command.env("WAZOO_LOG", "wazoo=info").stderr(Stdio::piped());
        }
        let mut child = command.spawn().expect("starting wazoo serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line =
            within(LIMIT, "wazoo serve is ready", lines.next_line()).await.unwrap().expect("a ready line");
        // "serving gRPC on ADDR, metrics on http://ADDR/metrics, console on http://ADDR/"
        let grpc = line.split_whitespace().nth(3).unwrap().trim_end_matches(',').to_string();
        let metrics = line.split("http://").nth(1).unwrap().split('/').next().unwrap().to_string();
        Daemon { _child: child, grpc, metrics }
    }

    /// The address of its metrics port (`/metrics`, `/healthz` and the web console), `HOST:PORT`.
    pub fn metrics_address(&self) -> &str {
        &self.metrics
    }

    /// The daemon's process id (for signals).
    pub fn pid(&self) -> u32 {
        self._child.id().expect("the daemon runs")
    }

    /// The log of a daemon started with [`Daemon::start_logged`] (once).
    pub fn log(&mut self) -> tokio::io::Lines<BufReader<tokio::process::ChildStderr>> {
        BufReader::new(self._child.stderr.take().expect("a logged daemon, its log taken once")).lines()
    }

    /// Waits for the daemon to exit.
    pub async fn exited(&mut self) -> std::process::ExitStatus {
        within(LIMIT, "the daemon exits", self._child.wait()).await.unwrap()
    }

    /// Waits up to `limit` for the daemon to exit: its status, or `None` if it still runs.
    pub async fn exited_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(limit, self._child.wait()).await.ok().map(Result::unwrap)
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.grpc)).unwrap().connect().await.unwrap()
    }

    /// The Prometheus text the daemon serves.
    pub async fn metrics(&self) -> String {
        let mut stream = tokio::net::TcpStream::connect(&self.metrics).await.unwrap();
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).await.unwrap();
        body
    }
}

/// The compile cache the tests' daemons share.
pub fn cache() -> PathBuf {
    root().join("target/component-cache")
}

/// The arguments that make a daemon a member of group `name` (of this test process), whose
/// secret is `a-group-secret-of-the-tests`.
pub fn member_of(name: &str) -> Vec<String> {
    let secret = std::env::temp_dir().join(format!("wazoo-group-secret-{}-{name}", std::process::id()));
    std::fs::write(&secret, "a-group-secret-of-the-tests\n").unwrap();
    let group = format!("g{}-{name}", std::process::id());
    vec!["--group".into(), group, "--group-secret-file".into(), secret.to_str().unwrap().to_string()]
}

/// The state of group `name` (`member_of(name)`) on the ZooKeeper at `zookeeper`, as its members
/// keep it: a client with the group's identity, and the group's root.
pub async fn group_state(zookeeper: &str, name: &str) -> (zookeeper_client::Client, String) {
    let group = format!("g{}-{name}", std::process::id());
    let identity = format!("{group}:a-group-secret-of-the-tests");
    let checker = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .with_auth("digest", identity.as_bytes())
        .connect(zookeeper)
        .await
        .unwrap();
    (checker, format!("/wazoo/groups/{group}"))
}

/// Two members of a group of their own (`member_of(name)`).
pub async fn group(name: &str) -> (Daemon, Daemon) {
    let args = member_of(name);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let a = Daemon::start_with(&plugins(), &cache(), &args).await;
    let b = Daemon::start_with(&plugins(), &cache(), &args).await;
    (a, b)
}

/// Sends `signal` (`-KILL`, `-STOP`, …) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}
