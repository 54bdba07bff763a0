//! What users of flock, etcdctl and kazoo expect of the claim and read commands, run as a user
//! runs them against a real ZooKeeper, locally and through a `wazoo serve` daemon:
//!
//! - `lock PATH` with no command holds until a signal and says what it holds; `-n` never waits;
//! - wazoo's own exit statuses move out of CMD's way (`--conflict-exit-code`, `--lost-exit-code`,
//!   `--revoked-exit-code`);
//! - `holders` lists holders and waiters in queue order, and `--json` prints one object a line;
//! - "nothing there" (1), bad usage (2) and "could not find out" (69) are told apart, and no
//!   input ends in a panic;
//! - `double-barrier -- CMD` is supervised as the claims' commands are.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::Command;
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::procs::{forks, through, Running};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

async fn daemon() -> Daemon {
    Daemon::start(&plugins(), &root().join("target/component-cache")).await
}

/// `held NODE token T`, the first line of a claim command without CMD: (node, token).
async fn held(holder: &mut Running) -> (String, i64) {
    let line = holder.line("the claim is held").await;
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((words.len(), words[0], words[2]), (4, "held", "token"), "{line}");
    (words[1].to_string(), words[3].parse().unwrap())
}

/// Every line of `stdout` as a JSON object.
fn objects(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"));
            assert!(v.is_object(), "not an object: {l}");
            v
        })
        .collect()
}

/// `lock PATH` without CMD, through `base`: it holds until SIGTERM/SIGINT, `-n` contenders fail
/// at once (with the status asked for) and leave nothing behind, `holders` shows it with the token
/// it printed, and a signal releases it (exit status 0) to the next waiter.
async fn holds_without_a_command(base: impl Fn() -> Command, signal: i32) {
    let checker = client(&zk().address()).await;
    let path = unique("hold");
    let mut holder = Running::start(base().args(["lock", &path]));
    let (node, token) = held(&mut holder).await;
    let stat = checker.check_stat(&node).await.unwrap().expect("the printed node exists");
    assert_eq!(stat.czxid, token, "the printed token is the node's czxid");

    let started = Instant::now();
    let (code, _, stderr) = output(base().args(["lock", &path, "-n", "--", "sh", "-c", "echo ran"])).await;
    assert_eq!(code, 3, "-n on a held lock: {stderr}");
    assert!(stderr.contains("held by another"), "{stderr}");
    let (code, stdout, stderr) =
        output(base().args(["lock", &path, "--no-wait", "--conflict-exit-code", "75", "--", "true"])).await;
    assert_eq!((code, stdout.as_str()), (75, ""), "{stderr}");
    println!("two -n attempts answered in {:.0?}", started.elapsed());
    assert_eq!(children(&checker, &path).await, vec![node.rsplit('/').next().unwrap().to_string()]);

    let (code, stdout, stderr) = output(base().args(["holders", &path])).await;
    assert_eq!(code, 0, "{stderr}");
    let line = stdout.lines().next().unwrap();
    assert!(line.starts_with(&format!("holds {node} token {token} session 0x")), "{stdout}");

    let mut waiter = Running::start(base().args(["lock", &path, "--", "sh", "-c", "echo waiter-ran"]));
    wait_children(&checker, &path, 2).await;
    holder.signal(signal);
    let (code, stderr) = holder.exit().await;
    assert_eq!(code, 0, "a signal releases a held lock without a command: {stderr}");
    assert_eq!(waiter.line("the waiter runs").await, "waiter-ran");
    assert_eq!(waiter.exit().await.0, 0);
    assert!(checker.check_stat(&node).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_without_a_command_holds_until_a_signal() {
    holds_without_a_command(cli, libc::SIGTERM).await;
    holds_without_a_command(cli, libc::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_without_a_command_holds_until_a_signal_through_the_daemon() {
    let daemon = daemon().await;
    holds_without_a_command(|| through(&daemon), libc::SIGTERM).await;
}

/// Every claim command takes `-n`: against a holder it exits 3 at once, without running CMD
/// and without a node left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_claim_command_takes_no_wait() {
    let checker = client(&zk().address()).await;
    for (holder_args, contender_args) in [
        (vec!["rwlock", "write"], vec!["rwlock", "read"]),
        (vec!["semaphore", "--leases", "1"], vec!["semaphore", "--leases", "1"]),
        (vec!["elect", "--id", "a"], vec!["elect", "--id", "b"]),
    ] {
        let path = unique("no-wait");
        let with_path = |args: &[&str]| {
            let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            v.insert(if v[0] == "rwlock" { 2 } else { 1 }, path.clone());
            v
        };
        let mut holder = Running::start(cli().args(with_path(&holder_args)));
        let (node, _) = held(&mut holder).await;
        let before = ephemerals(&checker, &path).await;
        let (code, stdout, stderr) =
            output(cli().args(with_path(&contender_args)).args(["-n", "--", "sh", "-c", "echo ran"])).await;
        assert_eq!((code, stdout.as_str()), (3, ""), "{contender_args:?} -n: {stderr}");
        assert_eq!(ephemerals(&checker, &path).await, before, "{contender_args:?}: nothing left");
        holder.signal(libc::SIGTERM);
        assert_eq!(holder.exit().await.0, 0);
        assert!(checker.check_stat(&node).await.unwrap().is_none());
    }
}

/// `--lost-exit-code` and `--revoked-exit-code` replace 4 and 5, with and without CMD, so a
/// script tells wazoo's verdict from CMD's own status.
async fn own_statuses(base: impl Fn() -> Command) {
    let checker = client(&zk().address()).await;
    // Lost: the node deleted under a holder without CMD, then under one with CMD.
    let path = unique("lost-code");
    let mut holder = Running::start(base().args(["lock", &path, "--lost-exit-code", "91"]));
    let (node, _) = held(&mut holder).await;
    checker.delete(&node, None).await.unwrap();
    let (code, stderr) = holder.exit().await;
    assert_eq!(code, 91, "{stderr}");
    assert!(stderr.contains("lost"), "{stderr}");

    let mut holder =
        Running::start(base().args(["lock", &path, "--lost-exit-code", "92", "--grace", "1s", "--"]).args([
            "sh",
            "-c",
            &forks(),
        ]));
    let cmd = holder.pids().await;
    checker.delete(&cmd.node, None).await.unwrap();
    let (code, stderr) = holder.exit().await;
    if !cmd.gone() {
        cmd.kill();
    }
    assert_eq!(code, 92, "{stderr}");
    cmd.assert_gone("lost with --lost-exit-code");

    // Revoked: the holder without CMD lets go, and says so with its own status.
    let mut holder = Running::start(base().args(["lock", &path, "--revoked-exit-code", "93"]));
    let (node, _) = held(&mut holder).await;
    let (code, stdout, stderr) = output(cli().args(["revoke", &node])).await;
    assert_eq!((code, stdout.trim()), (0, "asked"), "{stderr}");
    let (code, stderr) = holder.exit().await;
    assert_eq!(code, 93, "{stderr}");
    assert!(checker.check_stat(&node).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_and_revoked_exit_codes_are_the_ones_asked_for() {
    own_statuses(cli).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_and_revoked_exit_codes_are_the_ones_asked_for_through_the_daemon() {
    let daemon = daemon().await;
    own_statuses(|| through(&daemon)).await;
}

/// One holder and two waiters of each kind: `holders` lists them in queue order with the tokens
/// and nodes the holders were given, as text and as JSON, the same locally and through a daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_lists_holders_then_waiters_in_queue_order() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    for (kind, args) in [
        ("lock", vec!["lock"]),
        ("rwlock", vec!["rwlock", "write"]),
        ("semaphore", vec!["semaphore", "--leases", "1"]),
        ("election", vec!["elect"]),
    ] {
        let path = unique("holders");
        let start = |name: &str| {
            let mut command = cli();
            command.args(&args[..]);
            if kind == "rwlock" {
                command.arg(&path);
            } else {
                command.arg(&path).args(if kind == "election" { vec!["--id", name] } else { vec![] });
            }
            Running::start(&mut command)
        };
        let mut first = start("first");
        let (node, token) = held(&mut first).await;
        let mut second = start("second");
        let waiting = if kind == "semaphore" { 3 } else { 2 };
        let counted = if kind == "semaphore" { format!("{path}/leases") } else { path.clone() };
        wait_children(&checker, &counted, if kind == "semaphore" { 2 } else { waiting }).await;
        let mut third = start("third");
        if kind == "semaphore" {
            wait_children(&checker, &format!("{path}/locks"), 2).await;
        } else {
            wait_children(&checker, &path, 3).await;
        }

        let (code, text, stderr) = output(cli().args(["holders", &path])).await;
        assert_eq!(code, 0, "{kind}: {stderr}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{kind}: {text}");
        assert!(lines[0].starts_with("holds "), "{kind}: {text}");
        assert!(lines[0].contains(&format!("{node} token {token} ")), "{kind}: {text}");
        assert!(lines[1].starts_with("waits ") && lines[2].starts_with("waits "), "{kind}: {text}");
        if kind == "election" {
            for (line, id) in lines.iter().zip(["first", "second", "third"]) {
                assert!(line.ends_with(&format!("data {id}")), "{kind}: {text}");
            }
        }
        if kind == "rwlock" {
            assert!(lines.iter().all(|l| l.split_whitespace().nth(1) == Some("write")), "{text}");
        }

        let (code, json, _) = output(cli().args(["holders", &path, "--json"])).await;
        assert_eq!(code, 0);
        let rows = objects(&json);
        assert_eq!(rows.len(), 3, "{json}");
        assert!(rows.iter().all(|r| r["kind"] == kind), "{json}");
        assert_eq!(
            (rows[0]["state"].as_str(), rows[0]["node"].as_str()),
            (Some("holds"), Some(node.as_str()))
        );
        assert_eq!(rows[0]["token"].as_i64(), Some(token));
        let tokens: Vec<i64> = rows.iter().map(|r| r["token"].as_i64().unwrap()).collect();
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "queue order is token order: {json}");

        let (code, remote, stderr) = output(through(&daemon).args(["holders", &path, "--json"])).await;
        assert_eq!((code, remote.as_str()), (0, json.as_str()), "{kind} through the daemon: {stderr}");

        for holder in [&mut first, &mut second, &mut third] {
            holder.signal(libc::SIGTERM);
        }
        for holder in [&mut first, &mut second, &mut third] {
            let _ = holder.exit().await;
        }
        let (code, stdout, stderr) = output(cli().args(["holders", &path])).await;
        assert_eq!((code, stdout.as_str()), (1, ""), "{kind}: nothing there exits 1: {stderr}");
    }
}

/// The read commands' `--json`: one object per line, with what the text says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_commands_print_json_lines() {
    let path = unique("json");
    let (value, counter, queue, group) =
        (format!("{path}/v"), format!("{path}/c"), format!("{path}/q"), format!("{path}/g"));
    assert_eq!(output(cli().args(["config", "set", &value, "a b"])).await.0, 0);
    assert_eq!(output(cli().args(["counter", "add", &counter, "7"])).await.0, 0);
    assert_eq!(output(cli().args(["queue", "put", &queue, "x"])).await.0, 0);
    let check = |args: Vec<&str>, want: Value| {
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        async move {
            let (code, stdout, stderr) = output(cli().args(&args).arg("--json")).await;
            assert_eq!(code, 0, "{args:?}: {stderr}");
            let rows = objects(&stdout);
            assert_eq!(rows, vec![want], "{args:?}");
        }
    };
    check(vec!["config", "get", &value], serde_json::json!({"value": "a b", "version": 0})).await;
    check(vec!["counter", "get", &counter], serde_json::json!({"value": 7})).await;
    check(vec!["queue", "len", &queue], serde_json::json!({"len": 1})).await;

    let mut member = Running::start(cli().args(["group", "join", &group, "m1", "--data", "d1"]));
    let line = member.line("the member joined").await;
    assert_eq!(line, format!("held {group}/m1"));
    check(vec!["group", "list", &group], serde_json::json!({"name": "m1", "data": "d1"})).await;
    member.signal(libc::SIGTERM);
    assert_eq!(member.exit().await.0, 0);

    let election = format!("{path}/e");
    let mut leader = Running::start(cli().args(["elect", &election, "--id", "boss"]));
    let (node, token) = held(&mut leader).await;
    let (code, stdout, _) = output(cli().args(["leader", &election, "--json"])).await;
    assert_eq!(code, 0);
    let row = &objects(&stdout)[0];
    assert_eq!((row["id"].as_str(), row["node"].as_str()), (Some("boss"), Some(node.as_str())));
    assert_eq!(row["token"].as_i64(), Some(token));
    leader.signal(libc::SIGTERM);
    assert_eq!(leader.exit().await.0, 0);

    let (code, stdout, _) = output(cli().args(["recipes", "list", "--json"])).await;
    assert_eq!(code, 0);
    let rows = objects(&stdout);
    assert!(
        rows.iter().any(|r| r["name"] == "lock" && r["world"].as_str().unwrap().contains("lock")),
        "{stdout}"
    );
}

/// "Nothing there" exits 1, an unreachable ZooKeeper or daemon 69, each with one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_there_and_out_of_reach_exit_differently() {
    let path = unique("nothing");
    for args in [
        vec!["config", "get", &path],
        vec!["leader", &path],
        vec!["holders", &path],
        vec!["group", "list", &path],
    ] {
        let (code, _, stderr) = output(cli().args(&args)).await;
        assert_eq!((code, stderr.lines().count()), (1, 1), "{args:?}: {stderr}");
        let mut unreachable = cli();
        unreachable.args(["--zookeeper", "127.0.0.1:1", "--connect-timeout", "1s"]).args(&args);
        let (code, _, stderr) = output(&mut unreachable).await;
        assert_eq!((code, stderr.lines().count()), (69, 1), "{args:?} without ZooKeeper: {stderr}");
        let mut no_daemon = cli();
        no_daemon.args(["--server", "127.0.0.1:1", "--connect-timeout", "1s"]).args(&args);
        let (code, _, stderr) = output(&mut no_daemon).await;
        assert_eq!((code, stderr.lines().count()), (69, 1), "{args:?} without the daemon: {stderr}");
    }
    let mut unreachable = cli();
    unreachable.args(["--zookeeper", "127.0.0.1:1", "--connect-timeout", "1s", "lock", &path, "--", "true"]);
    assert_eq!(output(&mut unreachable).await.0, 69);
}

/// Durations read as humantime writes them; values out of range, too long or malformed are
/// usage errors (exit status 2) with one line that names the option, never a panic, and nothing
/// is created on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_values_are_usage_errors_never_panics() {
    let path = unique("usage");
    let (code, _, stderr) = output(cli().args(["queue", "take", &path, "--timeout", "1s500ms"])).await;
    assert_eq!(code, 3, "humantime duration accepted: {stderr}");
    assert!(stderr.contains("1s 500ms"), "{stderr}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["semaphore", &path, "--leases", "0", "--", "true"], "1.."),
        (vec!["queue", "put", &path, "x", "--priority", "100"], "0..=99"),
        (vec!["double-barrier", &path, "--count", "0", "--", "true"], "1.."),
        (vec!["lock", &path, "--timeout", "1000000d", "--", "true"], "at most 365 days"),
        (vec!["lock", &path, "--timeout", "99999999999999999999s", "--", "true"], "--timeout"),
        (vec!["lock", &path, "--timeout", "-1", "--", "true"], "-1"),
        (vec!["lock", &path, "--timeout", "nan", "--", "true"], "--timeout"),
        (vec!["lock", &path, "--grace", "1e300", "--", "true"], "--grace"),
        (vec!["lock", &path, "--timeout", "1s", "-n", "--", "true"], "--no-wait"),
        (vec!["lock", &path, "--conflict-exit-code", "256", "--", "true"], "0..=255"),
        (vec!["--session-timeout", "0", "lock", &path, "--", "true"], "above zero"),
        (vec!["--session-timeout", "30d", "lock", &path, "--", "true"], "at most 24 days"),
        (vec!["--connect-timeout", "0s", "config", "get", &path], "above zero"),
        (vec!["serve", "--watch-every", "0", "--metrics", "off"], "at least 100ms"),
        (vec!["server", "--tick-ms", "0"], "1..=60000"),
        (vec!["holders", &path, "--kind", "mutex"], "--kind"),
        (vec!["holders", &path, "--leases", "0"], "1.."),
        (vec!["lock", "relative", "--", "true"], "invalid lock path"),
        (vec!["holders", "/a//b"], "invalid claim path"),
        (vec!["call", "lock", "lock.acquire", "{not json"], "ARGS is not JSON"),
        (vec!["config", "set", &path, "v", "--version=-1"], "--version"),
        (vec!["elect", &path, "--id", "", "--", "true"], "--id"),
        (vec!["elect", &path, "--id", "two\nlines", "--", "true"], "--id"),
        (vec!["2pc", "coordinate", &path, "--sites", "a,a"], "named twice"),
        (vec!["2pc", "coordinate", &path, "--sites", "a,,b"], "--sites"),
        (vec!["serve", "--watch-every", "1ms", "--metrics", "off"], "at least 100ms"),
    ];
    for (args, says) in cases {
        for via_daemon in [false, true] {
            let mut command = cli();
            if via_daemon {
                // A daemon that is never reached: usage is checked first.
                command.args(["--server", "127.0.0.1:1"]);
            }
            let (code, _, stderr) = output(command.args(&args)).await;
            if via_daemon && ["serve", "server"].contains(&args[0]) {
                assert_eq!(code, 2, "{args:?} through --server: {stderr}");
                continue;
            }
            assert_eq!(code, 2, "{args:?} (through a daemon: {via_daemon}): {stderr}");
            assert!(stderr.contains(says), "{args:?}: {stderr:?} does not say {says:?}");
            assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "{args:?}: {stderr}");
        }
    }
    let checker = client(&zk().address()).await;
    assert!(checker.check_stat(&path).await.unwrap().is_none(), "bad input created nothing");
}

/// `double-barrier -- CMD` runs CMD as the claims do: SIGKILL of wazoo takes all of CMD with it,
/// and a signal while entering leaves the barrier at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_barrier_commands_are_supervised() {
    let checker = client(&zk().address()).await;
    let path = unique("dbarrier");
    let script = forks();
    let mut one =
        Running::start(cli().args(["double-barrier", &path, "--count", "1", "--", "sh", "-c", &script]));
    let cmd = one.pids().await;
    one.signal(libc::SIGKILL);
    let gone = tokio::time::timeout(Duration::from_secs(1), cmd.ended()).await;
    if gone.is_err() {
        cmd.kill();
    }
    assert!(gone.is_ok(), "the command still runs 1 s after wazoo was killed: {cmd:?}");
    cmd.assert_gone("double barrier, wazoo SIGKILLed");

    let path = unique("dbarrier-enter");
    let mut waiting = Running::start(cli().args([
        "--session-timeout",
        "4s",
        "double-barrier",
        &path,
        "--count",
        "2",
        "--",
        "sh",
        "-c",
        "echo ran",
    ]));
    let entered = within(LIMIT, "the participant enters", wait_children(&checker, &path, 1)).await;
    let node = format!("{path}/{}", entered[0]);
    waiting.signal(libc::SIGTERM);
    within(Duration::from_secs(1), "its node is deleted within 1 s", wait_gone(&checker, &node)).await;
    let (code, stderr) = waiting.exit().await;
    assert_eq!(code, 128 + libc::SIGTERM, "{stderr}");
}

/// A node that does not exist is no revocation, locally and through a daemon: exit 1, nothing
/// made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_of_a_node_that_does_not_exist_says_so() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let node = format!("{}/_c_x-lock-0000000001", unique("revoke-none"));
    for through_daemon in [false, true] {
        for grace in [&[][..], &["--grace", "1s"][..]] {
            let mut command = if through_daemon { through(&daemon) } else { cli() };
            let (code, stdout, stderr) = output(command.args(["revoke", &node]).args(grace)).await;
            assert_eq!((code, stdout.as_str()), (1, ""), "{grace:?}: {stderr}");
            assert!(stderr.contains("does not exist"), "{stderr}");
        }
    }
    assert_eq!(checker.check_stat(&node).await.unwrap(), None, "nothing made");
}

/// `revoke` touches only claim nodes: a configuration value is neither overwritten nor deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_refuses_what_is_not_a_claim() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let value = format!("{}/setting", unique("revoke-value"));
    assert_eq!(output(cli().args(["config", "set", &value, "on"])).await.0, 0);
    for mut base in [cli(), through(&daemon)] {
        let (code, stdout, stderr) = output(base.args(["revoke", &value, "--grace", "0s"])).await;
        assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
        assert!(stderr.contains("not a lock"), "{stderr}");
        assert_eq!(checker.get_data(&value).await.unwrap().0, b"on", "the value is untouched");
    }
}

/// A daemon's client names recipes of its plugins directory, never a file of the daemon's host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_loads_no_file_a_client_names() {
    let daemon = daemon().await;
    let tree = plugins().join("tree.wasm");
    for recipe in [tree.to_str().unwrap(), "/etc/passwd", "../plugins/tree"] {
        let (code, stdout, stderr) = output(through(&daemon).args(["run", recipe, "/"])).await;
        assert_eq!((code, stdout.as_str()), (70, ""), "{recipe}: {stderr}");
        assert!(stderr.contains("not files"), "{recipe}: {stderr}");
    }
}

/// A listener that accepts and never answers is a daemon out of reach: 69 within the connect
/// timeout, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_never_answers_is_out_of_reach() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let started = Instant::now();
    let (code, _, stderr) =
        output(cli().args(["--server", &addr, "--connect-timeout", "1s", "config", "get", "/x"])).await;
    assert_eq!((code, stderr.lines().count()), (69, 1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "answered in {:?}", started.elapsed());
    held.abort();
}

/// `wazoo server` on a port another server holds says so, instead of vouching for the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_on_a_taken_port_fails_at_once() {
    let port = zk().address().rsplit(':').next().unwrap().to_string();
    let (code, stdout, stderr) = output(cli().args(["server", "--port", &port])).await;
    assert_eq!((code, stdout.as_str()), (70, ""), "{stderr}");
    assert!(stderr.contains(&format!("cannot serve on 127.0.0.1:{port}")), "{stderr}");
}

/// A reader that goes away ends a command quietly (status 141, as SIGPIPE ends a shell tool),
/// never with a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_is_no_panic() {
    let path = unique("closed-stdout");
    for args in [vec!["queue", "put", &path, "x"], vec!["recipes", "list", "--json"], vec!["leader", &path]] {
        let mut child = cli()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = within(LIMIT, "wazoo exits", child.wait_with_output()).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!([Some(141), Some(1)].contains(&out.status.code()), "{args:?}: {:?} {stderr}", out.status);
    }
}
