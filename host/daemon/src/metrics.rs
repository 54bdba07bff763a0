//! Prometheus metrics for `wazoo serve`: call counts and latencies, per-recipe counters and gauges,
//! kept in memory and rendered in the text exposition format 0.0.4, served by [`serve`] on
//! `GET /metrics` over plain HTTP/1.1.
//!
//! Everything is prefixed `wazoo_`:
//!
//! - `wazoo_call_seconds{method,recipe}`: histogram of API call latencies;
//! - `wazoo_calls_total{method,recipe,outcome}`: API calls by outcome (`ok` or an error code);
//! - `wazoo_recipe_<name>_total{recipe}`: counters by recipe ([`Metrics::count`]);
//! - `wazoo_<name>`: gauges set from outside ([`Metrics::gauge`]).
//!
//! Counter and gauge names are metric-name suffixes: a character other than ASCII letters, digits
//! and `_` becomes `_`. A gauge whose name would clash with another metric is left out of the
//! output (two metrics of one name would make Prometheus reject the whole scrape).
//!
//! Over 700 lines only with its tests (the exporter itself is under 500): the exposition format
//! and the HTTP parsing are checked here against malformed requests and clashing names.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Upper bounds of the latency histogram's buckets, in seconds, with their `le` label values
/// (`+Inf` is implied).
const BUCKETS: [(f64, &str); 14] = [
    (0.0005, "0.0005"),
    (0.001, "0.001"),
    (0.0025, "0.0025"),
    (0.005, "0.005"),
    (0.01, "0.01"),
    (0.025, "0.025"),
    (0.05, "0.05"),
    (0.1, "0.1"),
    (0.25, "0.25"),
    (0.5, "0.5"),
    (1.0, "1"),
    (2.5, "2.5"),
    (5.0, "5"),
    (10.0, "10"),
];

/// Latencies of one label set. Buckets are not cumulative here (an observation is counted in the
/// first bucket that holds it, and in none if it is over the last bound); [`Metrics::render`]
/// adds them up.
#[derive(Debug, Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        if let Some(i) = BUCKETS.iter().position(|&(le, _)| secs <= le) {
            self.buckets[i] += 1;
        }
        self.sum += secs;
        self.count += 1;
    }
}

/// What is known about the calls of one method on one recipe.
#[derive(Debug, Default)]
struct CallStats {
    latency: Histogram,
    /// Calls by outcome.
    outcomes: BTreeMap<String, u64>,
}

/// Nested maps rather than tuple keys, so a label set seen before is found by `&str` without
/// allocating.
type ByTwo<V> = BTreeMap<String, BTreeMap<String, V>>;

/// The daemon's metrics. Cheap to update from many tasks at once (one short lock per update, no
/// allocation once a label set has been seen); share it behind an [`Arc`].
#[derive(Debug, Default)]
pub struct Metrics {
    /// method → recipe → stats.
    calls: Mutex<ByTwo<CallStats>>,
    /// counter name → recipe → count.
    counters: Mutex<ByTwo<u64>>,
    /// gauge name → value.
    gauges: Mutex<BTreeMap<String, f64>>,
}

impl Metrics {
    /// No metrics recorded yet.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Records one API call: `method` e.g. `"Acquire"`, `recipe` e.g. `"lock"`, `outcome` `"ok"` or
    /// an error code such as `"timeout"` or `"not_found"`, and how long it took.
    pub fn call(&self, method: &str, recipe: &str, outcome: &str, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let mut calls = lock(&self.calls);
        let stats = slot(slot(&mut calls, method), recipe);
        stats.latency.observe(secs);
        let n = slot(&mut stats.outcomes, outcome);
        *n = n.saturating_add(1);
    }

    /// Adds `n` to the counter `wazoo_recipe_<name>_total{recipe}`; `name` is e.g. `"swaps"`,
    /// `"refusals"`, `"compiles"` or `"cache_hits"`.
    pub fn count(&self, name: &str, recipe: &str, n: u64) {
        let name = metric_name(name);
        let mut counters = lock(&self.counters);
        let count = slot(slot(&mut counters, &name), recipe);
        *count = count.saturating_add(n);
    }

    /// Sets the gauge `wazoo_<name>`, e.g. `"live_handles"` or `"client_sessions"`.
    pub fn gauge(&self, name: &str, value: f64) {
        let name = metric_name(name);
        *slot(&mut lock(&self.gauges), &name) = value;
    }

    /// Everything recorded so far in the Prometheus text exposition format 0.0.4, each metric
    /// with `# HELP` and `# TYPE` lines. Metrics are sorted by name and samples by their labels,
    /// so the same contents always render the same way.
    pub fn render(&self) -> String {
        // Family name → its lines, so the output comes out sorted by name.
        let mut families: BTreeMap<String, String> = BTreeMap::new();

        let mut seconds = family(
            "wazoo_call_seconds",
            "histogram",
            "Latency of API calls in seconds, by method and recipe.",
        );
        let mut totals = family("wazoo_calls_total", "counter", "API calls by method, recipe and outcome.");
        for (method, by_recipe) in lock(&self.calls).iter() {
            for (recipe, stats) in by_recipe {
                let labels = [("method", method.as_str()), ("recipe", recipe.as_str())];
                let h = &stats.latency;
                let mut cumulative = 0;
                for (&(_, le), &n) in BUCKETS.iter().zip(&h.buckets) {
                    cumulative += n;
                    sample(
                        &mut seconds,
                        "wazoo_call_seconds_bucket",
                        &labels,
                        Some(le),
                        Value::Count(cumulative),
                    );
                }
                sample(
                    &mut seconds,
                    "wazoo_call_seconds_bucket",
                    &labels,
                    Some("+Inf"),
                    Value::Count(h.count),
                );
                sample(&mut seconds, "wazoo_call_seconds_sum", &labels, None, Value::Float(h.sum));
                sample(&mut seconds, "wazoo_call_seconds_count", &labels, None, Value::Count(h.count));
                for (outcome, &n) in &stats.outcomes {
                    let labels = [labels[0], labels[1], ("outcome", outcome.as_str())];
                    sample(&mut totals, "wazoo_calls_total", &labels, None, Value::Count(n));
                }
            }
        }
        families.insert("wazoo_call_seconds".to_string(), seconds);
        families.insert("wazoo_calls_total".to_string(), totals);

        for (name, by_recipe) in lock(&self.counters).iter() {
            let metric = format!("wazoo_recipe_{name}_total");
            let mut lines = family(&metric, "counter", &counter_help(name));
            for (recipe, &n) in by_recipe {
                sample(&mut lines, &metric, &[("recipe", recipe.as_str())], None, Value::Count(n));
            }
            families.insert(metric, lines);
        }

        for (name, &value) in lock(&self.gauges).iter() {
            let metric = format!("wazoo_{name}");
            let histogram_series = ["_bucket", "_sum", "_count"]
                .iter()
                .any(|suffix| metric.strip_suffix(suffix) == Some("wazoo_call_seconds"));
            if families.contains_key(&metric) || histogram_series {
                continue;
            }
            let mut lines = family(&metric, "gauge", &gauge_help(name));
            sample(&mut lines, &metric, &[], None, Value::Float(value));
            families.insert(metric, lines);
        }

        families.into_values().collect()
    }
}

/// Locks `mutex`, carrying on if another thread panicked while holding it: the maps it guards
/// are always consistent between statements, so the worst case is one half-recorded call.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The value under `key`, inserted as the default first if missing; allocates only then.
fn slot<'a, V: Default>(map: &'a mut BTreeMap<String, V>, key: &str) -> &'a mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key).unwrap_or_else(|| unreachable!("{key:?} was just inserted"))
}

/// `name` fit to be a metric-name suffix: ASCII letters, digits and `_` only.
fn metric_name(name: &str) -> Cow<'_, str> {
    if name.is_empty() {
        Cow::Borrowed("unnamed")
    } else if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect())
    }
}

fn counter_help(name: &str) -> String {
    match name {
        "swaps" => "Recipe component versions installed over an earlier one, by recipe.".to_string(),
        "refusals" => "Recipe component files refused, by recipe.".to_string(),
        "compiles" => "Recipe components compiled (not taken from the cache), by recipe.".to_string(),
        "cache_hits" => "Recipe components taken from the on-disk compile cache, by recipe.".to_string(),
        _ => format!("Recipe events counted as {name}, by recipe."),
    }
}

fn gauge_help(name: &str) -> String {
    match name {
        "live_handles" => "Recipe handles currently open.".to_string(),
        "client_sessions" => "Client sessions currently connected.".to_string(),
        "compiles" => "Recipe components compiled (not taken from the cache) since start.".to_string(),
        "cache_hits" => "Recipe components taken from the on-disk compile cache since start.".to_string(),
        _ => format!("Current value of {name}."),
    }
}

/// The `# HELP` and `# TYPE` lines that open a metric. `help` must not hold a backslash or a
/// newline (it is ours, and names are sanitized by [`metric_name`]).
fn family(metric: &str, kind: &str, help: &str) -> String {
    format!("# HELP {metric} {help}\n# TYPE {metric} {kind}\n")
}

/// A sample value: counts print as integers, exactly; floats the way Prometheus reads them.
#[derive(Clone, Copy)]
enum Value {
    Count(u64),
    Float(f64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Float(v) if v.is_nan() => f.write_str("NaN"),
            Value::Float(v) if v == f64::INFINITY => f.write_str("+Inf"),
            Value::Float(v) if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

/// Appends one sample line: `metric{labels,le="..."} value`.
fn sample(out: &mut String, metric: &str, labels: &[(&str, &str)], le: Option<&str>, value: Value) {
    out.push_str(metric);
    let le = le.map(|le| ("le", le));
    let mut all = labels.iter().copied().chain(le).peekable();
    if all.peek().is_some() {
        out.push('{');
        for (i, (name, value)) in all.enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(name);
            out.push_str("=\"");
            escape_label(out, value);
            out.push('"');
        }
        out.push('}');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(out, " {value}");
}

/// Appends `value` escaped for a label value: `\` → `\\`, `"` → `\"`, newline → `\n`.
fn escape_label(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The most a request head may take, request line and headers.
const MAX_HEAD: usize = 8 * 1024;
/// How long a connection may take to send its request head, or to take the answer.
const IDLE: Duration = Duration::from_secs(10);
/// How long to keep reading (and dropping) what a client still sends after the answer, so that
/// closing with unread data does not reset the connection before the client has read it.
const LINGER: Duration = Duration::from_secs(1);
/// The content type of every answer.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Serves `GET /metrics` (and `GET /`, a short text pointing at `/metrics`; any other path is
/// 404) over plain HTTP/1.1 on `listener`, one task per connection and one request per
/// connection (`Connection: close`), until this future is dropped, which also ends the
/// connections it started. `HEAD` is answered too, other methods get 405, a malformed request
/// 400, a request head over 8 KiB 431; a connection that sends no complete head within 10 s is
/// closed.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    // Dropping the set aborts the connection tasks with the listener.
    let mut connections = JoinSet::new();
    loop {
        let accepted = listener.accept().await;
        while connections.try_join_next().is_some() {}
        match accepted {
            Ok((stream, peer)) => {
                let metrics = Arc::clone(&metrics);
                connections.spawn(async move {
                    if let Err(e) = connection(stream, &metrics).await {
                        tracing::debug!(%peer, "metrics connection: {e}");
                    }
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off rather than spin.
                tracing::warn!("metrics listener: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads one request from `stream`, answers it and closes.
async fn connection(mut stream: TcpStream, metrics: &Metrics) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let head = match tokio::time::timeout(IDLE, read_head(&mut stream, &mut buf)).await {
        Ok(head) => head?,
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "no request head within 10 s")),
    };
    let answer = match head {
        Head::Closed => return Ok(()),
        Head::Complete(end) => respond(&buf[..end], metrics),
        Head::Truncated => answer(400, "Bad Request", "", "bad request\n", false),
        Head::TooLarge => {
            answer(431, "Request Header Fields Too Large", "", "request head too large\n", false)
        }
    };
    let write = async {
        stream.write_all(&answer).await?;
        stream.shutdown().await
    };
    match tokio::time::timeout(IDLE, write).await {
        Ok(written) => written?,
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "answer not taken within 10 s")),
    }
    let _ = tokio::time::timeout(LINGER, drain(&mut stream)).await;
    Ok(())
}

/// How reading a request head ended.
enum Head {
    /// The head is `buf[..end]`, blank line included.
    Complete(usize),
    /// The client closed without sending anything.
    Closed,
    /// The client closed in the middle of the head.
    Truncated,
    /// [`MAX_HEAD`] bytes and no end of head.
    TooLarge,
}

/// Reads from `stream` into `buf` until the blank line that ends a request head.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Head> {
    let mut chunk = [0u8; 1024];
    loop {
        let room = (MAX_HEAD - buf.len()).min(chunk.len());
        let n = stream.read(&mut chunk[..room]).await?;
        if n == 0 {
            return Ok(if buf.is_empty() { Head::Closed } else { Head::Truncated });
        }
        // The end may straddle the previous read.
        let from = buf.len().saturating_sub(2);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(buf, from) {
            return Ok(Head::Complete(end));
        }
        if buf.len() >= MAX_HEAD {
            return Ok(Head::TooLarge);
        }
    }
}

/// Where the head in `buf` ends (just past its blank line, `\r\n\r\n` or a bare `\n\n`), looking
/// for the line feed that ends the last header line from `from` on.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find_map(|i| {
        if buf[i] != b'\n' {
            return None;
        }
        match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        }
    })
}

/// Drops what the client still sends, up to 64 KiB, until it closes.
async fn drain(stream: &mut TcpStream) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        left = left.saturating_sub(n);
    }
    Ok(())
}

/// The answer to the request whose head is `head`.
fn respond(head: &[u8], metrics: &Metrics) -> Vec<u8> {
    let Some((method, target)) = parse(head) else {
        return answer(400, "Bad Request", "", "bad request\n", false);
    };
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return answer(405, "Method Not Allowed", "Allow: GET, HEAD\r\n", "method not allowed\n", false),
    };
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    match path {
        "/metrics" => answer(200, "OK", "", &metrics.render(), head_only),
        "/" => answer(200, "OK", "", "wazoo metrics: GET /metrics\n", head_only),
        _ => answer(404, "Not Found", "", "not found; metrics are at /metrics\n", head_only),
    }
}

/// The method and target of a well-formed HTTP/1.x request head, `None` if it is not one.
fn parse(head: &[u8]) -> Option<(&str, &str)> {
    let head = std::str::from_utf8(head).ok()?;
    let mut lines = head.split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line));
    let mut request = lines.next()?.split(' ');
    let (method, target, version) = (request.next()?, request.next()?, request.next()?);
    let is_token = |s: &str| !s.is_empty() && s.bytes().all(is_tchar);
    if request.next().is_some() || !is_token(method) || !target.starts_with('/') {
        return None;
    }
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") || target.bytes().any(|b| b.is_ascii_control()) {
        return None;
    }
    for line in lines.filter(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':')?;
        if !is_token(name) || value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return None;
        }
    }
    Some((method, target))
}

/// Whether `b` may appear in an HTTP token (a method or a header name).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A whole HTTP/1.1 answer; `extra` is more header lines, each ending in CRLF.
fn answer(status: u16, reason: &str, extra: &str, body: &str, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\
         Connection: close\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::SocketAddr;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The sample lines of `text` that start with `prefix`.
    fn lines<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn empty_metrics_still_describe_the_call_metrics() {
        let text = Metrics::new().render();
        assert_eq!(
            text,
            "# HELP wazoo_call_seconds Latency of API calls in seconds, by method and recipe.\n\
             # TYPE wazoo_call_seconds histogram\n\
             # HELP wazoo_calls_total API calls by method, recipe and outcome.\n\
             # TYPE wazoo_calls_total counter\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative_with_sum_and_count() {
        let m = Metrics::new();
        m.call("Acquire", "lock", "ok", Duration::from_micros(300)); // 0.0005
        m.call("Acquire", "lock", "ok", Duration::from_micros(500)); // 0.0005, on the bound
        m.call("Acquire", "lock", "timeout", ms(3)); // 0.005
        m.call("Acquire", "lock", "ok", ms(700)); // 1
        m.call("Acquire", "lock", "timeout", Duration::from_secs(20)); // +Inf only
        let text = m.render();
        let series = "wazoo_call_seconds_bucket{method=\"Acquire\",recipe=\"lock\",le=";
        let buckets: Vec<(&str, u64)> = lines(&text, series)
            .iter()
            .map(|l| {
                let (le, n) = l[series.len()..].split_once("} ").expect("bucket line");
                (le.trim_matches('"'), n.parse().expect("bucket count"))
            })
            .collect();
        let want = [
            ("0.0005", 2),
            ("0.001", 2),
            ("0.0025", 2),
            ("0.005", 3),
            ("0.01", 3),
            ("0.025", 3),
            ("0.05", 3),
            ("0.1", 3),
            ("0.25", 3),
            ("0.5", 3),
            ("1", 4),
            ("2.5", 4),
            ("5", 4),
            ("10", 4),
            ("+Inf", 5),
        ];
        assert_eq!(buckets, want);
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1));

        let sum = lines(&text, "wazoo_call_seconds_sum{method=\"Acquire\",recipe=\"lock\"} ");
        assert_eq!(sum.len(), 1);
        let sum: f64 = sum[0].rsplit(' ').next().and_then(|v| v.parse().ok()).expect("sum value");
        assert!((sum - 20.7038).abs() < 1e-9, "{sum}");
        assert_eq!(
            lines(&text, "wazoo_call_seconds_count"),
            ["wazoo_call_seconds_count{method=\"Acquire\",recipe=\"lock\"} 5"]
        );
        assert_eq!(
            lines(&text, "wazoo_calls_total{"),
            [
                "wazoo_calls_total{method=\"Acquire\",recipe=\"lock\",outcome=\"ok\"} 3",
                "wazoo_calls_total{method=\"Acquire\",recipe=\"lock\",outcome=\"timeout\"} 2",
            ]
        );
    }

    #[test]
    fn label_sets_are_kept_apart_and_sorted() {
        let a = Metrics::new();
        a.call("Release", "lock", "ok", ms(1));
        a.call("Acquire", "semaphore", "not_found", ms(1));
        a.call("Acquire", "lock", "ok", ms(1));
        a.count("swaps", "lock", 1);
        a.count("compiles", "queue", 2);
        a.count("compiles", "lock", 3);
        a.gauge("live_handles", 4.0);
        a.gauge("client_sessions", 2.0);

        let b = Metrics::new();
        b.gauge("client_sessions", 2.0);
        b.gauge("live_handles", 4.0);
        b.count("compiles", "lock", 3);
        b.count("compiles", "queue", 2);
        b.count("swaps", "lock", 1);
        b.call("Acquire", "lock", "ok", ms(1));
        b.call("Acquire", "semaphore", "not_found", ms(1));
        b.call("Release", "lock", "ok", ms(1));

        let text = a.render();
        assert_eq!(text, b.render());
        assert_eq!(
            lines(&text, "wazoo_calls_total{"),
            [
                "wazoo_calls_total{method=\"Acquire\",recipe=\"lock\",outcome=\"ok\"} 1",
                "wazoo_calls_total{method=\"Acquire\",recipe=\"semaphore\",outcome=\"not_found\"} 1",
                "wazoo_calls_total{method=\"Release\",recipe=\"lock\",outcome=\"ok\"} 1",
            ]
        );
        let types: Vec<&str> = lines(&text, "# TYPE ");
        assert_eq!(
            types,
            [
                "# TYPE wazoo_call_seconds histogram",
                "# TYPE wazoo_calls_total counter",
                "# TYPE wazoo_client_sessions gauge",
                "# TYPE wazoo_live_handles gauge",
                "# TYPE wazoo_recipe_compiles_total counter",
                "# TYPE wazoo_recipe_swaps_total counter",
            ]
        );
        // Every family has its HELP line right before its TYPE line, and its samples after.
        for t in &types {
            let name = t.split(' ').nth(2).expect("name");
            let help = format!("# HELP {name} ");
            let at = text.find(&help).expect("HELP line");
            assert!(text[at..].lines().nth(1) == Some(t), "{name}");
        }
    }

    #[test]
    fn counters_add_up_by_recipe() {
        let m = Metrics::new();
        m.count("cache_hits", "lock", 2);
        m.count("cache_hits", "lock", 5);
        m.count("cache_hits", "queue", 1);
        m.count("refusals", "tree", 1);
        let text = m.render();
        assert!(text.contains(
            "# HELP wazoo_recipe_cache_hits_total Recipe components taken from the on-disk compile cache, \
             by recipe.\n# TYPE wazoo_recipe_cache_hits_total counter\n\
             wazoo_recipe_cache_hits_total{recipe=\"lock\"} 7\n\
             wazoo_recipe_cache_hits_total{recipe=\"queue\"} 1\n"
        ));
        assert_eq!(
            lines(&text, "wazoo_recipe_refusals_total{"),
            ["wazoo_recipe_refusals_total{recipe=\"tree\"} 1"]
        );
    }

    #[test]
    fn gauges_are_set_not_added() {
        let m = Metrics::new();
        m.gauge("live_handles", 3.0);
        m.gauge("live_handles", 7.0);
        m.gauge("load", 0.25);
        m.gauge("odd", f64::NAN);
        m.gauge("big", f64::INFINITY);
        m.gauge("small", f64::NEG_INFINITY);
        let text = m.render();
        assert!(text.contains(
            "# HELP wazoo_live_handles Recipe handles currently open.\n\
             # TYPE wazoo_live_handles gauge\nwazoo_live_handles 7\n"
        ));
        assert_eq!(lines(&text, "wazoo_load "), ["wazoo_load 0.25"]);
        assert_eq!(lines(&text, "wazoo_odd "), ["wazoo_odd NaN"]);
        assert_eq!(lines(&text, "wazoo_big "), ["wazoo_big +Inf"]);
        assert_eq!(lines(&text, "wazoo_small "), ["wazoo_small -Inf"]);
    }

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        m.call("Get\"Data\"", "a\\b\nc", "bad\"\\\n", ms(1));
        m.count("swaps", "x\"y", 1);
        let text = m.render();
        assert_eq!(
            lines(&text, "wazoo_calls_total{"),
            [r#"wazoo_calls_total{method="Get\"Data\"",recipe="a\\b\nc",outcome="bad\"\\\n"} 1"#]
        );
        assert_eq!(
            lines(&text, "wazoo_recipe_swaps_total{"),
            [r#"wazoo_recipe_swaps_total{recipe="x\"y"} 1"#]
        );
        // No raw newline leaked into a sample: every line is a comment or a wazoo_ sample.
        assert!(text.lines().all(|l| l.starts_with("# ") || l.starts_with("wazoo_")));
    }

    #[test]
    fn names_are_sanitized_and_clashing_gauges_left_out() {
        let m = Metrics::new();
        m.count("cache-hits", "lock", 1);
        m.count("cache hits", "lock", 1);
        m.gauge("", 1.0);
        m.gauge("calls_total", 9.0);
        m.gauge("call_seconds_count", 9.0);
        m.gauge("recipe_cache_hits_total", 9.0);
        let text = m.render();
        assert_eq!(
            lines(&text, "wazoo_recipe_cache_hits_total{"),
            ["wazoo_recipe_cache_hits_total{recipe=\"lock\"} 2"]
        );
        assert_eq!(lines(&text, "wazoo_unnamed "), ["wazoo_unnamed 1"]);
        assert!(!text.contains(" 9\n"), "{text}");
        assert_eq!(lines(&text, "# TYPE wazoo_calls_total ").len(), 1);
    }

    #[test]
    fn every_sample_line_parses() {
        let m = Metrics::new();
        m.call("Acquire", "lock", "ok", ms(12));
        m.count("swaps", "lock", 1);
        m.gauge("live_handles", 1.5);
        for line in m.render().lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').expect("name and value");
            assert!(series.starts_with("wazoo_"), "{line}");
            assert!(series.ends_with('}') == series.contains('{'), "{line}");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
        assert!(m.render().ends_with('\n'));
    }

    #[test]
    fn request_heads_are_checked() {
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Some(("GET", "/metrics")));
        assert_eq!(parse(b"GET /?a=b HTTP/1.0\n\n"), Some(("GET", "/?a=b")));
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\n\r\n"), Some(("GET", "/metrics")));
        for bad in [
            &b""[..],
            b"\r\n\r\n",
            b"GET\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"G(T /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 x\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
            b"GET /\xff HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody", 0), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nbody", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
    }

    /// An answer as read off the wire.
    struct Answer {
        status: u16,
        head: String,
        body: String,
    }

    impl Answer {
        fn header(&self, name: &str) -> Option<&str> {
            self.head.lines().skip(1).find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim())
            })
        }
    }

    /// Sends `request` (closing the sending side after it if `close`) and reads the whole answer.
    async fn ask(addr: SocketAddr, request: &[u8], close: bool) -> Answer {
        let exchange = async {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            stream.write_all(request).await.expect("send");
            if close {
                stream.shutdown().await.expect("shutdown");
            }
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).await.expect("read");
            raw
        };
        let raw = tokio::time::timeout(Duration::from_secs(5), exchange).await.expect("answer in time");
        let raw = String::from_utf8(raw).expect("utf-8 answer");
        let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        let answer = Answer { status, head: head.to_string(), body: body.to_string() };
        assert!(answer.head.starts_with("HTTP/1.1 "), "{}", answer.head);
        assert_eq!(answer.header("Content-Type"), Some("text/plain; version=0.0.4"));
        assert_eq!(answer.header("Connection"), Some("close"));
        answer
    }

    #[tokio::test]
    async fn http_round_trip() {
        let metrics = Arc::new(Metrics::new());
        metrics.call("Acquire", "lock", "ok", ms(2));
        metrics.count("swaps", "lock", 1);
        metrics.gauge("live_handles", 3.0);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(serve(listener, Arc::clone(&metrics)));

        let a = ask(addr, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n", false).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.body, metrics.render());
        assert_eq!(a.header("Content-Length"), Some(a.body.len().to_string().as_str()));
        assert!(a.body.contains("wazoo_call_seconds_count{method=\"Acquire\",recipe=\"lock\"} 1\n"));
        assert!(a.body.contains("wazoo_live_handles 3\n"));

        let a = ask(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", false).await;
        assert_eq!((a.status, a.body), (200, metrics.render()));

        let a = ask(addr, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.body, "");
        assert_eq!(a.header("Content-Length"), Some(metrics.render().len().to_string().as_str()));

        let a = ask(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false).await;
        assert_eq!(a.status, 200);
        assert!(a.body.contains("/metrics"), "{}", a.body);

        let a = ask(addr, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", false).await;
        assert_eq!(a.status, 404);
        assert_eq!(a.header("Content-Length"), Some(a.body.len().to_string().as_str()));

        let a = ask(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", false).await;
        assert_eq!(a.status, 405);
        assert_eq!(a.header("Allow"), Some("GET, HEAD"));

        let a = ask(addr, b"\x16\x03\x01\x02\x00garbage\xff\r\n\r\n", false).await;
        assert_eq!(a.status, 400);
        let a = ask(addr, b"hello there\n\n", false).await;
        assert_eq!(a.status, 400);
        // Half a head, then the client stops sending.
        let a = ask(addr, b"GET /metrics HTTP/1.1\r\nHost:", true).await;
        assert_eq!(a.status, 400);

        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while huge.len() <= MAX_HEAD {
            huge.extend_from_slice(b"X-Padding: 0123456789abcdef0123456789abcdef\r\n");
        }
        huge.extend_from_slice(b"\r\n");
        let a = ask(addr, &huge, false).await;
        assert_eq!(a.status, 431);

        // A client that connects and says nothing does not stop others from being served.
        let _idle = TcpStream::connect(addr).await.expect("connect");
        let a = ask(addr, b"GET /metrics HTTP/1.1\r\n\r\n", false).await;
        assert_eq!(a.status, 200);

        // Closing without a request is fine, and the server is still there after it.
        drop(TcpStream::connect(addr).await.expect("connect"));
        assert_eq!(ask(addr, b"GET / HTTP/1.1\r\n\r\n", false).await.status, 200);

        server.abort();
        assert!(server.await.is_err_and(|e| e.is_cancelled()));
        assert!(TcpStream::connect(addr).await.is_err(), "listener closed with the task");
    }
}
