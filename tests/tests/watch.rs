//! Persistent watches, the cache recipe and `wazoo watch` against a real ZooKeeper: what the CLI
//! prints (locally and through `wazoo serve`), what a cache reports across a broken connection
//! and across a new session, the repair of ZOOKEEPER-4466 (a one-shot watch on a path watched
//! persistently in the same session), the watch limit, and a watcher's bounded queue.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};
use wazoo_proto::recipes_client::RecipesClient;
use wazoo_proto::{WatchEvent, WatchKind, WatchRequest};
use wazoo_runtime::{CacheChange, CacheHandle, CachedNode, Host, RecipeError, Watching, ZkError};
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;
use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, SessionState};

const LIMIT: Duration = Duration::from_secs(30);
/// How long a cache that has reported everything stays quiet before a test says so.
const QUIET: Duration = Duration::from_millis(700);

fn persistent() -> CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// A node as a test compares it: data, version, and the zxids that made and last set it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shape {
    data: Vec<u8>,
    version: i32,
    czxid: i64,
    mzxid: i64,
}

type Tree = BTreeMap<String, Shape>;

/// What ZooKeeper holds at `top` and, with `recursive`, below it.
async fn real_tree(checker: &Client, top: &str, recursive: bool) -> Tree {
    let mut tree = Tree::new();
    let mut todo = vec![top.to_string()];
    while let Some(path) = todo.pop() {
        match checker.get_data(&path).await {
            Ok((data, stat)) => {
                let shape = Shape { data, version: stat.version, czxid: stat.czxid, mzxid: stat.mzxid };
                tree.insert(path.clone(), shape);
            }
            Err(zookeeper_client::Error::NoNode) => continue,
            Err(e) => panic!("reading {path}: {e}"),
        }
        if recursive {
            match checker.list_children(&path).await {
                Ok(children) => todo.extend(children.iter().map(|c| format!("{path}/{c}"))),
                Err(zookeeper_client::Error::NoNode) => {}
                Err(e) => panic!("listing {path}: {e}"),
            }
        }
    }
    tree
}

fn shape(node: &CachedNode) -> Shape {
    Shape {
        data: node.data.clone(),
        version: node.stat.version,
        czxid: node.stat.czxid,
        mzxid: node.stat.mzxid,
    }
}

fn tree_of<'a>(nodes: impl IntoIterator<Item = &'a CachedNode>) -> Tree {
    nodes.into_iter().map(|n| (n.path.clone(), shape(n))).collect()
}

/// A change as a line: `created PATH VERSION DATA`, `changed …`, `deleted PATH`, `initialized`.
fn said(change: &CacheChange) -> String {
    let text = |n: &CachedNode| String::from_utf8_lossy(&n.data).into_owned();
    match change {
        CacheChange::Created(n) => format!("created {} {} {}", n.path, n.stat.version, text(n)),
        CacheChange::Changed(n) => format!("changed {} {} {}", n.path, n.stat.version, text(n)),
        CacheChange::Deleted(n) => format!("deleted {}", n.path),
        CacheChange::Initialized => "initialized".to_string(),
    }
}

/// Reads a fresh cache's first reports up to `initialized`; the `created` ones as lines.
async fn initial(cache: &mut CacheHandle) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match within(LIMIT, "the cache reads what is there", cache.next(Some(LIMIT))).await.unwrap() {
            CacheChange::Initialized => return seen,
            change => seen.push(said(&change)),
        }
    }
}

/// The next report of `cache`, which must come.
async fn report(cache: &mut CacheHandle, what: &str) -> String {
    match within(LIMIT, what, cache.next(Some(LIMIT))).await {
        Ok(change) => said(&change),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Every report of `cache` until it has been quiet for [`QUIET`].
async fn drain(cache: &mut CacheHandle) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match within(LIMIT, "draining the cache", cache.next(Some(QUIET))).await {
            Ok(change) => seen.push(said(&change)),
            Err(RecipeError::Zk(ZkError::Timeout)) => return seen,
            Err(e) => panic!("draining the cache after {seen:?}: {e}"),
        }
    }
}

/// What reports a cache's changes: a cache handle, or a `Watching` across sessions.
trait Reports {
    fn next_change(
        &mut self,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<CacheChange, RecipeError>>;
}

impl Reports for Watching {
    fn next_change(
        &mut self,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<CacheChange, RecipeError>> {
        self.next(timeout)
    }
}

impl Reports for CacheHandle {
    fn next_change(
        &mut self,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<CacheChange, RecipeError>> {
        self.next(timeout)
    }
}

/// Reads `cache`'s reports until every line of `expected` has come (in any order, a re-read
/// after `missed` allowed), going on past a lost connection; returns them all, in the order
/// reported.
async fn reports_until(cache: &mut impl Reports, expected: &[String]) -> Vec<String> {
    let mut seen = Vec::new();
    let collect = async {
        while !expected.iter().all(|e| seen.contains(e)) {
            match cache.next_change(Some(LIMIT)).await {
                Ok(change) => seen.push(said(&change)),
                Err(RecipeError::Zk(ZkError::ConnectionLoss)) => {}
                Err(e) => panic!("watching, after {seen:?}: {e}"),
            }
        }
    };
    if tokio::time::timeout(LIMIT * 2, collect).await.is_err() {
        panic!("expected {expected:?}, reported only {seen:?}");
    }
    seen
}

/// A running `wazoo watch`: its stdout's lines, and its stderr's up to the ready line.
struct WatchCommand {
    _child: Child,
    out: Lines<BufReader<ChildStdout>>,
    err: Lines<BufReader<ChildStderr>>,
}

impl WatchCommand {
    fn start(command: &mut Command) -> WatchCommand {
        let mut child =
            command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting wazoo");
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let err = BufReader::new(child.stderr.take().unwrap()).lines();
        WatchCommand { _child: child, out, err }
    }

    /// The `wazoo: watching …` line: the snapshot has been read.
    async fn ready(&mut self) -> String {
        let mut before = Vec::new();
        loop {
            match within(LIMIT, "wazoo watch is ready", self.err.next_line()).await.unwrap() {
                Some(line) if line.starts_with("wazoo: watching ") => return line,
                Some(line) => before.push(line),
                None => panic!("wazoo watch ended before it was ready: {before:?}"),
            }
        }
    }

    async fn line(&mut self) -> String {
        match within(LIMIT, "wazoo watch prints a line", self.out.next_line()).await.unwrap() {
            Some(line) => line,
            None => panic!("wazoo watch ended"),
        }
    }
}

/// A line of `wazoo watch --json`.
fn event(event: &str, path: &str, version: i32, data: &str) -> serde_json::Value {
    serde_json::json!({"event": event, "path": path, "version": version, "data": data})
}

/// `cli()` for `wazoo watch ARGS…`.
fn wazoo_watch(args: &[&str]) -> WatchCommand {
    WatchCommand::start(cli().arg("watch").args(args))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wazoo_watch_reports_a_node_being_made_set_and_deleted_but_not_its_children() {
    let checker = client(&zk().address()).await;
    let base = unique("watch-node");
    checker.mkdir(&base, &persistent()).await.unwrap();
    let node = format!("{base}/node");
    let mut watch = wazoo_watch(&[&node]);
    assert_eq!(watch.ready().await, format!("wazoo: watching {node} (0 nodes there)"));

    checker.create(&node, b"first value", &persistent()).await.unwrap();
    assert_eq!(watch.line().await, format!("created {node} 0 first value"));
    // A child (not reported), then two quick sets, the second to empty data.
    checker.create(&format!("{node}/child"), b"c", &persistent()).await.unwrap();
    assert_eq!(checker.set_data(&node, b"second", None).await.unwrap().version, 1);
    assert_eq!(checker.set_data(&node, b"", None).await.unwrap().version, 2);
    let mut versions = Vec::new();
    loop {
        let line = watch.line().await;
        let (version, data) = match line.strip_prefix(&format!("changed {node} ")) {
            Some(rest) => rest.split_once(' ').map_or((rest, None), |(v, d)| (v, Some(d))),
            None => panic!("expected a `changed` line, got {line:?}"),
        };
        let version: i32 = version.parse().unwrap_or_else(|_| panic!("a version in {line:?}"));
        match version {
            1 => assert_eq!(data, Some("second"), "{line:?}"),
            // Empty data: no DATA field at all.
            2 => assert_eq!(data, None, "{line:?}"),
            _ => panic!("no such version: {line:?}"),
        }
        assert!(versions.last().is_none_or(|&v| v < version), "versions fall: {versions:?} then {line:?}");
        versions.push(version);
        if version == 2 {
            break;
        }
    }
    checker.delete(&format!("{node}/child"), None).await.unwrap();
    checker.delete(&node, None).await.unwrap();
    // The child's creation and deletion came before, and printed nothing.
    assert_eq!(watch.line().await, format!("deleted {node}"));
    checker.create(&node, b"again", &persistent()).await.unwrap();
    assert_eq!(watch.line().await, format!("created {node} 0 again"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wazoo_watch_recursive_prints_the_tree_first_then_each_change_in_json_and_escaped_text() {
    let checker = client(&zk().address()).await;
    let top = unique("watch-tree");
    let (a, b, c) = (format!("{top}/a"), format!("{top}/a/b"), format!("{top}/a/b/c"));
    checker.mkdir(&top, &persistent()).await.unwrap();
    checker.set_data(&top, b"top", None).await.unwrap();
    checker.create(&a, b"a", &persistent()).await.unwrap();
    checker.create(&b, b"b", &persistent()).await.unwrap();

    let mut json = wazoo_watch(&[&top, "--recursive", "--initial", "--json"]);
    let mut text = wazoo_watch(&[&top, "-r"]);
    let next_json = async |json: &mut WatchCommand| -> serde_json::Value {
        let line = json.line().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?} is not JSON: {e}"))
    };
    // The snapshot, parents first, before the ready line.
    assert_eq!(next_json(&mut json).await, event("created", &top, 1, "top"));
    assert_eq!(next_json(&mut json).await, event("created", &a, 0, "a"));
    assert_eq!(next_json(&mut json).await, event("created", &b, 0, "b"));
    assert_eq!(json.ready().await, format!("wazoo: watching {top} and below it (3 nodes there)"));
    assert_eq!(text.ready().await, format!("wazoo: watching {top} and below it (3 nodes there)"));

    checker.create(&c, b"deep", &persistent()).await.unwrap();
    assert_eq!(next_json(&mut json).await, event("created", &c, 0, "deep"));
    assert_eq!(text.line().await, format!("created {c} 0 deep"));
    checker.set_data(&a, b"a2", None).await.unwrap();
    assert_eq!(next_json(&mut json).await, event("changed", &a, 1, "a2"));
    assert_eq!(text.line().await, format!("changed {a} 1 a2"));
    // A recursive delete, children first: each reported with its last version and data.
    for path in [&c, &b, &a] {
        checker.delete(path, None).await.unwrap();
    }
    assert_eq!(next_json(&mut json).await, event("deleted", &c, 0, "deep"));
    assert_eq!(next_json(&mut json).await, event("deleted", &b, 0, "b"));
    assert_eq!(next_json(&mut json).await, event("deleted", &a, 1, "a2"));
    for path in [&c, &b, &a] {
        assert_eq!(text.line().await, format!("deleted {path}"));
    }

    // Data that is not one line: escaped in text, as it is in JSON.
    let awkward = "two\nlines\r\tand a \\ and \u{1b}[0m";
    checker.set_data(&top, awkward.as_bytes(), None).await.unwrap();
    assert_eq!(next_json(&mut json).await, event("changed", &top, 2, awkward));
    assert_eq!(text.line().await, format!(r"changed {top} 2 two\nlines\r\tand a \\ and \u{{1b}}[0m"));
}

/// Records the states `client`'s session goes through from now on, until it is connected again
/// after having been disconnected.
fn reconnection(client: &Client) -> tokio::task::JoinHandle<Vec<SessionState>> {
    let mut states = client.state_watcher();
    tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            let state = states.changed().await;
            seen.push(state);
            if state == SessionState::SyncConnected && seen.contains(&SessionState::Disconnected) {
                return seen;
            }
            if state.is_terminated() {
                return seen;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cache_reports_the_net_changes_made_while_its_connection_was_down() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(6))).await.unwrap();
    let top = unique("watch-reconnect");
    checker.mkdir(&top, &persistent()).await.unwrap();
    for (name, data) in [("a", "a"), ("b", "b"), ("c", "c"), ("f", "f"), ("f/g", "g")] {
        checker.create(&format!("{top}/{name}"), data.as_bytes(), &persistent()).await.unwrap();
    }
    let mut cache = host.cache("cache").await.unwrap();
    cache.start(&top, true).await.unwrap();
    assert_eq!(initial(&mut cache).await.len(), 6);
    let live = host.live().await.unwrap();
    let session = live.session_id();
    let states = reconnection(live.client());

    proxy.freeze();
    // Every write below succeeds on the server (an error would fail the test here).
    checker.create(&format!("{top}/d"), b"d", &persistent()).await.unwrap();
    checker.set_data(&format!("{top}/a"), b"a2", None).await.unwrap();
    checker.delete(&format!("{top}/b"), None).await.unwrap();
    checker.create(&format!("{top}/e"), b"short-lived", &persistent()).await.unwrap();
    checker.delete(&format!("{top}/e"), None).await.unwrap();
    checker.set_data(&format!("{top}/c"), b"c2", None).await.unwrap();
    assert_eq!(checker.set_data(&format!("{top}/c"), b"c3", None).await.unwrap().version, 2);
    // A subtree deleted and made again.
    checker.delete(&format!("{top}/f/g"), None).await.unwrap();
    checker.delete(&format!("{top}/f"), None).await.unwrap();
    checker.create(&format!("{top}/f"), b"f2", &persistent()).await.unwrap();
    checker.create(&format!("{top}/f/g"), b"g2", &persistent()).await.unwrap();
    // A fault window well within the 6 s session: the session survives it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.cut();
    proxy.thaw();
    let states = within(LIMIT, "the host reconnects", states).await.unwrap();
    assert!(!states.iter().any(|s| s.is_terminated()), "the session ended: {states:?}");
    assert!(proxy.cuts() >= 1);

    let seen = drain(&mut cache).await;
    // The old subtree goes children first, and the new one comes parents first.
    let remade = [
        format!("deleted {top}/f/g"),
        format!("deleted {top}/f"),
        format!("created {top}/f 0 f2"),
        format!("created {top}/f/g 0 g2"),
    ];
    let order: Vec<&String> = seen.iter().filter(|line| remade.contains(line)).collect();
    assert_eq!(order, remade.iter().collect::<Vec<_>>(), "{seen:?}");
    let mut expected = vec![
        format!("changed {top}/a 1 a2"),
        format!("changed {top}/c 2 c3"),
        format!("created {top}/d 0 d"),
        format!("deleted {top}/b"),
    ];
    expected.extend(remade);
    expected.sort();
    let mut seen = seen;
    seen.sort();
    assert_eq!(seen, expected, "the net changes, each once");
    assert_eq!(host.live().await.unwrap().session_id(), session, "the same session throughout");
    assert_eq!(tree_of(&cache.nodes().await.unwrap()), real_tree(&checker, &top, true).await);

    // And it goes on watching.
    checker.set_data(&format!("{top}/d"), b"d2", None).await.unwrap();
    assert_eq!(report(&mut cache, "a change after the reconnection").await, format!("changed {top}/d 1 d2"));
    cache.close().await;
}

/// Silences `host` (its connection runs through `proxy`) until ZooKeeper expires its session,
/// making `changes` meanwhile; an ephemeral node of the session (under `base`) tells when the
/// server has expired it. The expired session's id.
async fn expire_while(
    host: &Host,
    proxy: &Proxy,
    checker: &Client,
    base: &str,
    changes: impl std::future::Future,
) -> i64 {
    let live = host.live().await.unwrap();
    let marker = format!("{base}/marker");
    live.client().create(&marker, b"", &CreateMode::Ephemeral.with_acls(Acls::anyone_all())).await.unwrap();
    proxy.freeze();
    changes.await;
    within(LIMIT, "the server expires the host's session", wait_gone(checker, &marker)).await;
    proxy.thaw();
    live.session_id()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watching_outlives_its_session_and_reports_what_changed_meanwhile() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(2))).await.unwrap();
    let base = unique("watch-expire");
    let top = format!("{base}/tree");
    checker.mkdir(&top, &persistent()).await.unwrap();
    checker.create(&format!("{top}/a"), b"a", &persistent()).await.unwrap();
    checker.create(&format!("{top}/b"), b"b", &persistent()).await.unwrap();

    let mut watching = Watching::new(host.clone(), "cache", &top, true);
    watching.start().await.unwrap();
    let mut first = Vec::new();
    loop {
        match within(LIMIT, "the first snapshot", watching.next(Some(LIMIT))).await.unwrap() {
            CacheChange::Initialized => break,
            change => first.push(said(&change)),
        }
    }
    assert_eq!(first.len(), 3, "{first:?}");
    let session = expire_while(&host, &proxy, &checker, &base, async {
        checker.create(&format!("{top}/c"), b"c", &persistent()).await.unwrap();
        checker.set_data(&format!("{top}/a"), b"a2", None).await.unwrap();
        checker.delete(&format!("{top}/b"), None).await.unwrap();
    })
    .await;

    let expected =
        [format!("deleted {top}/b"), format!("changed {top}/a 1 a2"), format!("created {top}/c 0 c")];
    let seen = reports_until(&mut watching, &expected).await;
    assert_eq!(seen.len(), expected.len(), "exactly the differences: {seen:?}");
    assert!(watching.restarts() >= 1, "a new cache in a new session");
    assert_ne!(host.live().await.unwrap().session_id(), session, "the session was expired");
    assert_eq!(tree_of(watching.known().values()), real_tree(&checker, &top, true).await);

    // It goes on in the new session.
    checker.create(&format!("{top}/d"), b"d", &persistent()).await.unwrap();
    let seen = reports_until(&mut watching, &[format!("created {top}/d 0 d")]).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    checker.delete(&format!("{top}/a"), None).await.unwrap();
    reports_until(&mut watching, &[format!("deleted {top}/a")]).await;
    assert_eq!(tree_of(watching.known().values()), real_tree(&checker, &top, true).await);
    watching.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watching_reports_a_subtree_remade_in_another_session_children_first() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(2))).await.unwrap();
    let base = unique("watch-remade");
    let top = format!("{base}/tree");
    let (a, x) = (format!("{top}/a"), format!("{top}/a/x"));
    checker.mkdir(&x, &persistent()).await.unwrap();
    let mut watching = Watching::new(host.clone(), "cache", &top, true);
    watching.start().await.unwrap();
    let snapshot = [
        format!("created {top} 0 "),
        format!("created {a} 0 "),
        format!("created {x} 0 "),
        "initialized".into(),
    ];
    assert_eq!(reports_until(&mut watching, &snapshot).await, snapshot);
    expire_while(&host, &proxy, &checker, &base, async {
        checker.delete(&x, None).await.unwrap();
        checker.delete(&a, None).await.unwrap();
        checker.create(&a, b"new", &persistent()).await.unwrap();
        checker.create(&x, b"new", &persistent()).await.unwrap();
    })
    .await;

    // As the recipe itself reports a subtree made again: never a node without its parent.
    let expected = [
        format!("deleted {x}"),
        format!("deleted {a}"),
        format!("created {a} 0 new"),
        format!("created {x} 0 new"),
    ];
    assert_eq!(reports_until(&mut watching, &expected).await, expected);
    assert!(watching.restarts() >= 1);
    watching.close().await;
}

/// A cache on a path of its own in a session: once it has reported a change of its marker,
/// every earlier event of the session has come in.
struct Beacon {
    marker: String,
    cache: CacheHandle,
}

impl Beacon {
    async fn start(host: &Host, checker: &Client, base: &str) -> Beacon {
        let marker = format!("{base}/marker");
        checker.create(&marker, b"", &persistent()).await.unwrap();
        let mut cache = host.cache("cache").await.unwrap();
        cache.start(&marker, false).await.unwrap();
        initial(&mut cache).await;
        Beacon { marker, cache }
    }

    /// Returns once every event the session got before now has come in.
    async fn caught_up(&mut self, checker: &Client) {
        let mark = checker.set_data(&self.marker, b"", None).await.unwrap().version;
        let seen = report(&mut self.cache, "the marker's change").await;
        assert_eq!(seen, format!("changed {} {mark} ", self.marker));
    }
}

/// What the host's repair prevents: a one-shot watch set on a cache's path in the cache's own
/// session, past the host (with its ZooKeeper client), makes the cache miss later changes, on
/// this server (ZOOKEEPER-4466), whether the one-shot watch fires or is dropped. Without that,
/// the test of the repair would prove nothing.
async fn without_the_repair_a_cache_misses_changes(host: &Host, checker: &Client, base: &str) {
    let live = host.live().await.unwrap();
    let mut beacon = Beacon::start(host, checker, base).await;
    for fires in [false, true] {
        let node = format!("{base}/bare-{fires}");
        checker.create(&node, b"v0", &persistent()).await.unwrap();
        let mut cache = host.cache("cache").await.unwrap();
        cache.start(&node, false).await.unwrap();
        initial(&mut cache).await;
        assert_eq!(cache.live().session_id(), live.session_id(), "one session");
        let (_, _, oneshot) = live.client().get_and_watch_data(&node).await.unwrap();
        if fires {
            checker.set_data(&node, b"fires", None).await.unwrap();
            within(LIMIT, "the one-shot watch fires", oneshot.changed()).await;
            assert_eq!(report(&mut cache, "the change that fires").await, format!("changed {node} 1 fires"));
        } else {
            drop(oneshot);
        }
        for data in ["one", "two"] {
            checker.set_data(&node, data.as_bytes(), None).await.unwrap();
        }
        beacon.caught_up(checker).await;
        let seen = drain(&mut cache).await;
        assert!(
            seen.len() < 2,
            "this ZooKeeper keeps a persistent watch past a one-shot one in the same session \
             (fired: {fires}; reported {seen:?}): ZOOKEEPER-4466 is fixed here, and the test of \
             the host's repair proves nothing"
        );
        cache.close().await;
    }
    beacon.cache.close().await;
}

/// Sets `node` to `v{N}` (its next version N), and reads the report `cache` must make of it.
async fn set_and_see(checker: &Client, cache: &mut CacheHandle, node: &str, what: &str) -> i32 {
    let version = checker.get_data(node).await.unwrap().1.version + 1;
    let data = format!("v{version}");
    assert_eq!(checker.set_data(node, data.as_bytes(), Some(version - 1)).await.unwrap().version, version);
    assert_eq!(report(cache, what).await, format!("changed {node} {version} {data}"), "{what}");
    version
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_one_shot_watch_in_the_same_session_does_not_end_a_caches_persistent_watch() {
    let checker = client(&zk().address()).await;
    let base = unique("watch-4466");
    checker.mkdir(&base, &persistent()).await.unwrap();
    let host = host().await;
    without_the_repair_a_cache_misses_changes(&host, &checker, &base).await;
    for recursive in [false, true] {
        let node = format!("{base}/node-{recursive}");
        checker.create(&node, b"v0", &persistent()).await.unwrap();
        let mut cache = host.cache("cache").await.unwrap();
        cache.start(&node, recursive).await.unwrap();
        assert_eq!(initial(&mut cache).await, [format!("created {node} 0 v0")]);
        let mut config = host.config("config").await.unwrap();
        assert_eq!(config.live().session_id(), cache.live().session_id(), "one session");
        let see = async |cache: &mut CacheHandle, what: &str| {
            set_and_see(&checker, cache, &node, &format!("{what} (recursive: {recursive})")).await
        };

        // A one-shot watch on the node that times out: set, then dropped unfired.
        let waited = config.watch(&node, Some(0), Some(Duration::from_millis(300))).await;
        assert!(matches!(waited, Err(RecipeError::Zk(ZkError::Timeout))), "{waited:?}");
        see(&mut cache, "the first change after a dropped one-shot watch").await;
        let v = see(&mut cache, "the second change after a dropped one-shot watch").await;

        // One that fires: the node is set while it waits.
        let armed = host.stats().watches_armed();
        let waiting = {
            let node = node.clone();
            tokio::spawn(async move { (config.watch(&node, Some(v), None).await, config) })
        };
        within(LIMIT, "the config watch is armed", host.stats().armed_at_least(armed + 1)).await;
        let v = see(&mut cache, "the change that fires the one-shot watch").await;
        let (fired, mut config) = within(LIMIT, "the config watch fires", waiting).await.unwrap();
        assert_eq!(fired.unwrap().map(|e| e.version), Some(v));
        see(&mut cache, "the first change after a fired one-shot watch").await;
        see(&mut cache, "the second change after a fired one-shot watch").await;

        // One that finds the node changed already: dropped at once, unfired.
        assert!(config.watch(&node, Some(0), None).await.unwrap().is_some());
        see(&mut cache, "the first change after a one-shot watch dropped at once").await;
        see(&mut cache, "the second change after a one-shot watch dropped at once").await;
        config.close().await;
        cache.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_cache_takes_one_watch_under_the_hosts_limit() {
    let checker = client(&zk().address()).await;
    let top = unique("watch-limit");
    checker.mkdir(&top, &persistent()).await.unwrap();
    let mut settings = config(&zk().address(), Duration::from_secs(10));
    settings.limits.max_watches = 2;
    let host = Host::start(settings).await.unwrap();
    let mut first = host.cache("cache").await.unwrap();
    first.start(&top, true).await.unwrap();
    let mut second = host.cache("cache").await.unwrap();
    second.start(&top, false).await.unwrap();
    let mut third = host.cache("cache").await.unwrap();
    let refused = third.start(&top, true).await;
    assert!(matches!(refused, Err(RecipeError::Zk(ZkError::LimitExceeded(_)))), "{refused:?}");
    // The two started caches work on.
    assert_eq!(initial(&mut first).await, [format!("created {top} 0 ")]);
    assert_eq!(initial(&mut second).await, [format!("created {top} 0 ")]);
    checker.create(&format!("{top}/x"), b"x", &persistent()).await.unwrap();
    assert_eq!(report(&mut first, "the first cache reports").await, format!("created {top}/x 0 x"));

    first.close().await;
    third.start(&top, true).await.expect("room for a cache once one has closed");
    assert_eq!(initial(&mut third).await, [format!("created {top} 0 "), format!("created {top}/x 0 x")]);
    let mut fourth = host.cache("cache").await.unwrap();
    let refused = fourth.start(&top, false).await;
    assert!(matches!(refused, Err(RecipeError::Zk(ZkError::LimitExceeded(_)))), "{refused:?}");
    // The cache that stayed, on the same path as the closed one, still reports.
    checker.set_data(&top, b"t", None).await.unwrap();
    assert_eq!(report(&mut second, "the second cache reports").await, format!("changed {top} 1 t"));
    assert_eq!(report(&mut third, "the third cache reports").await, format!("changed {top} 1 t"));
    for cache in [second, third, fourth] {
        cache.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cache_left_unread_past_the_hosts_queue_still_ends_up_with_the_real_tree() {
    let checker = client(&zk().address()).await;
    let top = unique("watch-overflow");
    let (x, y) = (format!("{top}/x"), format!("{top}/y"));
    checker.mkdir(&top, &persistent()).await.unwrap();
    checker.create(&x, b"0", &persistent()).await.unwrap();
    checker.create(&y, b"y", &persistent()).await.unwrap();
    let host = host().await;
    let mut cache = host.cache("cache").await.unwrap();
    cache.start(&top, true).await.unwrap();
    assert_eq!(initial(&mut cache).await.len(), 3);

    // Far more than the 1024 notices the host keeps for an unread watcher.
    const SETS: i32 = 1500;
    for i in 1..=SETS {
        assert_eq!(checker.set_data(&x, i.to_string().as_bytes(), None).await.unwrap().version, i);
    }
    const CREATES: usize = 200;
    for i in 0..CREATES {
        checker.create(&format!("{top}/n{i:03}"), b"n", &persistent()).await.unwrap();
    }
    checker.delete(&y, None).await.unwrap();

    let seen = drain(&mut cache).await;
    let last_x = seen.iter().rev().find(|line| line.starts_with(&format!("changed {x} "))).cloned();
    assert_eq!(last_x, Some(format!("changed {x} {SETS} {SETS}")));
    assert!(seen.contains(&format!("deleted {y}")), "{y} deleted");
    for i in 0..CREATES {
        let path = format!("{top}/n{i:03}");
        let created = seen.iter().filter(|line| line.starts_with(&format!("created {path} "))).count();
        assert_eq!(created, 1, "{path} created once");
    }
    assert_eq!(tree_of(&cache.nodes().await.unwrap()), real_tree(&checker, &top, true).await);
    cache.close().await;
}

async fn next_event(events: &mut tonic::Streaming<WatchEvent>) -> WatchEvent {
    match within(LIMIT, "the daemon streams an event", events.message()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the watch stream ended"),
        Err(status) => panic!("the watch stream failed: {status}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wazoo_watch_and_grpc_watchers_through_the_daemon_see_each_change() {
    let checker = client(&zk().address()).await;
    let top = unique("watch-daemon");
    checker.mkdir(&top, &persistent()).await.unwrap();
    let top_stat = checker.set_data(&top, b"root", None).await.unwrap();
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;

    let mut watch = WatchCommand::start(daemon.wazoo().args(["watch", &top, "--recursive"]));
    let request = WatchRequest { path: top.clone(), recursive: true, recipe: String::new() };
    let mut events = RecipesClient::new(daemon.channel().await).watch(request).await.unwrap().into_inner();
    let first = next_event(&mut events).await;
    assert_eq!(first.kind(), WatchKind::Created);
    assert_eq!((first.path.as_str(), first.data.as_slice(), first.version), (top.as_str(), &b"root"[..], 1));
    assert_eq!((first.czxid, first.mzxid), (top_stat.czxid, top_stat.mzxid));
    assert_eq!(next_event(&mut events).await.kind(), WatchKind::Initialized);
    assert_eq!(watch.ready().await, format!("wazoo: watching {top} and below it (1 node there)"));

    let x = format!("{top}/x");
    let (stat, _) = checker.create(&x, b"hello", &persistent()).await.unwrap();
    assert_eq!(watch.line().await, format!("created {x} 0 hello"));
    let created = next_event(&mut events).await;
    assert_eq!(created.kind(), WatchKind::Created);
    assert_eq!(
        (created.path.as_str(), created.data.as_slice(), created.version),
        (x.as_str(), &b"hello"[..], 0)
    );
    assert_eq!((created.czxid, created.mzxid), (stat.czxid, stat.mzxid));
    checker.delete(&x, None).await.unwrap();
    assert_eq!(watch.line().await, format!("deleted {x}"));
    let deleted = next_event(&mut events).await;
    assert_eq!((deleted.kind(), deleted.path.as_str()), (WatchKind::Deleted, x.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wazoo_watch_refuses_a_relative_path_and_a_missing_recipe_in_one_line() {
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    let cases: [(&[&str], i32, &[&str]); 3] = [
        (&["watch", "relative/path"], 2, &["invalid watch path", "must be absolute"]),
        // A missing recipe, as for every command: 70.
        (&["watch", "/x", "--recipe", "nosuch"], 70, &["nosuch.wasm not found"]),
        (&["watch", "/x", "--recipe", "lock"], 70, &["not wazoo:recipes/cache-recipe"]),
    ];
    for (args, status, words) in cases {
        for (how, mut wazoo) in [("locally", cli()), ("through the daemon", daemon.wazoo())] {
            let (code, stdout, stderr) = output(wazoo.args(args)).await;
            assert_eq!(code, status, "{args:?} {how}: {stderr}");
            assert_eq!(stdout, "", "{args:?} {how}");
            assert_eq!(stderr.lines().count(), 1, "{args:?} {how}: {stderr:?}");
            assert!(stderr.starts_with("wazoo: "), "{args:?} {how}: {stderr:?}");
            for word in words {
                assert!(stderr.contains(word), "{args:?} {how}: {stderr:?} does not say {word:?}");
            }
        }
    }
}

/// What the host's repair prevents in the other order: a one-shot watch set on a path before a
/// cache's persistent watch there, in the same session, past the host, and dropped unfired
/// after the cache started, makes the cache miss later changes on this server.
async fn without_the_repair_an_earlier_one_shot_watch_ends_a_cache(
    host: &Host,
    checker: &Client,
    base: &str,
) {
    let live = host.live().await.unwrap();
    let mut beacon = Beacon::start(host, checker, base).await;
    let node = format!("{base}/bare");
    checker.create(&node, b"v0", &persistent()).await.unwrap();
    let (_, _, oneshot) = live.client().get_and_watch_data(&node).await.unwrap();
    let mut cache = host.cache("cache").await.unwrap();
    cache.start(&node, true).await.unwrap();
    initial(&mut cache).await;
    assert_eq!(cache.live().session_id(), live.session_id(), "one session");
    drop(oneshot);
    checker.create(&format!("{node}/x"), b"x", &persistent()).await.unwrap();
    checker.set_data(&node, b"one", None).await.unwrap();
    beacon.caught_up(checker).await;
    let seen = drain(&mut cache).await;
    assert!(
        seen.len() < 2,
        "this ZooKeeper keeps a persistent watch past the removal of a one-shot one set before \
         it in the same session (reported {seen:?}): the test of the host's repair proves nothing"
    );
    cache.close().await;
    beacon.cache.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_one_shot_watch_set_before_a_cache_and_dropped_after_it_started_leaves_the_cache_watching() {
    let checker = client(&zk().address()).await;
    let base = unique("watch-4466-before");
    let top = format!("{base}/node");
    checker.mkdir(&top, &persistent()).await.unwrap();
    let version = checker.set_data(&top, b"t", None).await.unwrap().version;
    let host = host().await;
    without_the_repair_an_earlier_one_shot_watch_ends_a_cache(&host, &checker, &base).await;

    // A one-shot data watch on the node, waiting, set before any persistent watch is there.
    let config = host.config("config").await.unwrap();
    let session = config.live().session_id();
    let armed = host.stats().watches_armed();
    let waiting = {
        let (mut config, top) = (config, top.clone());
        tokio::spawn(async move {
            let waited = config.watch(&top, Some(version), Some(Duration::from_secs(3))).await;
            (waited, config)
        })
    };
    within(LIMIT, "the config watch is armed", host.stats().armed_at_least(armed + 1)).await;

    let mut cache = host.cache("cache").await.unwrap();
    assert_eq!(cache.live().session_id(), session, "one session");
    cache.start(&top, true).await.unwrap();
    assert_eq!(initial(&mut cache).await, [format!("created {top} {version} t")]);
    assert!(
        !waiting.is_finished(),
        "the config watch ended before the cache had started: the one-shot watch was not dropped \
         after the persistent one was set, and the test proves nothing"
    );
    // It times out: dropped unfired, after the cache's persistent watch was set.
    let (waited, config) = within(LIMIT, "the config watch times out", waiting).await.unwrap();
    assert!(matches!(waited, Err(RecipeError::Zk(ZkError::Timeout))), "{waited:?}");

    let (x, y) = (format!("{top}/x"), format!("{top}/y"));
    checker.create(&x, b"x", &persistent()).await.unwrap();
    checker.create(&y, b"y", &persistent()).await.unwrap();
    let v = checker.set_data(&top, b"t2", None).await.unwrap().version;
    let expected = [format!("created {x} 0 x"), format!("created {y} 0 y"), format!("changed {top} {v} t2")];
    reports_until(&mut cache, &expected).await;
    // Once the cache has read those (on the session's connection, after the one-shot watch's
    // removal), the server has certainly removed it: later changes are reported too.
    checker.delete(&x, None).await.unwrap();
    let v = checker.set_data(&top, b"t3", None).await.unwrap().version;
    reports_until(&mut cache, &[format!("deleted {x}"), format!("changed {top} {v} t3")]).await;
    assert_eq!(tree_of(&cache.nodes().await.unwrap()), real_tree(&checker, &top, true).await);
    config.close().await;
    cache.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn through_the_daemon_a_barrier_wait_that_times_out_leaves_a_later_watch_watching() {
    let address = zk().address();
    let checker = client(&address).await;
    let top = unique("watch-4466-daemon");
    checker.mkdir(&top, &persistent()).await.unwrap();
    // Through a proxy, to see the barrier's watch armed on the server.
    let proxy = Proxy::start(&address).await;
    let daemon = Daemon::start_with(
        &plugins(),
        &root().join("target/component-cache"),
        &["--zookeeper", &proxy.address()],
    )
    .await;

    proxy.tap(None);
    let mut barrier = daemon
        .wazoo()
        .args(["barrier", "wait", &top, "--timeout", "5s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting wazoo barrier wait");
    let exists = |r: &wazoo_tests::proxy::Request| {
        r.kind == wazoo_tests::proxy::op::EXISTS && r.path == top && r.watch
    };
    let armed = within(LIMIT, "the barrier's watch is armed", proxy.answered(exists)).await;
    assert_eq!(armed.err, Some(0), "{armed:?}");
    proxy.untap();

    let mut watch = WatchCommand::start(daemon.wazoo().args(["watch", &top, "-r"]));
    assert_eq!(watch.ready().await, format!("wazoo: watching {top} and below it (1 node there)"));
    assert!(
        barrier.try_wait().unwrap().is_none(),
        "the barrier wait ended before the watch had started: the test proves nothing"
    );
    let waited = within(LIMIT, "the barrier wait times out", barrier.wait_with_output()).await.unwrap();
    let stderr = String::from_utf8_lossy(&waited.stderr);
    assert_eq!(waited.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("still up"), "{stderr:?}");

    let (x, y) = (format!("{top}/x"), format!("{top}/y"));
    checker.create(&x, b"x", &persistent()).await.unwrap();
    assert_eq!(watch.line().await, format!("created {x} 0 x"));
    checker.create(&y, b"y", &persistent()).await.unwrap();
    assert_eq!(watch.line().await, format!("created {y} 0 y"));
    checker.set_data(&top, b"t", None).await.unwrap();
    assert_eq!(watch.line().await, format!("changed {top} 1 t"));
    checker.delete(&x, None).await.unwrap();
    assert_eq!(watch.line().await, format!("deleted {x}"));
}

/// Makes `names` below `dir`, all requests sent before any reply is awaited.
async fn make_all(checker: &Client, dir: &str, names: impl Iterator<Item = String>) {
    let paths: Vec<String> = names.map(|name| format!("{dir}/{name}")).collect();
    let options = persistent();
    let sent: Vec<_> = paths.iter().map(|path| checker.create(path, b"n", &options)).collect();
    for (path, made) in paths.iter().zip(sent) {
        made.await.unwrap_or_else(|e| panic!("making {path}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watching_restarts_in_a_new_session_even_when_reading_the_tree_outlasts_each_call() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(2))).await.unwrap();
    let base = unique("watch-big");
    let top = format!("{base}/tree");
    checker.mkdir(&top, &persistent()).await.unwrap();
    const DIRS: usize = 30;
    const LEAVES: usize = 100;
    make_all(&checker, &top, (0..DIRS).map(|d| format!("d{d:02}"))).await;
    for d in 0..DIRS {
        make_all(&checker, &format!("{top}/d{d:02}"), (0..LEAVES).map(|l| format!("n{l:03}"))).await;
    }
    let size = 1 + DIRS + DIRS * LEAVES;

    let mut watching = Watching::new(host.clone(), "cache", &top, true);
    let began = tokio::time::Instant::now();
    watching.start().await.unwrap();
    let mut first = 0;
    loop {
        match within(LIMIT, "the first snapshot", watching.next(Some(LIMIT))).await.unwrap() {
            CacheChange::Initialized => break,
            _ => first += 1,
        }
    }
    let reading = began.elapsed();
    assert_eq!(first, size);
    // Short calls, as the daemon makes them: each shorter than reading the tree takes.
    const CALL: Duration = Duration::from_millis(200);
    assert!(reading > CALL, "reading {size} nodes took only {reading:?}: the test proves nothing");
    let late = format!("{top}/d07/late");
    let session = expire_while(&host, &proxy, &checker, &base, async {
        checker.create(&late, b"late", &persistent()).await.unwrap();
    })
    .await;

    // Each call may time out while the new cache reads the tree.
    let expected = format!("created {late} 0 late");
    let (mut seen, mut timeouts) = (Vec::new(), 0);
    let thawed = tokio::time::Instant::now();
    while !seen.contains(&expected) {
        assert!(
            thawed.elapsed() < LIMIT * 2,
            "no report of {late} after {timeouts} calls timed out (reading the tree first took \
             {reading:?}); reported {seen:?}"
        );
        match within(LIMIT, "a short call", watching.next(Some(CALL))).await {
            Ok(change) => seen.push(said(&change)),
            Err(RecipeError::Zk(ZkError::Timeout)) => timeouts += 1,
            Err(RecipeError::Zk(ZkError::ConnectionLoss)) => {}
            Err(e) => panic!("watching, after {seen:?}: {e}"),
        }
    }
    assert_eq!(seen, [expected], "exactly the difference ({timeouts} calls timed out)");
    assert!(watching.restarts() >= 1, "a new cache in a new session");
    assert_ne!(host.live().await.unwrap().session_id(), session, "the session was expired");
    assert_eq!(tree_of(watching.known().values()), real_tree(&checker, &top, true).await);
    watching.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watching_goes_on_after_a_call_is_cancelled_and_reports_only_what_changed() {
    let checker = client(&zk().address()).await;
    let top = unique("watch-cancel");
    let (a, b) = (format!("{top}/a"), format!("{top}/a/b"));
    checker.mkdir(&b, &persistent()).await.unwrap();
    let host = host().await;
    let mut watching = Watching::new(host.clone(), "cache", &top, true);
    watching.start().await.unwrap();
    let snapshot = [
        format!("created {top} 0 "),
        format!("created {a} 0 "),
        format!("created {b} 0 "),
        "initialized".into(),
    ];
    assert_eq!(reports_until(&mut watching, &snapshot).await, snapshot);

    // Cancelled while it waits for a change.
    let cancelled = tokio::time::timeout(Duration::from_millis(50), watching.next(None)).await;
    assert!(cancelled.is_err(), "nothing changed, yet the call returned {cancelled:?}");
    let c = format!("{top}/c");
    checker.create(&c, b"c", &persistent()).await.unwrap();
    let seen = reports_until(&mut watching, &[format!("created {c} 0 c")]).await;
    assert_eq!(seen, [format!("created {c} 0 c")], "only the change, nothing known reported again");
    assert!(watching.restarts() >= 1, "the cancelled cache was started again");

    // Cancelled again, perhaps while the change it is about to report is being read.
    checker.set_data(&a, b"a1", None).await.unwrap();
    let mut seen = Vec::new();
    if let Ok(change) = tokio::time::timeout(Duration::from_millis(1), watching.next(None)).await {
        seen.push(said(&change.unwrap()));
    }
    let changed = format!("changed {a} 1 a1");
    if !seen.contains(&changed) {
        seen.extend(reports_until(&mut watching, &[changed.clone()]).await);
    }
    assert_eq!(seen, [changed], "the change once, nothing known reported again");
    // And it goes on.
    checker.delete(&c, None).await.unwrap();
    assert_eq!(reports_until(&mut watching, &[format!("deleted {c}")]).await, [format!("deleted {c}")]);
    assert_eq!(tree_of(watching.known().values()), real_tree(&checker, &top, true).await);
    watching.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wazoo_watch_accepts_the_root() {
    let checker = client(&zk().address()).await;
    let (data, stat) = checker.get_data("/").await.unwrap();
    let root_line = match data.is_empty() {
        true => format!("created / {}", stat.version),
        false => format!("created / {} {}", stat.version, String::from_utf8_lossy(&data)),
    };
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    for (how, mut wazoo) in [("locally", cli()), ("through the daemon", daemon.wazoo())] {
        let mut watch = WatchCommand::start(wazoo.args(["watch", "/", "--initial"]));
        assert_eq!(watch.line().await, root_line, "{how}");
        assert_eq!(watch.ready().await, "wazoo: watching / (1 node there)", "{how}");
        assert!(watch._child.try_wait().unwrap().is_none(), "{how}: wazoo watch / ended");
        watch._child.kill().await.unwrap();
    }
}
