//! Fail-over of a daemon group (`wazoo serve --group`): how long the clients of a daemon that is
//! SIGKILLed take to be safe again on another member, and whether every claim comes through
//! (same node, same fencing token, nobody else holding it).
//!
//! Set-up: one ZooKeeper (standalone, started here unless `WAZOO_ZOOKEEPER` names one; tick
//! 2000 ms, ZooKeeper's own default), three `wazoo serve --group` daemons as processes of
//! their own (a copy of the bench's `wazoo` binary made at the start; defaults for everything
//! but the addresses and the group: ZooKeeper
//! session timeout 10 s; a scratch plugins directory holding `lock.wasm` alone, the compile
//! cache `target/component-cache`), and 100 clients of `wazoo-client` in this process, each
//! with a connection of its own, connected through the list of all members' addresses
//! (rotated, so that they spread over the members), every claim in a client session of its
//! own with the client's default TTL (10 s):
//!
//! - 80 holders (`Client::lock`): 79 on a lock path each, one on a shared path;
//! - 20 waiters queued behind that holder on the shared path: a session of their own
//!   (`Client::session`) and an `Acquire` that waits, sent again with its claim id once the
//!   session is taken up elsewhere: what `Client::lock` does, written out here because a
//!   waiter's session is only reachable that way.
//!
//! Each round (`WAZOO_BENCH_KILLS` rounds, default 200; e.g. 5 for a quick run): a member that
//! serves at least one client is picked at random (`WAZOO_BENCH_SEED`, default 1), the
//! instant is taken and the member is SIGKILLed; the bench waits (up to 30 s) until each of its
//! clients is safe on another member or lost, then checks every claim through a ZooKeeper
//! client of its own (each holder's node still there, the same czxid (its fencing token) and
//! first in its path's queue; each waiter's node still there, same czxid), and starts a
//! member again so that there are three (on a new port, as a restarted `--listen …:0` member
//! gets; with `WAZOO_BENCH_PORTS=same`, on the port of the member it replaces, as a member at a
//! fixed address comes back). The clients stay where they landed. A second between rounds lets
//! the group settle.
//!
//! Fail-over time of one client: from the instant before the SIGKILL to
//! - a holder: its claim taken up again on another member: `Session::taken_up_after`
//!   resolved (Reattach answered, the session adopted there, its keepalive stream open)
//!   *and* `Claim::lost`'s `Resume` answered and its Lost stream open again (the instant the
//!   client logs `safe: the claim was taken up again`, caught by a tracing layer here: there
//!   is no other way to see it from outside the claim);
//! - a waiter: `Session::taken_up_after` resolved (its Acquire then goes again).
//!
//! Per kill: the time until the last of its clients was safe. Also shown: when the clients
//! noticed (the client's `jeopardy` event). Losses (`Claim::lost` resolving, a waiter's session
//! ending), changed nodes or tokens, and two clients holding one path at once are bench
//! failures, printed loudly as they happen and counted at the end (the bench then exits
//! non-zero); a lost client is replaced by a new one (holders on a new path) so that 100 stay.
//! Finally the shared path's holder lets go and the first waiter must get the lock with the
//! node it queued at the start.
//!
//! Run with `make bench` or `cargo bench -p wazoo-cli --bench failover` (after `make
//! recipes`); `WAZOO_BENCH_KILLS=5 cargo bench -p wazoo-cli --bench failover` for a quick run
//! (about 40 s; every round is then printed, as with `WAZOO_BENCH_VERBOSE=1`). A round where
//! every client comes through takes about 3 s on 2 cores (200 kills: about 10 minutes); a
//! round with losses lasts until the lost clients' cut-off (6.7 s) and their replacing, and
//! the 200 kills took 20 minutes when most rounds had some. The default stays at 200 kills
//! all the same: fewer would not give a p99 worth the name. The wall time is printed at the
//! end. The daemons' logs (`WAZOO_LOG=wazoo=info`) are summed up at the end (warnings and
//! errors by message, the adoptions' durations) and, after a failure, kept in the scratch
//! directory named there.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{ms, percentile};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;
use wazoo_client::proto as pb;
use wazoo_client::{Claim, Client, LockOptions};
use wazoo_testkit::ServerOptions;

const MEMBERS: usize = 3;
const HOLDERS: usize = 80;
const WAITERS: usize = 20;
const TICK_MS: u32 = 2000;
/// How long a round waits for the clients of the killed member to be safe or lost.
const ROUND_LIMIT: Duration = Duration::from_secs(30);
/// Between rounds.
const SETTLE: Duration = Duration::from_secs(1);
const START_LIMIT: Duration = Duration::from_secs(60);
const GROUP_SECRET: &str = "the-failover-bench-group-secret\n";

fn main() -> anyhow::Result<()> {
    let kills: usize = std::env::var("WAZOO_BENCH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let seed: u64 = std::env::var("WAZOO_BENCH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let same_ports = std::env::var("WAZOO_BENCH_PORTS").is_ok_and(|v| v == "same");
    let (_, component) = common::plugin("lock")?;

    // The client's own account of a fail-over (jeopardy, taken up, claim resumed) is in its
    // tracing events: a layer hands them to the bench.
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let (tx, rx) = mpsc::unbounded_channel();
        TRACED.set(tx).ok();
        *TRACED_RX.lock().unwrap() = Some(rx);
        tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("wazoo_client=warn"))
            .with(Tracer)
            .init();
    }

    let (server, address) =
        common::zookeeper(ServerOptions { tick_ms: TICK_MS, ..ServerOptions::default() })?;
    let zookeeper = common::describe(&server, &address, TICK_MS);
    let scratch = std::env::temp_dir().join(format!("wazoo-bench-failover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("plugins"))?;
    std::fs::copy(&component, scratch.join("plugins/lock.wasm"))?;
    std::fs::write(scratch.join("group-secret"), GROUP_SECRET)?;
    // The daemons run a copy of the binaries made now, so that a build during the run changes
    // nothing (`wazoo serve` looks for `wazoo-compile` beside itself).
    std::fs::create_dir_all(scratch.join("bin"))?;
    std::fs::copy(env!("CARGO_BIN_EXE_wazoo"), scratch.join("bin/wazoo"))?;
    std::fs::copy(env!("CARGO_BIN_EXE_wazoo-compile"), scratch.join("bin/wazoo-compile"))?;

    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let bench = Bench {
        zookeeper: address,
        described: zookeeper,
        scratch: scratch.clone(),
        cache: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/component-cache"),
        group: format!("bench-failover-{}", std::process::id()),
        kills,
        seed,
        same_ports,
    };
    let outcome = runtime.block_on(async move { tokio::spawn(bench.run()).await? });
    common::conclude(
        runtime,
        server,
        started,
        &scratch,
        outcome.map(|n| n as u64),
        "claims lost, changed or held twice",
    )
}

// ---- the client's tracing events ----

/// What the client logged about a session, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// `jeopardy: …`: its daemon stopped answering.
    Jeopardy,
    /// `safe: the session was taken up by the daemon at …`.
    TakenUp,
    /// `safe: the claim was taken up again …`: Resume answered, the Lost stream open again.
    Resumed,
    Other,
}

struct Traced {
    session: Option<u64>,
    seen: Seen,
    at: Instant,
    message: String,
}

static TRACED: OnceLock<mpsc::UnboundedSender<Traced>> = OnceLock::new();
static TRACED_RX: Mutex<Option<mpsc::UnboundedReceiver<Traced>>> = Mutex::new(None);

struct Tracer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Tracer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let at = Instant::now();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let seen = if fields.message.starts_with("jeopardy:") {
            Seen::Jeopardy
        } else if fields.message.starts_with("safe: the session was taken up") {
            Seen::TakenUp
        } else if fields.message.starts_with("safe: the claim was taken up again") {
            Seen::Resumed
        } else {
            Seen::Other
        };
        if let Some(tx) = TRACED.get() {
            let _ = tx.send(Traced { session: fields.session, seen, at, message: fields.message });
        }
    }
}

#[derive(Default)]
struct Fields {
    session: Option<u64>,
    message: String,
}

impl tracing::field::Visit for Fields {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "session" {
            self.session = Some(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

// ---- daemons ----

struct Member {
    child: Child,
    pid: i32,
    grpc: String,
    _stdout: tokio::io::Lines<BufReader<ChildStdout>>,
}

// ---- clients ----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Holder,
    Waiter,
}

/// What a waiter's task keeps up to date about it.
#[derive(Clone, Default)]
struct WaiterView {
    addr: String,
    generation: u64,
}

struct Slot {
    role: Role,
    path: String,
    session: u64,
    /// The claim's (or queued) node, a full path, and its czxid as first seen.
    node: String,
    token: i64,
    claim: Option<Arc<Claim>>,
    waiter: Option<Arc<Mutex<WaiterView>>>,
    /// The waiter's task, or the task following the holder's claim (`Claim::lost`).
    task: tokio::task::JoinHandle<()>,
}

impl Slot {
    fn addr(&self) -> String {
        match (&self.claim, &self.waiter) {
            (Some(claim), _) => claim.session().client().addr().to_string(),
            (None, Some(view)) => view.lock().unwrap().addr.clone(),
            (None, None) => String::new(),
        }
    }

    fn generation(&self) -> u64 {
        match (&self.claim, &self.waiter) {
            (Some(claim), _) => claim.session().generation(),
            (None, Some(view)) => view.lock().unwrap().generation,
            (None, None) => 0,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the clients' tasks tell the bench.
enum Report {
    /// A client's session was taken up by another member (`Session::taken_up_after`).
    TakenUp { id: usize, at: Instant },
    /// A holder's claim was lost (`Claim::lost`), or a waiter's session ended.
    Lost { id: usize, why: String },
    /// A waiter's Acquire was answered: it holds the lock now (through the member at `addr`,
    /// after `taken_ups` take-ups of its session).
    Acquired { id: usize, claim: Claim, at: Instant, addr: String, taken_ups: u64 },
    /// A waiter could not follow the claim it was given.
    Failed { id: usize, why: String },
}

impl Pending {
    fn new(role: Role) -> Pending {
        Pending { role, jeopardy: None, taken: None, resumed: None, lost: None }
    }

    /// Whether the client is safe again after the kill.
    fn safe(&self) -> bool {
        match self.role {
            Role::Holder => self.taken.is_some() && self.resumed.is_some(),
            Role::Waiter => self.taken.is_some(),
        }
    }
}

/// A client lost.
struct Loss {
    id: usize,
    role: Role,
    node: String,
    token: i64,
    why: String,
    /// Since the kill, in a round.
    after: Option<Duration>,
}

/// One client's fail-over in a round.
struct Pending {
    /// The client's role when its member was killed.
    role: Role,
    jeopardy: Option<Instant>,
    taken: Option<Instant>,
    resumed: Option<Instant>,
    lost: Option<String>,
}

#[derive(Default)]
struct Tally {
    /// Holders: SIGKILL → claim resumed; waiters: SIGKILL → session taken up.
    holders: Vec<Duration>,
    waiters: Vec<Duration>,
    /// SIGKILL → the client noticed (jeopardy), and → its session taken up (holders).
    noticed: Vec<Duration>,
    taken_holders: Vec<Duration>,
    /// Per kill: SIGKILL → the last of its clients safe (kills where every one was).
    kills: Vec<Duration>,
    affected: Vec<usize>,
    claims_through: usize,
    waiters_through: usize,
    lost: usize,
    stuck: usize,
    changed: usize,
    overlaps: usize,
    unplanned: usize,
    /// Kills with no safe time (some client lost or stuck).
    incomplete_kills: usize,
    other_events: BTreeMap<String, usize>,
}

struct Bench {
    zookeeper: String,
    described: String,
    scratch: PathBuf,
    cache: PathBuf,
    group: String,
    kills: usize,
    seed: u64,
    same_ports: bool,
}

struct State {
    bench: Bench,
    members: Vec<Member>,
    started: usize,
    slots: BTreeMap<usize, Slot>,
    next_id: usize,
    shared: String,
    base: String,
    reports_tx: mpsc::UnboundedSender<Report>,
    reports: mpsc::UnboundedReceiver<Report>,
    traced: mpsc::UnboundedReceiver<Traced>,
    checker: zookeeper_client::Client,
    tally: Tally,
    /// Loud lines, repeated at the end.
    failures: Vec<String>,
    /// Clients lost and not yet reported.
    losses: Vec<Loss>,
    /// The problems `check` found, each counted once.
    reported: std::collections::HashSet<String>,
    ttl: Duration,
}

impl Bench {
    async fn run(self) -> anyhow::Result<usize> {
        let machine = common::machine();
        println!(
            "wazoo daemon-group fail-over benchmark: `cargo bench -p wazoo-cli --bench failover`; {machine}; \
             {}; {MEMBERS} daemons (`wazoo serve --group`, processes); {} clients: {HOLDERS} holders ({} on a lock \
             path each, 1 on a shared path) and {WAITERS} waiters queued behind it; {} kills (SIGKILL) of a member \
             serving clients, picked at random (seed {}); members started again on {}",
            self.described,
            HOLDERS + WAITERS,
            HOLDERS - 1,
            self.kills,
            self.seed,
            if self.same_ports { "the port of the member they replace" } else { "new ports" },
        );
        let checker = zookeeper_client::Client::connect(&self.zookeeper).await?;
        let (reports_tx, reports) = mpsc::unbounded_channel();
        let traced = TRACED_RX.lock().unwrap().take().expect("the tracing layer's receiver");
        let base = format!("/bench-failover/{}", uuid::Uuid::new_v4().simple());
        let mut state = State {
            bench: self,
            members: Vec::new(),
            started: 0,
            slots: BTreeMap::new(),
            next_id: 0,
            shared: format!("{base}/shared"),
            base,
            reports_tx,
            reports,
            traced,
            checker,
            tally: Tally::default(),
            failures: Vec::new(),
            reported: Default::default(),
            losses: Vec::new(),
            ttl: LockOptions::default().ttl,
        };
        let outcome = state.run().await;
        // Every session goes with its client, then the daemons.
        state.slots.clear();
        for member in &mut state.members {
            let _ = member.child.start_kill();
        }
        for member in &mut state.members {
            let _ = member.child.wait().await;
        }
        // What was measured until a fault of the bench's own, too.
        state.summary();
        outcome?;
        Ok(state.tally.lost + state.tally.changed + state.tally.overlaps + state.tally.stuck)
    }
}

impl State {
    async fn run(&mut self) -> anyhow::Result<()> {
        for _ in 0..MEMBERS {
            let member = self.spawn_member("127.0.0.1:0").await?;
            self.members.push(member);
        }
        let settings = self.settings().await?;

        let setup = Instant::now();
        let shared = self.shared.clone();
        self.add_holder(&shared).await?;
        for _ in 1..HOLDERS {
            let path = format!("{}/own-{}", self.base, self.next_id);
            self.add_holder(&path).await?;
        }
        for _ in 0..WAITERS {
            self.add_waiter().await?;
        }
        println!(
            "{} clients holding or queued in {:.1} s; {settings}",
            self.slots.len(),
            setup.elapsed().as_secs_f64()
        );
        self.check("after the set-up").await?;
        self.drain_between().await;

        let mut rng = Rng(self.bench.seed.max(1));
        let kills = self.bench.kills;
        let every = (kills / 10).max(1);
        let rounds = Instant::now();
        for round in 1..=kills {
            tokio::time::sleep(SETTLE).await;
            self.drain_between().await;
            self.round(round, &mut rng).await?;
            if round % every == 0 || round == kills {
                let mut times: Vec<Duration> =
                    self.tally.holders.iter().chain(&self.tally.waiters).copied().collect();
                let p99 = if times.is_empty() { "-".into() } else { ms(percentile(&mut times, 99.0)) };
                println!(
                    "  {round}/{kills} kills in {:.0} s: per-client p99 so far {p99}; lost {}, changed {}, overlaps {}, stuck {}",
                    rounds.elapsed().as_secs_f64(),
                    self.tally.lost,
                    self.tally.changed,
                    self.tally.overlaps,
                    self.tally.stuck
                );
            }
        }
        tokio::time::sleep(SETTLE).await;
        self.drain_between().await;
        self.queue_order().await?;
        Ok(())
    }

    /// Starts a member of the group listening on `listen`; returns once it serves.
    async fn spawn_member(&mut self, listen: &str) -> anyhow::Result<Member> {
        let n = self.started;
        self.started += 1;
        let log = std::fs::File::create(self.bench.scratch.join(format!("daemon-{n:03}.log")))?;
        let mut command = Command::new(self.bench.scratch.join("bin/wazoo"));
        command
            .env("WAZOO_ZOOKEEPER", &self.bench.zookeeper)
            .env("WAZOO_PLUGINS", self.bench.scratch.join("plugins"))
            .env("WAZOO_CACHE", &self.bench.cache)
            .env("WAZOO_LOG", "wazoo=info")
            .env("NO_COLOR", "1")
            .env_remove("WAZOO_SERVER")
            .env_remove("WAZOO_SESSION_TIMEOUT")
            .env_remove("WAZOO_LOG_FORMAT")
            .args(["serve", "--listen", listen, "--metrics", "127.0.0.1:0", "--group", &self.bench.group])
            .arg("--group-secret-file")
            .arg(self.bench.scratch.join("group-secret"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let line = match tokio::time::timeout(START_LIMIT, lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => anyhow::bail!(
                "member {n} did not start ({other:?}); its log: {}",
                self.bench.scratch.join(format!("daemon-{n:03}.log")).display()
            ),
        };
        // "serving gRPC on ADDR, metrics on http://ADDR/metrics, console on http://ADDR/"
        let grpc = line
            .split_whitespace()
            .nth(3)
            .map(|a| a.trim_end_matches(',').to_string())
            .ok_or_else(|| anyhow::anyhow!("member {n} said {line:?}"))?;
        let pid = child.id().expect("running") as i32;
        Ok(Member { child, pid, grpc, _stdout: lines })
    }

    /// The members' addresses, starting with the `k`th (mod the count).
    fn addresses(&self, k: usize) -> String {
        let n = self.members.len();
        (0..n).map(|i| self.members[(k + i) % n].grpc.clone()).collect::<Vec<_>>().join(",")
    }

    /// The settings as the daemons grant them.
    async fn settings(&self) -> anyhow::Result<String> {
        let client = Client::connect(&self.addresses(0), None, Duration::from_secs(10)).await?;
        let ttl_ms = self.ttl.as_millis() as u64;
        let opened = client
            .sessions()
            .open(pb::OpenRequest { ttl_ms, name: "failover bench: settings".into() })
            .await?
            .into_inner();
        let _ = client.sessions().close(pb::SessionRef { session: opened.session }).await;
        let ttl = Duration::from_millis(opened.ttl_ms);
        let zk = Duration::from_millis(opened.zookeeper_timeout_ms);
        let limit = if zk.is_zero() { ttl } else { ttl.min(zk) } * 2 / 3;
        Ok(format!(
            "client session TTL {:?} asked, {:?} granted (`LockOptions::default()`); daemons' ZooKeeper session \
             timeout 10 s asked (`wazoo serve` default), {:?} negotiated (tick {TICK_MS} ms); a client's claims count as lost \
             after {:.2} s unanswered (2/3 of the smaller), its session is in jeopardy after {:.2} s of silence or at once \
             when the connection breaks; HTTP/2 pings every {:?}, given up after {:?}",
            self.ttl,
            ttl,
            zk,
            limit.as_secs_f64(),
            (limit / 3).as_secs_f64(),
            wazoo_client::PING_EVERY,
            wazoo_client::PING_TIMEOUT,
        ))
    }

    /// A new client holding the lock at `path` (its own, or the shared one).
    async fn add_holder(&mut self, path: &str) -> anyhow::Result<usize> {
        let id = self.next_id;
        self.next_id += 1;
        let client = Client::connect(&self.addresses(id), None, Duration::from_secs(10)).await?;
        let claim = client.lock(path, LockOptions::default()).await?;
        let node = full(path, claim.node());
        let (session, token) = (claim.session().id(), claim.token());
        let claim = Arc::new(claim);
        let task = self.follow(id, &claim);
        self.slots.insert(
            id,
            Slot {
                role: Role::Holder,
                path: path.to_string(),
                session,
                node,
                token,
                claim: Some(claim),
                waiter: None,
                task,
            },
        );
        Ok(id)
    }

    /// Follows `claim` (which is what takes it up again after a fail-over): its loss is reported.
    fn follow(&self, id: usize, claim: &Claim) -> tokio::task::JoinHandle<()> {
        let lost = claim.lost();
        let tx = self.reports_tx.clone();
        tokio::spawn(async move {
            let why = lost.await;
            let _ = tx.send(Report::Lost { id, why: format!("{why:?}") });
        })
    }

    /// A new client queued on the shared path.
    async fn add_waiter(&mut self) -> anyhow::Result<usize> {
        let id = self.next_id;
        self.next_id += 1;
        let client = Client::connect(&self.addresses(id), None, Duration::from_secs(10)).await?;
        let session = client.session(self.ttl, format!("failover bench waiter {id}")).await?;
        let session_id = session.id();
        let view =
            Arc::new(Mutex::new(WaiterView { addr: session.client().addr().to_string(), generation: 0 }));
        let task = tokio::spawn(wait_in_line(
            id,
            session,
            self.shared.clone(),
            view.clone(),
            self.reports_tx.clone(),
        ));
        // Its node, once queued.
        let prefix = wazoo_runtime::ClaimTag::session_prefix(session_id);
        let queued = Instant::now();
        let name = loop {
            let children = or_none(self.checker.list_children(&self.shared).await)?;
            if let Some(name) = children.into_iter().find(|c| c.starts_with(&prefix)) {
                break name;
            }
            anyhow::ensure!(queued.elapsed() < Duration::from_secs(30), "waiter {id} did not queue");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let node = format!("{}/{name}", self.shared);
        let stat = self.checker.check_stat(&node).await?.ok_or_else(|| anyhow::anyhow!("{node} went"))?;
        self.slots.insert(
            id,
            Slot {
                role: Role::Waiter,
                path: self.shared.clone(),
                session: session_id,
                node,
                token: stat.czxid,
                claim: None,
                waiter: Some(view),
                task,
            },
        );
        Ok(id)
    }

    /// Reports and client events between rounds: none is expected but a waiter's late ones.
    async fn drain_between(&mut self) {
        while let Ok(traced) = self.traced.try_recv() {
            self.note_traced(&traced, None);
        }
        while let Ok(report) = self.reports.try_recv() {
            self.between(report).await;
        }
    }

    fn note_traced(&mut self, traced: &Traced, round: Option<&HashMap<usize, Pending>>) {
        if traced.seen == Seen::Other {
            let message: String = traced.message.chars().take(120).collect();
            *self.tally.other_events.entry(message).or_default() += 1;
            return;
        }
        // A take-up outside a round, or of a client the round did not kill the member of.
        if traced.seen == Seen::Jeopardy {
            let id = traced
                .session
                .and_then(|s| self.slots.iter().find(|(_, slot)| slot.session == s).map(|(i, _)| *i));
            if round.is_none_or(|r| id.is_none_or(|id| !r.contains_key(&id))) {
                self.tally.unplanned += 1;
                let message: String = traced.message.chars().take(160).collect();
                println!(
                    "  unplanned: session {:?} in jeopardy: {message}",
                    traced.session.map(|s| format!("{s:#x}"))
                );
            }
        }
    }

    /// A report outside a round.
    async fn between(&mut self, report: Report) {
        match report {
            Report::TakenUp { id, .. } => {
                println!("  unplanned: client {id}'s session was taken up between rounds");
            }
            other => self.settle(other, &mut HashMap::new(), None).await,
        }
    }

    /// Handles a loss or a waiter's Acquire, in or out of a round.
    async fn settle(&mut self, report: Report, round: &mut HashMap<usize, Pending>, at: Option<Instant>) {
        match report {
            Report::TakenUp { id, at } => {
                if let Some(p) = round.get_mut(&id) {
                    p.taken.get_or_insert(at);
                }
            }
            Report::Lost { id, why } | Report::Failed { id, why } => {
                let Some(slot) = self.slots.get(&id) else { return };
                let loss = Loss {
                    id,
                    role: slot.role,
                    node: slot.node.clone(),
                    token: slot.token,
                    why: why.clone(),
                    after: at.map(|t| t.elapsed()),
                };
                self.losses.push(loss);
                if at.is_none() {
                    self.report_losses("between two kills");
                }
                self.tally.lost += 1;
                if let Some(p) = round.get_mut(&id) {
                    p.lost = Some(why);
                }
                let slot = self.slots.get_mut(&id).expect("there");
                slot.claim = None;
                slot.waiter = None;
            }
            Report::Acquired { id, claim, at: when, addr, taken_ups } => {
                let Some(slot) = self.slots.get(&id) else { return };
                // The queue in ZooKeeper now, for the record.
                let mut queue = self.checker.list_children(&slot.path).await.unwrap_or_default();
                queue.sort_by(|a, b| a[a.len().saturating_sub(10)..].cmp(&b[b.len().saturating_sub(10)..]));
                let queue: Vec<String> =
                    queue.iter().take(3).map(|n| n[n.len().saturating_sub(10)..].to_string()).collect();
                let slot = &self.slots[&id];
                // Whoever else still believes it holds the shared path.
                let holders: Vec<usize> = self
                    .slots
                    .iter()
                    .filter(|(i, s)| {
                        **i != id && s.path == slot.path && s.role == Role::Holder && s.claim.is_some()
                    })
                    .map(|(i, _)| *i)
                    .collect();
                let node = full(&slot.path, claim.node());
                if !holders.is_empty() {
                    let theirs: Vec<String> = holders.iter().map(|h| self.slots[h].node.clone()).collect();
                    let line = format!(
                        "!!! BENCH FAILURE: waiter {id} was given {} (token {}) by {addr} (its session taken up {taken_ups} \
                         times){} while client(s) {holders:?} still hold it ({theirs:?}); the queue's first sequences in \
                         ZooKeeper {:?} after the answer",
                        node,
                        claim.token(),
                        at.map(|t| format!(", {} after the kill", ms(when.saturating_duration_since(t)))).unwrap_or_default(),
                        queue
                    );
                    println!("{line}");
                    self.failures.push(line);
                    self.tally.overlaps += 1;
                } else {
                    println!("  waiter {id} holds {node} now ({:?} ago)", when.elapsed());
                }
                if node != slot.node || claim.token() != slot.token {
                    let line = format!(
                        "!!! BENCH FAILURE: waiter {id} queued {} (token {}) but was given {node} (token {})",
                        slot.node,
                        slot.token,
                        claim.token()
                    );
                    println!("{line}");
                    self.failures.push(line);
                    self.tally.changed += 1;
                }
                let claim = Arc::new(claim);
                let task = self.follow(id, &claim);
                let slot = self.slots.get_mut(&id).expect("there");
                slot.role = Role::Holder;
                slot.claim = Some(claim);
                slot.waiter = None;
                slot.task = task;
            }
        }
    }

    /// One kill, its fail-over and the checks.
    async fn round(&mut self, round: usize, rng: &mut Rng) -> anyhow::Result<()> {
        // Clients by the member serving them.
        let mut served: HashMap<String, Vec<usize>> = HashMap::new();
        for (id, slot) in &self.slots {
            if slot.claim.is_some() || slot.waiter.is_some() {
                served.entry(slot.addr()).or_default().push(*id);
            }
        }
        let known: Vec<String> = self.members.iter().map(|m| m.grpc.clone()).collect();
        for (addr, ids) in &served {
            if !known.contains(addr) {
                let line = format!("!!! round {round}: clients {ids:?} are on {addr}, which is no member");
                println!("{line}");
                self.failures.push(line);
            }
        }
        let candidates: Vec<usize> =
            (0..self.members.len()).filter(|&i| served.contains_key(&self.members[i].grpc)).collect();
        anyhow::ensure!(!candidates.is_empty(), "no member serves a client");
        let victim = candidates[(rng.next() % candidates.len() as u64) as usize];
        let affected = served.remove(&self.members[victim].grpc).unwrap_or_default();
        let generations: HashMap<usize, u64> =
            self.slots.iter().map(|(id, slot)| (*id, slot.generation())).collect();
        let mut pending: HashMap<usize, Pending> =
            affected.iter().map(|id| (*id, Pending::new(self.slots[id].role))).collect();
        // Holders' take-ups, through the public API.
        let mut watchers = Vec::new();
        for id in &affected {
            let slot = &self.slots[id];
            if let Some(claim) = &slot.claim {
                let (claim, generation, tx, id) =
                    (claim.clone(), generations[id], self.reports_tx.clone(), *id);
                watchers.push(tokio::spawn(async move {
                    if claim.session().taken_up_after(generation).await.is_some() {
                        let _ = tx.send(Report::TakenUp { id, at: Instant::now() });
                    }
                }));
            }
        }

        let mut member = self.members.remove(victim);
        let killed = Instant::now();
        // SAFETY: a plain kill(2) of a child this bench started and has not reaped.
        let status = unsafe { libc::kill(member.pid, libc::SIGKILL) };
        anyhow::ensure!(status == 0, "kill -KILL {}: {}", member.pid, std::io::Error::last_os_error());

        let deadline = tokio::time::Instant::now() + ROUND_LIMIT;
        let sessions: HashMap<u64, usize> = self.slots.iter().map(|(id, s)| (s.session, *id)).collect();
        loop {
            let open = pending.values().filter(|p| p.lost.is_none() && !p.safe()).count();
            if open == 0 {
                break;
            }
            tokio::select! {
                Some(report) = self.reports.recv() => self.settle(report, &mut pending, Some(killed)).await,
                Some(traced) = self.traced.recv() => {
                    let id = traced.session.and_then(|s| sessions.get(&s).copied());
                    match (id.and_then(|id| pending.get_mut(&id)), traced.seen) {
                        (Some(p), Seen::Jeopardy) => { p.jeopardy.get_or_insert(traced.at); }
                        (Some(p), Seen::Resumed) => { p.resumed.get_or_insert(traced.at); }
                        (Some(_), Seen::TakenUp) => {}
                        _ => self.note_traced(&traced, Some(&pending)),
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        for w in watchers {
            w.abort();
        }
        let _ = member.child.wait().await;

        // Times.
        let mut last = Duration::ZERO;
        let mut complete = true;
        for (id, p) in &pending {
            let Some(slot) = self.slots.get(id) else { continue };
            if p.lost.is_some() {
                complete = false;
                continue;
            }
            if !p.safe() {
                complete = false;
                self.tally.stuck += 1;
                let line = format!(
                    "!!! BENCH FAILURE: round {round}: client {id} ({:?}, {}) neither safe nor lost {:?} after the kill \
                     (jeopardy {:?}, taken up {:?}, resumed {:?})",
                    slot.role,
                    slot.node,
                    ROUND_LIMIT,
                    p.jeopardy.map(|t| t - killed),
                    p.taken.map(|t| t - killed),
                    p.resumed.map(|t| t - killed)
                );
                println!("{line}");
                self.failures.push(line);
                continue;
            }
            if let Some(t) = p.jeopardy {
                self.tally.noticed.push(t.saturating_duration_since(killed));
            }
            let taken = p.taken.expect("safe").saturating_duration_since(killed);
            let safe = match p.role {
                Role::Holder => {
                    self.tally.taken_holders.push(taken);
                    self.tally.claims_through += 1;
                    let safe = p.resumed.expect("safe").saturating_duration_since(killed).max(taken);
                    self.tally.holders.push(safe);
                    safe
                }
                Role::Waiter => {
                    self.tally.waiters_through += 1;
                    self.tally.waiters.push(taken);
                    taken
                }
            };
            last = last.max(safe);
        }
        self.tally.affected.push(affected.len());
        if complete {
            self.tally.kills.push(last);
        } else {
            self.tally.incomplete_kills += 1;
        }
        if self.bench.kills <= 20 || std::env::var_os("WAZOO_BENCH_VERBOSE").is_some() {
            println!(
                "  round {round}: killed member {} (pid {}) serving {} clients ({} holders); {} lost; last safe after {}",
                member.grpc,
                member.pid,
                affected.len(),
                affected.iter().filter(|id| self.slots.get(id).is_some_and(|s| s.role == Role::Holder)).count(),
                pending.values().filter(|p| p.lost.is_some()).count(),
                ms(last)
            );
        } else if last > Duration::from_secs(1) {
            println!(
                "  round {round}: slow: the last of {} clients was safe {} after the kill",
                affected.len(),
                ms(last)
            );
        }

        self.report_losses(&format!("kill {round}"));
        self.check(&format!("after kill {round}")).await?;
        // Take-ups of clients that were not on the killed member.
        for (id, slot) in &self.slots {
            if !pending.contains_key(id) && generations.get(id).is_some_and(|g| slot.generation() != *g) {
                self.tally.unplanned += 1;
                println!("  round {round}: client {id} (not on the killed member) was taken up too");
            }
        }
        self.replace_lost().await?;

        // Three members again.
        let listen = match self.bench.same_ports {
            true => member.grpc.clone(),
            false => "127.0.0.1:0".to_string(),
        };
        drop(member);
        let fresh = self.spawn_member(&listen).await?;
        self.members.push(fresh);
        Ok(())
    }

    /// The clients lost since the last report, loudly, by reason (numbers in it left out).
    fn report_losses(&mut self, when: &str) {
        if self.losses.is_empty() {
            return;
        }
        let losses = std::mem::take(&mut self.losses);
        let mut by_reason: BTreeMap<String, Vec<&Loss>> = BTreeMap::new();
        for loss in &losses {
            let shape: String = loss.why.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
            by_reason.entry(shape).or_default().push(loss);
        }
        let holders = losses.iter().filter(|l| l.role == Role::Holder).count();
        let line = format!(
            "!!! BENCH FAILURE, {when}: {} clients LOST ({holders} holding, {} waiting)",
            losses.len(),
            losses.len() - holders
        );
        println!("{line}");
        self.failures.push(line);
        for group in by_reason.values() {
            let first = group[0];
            let mut after: Vec<Duration> = group.iter().filter_map(|l| l.after).collect();
            after.sort_unstable();
            let when = match (after.first(), after.last()) {
                (Some(a), Some(b)) => format!(", {} to {} after the kill", ms(*a), ms(*b)),
                _ => String::new(),
            };
            let ids: Vec<usize> = group.iter().map(|l| l.id).collect();
            let line = format!(
                "!!!   {}× {}{when}, e.g. client {} ({:?}, {}, token {}); clients {ids:?}",
                group.len(),
                first.why,
                first.id,
                first.role,
                first.node,
                first.token
            );
            println!("{line}");
            self.failures.push(line);
        }
    }

    /// Every live claim through ZooKeeper: the node there with its czxid; a holder first in its
    /// queue; no path held by two clients.
    async fn check(&mut self, when: &str) -> anyhow::Result<()> {
        let mut by_path: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (id, slot) in &self.slots {
            if slot.claim.is_some() || slot.waiter.is_some() {
                by_path.entry(slot.path.clone()).or_default().push(*id);
            }
        }
        let paths: Vec<String> = by_path.keys().cloned().collect();
        let listed: Vec<_> = paths.iter().map(|p| self.checker.list_children(p)).collect();
        let mut children: HashMap<String, Vec<String>> = HashMap::new();
        for (path, listed) in paths.iter().zip(listed) {
            // A lock path with no node left may be gone (a container).
            let mut names = or_none(listed.await)?;
            // The queue's order: the 10-digit sequence that ends each name.
            names.sort_by(|a, b| a[a.len().saturating_sub(10)..].cmp(&b[b.len().saturating_sub(10)..]));
            children.insert(path.clone(), names);
        }
        let ids: Vec<usize> = by_path.values().flatten().copied().collect();
        let stats: Vec<_> = ids.iter().map(|id| self.checker.check_stat(&self.slots[id].node)).collect();
        // (what it is about, so that it counts once; an overlap?; what was found)
        let mut problems: Vec<(String, bool, String)> = Vec::new();
        let mut requeued = Vec::new();
        for (id, stat) in ids.iter().zip(stats) {
            let slot = &self.slots[id];
            let name = slot.node.rsplit('/').next().unwrap_or_default();
            match stat.await? {
                None => {
                    problems.push((
                        format!("gone {}", slot.node),
                        false,
                        format!("client {id} ({:?}): its node {} is gone", slot.role, slot.node),
                    ));
                    if slot.role == Role::Waiter {
                        requeued.push(*id);
                    }
                }
                Some(stat) if stat.czxid != slot.token => problems.push((
                    format!("czxid {}", slot.node),
                    false,
                    format!(
                        "client {id}: {} has czxid {}, not its token {}",
                        slot.node, stat.czxid, slot.token
                    ),
                )),
                Some(_) => {}
            }
            let first = children[&slot.path].first();
            if slot.role == Role::Holder && first.map(String::as_str) != Some(name) {
                problems.push((
                    format!("first {} {first:?}", slot.node),
                    false,
                    format!(
                        "client {id} holds {} but the first node of {} is {first:?}",
                        slot.node, slot.path
                    ),
                ));
            }
        }
        for (path, ids) in &by_path {
            let holders: Vec<usize> =
                ids.iter().copied().filter(|id| self.slots[id].role == Role::Holder).collect();
            if holders.len() > 1 {
                problems.push((
                    format!("held {path} {holders:?}"),
                    true,
                    format!("{path} is held by clients {holders:?} at once"),
                ));
            }
            // Own paths: the holder's node alone.
            if *path != self.shared && children[path].len() != 1 {
                problems.push((
                    format!("nodes {path} {:?}", children[path]),
                    false,
                    format!("{path} has nodes {:?}, not one", children[path]),
                ));
            }
        }
        for (key, overlap, problem) in problems {
            if !self.reported.insert(key) {
                continue;
            }
            let line = format!("!!! BENCH FAILURE {when}: {problem}");
            println!("{line}");
            self.failures.push(line);
            match overlap {
                true => self.tally.overlaps += 1,
                false => self.tally.changed += 1,
            }
        }
        // A waiter whose node went but whose session lives on has queued again (its Acquire,
        // sent again, made a new node): it is checked by that one from now on.
        for id in requeued {
            let slot = &self.slots[&id];
            let prefix = wazoo_runtime::ClaimTag::session_prefix(slot.session);
            let Some(name) = children[&slot.path].iter().find(|n| n.starts_with(&prefix)) else { continue };
            let node = format!("{}/{name}", slot.path);
            if let Some(stat) = self.checker.check_stat(&node).await? {
                println!("    client {id} queued again, at the back: {node}");
                let slot = self.slots.get_mut(&id).expect("there");
                (slot.node, slot.token) = (node, stat.czxid);
            }
        }
        Ok(())
    }

    /// Lost clients give way to new ones: a holder on a new path, a waiter at the back of the
    /// queue (a lost shared holder's place goes to the first waiter, which then holds).
    async fn replace_lost(&mut self) -> anyhow::Result<()> {
        let gone: Vec<(usize, Role, String)> = self
            .slots
            .iter()
            .filter(|(_, s)| s.claim.is_none() && s.waiter.is_none())
            .map(|(id, s)| (*id, s.role, s.path.clone()))
            .collect();
        for (id, _, path) in gone {
            self.slots.remove(&id);
            if path == self.shared {
                self.add_waiter().await?;
            } else {
                let path = format!("{}/own-{}", self.base, self.next_id);
                self.add_holder(&path).await?;
            }
        }
        // A waiter that took the shared lock over is a holder now: one more waiter.
        let waiters = self.slots.values().filter(|s| s.role == Role::Waiter).count();
        for _ in waiters..WAITERS {
            self.add_waiter().await?;
        }
        Ok(())
    }

    /// The shared path's holder lets go: the first waiter in the queue must get the lock with
    /// the node it has had since it queued.
    async fn queue_order(&mut self) -> anyhow::Result<()> {
        let shared = self.shared.clone();
        let mut waiters: Vec<(String, usize)> = self
            .slots
            .iter()
            .filter(|(_, s)| s.role == Role::Waiter && s.waiter.is_some())
            .map(|(id, s)| (s.node[s.node.len().saturating_sub(10)..].to_string(), *id))
            .collect();
        waiters.sort();
        let Some(&(_, first)) = waiters.first() else { return Ok(()) };
        let holder =
            self.slots.iter().find(|(_, s)| s.path == shared && s.role == Role::Holder && s.claim.is_some());
        match holder.map(|(id, _)| *id) {
            Some(holder) => {
                let mut slot = self.slots.remove(&holder).expect("there");
                slot.task.abort();
                let claim = slot.claim.take().expect("held");
                match Arc::try_unwrap(claim) {
                    Ok(claim) => claim.release().await?,
                    Err(claim) => drop(claim),
                }
            }
            None => println!(
                "\nno holder of the shared path is left (lost): the first waiter must be given the lock once its node goes"
            ),
        }
        let released = Instant::now();
        let given = loop {
            let report = tokio::time::timeout(Duration::from_secs(20), self.reports.recv()).await;
            match report {
                Ok(Some(Report::Acquired { id, claim, .. })) => break Some((id, claim)),
                Ok(Some(other)) => self.settle(other, &mut HashMap::new(), None).await,
                Ok(None) | Err(_) => break None,
            }
        };
        match given {
            Some((id, claim)) => {
                let slot = &self.slots[&id];
                let node = full(&slot.path, claim.node());
                let kept = id == first && node == slot.node && claim.token() == slot.token;
                println!(
                    "\nqueue order after {} kills: waiter {id} got the shared lock {} after its holder let go (or, \
                     the holder lost, after this check began), \
                     node {node}, token {}: {}",
                    self.tally.affected.len(),
                    ms(released.elapsed()),
                    claim.token(),
                    if kept {
                        "the first in line, with the node it queued"
                    } else {
                        "NOT the first in line with its own node"
                    }
                );
                if !kept {
                    let line = format!(
                        "!!! BENCH FAILURE: expected waiter {first} ({}) to get the lock, got waiter {id} with {node}",
                        self.slots.get(&first).map(|s| s.node.as_str()).unwrap_or("lost since")
                    );
                    println!("{line}");
                    self.failures.push(line);
                    self.tally.changed += 1;
                }
            }
            None => {
                let line =
                    "!!! BENCH FAILURE: no waiter got the shared lock within 20 s of its release".to_string();
                println!("{line}");
                self.failures.push(line);
                self.tally.stuck += 1;
            }
        }
        Ok(())
    }

    fn summary(&mut self) {
        let t = &mut self.tally;
        let row = |what: &str, samples: &mut Vec<Duration>| {
            if samples.is_empty() {
                println!("| {what} | 0 | - | - | - |");
            } else {
                let max = *samples.iter().max().unwrap();
                println!(
                    "| {what} | {} | {} | {} | {} |",
                    samples.len(),
                    ms(percentile(samples, 50.0)),
                    ms(percentile(samples, 99.0)),
                    ms(max)
                );
            }
        };
        println!();
        println!(
            "| fail-over, per client (from the instant before the SIGKILL) | samples | p50 | p99 | max |"
        );
        println!("|---|---:|---:|---:|---:|");
        let mut all: Vec<Duration> = t.holders.iter().chain(&t.waiters).copied().collect();
        row("**every client: safe on another member**", &mut all);
        row("holders: claim resumed on another member (taken up, then `Resume`)", &mut t.holders);
        row("waiters: session taken up by another member (`taken_up_after`)", &mut t.waiters);
        row("holders: session taken up (`taken_up_after`), before the `Resume`", &mut t.taken_holders);
        row("every client: noticed (`jeopardy`)", &mut t.noticed);
        println!();
        println!("| fail-over, per kill | kills | p50 | p99 | max |");
        println!("|---|---:|---:|---:|---:|");
        row("**SIGKILL → the last of its clients safe**", &mut t.kills);
        let mut affected = t.affected.clone();
        affected.sort_unstable();
        let pick = |p: f64| {
            if affected.is_empty() {
                0
            } else {
                affected[((p / 100.0) * (affected.len() - 1) as f64).round() as usize]
            }
        };
        println!(
            "| clients on the killed member | {} | {} | {} | {} |",
            affected.len(),
            pick(50.0),
            pick(99.0),
            affected.last().copied().unwrap_or(0)
        );
        println!();
        println!("| count | |");
        println!("|---|---:|");
        println!("| kills | {} |", t.affected.len());
        println!("| kills whose clients were all safe again | {} |", t.kills.len());
        println!(
            "| claims held through a kill of their member (same node, same token) | {} |",
            t.claims_through
        );
        println!("| waiters taken up through a kill of their member | {} |", t.waiters_through);
        println!("| **claims or waiters lost** | {} |", t.lost);
        println!("| **neither safe nor lost within {:?} of the kill** | {} |", ROUND_LIMIT, t.stuck);
        println!("| **changed or missing nodes / tokens** | {} |", t.changed);
        println!("| **overlaps (two holders of one path)** | {} |", t.overlaps);
        println!("| take-ups of clients whose member was not killed | {} |", t.unplanned);
        if !t.other_events.is_empty() {
            println!();
            println!("Other warnings the clients logged:");
            for (message, n) in &t.other_events {
                println!("- {n}× {message}");
            }
        }
        self.logs();
        if !self.failures.is_empty() {
            println!();
            println!("!!! {} BENCH FAILURES:", self.failures.len());
            for line in self.failures.iter().take(50) {
                println!("{line}");
            }
        }
    }

    /// The daemons' logs: warnings and errors by message, and the adoptions' durations.
    fn logs(&self) {
        let mut by_message: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut adoptions: Vec<Duration> = Vec::new();
        let mut clients_adopted: Vec<usize> = Vec::new();
        let mut empty_adoptions = 0;
        for n in 0..self.started {
            let Ok(text) = std::fs::read_to_string(self.bench.scratch.join(format!("daemon-{n:03}.log")))
            else {
                continue;
            };
            for line in text.lines() {
                if line.contains("adopted a member's sessions") {
                    if let Some(took) = field(line, "took_ms").and_then(|v| v.parse::<u64>().ok()) {
                        adoptions.push(Duration::from_millis(took));
                    }
                    if let Some(c) = field(line, "clients").and_then(|v| v.parse::<usize>().ok()) {
                        clients_adopted.push(c);
                        if c == 0 && field(line, "sessions") == Some("0") {
                            empty_adoptions += 1;
                        }
                    }
                }
                let level = ["ERROR", "WARN"].into_iter().find(|l| line.contains(&format!(" {l} ")));
                if let Some(level) = level {
                    // The message: after the target, without the fields.
                    let rest = line.split_once(&format!(" {level} ")).map(|(_, r)| r).unwrap_or(line);
                    let rest = rest.split_once(": ").map(|(_, m)| m).unwrap_or(rest);
                    let message: String = rest
                        .split_whitespace()
                        .filter(|w| !w.contains('='))
                        .collect::<Vec<_>>()
                        .join(" ")
                        .chars()
                        .take(140)
                        .collect();
                    *by_message.entry((level.to_string(), message)).or_default() += 1;
                }
            }
        }
        println!();
        if !adoptions.is_empty() {
            let max = *adoptions.iter().max().unwrap();
            println!(
                "Adoptions in the daemons' logs (`adopted a member's sessions`): {}, took p50 {} / max {}, \
                 {} client sessions adopted in all; {} of them took nothing (`sessions=0 clients=0`: a Reattach that \
                 came while the member's adoption was under way and went through it again, one at a time)",
                adoptions.len(),
                ms(percentile(&mut adoptions, 50.0)),
                ms(max),
                clients_adopted.iter().sum::<usize>(),
                empty_adoptions
            );
        }
        if by_message.is_empty() {
            println!("The daemons logged no warning or error.");
        } else {
            println!("Warnings and errors in the daemons' logs ({} daemons started):", self.started);
            println!();
            println!("| level | message (fields left out) | lines |");
            println!("|---|---|---:|");
            for ((level, message), n) in &by_message {
                println!("| {level} | {} | {n} |", message.replace('|', "\\|"));
            }
        }
    }
}

/// A waiter: an Acquire on `path` in `session` that waits, sent again (with its claim id) through
/// the member that takes the session up when its own goes: what `Client::lock` does.
async fn wait_in_line(
    id: usize,
    session: wazoo_client::Session,
    path: String,
    view: Arc<Mutex<WaiterView>>,
    tx: mpsc::UnboundedSender<Report>,
) {
    let mut request = pb::AcquireRequest {
        session: session.id(),
        path,
        family: pb::Family::Lock as i32,
        claim_id: uuid::Uuid::new_v4().simple().to_string(),
        ..Default::default()
    };
    loop {
        let generation = session.generation();
        let current = session.client();
        let mut recipes = current.recipes();
        let acquired = tokio::select! {
            acquired = recipes.acquire(request.clone()) => acquired,
            why = session.ended() => Err(tonic::Status::unavailable(why)),
        };
        match acquired {
            Ok(claim) => {
                let at = Instant::now();
                let (addr, taken_ups) = (current.addr().to_string(), session.generation());
                let _ = match current.follow(session, claim.into_inner()).await {
                    Ok(claim) => tx.send(Report::Acquired { id, claim, at, addr, taken_ups }),
                    Err(e) => tx.send(Report::Failed { id, why: format!("following the claim: {e}") }),
                };
                return;
            }
            Err(status) if wazoo_client::error_kind(&status).is_none() && session.in_group() => {
                match session.taken_up_after(generation).await {
                    Some(next) => {
                        let at = Instant::now();
                        *view.lock().unwrap() =
                            WaiterView { addr: next.addr().to_string(), generation: session.generation() };
                        let _ = tx.send(Report::TakenUp { id, at });
                        request.retry = true;
                    }
                    None => {
                        let why = session.ended().await;
                        let _ = tx.send(Report::Lost {
                            id,
                            why: format!("{}; the session ended: {why}", status.message()),
                        });
                        return;
                    }
                }
            }
            Err(status) => {
                let _ = tx.send(Report::Lost {
                    id,
                    why: format!("Acquire failed: {}", wazoo_client::Error::from(status)),
                });
                return;
            }
        }
    }
}

/// The children listed, none if the parent is gone.
fn or_none(
    listed: Result<Vec<String>, zookeeper_client::Error>,
) -> Result<Vec<String>, zookeeper_client::Error> {
    match listed {
        Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
        other => other,
    }
}

/// `node` as a full path under `path`.
fn full(path: &str, node: &str) -> String {
    match node.starts_with('/') {
        true => node.to_string(),
        false => format!("{path}/{node}"),
    }
}

/// The value of `name=VALUE` in a log line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name}="))? + name.len() + 1;
    line[start..].split_whitespace().next()
}

/// xorshift64*: the victims' order, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
