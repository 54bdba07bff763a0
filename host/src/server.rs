//! Local ZooKeeper servers for development, tests and benchmarks: Debian's `zookeeper` package
//! run directly with Java (no systemd), on 127.0.0.1, each with its own data directory.
//!
//! A server is stopped by its own PID when its [`ZkServer`] is dropped, and dies with the
//! process that started it (`PR_SET_PDEATHSIG` from a thread that lives as long as the server).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};

/// Where Debian's package puts the server jar.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
const LOG_BINDING_JAR: &str = "/usr/share/java/slf4j-simple.jar";

/// How to run one server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Client port; 0 picks a free one.
    pub port: u16,
    /// Data directory; `None` makes a temporary one, removed when the server is dropped.
    pub data_dir: Option<PathBuf>,
    /// ZooKeeper's tick: sessions may last between 2 and 20 ticks.
    pub tick_ms: u32,
    /// Java heap limit.
    pub heap: String,
    /// How long to wait for the server to serve.
    pub ready_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            port: 0,
            data_dir: None,
            tick_ms: 500,
            heap: "256m".into(),
            ready_timeout: Duration::from_secs(60),
        }
    }
}

/// Ensemble wiring of one member: its id and every member's quorum/election ports.
#[derive(Clone, Debug)]
struct Member {
    id: u32,
    peers: Vec<(u32, u16, u16)>,
}

/// One running ZooKeeper server process.
#[derive(Debug)]
pub struct ZkServer {
    pub port: u16,
    pid: Option<u32>,
    data_dir: PathBuf,
    temporary: bool,
    options: ServerOptions,
    member: Option<Member>,
    exited: Option<Mutex<mpsc::Receiver<()>>>,
}

impl ZkServer {
    /// Starts a standalone server and waits until it serves.
    pub fn start(options: ServerOptions) -> anyhow::Result<ZkServer> {
        let mut server = ZkServer::prepare(options, None)?;
        server.launch()?;
        server.wait_ready()?;
        Ok(server)
    }

    fn prepare(mut options: ServerOptions, member: Option<Member>) -> anyhow::Result<ZkServer> {
        check_installed()?;
        if options.port == 0 {
            options.port = free_port()?;
        }
        let (data_dir, temporary) = match &options.data_dir {
            Some(dir) => (dir.clone(), false),
            None => (temp_dir("zk")?, true),
        };
        std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
        let mut cfg = format!(
            "tickTime={tick}\ninitLimit=20\nsyncLimit=10\ndataDir={dir}\nclientPort={port}\n\
             clientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\n\
             extendedTypesEnabled=true\nforceSync=no\nmaxClientCnxns=0\n",
            tick = options.tick_ms,
            dir = data_dir.display(),
            port = options.port,
        );
        if let Some(m) = &member {
            for (id, quorum, election) in &m.peers {
                cfg.push_str(&format!("server.{id}=127.0.0.1:{quorum}:{election}\n"));
            }
            std::fs::write(data_dir.join("myid"), format!("{}\n", m.id))?;
        }
        std::fs::write(data_dir.join("zoo.cfg"), cfg)?;
        Ok(ZkServer { port: options.port, pid: None, data_dir, temporary, options, member, exited: None })
    }

    /// Starts the Java process from a thread that lives as long as it does, so that the server
    /// dies with this process (the parent-death signal follows the spawning thread).
    fn launch(&mut self) -> anyhow::Result<()> {
        let main_class = if self.member.is_some() {
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        } else {
            "org.apache.zookeeper.server.ZooKeeperServerMain"
        };
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.data_dir.join("server.log"))?;
        let mut command = Command::new("java");
        command
            .arg(format!("-Xmx{}", self.options.heap))
            .arg("-Dzookeeper.admin.enableServer=false")
            .arg("-cp")
            .arg(format!("{ZOOKEEPER_JAR}:{LOG_BINDING_JAR}"))
            .arg(main_class)
            .arg(self.data_dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let (pid_tx, pid_rx) = mpsc::channel();
        let (exit_tx, exit_rx) = mpsc::channel();
        std::thread::Builder::new().name(format!("zk-{}", self.port)).spawn(move || {
            match command.spawn() {
                Ok(mut child) => {
                    let _ = pid_tx.send(Ok(child.id()));
                    let _ = child.wait();
                }
                Err(e) => {
                    let _ = pid_tx.send(Err(e));
                }
            }
            let _ = exit_tx.send(());
        })?;
        let pid = pid_rx.recv()?.context("starting java (is a JRE installed?)")?;
        self.pid = Some(pid);
        self.exited = Some(Mutex::new(exit_rx));
        Ok(())
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.options.ready_timeout;
        loop {
            if self.mode().is_some() {
                return Ok(());
            }
            if let Some(rx) = &self.exited {
                if rx.lock().unwrap().try_recv().is_ok() {
                    self.pid = None;
                    bail!("ZooKeeper exited during start; see {}", self.log_path().display());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "ZooKeeper on port {} not serving after {:?}; see {}",
                    self.port,
                    self.options.ready_timeout,
                    self.log_path().display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `host:port` for clients.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn log_path(&self) -> PathBuf {
        self.data_dir.join("server.log")
    }

    /// `standalone`, `leader` or `follower` while serving; `None` otherwise.
    pub fn mode(&self) -> Option<String> {
        let reply = four_letter(self.port, "srvr").ok()?;
        reply.lines().find_map(|l| l.strip_prefix("Mode: ").map(|m| m.trim().to_string()))
    }

    /// Kills the process (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(rx) = self.exited.take() {
            let _ = rx.lock().unwrap().recv_timeout(Duration::from_secs(10));
        }
        self.pid = None;
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the process.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Starts a killed server again on the same port and data.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.launch()?;
        if self.member.is_none() {
            self.wait_ready()?;
        }
        Ok(())
    }

    fn signal(&self, signal: i32) {
        if let Some(pid) = self.pid {
            // SAFETY: plain kill(2) on the PID of the process we started.
            unsafe {
                libc::kill(pid as i32, signal);
            }
        }
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.thaw();
        self.kill();
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
    }
}

/// A 3-member (or larger) ensemble on 127.0.0.1.
#[derive(Debug)]
pub struct Ensemble {
    pub servers: Vec<ZkServer>,
}

impl Ensemble {
    pub fn start(size: usize, tick_ms: u32) -> anyhow::Result<Ensemble> {
        let mut peers = Vec::new();
        for id in 1..=size as u32 {
            peers.push((id, free_port()?, free_port()?));
        }
        let mut servers = Vec::new();
        for id in 1..=size as u32 {
            let options = ServerOptions { tick_ms, ..ServerOptions::default() };
            servers.push(ZkServer::prepare(options, Some(Member { id, peers: peers.clone() }))?);
        }
        for server in &mut servers {
            server.launch()?;
        }
        let ensemble = Ensemble { servers };
        ensemble.wait_quorum(Duration::from_secs(60))?;
        Ok(ensemble)
    }

    /// Client connect string naming every member.
    pub fn address(&self) -> String {
        self.servers.iter().map(|s| s.address()).collect::<Vec<_>>().join(",")
    }

    /// Index of the current leader, if there is one.
    pub fn leader(&self) -> Option<usize> {
        self.servers.iter().position(|s| s.mode().as_deref() == Some("leader"))
    }

    /// Waits until a leader serves and a majority of members serve.
    pub fn wait_quorum(&self, timeout: Duration) -> anyhow::Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            let modes: Vec<Option<String>> = self.servers.iter().map(|s| s.mode()).collect();
            let serving = modes.iter().filter(|m| m.is_some()).count();
            if let Some(leader) = modes.iter().position(|m| m.as_deref() == Some("leader")) {
                if serving * 2 > self.servers.len() {
                    return Ok(leader);
                }
            }
            if Instant::now() > deadline {
                return Err(anyhow!("no quorum after {timeout:?}: modes {modes:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Sends a four-letter command and returns the reply.
pub fn four_letter(port: u16, command: &str) -> std::io::Result<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(command.as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

/// A TCP port on 127.0.0.1 that is free right now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn temp_dir(kind: &str) -> anyhow::Result<PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "wazoo-{kind}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn check_installed() -> anyhow::Result<()> {
    if !Path::new(ZOOKEEPER_JAR).exists() {
        bail!("{ZOOKEEPER_JAR} not found: install Debian's zookeeper package (make setup does)");
    }
    Ok(())
}
