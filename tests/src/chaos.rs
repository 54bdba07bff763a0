//! The chaos suite's parts: sites (hosts whose every byte to ZooKeeper crosses a fault
//! [`Proxy`]), server-side session expiry, a fenced register, invariant checks and reports.
//!
//! A scenario ([`crate::scenarios`]) starts sites on a [`Lab`], injects faults, runs recipes
//! through them and records every check in a [`Run`]; its [`Report`] lists the faults injected,
//! the operations done, the checks passed and every violation.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use wazoo_runtime::fence::{Fence, Written};
use wazoo_runtime::zk::{Access, Zk};
use wazoo_runtime::{Host, RecipeError, SandboxLimits, ZkError};
use wazoo_testkit::Ensemble;
use zookeeper_client::{Client, SessionInfo};

use crate::proxy::Proxy;

/// A small, seeded generator (splitmix64): the same seed replays the same choices.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
}

/// Where scenarios run: the ZooKeeper members' client addresses, the session timeout the sites
/// ask for, and a checking client that reaches ZooKeeper directly (never through a proxy).
pub struct Lab {
    pub members: Vec<String>,
    pub session: Duration,
    checker: Mutex<Client>,
    root: String,
    next: AtomicU64,
}

impl Lab {
    pub async fn new(members: Vec<String>, session: Duration, root: &str) -> Lab {
        let checker = Mutex::new(connect_checker(&members).await);
        Lab { members, session, checker, root: root.to_string(), next: AtomicU64::new(0) }
    }

    /// The checking client, connected again if its session ended (the whole ensemble down
    /// for longer than its timeout ends it too).
    pub async fn checker(&self) -> Client {
        let current = self.checker.lock().unwrap().clone();
        if !current.state().is_terminated() {
            return current;
        }
        let fresh = connect_checker(&self.members).await;
        *self.checker.lock().unwrap() = fresh.clone();
        fresh
    }

    /// A path no other scenario uses.
    pub fn path(&self, name: &str) -> String {
        format!("{}/{name}-{}-{}", self.root, std::process::id(), self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// A host whose session reaches every member through its own proxy.
    pub async fn site(&self, name: &str) -> Site {
        self.site_on(name, &self.members.clone()).await
    }

    /// A host whose session reaches only `members` (each through its own proxy).
    pub async fn site_on(&self, name: &str, members: &[String]) -> Site {
        self.site_with(name, members, SandboxLimits::default()).await
    }

    /// A host on `members` whose guests run under `limits`.
    pub async fn site_with(&self, name: &str, members: &[String], limits: SandboxLimits) -> Site {
        let mut proxies = Vec::new();
        for member in members {
            proxies.push(Proxy::start(member).await);
        }
        let address = proxies.iter().map(Proxy::address).collect::<Vec<_>>().join(",");
        let mut config = crate::config(&address, self.session);
        config.limits = limits;
        let host = Host::start(config).await.expect("starting a chaos site");
        Site { name: name.to_string(), host, proxies }
    }

    /// Upper bound for a new holder after a holder's session is lost: the session timeout,
    /// plus `election` (ZooKeeper's own leader election, when it had one), plus one second.
    pub fn convergence(&self, election: Duration) -> Duration {
        self.session + election + Duration::from_secs(1)
    }

    /// Every ephemeral node under `path`: what a finished scenario must not leave behind once
    /// its handles are closed.
    pub async fn orphans(&self, path: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut stack = vec![path.to_string()];
        while let Some(dir) = stack.pop() {
            let children = match self.checker().await.list_children(&dir).await {
                Ok(children) => children,
                Err(_) => continue,
            };
            for child in children {
                let full = if dir == "/" { format!("/{child}") } else { format!("{dir}/{child}") };
                if let Ok(Some(stat)) = self.checker().await.check_stat(&full).await {
                    if stat.ephemeral_owner != 0 {
                        found.push(format!("{full} (ephemeral, session {:#x})", stat.ephemeral_owner));
                    }
                    if stat.num_children > 0 {
                        stack.push(full);
                    }
                }
            }
        }
        found.sort();
        found
    }
}

/// A wazoo host whose ZooKeeper traffic crosses fault proxies.
pub struct Site {
    pub name: String,
    pub host: Host,
    pub proxies: Vec<Proxy>,
}

impl Site {
    /// Stops every byte between this host and ZooKeeper (the host frozen, or partitioned).
    pub fn freeze(&self) {
        self.proxies.iter().for_each(Proxy::freeze);
    }

    pub fn thaw(&self) {
        self.proxies.iter().for_each(Proxy::thaw);
    }

    /// Closes this host's connections; it reconnects at once with the same session.
    pub fn cut(&self) {
        self.proxies.iter().for_each(Proxy::cut);
    }

    /// Expires this host's session on the server: with the host's own traffic frozen, a second
    /// client takes over the session by its id and password and closes it. The host learns of
    /// it when it reconnects, as after any real expiry.
    pub async fn expire(&self, lab: &Lab) {
        let live = self.host.live().await.expect("the site's session");
        self.expire_session(lab, live.client().session().clone()).await;
    }

    /// This host's current session, to expire later with [`Site::expire_session`] (while the
    /// host is cut off, it cannot be asked).
    pub async fn session(&self) -> SessionInfo {
        self.host.live().await.expect("the site's session").client().session().clone()
    }

    /// [`Site::expire`] for a session taken earlier.
    pub async fn expire_session(&self, lab: &Lab, session: SessionInfo) {
        let id = session.id().0;
        self.freeze();
        let twin = Client::connector()
            .with_session(session)
            .with_session_timeout(lab.session)
            .connect(&lab.members.join(","))
            .await;
        let twin = match twin {
            Ok(twin) => twin,
            // Expired already (the host was cut off longer than the timeout): done.
            Err(zookeeper_client::Error::SessionExpired) => {
                self.thaw();
                return;
            }
            Err(e) => panic!("taking over session {id:#x}: {e}"),
        };
        // A node of the session's own, to see it end: dropping the last handle on a client
        // sends CloseSession, and the server deletes the session's nodes when it ends it.
        let marker = format!("/wazoo-expire-{id:x}-{}", lab.next.fetch_add(1, Ordering::Relaxed));
        let options = zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
        twin.create(&marker, b"", &options).await.expect("marking the session");
        drop(twin);
        crate::wait_gone(&lab.checker().await, &marker).await;
        self.thaw();
    }

    /// Whether the host still serves: a fresh lock handle takes and gives back a fresh lock.
    pub async fn serves(&self, lab: &Lab) -> Result<(), String> {
        let path = lab.path("alive");
        let mut lock =
            self.host.lock("lock").await.map_err(|e| format!("{}: no handle: {e:#}", self.name))?;
        let outcome = async {
            lock.acquire(&path, Some(Duration::from_secs(10))).await?;
            lock.release().await
        }
        .await;
        lock.close().await;
        outcome.map_err(|e| format!("{}: a fresh lock failed: {e}", self.name))
    }
}

/// What one scenario did and found.
#[derive(Debug, Default)]
pub struct Run {
    faults: Mutex<Vec<String>>,
    notes: Mutex<Vec<String>>,
    ops: AtomicU64,
    checks: AtomicU64,
    violations: Mutex<Vec<String>>,
    figures: Mutex<Vec<(String, u64)>>,
    started: Option<Instant>,
    progress: Notify,
}

impl Run {
    pub fn start() -> Arc<Run> {
        Arc::new(Run { started: Some(Instant::now()), ..Run::default() })
    }

    fn at(&self) -> f64 {
        self.started.map(|s| s.elapsed().as_secs_f64()).unwrap_or(0.0)
    }

    /// Records a fault injected now.
    pub fn fault(&self, what: impl Into<String>) {
        let line = format!("{:6.2}s {}", self.at(), what.into());
        self.faults.lock().unwrap().push(line);
    }

    /// Records something seen (a convergence time, say) for the report.
    pub fn note(&self, what: impl Into<String>) {
        let line = format!("{:6.2}s {}", self.at(), what.into());
        self.notes.lock().unwrap().push(line);
    }

    /// Counts one recipe operation done (and wakes whoever waits for progress).
    pub fn op(&self) {
        self.ops.fetch_add(1, Ordering::SeqCst);
        self.progress.notify_waiters();
    }

    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    /// Resolves once `ops()` exceeds `after`, or gives up after `limit`: true if it did.
    pub async fn progress_after(&self, after: u64, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ops() > after {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.ops() > after;
            }
        }
    }

    /// One invariant check: passes, or records `why` as a violation.
    pub fn check(&self, ok: bool, why: impl FnOnce() -> String) -> bool {
        if ok {
            self.checks.fetch_add(1, Ordering::SeqCst);
        } else {
            let line = format!("{:6.2}s {}", self.at(), why());
            self.violations.lock().unwrap().push(line);
        }
        ok
    }

    pub fn violation(&self, why: impl Into<String>) {
        let why = why.into();
        self.check(false, || why);
    }

    /// Records a figure of the run (a count the soak run sums over its scenarios).
    pub fn figure(&self, name: &str, value: u64) {
        self.figures.lock().unwrap().push((name.to_string(), value));
    }

    pub fn report(&self, scenario: &str) -> Report {
        Report {
            scenario: scenario.to_string(),
            faults: self.faults.lock().unwrap().clone(),
            notes: self.notes.lock().unwrap().clone(),
            ops: self.ops(),
            checks: self.checks.load(Ordering::SeqCst),
            violations: self.violations.lock().unwrap().clone(),
            figures: self.figures.lock().unwrap().clone(),
            took: self.started.map(|s| s.elapsed()).unwrap_or_default(),
        }
    }
}

/// The outcome of one scenario.
#[derive(Clone, Debug)]
pub struct Report {
    pub scenario: String,
    pub faults: Vec<String>,
    pub notes: Vec<String>,
    pub ops: u64,
    pub checks: u64,
    pub violations: Vec<String>,
    /// Counts the scenario gives as its figures (name, value), in order.
    pub figures: Vec<(String, u64)>,
    pub took: Duration,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.checks > 0
    }

    /// Fails the calling test with the whole report unless every check passed.
    pub fn assert_clean(&self) {
        println!("{self}");
        assert!(self.checks > 0, "{}: no invariant was checked", self.scenario);
        assert!(self.violations.is_empty(), "{}: invariants violated:\n{self}", self.scenario);
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {}: {} faults, {} operations, {} checks passed, {} violations, {:.1}s",
            if self.passed() { "PASS" } else { "FAIL" },
            self.scenario,
            self.faults.len(),
            self.ops,
            self.checks,
            self.violations.len(),
            self.took.as_secs_f64()
        )?;
        for fault in &self.faults {
            writeln!(f, "    fault {fault}")?;
        }
        for note in &self.notes {
            writeln!(f, "    seen  {note}")?;
        }
        if !self.figures.is_empty() {
            let figures: Vec<String> = self.figures.iter().map(|(name, n)| format!("{name} {n}")).collect();
            writeln!(f, "    figures: {}", figures.join(", "))?;
        }
        for v in &self.violations {
            writeln!(f, "    VIOLATION {v}")?;
        }
        Ok(())
    }
}

/// How a write to the [`Register`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    Accepted,
    /// The writer's lock node is gone: it is no longer the holder, and its write was refused.
    Fenced,
    /// ZooKeeper could not be reached to decide.
    Unavailable,
}

/// A fenced register: the resource a lock protects, written through [`wazoo_runtime::fence`]. It takes a
/// write only from a holder whose lock node still exists with its token (one multi: `check` the
/// node, then a versioned write of the register) and only with a token at or above the last
/// accepted one. Its data is the writer's token, a newline, and the writer's name.
///
/// The check that matters: a write refused for its token while the writer's node still exists
/// means a newer holder wrote while this one still held the lock, i.e. two holders at once.
pub struct Register {
    client: Client,
    path: String,
    accepted: Mutex<Vec<i64>>,
}

impl Register {
    /// A register at `path`, created by its first write.
    pub async fn new(lab: &Lab, path: &str) -> Register {
        Register { client: lab.checker().await, path: path.to_string(), accepted: Mutex::new(Vec::new()) }
    }

    /// `holder`, which holds the lock node `node` with fencing `token`, writes.
    pub async fn write(&self, run: &Run, holder: &str, node: &str, token: i64) -> Write {
        let fence = Fence { zk: Zk::from_client(self.client.clone()), access: Access::Open, max_bytes: 1024 };
        match fence.write(node, token, &self.path, holder.as_bytes()).await {
            Ok(Written::Accepted { .. }) => {
                let mut accepted = self.accepted.lock().unwrap();
                let previous = accepted.last().copied().unwrap_or(0);
                run.check(token >= previous, || format!("register accepted {token} after {previous}"));
                accepted.push(token);
                Write::Accepted
            }
            Ok(Written::Gone | Written::OtherToken(_)) => Write::Fenced,
            Ok(Written::Superseded { last }) => match self.client.check_stat(node).await {
                Ok(Some(_)) => {
                    run.violation(format!(
                        "{holder} holds {node} (token {token}) but token {last} was accepted meanwhile: two holders"
                    ));
                    Write::Fenced
                }
                Ok(None) => Write::Fenced,
                Err(_) => Write::Unavailable,
            },
            Err(_) => Write::Unavailable,
        }
    }

    /// Tokens accepted so far, in order.
    pub fn accepted(&self) -> Vec<i64> {
        self.accepted.lock().unwrap().clone()
    }
}

async fn connect_checker(members: &[String]) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(&members.join(","))
        .await
        .expect("connecting the chaos checker")
}

/// Whether a recipe error is what a fault may cause (the call can be tried again on a fresh
/// handle) rather than a bug.
pub fn is_fault(e: &RecipeError) -> bool {
    matches!(
        e,
        RecipeError::Zk(ZkError::ConnectionLoss | ZkError::SessionExpired | ZkError::Timeout)
            | RecipeError::Retired
    )
}

/// A 3-member ensemble whose members reach each other only through proxies (one per ordered
/// pair and port), so a test can isolate any member; plus SIGKILL, SIGSTOP and restarts.
///
/// The proxies run on a runtime of their own, so the ensemble outlives any one test's runtime.
pub struct Cluster {
    ensemble: Mutex<Ensemble>,
    /// `(from, to)` member indexes, and the proxies for that direction's quorum and election
    /// connections.
    links: Vec<(usize, usize, Proxy, Proxy)>,
    pub members: Vec<String>,
    _runtime: tokio::runtime::Runtime,
}

impl Cluster {
    /// Starts the ensemble (blocking: call it from a plain thread or before any runtime).
    pub fn start(tick_ms: u32) -> anyhow::Result<Cluster> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let plan = Ensemble::plan(3)?;
        let ids: Vec<u32> = plan.members.iter().map(|m| m.0).collect();
        let mut links = Vec::new();
        for (from, _) in ids.iter().enumerate() {
            for (to, &to_id) in ids.iter().enumerate() {
                if from == to {
                    continue;
                }
                let (quorum, election) = plan.peer_ports(to_id).unwrap();
                let (q, e) = runtime.block_on(async {
                    (
                        Proxy::raw(&format!("127.0.0.1:{quorum}")).await,
                        Proxy::raw(&format!("127.0.0.1:{election}")).await,
                    )
                });
                links.push((from, to, q, e));
            }
        }
        let route = |from_id: u32, to_id: u32| {
            let from = ids.iter().position(|i| *i == from_id).unwrap();
            let to = ids.iter().position(|i| *i == to_id).unwrap();
            let (_, _, q, e) = links.iter().find(|l| l.0 == from && l.1 == to).unwrap();
            (q.port(), e.port())
        };
        let ensemble = Ensemble::start_routed(plan, tick_ms, route)?;
        let members = ensemble.servers.iter().map(|s| s.address()).collect();
        Ok(Cluster { ensemble: Mutex::new(ensemble), links, members, _runtime: runtime })
    }

    /// Runs `f` on the ensemble on a blocking thread (server control waits on processes).
    async fn with<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Ensemble) -> T + Send + 'static,
    ) -> T {
        let me = self.clone();
        tokio::task::spawn_blocking(move || f(&mut me.ensemble.lock().unwrap())).await.unwrap()
    }

    /// Index of the current leader.
    pub async fn leader(self: &Arc<Self>) -> Option<usize> {
        self.with(|e| e.leader()).await
    }

    /// Waits until a quorum serves again; returns how long that took.
    pub async fn wait_quorum(self: &Arc<Self>, limit: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        self.with(move |e| e.wait_quorum(limit)).await.map_err(|e| format!("{e:#}"))?;
        Ok(started.elapsed())
    }

    /// Waits until a member other than `old` leads with a majority serving, never asking `old`
    /// (it may be stopped, or isolated and not yet aware of it); returns how long that took.
    pub async fn wait_new_leader(self: &Arc<Self>, old: usize, limit: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        self.with(move |e| loop {
            let modes: Vec<Option<String>> =
                e.servers.iter().enumerate().map(|(i, s)| if i == old { None } else { s.mode() }).collect();
            let serving = modes.iter().filter(|m| m.is_some()).count();
            if modes.iter().any(|m| m.as_deref() == Some("leader")) && serving * 2 > e.servers.len() {
                return Ok(started.elapsed());
            }
            if started.elapsed() > limit {
                return Err(format!("no new leader after {limit:?}: {modes:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        })
        .await
    }

    pub async fn kill(self: &Arc<Self>, member: usize) {
        self.with(move |e| e.servers[member].kill()).await
    }

    pub async fn restart(self: &Arc<Self>, member: usize) -> Result<(), String> {
        self.with(move |e| e.servers[member].restart()).await.map_err(|e| format!("{e:#}"))
    }

    /// SIGSTOP / SIGCONT.
    pub async fn freeze(self: &Arc<Self>, member: usize) {
        self.with(move |e| e.servers[member].freeze()).await
    }

    pub async fn thaw(self: &Arc<Self>, member: usize) {
        self.with(move |e| e.servers[member].thaw()).await
    }

    /// Stops every member (the whole ensemble down).
    pub async fn stop_all(self: &Arc<Self>) {
        self.with(|e| e.stop_all()).await
    }

    pub async fn start_all(self: &Arc<Self>) -> Result<(), String> {
        self.with(|e| e.start_all()).await.map_err(|e| format!("{e:#}"))
    }

    /// Cuts `member` off from its peers (every byte held both ways, as in a partition).
    pub fn isolate(&self, member: usize) {
        for (from, to, q, e) in &self.links {
            if *from == member || *to == member {
                q.freeze();
                e.freeze();
            }
        }
    }

    /// Ends every partition.
    pub fn heal(&self) {
        for (_, _, q, e) in &self.links {
            q.thaw();
            e.thaw();
        }
    }

    /// Restarts every member that is down and thaws every frozen one: a clean slate for the
    /// next scenario.
    pub async fn restore(self: &Arc<Self>) -> Result<(), String> {
        self.heal();
        self.with(|e| {
            for server in &mut e.servers {
                server.thaw();
            }
        })
        .await;
        self.start_all().await?;
        self.wait_quorum(Duration::from_secs(60)).await.map(|_| ())
    }
}
