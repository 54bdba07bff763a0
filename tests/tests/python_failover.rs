//! The Python client (`clients/python`) through a daemon group (`wazoo serve --group`) on the
//! real ZooKeeper, daemons as real processes: the member a client is on is killed (SIGKILL; also
//! frozen, SIGSTOP, or told to stop, SIGTERM), and the client's session is taken up by another
//! member. A claim held in a `with` block stays held (same node, same fencing token, its claim
//! never lost, nobody else can take it meanwhile), whatever its kind: a lock, a write lock, a
//! semaphore lease, a leadership, a group membership, a registration (whose node a fresh
//! instance on the new member takes up and tends on). A waiter (for a lock, for leadership)
//! keeps its place in the queue and gets the claim after the holder before it. A DataWatch and a
//! ChildrenWatch are opened again on the member the client moved to, and report every change
//! once, nothing twice.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdout, Command};
use wazoo_tests::daemon::{cli, group, output, signal};
use wazoo_tests::python::{install, package};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// `python3 clients/python/tests/failover.py MODE ADDRESSES PATH` with the installed package on
/// its path, its stdin, stdout and stderr piped.
fn failover(installed: &Path, mode: &str, addresses: &str, path: &str) -> tokio::process::Child {
    Command::new("python3")
        .arg(package().join("tests/failover.py"))
        .args([mode, addresses, path])
        .env("PYTHONPATH", installed)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The script's stdout, line by line, every line read kept for messages.
struct Said {
    lines: tokio::io::Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Said {
    fn of(child: &mut tokio::process::Child) -> Said {
        Said { lines: BufReader::new(child.stdout.take().unwrap()).lines(), seen: Vec::new() }
    }

    /// Waits for the line whose first word is `key`: its words after it.
    async fn line(&mut self, key: &str) -> Vec<String> {
        let (lines, seen) = (&mut self.lines, &mut self.seen);
        within(LIMIT, key, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                seen.push(line.clone());
                let mut words = line.split_whitespace().map(str::to_string);
                if words.next().as_deref() == Some(key) {
                    return words.collect();
                }
            }
            panic!("the script's stdout ended without a line `{key} …`:\n{}", seen.join("\n"));
        })
        .await
    }

    /// Waits for the line `want` (at once if it was read already).
    async fn wait_for(&mut self, want: &str) {
        if self.seen.iter().any(|l| l == want) {
            return;
        }
        let (lines, seen) = (&mut self.lines, &mut self.seen);
        within(LIMIT, want, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                seen.push(line.clone());
                if line == want {
                    return;
                }
            }
            panic!("the script's stdout ended without a line `{want}`:\n{}", seen.join("\n"));
        })
        .await
    }

    /// The rest of the script's stdout.
    async fn rest(&mut self) {
        let (lines, seen) = (&mut self.lines, &mut self.seen);
        within(LIMIT, "the script's stdout ends", async {
            while let Some(line) = lines.next_line().await.unwrap() {
                seen.push(line);
            }
        })
        .await
    }

    fn all(&self) -> String {
        self.seen.join("\n")
    }

    /// Whether the script logged, at WARNING, a line starting `start` (e.g. "jeopardy:").
    fn logged(&self, start: &str) -> bool {
        let prefix = format!("log WARNING {start}");
        self.seen.iter().any(|l| l.starts_with(&prefix))
    }
}

/// Collects the script's stderr (its tracebacks) in the background.
fn stderr_of(child: &mut tokio::process::Child) -> tokio::task::JoinHandle<String> {
    let stderr = child.stderr.take().unwrap();
    tokio::spawn(async move {
        let mut text = String::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    })
}

/// The nodes under `path` (children only) with their czxids.
async fn nodes(checker: &zookeeper_client::Client, path: &str) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for child in children(checker, path).await {
        let (_, stat) = checker.get_data(&format!("{path}/{child}")).await.unwrap();
        found.push((child, stat.czxid));
    }
    found.sort();
    found
}

/// What `failover.py MODE` holds: the path to give it under the test's own `path`, whether its
/// token fences (it is the claim node's czxid; else 0), and a command on ZooKeeper (the CLI)
/// that would get the claim were it free, with the exit status that says it was refused.
fn kind(mode: &str, path: &str) -> (String, bool, Vec<String>, i32) {
    let timed = |args: &[&str], on: &str| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend([on, "--timeout", "500ms", "--", "true"].map(String::from));
        all
    };
    let owned = |args: &[&str]| -> Vec<String> { args.iter().map(|a| a.to_string()).collect() };
    match mode {
        "hold" => (path.to_string(), true, timed(&["lock"], path), 3),
        "rwlock" => (path.to_string(), true, timed(&["rwlock", "read"], path), 3),
        "semaphore" => (path.to_string(), true, timed(&["semaphore", "--leases", "1"], path), 3),
        "elect" => (path.to_string(), true, timed(&["elect"], path), 3),
        // The name is taken: a definite no.
        "join" => (path.to_string(), false, owned(&["group", "join", path, "py-member", "--", "true"]), 1),
        "register" => {
            let node = format!("{path}/service");
            let contender = owned(&["register", &node, "--data", "another", "--", "true"]);
            (node, false, contender, 3)
        }
        other => panic!("no such mode: {other}"),
    }
}

/// Waits, by watching it, until the node at `path` holds `data`.
async fn wait_data(checker: &zookeeper_client::Client, path: &str, data: &[u8]) {
    loop {
        let (now, _, watcher) = checker.get_and_watch_data(path).await.unwrap();
        if now == data {
            return;
        }
        watcher.changed().await;
    }
}

/// A claim of `mode` (see [`kind`]) held in a `with` block through "A,B" (on A) when A is killed
/// (`-KILL`), frozen (`-STOP`, let go on before the block is left) or told to stop (`-TERM`,
/// handing its work to the group): the client says "jeopardy" then "safe", now on B; the claim
/// is never lost and keeps its node and token (the same node in ZooKeeper, the same czxid); a
/// contender cannot take the claim meanwhile; the block is left without LockLost, and the
/// release deletes the node. A registration is tended on B: its data, changed in ZooKeeper,
/// is set back.
async fn held_through(mode: &str, signal_name: &str, name: &str) {
    let installed = install().await;
    let (a, b) = group(name).await;
    let checker = client(&zk().address()).await;
    let path = unique(name);
    let (claimed, fenced, contender, refused) = kind(mode, &path);
    let servers = format!("{},{}", a.grpc, b.grpc);
    let mut script = failover(installed.path(), mode, &servers, &claimed);
    let mut stdin = script.stdin.take().unwrap();
    let errors = stderr_of(&mut script);
    let mut said = Said::of(&mut script);

    let connected = said.line("connected").await;
    assert_eq!(connected, [a.grpc.as_str(), "True"], "the session opened on A, the first, in a group");
    let held = said.line("held").await;
    let (node, token) = (held[0].clone(), held[1].parse::<i64>().unwrap());
    // The claim's node, among its siblings (a semaphore's lease under `leases`).
    let (dir, _) = node.rsplit_once('/').unwrap();
    let before = nodes(&checker, dir).await;
    assert_eq!(before.len(), 1, "one claim node: {before:?}");
    assert_eq!(format!("{dir}/{}", before[0].0), node, "the claim's node: {before:?}");
    let czxid = if fenced { before[0].1 } else { 0 };
    assert_eq!(token, czxid, "the fencing token is the node's czxid (0: the claim fences nothing)");

    signal(a.pid(), signal_name);
    let safe = said.line("safe").await;
    let all = said.all();
    assert_eq!(safe[0], b.grpc, "the session is on B now:\n{all}");
    assert_eq!((safe[1].as_str(), safe[2].parse::<i64>().unwrap()), (node.as_str(), token), "{all}");
    assert_eq!(safe[3], "False", "the claim was not lost:\n{all}");
    assert!(said.logged("jeopardy:"), "the client logged the jeopardy at WARNING:\n{all}");
    assert!(said.logged("safe:"), "the client logged the move at WARNING:\n{all}");
    assert_eq!(nodes(&checker, dir).await, before, "the same node and czxid after the fail-over:\n{all}");
    // Nobody else can take it meanwhile.
    let (code, _, err) = output(cli().args(&contender)).await;
    assert_eq!(code, refused, "the claim is still held through the group: {err}");
    if mode == "register" {
        // Tended on B: a change of its data is set back, on the same node.
        checker.set_data(&node, b"changed", None).await.unwrap();
        within(
            Duration::from_secs(10),
            "the registration's data is set back",
            wait_data(&checker, &node, b"mine"),
        )
        .await;
        assert_eq!(nodes(&checker, dir).await, before, "the same node after its data was set back");
    }
    if signal_name == "-STOP" {
        // Whatever the woken member does or says is not about this client's session any more.
        signal(a.pid(), "-CONT");
    }

    stdin.write_all(b"go\n").await.unwrap();
    let still = said.line("still-held").await;
    let all = said.all();
    assert_eq!(still, ["False", "None"], "the claim was never lost:\n{all}");
    let left = said.line("left").await;
    assert_eq!(left, ["quietly"], "the block was left without LockLost:\n{}", said.all());
    said.rest().await;
    let status = within(LIMIT, "the script ends", script.wait()).await.unwrap();
    let stderr = errors.await.unwrap();
    assert!(status.success(), "failover.py failed ({status}):\n{}\n{stderr}", said.all());
    assert_eq!(said.seen.last().map(String::as_str), Some("done"), "{}", said.all());
    assert!(!said.seen.iter().any(|l| l.starts_with("lost ")), "{}", said.all());
    // Released through B: the node is gone.
    within(LIMIT, "the claim's node is deleted", wait_gone(&checker, &node)).await;
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_lock_held_through_a_killed_daemon_carries_on_through_another() {
    held_through("hold", "-KILL", "py-killed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_lock_held_through_a_frozen_daemon_carries_on_through_another() {
    held_through("hold", "-STOP", "py-frozen").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_a_python_clients_claims_to_the_group() {
    held_through("hold", "-TERM", "py-handed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_write_lock_is_held_through_a_killed_daemon() {
    held_through("rwlock", "-KILL", "py-rwlock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_semaphore_lease_is_held_through_a_killed_daemon() {
    held_through("semaphore", "-KILL", "py-semaphore").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_leadership_is_held_through_a_killed_daemon() {
    held_through("elect", "-KILL", "py-elect").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_group_membership_is_kept_through_a_killed_daemon() {
    held_through("join", "-KILL", "py-join").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_registration_keeps_its_node_through_a_killed_daemon() {
    held_through("register", "-KILL", "py-register").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_registration_keeps_its_node_through_a_frozen_daemon() {
    held_through("register", "-STOP", "py-register-frozen").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_a_python_registration_to_the_group() {
    held_through("register", "-TERM", "py-register-handed").await;
}

/// A waiter (`failover.py wait`: for a lock; `elect-wait`: for leadership) queued through
/// ["A", "B"] (on A) behind a first holder (the CLI, on ZooKeeper) keeps its queue node when A
/// is killed (`-KILL`) or frozen (`-STOP`: its Acquire or Campaign there ends when the connection
/// is dropped), and gets the claim, on that node, once the first holder lets go.
async fn waiter_through(mode: &str, signal_name: &str, name: &str) {
    let installed = install().await;
    let (a, b) = group(name).await;
    let checker = client(&zk().address()).await;
    let path = unique(name);
    // The first holder lets go when the test says so (a line on its command's stdin).
    let first_holds: &[&str] = match mode {
        "wait" => &["lock", &path],
        "elect-wait" => &["elect", "--id", "first", &path],
        other => panic!("no such mode: {other}"),
    };
    let mut first = cli()
        .args(first_holds)
        .args(["--", "sh", "-c", "read go; true"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut go = first.stdin.take().unwrap();
    let firsts = wait_children(&checker, &path, 1).await;
    let servers = format!("{},{}", a.grpc, b.grpc);
    let mut script = failover(installed.path(), mode, &servers, &path);
    let errors = stderr_of(&mut script);
    let mut said = Said::of(&mut script);
    let connected = said.line("connected").await;
    assert_eq!(connected, [a.grpc.as_str(), "True"], "the session opened on A, the first, in a group");
    within(LIMIT, "the waiter queues", wait_children(&checker, &path, 2)).await;
    let before = nodes(&checker, &path).await;
    let queued: Vec<&(String, i64)> = before.iter().filter(|(n, _)| !firsts.contains(n)).collect();
    assert_eq!(queued.len(), 1, "one waiter's node: {before:?}");
    let (waiter_node, waiter_czxid) = (format!("{path}/{}", queued[0].0), queued[0].1);

    signal(a.pid(), signal_name);
    let safe = said.line("safe").await;
    let all = said.all();
    assert_eq!(safe, [b.grpc.as_str(), "1"], "the session is on B now:\n{all}");
    assert!(said.logged("jeopardy:"), "the client logged the jeopardy at WARNING:\n{all}");
    // Taken up, the waiter still has the one node it queued, and the first holder its own.
    assert_eq!(nodes(&checker, &path).await, before, "the waiter's place after the fail-over:\n{all}");
    assert!(!said.seen.iter().any(|l| l.starts_with("held ")), "the waiter did not jump the queue:\n{all}");

    if signal_name == "-STOP" {
        signal(a.pid(), "-CONT");
    }
    go.write_all(b"go\n").await.unwrap();
    assert_eq!(within(LIMIT, "the first holder ends", first.wait()).await.unwrap().code(), Some(0));
    let held = said.line("held").await;
    let all = said.all();
    assert_eq!(held[0], waiter_node, "the claim was had on the node queued through A:\n{all}");
    assert_eq!(held[1].parse::<i64>().unwrap(), waiter_czxid, "its fencing token is that node's czxid");
    assert_eq!(held[2..], ["False", "1"], "held, not lost, after one move:\n{all}");
    let left = said.line("left").await;
    assert_eq!(left, ["quietly"], "the block was left without LockLost:\n{}", said.all());
    said.rest().await;
    let status = within(LIMIT, "the script ends", script.wait()).await.unwrap();
    let stderr = errors.await.unwrap();
    assert!(status.success(), "failover.py failed ({status}):\n{}\n{stderr}", said.all());
    assert_eq!(said.seen.last().map(String::as_str), Some("done"), "{}", said.all());
    within(LIMIT, "the waiter's node is deleted", wait_gone(&checker, &waiter_node)).await;
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_waiter_keeps_its_place_through_a_killed_daemon() {
    waiter_through("wait", "-KILL", "py-waiter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_waiter_keeps_its_place_through_a_frozen_daemon() {
    waiter_through("wait", "-STOP", "py-waiter-frozen").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_candidate_keeps_its_place_through_a_killed_daemon() {
    waiter_through("elect-wait", "-KILL", "py-candidate").await;
}

/// A `DataWatch` and a `ChildrenWatch` (`failover.py watch`), and the streams under them
/// (`Client.watch`, `Client.config_watch`), through "A,B" (on A) carry on when A is killed:
/// opened again on B, each reports every change once and never again a state it had reported
/// (a stream's INITIALIZED comes once). The node's data is changed right after the kill (while the client
/// moves: reported once, from what B finds), a child is added after the client says "safe", and
/// then one more of each, waited for one at a time (the daemon's cache may fold quick changes);
/// the calls are exactly those, in order, and neither watcher stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_watches_carry_on_through_a_killed_daemon() {
    let installed = install().await;
    let (a, b) = group("py-watch").await;
    let checker = client(&zk().address()).await;
    let path = unique("py-watch");
    let servers = format!("{},{}", a.grpc, b.grpc);
    let mut script = failover(installed.path(), "watch", &servers, &path);
    let mut stdin = script.stdin.take().unwrap();
    let errors = stderr_of(&mut script);
    let mut said = Said::of(&mut script);
    let mode = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());

    let connected = said.line("connected").await;
    assert_eq!(connected, [a.grpc.as_str(), "True"], "the session opened on A, the first, in a group");
    said.line("watching").await;
    signal(a.pid(), "-KILL");
    checker.set_data(&path, b"two", None).await.unwrap();
    let safe = said.line("safe").await;
    assert_eq!(safe, [b.grpc.as_str()], "the session is on B now:\n{}", said.all());
    checker.create(&format!("{path}/c1"), b"", &mode).await.unwrap();
    said.wait_for("data two 1").await;
    said.wait_for("children c1").await;
    said.wait_for("event CHANGED two 1").await;
    said.wait_for("config two 1").await;
    checker.set_data(&path, b"three", None).await.unwrap();
    said.wait_for("data three 2").await;
    said.wait_for("event CHANGED three 2").await;
    said.wait_for("config three 2").await;
    checker.create(&format!("{path}/c2"), b"", &mode).await.unwrap();
    said.wait_for("children c1 c2").await;

    stdin.write_all(b"go\n").await.unwrap();
    let state = said.line("state").await;
    let all = said.all();
    assert_eq!(
        state,
        ["False", "None", "False", "None", "1", "1", "1", "1"],
        "the watchers and the streams went on, each moved once:\n{all}"
    );
    said.rest().await;
    let status = within(LIMIT, "the script ends", script.wait()).await.unwrap();
    let stderr = errors.await.unwrap();
    let all = said.all();
    assert!(status.success(), "failover.py failed ({status}):\n{all}\n{stderr}");
    assert_eq!(said.seen.last().map(String::as_str), Some("done"), "{all}");
    let calls = |key: &str| -> Vec<String> {
        said.seen.iter().filter(|l| l.split_whitespace().next() == Some(key)).cloned().collect()
    };
    assert_eq!(
        calls("data"),
        ["data one 0", "data two 1", "data three 2"],
        "every change once, nothing twice:\n{all}"
    );
    assert_eq!(
        calls("children"),
        ["children -", "children c1", "children c1 c2"],
        "every change once, nothing twice:\n{all}"
    );
    assert_eq!(
        calls("event"),
        ["event CREATED one 0", "event INITIALIZED - 0", "event CHANGED two 1", "event CHANGED three 2"],
        "the watch stream: the node, INITIALIZED once, then each change once:\n{all}"
    );
    assert_eq!(
        calls("config"),
        ["config one 0", "config two 1", "config three 2"],
        "the config stream: each value once:\n{all}"
    );
    assert!(!said.seen.iter().any(|l| l.starts_with("failed ")), "{all}");
    drop(b);
}
