//! `wazoo --server ADDR …`: the CLI through a real `wazoo serve` daemon on a real ZooKeeper. The
//! CLI itself is pointed at a ZooKeeper that does not exist, so everything it does goes through
//! the daemon.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use wazoo_tests::daemon::{cli, output, wazoo_at, Daemon};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// A daemon on the shared server and plugins.
async fn daemon() -> Daemon {
    Daemon::start(&plugins(), &root().join("target/component-cache")).await
}

/// Starts `command` with stdin, stdout and stderr piped; returns it and its stdout's lines.
fn start(command: &mut Command) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>, what: &str) -> String {
    within(LIMIT, what, lines.next_line()).await.unwrap().unwrap_or_else(|| panic!("{what}: no line"))
}

/// Lets a command blocked in `read line` go on.
async fn go_on(child: &mut Child) {
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").await.unwrap();
    stdin.flush().await.unwrap();
}

async fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut text).await;
    }
    text
}

fn alive(pid: u32) -> bool {
    // A zombie would still have /proc/PID; wazoo reaps its child before exiting.
    Path::new(&format!("/proc/{pid}")).exists()
}

/// `lock PATH -- sh -c 'echo started $$; exec sleep 600'` through `daemon`, once the command
/// runs: the wazoo process, the command's PID and the lock node.
async fn hold(daemon: &Daemon, path: &str, extra: &[&str]) -> (Child, u32, String) {
    let (child, mut lines) = start(daemon.wazoo().args(extra).args([
        "lock",
        path,
        "--grace",
        "5s",
        "--",
        "sh",
        "-c",
        "echo started $$ $WAZOO_LOCK_NODE; exec sleep 600",
    ]));
    let line = next_line(&mut lines, "the command starts under the lock").await;
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "started", "{line}");
    (child, words[1].parse().unwrap(), words[2].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_lock_exports_the_nodes_czxid_as_token_and_releases() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("remote-lock");
    let script = "echo \"$WAZOO_FENCING_TOKEN $WAZOO_LOCK_NODE $WAZOO_LOCK_PATH\"; read line; exit 7";
    let (mut child, mut lines) = start(daemon.wazoo().args(["lock", &path, "--", "sh", "-c", script]));
    let line = next_line(&mut lines, "the command runs under the lock").await;
    let words: Vec<&str> = line.split_whitespace().collect();
    let token: i64 = words[0].parse().expect("a numeric fencing token");
    let node = words[1];
    assert_eq!(words[2], path);
    assert!(node.starts_with(&format!("{path}/_c_")) && node.contains("-lock-"), "Curator node name: {node}");
    let stat = checker.check_stat(node).await.unwrap().expect("the lock node exists while the command runs");
    assert_eq!(stat.czxid, token, "the fencing token is the lock node's czxid");
    go_on(&mut child).await;
    let status = within(LIMIT, "wazoo exits with the command", child.wait()).await.unwrap();
    assert_eq!(
        status.code(),
        Some(7),
        "wazoo exits with the command's status: {}",
        stderr_of(&mut child).await
    );
    // Released in the daemon without waiting for ZooKeeper's answer: gone a moment later.
    within(LIMIT, "the lock node is deleted after the command", wait_children(&checker, &path, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_locks_exclude_each_other() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("remote-exclude");
    let log = std::env::temp_dir().join(format!("wazoo-remote-exclude-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let (mut a, mut a_lines) = start(daemon.wazoo().env("LOG", &log).args([
        "lock",
        &path,
        "--",
        "sh",
        "-c",
        "echo \"A $WAZOO_FENCING_TOKEN\"; read line; echo A-exit >> \"$LOG\"",
    ]));
    let a_line = next_line(&mut a_lines, "A runs under the lock").await;
    let (mut b, mut b_lines) = start(daemon.wazoo().env("LOG", &log).args([
        "lock",
        &path,
        "--",
        "sh",
        "-c",
        "echo B-enter >> \"$LOG\"; echo \"B $WAZOO_FENCING_TOKEN\"",
    ]));
    // B is queued behind A: both nodes are there.
    within(LIMIT, "B queues behind A", wait_children(&checker, &path, 2)).await;
    assert!(b.try_wait().unwrap().is_none(), "B waits while A holds the lock");
    assert!(!log.exists(), "B's command must not run while A holds the lock");
    go_on(&mut a).await;
    let status = within(LIMIT, "A finishes", a.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0), "{}", stderr_of(&mut a).await);
    let b_line = next_line(&mut b_lines, "B runs once A released").await;
    let status = within(LIMIT, "B finishes", b.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0), "{}", stderr_of(&mut b).await);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "A-exit\nB-enter\n", "A left before B entered");
    let token = |line: &str| line.split_whitespace().nth(1).unwrap().parse::<i64>().unwrap();
    assert!(token(&b_line) > token(&a_line), "the later holder's token is greater: {a_line} / {b_line}");
    // Released in the daemon without waiting for ZooKeeper's answer: gone a moment later.
    within(LIMIT, "the released node goes", wait_children(&checker, &path, 0)).await;
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_timeout_exits_3_and_leaves_no_node() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("remote-timeout");
    let host = host().await;
    let mut holder = host.lock("lock").await.unwrap();
    holder.acquire(&path, None).await.unwrap();
    let (code, _, stderr) =
        output(daemon.wazoo().args(["lock", &path, "--timeout", "500ms", "--", "true"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(stderr.trim(), format!("wazoo: timed out after 500ms waiting for the lock at {path}"));
    assert_eq!(children(&checker, &path).await.len(), 1, "only the holder's node remains");
    holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_deleted_lock_node_stops_the_command_with_4() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("remote-deleted");
    let (mut child, pid, node) = hold(&daemon, &path, &[]).await;
    checker.delete(&node, None).await.unwrap();
    let status = within(LIMIT, "wazoo stops after losing the lock", child.wait()).await.unwrap();
    let stderr = stderr_of(&mut child).await;
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("lock node was deleted"), "{stderr}");
    assert!(!alive(pid), "the command was stopped");
    // Released in the daemon without waiting for ZooKeeper's answer: gone a moment later.
    within(LIMIT, "the released node goes", wait_children(&checker, &path, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_revoked_lock_stops_the_command_with_5_and_releases() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("remote-revoke");
    let (mut child, pid, node) = hold(&daemon, &path, &[]).await;
    let (code, stdout, stderr) = output(cli().args(["revoke", &node])).await;
    assert_eq!((code, stdout.trim()), (0, "asked"), "{stderr}");
    let status = within(LIMIT, "the holder lets go", child.wait()).await.unwrap();
    let stderr = stderr_of(&mut child).await;
    assert_eq!(status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("revoked"), "{stderr}");
    assert!(!alive(pid), "the command was stopped");
    // Released in the daemon without waiting for ZooKeeper's answer: gone a moment later.
    within(LIMIT, "the holder released its node", wait_children(&checker, &path, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_client_frozen_past_its_ttl_stops_the_command_with_4() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("remote-frozen");
    let (mut child, pid, node) = hold(&daemon, &path, &["--session-timeout", "1s"]).await;
    // Freeze wazoo (not its command) until the daemon ends its client session and the node goes.
    let wazoo_pid = child.id().unwrap() as i32;
    unsafe { libc::kill(wazoo_pid, libc::SIGSTOP) };
    within(LIMIT, "the daemon ends the silent session", wait_gone(&checker, &node)).await;
    assert!(alive(pid), "the command runs on while wazoo is frozen");
    unsafe { libc::kill(wazoo_pid, libc::SIGCONT) };
    let status = within(LIMIT, "wazoo stops after its session ended", child.wait()).await.unwrap();
    let stderr = stderr_of(&mut child).await;
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(&format!("lock at {path} lost (")), "{stderr}");
    assert!(!alive(pid), "the command was stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_rwlock_semaphore_and_election_run_their_commands() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;

    let path = unique("remote-rw");
    let script = "echo $WAZOO_LOCK_MODE $WAZOO_LOCK_NODE $WAZOO_FENCING_TOKEN";
    let (code, stdout, stderr) =
        output(daemon.wazoo().args(["rwlock", "read", &path, "--", "sh", "-c", script])).await;
    assert_eq!(code, 0, "{stderr}");
    let words: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(words[0], "read");
    assert!(words[1].contains("-__READ__"), "{stdout}");
    assert!(words[2].parse::<i64>().unwrap() > 0);
    // Released in the daemon without waiting for ZooKeeper's answer: gone a moment later.
    within(LIMIT, "the released node goes", wait_children(&checker, &path, 0)).await;

    let path = unique("remote-sem");
    let (code, stdout, stderr) = output(daemon.wazoo().args([
        "semaphore",
        &path,
        "--leases",
        "2",
        "--",
        "sh",
        "-c",
        "echo $WAZOO_LEASE_NODE $WAZOO_SEMAPHORE_PATH",
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with(&format!("{path}/leases/_c_")), "{stdout}");
    assert!(stdout.trim().ends_with(&format!(" {path}")), "{stdout}");
    let (code, _, stderr) =
        output(daemon.wazoo().args(["semaphore", &path, "--leases", "0", "--", "true"])).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("0 is not in 1.."), "{stderr}");

    let path = unique("remote-elect");
    let script =
        "echo \"$WAZOO_LEADER_ID $WAZOO_FENCING_TOKEN\"; \"$WAZOO_BIN\" leader \"$WAZOO_ELECTION_PATH\"";
    let (code, stdout, stderr) = output(
        daemon
            .wazoo()
            .env("WAZOO_BIN", wazoo_bin())
            .args(["elect", &path, "--id", "node-a", "--", "sh", "-c", script]),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("node-a "), "{stdout}");
    let token = lines[0].split_whitespace().nth(1).unwrap();
    // The inner `wazoo leader` found WAZOO_SERVER in its environment: it asked the daemon too.
    assert!(lines[1].starts_with(&format!("node-a  token {token}  {path}/")), "{stdout}");
    assert!(lines[1].ends_with("ack: node-a running sh"), "the leader acknowledged: {stdout}");
    let (code, stdout, _) = output(daemon.wazoo().args(["leader", &path])).await;
    assert_eq!((code, stdout.trim()), (1, "no leader"));
    let (code, _, stderr) = output(daemon.wazoo().args(["lock", "relative", "--", "true"])).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("invalid lock path") && stderr.contains("must be absolute"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_config_set_then_get_round_trips() {
    let daemon = daemon().await;
    let value = format!("{}/endpoint", unique("remote-config"));
    // The address from the environment alone (WAZOO_SERVER), no --server.
    let wazoo = || wazoo_at(&daemon.grpc);
    assert_eq!(output(wazoo().args(["config", "set", &value, "a:1"])).await.1.trim(), "0");
    let (code, stdout, stderr) = output(wazoo().args(["config", "get", &value])).await;
    assert_eq!((code, stdout.trim()), (0, "a:1"), "{stderr}");
    assert_eq!(output(wazoo().args(["config", "set", &value, "b:2", "--version", "0"])).await.1.trim(), "1");
    let (code, _, stderr) = output(wazoo().args(["config", "set", &value, "c:3", "--version", "7"])).await;
    assert_eq!(code, 1);
    assert_eq!(stderr.trim(), format!("wazoo: {value} is no longer at version 7"));
    assert_eq!(output(wazoo().args(["config", "get", &value])).await.1.trim(), "b:2");
    // The same value, read by the local path.
    assert_eq!(output(cli().args(["config", "get", &value])).await.1.trim(), "b:2");
    let (code, _, stderr) = output(wazoo().args(["config", "get", &format!("{value}-missing")])).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no value at"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_queue_barrier_and_custom_recipe() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;

    let path = unique("remote-queue");
    for (data, priority) in [("later", "20"), ("sooner", "10")] {
        let (code, stdout, stderr) =
            output(daemon.wazoo().args(["queue", "put", &path, data, "--priority", priority])).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.starts_with(&format!("{path}/_c_")) && stdout.contains(&format!("-queue-{priority}")),
            "{stdout}"
        );
    }
    assert_eq!(output(daemon.wazoo().args(["queue", "take", &path])).await.1.trim(), "sooner");
    assert_eq!(output(daemon.wazoo().args(["queue", "take", &path])).await.1.trim(), "later");
    let (code, _, stderr) = output(daemon.wazoo().args(["queue", "take", &path, "--timeout", "200ms"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(stderr.trim(), format!("wazoo: queue {path} empty after 200ms"));
    // An ephemeral item lives in a client session that ends with the command.
    let (code, stdout, stderr) =
        output(daemon.wazoo().args(["queue", "put", &path, "brief", "--ephemeral"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("lives only as long as this command"), "{stderr}");
    let brief = stdout.trim().to_string();
    assert!(brief.starts_with(&format!("{path}/_c_")) && brief.contains("-queue-"), "{stdout}");
    within(Duration::from_secs(10), "the ephemeral item goes with the command", wait_gone(&checker, &brief))
        .await;
    assert_eq!(output(daemon.wazoo().args(["queue", "len", &path])).await.1.trim(), "0");

    let gate = format!("{}/gate", unique("remote-barrier"));
    assert_eq!(output(daemon.wazoo().args(["barrier", "set", &gate])).await.1.trim(), "set");
    assert_eq!(output(daemon.wazoo().args(["barrier", "set", &gate])).await.1.trim(), "already set");
    let (code, _, stderr) =
        output(daemon.wazoo().args(["barrier", "wait", &gate, "--timeout", "300ms"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("still up"), "{stderr}");
    assert_eq!(output(daemon.wazoo().args(["barrier", "remove", &gate])).await.1.trim(), "removed");
    assert_eq!(output(daemon.wazoo().args(["barrier", "remove", &gate])).await.1.trim(), "was not set");
    assert_eq!(output(daemon.wazoo().args(["barrier", "wait", &gate])).await.1.trim(), "down");

    let tree = unique("remote-tree");
    let opts = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.mkdir(&format!("{tree}/a/b"), &opts).await.unwrap();
    checker.create(&format!("{tree}/a/data"), b"hello", &opts).await.unwrap();
    let (code, stdout, stderr) = output(daemon.wazoo().args(["run", "tree", &tree])).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[0].starts_with(&tree));
    assert!(lines[3].contains("data") && lines[3].contains("[5 bytes"), "{stdout}");
    let (code, _, stderr) = output(daemon.wazoo().args(["run", "tree", &format!("{tree}/missing")])).await;
    assert_eq!(code, 1);
    assert!(stderr.starts_with("wazoo: tree: ") && stderr.contains("no such node"), "{stderr}");
    let (code, _, stderr) = output(daemon.wazoo().args(["run", "no-such-component"])).await;
    assert_eq!(code, 70);
    assert!(stderr.contains("not found"), "{stderr}");

    // Any export of any recipe, by name, with JSON: through the daemon and locally alike.
    let counter = unique("remote-call");
    for wazoo in [daemon.wazoo(), cli()] {
        let mut wazoo = wazoo;
        let (code, stdout, stderr) =
            output(wazoo.args(["call", "config", "counter.add", &format!("[\"{counter}\", 5]")])).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.trim() == r#"{"ok":5}"# || stdout.trim() == r#"{"ok":10}"#, "{stdout}");
    }
    let (code, stdout, _) =
        output(daemon.wazoo().args(["call", "config", "value", &format!("[\"{counter}\"]")])).await;
    assert_eq!((code, stdout.trim()), (0, r#"{"ok":10}"#));
    let (code, stdout, _) = output(daemon.wazoo().args(["call", "config", "get", r#"["relative"]"#])).await;
    assert_eq!(code, 1, "a recipe's err exits 1");
    assert!(stdout.starts_with(r#"{"err":{"invalid-path":"#), "{stdout}");
    let (code, stdout, stderr) = output(daemon.wazoo().args(["recipes", "functions", "queue"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.lines().any(|l| l.starts_with("queue.put(path: string, data: list<u8>, priority: option<u8>, ephemeral: bool) -> result<string, zk-error>")),
        "{stdout}"
    );
    assert_eq!(
        stdout,
        output(cli().args(["recipes", "functions", "queue"])).await.1,
        "local and remote agree"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_recipes_list_shows_lock() {
    let daemon = daemon().await;
    let (code, stdout, stderr) = output(daemon.wazoo().args(["recipes", "list"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("NAME "), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("lock ") && l.contains("wazoo:recipes/lock-recipe@0.1.2")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("tree ") && l.contains("wazoo:recipes/custom@0.1.2")),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_subcommands_without_a_daemon_call_exit_2() {
    // Refused before any connection: nothing listens at this address.
    let free = wazoo_testkit::free_port().unwrap();
    let nowhere = format!("127.0.0.1:{free}");
    let cases: Vec<(Vec<&str>, &str)> =
        vec![(vec!["server"], "server"), (vec!["serve"], "serve"), (vec!["demo"], "demo")];
    for (args, name) in cases {
        let (code, stdout, stderr) =
            output(wazoo_at(&nowhere).arg("--server").arg(&nowhere).args(&args)).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr, format!("wazoo: {name} does not go through --server\n"), "{args:?}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_unreachable_daemon_exits_69_naming_it() {
    let free = wazoo_testkit::free_port().unwrap();
    let nowhere = format!("127.0.0.1:{free}");
    for args in [vec!["lock", "/t/x", "--", "true"], vec!["config", "get", "/t/x"], vec!["recipes", "list"]] {
        let (code, _, stderr) = output(wazoo_at(&nowhere).arg("--server").arg(&nowhere).args(&args)).await;
        assert_eq!(code, 69, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with(&format!("wazoo: cannot reach the wazoo daemon at {nowhere}")),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_revoke_releases_or_forces() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    // A holder through the daemon lets go when asked: exit 5, its node gone.
    let path = unique("remote-revoke-asked");
    let (mut child, pid, node) = hold(&daemon, &path, &[]).await;
    let (code, stdout, stderr) = output(daemon.wazoo().args(["revoke", &node])).await;
    assert_eq!((code, stdout.trim()), (0, "asked"), "{stderr}");
    let status = within(LIMIT, "the holder lets go", child.wait()).await.unwrap();
    let stderr = stderr_of(&mut child).await;
    assert_eq!(status.code(), Some(5), "{stderr}");
    assert!(!alive(pid), "the command was stopped");
    // Released in the daemon without waiting for ZooKeeper's answer: gone a moment later.
    within(LIMIT, "the holder released its node", wait_children(&checker, &path, 0)).await;
    // A holder that does not listen: deleted after the grace.
    let path = unique("remote-revoke-forced");
    let host = host().await;
    let mut deaf = host.lock("lock").await.unwrap();
    let held = deaf.acquire(&path, None).await.unwrap();
    let (code, stdout, stderr) =
        output(daemon.wazoo().args(["revoke", &held.node, "--grace", "300ms"])).await;
    assert_eq!((code, stdout.trim()), (0, "forced"), "{stderr}");
    assert!(children(&checker, &path).await.is_empty(), "the forced node is deleted");
    deaf.close().await;
    let (code, _, stderr) = output(daemon.wazoo().args(["revoke", "relative"])).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("invalid node path"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_queue_len_and_counter_from_8_concurrent_clients() {
    let daemon = daemon().await;
    let path = unique("remote-len");
    assert_eq!(output(daemon.wazoo().args(["queue", "len", &path])).await.1.trim(), "0");
    for data in ["a", "b", "c"] {
        assert_eq!(output(daemon.wazoo().args(["queue", "put", &path, data])).await.0, 0);
    }
    let (code, stdout, stderr) = output(daemon.wazoo().args(["queue", "len", &path])).await;
    assert_eq!((code, stdout.trim()), (0, "3"), "{stderr}");
    assert_eq!(output(daemon.wazoo().args(["queue", "take", &path])).await.1.trim(), "a");
    assert_eq!(output(daemon.wazoo().args(["queue", "len", &path])).await.1.trim(), "2");

    let counter = format!("{}/hits", unique("remote-counter"));
    assert_eq!(output(daemon.wazoo().args(["counter", "get", &counter])).await.1.trim(), "0");
    let (clients, adds) = (8, 4);
    let mut running = Vec::new();
    for _ in 0..clients {
        let mut commands: Vec<Command> = (0..adds)
            .map(|_| {
                let mut c = daemon.wazoo();
                c.args(["counter", "add", &counter, "1"]);
                c
            })
            .collect();
        running.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for c in &mut commands {
                let (code, stdout, stderr) = output(c).await;
                assert_eq!(code, 0, "{stderr}");
                seen.push(stdout.trim().parse::<i64>().unwrap());
            }
            seen
        }));
    }
    let mut values = Vec::new();
    for r in running {
        values.extend(r.await.unwrap());
    }
    values.sort();
    let total = clients * adds;
    assert_eq!(values, (1..=total).collect::<Vec<i64>>(), "every add saw its own new value");
    let (code, stdout, stderr) = output(daemon.wazoo().args(["counter", "get", &counter])).await;
    assert_eq!((code, stdout.trim()), (0, total.to_string().as_str()), "{stderr}");
    assert_eq!(output(daemon.wazoo().args(["counter", "add", &counter, "-2"])).await.1.trim(), "30");
    // The same counter, read by the local path.
    assert_eq!(output(cli().args(["counter", "get", &counter])).await.1.trim(), "30");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_counter_formats_are_the_local_paths() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let base = unique("remote-counter-format");
    for (format, bytes) in [
        ("curator-shared", (-7i32).to_be_bytes().to_vec()),
        ("curator-atomic", (-7i64).to_be_bytes().to_vec()),
    ] {
        let counter = format!("{base}/{format}");
        let (code, stdout, stderr) =
            output(daemon.wazoo().args(["counter", "add", &counter, "-7", "--format", format])).await;
        assert_eq!((code, stdout.trim()), (0, "-7"), "{format}: {stderr}");
        assert_eq!(checker.get_data(&counter).await.unwrap().0, bytes, "{format}");
        // The same counter, read by the local path, and by the daemon in the wrong format.
        let (_, stdout, _) = output(cli().args(["counter", "get", &counter, "--format", format])).await;
        assert_eq!(stdout.trim(), "-7", "{format}");
        let (code, _, stderr) = output(daemon.wazoo().args(["counter", "get", &counter])).await;
        assert_ne!(code, 0, "{format} read as kazoo text");
        assert!(stderr.contains("not an integer") || stderr.contains("not text"), "{format}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_group_join_list_and_watch() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let group = format!("{}/workers", unique("remote-group"));
    let (mut member, mut lines) = start(daemon.wazoo().args([
        "group",
        "join",
        &group,
        "w1",
        "--data",
        "busy",
        "--",
        "sh",
        "-c",
        "echo joined $WAZOO_GROUP_PATH $WAZOO_MEMBER; read line",
    ]));
    assert_eq!(next_line(&mut lines, "the member runs").await, format!("joined {group} w1"));
    let (mut watch, mut watched) = start(daemon.wazoo().args(["group", "watch", &group]));
    assert_eq!(next_line(&mut watched, "the members now").await, "w1 busy");
    assert_eq!(next_line(&mut watched, "the end of the list").await, "--");
    let (code, stdout, stderr) = output(daemon.wazoo().args(["group", "list", &group])).await;
    assert_eq!((code, stdout.trim()), (0, "w1 busy"), "{stderr}");
    let (code, _, stderr) = output(daemon.wazoo().args(["group", "join", &group, "w1", "--", "true"])).await;
    assert_eq!(code, 1, "the name is taken");
    assert!(stderr.contains(&format!("group {group}: ")), "{stderr}");
    go_on(&mut member).await;
    let status = within(LIMIT, "the member's command ends", member.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0), "{}", stderr_of(&mut member).await);
    assert_eq!(next_line(&mut watched, "w1 leaves").await, "--");
    assert!(children(&checker, &group).await.is_empty(), "left when the command ended");
    assert_eq!(output(daemon.wazoo().args(["group", "list", &group])).await.1.trim(), "");
    watch.kill().await.unwrap();

    // A member whose node is deleted loses its membership: exit 4.
    let (mut member, mut lines) = start(daemon.wazoo().args([
        "group",
        "join",
        &group,
        "w2",
        "--grace",
        "5s",
        "--",
        "sh",
        "-c",
        "echo started $$; exec sleep 600",
    ]));
    let line = next_line(&mut lines, "w2 runs").await;
    let pid: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    checker.delete(&format!("{group}/w2"), None).await.unwrap();
    let status = within(LIMIT, "w2 stops", member.wait()).await.unwrap();
    let stderr = stderr_of(&mut member).await;
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(&format!("membership of {group} as w2 lost")), "{stderr}");
    assert!(!alive(pid), "the command was stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_double_barrier_of_3_processes() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("remote-double");
    let log = std::env::temp_dir().join(format!("wazoo-remote-double-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let run = |tag: &'static str| {
        let mut cmd = daemon.wazoo();
        cmd.env("LOG", &log);
        // b is the recipe in C: the daemon serves the recipe the client names.
        let recipe = if tag == "b" { "barrier-c" } else { "barrier" };
        cmd.args([
            "double-barrier",
            &path,
            "--count",
            "3",
            "--timeout",
            "30s",
            "--recipe",
            recipe,
            "--",
            "sh",
            "-c",
        ]);
        cmd.arg(format!("echo {tag} >> \"$LOG\"; echo {tag} $WAZOO_BARRIER_PATH; exit 7"));
        tokio::spawn(async move { output(&mut cmd).await })
    };
    let (a, b) = (run("a"), run("b"));
    within(LIMIT, "two enter", wait_children(&checker, &path, 2)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!log.exists(), "nobody proceeds before the third enters");
    assert!(!a.is_finished() && !b.is_finished());
    let c = run("c");
    for (tag, entrant) in [("a", a), ("b", b), ("c", c)] {
        let (code, stdout, stderr) = entrant.await.unwrap();
        assert_eq!((code, stdout.trim()), (7, format!("{tag} {path}").as_str()), "{stderr}");
    }
    let mut logged: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    logged.sort();
    assert_eq!(logged, ["a", "b", "c"]);
    let _ = std::fs::remove_file(&log);
    let (code, _, stderr) = output(daemon.wazoo().args([
        "double-barrier",
        &path,
        "--count",
        "2",
        "--timeout",
        "300ms",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(code, 3, "alone, it cannot enter: {stderr}");
    assert_eq!(stderr.trim(), format!("wazoo: fewer than 2 entered {path} within 300ms"));
    assert!(children(&checker, &path).await.is_empty(), "every participant's node is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_two_phase_commit_commits_and_aborts() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    for (b_votes, expected, code) in [("commit", "committed", 0), ("abort", "aborted", 6)] {
        let tx = unique("remote-2pc");
        let mut coordinate = daemon.wazoo();
        coordinate.args(["2pc", "coordinate", &tx, "--sites", "a,b", "--payload", "p", "--timeout", "30s"]);
        let coordinating = tokio::spawn(async move { output(&mut coordinate).await });
        within(LIMIT, "the transaction starts", wait_children(&checker, &tx, 1)).await;
        let mut a = daemon.wazoo();
        a.args(["2pc", "vote", &tx, "--site", "a", "commit", "--timeout", "30s"]);
        let a = tokio::spawn(async move { output(&mut a).await });
        let b = output(daemon.wazoo().args(["2pc", "vote", &tx, "--site", "b", b_votes, "--timeout", "30s"]))
            .await;
        assert_eq!((b.0, b.1.trim()), (code, expected), "b: {}", b.2);
        let a = a.await.unwrap();
        assert_eq!((a.0, a.1.trim()), (code, expected), "a: {}", a.2);
        let c = coordinating.await.unwrap();
        assert_eq!((c.0, c.1.trim()), (code, expected), "coordinator: {}", c.2);
        assert!(
            !children(&checker, &tx).await.iter().any(|c| c.starts_with("site-")),
            "the vote nodes went with their calls"
        );
    }
    let tx = unique("remote-2pc-none");
    let (code, _, stderr) = output(daemon.wazoo().args(["2pc", "vote", &tx, "--site", "z", "commit"])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(&format!("transaction {tx}: ")), "{stderr}");
}
