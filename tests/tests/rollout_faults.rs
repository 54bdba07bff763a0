//! The recipe registry's exhaustive single-fault matrix (`wazoo_runtime::rollout`), on a real
//! ZooKeeper 3.8 and the tapping proxy of `wazoo_tests::proxy`, as `wazoo_tests::matrix` runs
//! the recipes' own: a clean run records the requests an operation makes; then, for every
//! request that succeeded on the server, the operation runs again (from a fresh registry) with
//! that one request faulted: its reply lost and the connection cut, the session expired right
//! after it, or the process killed right after it. Each faulted run checks that the fault fired
//! on the request it meant (position, type and path as in the clean run) and that the request
//! had succeeded on the server; a run whose fault landed elsewhere is run again, and one that
//! never lands is a failure. Then it checks the registry's promise:
//!
//! 1. **publish** of `lock` v2 over a current v1: right after the fault the pointer names v1,
//!    or v2 with a sealed blob; after the operator's re-run (once, if the faulted run did not
//!    return `Ok`) the pointer names v2, its blob is sealed and reads back with its digest, the
//!    history holds exactly the events the calls made (see [`Change::history`]), and a fresh
//!    follower host serves v2.
//! 2. **follow**: a follower host (through the proxy) switching from v1 to v2 never serves
//!    anything but a whole v1 or v2, ends up serving v2 (after its session came back, if it
//!    expired) with its report node, owned by its session, saying so; a follower host killed
//!    mid-fetch and started again (same directory, same id, as a restarted daemon is) serves v2
//!    and reports it.
//! 3. **rollback** to v1 (by digest) from a current v2: as publish.
//! 4. **a switch of wire protocol** (`lock-kazoo` published as `lock` with `new_protocol`)
//!    while two follower hosts serve `lock` v1, one of them (A, through the proxy) faulted at
//!    each request of its fetch and drain, in both orders a switch can take (A waits for B, whose
//!    handle of v1 still runs; B drained first and waits for A): the other (B) never serves the
//!    new version while A could still give out handles of the old one (A's gate open with v1
//!    current), and both end up serving the new version (A, or A started again once killed).
//!
//! Decided here for publish and rollback (see [`Change::history`]): one change, whether or not
//! the operator had to run it again, records exactly one event in the history.
//!
//! Killed means: for publish and rollback, the call dropped (the operator then runs the
//! command again); for a follower, its tasks stopped and its connection left frozen while its
//! session lives on (a process killed and restarted at once: the new one, same directory and
//! id, comes up before the old session ends, which is then ended); for A in a switch, the same
//! with the old session ended first.
//!
//! Run counts (clean runs record them): publish 7 requests that succeed on the server, rollback
//! 6, follow 4, switch 13 (A waits for B) and 9 (B waits for A): 39 requests × 3 kinds = 117
//! faulted runs, below the 150 at which kinds would be sampled, so none are. A run takes well
//! under a second when the registry keeps its promise; one that waits for a convergence that
//! never comes takes its bound (`SETTLE`, plus `B_GIVES_UP` in a switch).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wazoo_runtime::rollout::{self, Event, Follower, Manifest, Pointer, Publish, Published, Report, Store};
use wazoo_runtime::zk::Access;
use wazoo_runtime::Host;
use wazoo_tests::chaos::{Lab, Site};
use wazoo_tests::components::with_section;
use wazoo_tests::matrix::{Kind, KINDS};
use wazoo_tests::proxy::{op, Action, Request};
use wazoo_tests::{config, plugins, wait_gone, zk};
use zookeeper_client::{Client, SessionInfo};

/// The session timeout of every host here (the shared server ticks every 200 ms).
const SESSION: Duration = Duration::from_secs(4);
/// The recipe under test.
const NAME: &str = "lock";
/// How long one publish or rollback call may take before it counts as hung.
const BOUND: Duration = Duration::from_secs(20);
/// How long followers may take to settle on a version once nothing stops them (a recovery
/// from an expired session takes the follower's one-second pause, a new session and a fetch).
const SETTLE: Duration = Duration::from_secs(6);
/// How long a restarted host may take to own its report again once the killed one's session
/// ended.
const REPORT_AGAIN: Duration = Duration::from_secs(2);
/// In a switch where A waits for B: how long B's handle of the old version runs if A never
/// gets to wait for it.
const B_GIVES_UP: Duration = Duration::from_secs(2);
/// Runs of one injection before a fault that keeps missing its request is a failure.
const ATTEMPTS: u32 = 3;
/// The follower id of the faulted host of promise 2 (a daemon's is its HOSTNAME:PORT, the same
/// after a restart).
const FOLLOWER: &str = "follower";

// ---------------------------------------------------------------------------------------------
// Components

/// One version of `lock`: its bytes, digest and declared protocol (as the host reads them).
#[derive(Clone)]
struct Component {
    label: &'static str,
    bytes: Arc<Vec<u8>>,
    sha: String,
    protocol: Option<String>,
}

impl Component {
    fn short(&self) -> String {
        format!("{} ({})", self.label, &self.sha[..12])
    }
}

// ---------------------------------------------------------------------------------------------
// Checks and the figure

/// The invariants one run checked and those it found violated (shared with monitor tasks).
#[derive(Default)]
struct Checks {
    count: AtomicU64,
    violations: Mutex<Vec<String>>,
}

impl Checks {
    fn new() -> Arc<Checks> {
        Arc::new(Checks::default())
    }

    fn check(&self, ok: bool, why: impl FnOnce() -> String) -> bool {
        self.count.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.violations.lock().unwrap().push(why());
        }
        ok
    }

    fn violation(&self, why: impl Into<String>) {
        let why = why.into();
        self.check(false, || why);
    }

    fn take(&self) -> (u64, Vec<String>) {
        (self.count.load(Ordering::Relaxed), std::mem::take(&mut *self.violations.lock().unwrap()))
    }
}

/// What one run did: the requests the tap saw, the one the fault fired on, the run's registry
/// root (paths are compared with it taken out) and its checks.
struct RunOut {
    log: Vec<Request>,
    fired: Option<Request>,
    root: String,
    checks: u64,
    violations: Vec<String>,
    /// How the faulted operation ended (for WAZOO_MATRIX_VERBOSE).
    note: String,
}

/// One promise's line of the figure.
#[derive(Default)]
struct Row {
    promise: String,
    requests: usize,
    succeeded: usize,
    injected: usize,
    reruns: usize,
    checks: u64,
    violations: Vec<String>,
    took: Duration,
}

impl Row {
    fn print(&self) {
        println!(
            "{:<40} {} requests, {} succeeded, {} faults injected, {} reruns, {} checks, {} violations, {:.1}s",
            self.promise,
            self.requests,
            self.succeeded,
            self.injected,
            self.reruns,
            self.checks,
            self.violations.len(),
            self.took.as_secs_f64()
        );
        for v in &self.violations {
            println!("VIOLATION {}: {v}", self.promise);
        }
    }

    fn assert_clean(&self) {
        self.print();
        assert!(self.injected > 0, "{}: no fault was injected", self.promise);
        assert!(
            self.violations.is_empty(),
            "{}: {} violations (listed above)",
            self.promise,
            self.violations.len()
        );
    }
}

/// A path with the run's registry root taken out.
fn shape(path: &str, root: &str) -> String {
    match path.strip_prefix(root) {
        Some(rest) => format!("$ROOT{rest}"),
        None => path.to_string(),
    }
}

/// Why a faulted run does not count, if it does not: its fault did not fire on the request it
/// meant, or that request failed on the server.
fn misfire(target: &Request, clean_root: &str, run: &RunOut) -> Option<String> {
    match &run.fired {
        None => Some("the fault never fired: the operation made fewer requests".into()),
        Some(f) if f.n != target.n || f.kind != target.kind => {
            Some(format!("fired on request {} ({}), not {}", f.n, op::name(f.kind), target.n))
        }
        Some(f) if shape(&f.path, &run.root) != shape(&target.path, clean_root) => {
            Some(format!("fired on {}, the clean run's request was on {}", f.path, target.path))
        }
        Some(f) if f.err != Some(0) => {
            Some(format!("the faulted request failed on the server (error {:?})", f.err))
        }
        Some(_) => None,
    }
}

fn action(kind: Kind) -> Action {
    if kind == Kind::LostReply {
        Action::Lose
    } else {
        Action::Hold
    }
}

/// Whether new handles of `name` on `host` are let through now (a switch of protocol closes
/// them while the old version drains; a new session, until the follower looked again).
fn gate_open(host: &Host, name: &str) -> bool {
    // A handle is made on the current session: none while the session is being rebuilt, and on
    // a new one only once the follower has looked again on it.
    host.session_now().is_some_and(|session| host.registry().admits(name, session))
}

/// The sha256 of the version `host` gives new handles of `name` now, if its gate lets them
/// through.
fn serving(host: &Host, name: &str) -> Option<String> {
    let current = host.registry().current(name).map(|v| v.sha256.clone());
    current.filter(|_| gate_open(host, name))
}

/// A host's current session id (`None` while it has none).
async fn session_of(host: &Host) -> Option<i64> {
    match tokio::time::timeout(Duration::from_millis(500), host.live()).await {
        Ok(Ok(live)) => Some(live.zk().session_id()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The bench

/// What the registry calls change: publish (v1 current, v2 published) or rollback (v2 current,
/// rolled back to v1 by digest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Publish,
    Rollback,
}

impl Change {
    fn label(self) -> &'static str {
        match self {
            Change::Publish => "publish",
            Change::Rollback => "rollback",
        }
    }
}

/// The promise a run checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Promise {
    Change(Change),
    Follow,
    Swap(Order),
}

/// Who waits for whom in a switch of protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// B still runs a handle of the old version when A drains: A waits for B (whose handle
    /// ends once A's watch on B's report is set, as in the clean run).
    AWaitsForB,
    /// B drained before A hears of the switch: B waits for A.
    BWaitsForA,
}

struct Bench {
    lab: Lab,
    /// Publishes the setup versions and reads the registry; reaches ZooKeeper directly and
    /// follows nothing.
    admin: Host,
    v1: Component,
    v2: Component,
    kazoo: Component,
    /// Directories of components (publishers' and followers'), private as the host wants them.
    files: tempfile::TempDir,
}

impl Bench {
    async fn new() -> Bench {
        let plugins = plugins();
        let lab = Lab::new(vec![zk().address()], SESSION, "/rollout-lab").await;
        let admin =
            Host::start(config(&zk().address(), Duration::from_secs(10))).await.expect("the admin host");
        let files = tempfile::tempdir().expect("a private directory");
        let v1_bytes = std::fs::read(plugins.join("lock.wasm")).expect("lock.wasm");
        let v2_bytes =
            with_section(&v1_bytes, "wazoo-rollout-test", b"lock v2: the same code, another digest");
        let kazoo_bytes = std::fs::read(plugins.join("lock-kazoo.wasm")).expect("lock-kazoo.wasm");
        let v2_file = files.path().join("lock-v2.wasm");
        std::fs::write(&v2_file, &v2_bytes).unwrap();
        let mut versions = Vec::new();
        for (label, bytes, file) in [
            ("v1", v1_bytes, plugins.join("lock.wasm")),
            ("v2", v2_bytes, v2_file),
            ("kazoo", kazoo_bytes, plugins.join("lock-kazoo.wasm")),
        ] {
            let loaded = admin.load_file(&file).await.unwrap_or_else(|e| panic!("loading {label}: {e:#}"));
            versions.push(Component {
                label,
                bytes: Arc::new(bytes),
                sha: loaded.sha256.clone(),
                protocol: loaded.protocol.clone(),
            });
        }
        let kazoo = versions.pop().unwrap();
        let v2 = versions.pop().unwrap();
        let v1 = versions.pop().unwrap();
        assert_ne!(v1.sha, v2.sha, "v2 has a digest of its own");
        assert_eq!(v1.protocol, v2.protocol, "v2 speaks v1's protocol");
        assert!(
            v1.protocol.is_some() && kazoo.protocol.is_some() && kazoo.protocol != v1.protocol,
            "lock-kazoo speaks another protocol"
        );
        Bench { lab, admin, v1, v2, kazoo, files }
    }

    /// A number no other run of this process (the tests run side by side) uses.
    fn n(&self) -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    /// A registry root no other run uses.
    fn root(&self, label: &str) -> String {
        format!("/rollout/{label}-{}-{}", std::process::id(), self.n())
    }

    /// A fresh directory for a host's components (made, private, by the first write).
    fn dir(&self, label: &str) -> PathBuf {
        self.files.path().join(format!("{label}-{}", self.n()))
    }

    async fn admin_store(&self, root: &str) -> Store {
        Store::new(self.admin.live().await.expect("the admin's session").zk(), root, Access::Open)
    }

    async fn checker(&self) -> Client {
        self.lab.checker().await
    }

    /// Publishes `c` as `lock` from the admin host (setup, not faulted).
    async fn admin_publish(&self, root: &str, c: &Component, by: &str, new_protocol: bool) -> Published {
        let store = self.admin_store(root).await;
        let dir = self.dir("admin");
        rollout::publish(&self.admin, &store, &dir, None, publish_of(c, by, new_protocol))
            .await
            .unwrap_or_else(|e| panic!("publishing {} as setup: {e:#}", c.short()))
    }

    fn version(&self, sha: &str) -> Option<&Component> {
        [&self.v1, &self.v2, &self.kazoo].into_iter().find(|c| c.sha == sha)
    }

    fn name_of(&self, sha: &str) -> String {
        self.version(sha)
            .map_or_else(|| format!("unknown version {}", &sha[..12.min(sha.len())]), Component::short)
    }

    /// The pointer of `lock` under `root`, read directly.
    async fn pointer(&self, root: &str) -> Option<Pointer> {
        let path = format!("{root}/recipes/{NAME}");
        let (data, _) = self.checker().await.get_data(&path).await.ok()?;
        Some(serde_json::from_slice(&data).unwrap_or_else(|e| panic!("{path} holds no pointer: {e}")))
    }

    /// Host `id`'s report on `lock` under `root` and the session owning its node.
    async fn report(&self, root: &str, id: &str) -> Option<(Report, i64)> {
        let path = format!("{root}/recipes/{NAME}/serving/{id}");
        let checker = self.checker().await;
        let (data, stat) = checker.get_data(&path).await.ok()?;
        let report = serde_json::from_slice(&data)
            .unwrap_or_else(|e| Report { state: format!("unreadable: {e}"), ..Report::default() });
        Some((report, stat.ephemeral_owner))
    }

    /// Whether host `id` reports serving `sha`, from a node its session `session` owns.
    async fn reports(&self, root: &str, id: &str, sha: &str, session: Option<i64>) -> bool {
        match self.report(root, id).await {
            Some((r, owner)) => r.state == "serving" && r.sha256 == sha && session.is_none_or(|s| s == owner),
            None => false,
        }
    }

    /// Checks that blob `sha` under `root` is sealed (its node holds its manifest, every chunk
    /// is there) and reads back whole: the bytes of the version of that digest.
    async fn check_sealed(&self, checks: &Checks, root: &str, sha: &str, when: &str) {
        let blob = format!("{root}/blobs/{sha}");
        let checker = self.checker().await;
        let sealed = match checker.get_data(&blob).await {
            Ok((data, _)) if data.is_empty() => Err("its blob is not sealed (empty)".to_string()),
            Ok((data, _)) => match serde_json::from_slice::<Manifest>(&data) {
                Ok(m) if m.sha256 != sha => Err(format!("its blob's manifest names {}", m.sha256)),
                Ok(m) => {
                    let chunks = checker.list_children(&blob).await.map(|c| c.len()).unwrap_or(0);
                    if chunks == m.chunks as usize && m.chunks > 0 {
                        Ok(())
                    } else {
                        Err(format!("its manifest counts {} chunks, {chunks} are there", m.chunks))
                    }
                }
                Err(e) => Err(format!("its blob holds no manifest: {e}")),
            },
            Err(e) => Err(format!("its blob is not there: {e}")),
        };
        if let Err(why) = sealed {
            checks.violation(format!("{when}: the registry names {} but {why}", self.name_of(sha)));
            return;
        }
        match self.admin_store(root).await.fetch(sha).await {
            Ok((_, bytes)) => checks.check(self.version(sha).is_some_and(|c| *c.bytes == bytes), || {
                format!("{when}: {} read back as other bytes", self.name_of(sha))
            }),
            Err(e) => checks.check(false, || format!("{when}: fetching {}: {e:#}", self.name_of(sha))),
        };
    }

    /// Ends `session` on the server as a dead process's would end: a twin takes it over and
    /// closes it (whatever proxy the process used is left as it is).
    async fn end_session(&self, session: SessionInfo) {
        let twin = Client::connector()
            .with_session(session)
            .with_session_timeout(SESSION)
            .connect(&zk().address())
            .await;
        let twin = match twin {
            Ok(twin) => twin,
            Err(zookeeper_client::Error::SessionExpired) => return,
            Err(e) => panic!("taking over a session to end it: {e}"),
        };
        let marker = format!("/rollout-ended-{}-{}", std::process::id(), self.n());
        let options = zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
        twin.create(&marker, b"", &options).await.expect("marking the session");
        drop(twin);
        wait_gone(&self.checker().await, &marker).await;
    }

    /// A fresh host reaching ZooKeeper directly, following the registry at `root` as `id`.
    async fn fresh_follower(&self, root: &str, id: &str, dir: PathBuf) -> (Host, Arc<Follower>) {
        let host = Host::start(config(&zk().address(), SESSION)).await.expect("a fresh host");
        let follower = Follower::new(host.clone(), root, id, dir, None);
        follower.start().await.expect("following the registry");
        (host, follower)
    }

    /// A fresh follower host (direct) serves `c` at once, and reports it.
    async fn check_fresh_host_serves(&self, checks: &Checks, root: &str, c: &Component) {
        let (host, follower) = self.fresh_follower(root, "fresh", self.dir("fresh")).await;
        let serves = serving(&host, NAME);
        checks.check(serves.as_deref() == Some(c.sha.as_str()), || {
            format!(
                "a fresh follower host serves {}, not {}",
                serves.as_deref().map_or("nothing".into(), |s| self.name_of(s)),
                c.short()
            )
        });
        let session = session_of(&host).await;
        let reported = self.reports(root, "fresh", &c.sha, session).await;
        let report = self.report(root, "fresh").await;
        checks.check(reported, || {
            format!("a fresh follower host's report does not say {}: {report:?}", c.short())
        });
        follower.stop();
    }

    /// Runs `call` with `fault` armed on `site`'s proxy: the reply to the target request lost,
    /// or held while the session is expired, or held while the call is dropped (the process
    /// killed). The call's outcome, the requests seen and the one the fault fired on.
    async fn tapped<T>(
        &self,
        site: &Site,
        fault: Option<(&Request, Kind)>,
        call: impl Future<Output = anyhow::Result<T>>,
    ) -> Tapped<T> {
        let proxy = &site.proxies[0];
        let session = site.session().await;
        proxy.tap(fault.map(|(r, kind)| (r.n, action(kind))));
        let call = tokio::time::timeout(BOUND, call);
        tokio::pin!(call);
        let mut held = false;
        let outcome = loop {
            tokio::select! {
                result = &mut call => break match result {
                    Ok(result) => Outcome::Returned(result),
                    Err(_) => Outcome::Hung,
                },
                _ = proxy.fault_fired(), if !held && fault.is_some_and(|(_, k)| k != Kind::LostReply) => {
                    held = true;
                    match fault.map(|(_, k)| k) {
                        Some(Kind::Crash) => break Outcome::Killed,
                        _ => site.expire_session(&self.lab, session.clone()).await,
                    }
                }
            }
        };
        // A killed call is gone; whatever the proxy held is lost.
        proxy.thaw();
        let fired = proxy.fired();
        let log = proxy.untap();
        Tapped { outcome, log, fired, session: session.id().0 }
    }

    /// Runs `promise` clean, then once per request that succeeded on the server and kind of
    /// fault.
    async fn matrix(&self, promise: Promise, label: &str, kinds: &[Kind]) -> Row {
        let started = Instant::now();
        let mut row = Row { promise: label.to_string(), ..Row::default() };
        let clean = self.once(promise, None).await;
        row.checks += clean.checks;
        row.violations.extend(clean.violations.iter().map(|v| format!("clean run: {v}")));
        row.requests = clean.log.len();
        if std::env::var_os("WAZOO_MATRIX_VERBOSE").is_some() {
            for r in &clean.log {
                println!(
                    "  {label} clean: {} {} {} watch={} err={:?}",
                    r.n,
                    op::name(r.kind),
                    shape(&r.path, &clean.root),
                    r.watch,
                    r.err
                );
            }
        }
        let targets: Vec<&Request> = clean.log.iter().filter(|r| r.err == Some(0)).collect();
        row.succeeded = targets.len();
        for target in targets {
            for &kind in kinds {
                let at = format!(
                    "{} at request {} ({} {})",
                    kind.name(),
                    target.n,
                    op::name(target.kind),
                    shape(&target.path, &clean.root)
                );
                for attempt in 1..=ATTEMPTS {
                    let began = Instant::now();
                    let run = self.once(promise, Some((target, kind))).await;
                    let missed = misfire(target, &clean.root, &run);
                    if std::env::var_os("WAZOO_MATRIX_VERBOSE").is_some() {
                        println!(
                            "  {label} {at}: {:.2}s [{}] {missed:?} {:?}",
                            began.elapsed().as_secs_f64(),
                            run.note,
                            run.violations
                        );
                    }
                    row.checks += run.checks + 1;
                    row.violations.extend(run.violations.into_iter().map(|v| format!("{at}: {v}")));
                    match missed {
                        None => {
                            row.injected += 1;
                            break;
                        }
                        Some(why) if attempt == ATTEMPTS => row
                            .violations
                            .push(format!("{at}: the fault did not land in {ATTEMPTS} runs: {why}")),
                        Some(_) => row.reruns += 1,
                    }
                }
            }
        }
        row.took = started.elapsed();
        row
    }

    async fn once(&self, promise: Promise, fault: Option<(&Request, Kind)>) -> RunOut {
        match promise {
            Promise::Change(change) => self.change_run(change, fault).await,
            Promise::Follow => self.follow_run(fault).await,
            Promise::Swap(order) => self.swap_run(order, fault).await,
        }
    }
}

fn publish_of(c: &Component, by: &str, new_protocol: bool) -> Publish {
    Publish {
        name: NAME.to_string(),
        component: c.bytes.to_vec(),
        by: by.to_string(),
        signatures: Vec::new(),
        canary: None,
        new_protocol,
        quota: None,
        reserved: Vec::new(),
    }
}

/// How a faulted call ended.
enum Outcome<T> {
    Returned(anyhow::Result<T>),
    /// The process was killed in the middle of it (the call dropped).
    Killed,
    Hung,
}

struct Tapped<T> {
    outcome: Outcome<T>,
    log: Vec<Request>,
    fired: Option<Request>,
    /// The session the call started on.
    session: i64,
}

// ---------------------------------------------------------------------------------------------
// Promises 1 and 3: publish and rollback

impl Change {
    /// The version current before the change, and the one it makes current.
    fn versions(self, b: &Bench) -> (&Component, &Component) {
        match self {
            Change::Publish => (&b.v1, &b.v2),
            Change::Rollback => (&b.v2, &b.v1),
        }
    }

    /// The change, as the command runs it, on `host`'s session `store`.
    async fn call(
        self,
        b: &Bench,
        host: &Host,
        store: &Store,
        dir: &Path,
        by: &str,
    ) -> anyhow::Result<Published> {
        match self {
            Change::Publish => rollout::publish(host, store, dir, None, publish_of(&b.v2, by, false)).await,
            // By digest: the form an operator can re-run safely (`rollback NAME` alone means
            // "the version before the current one", which a re-run after a change that did
            // apply would take back again).
            Change::Rollback => rollout::rollback(store, NAME, Some(&b.v1.sha[..16]), false, by).await,
        }
    }

    /// The events the history must hold, given what the calls did: how many by the faulted
    /// call, how many by the operator's re-run.
    ///
    /// Decided here: one publish or rollback, however many times the operator runs it, records
    /// exactly one event. A call records at most one (a call whose reply was lost finds its own
    /// event rather than making a second), exactly one if it changed the pointer; a re-run after
    /// a call that did change it records none (`rollout::publish` returns the event that made
    /// the version current, `rollout::rollback` by digest refuses: "current already"). So the
    /// history names the new version exactly once after every run.
    fn history(self, applied: bool, retried_ok: bool) -> (usize, usize) {
        (usize::from(applied), usize::from(retried_ok && !applied))
    }
}

impl Bench {
    async fn change_run(&self, change: Change, fault: Option<(&Request, Kind)>) -> RunOut {
        let checks = Checks::new();
        let n = self.n();
        let root = self.root(change.label());
        let (from, to) = change.versions(self);
        // The registry as the faulted call finds it.
        self.admin_publish(&root, &self.v1, "setup", false).await;
        let setup_events = if change == Change::Rollback {
            self.admin_publish(&root, &self.v2, "setup", false).await;
            2
        } else {
            1
        };
        // The publishing process: a host of its own, through the proxy.
        let site = self.lab.site(change.label()).await;
        let dir = self.dir("publisher");
        let store =
            Store::new(site.host.live().await.expect("the publisher's session").zk(), &root, Access::Open);
        let by = format!("faulted-{n}");
        let tapped = self.tapped(&site, fault, change.call(self, &site.host, &store, &dir, &by)).await;

        // Right after the fault, before any re-run: the pointer names what was current, or
        // the new version with its blob sealed.
        let after = self.pointer(&root).await.and_then(|p| p.current).map(|c| c.sha256);
        let applied = after.as_deref() == Some(to.sha.as_str());
        match after.as_deref() {
            Some(sha) if sha == from.sha || sha == to.sha => {
                self.check_sealed(&checks, &root, sha, "right after the fault").await
            }
            other => checks.violation(format!(
                "right after the fault the pointer names {}, neither {} nor {}",
                other.map_or("nothing".into(), |s| self.name_of(s)),
                from.short(),
                to.short()
            )),
        }
        let mut returned_id = None;
        let outcome = match &tapped.outcome {
            Outcome::Returned(Ok(done)) => {
                checks.check(applied, || {
                    format!("the call returned Ok but the pointer still names {}", from.short())
                });
                checks.check(done.event.sha256 == to.sha, || {
                    format!("the call's event names {}", self.name_of(&done.event.sha256))
                });
                returned_id = Some(done.event.id.clone());
                "returned".to_string()
            }
            Outcome::Returned(Err(e)) => {
                // A lost reply alone is found out: the call must not fail on it.
                checks.check(fault.is_none_or(|(_, k)| k != Kind::LostReply), || {
                    format!("a lost reply made the call fail: {e:#}")
                });
                format!("failed: {e:#}")
            }
            Outcome::Killed => "killed".to_string(),
            Outcome::Hung => {
                checks.violation(format!("the call hung past {BOUND:?}"));
                "hung".to_string()
            }
        };
        checks.check(fault.is_some() || returned_id.is_some(), || {
            format!("the clean call did not return Ok: {outcome}")
        });

        // The operator runs the command again unless it said it was done.
        let mut retried_ok = false;
        if returned_id.is_none() {
            let live = self.live_after(&site.host, tapped.session, fault.map(|(_, k)| k)).await;
            let store = Store::new(live.zk(), &root, Access::Open);
            let again = tokio::time::timeout(
                BOUND,
                change.call(self, &site.host, &store, &dir, &format!("retry-{n}")),
            )
            .await;
            match (change, again) {
                (_, Err(_)) => checks.violation(format!("the re-run hung past {BOUND:?}")),
                (Change::Publish, Ok(result)) => {
                    retried_ok = result.is_ok();
                    match result {
                        // Run again after it did apply: done already, by the faulted call.
                        Ok(done) if applied => checks.check(done.event.by == by && done.event.sha256 == to.sha, || {
                            format!(
                                "a re-run of a publish that had applied returned the event {} {} by {}, not the faulted call's",
                                done.event.action,
                                self.name_of(&done.event.sha256),
                                done.event.by
                            )
                        }),
                        Ok(_) => true,
                        Err(e) => checks.check(false, || format!("the re-run of publish failed: {e:#}")),
                    };
                }
                (Change::Rollback, Ok(result)) => {
                    retried_ok = result.is_ok();
                    if applied {
                        checks.check(
                            result
                                .as_ref()
                                .err()
                                .is_some_and(|e| format!("{e:#}").contains("current already")),
                            || {
                                format!(
                                    "a re-run of a rollback that had applied: {:?}",
                                    result.as_ref().map(|p| &p.event.sha256)
                                )
                            },
                        );
                    } else {
                        checks.check(retried_ok, || {
                            format!("the re-run of rollback failed: {:#}", result.err().unwrap())
                        });
                    }
                }
            }
        }

        // Afterwards: the new version current, sealed, whole; the history exactly what the
        // calls did; a fresh follower serves it.
        let pointer = self.pointer(&root).await;
        let current = pointer.as_ref().and_then(|p| p.current.clone());
        checks.check(current.as_ref().is_some_and(|c| c.sha256 == to.sha), || {
            format!(
                "afterwards the pointer names {:?}, not {}",
                current.as_ref().map(|c| self.name_of(&c.sha256)),
                to.short()
            )
        });
        if let Some(c) = &current {
            self.check_sealed(&checks, &root, &c.sha256, "afterwards").await;
            checks
                .check(pointer.as_ref().is_some_and(|p| p.canary.is_none() && !p.switched_protocol), || {
                    format!("afterwards the pointer has a canary or a protocol switch: {pointer:?}")
                });
        }
        match self.admin_store(&root).await.history_of(NAME).await {
            Ok(events) => {
                self.check_history(
                    &checks,
                    &root,
                    change,
                    &events,
                    setup_events,
                    &by,
                    &format!("retry-{n}"),
                    applied,
                    retried_ok,
                    returned_id.as_deref(),
                    current.as_ref().map(|c| (c.sha256.clone(), c.publisher.clone())),
                )
                .await
            }
            Err(e) => checks.violation(format!("reading the history: {e:#}")),
        }
        self.check_fresh_host_serves(&checks, &root, to).await;
        drop(site);
        let (count, violations) = checks.take();
        let violations = violations.into_iter().map(|v| format!("[{outcome}] {v}")).collect();
        let note = format!("{outcome}; applied {applied}; re-run ok {retried_ok}");
        RunOut { log: tapped.log, fired: tapped.fired, root, checks: count, violations, note }
    }

    /// The publisher's session to re-run on: after an expiry, the new one.
    async fn live_after(&self, host: &Host, old: i64, kind: Option<Kind>) -> Arc<wazoo_runtime::Live> {
        let deadline = Instant::now() + SETTLE;
        loop {
            let live = host.live().await.expect("the publisher's session");
            if kind != Some(Kind::Expiry) || live.zk().session_id() != old || Instant::now() > deadline {
                return live;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn check_history(
        &self,
        checks: &Checks,
        root: &str,
        change: Change,
        events: &[Event],
        setup: usize,
        faulted_by: &str,
        retry_by: &str,
        applied: bool,
        retried_ok: bool,
        returned_id: Option<&str>,
        current: Option<(String, String)>,
    ) {
        let (_, to) = change.versions(self);
        let action = change.label();
        let by = |who: &str| events.iter().filter(|e| e.by == who).collect::<Vec<_>>();
        let (faulted, retried) = (by(faulted_by), by(retry_by));
        let (want_faulted, want_retried) = change.history(applied, retried_ok);
        let list = || {
            events
                .iter()
                .map(|e| format!("{} {} by {} ({})", e.action, self.name_of(&e.sha256), e.by, &e.id[..8]))
                .collect::<Vec<_>>()
        };
        checks.check(faulted.len() == want_faulted, || {
            format!(
                "the faulted call (it {} the pointer) made {} events, not {want_faulted}: {:?}",
                if applied { "changed" } else { "left" },
                faulted.len(),
                list()
            )
        });
        checks.check(retried.len() == want_retried, || {
            format!("the re-run made {} events, not {want_retried}: {:?}", retried.len(), list())
        });
        checks.check(
            by("setup").len() == setup && events.len() == setup + faulted.len() + retried.len(),
            || format!("the history holds events no call made: {:?}", list()),
        );
        for e in faulted.iter().chain(&retried) {
            checks.check(e.action == action && e.sha256 == to.sha, || {
                format!(
                    "an event of the call is {} {}, not {action} {}",
                    e.action,
                    self.name_of(&e.sha256),
                    to.short()
                )
            });
        }
        if let Some(id) = returned_id {
            checks.check(faulted.iter().filter(|e| e.id == id).count() == 1, || {
                format!("the event the call returned ({id}) is not in the history once: {:?}", list())
            });
        }
        // The history is the pointer's past: its last event is what the pointer says now.
        let last = events.last();
        checks.check(
            last.is_some_and(|e| {
                current.as_ref().is_some_and(|(sha, publisher)| e.sha256 == *sha && e.by == *publisher)
            }),
            || {
                format!(
                    "the last event {:?} is not the pointer's current {current:?}",
                    last.map(|e| (self.name_of(&e.sha256), &e.by))
                )
            },
        );
        // Every version the history ever named is sealed.
        let mut named: Vec<&str> = events.iter().map(|e| e.sha256.as_str()).collect();
        named.sort();
        named.dedup();
        for sha in named {
            self.check_sealed(checks, root, sha, "a version the history names").await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Promise 2: a follower switching from v1 to v2

impl Bench {
    /// Watches `host` serve: anything but a whole v1 or v2 (or nothing at all) is a violation.
    fn watch_served(
        &self,
        checks: &Arc<Checks>,
        host: &Host,
        stop: &Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<()> {
        let (checks, host, stop) = (checks.clone(), host.clone(), stop.clone());
        let allowed = [self.v1.clone(), self.v2.clone()];
        tokio::spawn(async move {
            let mut seen = false;
            let mut whole: Option<PathBuf> = None;
            while !stop.load(Ordering::Relaxed) {
                let current = host.registry().current(NAME);
                let ok = current.as_ref().is_some_and(|v| {
                    if whole.as_deref() == Some(v.path.as_path()) {
                        return true;
                    }
                    // The file it was loaded from holds the whole version (read once per file).
                    let ok = std::fs::read(&v.path)
                        .is_ok_and(|b| allowed.iter().any(|c| c.sha == v.sha256 && *c.bytes == b));
                    if ok {
                        whole = Some(v.path.clone());
                    }
                    ok
                });
                if !ok && !seen {
                    seen = true;
                    checks.violation(format!(
                        "the follower served {:?}",
                        current.map(|v| (v.sha256.clone(), v.path.clone()))
                    ));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    }

    /// Every component file a follower kept is whole: `<dir>/<sha's first 12>/lock.wasm` holds
    /// the bytes of the version of that digest.
    fn check_files(&self, checks: &Checks, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let prefix = entry.file_name().to_string_lossy().into_owned();
            let file = entry.path().join(format!("{NAME}.wasm"));
            let Ok(bytes) = std::fs::read(&file) else { continue };
            let whole = [&self.v1, &self.v2, &self.kazoo]
                .iter()
                .any(|c| c.sha.starts_with(&prefix) && *c.bytes == bytes);
            checks.check(whole, || {
                format!("{} is not the whole component its name says ({} bytes)", file.display(), bytes.len())
            });
        }
    }

    async fn follow_run(&self, fault: Option<(&Request, Kind)>) -> RunOut {
        let checks = Checks::new();
        let root = self.root("follow");
        self.admin_publish(&root, &self.v1, "setup", false).await;
        let site = self.lab.site("follower").await;
        let dir = self.dir("follower");
        let follower = Follower::new(site.host.clone(), &root, FOLLOWER, dir.clone(), None);
        follower.start().await.expect("following the registry");
        checks.check(serving(&site.host, NAME).as_deref() == Some(self.v1.sha.as_str()), || {
            "setup: the follower does not serve v1".into()
        });
        // Its watch on the list of recipes is set on a task of its own: not a request of the
        // switch.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = self.watch_served(&checks, &site.host, &stop);

        let proxy = &site.proxies[0];
        let session = site.session().await;
        proxy.tap(fault.map(|(r, kind)| (r.n, action(kind))));
        self.admin_publish(&root, &self.v2, "v2", false).await;
        let deadline = Instant::now() + SETTLE;
        let mut held = false;
        let mut killed = false;
        loop {
            tokio::select! {
                _ = proxy.fault_fired(), if !held && fault.is_some_and(|(_, k)| k != Kind::LostReply) => {
                    held = true;
                    if fault.is_some_and(|(_, k)| k == Kind::Crash) {
                        // The process dies: its tasks end, its connection stays frozen, its
                        // session lives on until it times out.
                        follower.stop();
                        killed = true;
                        break;
                    }
                    site.expire_session(&self.lab, session.clone()).await;
                }
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
            let sid = session_of(&site.host).await;
            if serving(&site.host, NAME).as_deref() == Some(self.v2.sha.as_str())
                && self.reports(&root, FOLLOWER, &self.v2.sha, sid).await
            {
                break;
            }
            if Instant::now() > deadline {
                let report = self.report(&root, FOLLOWER).await;
                checks.violation(format!(
                    "{SETTLE:?} after v2 was published the follower serves {} and reports {:?} (its session {:?})",
                    serving(&site.host, NAME).map_or("nothing".into(), |s| self.name_of(&s)),
                    report.map(|(r, owner)| (r.state, self.name_of(&r.sha256), r.reason, owner)),
                    sid
                ));
                break;
            }
        }
        let fired = proxy.fired();
        let log = proxy.untap();
        stop.store(true, Ordering::Relaxed);
        let _ = watcher.await;

        if killed {
            // Started again at once, with the same directory and id, while the dead one's
            // session still lives.
            let (host, again) = self.fresh_follower(&root, FOLLOWER, dir.clone()).await;
            let serves = serving(&host, NAME);
            checks.check(serves.as_deref() == Some(self.v2.sha.as_str()), || {
                format!(
                    "the follower started again serves {}",
                    serves.as_deref().map_or("nothing".into(), |s| self.name_of(s))
                )
            });
            // The dead process's session ends (its timeout, made short here): the report must
            // then still be there, the new process's own.
            self.end_session(session.clone()).await;
            let sid = session_of(&host).await;
            let deadline = Instant::now() + REPORT_AGAIN;
            while !self.reports(&root, FOLLOWER, &self.v2.sha, sid).await && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let report = self.report(&root, FOLLOWER).await;
            checks.check(self.reports(&root, FOLLOWER, &self.v2.sha, sid).await, || {
                format!(
                    "once the killed process's session ended, the restarted follower (session {sid:?}) has no report of its own saying v2: {:?}",
                    report.map(|(r, owner)| (r.state, self.name_of(&r.sha256), owner))
                )
            });
            again.stop();
            drop(host);
        }
        self.check_files(&checks, &dir);
        follower.stop();
        proxy.thaw();
        drop(site);
        let (count, violations) = checks.take();
        RunOut { log, fired, root, checks: count, violations, note: String::new() }
    }
}

// ---------------------------------------------------------------------------------------------
// Promise 4: a switch of wire protocol, one follower's session expiring mid-swap

/// Host A as the protocol watch sees it: the faulted host (with the session it started the
/// switch on) or the one started in its place once it was killed; and whether the test expired
/// A's session.
#[derive(Clone)]
struct Side {
    host: Host,
    session: Option<Arc<wazoo_runtime::Live>>,
}

type Slot = Arc<Mutex<Option<Side>>>;

impl Bench {
    /// Watches A and B: B must never serve the new protocol while A could give out handles of
    /// the old, nor the other way round. A host serves a protocol when its gate is open and the
    /// version current for new handles speaks it. Once the test expired A's session on the
    /// server, A can give out working handles again only when it knows (a handle on the dead
    /// session fails at its first request): from then on, its open gate counts.
    ///
    /// Each side is read in an order that makes a pair of readings saying both held mean both
    /// held at once: the side that would serve the new protocol (whose state only goes from the
    /// old to the new) its current version before its gate, the other whether it knows its
    /// session ended, then its gate, then its current version.
    fn watch_protocols(
        &self,
        checks: &Arc<Checks>,
        a: &Slot,
        b: &Host,
        expired: &Arc<AtomicBool>,
        stop: &Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<()> {
        let (checks, a, b, expired, stop) =
            (checks.clone(), a.clone(), b.clone(), expired.clone(), stop.clone());
        let (old, new) = (self.v1.protocol.clone(), self.kazoo.protocol.clone());
        let protocol = |h: &Host| h.registry().current(NAME).map(|v| v.protocol.clone());
        let serves_new =
            move |h: &Host, new: &Option<String>| protocol(h).as_ref() == Some(new) && gate_open(h, NAME);
        let could_serve_old = move |h: &Host, old: &Option<String>, knows: bool| {
            knows && gate_open(h, NAME) && protocol(h).as_ref() == Some(old)
        };
        tokio::spawn(async move {
            let started = Instant::now();
            let mut said = false;
            while !stop.load(Ordering::Relaxed) && !said {
                let side = a.lock().unwrap().clone();
                if let Some(side) = side {
                    let b_new = serves_new(&b, &new);
                    let knows = !expired.load(Ordering::SeqCst)
                        || side.session.as_ref().is_none_or(|live| live.ended().is_some());
                    if b_new && could_serve_old(&side.host, &old, knows) {
                        said = true;
                        checks.violation(format!(
                            "{:.3}s: B serves the new protocol {new:?} while A could still give out handles of the old {old:?}",
                            started.elapsed().as_secs_f64()
                        ));
                    }
                    let a_new = serves_new(&side.host, &new);
                    if a_new && could_serve_old(&b, &old, true) {
                        said = true;
                        checks.violation(format!(
                            "{:.3}s: A serves the new protocol {new:?} while B could still give out handles of the old {old:?}",
                            started.elapsed().as_secs_f64()
                        ));
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    }

    async fn swap_run(&self, order: Order, fault: Option<(&Request, Kind)>) -> RunOut {
        let checks = Checks::new();
        let root = self.root("swap");
        let kazoo = &self.kazoo;
        self.admin_publish(&root, &self.v1, "setup", false).await;
        let site = self.lab.site("swap-a").await;
        let (b, fb) = self.fresh_follower(&root, "b", self.dir("b")).await;
        let a_dir = self.dir("a");
        let fa = Follower::new(site.host.clone(), &root, "a", a_dir.clone(), None);
        fa.start().await.expect("A follows the registry");
        for (id, host) in [("A", &site.host), ("B", &b)] {
            checks.check(serving(host, NAME).as_deref() == Some(self.v1.sha.as_str()), || {
                format!("setup: {id} does not serve v1")
            });
        }
        // A waits for B: B runs a handle of v1, so that it drains after A.
        let mut b_handle = match order {
            Order::AWaitsForB => Some(b.lock(NAME).await.expect("a handle of v1 on B")),
            Order::BWaitsForA => None,
        };

        // Published while A cannot hear of it, until B is where the order wants it (draining,
        // or drained and waiting for A): A's requests then come in the same order every run.
        let proxy = &site.proxies[0];
        let session = site.session().await;
        proxy.freeze();
        self.admin_publish(&root, kazoo, "kazoo", true).await;
        let want = match order {
            Order::AWaitsForB => "draining",
            Order::BWaitsForA => "drained",
        };
        let draining = Instant::now() + Duration::from_secs(5);
        while !self.report(&root, "b").await.is_some_and(|(r, _)| r.state == want) {
            if Instant::now() > draining {
                checks.violation(format!("setup: B never reported {want}"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let a_live = site.host.live().await.expect("A's session");
        let slot: Slot = Arc::new(Mutex::new(Some(Side { host: site.host.clone(), session: Some(a_live) })));
        let expired = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = self.watch_protocols(&checks, &slot, &b, &expired, &stop);
        proxy.tap(fault.map(|(r, kind)| (r.n, action(kind))));
        proxy.thaw();

        // B's handle ends once A waits for B (the clean run's order), or after a while if A
        // never gets there.
        let b_report = format!("{root}/recipes/{NAME}/serving/b");
        let waits_for_b = |r: &Request| r.kind == op::EXISTS && r.watch && r.path == b_report;
        let thawed = Instant::now();
        let mut deadline = thawed + SETTLE + B_GIVES_UP;
        let mut held = false;
        let mut restarted: Option<(Host, Arc<Follower>)> = None;
        loop {
            tokio::select! {
                _ = proxy.fault_fired(), if !held && fault.is_some_and(|(_, k)| k != Kind::LostReply) => {
                    held = true;
                    if fault.is_some_and(|(_, k)| k == Kind::Crash) {
                        // A dies mid-swap (its session ended with it, its connection frozen),
                        // and is started again, same directory and id.
                        fa.stop();
                        *slot.lock().unwrap() = None;
                        self.end_session(session.clone()).await;
                        // Its first look waits in the drain for B: started on a task of its own.
                        let host = Host::start(config(&zk().address(), SESSION)).await.expect("A started again");
                        let again = Follower::new(host.clone(), &root, "a", a_dir.clone(), None);
                        let starting = again.clone();
                        tokio::spawn(async move { starting.start().await });
                        *slot.lock().unwrap() = Some(Side { host: host.clone(), session: None });
                        restarted = Some((host, again));
                    } else {
                        expired.store(true, Ordering::SeqCst);
                        site.expire_session(&self.lab, session.clone()).await;
                    }
                }
                _ = proxy.answered(waits_for_b), if b_handle.is_some() => {
                    if let Some(h) = b_handle.take() {
                        h.close().await;
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
            // A started again waits for B directly (not through the proxy): B's handle ends once
            // it reported drained.
            if b_handle.is_some()
                && restarted.is_some()
                && self.report(&root, "a").await.is_some_and(|(r, _)| r.state == "drained")
            {
                if let Some(h) = b_handle.take() {
                    h.close().await;
                }
            }
            if b_handle.is_some() && thawed.elapsed() > B_GIVES_UP {
                if let Some(h) = b_handle.take() {
                    h.close().await;
                }
                deadline = Instant::now() + SETTLE;
            }
            let a = slot.lock().unwrap().clone().expect("A or its restart").host;
            let (sa, sb) = (session_of(&a).await, session_of(&b).await);
            let done = serving(&a, NAME).as_deref() == Some(kazoo.sha.as_str())
                && serving(&b, NAME).as_deref() == Some(kazoo.sha.as_str())
                && self.reports(&root, "a", &kazoo.sha, sa).await
                && self.reports(&root, "b", &kazoo.sha, sb).await;
            if done {
                break;
            }
            if Instant::now() > deadline {
                let describe = |h: &Host| {
                    let current = h.registry().current(NAME).map(|v| self.name_of(&v.sha256));
                    format!(
                        "{} (gate {})",
                        current.unwrap_or_else(|| "nothing".into()),
                        if gate_open(h, NAME) { "open" } else { "closed" }
                    )
                };
                let (ra, rb) = (self.report(&root, "a").await, self.report(&root, "b").await);
                let show = |r: Option<(Report, i64)>| {
                    r.map(|(r, owner)| {
                        format!(
                            "{} {} {:?} (session {owner:#x})",
                            r.state,
                            self.name_of_or_empty(&r.sha256),
                            r.reason
                        )
                    })
                };
                checks.violation(format!(
                    "the switch did not end: A serves {}, reports {:?}; B serves {}, reports {:?}",
                    describe(&a),
                    show(ra),
                    describe(&b),
                    show(rb)
                ));
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let _ = watcher.await;
        let fired = proxy.fired();
        let log = proxy.untap();
        if let Some(h) = b_handle.take() {
            h.close().await;
        }
        fa.stop();
        fb.stop();
        if let Some((_, f)) = &restarted {
            f.stop();
        }
        proxy.thaw();
        drop(site);
        let (count, violations) = checks.take();
        RunOut { log, fired, root, checks: count, violations, note: String::new() }
    }

    fn name_of_or_empty(&self, sha: &str) -> String {
        if sha.is_empty() {
            "nothing".into()
        } else {
            self.name_of(sha)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tests

#[test]
fn a_custom_section_changes_the_digest_not_the_component() {
    let plain = b"\0asm\x0d\x00\x01\x00".to_vec();
    let with = with_section(&plain, "x", &[7u8; 200]);
    // 0, size 202 as LEB128 (0xca 0x01), name length 1, "x", payload.
    assert_eq!(&with[plain.len()..plain.len() + 5], &[0, 0xca, 0x01, 1, b'x']);
    assert_eq!(with.len(), plain.len() + 3 + 202);
}

/// The matrix's checks fail where they should: a pointer naming an unsealed blob, a history
/// that is not what the calls did, a component file that is not whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checks_catch_what_they_are_for() {
    let bench = Bench::new().await;
    let root = bench.root("control");
    bench.admin_publish(&root, &bench.v1, "setup", false).await;
    let checker = bench.checker().await;
    let open = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    // A blob made but never sealed, and a pointer naming it.
    checker.create(&format!("{root}/blobs/{}", bench.v2.sha), b"", &open).await.expect("an unsealed blob");
    let checks = Checks::new();
    bench.check_sealed(&checks, &root, &bench.v2.sha, "control").await;
    bench.check_sealed(&checks, &root, &bench.v1.sha, "control").await;
    let (_, found) = checks.take();
    assert_eq!(found.len(), 1, "the seal check: {found:?}");
    assert!(found[0].contains("not sealed"), "{found:?}");
    // A history in which the call that changed the pointer left no event.
    let events = bench.admin_store(&root).await.history_of(NAME).await.expect("the history");
    let checks = Checks::new();
    let pointer = Some((bench.v2.sha.clone(), "faulted-x".to_string()));
    bench
        .check_history(
            &checks,
            &root,
            Change::Publish,
            &events,
            1,
            "faulted-x",
            "retry-x",
            true,
            false,
            None,
            pointer,
        )
        .await;
    let (_, found) = checks.take();
    assert!(found.iter().any(|v| v.contains("made 0 events, not 1")), "{found:?}");
    assert!(found.iter().any(|v| v.contains("is not the pointer's current")), "{found:?}");
    // A component file cut short.
    let dir = bench.dir("control");
    std::fs::create_dir_all(dir.join(&bench.v2.sha[..12])).unwrap();
    std::fs::write(dir.join(&bench.v2.sha[..12]).join("lock.wasm"), &bench.v2.bytes[..1000]).unwrap();
    let checks = Checks::new();
    bench.check_files(&checks, &dir);
    assert_eq!(checks.take().1.len(), 1, "a file cut short passes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_survives_every_single_fault() {
    let bench = Bench::new().await;
    bench.matrix(Promise::Change(Change::Publish), "publish lock v2 over v1", &KINDS).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_survives_every_single_fault() {
    let bench = Bench::new().await;
    bench
        .matrix(Promise::Change(Change::Rollback), "rollback lock to v1 from v2", &KINDS)
        .await
        .assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_fetches_whole_under_every_single_fault() {
    let bench = Bench::new().await;
    bench.matrix(Promise::Follow, "follow lock v1 -> v2", &KINDS).await.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_switch_survives_a_fault_while_a_waits_for_b() {
    let bench = Bench::new().await;
    bench
        .matrix(Promise::Swap(Order::AWaitsForB), "switch to kazoo-lock/1, A waits for B", &KINDS)
        .await
        .assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_switch_survives_a_fault_while_b_waits_for_a() {
    let bench = Bench::new().await;
    bench
        .matrix(Promise::Swap(Order::BWaitsForA), "switch to kazoo-lock/1, B waits for A", &KINDS)
        .await
        .assert_clean();
}
