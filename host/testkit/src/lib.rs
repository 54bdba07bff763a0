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
/// What the TLS (Netty) server needs beside the jars the server jar's manifest lists.
const NETTY_JARS: &str = "/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar";

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
    /// Also serve TLS on a `secureClientPort` of its own (see [`ZkServer::secure_port`]).
    pub tls: Option<ServerTls>,
    /// `forceSync=yes`: the server fsyncs its transaction log before it answers a write, as
    /// deployments run it. Off by default (`forceSync=no`), for test speed.
    pub force_sync: bool,
}

/// TLS for a server's `secureClientPort` (Netty, PEM files, as ZooKeeper 3.8 reads them).
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The server's private key (PKCS#8 PEM) followed by its certificate chain (PEM).
    pub key_and_cert: PathBuf,
    /// CA certificates (PEM) a client's certificate is checked against.
    pub ca: PathBuf,
    /// `ssl.clientAuth`: `none`, `want` or `need` (clients must show a certificate).
    pub client_auth: &'static str,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            port: 0,
            data_dir: None,
            tick_ms: 500,
            heap: "256m".into(),
            ready_timeout: Duration::from_secs(60),
            tls: None,
            force_sync: false,
        }
    }
}

/// Ensemble wiring of one member: its id and the quorum/election ports it lists for every member
/// (its own real ones, and for its peers wherever it should reach them).
#[derive(Clone, Debug)]
struct Member {
    id: u32,
    peers: Vec<(u32, u16, u16)>,
    /// Lists its own line as `0.0.0.0`, see [`Ensemble::start_routed`].
    wildcard: bool,
}

/// One running ZooKeeper server process.
#[derive(Debug)]
pub struct ZkServer {
    pub port: u16,
    /// The TLS client port, when [`ServerOptions::tls`] asked for one.
    pub secure_port: Option<u16>,
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
             extendedTypesEnabled=true\nforceSync={sync}\nmaxClientCnxns=0\n",
            tick = options.tick_ms,
            sync = if options.force_sync { "yes" } else { "no" },
            dir = data_dir.display(),
            port = options.port,
        );
        let mut secure_port = None;
        if let Some(tls) = &options.tls {
            let port = free_port()?;
            secure_port = Some(port);
            cfg.push_str(&format!(
                "secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n\
                 serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                 ssl.keyStore.location={key}\nssl.keyStore.type=PEM\n\
                 ssl.trustStore.location={ca}\nssl.trustStore.type=PEM\n\
                 ssl.clientAuth={auth}\n",
                key = tls.key_and_cert.display(),
                ca = tls.ca.display(),
                auth = tls.client_auth,
            ));
        }
        if let Some(m) = &member {
            // The default, spelled out: with reconfig on, members would adopt the leader's
            // server list (NEWLEADER, election gossip) and lose their own routes.
            cfg.push_str("reconfigEnabled=false\n");
            for (id, quorum, election) in &m.peers {
                let host = if *id == m.id && m.wildcard { "0.0.0.0" } else { "127.0.0.1" };
                cfg.push_str(&format!("server.{id}={host}:{quorum}:{election}\n"));
            }
            std::fs::write(data_dir.join("myid"), format!("{}\n", m.id))?;
        }
        std::fs::write(data_dir.join("zoo.cfg"), cfg)?;
        Ok(ZkServer {
            port: options.port,
            secure_port,
            pid: None,
            data_dir,
            temporary,
            options,
            member,
            exited: None,
        })
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
            // Hard quotas (`countHardLimit`, `byteHardLimit`) are refused, not only logged.
            .arg("-Dzookeeper.enforceQuota=true")
            .arg("-cp")
            .arg(match self.options.tls {
                // Netty's codec is not on the class path the server jar's manifest names.
                Some(_) => format!("{ZOOKEEPER_JAR}:{LOG_BINDING_JAR}:{NETTY_JARS}"),
                None => format!("{ZOOKEEPER_JAR}:{LOG_BINDING_JAR}"),
            })
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

    /// The last warnings and errors of the server's log, headed by its ports and log path: what
    /// a failure to start explains itself with.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let notable: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("Exception"))
            .collect();
        let tail = &notable[notable.len().saturating_sub(12)..];
        format!(
            "member on client port {} ({}):\n  {}",
            self.port,
            self.log_path().display(),
            tail.join("\n  ")
        )
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

    /// Whether the process was started and has not exited; notices (and forgets) an exit.
    fn running(&mut self) -> bool {
        let exited = match &self.exited {
            Some(rx) => !matches!(rx.lock().unwrap().try_recv(), Err(mpsc::TryRecvError::Empty)),
            None => true,
        };
        if exited {
            self.pid = None;
            self.exited = None;
        }
        self.pid.is_some()
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

/// The ports of an ensemble that is not started yet, so that connections between its members
/// can be routed (through proxies, say) before it starts: see [`Ensemble::start_routed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnsemblePlan {
    /// Per member, in order: `(id, quorum port, election port, client port)`, all on 127.0.0.1.
    /// [`Ensemble::servers`] follows this order.
    pub members: Vec<(u32, u16, u16, u16)>,
}

impl EnsemblePlan {
    /// `(quorum port, election port)` where member `id` really listens for its peers.
    pub fn peer_ports(&self, id: u32) -> Option<(u16, u16)> {
        self.members.iter().find(|m| m.0 == id).map(|m| (m.1, m.2))
    }
}

/// A 3-member (or larger) ensemble on 127.0.0.1.
#[derive(Debug)]
pub struct Ensemble {
    pub servers: Vec<ZkServer>,
}

impl Ensemble {
    /// Starts `size` members (ids 1 to `size`), each reaching its peers directly, and waits for
    /// a quorum.
    pub fn start(size: usize, tick_ms: u32) -> anyhow::Result<Ensemble> {
        let plan = Ensemble::plan(size)?;
        let direct = plan.clone();
        Ensemble::start_routed(plan, tick_ms, move |_from, to| direct.peer_ports(to).unwrap_or((0, 0)))
    }

    /// Picks free ports for `size` members with ids 1 to `size`.
    pub fn plan(size: usize) -> anyhow::Result<EnsemblePlan> {
        if size == 0 || size > 255 {
            bail!("an ensemble needs 1 to 255 members, not {size}");
        }
        let mut members = Vec::with_capacity(size);
        for id in 1..=size as u32 {
            members.push((id, free_port()?, free_port()?, free_port()?));
        }
        Ok(EnsemblePlan { members })
    }

    /// Starts the members of `plan` and waits for a quorum. Member `from` reaches peer `to` at
    /// `route(from, to)`, `(quorum port, election port)` on 127.0.0.1, instead of the ports `to`
    /// listens on, so every connection between members (election and quorum alike) can go
    /// through a proxy that the caller controls, one per ordered pair.
    ///
    /// ZooKeeper's election handshake would otherwise bypass the routes: a member receiving an
    /// election connection from a smaller id drops it and connects back to the address that the
    /// smaller one announced, its own listening address. When some route differs from the real
    /// ports, each member therefore lists itself as `0.0.0.0`, which ZooKeeper does not announce,
    /// so the connection back follows the route too; those members listen on all interfaces.
    ///
    /// A proxy should retry its upstream connection for a few seconds rather than close the
    /// accepted one at once when the peer refuses: a follower that finds its new leader not
    /// listening yet retries a refused connection, but takes an accepted-then-closed one for a
    /// dead leader and starts another election, which costs `initLimit` ticks or more.
    pub fn start_routed(
        plan: EnsemblePlan,
        tick_ms: u32,
        route: impl Fn(u32, u32) -> (u16, u16),
    ) -> anyhow::Result<Ensemble> {
        check_plan(&plan)?;
        let mut wiring = Vec::with_capacity(plan.members.len());
        let mut routed = false;
        for &(id, quorum, election, _) in &plan.members {
            let mut peers = Vec::with_capacity(plan.members.len());
            for &(to, to_quorum, to_election, _) in &plan.members {
                if to == id {
                    peers.push((to, quorum, election));
                    continue;
                }
                let (q, e) = route(id, to);
                if q == 0 || e == 0 {
                    bail!("route from member {id} to member {to} has a zero port: ({q}, {e})");
                }
                routed |= (q, e) != (to_quorum, to_election);
                peers.push((to, q, e));
            }
            wiring.push(Member { id, peers, wildcard: false });
        }
        let mut servers = Vec::with_capacity(plan.members.len());
        for (mut member, &(_, _, _, port)) in wiring.into_iter().zip(&plan.members) {
            member.wildcard = routed;
            let options = ServerOptions { port, tick_ms, ..ServerOptions::default() };
            servers.push(ZkServer::prepare(options, Some(member))?);
        }
        for server in &mut servers {
            server.launch()?;
        }
        let ensemble = Ensemble { servers };
        ensemble.wait_quorum(Duration::from_secs(60))?;
        Ok(ensemble)
    }

    /// Kills every member (SIGKILL to all, then waits for each to be gone): the whole ensemble
    /// down at once. [`Ensemble::start_all`] brings it back.
    pub fn stop_all(&mut self) {
        for server in &self.servers {
            server.thaw();
            server.signal(libc::SIGKILL);
        }
        for server in &mut self.servers {
            server.kill();
        }
    }

    /// Starts again every member that is not running (killed, or exited by itself) with its
    /// data directory and configuration, then waits for a quorum (a member restarted next to a
    /// quorum that is still up may not serve yet when this returns).
    pub fn start_all(&mut self) -> anyhow::Result<()> {
        for server in &mut self.servers {
            if !server.running() {
                server.restart()?;
            }
        }
        self.wait_quorum(Duration::from_secs(60))?;
        Ok(())
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
                let logs: Vec<String> = self.servers.iter().map(ZkServer::log_tail).collect();
                return Err(anyhow!("no quorum after {timeout:?}: modes {modes:?}\n{}", logs.join("\n")));
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

/// A TCP port that is free right now, on every interface, and outside the kernel's ephemeral
/// range (`net.ipv4.ip_local_port_range`), so that nothing can take it between the pick and the
/// moment a server started afterwards binds it (a JVM takes seconds): neither a `bind` to port 0
/// (a proxy, a daemon on `:0`) nor an outgoing connection (a client reconnecting in a loop) is
/// given a port from outside that range. A port handed out by this process is not handed out
/// again. Falls back to a port the kernel picks when the range leaves too little room below it.
pub fn free_port() -> anyhow::Result<u16> {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, RandomState};
    const LOWEST: u16 = 10_000;
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let mut given = GIVEN.lock().unwrap();
    let given = given.get_or_insert_with(HashSet::new);
    if ephemeral_start > LOWEST + 1_000 {
        let span = u64::from(ephemeral_start - LOWEST);
        let random = RandomState::new();
        for attempt in 0u32..1_000 {
            let port = LOWEST + (random.hash_one(attempt) % span) as u16;
            if given.contains(&port) || TcpListener::bind(("0.0.0.0", port)).is_err() {
                continue;
            }
            given.insert(port);
            return Ok(port);
        }
    }
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    given.insert(port);
    Ok(port)
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

fn check_plan(plan: &EnsemblePlan) -> anyhow::Result<()> {
    if plan.members.is_empty() {
        bail!("an ensemble plan needs at least one member");
    }
    let mut ports = std::collections::HashSet::new();
    for (i, &(id, quorum, election, client)) in plan.members.iter().enumerate() {
        if id == 0 || id > 255 {
            bail!("member ids go from 1 to 255, not {id}");
        }
        if plan.members[..i].iter().any(|m| m.0 == id) {
            bail!("member id {id} appears twice in the plan");
        }
        for port in [quorum, election, client] {
            if port == 0 || !ports.insert(port) {
                bail!("member {id}: port {port} is zero or used twice in the plan");
            }
        }
    }
    Ok(())
}
