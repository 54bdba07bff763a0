//! Prometheus metrics and health for `wazoo serve`, kept with the `prometheus-client` crate and
//! served by [`serve`]: `GET /metrics` (OpenMetrics text) and `GET /healthz` (200 `ok` while the
//! ZooKeeper session of every served host is up, else 503 and why, in one line). Other routes
//! (the console's) are merged in beside them.
//!
//! Names follow the Prometheus and OpenMetrics naming guides: every family of the daemon's own
//! is prefixed `wazoo_`, units are suffixes (`_seconds`, `_bytes`), counters are typed
//! `counter` and sampled as `NAME_total`, the build is an `info` family sampled as
//! `wazoo_build_info`, and the process's own families are the standard `process_*` ones. Every
//! family's `# HELP` and `# TYPE` are written from the start, before any event, and the series a
//! served tenant will have are there at zero once it is served (`absent()` alerts hold).
//!
//! Every `wazoo_` family but `wazoo_build_info` has a `tenant` label: the tenant's name, or
//! `""` in a single-tenant daemon (which Prometheus reads as no label). A tenant is never part
//! of a metric name or of another label. The full list, with labels and meanings, is
//! `docs/src/reference/metrics.md`.
//!
//! Recorded as they happen:
//! - `wazoo_calls_total{tenant,method,recipe,outcome}`: API calls by outcome ([`outcome`]:
//!   `ok`; `contended` and `timeout`, a claim refused by contention, which are no errors; else
//!   the error's kind, e.g. `no-node`), and `wazoo_call_seconds{tenant,method,recipe}`
//!   (histogram), the call's own service time: a claim's wait in its queue is not in it
//!   ([`Metrics::waiting`]);
//! - `wazoo_claim_wait_seconds{tenant,family}` and `wazoo_claim_held_seconds{tenant,family}`
//!   (histograms up to hours): time to acquire, and time held; the gauges
//!   `wazoo_claims_waiting{tenant,family}` and `wazoo_claims_held{tenant,family}`;
//! - `wazoo_claims_lost_total{tenant,family,reason}` ([`loss_reason`]),
//!   `wazoo_leadership_changes_total{tenant}`;
//! - `wazoo_queue_depth{tenant,queue}` (gauge): items in a queue the daemon's clients use;
//! - `wazoo_recipe_swaps_total{tenant,recipe}`: component versions installed over an earlier
//!   one; `wazoo_recipe_refusals_total{tenant,recipe}`: component files refused.
//!
//! Read from each served host at every scrape (a host no longer served drops out):
//! - `wazoo_compiles_total{tenant}`, `wazoo_cache_hits_total{tenant}`: components compiled, and
//!   taken from the on-disk compile cache, by the tenant's registry;
//! - `wazoo_limit_hits_total{tenant}`, `wazoo_traps_total{tenant}`: guest calls refused by a
//!   sandbox limit, and guest traps;
//! - `wazoo_client_sessions{tenant}`, `wazoo_live_handles{tenant}`, `wazoo_warm_handles{tenant}`,
//!   `wazoo_instances{tenant}` (gauges): client sessions open, the recipe handles they hold, the
//!   lock-family handles kept warm for the next acquire, and the recipe instances alive (claims
//!   held as data keep none);
//! - `wazoo_zookeeper_session_up{tenant}` (gauge): 1 while the host's ZooKeeper session is up,
//!   as `/healthz` judges it, else 0.
//!
//! And `wazoo_build_info{version,wit}` (1), and the process's `process_*` families (Linux).

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::LabelValueEncoder;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use wazoo_runtime::{ClaimKind, Lost, Mode, SessionEnd, Want};

/// Upper bounds of the service-time histogram's buckets, in seconds (`+Inf` is implied): from
/// half a millisecond, and up to hours for the calls that wait by design other than claims
/// (a queue's take, a barrier's wait).
const CALL_BUCKETS: [f64; 20] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
    900.0, 3600.0, 14400.0,
];

/// Upper bounds of the wait and hold histograms' buckets, in seconds: 1 ms to 4 h.
const CLAIM_BUCKETS: [f64; 22] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0, 1800.0, 3600.0, 7200.0, 14400.0,
];

/// The `reason`s of `wazoo_claims_lost_total`, each at zero from a family's first claim on.
pub const LOSS_REASONS: [&str; 6] =
    ["session-expired", "session-closed", "cut-off", "node-deleted", "revoked", "client-session-ended"];

/// The most queues whose depth is followed per tenant (`wazoo_queue_depth`): a client cannot
/// grow the metrics without end.
pub const MAX_QUEUES: usize = 32;

/// How long `/healthz` waits for word of every ZooKeeper session (one being rebuilt may take
/// longer) before it answers 503.
const HEALTH_WAIT: Duration = Duration::from_secs(5);

/// How long a scrape waits for word of every ZooKeeper session before it counts one down.
const SCRAPE_WAIT: Duration = Duration::from_secs(2);

/// How long a metrics connection may stay open: one request, its answer, and it is closed.
const CONNECTION_LIMIT: Duration = Duration::from_secs(10);

/// The content type of `/metrics`.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label value, escaped as the text format wants it (`\\`, `\"`, `\n`): recipe names and
/// methods come from clients.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Label(String);

impl Label {
    fn of(value: &str) -> Label {
        Label(value.to_owned())
    }

    fn tenant(tenant: Option<&str>) -> Label {
        Label::of(tenant.unwrap_or(""))
    }
}

impl EncodeLabelValue for Label {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tenant: Label,
    method: Label,
    recipe: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    #[prometheus(flatten)]
    call: CallLabels,
    outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecipeLabels {
    tenant: Label,
    recipe: Label,
}

impl RecipeLabels {
    fn of(tenant: Option<&str>, recipe: &str) -> RecipeLabels {
        RecipeLabels { tenant: Label::tenant(tenant), recipe: Label::of(recipe) }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabels {
    tenant: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FamilyLabels {
    tenant: Label,
    family: Label,
}

impl FamilyLabels {
    fn of(tenant: Option<&str>, family: &str) -> FamilyLabels {
        FamilyLabels { tenant: Label::tenant(tenant), family: Label::of(family) }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LossLabels {
    #[prometheus(flatten)]
    claim: FamilyLabels,
    reason: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    tenant: Label,
    queue: Label,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn call_histogram() -> Histogram {
    Histogram::new(CALL_BUCKETS)
}

fn claim_histogram() -> Histogram {
    Histogram::new(CLAIM_BUCKETS)
}

/// The family a claim of `kind` is counted under (`family` label); none for the kinds that are
/// no claim a client contends for (an ephemeral queue item, a double barrier's participant, a
/// kept instance).
pub fn family_of(kind: ClaimKind) -> Option<&'static str> {
    Some(match kind {
        ClaimKind::Lock => "lock",
        ClaimKind::Read => "read-lock",
        ClaimKind::Write => "write-lock",
        ClaimKind::Lease => "semaphore",
        ClaimKind::Leadership => "election",
        ClaimKind::Membership => "group",
        ClaimKind::Described => "described",
        ClaimKind::QueueClaim => "queue",
        ClaimKind::QueueItem | ClaimKind::Participant | ClaimKind::Instance => return None,
    })
}

/// The family a contender for `want` waits under: the one its claim is held under.
pub fn family_of_want(want: &Want) -> &'static str {
    match want {
        Want::Lock => "lock",
        Want::ReadWrite(Mode::Read) => "read-lock",
        Want::ReadWrite(Mode::Write) => "write-lock",
        Want::Lease { .. } => "semaphore",
        Want::Leadership { .. } => "election",
        Want::Membership { .. } => "group",
        Want::Claim { .. } => "described",
    }
}

/// The `reason` a loss is counted under in `wazoo_claims_lost_total`: the `LossReason` a client
/// is told, in kebab case, except that a session closed (`session-closed`: the daemon or the
/// tenant stopping) is kept apart from one expired.
pub fn loss_reason(why: &Lost) -> &'static str {
    match why {
        Lost::Session(SessionEnd::Closed) => "session-closed",
        Lost::Session(_) => "session-expired",
        Lost::NodeDeleted => "node-deleted",
        Lost::Revoked => "revoked",
        Lost::CutOff(_) => "cut-off",
    }
}

/// The `outcome` of a call that ended with `error` (none: `ok`) after `spent`: a claim not had
/// because another holds it is `contended` when the call only tried (a timeout of 0, the CLI's
/// `-n`) and `timeout` when its wait ran out; any other error is its `ErrorKind` in kebab case
/// (`no-node`, `unknown-session`, `trapped`, …), or, for a status without a kind, its gRPC code
/// in kebab case (`cancelled`).
pub fn outcome(error: Option<&tonic::Status>, spent: Spent) -> String {
    use wazoo_proto::ErrorKind;
    let Some(status) = error else { return "ok".to_string() };
    match ErrorKind::of(status) {
        Some(ErrorKind::Timeout) if spent.tried => "contended".to_string(),
        Some(kind) => {
            let name = kind.as_str_name();
            name.strip_prefix("ERROR_KIND_").unwrap_or(name).to_ascii_lowercase().replace('_', "-")
        }
        None => {
            let mut kebab = String::new();
            for (i, c) in format!("{:?}", status.code()).chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(c.to_ascii_lowercase());
            }
            kebab
        }
    }
}

tokio::task_local! {
    /// What the call being measured has spent waiting so far.
    static SPENT: Cell<Spent>;
}

/// What a measured call spent waiting in a claim's queue ([`Metrics::waiting`]), and whether
/// its last claim only tried (a timeout of 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub waited: Duration,
    pub tried: bool,
}

/// Runs `call`, with what [`Metrics::waiting`] reports inside it: its output, and what it
/// spent waiting.
pub async fn spending<T>(call: impl Future<Output = T>) -> (T, Spent) {
    SPENT
        .scope(Cell::new(Spent::default()), async {
            let out = call.await;
            (out, SPENT.with(Cell::get))
        })
        .await
}

/// Decrements a gauge when dropped (a wait cancelled with its call included).
struct Less(Gauge);

impl Drop for Less {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A claim held, in `wazoo_claims_held` until it ends: when dropped (let go, or ended with its
/// client session), or [`Held::lost`]; then its time held is observed.
#[derive(Debug)]
pub struct Held {
    claim: FamilyLabels,
    since: Instant,
    gauge: Gauge,
    held_for: Histogram,
    lost: Family<LossLabels, Counter>,
}

impl Held {
    /// The claim is lost for `reason` ([`loss_reason`], or `client-session-ended`): counted, and
    /// no longer held.
    pub fn lost(self, reason: &str) {
        self.lost.get_or_create(&LossLabels { claim: self.claim.clone(), reason: Label::of(reason) }).inc();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gauge.dec();
        self.held_for.observe(self.since.elapsed().as_secs_f64());
    }
}

/// A queue whose depth is followed, in `wazoo_queue_depth` until dropped.
#[derive(Debug)]
pub struct Depth {
    labels: QueueLabels,
    gauge: Gauge,
    family: Family<QueueLabels, Gauge>,
    followed: Arc<Mutex<HashSet<QueueLabels>>>,
}

impl Depth {
    /// The queue holds `items` now.
    pub fn set(&self, items: u32) {
        self.gauge.set(i64::from(items));
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        lock(&self.followed).remove(&self.labels);
        self.family.remove(&self.labels);
    }
}

/// The families recorded as things happen, each written with its `HELP` and `TYPE` even before
/// its first sample.
#[derive(Clone, Debug)]
struct Recorded {
    calls: Family<OutcomeLabels, Counter>,
    latency: Histograms<CallLabels>,
    waited: Histograms<FamilyLabels>,
    held_for: Histograms<FamilyLabels>,
    waiting: Family<FamilyLabels, Gauge>,
    held: Family<FamilyLabels, Gauge>,
    lost: Family<LossLabels, Counter>,
    leaderships: Family<TenantLabels, Counter>,
    queues: Family<QueueLabels, Gauge>,
    swaps: Family<RecipeLabels, Counter>,
    refusals: Family<RecipeLabels, Counter>,
    /// The waits going on, by family: when each began, by a number of its own.
    waits: Arc<Mutex<HashMap<FamilyLabels, BTreeMap<u64, Instant>>>>,
    next_wait: Arc<AtomicU64>,
}

/// A wait going on, in [`Recorded::waits`] until it ends.
struct Wait {
    waits: Arc<Mutex<HashMap<FamilyLabels, BTreeMap<u64, Instant>>>>,
    labels: FamilyLabels,
    id: u64,
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let Some(waits) = lock(&self.waits).get_mut(&self.labels) {
            waits.remove(&self.id);
        }
    }
}

impl Recorded {
    fn new() -> Recorded {
        Recorded {
            calls: Family::default(),
            latency: Family::new_with_constructor(call_histogram as fn() -> Histogram),
            waited: Family::new_with_constructor(claim_histogram as fn() -> Histogram),
            held_for: Family::new_with_constructor(claim_histogram as fn() -> Histogram),
            waiting: Family::default(),
            held: Family::default(),
            lost: Family::default(),
            leaderships: Family::default(),
            queues: Family::default(),
            swaps: Family::default(),
            refusals: Family::default(),
            waits: Arc::default(),
            next_wait: Arc::default(),
        }
    }

    /// A wait of `labels`' family beginning now, until the returned guard is dropped.
    fn wait(&self, labels: &FamilyLabels, started: Instant) -> Wait {
        let id = self.next_wait.fetch_add(1, Ordering::Relaxed);
        lock(&self.waits).entry(labels.clone()).or_default().insert(id, started);
        Wait { waits: self.waits.clone(), labels: labels.clone(), id }
    }
}

/// Writes one family: its descriptor, then its samples (none is fine).
fn family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    metric: &impl EncodeMetric,
) -> std::fmt::Result {
    let samples = encoder.encode_descriptor(name, help, unit, metric.metric_type())?;
    metric.encode(samples)
}

impl Collector for Recorded {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let e = &mut encoder;
        let seconds = Some(&Unit::Seconds);
        family(e, "wazoo_calls", "API calls by method, recipe and outcome.", None, &self.calls)?;
        let help = "API calls' own service time (a claim's wait in its queue is not in it).";
        family(e, "wazoo_call", help, seconds, &self.latency)?;
        let help = "Time to acquire a claim, from the request reaching the recipe to the claim granted.";
        family(e, "wazoo_claim_wait", help, seconds, &self.waited)?;
        let help = "Time a claim was held, from granted to released or lost.";
        family(e, "wazoo_claim_held", help, seconds, &self.held_for)?;
        family(e, "wazoo_claims_waiting", "Claims being waited for now.", None, &self.waiting)?;
        let help = "How long the longest wait going on has lasted (0 when none is).";
        let mut oldest = e.encode_descriptor("wazoo_claim_oldest_wait", help, seconds, MetricType::Gauge)?;
        let now = Instant::now();
        let mut ages: Vec<(FamilyLabels, f64)> = lock(&self.waits)
            .iter()
            .map(|(labels, waits)| {
                let first = waits.values().min().map_or(0.0, |t| now.duration_since(*t).as_secs_f64());
                (labels.clone(), first)
            })
            .collect();
        ages.sort_by(|a, b| (&a.0.tenant.0, &a.0.family.0).cmp(&(&b.0.tenant.0, &b.0.family.0)));
        for (labels, age) in ages {
            ConstGauge::new(age).encode(oldest.encode_family(&labels)?)?;
        }
        family(e, "wazoo_claims_held", "Claims held now.", None, &self.held)?;
        family(e, "wazoo_claims_lost", "Claims lost while held, by reason.", None, &self.lost)?;
        let help = "Leaderships taken through this daemon (each a change of leader).";
        family(e, "wazoo_leadership_changes", help, None, &self.leaderships)?;
        let help = "Items in a queue the daemon's clients put to, take from or count.";
        family(e, "wazoo_queue_depth", help, None, &self.queues)?;
        let help = "Component versions installed over an earlier one.";
        family(e, "wazoo_recipe_swaps", help, None, &self.swaps)?;
        family(e, "wazoo_recipe_refusals", "Component files refused.", None, &self.refusals)
    }
}

/// What a served host reports at each scrape: client sessions open and the recipe handles they
/// hold now; components compiled, and taken from the compile cache, guest calls refused by a
/// sandbox limit, and guest traps since the host started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub client_sessions: u64,
    pub live_handles: u64,
    /// Lock-family handles kept warm for the next Acquire (not held by anyone).
    pub warm_handles: u64,
    /// Recipe instances alive (held, waiting, warm, or in a call).
    pub instances: u64,
    pub compiles: u64,
    pub cache_hits: u64,
    pub limit_hits: u64,
    pub traps: u64,
}

/// A served host as the metrics and `/healthz` see it.
pub trait Source: Send + Sync {
    /// Its tenant; `None` in a single-tenant daemon.
    fn tenant(&self) -> Option<&str>;
    /// Its numbers now.
    fn sample(&self) -> Sample;
    /// `Ok` while its ZooKeeper session is up, else why not (one line).
    fn zookeeper(&self) -> Check<'_>;
}

/// How a [`Source`] answers whether its ZooKeeper session is up.
pub type Check<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// The hosts served, held weakly (a host nothing else holds is gone from the metrics), and
/// whether each one's ZooKeeper session was up at the last scrape.
#[derive(Clone, Debug, Default)]
struct Sources {
    listed: Arc<Mutex<Vec<Weak<dyn Source>>>>,
    up: Arc<Mutex<HashMap<Option<String>, bool>>>,
}

impl Sources {
    /// The hosts still there, by tenant.
    fn live(&self) -> Vec<Arc<dyn Source>> {
        let mut live: Vec<_> = lock(&self.listed).iter().filter_map(Weak::upgrade).collect();
        live.sort_by(|a, b| a.tenant().cmp(&b.tenant()));
        live
    }
}

/// The families read from the served hosts (name, help, whether a counter), in the order of
/// [`Sample::values`].
const COLLECTED: [(&str, &str, bool); 8] = [
    ("wazoo_compiles", "Recipe components compiled (not taken from the cache).", true),
    ("wazoo_cache_hits", "Recipe components taken from the on-disk compile cache.", true),
    ("wazoo_limit_hits", "Guest calls refused by a sandbox limit.", true),
    ("wazoo_traps", "Guest traps (sandbox limits included).", true),
    ("wazoo_client_sessions", "Client sessions currently open.", false),
    ("wazoo_live_handles", "Handles currently held (claims held as data included).", false),
    ("wazoo_warm_handles", "Lock-family handles kept warm for the next acquire.", false),
    ("wazoo_instances", "Recipe instances alive (claims held as data keep none).", false),
];

impl Sample {
    fn values(&self) -> [u64; 8] {
        [
            self.compiles,
            self.cache_hits,
            self.limit_hits,
            self.traps,
            self.client_sessions,
            self.live_handles,
            self.warm_handles,
            self.instances,
        ]
    }
}

impl Collector for Sources {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let live = self.live();
        let samples: Vec<(TenantLabels, Sample)> =
            live.iter().map(|s| (TenantLabels { tenant: Label::tenant(s.tenant()) }, s.sample())).collect();
        for (i, (name, help, counter)) in COLLECTED.into_iter().enumerate() {
            let kind = if counter { MetricType::Counter } else { MetricType::Gauge };
            let mut family = encoder.encode_descriptor(name, help, None, kind)?;
            for (labels, sample) in &samples {
                let (metric, value) = (family.encode_family(labels)?, sample.values()[i]);
                match counter {
                    true => ConstCounter::new(value).encode(metric)?,
                    false => ConstGauge::new(value).encode(metric)?,
                }
            }
        }
        let help = "1 while the host's ZooKeeper session is up (as /healthz judges it), else 0.";
        let mut family =
            encoder.encode_descriptor("wazoo_zookeeper_session_up", help, None, MetricType::Gauge)?;
        let up = lock(&self.up).clone();
        for source in &live {
            let Some(up) = up.get(&source.tenant().map(str::to_owned)) else { continue };
            let labels = TenantLabels { tenant: Label::tenant(source.tenant()) };
            ConstGauge::new(i64::from(*up)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The process's own families, the standard `process_*` ones, read from `/proc/self` at each
/// scrape (Linux; elsewhere only their descriptors).
#[derive(Debug)]
struct Process;

/// What `/proc/self` says of the process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ProcessSample {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    open_fds: u64,
    max_fds: Option<u64>,
    start_time_seconds: f64,
}

impl ProcessSample {
    #[cfg(target_os = "linux")]
    fn read() -> Option<ProcessSample> {
        // SAFETY: sysconf reads a constant of the system; no memory is handed over.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        ProcessSample::parse(&stat, &boot, &limits, open_fds, ticks as f64, page as u64)
    }

    #[cfg(not(target_os = "linux"))]
    fn read() -> Option<ProcessSample> {
        None
    }

    /// Reads `/proc/self/stat` (`stat`, fields after the command's closing parenthesis),
    /// `/proc/stat` (`boot`: its `btime`) and `/proc/self/limits`, with the clock's `ticks` per
    /// second and the `page` size.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn parse(
        stat: &str,
        boot: &str,
        limits: &str,
        open_fds: u64,
        ticks: f64,
        page: u64,
    ) -> Option<ProcessSample> {
        // Field 3 (the state) is the first after the command; field N is at N - 3.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        let btime: u64 = boot.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()?;
        let max_fds = limits
            .lines()
            .find_map(|l| l.strip_prefix("Max open files"))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok());
        Some(ProcessSample {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            start_time_seconds: btime as f64 + field(22)? as f64 / ticks,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)? * page,
            open_fds,
            max_fds,
        })
    }
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let now = ProcessSample::read();
        let (seconds, bytes) = (Some(&Unit::Seconds), Some(&Unit::Bytes));
        let help = "Total user and system CPU time spent in seconds.";
        let cpu = encoder.encode_descriptor("process_cpu", help, seconds, MetricType::Counter)?;
        if let Some(now) = now {
            ConstCounter::new(now.cpu_seconds).encode(cpu)?;
        }
        let gauges: [(&str, &str, Option<&Unit>, Option<f64>); 5] = [
            (
                "process_resident_memory",
                "Resident memory size in bytes.",
                bytes,
                now.map(|n| n.resident_bytes as f64),
            ),
            (
                "process_virtual_memory",
                "Virtual memory size in bytes.",
                bytes,
                now.map(|n| n.virtual_bytes as f64),
            ),
            ("process_open_fds", "Number of open file descriptors.", None, now.map(|n| n.open_fds as f64)),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                None,
                now.and_then(|n| n.max_fds).map(|n| n as f64),
            ),
            (
                "process_start_time",
                "Start time of the process since unix epoch in seconds.",
                seconds,
                now.map(|n| n.start_time_seconds),
            ),
        ];
        for (name, help, unit, value) in gauges {
            let gauge = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
            // Counts and sizes are written as integers, times as they are.
            match value {
                Some(whole) if whole.fract() == 0.0 && whole.abs() < 9e15 => {
                    ConstGauge::new(whole as i64).encode(gauge)?
                }
                Some(value) => ConstGauge::new(value).encode(gauge)?,
                None => {}
            }
        }
        Ok(())
    }
}

/// The daemon's metrics: share it behind an [`Arc`]; every update is a short lock.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    recorded: Recorded,
    sources: Sources,
    /// The queues whose depth is followed.
    followed: Arc<Mutex<HashSet<QueueLabels>>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// No metrics recorded and no host listed yet.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let recorded = Recorded::new();
        let sources = Sources::default();
        let mut wit: Vec<String> =
            wazoo_runtime::WIT_PACKAGES.iter().map(|(p, v)| format!("{p}@{v}")).collect();
        wit.sort();
        let build = vec![
            ("version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
            ("wit".to_string(), wit.join(", ")),
        ];
        let help = "The daemon's version and the WIT packages it offers (always 1)";
        registry.register("wazoo_build", help, Info::new(build));
        registry.register_collector(Box::new(recorded.clone()));
        registry.register_collector(Box::new(sources.clone()));
        registry.register_collector(Box::new(Process));
        Metrics { registry, recorded, sources, followed: Arc::default() }
    }

    /// Records one API call of `tenant` (`None` in a single-tenant daemon): `method` e.g.
    /// `"Acquire"`, `recipe` e.g. `"lock"`, `outcome` `"ok"` or another of [`outcome`]'s, and
    /// its service time.
    pub fn call(&self, tenant: Option<&str>, method: &str, recipe: &str, outcome: &str, elapsed: Duration) {
        let call = CallLabels {
            tenant: Label::tenant(tenant),
            method: Label::of(method),
            recipe: Label::of(recipe),
        };
        self.recorded.latency.get_or_create(&call).observe(elapsed.as_secs_f64());
        self.recorded.calls.get_or_create(&OutcomeLabels { call, outcome: Label::of(outcome) }).inc();
    }

    /// Runs `wait`, a contender's wait for a claim of `family` with `timeout`: counted in
    /// `wazoo_claims_waiting` meanwhile, observed in `wazoo_claim_wait_seconds` if it ends with
    /// the claim, and told to the call measured around it ([`spending`]), whose service time
    /// it is not part of.
    pub async fn waiting<T, E>(
        &self,
        tenant: Option<&str>,
        family: &str,
        timeout: Option<Duration>,
        wait: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let labels = FamilyLabels::of(tenant, family);
        let gauge = self.recorded.waiting.get_or_create(&labels).clone();
        gauge.inc();
        let _waiting = Less(gauge);
        let started = Instant::now();
        let going_on = self.recorded.wait(&labels, started);
        let out = wait.await;
        drop(going_on);
        let waited = started.elapsed();
        let _ = SPENT.try_with(|spent| {
            let before = spent.get();
            spent.set(Spent { waited: before.waited + waited, tried: timeout == Some(Duration::ZERO) });
        });
        if out.is_ok() {
            self.recorded.waited.get_or_create(&labels).observe(waited.as_secs_f64());
        }
        out
    }

    /// A claim of `kind` held from now on by a client of `tenant`, counted until the returned
    /// meter ends; none for a kind that is no claim ([`family_of`]). Its family's losses are
    /// at zero from then on.
    pub fn held(&self, tenant: Option<&str>, kind: ClaimKind) -> Option<Held> {
        let claim = FamilyLabels::of(tenant, family_of(kind)?);
        for reason in LOSS_REASONS {
            let _ = self
                .recorded
                .lost
                .get_or_create(&LossLabels { claim: claim.clone(), reason: Label::of(reason) });
        }
        let gauge = self.recorded.held.get_or_create(&claim).clone();
        gauge.inc();
        let held_for = self.recorded.held_for.get_or_create(&claim).clone();
        Some(Held { claim, since: Instant::now(), gauge, held_for, lost: self.recorded.lost.clone() })
    }

    /// Counts a leadership taken by a client of `tenant`.
    pub fn leadership_changed(&self, tenant: Option<&str>) {
        self.recorded.leaderships.get_or_create(&TenantLabels { tenant: Label::tenant(tenant) }).inc();
    }

    /// Follows the depth of queue `path` of `tenant`, unless it is followed already or
    /// [`MAX_QUEUES`] of the tenant's are: its series lives as long as the returned [`Depth`].
    pub fn follow_queue(&self, tenant: Option<&str>, path: &str) -> Option<Depth> {
        let labels = QueueLabels { tenant: Label::tenant(tenant), queue: Label::of(path) };
        let mut followed = lock(&self.followed);
        let tenants = followed.iter().filter(|q| q.tenant == labels.tenant).count();
        if tenants >= MAX_QUEUES || !followed.insert(labels.clone()) {
            return None;
        }
        let gauge = self.recorded.queues.get_or_create(&labels).clone();
        Some(Depth { labels, gauge, family: self.recorded.queues.clone(), followed: self.followed.clone() })
    }

    /// The queues of `tenant` whose depth is followed, each with its depth now, by path.
    pub fn queue_depths(&self, tenant: Option<&str>) -> Vec<(String, i64)> {
        let tenant = Label::tenant(tenant);
        let followed: Vec<QueueLabels> =
            lock(&self.followed).iter().filter(|q| q.tenant == tenant).cloned().collect();
        let mut depths: Vec<(String, i64)> = followed
            .into_iter()
            .map(|q| (q.queue.0.clone(), self.recorded.queues.get_or_create(&q).get()))
            .collect();
        depths.sort();
        depths
    }

    /// Counts a new version of `recipe` installed over an earlier one.
    pub fn swapped(&self, tenant: Option<&str>, recipe: &str) {
        self.recorded.swaps.get_or_create(&RecipeLabels::of(tenant, recipe)).inc();
    }

    /// Counts a refused file of `recipe`.
    pub fn refused(&self, tenant: Option<&str>, recipe: &str) {
        self.recorded.refusals.get_or_create(&RecipeLabels::of(tenant, recipe)).inc();
    }

    /// `recipe` is served to `tenant` (or was refused): its swaps and refusals are there, at
    /// zero until the first.
    pub fn recipe(&self, tenant: Option<&str>, recipe: &str) {
        let labels = RecipeLabels::of(tenant, recipe);
        let _ = self.recorded.swaps.get_or_create(&labels);
        let _ = self.recorded.refusals.get_or_create(&labels);
    }

    /// Lists `source` as a served host (again is fine). It replaces a listed host of the same
    /// tenant, and stays listed while something else holds it. Its tenant's leadership changes
    /// are there, at zero until the first.
    pub fn list<S: Source + 'static>(&self, source: &Arc<S>) {
        let source: Arc<dyn Source> = source.clone();
        let _ =
            self.recorded.leaderships.get_or_create(&TenantLabels { tenant: Label::tenant(source.tenant()) });
        let weak = Arc::downgrade(&source);
        let mut listed = lock(&self.sources.listed);
        listed.retain(|w| {
            w.upgrade().is_some_and(|other| Arc::ptr_eq(&other, &source) || other.tenant() != source.tenant())
        });
        if !listed.iter().any(|w| w.ptr_eq(&weak)) {
            listed.push(weak);
        }
    }

    /// Lists `source` (as [`Metrics::list`]) until the returned guard is dropped.
    pub fn listing<S: Source + 'static>(self: &Arc<Self>, source: &Arc<S>) -> Listing {
        self.list(source);
        let source: Arc<dyn Source> = source.clone();
        Listing { metrics: Arc::downgrade(self), source: Arc::downgrade(&source) }
    }

    /// Everything recorded so far, and what the listed hosts report now, in the OpenMetrics text
    /// format (ending `# EOF`); each host's ZooKeeper session as the last [`Metrics::scrape`]
    /// found it.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!("encoding the metrics: {e}");
        }
        out
    }

    /// [`Metrics::encode`], after asking every listed host whether its ZooKeeper session is up
    /// (as `/healthz` does; one that gives no word within 2 s counts as down).
    pub async fn scrape(&self) -> String {
        let mut checks = tokio::task::JoinSet::new();
        for source in self.sources.live() {
            checks.spawn(async move {
                let up = matches!(tokio::time::timeout(SCRAPE_WAIT, source.zookeeper()).await, Ok(Ok(())));
                (source.tenant().map(str::to_owned), up)
            });
        }
        let mut up = HashMap::new();
        while let Some(checked) = checks.join_next().await {
            if let Ok((tenant, is_up)) = checked {
                up.insert(tenant, is_up);
            }
        }
        *lock(&self.sources.up) = up;
        self.encode()
    }

    /// `Ok` while every listed host's ZooKeeper session is up; else the first reason found (one
    /// line, naming the tenant). No host listed yet is not healthy.
    pub async fn health(&self) -> Result<(), String> {
        let sources = self.sources.live();
        if sources.is_empty() {
            return Err("no host is served yet".to_string());
        }
        let deadline = tokio::time::Instant::now() + HEALTH_WAIT;
        for source in sources {
            let who = source.tenant().map(|t| format!("tenant {t:?}: ")).unwrap_or_default();
            match tokio::time::timeout_at(deadline, source.zookeeper()).await {
                Ok(Ok(())) => {}
                Ok(Err(why)) => return Err(format!("{who}{why}")),
                Err(_) => return Err(format!("{who}no word of ZooKeeper within {HEALTH_WAIT:?}")),
            }
        }
        Ok(())
    }
}

/// Keeps a host listed in the metrics; dropping it takes the host out.
pub struct Listing {
    metrics: Weak<Metrics>,
    source: Weak<dyn Source>,
}

impl Drop for Listing {
    fn drop(&mut self) {
        if let Some(metrics) = self.metrics.upgrade() {
            lock(&metrics.sources.listed).retain(|w| !w.ptr_eq(&self.source) && w.strong_count() > 0);
        }
    }
}

/// Locks `mutex`, carrying on if another thread panicked while holding it: the list it guards
/// is consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves `GET /metrics` and `GET /healthz` (`HEAD` too; other methods get 405, other paths
/// 404), and `routes` merged beside them, on `listener` until this future is dropped.
///
/// `routes` are another module's pages and streams (the web console's): a `Router` whose state
/// is already given, e.g. `Router::new().route("/", get(page)).with_state(console)`, or
/// `Router::new()` for none; its paths must not be `/metrics` or `/healthz` (axum panics on a
/// route given twice). Every answer closes its connection, and a connection open for 10 s is
/// closed whatever it is doing, so none outlives the server long: a server-sent events stream
/// among `routes` ends then too, and the browser's `EventSource` opens it again.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, routes: Router) {
    serve_for(listener, metrics, CONNECTION_LIMIT, routes).await
}

async fn serve_for(listener: TcpListener, metrics: Arc<Metrics>, limit: Duration, routes: Router) {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(healthz))
        .with_state(metrics)
        .merge(routes)
        .layer(axum::middleware::map_response(close));
    if let Err(e) = axum::serve(Limited { listener, limit }, app).await {
        tracing::warn!("metrics server stopped: {e}");
    }
}

async fn scrape(State(metrics): State<Arc<Metrics>>) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS)], metrics.scrape().await).into_response()
}

async fn healthz(State(metrics): State<Arc<Metrics>>) -> Response {
    match metrics.health().await {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// One request per connection: scrapers are few, and a client that reads to the end of the
/// stream gets its answer.
async fn close(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A listener whose connections end after `limit`.
struct Limited {
    listener: TcpListener,
    limit: Duration,
}

impl axum::serve::Listener for Limited {
    type Io = Timed;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Timed, SocketAddr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.listener).await;
        (Timed { io, deadline: Box::pin(tokio::time::sleep(self.limit)) }, addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// A connection whose reads and writes fail once its deadline has passed (waking an idle one).
struct Timed {
    io: TcpStream,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Timed {
    /// Runs `op` on the stream, unless the deadline has passed.
    fn within<T>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        op: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let this = self.get_mut();
        match this.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "open too long"))),
            Poll::Pending => op(Pin::new(&mut this.io), cx),
        }
    }
}

impl AsyncRead for Timed {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.within(cx, |io, cx| io.poll_read(cx, buf))
    }
}

impl AsyncWrite for Timed {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.within(cx, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.within(cx, |io, cx| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeSet;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A served host of `tenant` whose numbers derive from `n`, and whose ZooKeeper session is
    /// up or not.
    struct Fake(Option<&'static str>, u64, Result<(), &'static str>);

    impl Source for Fake {
        fn tenant(&self) -> Option<&str> {
            self.0
        }

        fn sample(&self) -> Sample {
            let n = self.1;
            Sample {
                client_sessions: n + 1,
                live_handles: n + 2,
                warm_handles: n + 3,
                instances: n + 4,
                compiles: n,
                cache_hits: n * 10,
                limit_hits: n * 100,
                traps: n * 1000,
            }
        }

        fn zookeeper(&self) -> Check<'_> {
            Box::pin(async { self.2.map_err(str::to_string) })
        }
    }

    fn fake(tenant: Option<&'static str>, n: u64, zookeeper: Result<(), &'static str>) -> Arc<Fake> {
        Arc::new(Fake(tenant, n, zookeeper))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Every family, as its `# TYPE` line names it, before any event.
    const FAMILIES: [&str; 28] = [
        "wazoo_build info",
        "wazoo_calls counter",
        "wazoo_call_seconds histogram",
        "wazoo_claim_wait_seconds histogram",
        "wazoo_claim_held_seconds histogram",
        "wazoo_claims_waiting gauge",
        "wazoo_claim_oldest_wait_seconds gauge",
        "wazoo_claims_held gauge",
        "wazoo_claims_lost counter",
        "wazoo_leadership_changes counter",
        "wazoo_queue_depth gauge",
        "wazoo_recipe_swaps counter",
        "wazoo_recipe_refusals counter",
        "wazoo_compiles counter",
        "wazoo_cache_hits counter",
        "wazoo_limit_hits counter",
        "wazoo_traps counter",
        "wazoo_client_sessions gauge",
        "wazoo_live_handles gauge",
        "wazoo_warm_handles gauge",
        "wazoo_instances gauge",
        "wazoo_zookeeper_session_up gauge",
        "process_cpu_seconds counter",
        "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge",
        "process_open_fds gauge",
        "process_max_fds gauge",
        "process_start_time_seconds gauge",
    ];

    /// The names of the `wazoo_` samples of `text` (the process's are left out).
    fn own_samples(text: &str) -> Vec<&str> {
        text.lines().filter(|l| l.starts_with("wazoo_")).filter_map(|l| l.split(['{', ' ']).next()).collect()
    }

    /// The lines of `text` that start with `prefix`, sorted (label sets come in no set order).
    fn lines(text: &str, prefix: &str) -> Vec<String> {
        let mut found: Vec<_> = text.lines().filter(|l| l.starts_with(prefix)).map(str::to_string).collect();
        found.sort();
        found
    }

    #[test]
    fn tenants_are_labels_and_totals_are_counters() {
        let m = Metrics::new();
        m.call(Some("alice"), "Acquire", "lock", "ok", ms(1));
        m.call(Some("alice"), "Acquire", "lock", "ok", ms(2));
        m.call(Some("mallory"), "Invoke", "misbehave", "internal", ms(3));
        m.swapped(Some("alice"), "lock");
        m.refused(Some("mallory"), "misbehave");
        m.refused(Some("mallory"), "misbehave");
        let (alice, mallory) = (fake(Some("alice"), 3, Ok(())), fake(Some("mallory"), 5, Ok(())));
        m.list(&alice);
        m.list(&mallory);
        let text = m.encode();

        assert_eq!(
            lines(&text, "wazoo_calls_total{"),
            [
                r#"wazoo_calls_total{tenant="alice",method="Acquire",recipe="lock",outcome="ok"} 2"#,
                r#"wazoo_calls_total{tenant="mallory",method="Invoke",recipe="misbehave",outcome="internal"} 1"#,
            ]
        );
        let swaps = r#"wazoo_recipe_swaps_total{tenant="alice",recipe="lock"} 1"#;
        assert_eq!(lines(&text, "wazoo_recipe_swaps_total{"), [swaps]);
        let refusals = r#"wazoo_recipe_refusals_total{tenant="mallory",recipe="misbehave"} 2"#;
        assert_eq!(lines(&text, "wazoo_recipe_refusals_total{"), [refusals]);
        // Each tenant's own registry and host numbers, not the last writer's.
        for (family, a, m) in [
            ("wazoo_compiles_total", 3, 5),
            ("wazoo_cache_hits_total", 30, 50),
            ("wazoo_limit_hits_total", 300, 500),
            ("wazoo_traps_total", 3000, 5000),
            ("wazoo_client_sessions", 4, 6),
            ("wazoo_live_handles", 5, 7),
            ("wazoo_warm_handles", 6, 8),
            ("wazoo_instances", 7, 9),
        ] {
            let want =
                [format!("{family}{{tenant=\"alice\"}} {a}"), format!("{family}{{tenant=\"mallory\"}} {m}")];
            assert_eq!(lines(&text, &format!("{family}{{")), want, "{text}");
        }

        let types: BTreeSet<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        assert_eq!(types, FAMILIES.iter().copied().collect(), "{text}");
        // Tenants are in labels only, and no series comes twice.
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        for s in &samples {
            let name = s.split(['{', ' ']).next().unwrap_or_default();
            assert!(
                (name.starts_with("wazoo_") || name.starts_with("process_"))
                    && !name.contains("alice")
                    && !name.contains("mallory"),
                "{s}"
            );
        }
        assert!(!text.contains("recipe=\"alice/") && !text.contains("recipe=\"mallory/"), "{text}");
        let series: BTreeSet<&str> = samples.iter().filter_map(|s| Some(s.rsplit_once(' ')?.0)).collect();
        assert_eq!(series.len(), samples.len(), "a series appears twice: {text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn single_tenant_labels_buckets_and_escaping() {
        let m = Metrics::new();
        m.call(None, "Acquire", "lock", "ok", Duration::from_micros(500)); // 0.0005, on the bound
        m.call(None, "Acquire", "lock", "timeout", ms(700)); // 1
        m.call(None, "Acquire", "lock", "ok", Duration::from_secs(20)); // +Inf only
        m.call(None, "Get\"Data\"", "a\\b\nc", "bad", ms(1));
        let host = fake(None, 2, Ok(()));
        m.list(&host);
        let text = m.encode();
        assert_eq!(lines(&text, "wazoo_compiles_total"), [r#"wazoo_compiles_total{tenant=""} 2"#]);
        let ok = r#"wazoo_calls_total{tenant="",method="Acquire",recipe="lock",outcome="ok"} 2"#;
        assert_eq!(lines(&text, ok), [ok]);
        // Label values are escaped: no line is broken, no quote ends a value early.
        assert!(
            text.contains(r#"{tenant="",method="Get\"Data\"",recipe="a\\b\nc",outcome="bad"} 1"#),
            "{text}"
        );
        assert!(
            text.lines().all(|l| l.starts_with("# ") || l.starts_with("wazoo_") || l.starts_with("process_")),
            "{text}"
        );
        // The crate writes `le` first; buckets are cumulative.
        let labels = r#"",tenant="",method="Acquire",recipe="lock"} "#;
        let buckets: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("wazoo_call_seconds_bucket{le=\"")?.split_once(labels))
            .collect();
        assert_eq!(buckets.len(), CALL_BUCKETS.len() + 1, "{text}");
        let want = [("0.0005", "1"), ("0.5", "1"), ("1.0", "2"), ("10.0", "2"), ("30.0", "3"), ("+Inf", "3")];
        for want in want {
            assert!(buckets.contains(&want), "{want:?}: {text}");
        }
    }

    #[test]
    fn hosts_drop_out_when_gone_replaced_or_unlisted() {
        let m = Arc::new(Metrics::new());
        assert_eq!(own_samples(&m.encode()), ["wazoo_build_info"], "nothing recorded, nothing listed");
        let (alice, bob) = (fake(Some("alice"), 1, Ok(())), fake(Some("bob"), 2, Ok(())));
        m.list(&alice);
        m.list(&alice);
        let listed = m.listing(&bob);
        assert_eq!(lines(&m.encode(), "wazoo_compiles_total{").len(), 2);
        // A new alice replaces the old one, though something still holds the old.
        let alice_again = fake(Some("alice"), 7, Ok(()));
        m.list(&alice_again);
        let (a, b) = (r#"wazoo_compiles_total{tenant="alice"} 7"#, r#"wazoo_compiles_total{tenant="bob"} 2"#);
        assert_eq!(lines(&m.encode(), "wazoo_compiles_total{"), [a, b]);
        drop(listed);
        assert_eq!(lines(&m.encode(), "wazoo_compiles_total{"), [a]);
        drop(alice_again);
        assert!(lines(&m.encode(), "wazoo_compiles_total{").is_empty());
        assert!(Arc::strong_count(&bob) == 1 && Arc::strong_count(&alice) == 1, "held weakly only");
    }

    /// Sends `request` and reads the whole answer: status, head (lower case), body.
    async fn ask(addr: SocketAddr, request: &str) -> (u16, String, String) {
        let exchange = async {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            stream.write_all(request.as_bytes()).await.expect("send");
            let mut raw = String::new();
            stream.read_to_string(&mut raw).await.expect("read");
            raw
        };
        let raw = tokio::time::timeout(Duration::from_secs(5), exchange).await.expect("the server closes");
        let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        assert!(head.to_ascii_lowercase().contains("\r\nconnection: close"), "{head}");
        (status, head.to_ascii_lowercase(), body.to_string())
    }

    #[tokio::test]
    async fn http_metrics_and_healthz() {
        let metrics = Arc::new(Metrics::new());
        assert_eq!(metrics.health().await, Err("no host is served yet".to_string()));
        metrics.call(Some("alice"), "Acquire", "lock", "ok", ms(2));
        let alice = fake(Some("alice"), 1, Ok(()));
        metrics.list(&alice);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(serve_for(listener, Arc::clone(&metrics), ms(500), Router::new()));

        let (status, head, body) = ask(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert_eq!(status, 200);
        assert!(head.contains(&format!("\r\ncontent-type: {OPENMETRICS}")), "{head}");
        // The same as encoded, but for the process's numbers, which move.
        let steady = |text: &str| -> Vec<String> {
            lines(text, "").into_iter().filter(|l| !l.starts_with("process_")).collect()
        };
        assert_eq!(steady(&body), steady(&metrics.encode()));
        let up = r#"wazoo_zookeeper_session_up{tenant="alice"} 1"#;
        assert_eq!(lines(&body, "wazoo_zookeeper_session_up{"), [up], "the scrape asked the host");
        assert!(body.contains(r#"wazoo_call_seconds_count{tenant="alice",method="Acquire",recipe="lock"} 1"#));

        assert_eq!(ask(addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.0, 200);
        assert_eq!(ask(addr, "GET /healthz HTTP/1.0\r\n\r\n").await.2, "ok");
        let bob = fake(Some("bob"), 1, Err("session ended (Expired)"));
        metrics.list(&bob);
        let (status, _, body) = ask(addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert_eq!((status, body.as_str()), (503, "tenant \"bob\": session ended (Expired)"));
        drop(bob);
        assert_eq!(ask(addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.0, 200, "bob is gone");

        let (status, head, body) = ask(addr, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert_eq!((status, body.as_str()), (200, ""), "{head}");
        assert_eq!(ask(addr, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").await.0, 404);
        assert_eq!(ask(addr, "garbage\r\n\r\n").await.0, 400);

        // A client that says nothing is cut off, and others are served meanwhile.
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(ask(addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.0, 200);
        let cut = tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut Vec::new())).await;
        assert!(cut.is_ok(), "an idle connection stays open past its limit");

        server.abort();
        assert!(server.await.is_err_and(|e| e.is_cancelled()));
        assert!(TcpStream::connect(addr).await.is_err(), "listener closed with the task");
    }

    #[test]
    fn every_family_is_described_before_any_event() {
        let text = Metrics::new().encode();
        let types: BTreeSet<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        assert_eq!(types, FAMILIES.iter().copied().collect(), "{text}");
        for family in FAMILIES {
            let name = family.split(' ').next().unwrap_or_default();
            assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
        }
        // Units are suffixes, and said.
        for unit in ["wazoo_call_seconds seconds", "process_resident_memory_bytes bytes"] {
            assert!(text.contains(&format!("# UNIT {unit}\n")), "{unit}: {text}");
        }
        let build = lines(&text, "wazoo_build_info{");
        assert_eq!(build.len(), 1, "{text}");
        let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
        assert!(
            build[0].contains(&version) && build[0].contains("wazoo:zk@") && build[0].ends_with("} 1"),
            "{build:?}"
        );
    }

    #[test]
    fn served_tenants_and_recipes_start_at_zero() {
        let m = Metrics::new();
        let alice = fake(Some("alice"), 1, Ok(()));
        m.list(&alice);
        m.recipe(Some("alice"), "lock");
        let text = m.encode();
        assert_eq!(
            lines(&text, "wazoo_recipe_swaps_total{"),
            [r#"wazoo_recipe_swaps_total{tenant="alice",recipe="lock"} 0"#]
        );
        let refusals = r#"wazoo_recipe_refusals_total{tenant="alice",recipe="lock"} 0"#;
        assert_eq!(lines(&text, "wazoo_recipe_refusals_total{"), [refusals]);
        let leaderships = r#"wazoo_leadership_changes_total{tenant="alice"} 0"#;
        assert_eq!(lines(&text, "wazoo_leadership_changes_total{"), [leaderships]);
    }

    #[tokio::test]
    async fn waits_holds_and_losses() {
        let m = Metrics::new();
        // A wait that ends with the claim is observed, and its time is the call's wait.
        let (got, spent) = spending(async {
            let waited = m.waiting(Some("t"), "lock", None, async {
                tokio::time::sleep(ms(20)).await;
                Ok::<_, ()>(7)
            });
            waited.await
        })
        .await;
        assert_eq!(got, Ok(7));
        assert!(spent.waited >= ms(20) && !spent.tried, "{spent:?}");
        // A try that finds the claim taken is contended; a wait that ran out, a timeout.
        let (_, tried) =
            spending(m.waiting(None, "lock", Some(Duration::ZERO), async { Err::<(), _>(()) })).await;
        assert!(tried.tried);
        let timeout = wazoo_proto::ErrorKind::Timeout.status(tonic::Code::DeadlineExceeded, "timeout");
        assert_eq!(outcome(Some(&timeout), tried), "contended");
        assert_eq!(outcome(Some(&timeout), Spent::default()), "timeout");
        let text = m.encode();
        assert_eq!(
            lines(&text, "wazoo_claim_wait_seconds_count{"),
            [r#"wazoo_claim_wait_seconds_count{tenant="t",family="lock"} 1"#],
            "only the granted wait: {text}"
        );
        let waiting: Vec<String> = lines(&text, "wazoo_claims_waiting{");
        assert!(waiting.iter().all(|l| l.ends_with(" 0")) && waiting.len() == 2, "{waiting:?}");

        // Held, then lost: the gauge goes back, the time held is observed, the loss counted once.
        let held = m.held(Some("t"), ClaimKind::Lock).expect("a lock is a claim");
        assert!(m.held(Some("t"), ClaimKind::Instance).is_none(), "an instance is no claim");
        assert_eq!(
            lines(&m.encode(), "wazoo_claims_held{"),
            [r#"wazoo_claims_held{tenant="t",family="lock"} 1"#]
        );
        held.lost(loss_reason(&Lost::NodeDeleted));
        let text = m.encode();
        assert_eq!(lines(&text, "wazoo_claims_held{"), [r#"wazoo_claims_held{tenant="t",family="lock"} 0"#]);
        let count = r#"wazoo_claim_held_seconds_count{tenant="t",family="lock"} 1"#;
        assert_eq!(lines(&text, "wazoo_claim_held_seconds_count{"), [count]);
        let lost = lines(&text, "wazoo_claims_lost_total{");
        assert_eq!(lost.len(), LOSS_REASONS.len(), "every reason from the family's first claim: {text}");
        for line in lost {
            let one = line.contains("reason=\"node-deleted\"");
            assert!(line.ends_with(if one { "} 1" } else { "} 0" }), "{line}");
        }
        // A claim let go is no loss.
        drop(m.held(Some("t"), ClaimKind::Lock));
        let text = m.encode();
        assert!(text.contains(r#"wazoo_claim_held_seconds_count{tenant="t",family="lock"} 2"#), "{text}");
        assert!(text.contains(r#"wazoo_claims_lost_total{tenant="t",family="lock",reason="node-deleted"} 1"#));
    }

    #[test]
    fn outcomes_are_readable() {
        use tonic::{Code, Status};
        use wazoo_proto::ErrorKind;
        let none = Spent::default();
        assert_eq!(outcome(None, none), "ok");
        let cases = [
            (ErrorKind::NoNode.status(Code::NotFound, "x"), "no-node"),
            (ErrorKind::UnknownSession.status(Code::NotFound, "x"), "unknown-session"),
            (ErrorKind::Trapped.status(Code::Internal, "x"), "trapped"),
            (ErrorKind::NoChildrenForEphemerals.status(Code::Unknown, "x"), "no-children-for-ephemerals"),
            (Status::deadline_exceeded("x"), "deadline-exceeded"),
            (Status::cancelled("x"), "cancelled"),
        ];
        for (status, want) in cases {
            assert_eq!(outcome(Some(&status), none), want);
        }
    }

    #[test]
    fn process_numbers_from_proc() {
        let stat = "1234 (wazoo (x) y) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 9 0 5000 104857600 2560 rest";
        let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 4096                 files\n";
        let got = ProcessSample::parse(stat, boot, limits, 12, 100.0, 4096).expect("parsed");
        let want = ProcessSample {
            cpu_seconds: 4.0,
            resident_bytes: 2560 * 4096,
            virtual_bytes: 104857600,
            open_fds: 12,
            max_fds: Some(1024),
            start_time_seconds: 1700000050.0,
        };
        assert_eq!(got, want);
        #[cfg(target_os = "linux")]
        {
            let now = ProcessSample::read().expect("/proc/self");
            assert!(now.resident_bytes > 0 && now.open_fds > 0 && now.start_time_seconds > 1.6e9, "{now:?}");
        }
    }

    #[test]
    fn queues_followed_are_bounded_and_dropped() {
        let m = Metrics::new();
        let first = m.follow_queue(Some("t"), "/q/0").expect("room");
        assert!(m.follow_queue(Some("t"), "/q/0").is_none(), "followed already");
        let more: Vec<Depth> =
            (1..MAX_QUEUES).filter_map(|i| m.follow_queue(Some("t"), &format!("/q/{i}"))).collect();
        assert_eq!(more.len(), MAX_QUEUES - 1);
        assert!(m.follow_queue(Some("t"), "/q/full").is_none(), "no room left");
        assert!(m.follow_queue(Some("u"), "/q/full").is_some(), "another tenant's room");
        first.set(3);
        assert_eq!(
            lines(&m.encode(), "wazoo_queue_depth{tenant=\"t\",queue=\"/q/0\"}"),
            [r#"wazoo_queue_depth{tenant="t",queue="/q/0"} 3"#]
        );
        drop(first);
        assert!(lines(&m.encode(), "wazoo_queue_depth{tenant=\"t\",queue=\"/q/0\"}").is_empty());
        assert!(m.follow_queue(Some("t"), "/q/0").is_some(), "room again");
    }
}
