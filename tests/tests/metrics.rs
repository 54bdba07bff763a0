//! The daemon's Prometheus metrics against a real `wazoo serve` on a real ZooKeeper: every
//! family described before any event, and each metric moving when its event happens (a wait, a
//! hold, a busy try, a loss by each reason, a leadership handed over, a queue's depth); and the
//! Grafana dashboard and alert rules of `deploy/` using only metrics a live daemon serves.

use std::collections::BTreeSet;
use std::time::Duration;

use wazoo_client::proto::{QueuePutRequest, RevokeRequest, WaitRequest};
use wazoo_client::{Ask, Client, ErrorKind, LockOptions, Lost};
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// Every family the reference lists (docs/src/reference/metrics.md: a table row per metric,
/// its name and type), as its `# TYPE` line names it: `wazoo_calls counter` for
/// `wazoo_calls_total`, `wazoo_build info` for `wazoo_build_info`.
fn families() -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/src/reference/metrics.md")).unwrap();
    let mut families = Vec::new();
    for row in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (name, kind) = (cells[1].trim_matches('`'), cells[2]);
        let family = match kind {
            "counter" => name.strip_suffix("_total").unwrap_or(name),
            "info" => name.strip_suffix("_info").unwrap_or(name),
            "gauge" | "histogram" => name,
            _ => continue, // another table (the outcomes, the reasons)
        };
        families.push(format!("{family} {kind}"));
    }
    assert!(families.len() >= 20, "the reference's table of metrics: {families:?}");
    families
}

async fn daemon() -> Daemon {
    Daemon::start(&plugins(), &daemon::cache()).await
}

async fn connect(daemon: &Daemon) -> Client {
    Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap()
}

/// The value of `series` (its name and labels, exactly as served) in `text`, if it is there.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.split(' ').next()?.parse().ok())
}

/// [`value`], 0 when the series is not there.
fn or_zero(text: &str, series: &str) -> f64 {
    value(text, series).unwrap_or(0.0)
}

/// The daemon's metrics once `ready` holds of them (asked again until it does, within
/// [`LIMIT`]): for what changes in the background, where no event tells the test.
async fn metrics_once(daemon: &Daemon, what: &str, ready: impl Fn(&str) -> bool) -> String {
    within(LIMIT, what, async {
        loop {
            let text = daemon.metrics().await;
            if ready(&text) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// What a lock of the single-tenant daemon's is labelled with.
const LOCK: &str = r#"tenant="",family="lock""#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_is_described_before_any_event_with_the_build_and_the_process() {
    let daemon = daemon().await;
    let text = daemon.metrics().await;
    let families = families();
    for family in &families {
        let name = family.split(' ').next().unwrap();
        assert!(text.contains(&format!("\n# TYPE {family}\n")), "no TYPE of {family}: {text}");
        assert!(text.contains(&format!("\n# HELP {name} ")), "no HELP of {name}: {text}");
    }
    let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(types, families.len(), "a family the reference does not list: {text}");
    // No call was made, so none is counted; the served recipes' swaps and refusals, and the
    // tenant's leadership changes, are there at zero for `absent()` alerts.
    assert!(!text.contains("wazoo_calls_total{"), "{text}");
    assert_eq!(value(&text, r#"wazoo_recipe_swaps_total{tenant="",recipe="lock"}"#), Some(0.0), "{text}");
    assert_eq!(value(&text, r#"wazoo_recipe_refusals_total{tenant="",recipe="lock"}"#), Some(0.0), "{text}");
    assert_eq!(value(&text, r#"wazoo_leadership_changes_total{tenant=""}"#), Some(0.0), "{text}");
    assert_eq!(value(&text, r#"wazoo_zookeeper_session_up{tenant=""}"#), Some(1.0), "{text}");

    // The build: the version and the WIT packages `wazoo --version` names.
    let build = text.lines().find(|l| l.starts_with("wazoo_build_info{")).expect("wazoo_build_info");
    assert!(build.ends_with("} 1"), "{build}");
    assert!(build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))), "{build}");
    let (_, version, _) = output(cli().arg("--version")).await;
    for (package, offered) in wazoo_runtime::WIT_PACKAGES {
        let named = format!("{package}@{offered}");
        assert!(build.contains(&named), "{named} not in {build}");
        assert!(version.contains(&named), "wazoo --version does not name {named}: {version}");
    }

    // The process, read from /proc/self.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let started = value(&text, "process_start_time_seconds").expect("process_start_time_seconds");
    assert!(started <= now + 1.0 && started > now - 600.0, "started at {started}, now {now}");
    for positive in ["process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds"] {
        assert!(value(&text, positive).is_some_and(|v| v > 0.0), "{positive}: {text}");
    }
    let (open, max) = (value(&text, "process_open_fds").unwrap(), value(&text, "process_max_fds"));
    assert!(max.is_some_and(|max| max >= open), "max fds {max:?} < open {open}");
    assert!(value(&text, "process_cpu_seconds_total").is_some_and(|v| v >= 0.0), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_is_measured_apart_from_the_call_and_a_release_ends_the_time_held() {
    let daemon = daemon().await;
    let client = connect(&daemon).await;
    // A first lock warms the recipe up, so that no compile or first instantiation is timed below.
    client.lock(&unique("metrics-warm"), LockOptions::default()).await.unwrap().release().await.unwrap();
    let before = daemon.metrics().await;
    let path = unique("metrics-wait");

    let first = client.lock(&path, LockOptions::default()).await.unwrap();
    let text = daemon.metrics().await;
    assert_eq!(value(&text, &format!("wazoo_claims_held{{{LOCK}}}")), Some(1.0), "{text}");
    let waiting = tokio::spawn({
        let (client, path) = (client.clone(), path.clone());
        async move { client.lock(&path, LockOptions::default()).await }
    });
    let waits = format!("wazoo_claims_waiting{{{LOCK}}}");
    metrics_once(&daemon, "the second lock waits", |t| value(t, &waits) == Some(1.0)).await;
    // The first holds for a second while the second waits: both times are known to be long.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let oldest = format!("wazoo_claim_oldest_wait_seconds{{{LOCK}}}");
    let text = daemon.metrics().await;
    assert!(value(&text, &oldest).is_some_and(|age| age >= 1.0), "the wait has lasted a second: {text}");
    first.release().await.unwrap();
    let second = within(LIMIT, "the waiter takes the lock", waiting).await.unwrap().unwrap();

    let text = daemon.metrics().await;
    let delta = |series: &str| or_zero(&text, series) - or_zero(&before, series);
    // Two more waits that ended with the lock, one of them over half a second.
    assert_eq!(delta(&format!("wazoo_claim_wait_seconds_count{{{LOCK}}}")), 2.0, "{text}");
    assert_eq!(delta(&format!("wazoo_claim_wait_seconds_bucket{{le=\"0.5\",{LOCK}}}")), 1.0, "{text}");
    assert!(delta(&format!("wazoo_claim_wait_seconds_sum{{{LOCK}}}")) >= 1.0, "{text}");
    assert_eq!(value(&text, &waits), Some(0.0), "{text}");
    assert_eq!(value(&text, &oldest), Some(0.0), "no wait goes on: {text}");
    assert_eq!(value(&text, &format!("wazoo_claims_held{{{LOCK}}}")), Some(1.0), "the second holds: {text}");
    // The first was held for a second, and its release observed it.
    assert_eq!(delta(&format!("wazoo_claim_held_seconds_count{{{LOCK}}}")), 1.0, "{text}");
    assert_eq!(delta(&format!("wazoo_claim_held_seconds_bucket{{le=\"0.5\",{LOCK}}}")), 0.0, "{text}");
    // The calls' own service time leaves the wait out: both Acquires took under half a second,
    // though the second lasted over one.
    let acquire = r#"tenant="",method="Acquire",recipe="lock""#;
    assert_eq!(delta(&format!("wazoo_call_seconds_count{{{acquire}}}")), 2.0, "{text}");
    assert_eq!(delta(&format!("wazoo_call_seconds_bucket{{le=\"0.5\",{acquire}}}")), 2.0, "{text}");
    assert_eq!(delta(&format!("wazoo_calls_total{{{acquire},outcome=\"ok\"}}")), 2.0, "{text}");

    second.release().await.unwrap();
    let text = daemon.metrics().await;
    assert_eq!(value(&text, &format!("wazoo_claims_held{{{LOCK}}}")), Some(0.0), "{text}");
    let held = format!("wazoo_claim_held_seconds_count{{{LOCK}}}");
    assert_eq!(or_zero(&text, &held) - or_zero(&before, &held), 2.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_try_is_contended_and_a_wait_that_runs_out_a_timeout_not_errors() {
    let daemon = daemon().await;
    let client = connect(&daemon).await;
    let path = unique("metrics-busy");
    let held = client.lock(&path, LockOptions::default()).await.unwrap();

    let tried = LockOptions { timeout: Some(Duration::ZERO), ..LockOptions::default() };
    let refused = client.lock(&path, tried).await.err().expect("the lock is taken");
    assert_eq!(refused.kind, Some(ErrorKind::Timeout), "{refused:?}");
    let bounded = LockOptions { timeout: Some(Duration::from_millis(200)), ..LockOptions::default() };
    let refused = client.lock(&path, bounded).await.err().expect("the lock is taken");
    assert_eq!(refused.kind, Some(ErrorKind::Timeout), "{refused:?}");
    // The CLI's -n through the daemon is a try too.
    let (status, _, stderr) = output(daemon.wazoo().args(["lock", "-n", "-q", &path, "--", "true"])).await;
    assert_eq!(status, 3, "{stderr}");

    let text = daemon.metrics().await;
    let outcomes = |outcome: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with("wazoo_calls_total{") && l.contains(&format!("outcome=\"{outcome}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let acquire = r#"wazoo_calls_total{tenant="",method="Acquire",recipe="lock""#;
    assert_eq!(value(&text, &format!("{acquire},outcome=\"timeout\"}}")), Some(1.0), "{text}");
    assert_eq!(outcomes("contended"), 2.0, "the client's try and the CLI's -n: {text}");
    // Outcomes are words, not gRPC code names, and contention is no error.
    for old in ["deadlineexceeded", "deadline-exceeded", "notfound"] {
        assert_eq!(outcomes(old), 0.0, "{old}: {text}");
    }
    let refused_waits = format!("wazoo_claim_wait_seconds_count{{{LOCK}}}");
    assert_eq!(value(&text, &refused_waits), Some(1.0), "only the granted wait is observed: {text}");
    assert_eq!(value(&text, &format!("wazoo_claims_waiting{{{LOCK}}}")), Some(0.0), "{text}");
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_lost_are_counted_by_reason() {
    let daemon = daemon().await;
    let client = connect(&daemon).await;
    let checker = client_of_zk().await;
    let lost = |reason: &str| format!("wazoo_claims_lost_total{{{LOCK},reason=\"{reason}\"}}");

    // Its node deleted by a plain ZooKeeper client.
    let first = client.lock(&unique("metrics-deleted"), LockOptions::default()).await.unwrap();
    let text = daemon.metrics().await;
    for reason in ["node-deleted", "revoked", "session-expired", "cut-off", "client-session-ended"] {
        assert_eq!(value(&text, &lost(reason)), Some(0.0), "every reason from the first claim on: {text}");
    }
    let losing = first.lost();
    checker.delete(first.node(), None).await.unwrap();
    assert_eq!(within(LIMIT, "the loss is reported", losing).await, Lost::NodeDeleted);
    let text = daemon.metrics().await;
    assert_eq!(value(&text, &lost("node-deleted")), Some(1.0), "{text}");
    assert_eq!(value(&text, &format!("wazoo_claims_held{{{LOCK}}}")), Some(0.0), "lost is not held: {text}");
    assert_eq!(value(&text, &format!("wazoo_claim_held_seconds_count{{{LOCK}}}")), Some(1.0), "{text}");
    drop(first);

    // Revoked by another client.
    let second = client.lock(&unique("metrics-revoked"), LockOptions::default()).await.unwrap();
    let losing = second.lost();
    let revoke = RevokeRequest { node: second.node().to_string(), grace_ms: None, recipe: String::new() };
    client.recipes().revoke(revoke).await.unwrap();
    assert_eq!(within(LIMIT, "the revocation is reported", losing).await, Lost::Revoked);
    let text = daemon.metrics().await;
    assert_eq!(value(&text, &lost("revoked")), Some(1.0), "{text}");
    assert_eq!(value(&text, &lost("node-deleted")), Some(1.0), "counted once: {text}");
    second.release().await.unwrap();
    assert_eq!(value(&daemon.metrics().await, &lost("revoked")), Some(1.0), "a release is no loss");

    // Held on a stream whose client session is closed.
    let session = client.session(Duration::from_secs(10), "metrics closing".into()).await.unwrap();
    let mut holder = client.holder(&session).await.unwrap();
    holder.acquire(&unique("metrics-closed"), &LockOptions::default()).await.unwrap();
    session.close().await;
    assert_eq!(within(LIMIT, "the holder is told", holder.lost()).await, Lost::ClientSessionEnded);
    let counted = |t: &str| value(t, &lost("client-session-ended")) == Some(1.0);
    let text = metrics_once(&daemon, "the ended session's claim is counted", counted).await;
    assert_eq!(value(&text, &format!("wazoo_claims_held{{{LOCK}}}")), Some(0.0), "{text}");
    for reason in ["session-expired", "cut-off"] {
        assert_eq!(value(&text, &lost(reason)), Some(0.0), "{reason}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_gone_takes_the_session_down_and_its_claims_with_it() {
    use wazoo_testkit::{ServerOptions, ZkServer};
    let mut server = ZkServer::start(ServerOptions { tick_ms: 200, ..ServerOptions::default() }).unwrap();
    let extra = ["--session-timeout", "1s"];
    let daemon = Daemon::start_on(&server.address(), &plugins(), &daemon::cache(), &extra).await;
    let up = r#"wazoo_zookeeper_session_up{tenant=""}"#;
    assert_eq!(value(&daemon.metrics().await, up), Some(1.0));
    let client = connect(&daemon).await;
    let held = client.lock(&unique("metrics-down"), LockOptions::default()).await.unwrap();
    let losing = held.lost();

    server.kill();
    let lost = within(LIMIT, "the loss is reported", losing).await;
    assert!(matches!(lost, Lost::CutOff | Lost::SessionExpired), "{lost:?}");
    let text = metrics_once(&daemon, "the session is down", |t| value(t, up) == Some(0.0)).await;
    let reasons = ["cut-off", "session-expired"]
        .map(|reason| or_zero(&text, &format!("wazoo_claims_lost_total{{{LOCK},reason=\"{reason}\"}}")));
    assert_eq!(reasons.iter().sum::<f64>(), 1.0, "{reasons:?}: {text}");
    assert_eq!(value(&text, &format!("wazoo_claims_held{{{LOCK}}}")), Some(0.0), "{text}");
    drop(held);

    // Back: the next scrape finds a new session.
    server.restart().unwrap();
    metrics_once(&daemon, "the session is up again", |t| value(t, up) == Some(1.0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_handed_over_counts_two_leadership_changes() {
    let daemon = daemon().await;
    let client = connect(&daemon).await;
    let path = unique("metrics-election");
    let changes = r#"wazoo_leadership_changes_total{tenant=""}"#;
    let leaders = r#"wazoo_claims_held{tenant="",family="election"}"#;
    let ttl = Duration::from_secs(10);

    let mut first =
        client.session(ttl, "first".into()).await.unwrap().contender(Ask::Campaign { id: "a".into() }, "");
    first.acquire(&path, None).await.unwrap();
    let first = first.hold().await.unwrap();
    let text = daemon.metrics().await;
    assert_eq!(value(&text, changes), Some(1.0), "{text}");
    assert_eq!(value(&text, leaders), Some(1.0), "{text}");

    let second = client.session(ttl, "second".into()).await.unwrap();
    let waiting = tokio::spawn(async move {
        let mut second = second.contender(Ask::Campaign { id: "b".into() }, "");
        second.acquire(&path, None).await.map(|_| ())?;
        second.hold().await.map_err(wazoo_client::NotAcquired::Failed)
    });
    let waits = r#"wazoo_claims_waiting{tenant="",family="election"}"#;
    metrics_once(&daemon, "the second candidate waits", |t| value(t, waits) == Some(1.0)).await;
    assert_eq!(value(&daemon.metrics().await, changes), Some(1.0), "no change while it waits");
    first.release().await.unwrap();
    let second = within(LIMIT, "the second candidate leads", waiting).await.unwrap().unwrap();
    let text = daemon.metrics().await;
    assert_eq!(value(&text, changes), Some(2.0), "{text}");
    assert_eq!(value(&text, leaders), Some(1.0), "{text}");
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_used_through_the_daemon_has_its_depth_followed() {
    let daemon = daemon().await;
    let client = connect(&daemon).await;
    let path = unique("metrics-queue");
    let depth = format!("wazoo_queue_depth{{tenant=\"\",queue=\"{path}\"}}");
    let put = |data: &str| QueuePutRequest {
        path: path.clone(),
        data: data.as_bytes().to_vec(),
        priority: None,
        recipe: String::new(),
        ephemeral: false,
        session: 0,
    };
    for item in ["a", "b", "c"] {
        client.recipes().queue_put(put(item)).await.unwrap();
    }
    metrics_once(&daemon, "three items", |t| value(t, &depth) == Some(3.0)).await;
    // An item put by another client, not through the daemon, is seen too.
    let (status, _, stderr) = output(cli().args(["queue", "put", &path, "d"])).await;
    assert_eq!(status, 0, "{stderr}");
    metrics_once(&daemon, "four items", |t| value(t, &depth) == Some(4.0)).await;
    let take = WaitRequest { path: path.clone(), timeout_ms: Some(5000), recipe: String::new() };
    let taken = client.recipes().queue_take(take).await.unwrap().into_inner();
    assert_eq!(taken.data, b"a");
    metrics_once(&daemon, "three items again", |t| value(t, &depth) == Some(3.0)).await;
}

/// A path a client names as a queue that nobody makes gives its place among the followed queues
/// back: the tenant's 32 places are not kept by paths that are no queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_that_is_no_queue_gives_its_place_back() {
    let daemon = daemon().await;
    let client = connect(&daemon).await;
    let path = unique("metrics-no-queue");
    let depth = format!("wazoo_queue_depth{{tenant=\"\",queue=\"{path}\"}}");
    let take = WaitRequest { path: path.clone(), timeout_ms: Some(0), recipe: String::new() };
    client.recipes().queue_take(take).await.err().expect("an empty queue has nothing to take");
    metrics_once(&daemon, "the path is followed", |t| value(t, &depth) == Some(0.0)).await;
    metrics_once(&daemon, "its place given back", |t| !t.contains(&depth)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_the_alerts_use_only_metrics_a_live_daemon_serves() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("deploy/grafana/wazoo.json")).unwrap())
            .expect("the dashboard is JSON");
    let rules = std::fs::read_to_string(root().join("deploy/prometheus/alerts.yml")).unwrap();
    let rules = yaml_rust2::YamlLoader::load_from_str(&rules).expect("the alert rules are YAML");

    // Every expression: the panels' targets and the variables' queries.
    let mut expressions = Vec::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            expressions.push(target["expr"].as_str().expect("a target's expr").to_string());
        }
    }
    let variables = dashboard["templating"]["list"].as_array().expect("variables");
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        let query = variable["query"]["query"].as_str().expect("a variable's query");
        let metric = query.strip_prefix("label_values(").and_then(|q| q.split(',').next()).expect(query);
        expressions.push(metric.trim().to_string());
    }
    let mut alerts = BTreeSet::new();
    for group in rules[0]["groups"].as_vec().expect("groups") {
        for rule in group["rules"].as_vec().expect("rules") {
            alerts.insert(rule["alert"].as_str().expect("an alerting rule").to_string());
            expressions.push(rule["expr"].as_str().expect("a rule's expr").to_string());
        }
    }
    let want: BTreeSet<String> =
        ["WazooZooKeeperSessionDown", "WazooClaimsLostRising", "WazooClaimWaitHigh", "WazooRecipeTrapping"]
            .map(String::from)
            .into();
    assert!(alerts.is_superset(&want), "{alerts:?}");
    let used: BTreeSet<String> = expressions.iter().flat_map(|e| metric_names(e)).collect();
    for needed in ["wazoo_claim_wait_seconds_bucket", "wazoo_claims_lost_total", "wazoo_zookeeper_session_up"]
    {
        assert!(used.contains(needed), "{needed} is not used: {used:?}");
    }

    // A daemon that has served a lock that waited and a queue, so that every family has samples.
    let daemon = daemon().await;
    let client = connect(&daemon).await;
    let path = unique("metrics-dashboard");
    let held = client.lock(&path, LockOptions::default()).await.unwrap();
    let bounded = LockOptions { timeout: Some(Duration::from_millis(100)), ..LockOptions::default() };
    client.lock(&path, bounded).await.err().expect("the lock is taken");
    held.release().await.unwrap();
    let put = QueuePutRequest {
        path: unique("metrics-dashboard-queue"),
        data: b"x".to_vec(),
        ..Default::default()
    };
    client.recipes().queue_put(put).await.unwrap();
    let text = metrics_once(&daemon, "the queue is followed", |t| t.contains("\nwazoo_queue_depth{")).await;
    let served: BTreeSet<&str> =
        text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
    let missing: Vec<&String> = used.iter().filter(|name| !served.contains(name.as_str())).collect();
    assert!(missing.is_empty(), "used but not served: {missing:?}\nserved: {served:?}");
}

/// The metric names a PromQL expression uses: its identifiers that are no function (followed by
/// `(`), keyword, label (inside `{…}`, or listed after `by`, `without`, `on`, `ignoring`,
/// `group_left` or `group_right`), range (`[…]`), number or string.
fn metric_names(expr: &str) -> Vec<String> {
    const GROUPING: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    const OPERATORS: [&str; 4] = ["bool", "and", "or", "unless"];
    // Strings, label matchers and ranges out first (each leaves a space).
    let mut plain = String::new();
    let (mut nested, mut quote) = (0, None);
    for c in expr.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                plain.push(' ');
            }
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '{' | '[') => nested += 1,
            (None, '}' | ']') => {
                nested -= 1;
                plain.push(' ');
            }
            (None, c) if nested == 0 => plain.push(c),
            _ => {}
        }
    }
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = Vec::new();
    let mut rest = plain.as_str();
    let mut labels = false;
    while let Some(start) = rest.find(is_word) {
        let len = rest[start..].find(|c: char| !is_word(c)).unwrap_or(rest.len() - start);
        let word = &rest[start..start + len];
        let after = rest[start + len..].trim_start();
        let before = rest[..start].trim_end();
        rest = &rest[start + len..];
        // A list of labels runs from the `(` after a grouping keyword to its `)`.
        if labels && before.contains(')') {
            labels = false;
        }
        if GROUPING.contains(&word) {
            labels = after.starts_with('(');
            continue;
        }
        let number = word.starts_with(|c: char| c.is_ascii_digit());
        // `sum by (…) (…)`: an aggregation, whose grouping comes before its argument.
        let next = after.split(|c: char| !is_word(c)).next().unwrap_or("");
        let aggregation = next == "by" || next == "without";
        if labels || number || aggregation || OPERATORS.contains(&word) || after.starts_with('(') {
            continue;
        }
        names.push(word.to_string());
    }
    names
}

/// A plain ZooKeeper client of the shared server (the one the tests' daemons use).
async fn client_of_zk() -> zookeeper_client::Client {
    client(&zk().address()).await
}

#[test]
fn metric_names_of_promql() {
    let expr = r#"histogram_quantile(0.99, sum by (le, tenant) (rate(wazoo_claim_wait_seconds_bucket{tenant=~"$t",le!="1e3"}[5m]))) > 3e2"#;
    assert_eq!(metric_names(expr), ["wazoo_claim_wait_seconds_bucket"]);
    let expr = "sum without (family) (increase(a_total[10m])) / on (tenant) group_left b or c == bool 1";
    assert_eq!(metric_names(expr), ["a_total", "b", "c"]);
    assert_eq!(metric_names("wazoo_zookeeper_session_up == 0"), ["wazoo_zookeeper_session_up"]);
}
