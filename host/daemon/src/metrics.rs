//! Prometheus metrics and health for `wazoo serve`, kept with the `prometheus-client` crate and
//! served by [`serve`]: `GET /metrics` (OpenMetrics text) and `GET /healthz` (200 `ok` while the
//! ZooKeeper session of every served host is up, else 503 and why, in one line).
//!
//! Every family is prefixed `wazoo_` and has a `tenant` label: the tenant's name, or `""` in a
//! single-tenant daemon (which Prometheus reads as no label). A tenant is never part of a metric
//! name or of another label. Totals are counters (`# TYPE wazoo_calls counter`, samples
//! `wazoo_calls_total`); only values that go down are gauges.
//!
//! Recorded as they happen:
//! - `wazoo_calls_total{tenant,method,recipe,outcome}`: API calls by outcome (`ok` or the gRPC
//!   code in lower case, e.g. `notfound`), and `wazoo_call_seconds{tenant,method,recipe}`
//!   (histogram), their latency;
//! - `wazoo_recipe_swaps_total{tenant,recipe}`: component versions installed over an earlier one;
//! - `wazoo_recipe_refusals_total{tenant,recipe}`: component files refused.
//!
//! Read from each served host at every scrape (a host no longer served drops out):
//! - `wazoo_compiles_total{tenant}`, `wazoo_cache_hits_total{tenant}`: components compiled, and
//!   taken from the on-disk compile cache, by the tenant's registry;
//! - `wazoo_limit_hits_total{tenant}`, `wazoo_traps_total{tenant}`: guest calls refused by a
//!   sandbox limit, and guest traps;
//! - `wazoo_client_sessions{tenant}`, `wazoo_live_handles{tenant}`, `wazoo_warm_handles{tenant}`
//!   (gauges): client sessions open, the recipe handles they hold, and the lock-family handles
//!   kept warm for the next acquire.

use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

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
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Upper bounds of the latency histogram's buckets, in seconds (`+Inf` is implied).
const BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// How long `/healthz` waits for word of every ZooKeeper session (one being rebuilt may take
/// longer) before it answers 503.
const HEALTH_WAIT: Duration = Duration::from_secs(5);

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

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
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

/// The hosts served, held weakly: a host nothing else holds is gone from the metrics.
#[derive(Clone, Debug, Default)]
struct Sources(Arc<Mutex<Vec<Weak<dyn Source>>>>);

impl Sources {
    /// The hosts still there, by tenant.
    fn live(&self) -> Vec<Arc<dyn Source>> {
        let mut live: Vec<_> = lock(&self.0).iter().filter_map(Weak::upgrade).collect();
        live.sort_by(|a, b| a.tenant().cmp(&b.tenant()));
        live
    }
}

/// The families read from the served hosts (name, help, whether a counter), in the order of
/// [`Sample::values`].
const COLLECTED: [(&str, &str, bool); 7] = [
    ("compiles", "Recipe components compiled (not taken from the cache).", true),
    ("cache_hits", "Recipe components taken from the on-disk compile cache.", true),
    ("limit_hits", "Guest calls refused by a sandbox limit.", true),
    ("traps", "Guest traps (sandbox limits included).", true),
    ("client_sessions", "Client sessions currently open.", false),
    ("live_handles", "Recipe handles currently held.", false),
    ("warm_handles", "Lock-family handles kept warm for the next acquire.", false),
];

impl Sample {
    fn values(&self) -> [u64; 7] {
        [
            self.compiles,
            self.cache_hits,
            self.limit_hits,
            self.traps,
            self.client_sessions,
            self.live_handles,
            self.warm_handles,
        ]
    }
}

impl Collector for Sources {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let samples: Vec<(TenantLabels, Sample)> = self
            .live()
            .iter()
            .map(|s| (TenantLabels { tenant: Label::tenant(s.tenant()) }, s.sample()))
            .collect();
        if samples.is_empty() {
            return Ok(());
        }
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
        Ok(())
    }
}

/// The daemon's metrics: share it behind an [`Arc`]; every update is a short lock.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: Family<OutcomeLabels, Counter>,
    latency: Family<CallLabels, Histogram, fn() -> Histogram>,
    swaps: Family<RecipeLabels, Counter>,
    refusals: Family<RecipeLabels, Counter>,
    sources: Sources,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// No metrics recorded and no host listed yet.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("wazoo");
        let calls = Family::<OutcomeLabels, Counter>::default();
        let latency = Family::<CallLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let swaps = Family::<RecipeLabels, Counter>::default();
        let refusals = Family::<RecipeLabels, Counter>::default();
        let sources = Sources::default();
        registry.register("calls", "API calls by outcome", calls.clone());
        registry.register_with_unit("call", "API call latency", Unit::Seconds, latency.clone());
        registry.register("recipe_swaps", "Component versions installed over an earlier one", swaps.clone());
        registry.register("recipe_refusals", "Component files refused", refusals.clone());
        registry.register_collector(Box::new(sources.clone()));
        Metrics { registry, calls, latency, swaps, refusals, sources }
    }

    /// Records one API call of `tenant` (`None` in a single-tenant daemon): `method` e.g.
    /// `"Acquire"`, `recipe` e.g. `"lock"`, `outcome` `"ok"` or an error code, and how long it
    /// took.
    pub fn call(&self, tenant: Option<&str>, method: &str, recipe: &str, outcome: &str, elapsed: Duration) {
        let call = CallLabels {
            tenant: Label::tenant(tenant),
            method: Label::of(method),
            recipe: Label::of(recipe),
        };
        self.latency.get_or_create(&call).observe(elapsed.as_secs_f64());
        self.calls.get_or_create(&OutcomeLabels { call, outcome: Label::of(outcome) }).inc();
    }

    /// Counts a new version of `recipe` installed over an earlier one.
    pub fn swapped(&self, tenant: Option<&str>, recipe: &str) {
        self.swaps.get_or_create(&RecipeLabels::of(tenant, recipe)).inc();
    }

    /// Counts a refused file of `recipe`.
    pub fn refused(&self, tenant: Option<&str>, recipe: &str) {
        self.refusals.get_or_create(&RecipeLabels::of(tenant, recipe)).inc();
    }

    /// Lists `source` as a served host (again is fine). It replaces a listed host of the same
    /// tenant, and stays listed while something else holds it.
    pub fn list<S: Source + 'static>(&self, source: &Arc<S>) {
        let source: Arc<dyn Source> = source.clone();
        let weak = Arc::downgrade(&source);
        let mut listed = lock(&self.sources.0);
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
    /// format (ending `# EOF`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!("encoding the metrics: {e}");
        }
        out
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
            lock(&metrics.sources.0).retain(|w| !w.ptr_eq(&self.source) && w.strong_count() > 0);
        }
    }
}

/// Locks `mutex`, carrying on if another thread panicked while holding it: the list it guards
/// is consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves `GET /metrics` and `GET /healthz` (`HEAD` too; other methods get 405, other paths
/// 404) on `listener` until this future is dropped. Each answer closes its connection, and a
/// connection open for 10 s is closed whatever it is doing, so none outlives the server long.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    serve_for(listener, metrics, CONNECTION_LIMIT).await
}

async fn serve_for(listener: TcpListener, metrics: Arc<Metrics>, limit: Duration) {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(healthz))
        .with_state(metrics)
        .layer(axum::middleware::map_response(close));
    if let Err(e) = axum::serve(Limited { listener, limit }, app).await {
        tracing::warn!("metrics server stopped: {e}");
    }
}

async fn scrape(State(metrics): State<Arc<Metrics>>) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS)], metrics.encode()).into_response()
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
        ] {
            let want =
                [format!("{family}{{tenant=\"alice\"}} {a}"), format!("{family}{{tenant=\"mallory\"}} {m}")];
            assert_eq!(lines(&text, &format!("{family}{{")), want, "{text}");
        }

        let types: BTreeSet<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE wazoo_")).collect();
        let want = "calls counter,call_seconds histogram,recipe_swaps counter,recipe_refusals counter,\
                    compiles counter,cache_hits counter,limit_hits counter,traps counter,\
                    client_sessions gauge,live_handles gauge,warm_handles gauge";
        assert_eq!(types, want.split(',').collect());
        // Tenants are in labels only, and no series comes twice.
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        for s in &samples {
            let name = s.split(['{', ' ']).next().unwrap_or_default();
            assert!(
                name.starts_with("wazoo_") && !name.contains("alice") && !name.contains("mallory"),
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
        assert!(text.lines().all(|l| l.starts_with("# ") || l.starts_with("wazoo_")), "{text}");
        // The crate writes `le` first; buckets are cumulative.
        let labels = r#"",tenant="",method="Acquire",recipe="lock"} "#;
        let buckets: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("wazoo_call_seconds_bucket{le=\"")?.split_once(labels))
            .collect();
        assert_eq!(buckets.len(), BUCKETS.len() + 1, "{text}");
        for want in [("0.0005", "1"), ("0.5", "1"), ("1.0", "2"), ("10.0", "2"), ("+Inf", "3")] {
            assert!(buckets.contains(&want), "{want:?}: {text}");
        }
    }

    #[test]
    fn hosts_drop_out_when_gone_replaced_or_unlisted() {
        let m = Arc::new(Metrics::new());
        assert_eq!(m.encode(), "# EOF\n", "nothing recorded, nothing listed");
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
        assert_eq!(m.encode(), "# EOF\n");
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
        let server = tokio::spawn(serve_for(listener, Arc::clone(&metrics), ms(500)));

        let (status, head, body) = ask(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert_eq!(status, 200);
        assert!(head.contains(&format!("\r\ncontent-type: {OPENMETRICS}")), "{head}");
        assert_eq!(lines(&body, ""), lines(&metrics.encode(), ""));
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
}
