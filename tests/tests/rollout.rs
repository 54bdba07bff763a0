//! The recipe registry in ZooKeeper end to end, with real processes: `wazoo recipes publish`,
//! `status`, `history`, `rollback` and `keygen` as a user runs them, locally and through
//! `wazoo serve` daemons that follow the registry, tenants that publish into their own
//! namespaces, canaries that are promoted or withdrawn, and the guard on a switch of wire
//! protocol (with, first, what two hosts serving two protocols of one name do without it).
//!
//! Each test works in a ZooKeeper namespace of its own (a chroot on the shared server), so the
//! daemons of one test follow only that test's registry. Checks of the product's promises that
//! leave the rest of a scenario meaningful are collected ([`Findings`]) and reported together at
//! the end of the test, so one wrong answer does not hide the others.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use wazoo_tests::components::{relabelled, traps_at_start, with_section};
use wazoo_tests::daemon::{output, wazoo_at, Daemon};
use wazoo_tests::procs::Running;
use wazoo_tests::{client, plugins, root, unique, wazoo_bin, within, zk};
use zookeeper_client::{Acls, Client, CreateMode};

const LIMIT: Duration = Duration::from_secs(90);

/// Who the tests publish as (`USER`): the history says `rollout-tester@HOSTNAME`.
const PUBLISHER: &str = "rollout-tester";

// ---------------------------------------------------------------------------------------------
// Fixtures

/// Checks whose failure is reported at the end of the test, with every other one that failed.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            let what = what();
            eprintln!("FINDING: {what}");
            self.0.push(what);
        }
    }

    fn done(self) {
        assert!(self.0.is_empty(), "{} check(s) failed:\n- {}", self.0.len(), self.0.join("\n- "));
    }
}

/// One test's world: a ZooKeeper namespace of its own and a directory for its files.
struct Lab {
    /// The chroot, e.g. `/t/rollout-serve-123-0`.
    chroot: String,
    /// The shared server's address with the chroot.
    zookeeper: String,
    dir: tempfile::TempDir,
    next: AtomicU32,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let chroot = unique(&format!("rollout-{name}"));
        let zookeeper = format!("{}{chroot}", zk().address());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("empty")).unwrap();
        Lab { chroot, zookeeper, dir, next: AtomicU32::new(0) }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `bytes` to a file of the lab named `name`.
    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A daemon on the lab's namespace with a plugins directory holding `plugins` (name, bytes)
    /// and a compile cache of its own (so it fetches what it serves from the registry itself,
    /// as a daemon on another machine does).
    async fn daemon(&self, plugins: &[(&str, &[u8])], extra: &[&str]) -> Daemon {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let dir = self.path(&format!("plugins-{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in plugins {
            std::fs::write(dir.join(format!("{name}.wasm")), bytes).unwrap();
        }
        Daemon::start_on(&self.zookeeper, &dir, &self.path(&format!("cache-{n}")), extra).await
    }

    /// The local CLI on the lab's namespace (its own host: no daemon), with no plugins.
    fn local(&self) -> Command {
        let mut command = Command::new(wazoo_bin());
        command
            .env("WAZOO_ZOOKEEPER", &self.zookeeper)
            .env("WAZOO_PLUGINS", self.path("empty"))
            .env("WAZOO_CACHE", self.path("local-cache"))
            .env("USER", PUBLISHER)
            .env_remove("WAZOO_LOG")
            .env_remove("WAZOO_SERVER")
            .env_remove("WAZOO_REGISTRY")
            .env_remove("WAZOO_TRUSTED_KEYS")
            .kill_on_drop(true);
        command
    }

    /// The registry's root, as an absolute path on the shared server.
    fn registry(&self) -> String {
        format!("{}/wazoo/registry", self.chroot)
    }
}

/// `wazoo --server ADDR` through `daemon`, publishing as [`PUBLISHER`].
fn via(daemon: &Daemon) -> Command {
    let mut command = daemon.wazoo();
    command.env("USER", PUBLISHER);
    command
}

/// `wazoo --server ADDR --token TOKEN` through a daemon serving tenants.
fn as_tenant(daemon: &Daemon, token: &str) -> Command {
    let mut command = via(daemon);
    command.args(["--token", token]);
    command
}

/// Runs `command` with `args`: exit status, stdout, stderr.
async fn run(mut command: Command, args: &[&str]) -> (i32, String, String) {
    command.args(args);
    output(&mut command).await
}

/// The daemon's port: its id in the reports is `HOSTNAME:PORT`.
fn port(daemon: &Daemon) -> String {
    daemon.grpc.rsplit(':').next().unwrap().to_string()
}

/// The report of `daemon` in a status object, if it has one.
fn report<'a>(status: &'a Value, daemon: &Daemon) -> Option<&'a Value> {
    let suffix = format!(":{}", port(daemon));
    hosts(status).iter().find(|h| h["host"].as_str().is_some_and(|host| host.ends_with(&suffix)))
}

fn hosts(status: &Value) -> &[Value] {
    status["hosts"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Whether every one of `daemons` reports serving `sha` (and there are no other hosts).
fn all_serve(status: &Value, daemons: &[&Daemon], sha: &str) -> bool {
    hosts(status).len() == daemons.len()
        && daemons
            .iter()
            .all(|d| report(status, d).is_some_and(|r| r["state"] == "serving" && r["sha256"] == sha))
}

/// One JSON object per line.
fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A refusal's stderr: one line, starting `wazoo: `.
fn one_line(what: &str, stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: stderr should be one line, got: {stderr:?}");
    lines[0].to_string()
}

/// `status NAME --json` through `command`: the object, or Null if NAME is not published.
async fn status(command: Command, name: &str) -> Value {
    let (code, out, err) = run(command, &["recipes", "status", name, "--json"]).await;
    match code {
        0 => serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("status --json ({e}): {out}")),
        1 => Value::Null,
        _ => panic!("status {name}: exit {code}: {err}"),
    }
}

/// `history NAME --json` through `command`: its events (none if NAME is not published).
async fn history(command: Command, name: &str) -> Vec<Value> {
    let (code, out, err) = run(command, &["recipes", "history", name, "--json"]).await;
    match code {
        0 => json_lines(&out),
        1 => Vec::new(),
        _ => panic!("history {name}: exit {code}: {err}"),
    }
}

/// What `daemon` serves under `name` (`recipes list`): the first 12 hex digits of its sha256.
async fn served(daemon: &Daemon, name: &str) -> Option<String> {
    let (code, out, err) = run(via(daemon), &["recipes", "list", "--json"]).await;
    assert_eq!(code, 0, "recipes list: {err}");
    json_lines(&out)
        .into_iter()
        .find(|r| r["name"] == name)
        .map(|r| r["sha256"].as_str().unwrap().to_string())
}

/// Waits, by watching the registry's nodes of `name` under `registry` (its pointer, its hosts'
/// reports), until `pred` holds of what `status NAME --json` says (through `command()`).
async fn until_status(
    checker: &Client,
    registry: &str,
    name: &str,
    command: impl Fn() -> Command,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let pointer = format!("{registry}/recipes/{name}");
    let serving = format!("{pointer}/serving");
    let mut last = Value::Null;
    let found = tokio::time::timeout(LIMIT, async {
        loop {
            // Watches first, then the look: a change after the look fires one of them.
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
            let mut watches = tokio::task::JoinSet::new();
            let mut arm = |w: zookeeper_client::OneshotWatcher| {
                let tx = tx.clone();
                watches.spawn(async move {
                    w.changed().await;
                    let _ = tx.send(());
                });
            };
            match checker.get_and_watch_data(&pointer).await {
                Ok((_, _, w)) => arm(w),
                Err(zookeeper_client::Error::NoNode) => {
                    let (_, w) = checker.check_and_watch_stat(&pointer).await.unwrap();
                    arm(w);
                }
                Err(e) => panic!("watching {pointer}: {e}"),
            }
            match checker.list_and_watch_children(&serving).await {
                Ok((children, w)) => {
                    arm(w);
                    for child in children {
                        if let Ok((_, _, w)) = checker.get_and_watch_data(&format!("{serving}/{child}")).await
                        {
                            arm(w);
                        }
                    }
                }
                Err(zookeeper_client::Error::NoNode) => {
                    let (_, w) = checker.check_and_watch_stat(&serving).await.unwrap();
                    arm(w);
                }
                Err(e) => panic!("watching {serving}: {e}"),
            }
            last = status(command(), name).await;
            if pred(&last) {
                return last.clone();
            }
            rx.recv().await;
        }
    })
    .await;
    match found {
        Ok(status) => status,
        Err(_) => panic!("{what}: not within {LIMIT:?}; status last said {last:#}"),
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// The components of the repository's `plugins/` (the builds the binary embeds).
fn component(name: &str) -> Vec<u8> {
    std::fs::read(root().join("plugins").join(format!("{name}.wasm"))).unwrap()
}

/// `n` bytes that do not deflate (xorshift from `seed`).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
}

/// Publishes `file` as `name` through `command` (extra `args`), expecting success: the reply.
async fn publish(command: Command, name: &str, file: &Path, args: &[&str]) -> Value {
    let mut all = vec!["recipes", "publish", name, file.to_str().unwrap(), "--json"];
    all.extend_from_slice(args);
    let (code, out, err) = run(command, &all).await;
    assert_eq!(code, 0, "publish {name} {}: {err}{out}", file.display());
    json_lines(&out).into_iter().next().expect("publish --json says what it did")
}

/// Runs a command expecting a refusal: exit status 70 and one line on stderr (a finding if there
/// are more), the `wazoo: …` line returned.
async fn refused(f: &mut Findings, command: Command, what: &str, args: &[&str]) -> String {
    let (code, out, err) = run(command, args).await;
    assert_eq!(code, 70, "{what}: exit status (stdout {out:?}, stderr {err:?})");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    f.check(lines.len() == 1, || {
        format!(
            "{what}: `wazoo {}` printed {} lines on stderr, not one: {err:?}",
            args.join(" "),
            lines.len()
        )
    });
    let line =
        lines.iter().rev().find(|l| l.starts_with("wazoo: ")).unwrap_or_else(|| panic!("{what}: {err:?}"));
    line.to_string()
}

/// The shell that guards a lock: marks `DIR/held`, says `held`, forks a `head` that waits for a
/// line on stdin (the test's go), then removes the mark and says `released`.
const HOLD: &str = r#"touch "$0/held"; echo held; head -n 1 >/dev/null; rm "$0/held"; echo released"#;

/// The shell of a second client: says whether the first's mark is there once it holds the lock.
const PEEK: &str = r#"if [ -e "$0/held" ]; then echo overlap; else echo alone; fi; /bin/true"#;

// ---------------------------------------------------------------------------------------------
// 1. Publish, serve, swap under load, roll back

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn published_versions_reach_every_host_with_no_failed_call_and_roll_back() {
    let mut f = Findings::default();
    let lab = Lab::new("serve");
    let checker = client(&zk().address()).await;
    let name = "lock-t1";
    let lock = component("lock");
    let (v1, v2) = (lock.clone(), with_section(&lock, "wazoo-test-label", b"v2"));
    let (sha1, sha2) = (sha256(&v1), sha256(&v2));
    let (file1, file2) = (lab.file("v1.wasm", &v1), lab.file("v2.wasm", &v2));
    // A's plugins directory has a build of its own under the name: the registry's must win.
    let local_build = relabelled(&lock, "plugins-dir");
    let a = lab.daemon(&[(name, &local_build)], &[]).await;
    let b = lab.daemon(&[], &[]).await;
    assert_eq!(served(&a, name).await.as_deref(), Some(&sha256(&local_build)[..12]));
    assert_eq!(served(&b, name).await, None);

    // Publish v1 through B and wait for it.
    let before = now_ms();
    let (code, out, err) =
        run(via(&b), &["recipes", "publish", name, file1.to_str().unwrap(), "--wait", "--json"]).await;
    assert_eq!(code, 0, "publish --wait: {err}");
    let said = json_lines(&out);
    assert_eq!(said[0]["action"], "publish", "{out}");
    assert_eq!(said[0]["sha256"], sha1.as_str());
    assert_eq!(said[0]["protocol"], "curator-mutex/1");
    assert!(said[0]["world"].as_str().unwrap().contains("lock-recipe"), "{out}");
    assert_eq!(said[0]["previous"], "");
    // `--wait`: both following daemons serve v1 by the time it exits 0.
    let waited = said.last().unwrap();
    f.check(all_serve(waited, &[&a, &b], &sha1), || {
        format!(
            "`wazoo --server B recipes publish {name} FILE --wait` (a new name, two daemons following) \
             exited 0 before the daemons served it: its final status was {waited}"
        )
    });
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "both daemons serve v1",
        |s| all_serve(s, &[&a, &b], &sha1),
    )
    .await;
    // `status --wait --json`, host by host.
    let (code, out, err) = run(via(&a), &["recipes", "status", name, "--wait", "--json"]).await;
    assert_eq!(code, 0, "status --wait: {err}");
    let st2: Value = serde_json::from_str(out.trim()).unwrap();
    for s in [&st, &st2] {
        assert_eq!(s["current"], sha1.as_str());
        assert_eq!(s["protocol"], "curator-mutex/1");
        assert_eq!(s["canary"], "");
        for d in [&a, &b] {
            let r = report(s, d).unwrap_or_else(|| panic!("no report of {}: {s}", d.grpc));
            assert_eq!(r["state"], "serving", "{r}");
            assert_eq!(r["sha256"], sha1.as_str(), "{r}");
            assert_eq!(r["protocol"], "curator-mutex/1", "{r}");
            assert_eq!(r["canary"], false, "{r}");
            assert_eq!(r["traps"], 0, "{r}");
            assert_eq!(r["reason"], "", "{r}");
            assert!(r["since_ms"].as_u64().unwrap() >= before - 1000, "{r}");
        }
    }
    // What each daemon serves: the registry's v1, over A's own file.
    assert_eq!(
        served(&a, name).await.as_deref(),
        Some(&sha1[..12]),
        "the registry wins over the plugins dir"
    );
    assert_eq!(served(&b, name).await.as_deref(), Some(&sha1[..12]));
    // The history: one event, with the digest, the publisher and the time.
    let events = history(via(&a), name).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["action"], "publish");
    assert_eq!(events[0]["sha256"], sha1.as_str());
    assert_eq!(events[0]["protocol"], "curator-mutex/1");
    assert!(events[0]["by"].as_str().unwrap().starts_with(&format!("{PUBLISHER}@")), "{}", events[0]);
    let at = events[0]["at_ms"].as_u64().unwrap();
    assert!(at >= before && at <= now_ms(), "at_ms {at} not within the publish");
    assert_eq!(events[0]["reason"], "");

    // Contenders through both daemons, on one path, throughout the publish of v2: each turn
    // makes a directory the other turns would find (mkdir fails: exit 99).
    let path = "/contended";
    let excl = lab.path("exclusive");
    let stop = Arc::new(AtomicBool::new(false));
    let switched = Arc::new(AtomicBool::new(false));
    let (turns_tx, mut turns) = tokio::sync::mpsc::unbounded_channel::<(usize, bool)>();
    let mut contenders = Vec::new();
    for i in 0..6 {
        let grpc = if i % 2 == 0 { a.grpc.clone() } else { b.grpc.clone() };
        let (stop, switched, tx, excl) = (stop.clone(), switched.clone(), turns_tx.clone(), excl.clone());
        contenders.push(tokio::spawn(async move {
            let mut failed = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let after = switched.load(Ordering::SeqCst);
                let mut command = wazoo_at(&grpc);
                command.args(["--server", &grpc, "lock", "--recipe", name, "--timeout", "60s", path, "--"]);
                command.args(["sh", "-c", r#"mkdir "$0" || exit 99; /bin/true; rmdir "$0""#]);
                command.arg(&excl);
                let (code, _, err) = output(&mut command).await;
                if code != 0 {
                    failed.push(format!(
                        "through {grpc} ({}): exit {code}: {err}",
                        if after { "after" } else { "before" }
                    ));
                }
                let _ = tx.send((i % 2, after));
            }
            failed
        }));
    }
    drop(turns_tx);
    within(LIMIT, "12 turns before the publish", async {
        for _ in 0..12 {
            turns.recv().await.unwrap();
        }
    })
    .await;
    let (code, out, err) =
        run(via(&a), &["recipes", "publish", name, file2.to_str().unwrap(), "--wait", "--json"]).await;
    assert_eq!(code, 0, "publish v2 --wait: {err}");
    let said = json_lines(&out);
    assert_eq!(said[0]["sha256"], sha2.as_str());
    assert_eq!(said[0]["previous"], sha1.as_str());
    f.check(all_serve(said.last().unwrap(), &[&a, &b], &sha2), || {
        format!("publish v2 --wait exited 0 before every daemon served v2: {}", said.last().unwrap())
    });
    switched.store(true, Ordering::SeqCst);
    within(LIMIT, "6 turns through each daemon after the publish", async {
        let mut after = [0; 2];
        while after.iter().any(|n| *n < 6) {
            let (daemon, later) = turns.recv().await.unwrap();
            if later {
                after[daemon] += 1;
            }
        }
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let mut failed = Vec::new();
    for c in contenders {
        failed.extend(within(LIMIT, "the contenders stop", c).await.unwrap());
    }
    assert!(failed.is_empty(), "calls failed across the publish of v2: {failed:#?}");
    // Both daemons answered calls of v2: their reports count them (a host rewrites its report
    // when its counts changed, every 5 s at most).
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&b),
        "both reports count v2's calls",
        |s| {
            all_serve(s, &[&a, &b], &sha2)
                && [&a, &b].iter().all(|d| report(s, d).is_some_and(|r| r["calls"].as_u64().unwrap_or(0) > 0))
        },
    )
    .await;
    assert!(all_serve(&st, &[&a, &b], &sha2), "{st}");
    assert_eq!(served(&a, name).await.as_deref(), Some(&sha2[..12]));
    assert_eq!(served(&b, name).await.as_deref(), Some(&sha2[..12]));
    // Both daemons answered calls of v2 (each took at least 6 locks with it): status counts them.
    for d in [&a, &b] {
        let r = report(&st, d).unwrap();
        f.check(r["calls"].as_u64().unwrap_or(0) > 0, || {
            format!(
                "`recipes status {name} --json`: host {} answered lock calls with v2 (6+ `wazoo lock --recipe {name}` \
                 through it) but its report says calls {}",
                r["host"], r["calls"]
            )
        });
    }

    // Rollback without a digest: v1 again, on every host.
    let (code, out, err) = run(via(&a), &["recipes", "rollback", name, "--wait", "--json"]).await;
    assert_eq!(code, 0, "rollback --wait: {err}");
    let said = json_lines(&out);
    assert_eq!(said[0]["action"], "rollback", "{out}");
    assert_eq!(said[0]["sha256"], sha1.as_str());
    assert_eq!(said[0]["previous"], sha2.as_str());
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "both daemons serve v1 again",
        |s| all_serve(s, &[&a, &b], &sha1),
    )
    .await;
    f.check(all_serve(said.last().unwrap(), &[&a, &b], &sha1), || {
        format!("rollback --wait exited 0 before every daemon served v1: {}", said.last().unwrap())
    });
    assert_eq!(st["current"], sha1.as_str());
    assert_eq!(served(&a, name).await.as_deref(), Some(&sha1[..12]));
    assert_eq!(served(&b, name).await.as_deref(), Some(&sha1[..12]));
    // And with a digest prefix: v2.
    let (code, out, err) =
        run(via(&b), &["recipes", "rollback", name, &sha2[..10], "--wait", "--json"]).await;
    assert_eq!(code, 0, "rollback DIGEST --wait: {err}");
    assert_eq!(json_lines(&out)[0]["sha256"], sha2.as_str());
    until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "both daemons serve v2 again",
        |s| all_serve(s, &[&a, &b], &sha2),
    )
    .await;
    assert_eq!(served(&a, name).await.as_deref(), Some(&sha2[..12]));
    assert_eq!(served(&b, name).await.as_deref(), Some(&sha2[..12]));
    // Rollbacks that cannot be: to the current version, to one never published, a short digest.
    let msg = refused(
        &mut f,
        via(&a),
        "rollback to the current version",
        &["recipes", "rollback", name, &sha2[..10]],
    )
    .await;
    assert!(msg.contains("current already"), "{msg}");
    let msg = refused(
        &mut f,
        via(&a),
        "rollback to an unknown digest",
        &["recipes", "rollback", name, "0123456789abcdef"],
    )
    .await;
    assert!(msg.contains("0123456789abcdef"), "{msg}");
    let (code, _, err) = run(via(&a), &["recipes", "rollback", name, "abc"]).await;
    assert_eq!(code, 2, "a 3-digit digest is bad usage: {err}");
    let events = history(via(&b), name).await;
    let actions: Vec<(&str, &str)> =
        events.iter().map(|e| (e["action"].as_str().unwrap(), e["sha256"].as_str().unwrap())).collect();
    assert_eq!(
        actions,
        [
            ("publish", sha1.as_str()),
            ("publish", sha2.as_str()),
            ("rollback", sha1.as_str()),
            ("rollback", sha2.as_str())
        ]
    );
    assert!(events.iter().all(|e| e["by"].as_str().unwrap().starts_with(&format!("{PUBLISHER}@"))));
    let times: Vec<u64> = events.iter().map(|e| e["at_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "history not oldest first: {times:?}");
    f.done();
}

// ---------------------------------------------------------------------------------------------
// 2. Refusals

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_publish_says_why_in_one_line_and_changes_nothing() {
    let mut f = Findings::default();
    let lab = Lab::new("refuse");
    let checker = client(&zk().address()).await;
    let name = "lock-t2";
    let a = lab.daemon(&[], &[]).await;
    let lock = component("lock");
    let sha1 = sha256(&lock);
    let v1 = lab.file("lock.wasm", &lock);
    publish(via(&a), name, &v1, &[]).await;
    until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "the daemon serves v1",
        |s| all_serve(s, &[&a], &sha1),
    )
    .await;
    let blobs_dir = format!("{}/blobs", lab.registry());
    let blobs = checker.list_children(&blobs_dir).await.unwrap();
    assert_eq!(blobs, [sha1.clone()]);

    let garbage = lab.file("garbage.wasm", &noise(7, 4096));
    let text = lab.file("text.wasm", b"#!/bin/sh\necho not a component\n");
    let queue = lab.file("queue.wasm", &component("queue"));
    let kazoo = lab.file("lock-kazoo.wasm", &component("lock-kazoo"));
    let trapping = lab.file("traps.wasm", &traps_at_start(&lock));
    let p = |f: &PathBuf| f.to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<String>, &[&str])> = vec![
        ("garbage bytes", vec![name.into(), p(&garbage)], &["not a valid wasm component"]),
        ("a text file", vec![name.into(), p(&text)], &["not a valid wasm component"]),
        ("another world", vec![name.into(), p(&queue)], &["queue-recipe", "lock-recipe"]),
        (
            "another protocol",
            vec![name.into(), p(&kazoo)],
            &["kazoo-lock/1", "curator-mutex/1", "--new-protocol"],
        ),
        (
            "another protocol as a canary",
            vec![name.into(), p(&kazoo), "--new-protocol".into(), "--canary".into(), "1".into()],
            &["kazoo-lock/1", "canary"],
        ),
        ("a trap while it starts", vec![name.into(), p(&trapping)], &["instantiat"]),
        // Nothing in the registry under `lock`: the daemon's own (Curator-format) lock is in service.
        (
            "the kazoo build over the embedded lock",
            vec!["lock".into(), p(&kazoo)],
            &["kazoo-lock/1", "curator-mutex/1"],
        ),
    ];
    for (what, args, reasons) in &cases {
        let mut all = vec!["recipes", "publish"];
        all.extend(args.iter().map(String::as_str));
        let line = refused(&mut f, via(&a), what, &all).await;
        for reason in *reasons {
            assert!(line.contains(reason), "{what}: {line:?} should mention {reason:?}");
        }
        assert!(line.contains(&args[0]), "{what}: {line:?} should name the recipe {}", args[0]);
    }
    // The same checks on the command line's own host.
    let line =
        refused(&mut f, lab.local(), "garbage, locally", &["recipes", "publish", name, &p(&garbage)]).await;
    assert!(line.contains("not a valid wasm component"), "{line}");
    let line =
        refused(&mut f, lab.local(), "another protocol, locally", &["recipes", "publish", name, &p(&kazoo)])
            .await;
    assert!(line.contains("--new-protocol"), "{line}");
    // Bad names: usage (2), whatever the file.
    for bad in ["bad/name", ".hidden", "sp ace", &"a".repeat(129), ""] {
        let (code, _, err) = run(via(&a), &["recipes", "publish", bad, &p(&v1)]).await;
        assert_eq!(code, 2, "name {bad:?}: {err}");
        let line = one_line(bad, &err);
        assert!(line.contains("recipe name"), "{line}");
    }

    // Nothing changed: the history, the pointer, what the daemon serves, and what is stored.
    let events = history(via(&a), name).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(history(via(&a), "lock").await.is_empty(), "`lock` must not be in the registry");
    let (code, _, _) = run(via(&a), &["recipes", "status", "lock"]).await;
    assert_eq!(code, 1, "status of a name never published");
    let st = status(via(&a), name).await;
    assert_eq!(st["current"], sha1.as_str());
    assert!(all_serve(&st, &[&a], &sha1), "{st}");
    assert_eq!(served(&a, name).await.as_deref(), Some(&sha1[..12]));
    let after = checker.list_children(&blobs_dir).await.unwrap();
    f.check(after == blobs, || {
        format!(
            "refused publishes left components stored in the registry ({blobs_dir}: {} blobs before, {} after: {:?}); \
             the world and protocol checks run after Store::put, so a refused component stays stored (and counts \
             against a tenant's registry_mib)",
            blobs.len(),
            after.len(),
            after
        )
    });
    f.done();
}

// ---------------------------------------------------------------------------------------------
// 3. Signatures

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trusting_host_serves_only_components_signed_by_a_trusted_key() {
    let mut f = Findings::default();
    let lab = Lab::new("sign");
    let checker = client(&zk().address()).await;
    let name = "sig-t3";

    // Keys: ops (trusted), rogue (not).
    let (ops, rogue) = (lab.path("ops.key"), lab.path("rogue.key"));
    let (code, entry, err) =
        run(lab.local(), &["recipes", "keygen", "ops", "--out", ops.to_str().unwrap()]).await;
    assert_eq!(code, 0, "keygen: {err}");
    assert!(
        entry.contains("[[key]]") && entry.contains(r#"id = "ops""#) && entry.contains("ed25519"),
        "{entry}"
    );
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&ops).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the private key's mode");
    }
    let (code, _, err) =
        run(lab.local(), &["recipes", "keygen", "ops", "--out", ops.to_str().unwrap()]).await;
    assert_eq!(code, 2, "keygen never overwrites a key: {err}");
    let (code, _, err) =
        run(lab.local(), &["recipes", "keygen", "rogue", "--out", rogue.to_str().unwrap()]).await;
    assert_eq!(code, 0, "keygen: {err}");
    let trusted = lab.file("trusted.toml", entry.as_bytes());
    let trusted = trusted.to_str().unwrap();

    let t = lab.daemon(&[], &["--trusted-keys", trusted]).await;
    let p = lab.daemon(&[], &[]).await;
    let lock = component("lock");
    let versions: Vec<Vec<u8>> =
        (1..=4).map(|i| with_section(&lock, "wazoo-test-label", format!("v{i}").as_bytes())).collect();
    let shas: Vec<String> = versions.iter().map(|v| sha256(v)).collect();
    let files: Vec<String> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| lab.file(&format!("v{}.wasm", i + 1), v).to_str().unwrap().to_string())
        .collect();
    let (ops, rogue) = (ops.to_str().unwrap(), rogue.to_str().unwrap());

    // Through the trusting daemon: unsigned, or signed by a key it does not trust: refused.
    let line = refused(
        &mut f,
        via(&t),
        "unsigned through the trusting daemon",
        &["recipes", "publish", name, &files[0]],
    )
    .await;
    for word in [name, "not signed", "ops"] {
        assert!(line.contains(word), "{line:?} should mention {word:?}");
    }
    let line = refused(
        &mut f,
        via(&t),
        "signed by rogue",
        &["recipes", "publish", name, &files[0], "--sign", rogue],
    )
    .await;
    for word in [name, "rogue", "ops"] {
        assert!(line.contains(word), "{line:?} should mention {word:?}");
    }
    assert!(history(via(&t), name).await.is_empty(), "a refused first publish registers nothing");
    // Signed by ops: served by both.
    publish(via(&t), name, Path::new(&files[0]), &["--sign", ops]).await;
    until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&p),
        "both serve the signed v1",
        |s| all_serve(s, &[&t, &p], &shas[0]),
    )
    .await;
    let (code, _, err) = run(via(&t), &["lock", "--recipe", name, "/signed", "--", "/bin/true"]).await;
    assert_eq!(code, 0, "a lock with the signed recipe: {err}");

    // Published where nobody checks (locally, no trusted keys) unsigned: the trusting daemon
    // refuses it and keeps serving v1; the other serves v2.
    publish(lab.local(), name, Path::new(&files[1]), &[]).await;
    let (code, out, err) = run(via(&p), &["recipes", "status", name, "--wait", "--json"]).await;
    assert_eq!(code, 1, "status --wait when a host refused: {out}{err}");
    let line = one_line("status --wait", &err);
    assert!(line.contains(&format!(":{}", port(&t))) && line.contains("refused"), "{line}");
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&p),
        "t refuses v2, p serves it",
        |s| {
            report(s, &p).is_some_and(|r| r["sha256"] == shas[1].as_str())
                && report(s, &t).is_some_and(|r| r["state"] == "refused")
        },
    )
    .await;
    let r = report(&st, &t).unwrap();
    assert_eq!(r["sha256"], shas[0].as_str(), "the refusing host keeps serving v1: {r}");
    let reason = r["reason"].as_str().unwrap();
    for word in [name, &shas[1][..12], "not signed", "ops"] {
        assert!(reason.contains(word), "the refusal {reason:?} should mention {word:?}");
    }
    assert_eq!(served(&t, name).await.as_deref(), Some(&shas[0][..12]));
    assert_eq!(served(&p, name).await.as_deref(), Some(&shas[1][..12]));
    let (code, _, err) = run(via(&t), &["lock", "--recipe", name, "/signed", "--", "/bin/true"]).await;
    assert_eq!(code, 0, "the refusing daemon still serves v1: {err}");

    // Signed by rogue, locally: refused likewise, naming the key.
    publish(lab.local(), name, Path::new(&files[2]), &["--sign", rogue]).await;
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&p),
        "t refuses v3",
        |s| {
            report(s, &p).is_some_and(|r| r["sha256"] == shas[2].as_str())
                && report(s, &t)
                    .is_some_and(|r| r["reason"].as_str().is_some_and(|why| why.contains(&shas[2][..12])))
        },
    )
    .await;
    let r = report(&st, &t).unwrap();
    assert_eq!(r["state"], "refused", "{r}");
    assert_eq!(r["sha256"], shas[0].as_str(), "{r}");
    let reason = r["reason"].as_str().unwrap();
    for word in [name, "rogue", "ops"] {
        assert!(reason.contains(word), "the refusal {reason:?} should mention {word:?}");
    }
    assert_eq!(served(&t, name).await.as_deref(), Some(&shas[0][..12]));

    // Locally with --registry --trusted-keys: the check at publish time.
    let line = refused(
        &mut f,
        lab.local(),
        "unsigned, locally with --trusted-keys",
        &["--registry", "--trusted-keys", trusted, "recipes", "publish", name, &files[3]],
    )
    .await;
    assert!(line.contains("not signed") && line.contains(name), "{line}");
    let mut command = lab.local();
    command.args(["--registry", "--trusted-keys", trusted]);
    publish(command, name, Path::new(&files[3]), &["--sign", ops, "--sign", rogue]).await;
    let (code, out, err) = run(via(&p), &["recipes", "status", name, "--wait", "--json"]).await;
    assert_eq!(code, 0, "status --wait once v4 is signed: {out}{err}");
    let st: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(all_serve(&st, &[&t, &p], &shas[3]), "{st}");
    f.check(report(&st, &t).is_some_and(|r| r["reason"] == ""), || format!("a stale refusal stays: {st}"));
    assert_eq!(served(&t, name).await.as_deref(), Some(&shas[3][..12]));
    let events = history(via(&p), name).await;
    assert_eq!(events.len(), 4, "{events:?}");

    // An unsigned canary on both hosts: the trusting one refuses it, which withdraws it (the
    // reason in the history), and both serve v4 again.
    let v5 = with_section(&lock, "wazoo-test-label", b"v5");
    let sha5 = sha256(&v5);
    publish(lab.local(), name, &lab.file("v5.wasm", &v5), &["--canary", "2", "--canary-for", "10m"]).await;
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&p),
        "the canary is withdrawn",
        |s| s["canary"] == "" && s["current"] == shas[3].as_str(),
    )
    .await;
    let events = history(via(&p), name).await;
    let last: Vec<(&str, &str)> = events
        .iter()
        .skip(4)
        .map(|e| (e["action"].as_str().unwrap(), e["sha256"].as_str().unwrap()))
        .collect();
    assert_eq!(last, [("canary", sha5.as_str()), ("withdraw", sha5.as_str())], "{st}");
    let reason = events[5]["reason"].as_str().unwrap();
    assert!(reason.contains(&format!(":{}", port(&t))) && reason.contains("not signed"), "{reason}");
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&p),
        "both back on v4",
        |s| hosts(s).iter().all(|h| h["sha256"] == shas[3].as_str() && h["canary"] == false),
    )
    .await;
    let r = report(&st, &t).unwrap();
    f.check(r["state"] == "serving" && r["reason"] == "", || {
        format!(
            "after the unsigned canary was withdrawn, the trusting host serves the current v4 but still reports \
             the canary's refusal: {r}"
        )
    });
    let (code, out, err) =
        run(via(&p), &["recipes", "status", name, "--wait", "--timeout", "5s", "--json"]).await;
    f.check(code == 0, || {
        format!(
            "`recipes status {name} --wait` after the withdrawn canary, every host serving the current v4: \
             exit {code} ({}) {out}",
            err.trim()
        )
    });
    assert_eq!(served(&t, name).await.as_deref(), Some(&shas[3][..12]));
    assert_eq!(served(&p, name).await.as_deref(), Some(&shas[3][..12]));
    f.done();
}

// ---------------------------------------------------------------------------------------------
// 4. Tenants

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_tenant_publishes_into_its_own_registry_within_its_quota() {
    let mut f = Findings::default();
    let lab = Lab::new("tenants");
    let pid = std::process::id();
    let (alice_root, bob_root) = (format!("/tenants/ro-alice-{pid}"), format!("/tenants/ro-bob-{pid}"));
    let (alice_token, bob_token) = ("rollout-alice-token-0123", "rollout-bob-token-0123");
    // Bob's host trusts the key ops only.
    let ops = lab.path("ops.key");
    let (code, entry, err) =
        run(lab.local(), &["recipes", "keygen", "ops", "--out", ops.to_str().unwrap()]).await;
    assert_eq!(code, 0, "keygen: {err}");
    let trusted = lab.file("bob-trusted.toml", entry.as_bytes());
    let tenants = serde_json::json!({"tenants": [
        {"name": "alice", "token": alice_token, "zookeeper_secret": "alice-zk", "root": alice_root,
         "recipes": ["lock", "team-*", "ops-*"], "registry_mib": 1},
        {"name": "bob", "token": bob_token, "zookeeper_secret": "bob-zk", "root": bob_root,
         "recipes": ["lock", "team-*"], "trusted_keys": trusted},
    ]});
    let file = lab.file("tenants.json", tenants.to_string().as_bytes());
    // The operator's plugins directory holds `ops-only`.
    let lock = component("lock");
    let d = lab.daemon(&[("ops-only", &lock)], &["--tenants", file.to_str().unwrap()]).await;
    let alice_zk =
        Client::connector().with_auth("digest", b"alice:alice-zk").connect(&zk().address()).await.unwrap();
    let bob_zk =
        Client::connector().with_auth("digest", b"bob:bob-zk").connect(&zk().address()).await.unwrap();
    let (alice_registry, bob_registry) =
        (format!("{alice_root}/wazoo/registry"), format!("{bob_root}/wazoo/registry"));
    let sha_lock = sha256(&lock);
    let lock_file = lab.file("lock.wasm", &lock);

    // Alice publishes team-lock and takes a lock with it.
    let said = publish(as_tenant(&d, alice_token), "team-lock", &lock_file, &[]).await;
    assert_eq!(said["sha256"], sha_lock.as_str());
    until_status(
        &alice_zk,
        &alice_registry,
        "team-lock",
        || as_tenant(&d, alice_token),
        "alice's host serves it",
        |s| all_serve(s, &[&d], &sha_lock),
    )
    .await;
    let events = history(as_tenant(&d, alice_token), "team-lock").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["by"], "tenant alice", "a tenant's publisher is the tenant: {}", events[0]);
    let (code, _, err) =
        run(as_tenant(&d, alice_token), &["lock", "--recipe", "team-lock", "/locks/a", "--", "/bin/true"])
            .await;
    assert_eq!(code, 0, "alice's lock with her recipe: {err}");

    // Bob does not see it: not in his registry, not a recipe he can use.
    let (code, _, err) = run(as_tenant(&d, bob_token), &["recipes", "status", "team-lock"]).await;
    assert_eq!(code, 1, "bob's status of alice's recipe: {err}");
    assert!(err.contains("team-lock"), "{err}");
    assert!(history(as_tenant(&d, bob_token), "team-lock").await.is_empty());
    let (code, _, err) =
        run(as_tenant(&d, bob_token), &["lock", "--recipe", "team-lock", "/locks/b", "--", "/bin/true"])
            .await;
    assert_ne!(code, 0, "bob has no recipe team-lock: {err}");
    // The name in bob's namespace is bob's own: another world, unsigned refused (his host
    // trusts ops), signed accepted.
    let queue = component("queue");
    let queue_file = lab.file("queue.wasm", &queue);
    let line = refused(
        &mut f,
        as_tenant(&d, bob_token),
        "bob, unsigned (his host trusts ops)",
        &["recipes", "publish", "team-lock", queue_file.to_str().unwrap()],
    )
    .await;
    assert!(line.contains("not signed") && line.contains("ops"), "{line}");
    publish(as_tenant(&d, bob_token), "team-lock", &queue_file, &["--sign", ops.to_str().unwrap()]).await;
    let sha_queue = sha256(&queue);
    until_status(
        &bob_zk,
        &bob_registry,
        "team-lock",
        || as_tenant(&d, bob_token),
        "bob's host serves his",
        |s| all_serve(s, &[&d], &sha_queue),
    )
    .await;
    let st = status(as_tenant(&d, alice_token), "team-lock").await;
    assert_eq!(st["current"], sha_lock.as_str(), "alice's team-lock is untouched by bob's: {st}");
    assert_eq!(history(as_tenant(&d, alice_token), "team-lock").await.len(), 1);
    let (code, _, err) =
        run(as_tenant(&d, alice_token), &["lock", "--recipe", "team-lock", "/locks/a", "--", "/bin/true"])
            .await;
    assert_eq!(code, 0, "alice's lock after bob's publish: {err}");

    // Names alice may not take: the operator's (embedded, plugins dir), and names outside her
    // patterns.
    for (what, name, words) in [
        ("the embedded lock", "lock", &["operator"][..]),
        ("the operator's plugins file", "ops-only", &["operator"][..]),
        ("outside her patterns", "bob-lock", &["may"][..]),
    ] {
        let line = refused(
            &mut f,
            as_tenant(&d, alice_token),
            what,
            &["recipes", "publish", name, lock_file.to_str().unwrap()],
        )
        .await;
        assert!(line.contains(name) && words.iter().all(|w| line.contains(w)), "{what}: {line}");
        if name != "bob-lock" {
            assert!(history(as_tenant(&d, alice_token), name).await.is_empty(), "{what}: registered anyway");
        }
    }
    // A name outside her patterns is not hers to read either.
    let (code, _, err) = run(as_tenant(&d, alice_token), &["recipes", "history", "bob-lock"]).await;
    assert_eq!(code, 70, "{err}");
    assert!(err.contains("may"), "{err}");
    let (code, _, _) = run(as_tenant(&d, alice_token), &["recipes", "status", "team-lock"]).await;
    assert_eq!(code, 0);

    // The registry's quota (1 MiB deflated for alice): 35 KB used; a 600 KB version fits, a
    // second does not.
    let big1 = lab.file("big1.wasm", &with_section(&lock, "pad", &noise(1, 600_000)));
    let big2 = lab.file("big2.wasm", &with_section(&lock, "pad", &noise(2, 600_000)));
    publish(as_tenant(&d, alice_token), "team-big", &big1, &[]).await;
    let line = refused(
        &mut f,
        as_tenant(&d, alice_token),
        "over alice's registry quota",
        &["recipes", "publish", "team-big2", big2.to_str().unwrap()],
    )
    .await;
    assert!(line.contains("quota") && line.contains("1048576"), "{line}");
    assert!(history(as_tenant(&d, alice_token), "team-big2").await.is_empty());
    assert_eq!(history(as_tenant(&d, alice_token), "team-big").await.len(), 1);

    // A publish refused for its world costs alice nothing: afterwards, what fit still fits.
    let carol = Lab::new("tenants-quota");
    let carol_root = format!("/tenants/ro-carol-{pid}");
    let carol_token = "rollout-carol-token-0123";
    let tenants = serde_json::json!({"tenants": [
        {"name": "carol", "token": carol_token, "zookeeper_secret": "carol-zk", "root": carol_root,
         "recipes": ["team-*"], "registry_mib": 1},
    ]});
    let file = carol.file("tenants.json", tenants.to_string().as_bytes());
    let e = carol.daemon(&[], &["--tenants", file.to_str().unwrap()]).await;
    publish(as_tenant(&e, carol_token), "team-lock", &lock_file, &[]).await;
    let queue_big = carol.file("queue-big.wasm", &with_section(&queue, "pad", &noise(3, 600_000)));
    let line = refused(
        &mut f,
        as_tenant(&e, carol_token),
        "a queue over carol's lock",
        &["recipes", "publish", "team-lock", queue_big.to_str().unwrap()],
    )
    .await;
    assert!(line.contains("queue-recipe"), "{line}");
    let small = carol.file("small.wasm", &with_section(&lock, "pad", &noise(4, 600_000)));
    let (code, _, err) =
        run(as_tenant(&e, carol_token), &["recipes", "publish", "team-small", small.to_str().unwrap()]).await;
    f.check(code == 0, || {
        format!(
            "tenant carol (registry_mib 1) with one 35 KB component: publishing a 600 KB one as team-small exited \
             {code} ({}) because her earlier publish of a 600 KB queue over team-lock, refused for its world, was \
             stored anyway and counts against her quota",
            err.trim()
        )
    });

    // Alice's registry nodes are alice's, as every node of her namespace is: another client
    // neither reads nor writes them.
    let anyone = client(&zk().address()).await;
    let peek = anyone.get_data(&format!("{alice_registry}/recipes/team-lock")).await;
    f.check(matches!(peek, Err(zookeeper_client::Error::NoAuth)), || {
        format!(
            "a client without alice's identity read her registry pointer {alice_registry}/recipes/team-lock: \
             {:?} (registry nodes are created world:anyone, not with the tenant's ACL)",
            peek.as_ref().map(|(data, _)| String::from_utf8_lossy(data).into_owned())
        )
    });
    let write = anyone
        .create(
            &format!("{alice_registry}/blobs/intruder"),
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await;
    f.check(matches!(write, Err(zookeeper_client::Error::NoAuth)), || {
        format!("a client without alice's identity created a node in her registry ({alice_registry}/blobs/intruder): {write:?}")
    });
    f.done();
}

// ---------------------------------------------------------------------------------------------
// 5. The protocol guard

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_protocol_switch_never_lets_two_hosts_grant_one_lock_twice() {
    let mut f = Findings::default();
    let lab = Lab::new("protocol");
    let checker = client(&zk().address()).await;
    let (curator, kazoo) = (component("lock"), component("lock-kazoo"));
    let (sha_curator, sha_kazoo) = (sha256(&curator), sha256(&kazoo));

    // Today, without the registry: one daemon's `lockp` is the kazoo build, the other's the
    // Curator build. A holder through the first, and a client of the second gets the lock too.
    let a = lab.daemon(&[("lockp", &kazoo)], &["--no-registry"]).await;
    let b = lab.daemon(&[("lockp", &curator)], &["--no-registry"]).await;
    let marks = lab.path("today");
    std::fs::create_dir_all(&marks).unwrap();
    let mut first =
        Running::start(via(&a).args(["lock", "--recipe", "lockp", "/x", "--", "sh", "-c", HOLD]).arg(&marks));
    assert_eq!(first.line("the kazoo-build holder holds /x").await, "held");
    let mut second = via(&b);
    second.args(["lock", "--recipe", "lockp", "--timeout", "30s", "/x", "--", "sh", "-c", PEEK]).arg(&marks);
    let (code, out, err) = output(&mut second).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "overlap", "today two builds on two hosts both grant /x: {err}");
    assert!(marks.join("held").exists());
    first.go_on().await;
    assert_eq!(first.line("the first lets go").await, "released");
    assert_eq!(first.exit().await.0, 0);
    drop((a, b));

    // With the registry: two daemons follow it; the Curator build is `lockq`.
    let c = lab.daemon(&[], &[]).await;
    let d = lab.daemon(&[], &[]).await;
    let name = "lockq";
    publish(via(&c), name, &lab.file("curator.wasm", &curator), &[]).await;
    until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&c),
        "both serve the Curator build",
        |s| all_serve(s, &[&c, &d], &sha_curator),
    )
    .await;
    let marks = lab.path("guarded");
    std::fs::create_dir_all(&marks).unwrap();
    let mut first =
        Running::start(via(&c).args(["lock", "--recipe", name, "/y", "--", "sh", "-c", HOLD]).arg(&marks));
    assert_eq!(first.line("the holder through C holds /y").await, "held");
    // Publish the kazoo build with --new-protocol (and wait for it) while the holder holds.
    let kazoo_file = lab.file("kazoo.wasm", &kazoo);
    let mut publishing = via(&c);
    publishing.args([
        "recipes",
        "publish",
        name,
        kazoo_file.to_str().unwrap(),
        "--new-protocol",
        "--wait",
        "--json",
    ]);
    let publishing = tokio::spawn(async move { output(&mut publishing).await });
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&d),
        "C draining, D drained",
        |s| {
            report(s, &c).is_some_and(|r| r["state"] == "draining")
                && report(s, &d).is_some_and(|r| r["state"] == "drained")
        },
    )
    .await;
    assert_eq!(st["current"], sha_kazoo.as_str());
    assert_eq!(report(&st, &c).unwrap()["sha256"], sha_curator.as_str(), "C drains the old version: {st}");
    let (code, _, err) = run(via(&d), &["recipes", "status", name, "--wait", "--timeout", "300ms"]).await;
    assert_eq!(code, 3, "status --wait past its timeout while hosts drain: {err}");
    // A client through D asks for /y: it waits (it says so after a second), and is not granted
    // while the holder through C holds.
    let mut second = Running::start(
        via(&d)
            .args(["lock", "--recipe", name, "--timeout", "60s", "/y", "--", "sh", "-c", PEEK])
            .arg(&marks),
    );
    let mut said = BufReader::new(second.child.stderr.take().unwrap()).lines();
    let waiting = within(LIMIT, "the second client says it waits", said.next_line()).await.unwrap();
    assert!(waiting.as_deref().is_some_and(|l| l.contains("waiting")), "{waiting:?}");
    assert!(second.child.try_wait().unwrap().is_none(), "the second client ended while the first held /y");
    assert!(marks.join("held").exists());
    let st = status(via(&d), name).await;
    assert!(
        hosts(&st).iter().all(|h| h["sha256"] != sha_kazoo.as_str()),
        "a host serves the new protocol while C's holder of the old one holds: {st}"
    );
    first.go_on().await;
    assert_eq!(first.line("the first lets go").await, "released");
    assert_eq!(first.exit().await.0, 0);
    assert_eq!(
        second.line("the second client holds /y").await,
        "alone",
        "granted while the first still held"
    );
    let (code, err) = second.exit().await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = within(LIMIT, "publish --new-protocol --wait", publishing).await.unwrap();
    assert_eq!(code, 0, "publish --new-protocol --wait: {err}");
    let said = json_lines(&out);
    assert_eq!(said[0]["protocol"], "kazoo-lock/1");
    f.check(all_serve(said.last().unwrap(), &[&c, &d], &sha_kazoo), || {
        format!(
            "publish --new-protocol --wait exited 0 before both hosts served it: {}",
            said.last().unwrap()
        )
    });
    let (code, out, err) = run(via(&c), &["recipes", "status", name, "--wait", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(all_serve(&st, &[&c, &d], &sha_kazoo), "{st}");
    assert!(hosts(&st).iter().all(|h| h["protocol"] == "kazoo-lock/1"), "{st}");
    assert_eq!(served(&c, name).await.as_deref(), Some(&sha_kazoo[..12]));
    assert_eq!(served(&d, name).await.as_deref(), Some(&sha_kazoo[..12]));
    let events = history(via(&d), name).await;
    let protocols: Vec<&str> = events.iter().map(|e| e["protocol"].as_str().unwrap()).collect();
    assert_eq!(protocols, ["curator-mutex/1", "kazoo-lock/1"]);
    // And the new version works through both.
    for daemon in [&c, &d] {
        let (code, _, err) = run(via(daemon), &["lock", "--recipe", name, "/y", "--", "/bin/true"]).await;
        assert_eq!(code, 0, "{err}");
    }
    f.done();
}

// ---------------------------------------------------------------------------------------------
// 6. Canaries

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_canary_is_promoted_after_its_time_or_withdrawn_at_its_first_trap() {
    let mut f = Findings::default();
    let lab = Lab::new("canary");
    let checker = client(&zk().address()).await;
    // misbehave (world custom, traps on command) is built with the test plugins.
    let built = tokio::task::spawn_blocking(plugins).await.unwrap();
    let a = lab.daemon(&[], &[]).await;
    let b = lab.daemon(&[], &[]).await;

    // Promotion: v2 on one host first, then on both.
    let name = "lock-t6";
    let lock = component("lock");
    let (v1, v2) = (lock.clone(), with_section(&lock, "wazoo-test-label", b"canary"));
    let (sha1, sha2) = (sha256(&v1), sha256(&v2));
    publish(via(&a), name, &lab.file("v1.wasm", &v1), &[]).await;
    until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "both serve v1",
        |s| all_serve(s, &[&a, &b], &sha1),
    )
    .await;
    let v2_file = lab.file("v2.wasm", &v2);
    let (code, out, err) = run(
        via(&b),
        &[
            "recipes",
            "publish",
            name,
            v2_file.to_str().unwrap(),
            "--canary",
            "1",
            "--canary-for",
            "3s",
            "--wait",
            "--json",
        ],
    )
    .await;
    assert_eq!(code, 0, "publish --canary --wait: {err}");
    let said = json_lines(&out);
    assert_eq!(said[0]["action"], "canary", "{out}");
    let waited = said.last().unwrap();
    f.check(hosts(waited).iter().any(|h| h["sha256"] == sha2.as_str()), || {
        format!("`publish --canary 1 --wait` exited 0 while no host served the canary: {waited}")
    });
    // The canary's time: exactly one host serves v2, marked canary; the other serves v1.
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "one host serves the canary",
        |s| hosts(s).iter().any(|h| h["canary"] == true && h["sha256"] == sha2.as_str()),
    )
    .await;
    if st["canary"] == sha2.as_str() {
        let on: Vec<&Value> = hosts(&st).iter().filter(|h| h["sha256"] == sha2.as_str()).collect();
        assert_eq!(on.len(), 1, "a canary on 1 host is served by one: {st}");
        assert_eq!(st["canary_hosts"], 1);
        assert_eq!(st["current"], sha1.as_str());
    }
    let canary_host =
        hosts(&st).iter().find(|h| h["canary"] == true).unwrap()["host"].as_str().unwrap().to_string();
    // Then it is promoted, and every host serves it.
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "the canary is promoted",
        |s| s["current"] == sha2.as_str() && s["canary"] == "" && all_serve(s, &[&a, &b], &sha2),
    )
    .await;
    for h in hosts(&st) {
        f.check(h["canary"] == false, || {
            format!(
                "after the promotion host {} still reports canary=true (status shows it `(canary)`): {h}",
                h["host"]
            )
        });
    }
    let events = history(via(&b), name).await;
    let actions: Vec<&str> = events.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["publish", "canary", "promote"]);
    assert_eq!(events[1]["sha256"], sha2.as_str());
    assert_eq!(events[2]["sha256"], sha2.as_str());
    assert_eq!(events[2]["by"], canary_host.as_str(), "the canary host promotes it");
    let (canary_at, promoted_at) =
        (events[1]["at_ms"].as_u64().unwrap(), events[2]["at_ms"].as_u64().unwrap());
    f.check(promoted_at >= canary_at + 3000, || {
        format!(
            "`publish {name} --canary 1 --canary-for 3s`: promoted {} ms after the canary was published \
             (history: {events:?})",
            promoted_at as i64 - canary_at as i64
        )
    });
    let (code, _, err) = run(via(&a), &["recipes", "status", name, "--wait"]).await;
    assert_eq!(code, 0, "{err}");

    // Withdrawal: misbehave v2 as a canary on both hosts traps at its first call.
    let name = "mb-t6";
    let misbehave = std::fs::read(built.join("misbehave.wasm")).unwrap();
    let (m1, m2) = (misbehave.clone(), with_section(&misbehave, "wazoo-test-label", b"canary"));
    let (sha1, sha2) = (sha256(&m1), sha256(&m2));
    publish(via(&a), name, &lab.file("m1.wasm", &m1), &[]).await;
    until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "both serve m1",
        |s| all_serve(s, &[&a, &b], &sha1),
    )
    .await;
    let (code, _, err) = run(via(&a), &["run", name, "hold", "/held"]).await;
    assert_eq!(code, 0, "misbehave v1 answers: {err}");
    publish(via(&b), name, &lab.file("m2.wasm", &m2), &["--canary", "2", "--canary-for", "10m"]).await;
    until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&a),
        "both serve the canary",
        |s| {
            hosts(s).len() == 2
                && hosts(s).iter().all(|h| h["canary"] == true && h["sha256"] == sha2.as_str())
        },
    )
    .await;
    let (code, _, err) = run(via(&a), &["run", name, "hold-then-trap", "/trap"]).await;
    assert_ne!(code, 0, "the canary traps: {err}");
    assert!(err.contains("trap"), "{err}");
    let st = until_status(
        &checker,
        &lab.registry(),
        name,
        || via(&b),
        "the canary is withdrawn, m1 everywhere",
        |s| s["canary"] == "" && all_serve(s, &[&a, &b], &sha1),
    )
    .await;
    assert_eq!(st["current"], sha1.as_str());
    for h in hosts(&st) {
        f.check(h["canary"] == false, || {
            format!("after the withdrawal host {} reports canary=true: {h}", h["host"])
        });
    }
    let events = history(via(&b), name).await;
    let actions: Vec<&str> = events.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["publish", "canary", "withdraw"]);
    let withdrawn = &events[2];
    assert_eq!(withdrawn["sha256"], sha2.as_str());
    let reason = withdrawn["reason"].as_str().unwrap();
    assert!(reason.contains("trap") && reason.contains(&format!(":{}", port(&a))), "{reason}");
    assert_eq!(served(&a, name).await.as_deref(), Some(&sha1[..12]));
    assert_eq!(served(&b, name).await.as_deref(), Some(&sha1[..12]));
    let (code, _, err) = run(via(&a), &["run", name, "hold", "/held"]).await;
    assert_eq!(code, 0, "m1 serves again: {err}");
    f.done();
}
