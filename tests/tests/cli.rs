//! The `wazoo` binary, run as a user runs it, against a real ZooKeeper.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// Starts `wazoo lock PATH -- sh -c 'echo started $$; exec sleep 600'` and waits for the
/// command to start; returns the child and the command's PID.
async fn hold_with_cli(path: &str, extra: &[&str]) -> (Child, u32) {
    let mut child = cli()
        .args(extra)
        .args(["lock", path, "--grace", "5s", "--", "sh", "-c", "echo started $$; exec sleep 600"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "command starts under the lock", lines.next_line()).await.unwrap().unwrap();
    let pid = line.strip_prefix("started ").expect("the command's first line").trim().parse().unwrap();
    (child, pid)
}

fn alive(pid: u32) -> bool {
    // A zombie would still have /proc/PID; wazoo reaps its child before exiting.
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

async fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = err.read_to_string(&mut text).await;
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_runs_command_under_lock_with_token_and_its_exit_status() {
    let checker = client(&zk().address()).await;
    let path = unique("cli-run");
    let (code, stdout, _) = output(cli().args([
        "lock",
        &path,
        "--",
        "sh",
        "-c",
        "echo \"$WAZOO_FENCING_TOKEN $WAZOO_LOCK_NODE\"; exit 7",
    ]))
    .await;
    assert_eq!(code, 7, "wazoo exits with the command's status");
    let mut words = stdout.split_whitespace();
    let token: i64 = words.next().unwrap().parse().expect("a numeric fencing token");
    let node = words.next().unwrap();
    assert!(token > 0);
    assert!(node.starts_with(&format!("{path}/_c_")) && node.contains("-lock-"), "Curator node name: {node}");
    assert!(children(&checker, &path).await.is_empty(), "the lock node is deleted after the command");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_timeout_exits_3_and_leaves_no_node() {
    let checker = client(&zk().address()).await;
    let path = unique("cli-timeout");
    let host = host().await;
    let mut holder = host.lock("lock").await.unwrap();
    holder.acquire(&path, None).await.unwrap();
    let (code, _, stderr) = output(cli().args(["lock", &path, "--timeout", "500ms", "--", "true"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("timed out"), "{stderr}");
    assert_eq!(children(&checker, &path).await.len(), 1, "only the holder's node remains");
    holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_stops_command_when_lock_node_is_deleted() {
    let checker = client(&zk().address()).await;
    let path = unique("cli-deleted");
    let (mut child, pid) = hold_with_cli(&path, &[]).await;
    let nodes = children(&checker, &path).await;
    assert_eq!(nodes.len(), 1);
    checker.delete(&format!("{path}/{}", nodes[0]), None).await.unwrap();
    let status = within(LIMIT, "wazoo stops after losing the lock", child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(4));
    assert!(stderr_of(&mut child).await.contains("lock node was deleted"));
    assert!(!alive(pid), "the command was stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_stops_command_when_session_expires() {
    let checker = client(&zk().address()).await;
    let path = unique("cli-expired");
    let (mut child, pid) = hold_with_cli(&path, &["--session-timeout", "1s"]).await;
    let nodes = children(&checker, &path).await;
    let node = format!("{path}/{}", nodes[0]);
    // Freeze wazoo (not its command) until the server expires its session and deletes the node.
    let wazoo_pid = child.id().unwrap() as i32;
    unsafe { libc::kill(wazoo_pid, libc::SIGSTOP) };
    within(LIMIT, "server expires the frozen session", wait_gone(&checker, &node)).await;
    assert!(alive(pid), "the command runs on while wazoo is frozen");
    unsafe { libc::kill(wazoo_pid, libc::SIGCONT) };
    let status = within(LIMIT, "wazoo stops after expiry", child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(4));
    assert!(stderr_of(&mut child).await.contains("session expired"));
    assert!(!alive(pid), "the command was stopped");
    // Someone else can take the lock now.
    let host = host().await;
    let mut contender = host.lock("lock").await.unwrap();
    assert!(contender.try_acquire(&path).await.unwrap().is_some());
    contender.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_refuses_bad_input_clearly() {
    let free = wazoo_testkit::free_port().unwrap();
    let unreachable = format!("127.0.0.1:{free}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["lock", "relative/path", "--", "true"], "must be absolute"),
        (vec!["lock", "", "--", "true"], "path is empty"),
        (vec!["lock", "/t/x/", "--", "true"], "must not end with '/'"),
        (vec!["lock", "/t/a//b", "--", "true"], "empty component"),
        (vec!["lock", "/zookeeper/quota", "--", "true"], "reserved"),
        (vec!["lock", "/t/x", "--timeout", "soon", "--", "true"], "not a duration"),
        (vec!["lock", "/t/x", "--recipe", "/nonexistent/lock.wasm", "--", "true"], "not found"),
        (
            vec!["--zookeeper", &unreachable, "--connect-timeout", "1s", "lock", "/t/x", "--", "true"],
            "cannot reach ZooKeeper",
        ),
        (vec!["run", "/nonexistent.wasm"], "not found"),
    ];
    for (args, message) in cases {
        let (code, _, stderr) = output(cli().args(&args)).await;
        assert_ne!(code, 0, "{args:?} must fail");
        assert!(stderr.contains(message), "{args:?}: stderr {stderr:?} does not say {message:?}");
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    }
    let checker = client(&zk().address()).await;
    assert!(checker.check_stat("/t/x").await.unwrap().is_none(), "bad input created nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lock_with_a_non_lock_component_is_refused() {
    let (code, _, stderr) = output(cli().args(["lock", "/t/x", "--recipe", "tree", "--", "true"])).await;
    assert_eq!(code, 70);
    assert!(
        stderr.contains("wazoo:recipes/custom") && stderr.contains("not wazoo:recipes/lock-recipe"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_runs_a_custom_recipe() {
    let checker = client(&zk().address()).await;
    let path = unique("cli-tree");
    let opts = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.mkdir(&format!("{path}/a/b"), &opts).await.unwrap();
    checker.create(&format!("{path}/a/data"), b"hello", &opts).await.unwrap();
    let (code, stdout, stderr) = output(cli().args(["run", "tree", &path])).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[0].starts_with(&path));
    assert!(lines[1].trim_start().starts_with("a "));
    assert!(lines[2].trim_start().starts_with("b "));
    assert!(lines[3].contains("data") && lines[3].contains("[5 bytes"), "{stdout}");
    let (code, _, stderr) = output(cli().args(["run", "tree", &format!("{path}/missing")])).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no such node"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_recipes_with_their_worlds() {
    let (code, stdout, _) = output(cli().args(["recipes", "list"])).await;
    assert_eq!(code, 0);
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
async fn cli_rwlock_runs_command_in_the_mode_asked() {
    let checker = client(&zk().address()).await;
    let path = unique("cli-rw");
    let (code, stdout, stderr) = output(cli().args([
        "rwlock",
        "read",
        &path,
        "--",
        "sh",
        "-c",
        "echo $WAZOO_LOCK_MODE $WAZOO_LOCK_NODE",
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let mut words = stdout.split_whitespace();
    assert_eq!(words.next(), Some("read"));
    assert!(words.next().unwrap().contains("-__READ__"), "{stdout}");
    assert!(children(&checker, &path).await.is_empty());
    let (code, _, stderr) = output(cli().args(["rwlock", "sideways", &path, "--", "true"])).await;
    assert_eq!(code, 2, "a bad mode is a usage error");
    assert!(stderr.contains("expected read or write"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_elect_runs_command_as_leader_and_leader_shows_it() {
    let path = unique("cli-elect");
    let script =
        "echo \"$WAZOO_LEADER_ID $WAZOO_FENCING_TOKEN\"; \"$WAZOO_BIN\" leader \"$WAZOO_ELECTION_PATH\"";
    let (code, stdout, stderr) = output(
        cli()
            .env("WAZOO_BIN", wazoo_bin())
            .args(["elect", &path, "--id", "node-a", "--", "sh", "-c", script]),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("node-a "), "{stdout}");
    let token = lines[0].split_whitespace().nth(1).unwrap();
    assert!(lines[1].starts_with("node-a  token ") && lines[1].contains(token), "{stdout}");
    assert!(lines[1].contains("ack: node-a running sh"), "the leader acknowledged: {stdout}");
    let (code, stdout, _) = output(cli().args(["leader", &path])).await;
    assert_eq!((code, stdout.trim()), (1, "no leader"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_barrier_set_wait_remove() {
    let path = format!("{}/gate", unique("cli-barrier"));
    assert_eq!(output(cli().args(["barrier", "set", &path])).await.1.trim(), "set");
    assert_eq!(output(cli().args(["barrier", "set", &path])).await.1.trim(), "already set");
    let (code, _, stderr) = output(cli().args(["barrier", "wait", &path, "--timeout", "300ms"])).await;
    assert_eq!(code, 3, "{stderr}");
    let waiting = cli().args(["barrier", "wait", &path]).output();
    let waiting = tokio::spawn(waiting);
    let checker = client(&zk().address()).await;
    // The waiter's exists watch is on the server before the barrier comes down.
    within(LIMIT, "the CLI waiter arms its watch", async {
        loop {
            let watches = wazoo_testkit::four_letter(zk().port, "wchp").unwrap_or_default();
            if watches.lines().any(|l| l.trim() == path) {
                break;
            }
            // Polled like a readiness probe: no event tells us another process armed a watch.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let (code, stdout, _) = output(cli().args(["barrier", "remove", &path])).await;
    assert_eq!((code, stdout.trim()), (0, "removed"));
    let out = within(LIMIT, "the CLI waiter returns", waiting).await.unwrap().unwrap();
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).trim()), (Some(0), "down"));
    assert!(checker.check_stat(&path).await.unwrap().is_none());

    // The same barrier through the C recipe, `--recipe` before or after the subcommand.
    let c = |args: &[&str]| {
        let mut c = cli();
        c.args(["barrier", "--recipe", "barrier-c"]).args(args);
        c
    };
    assert_eq!(output(&mut c(&["set", &path])).await.1.trim(), "set");
    assert_eq!(output(cli().args(["barrier", "set", &path])).await.1.trim(), "already set");
    let (code, _, stderr) = output(&mut c(&["wait", &path, "--timeout", "300ms"])).await;
    assert_eq!(code, 3, "{stderr}");
    let (code, stdout, _) = output(cli().args(["barrier", "remove", &path, "--recipe", "barrier-c"])).await;
    assert_eq!((code, stdout.trim()), (0, "removed"));
    assert_eq!(output(&mut c(&["wait", &path])).await.1.trim(), "down");
    let (code, _, stderr) = output(cli().args(["barrier", "set", &path, "--recipe", "nope"])).await;
    assert_eq!(code, 70, "{stderr}");
    assert!(stderr.contains("nope"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_semaphore_runs_command_under_a_lease() {
    let path = unique("cli-sem");
    let (code, stdout, stderr) =
        output(cli().args(["semaphore", &path, "--leases", "3", "--", "sh", "-c", "echo $WAZOO_LEASE_NODE"]))
            .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.trim().starts_with(&format!("{path}/leases/_c_")), "{stdout}");
    let (code, _, stderr) = output(cli().args(["semaphore", &path, "--leases", "0", "--", "true"])).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("0 is not in 1.."), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_queue_put_len_take() {
    let path = unique("cli-queue");
    for (data, priority) in [("later", "20"), ("sooner", "10")] {
        let (code, stdout, stderr) =
            output(cli().args(["queue", "put", &path, data, "--priority", priority])).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.starts_with(&format!("{path}/_c_")) && stdout.contains(&format!("-queue-{priority}")),
            "{stdout}"
        );
    }
    assert_eq!(output(cli().args(["queue", "len", &path])).await.1.trim(), "2");
    assert_eq!(output(cli().args(["queue", "take", &path])).await.1.trim(), "sooner");
    assert_eq!(output(cli().args(["queue", "take", &path])).await.1.trim(), "later");
    let (code, _, _) = output(cli().args(["queue", "take", &path, "--timeout", "200ms"])).await;
    assert_eq!(code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_config_counter_and_group() {
    let path = unique("cli-values");
    let value = format!("{path}/endpoint");
    assert_eq!(output(cli().args(["config", "set", &value, "a:1"])).await.1.trim(), "0");
    assert_eq!(output(cli().args(["config", "get", &value])).await.1.trim(), "a:1");
    let (code, _, stderr) = output(cli().args(["config", "set", &value, "b:2", "--version", "7"])).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no longer at version 7"), "{stderr}");
    let counter = format!("{path}/hits");
    assert_eq!(output(cli().args(["counter", "add", &counter, "5"])).await.1.trim(), "5");
    assert_eq!(output(cli().args(["counter", "add", &counter, "-2"])).await.1.trim(), "3");
    assert_eq!(output(cli().args(["counter", "get", &counter])).await.1.trim(), "3");
    let group = format!("{path}/workers");
    let list = format!("\"$WAZOO_BIN\" group list {group}");
    let (code, stdout, stderr) = output(
        cli()
            .env("WAZOO_BIN", wazoo_bin())
            .args(["group", "join", &group, "w1", "--data", "busy", "--", "sh", "-c", &list]),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "w1 busy");
    assert_eq!(
        output(cli().args(["group", "list", &group])).await.1.trim(),
        "",
        "left when the command ended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_counter_formats_store_curator_bytes_and_parse_strictly() {
    let checker = client(&zk().address()).await;
    let base = unique("cli-counter-format");
    let (shared, atomic) = (format!("{base}/shared"), format!("{base}/atomic"));
    let (code, stdout, stderr) =
        output(cli().args(["counter", "add", &shared, "-3", "--format", "curator-shared"])).await;
    assert_eq!((code, stdout.trim()), (0, "-3"), "{stderr}");
    assert_eq!(checker.get_data(&shared).await.unwrap().0, (-3i32).to_be_bytes());
    let (code, stdout, stderr) =
        output(cli().args(["counter", "add", &atomic, "9", "--format=curator-atomic"])).await;
    assert_eq!((code, stdout.trim()), (0, "9"), "{stderr}");
    assert_eq!(checker.get_data(&atomic).await.unwrap().0, 9i64.to_be_bytes());
    let (code, stdout, _) =
        output(cli().args(["counter", "get", &atomic, "--format", "curator-atomic", "--json"])).await;
    assert_eq!((code, stdout.trim()), (0, r#"{"value":9}"#));

    // Read in another format (kazoo's by default): an error, and the node is as it was.
    let (code, _, stderr) = output(cli().args(["counter", "add", &shared, "1"])).await;
    assert_eq!(code, 70, "{stderr}");
    assert!(stderr.contains("not an integer") || stderr.contains("not text"), "{stderr}");
    let (code, _, stderr) =
        output(cli().args(["counter", "get", &shared, "--format", "curator-atomic"])).await;
    assert_eq!(code, 70, "{stderr}");
    assert!(stderr.contains("is 4 bytes, not the 8"), "{stderr}");
    assert_eq!(checker.get_data(&shared).await.unwrap().0, (-3i32).to_be_bytes());
    // Past 32 bits: refused (exit status 1), the value kept.
    let (code, _, stderr) =
        output(cli().args(["counter", "add", &shared, "3000000000", "--format", "curator-shared"])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("overflow 32 bits"), "{stderr}");
    let (_, stdout, _) = output(cli().args(["counter", "get", &shared, "--format", "curator-shared"])).await;
    assert_eq!(stdout.trim(), "-3");

    for bad in ["curator", "Kazoo", "curator_shared", ""] {
        let (code, _, stderr) = output(cli().args(["counter", "get", &shared, "--format", bad])).await;
        assert_eq!(code, 2, "--format {bad:?}: {stderr}");
        assert!(stderr.contains("expected kazoo, curator-shared or curator-atomic"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_double_barrier_runs_command_between_enter_and_leave() {
    let path = unique("cli-double");
    let run = |tag: &'static str| {
        let mut cmd = cli();
        // One participant in Rust, the other in C (`--recipe barrier-c`), on one path.
        let recipe = if tag == "a" { "barrier" } else { "barrier-c" };
        cmd.args([
            "double-barrier",
            &path,
            "--count",
            "2",
            "--timeout",
            "30s",
            "--recipe",
            recipe,
            "--",
            "sh",
            "-c",
        ]);
        cmd.arg(format!("echo {tag}; exit 3"));
        tokio::spawn(async move { output(&mut cmd).await })
    };
    let (a, b) = (run("a"), run("b"));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!((a.0, a.1.trim()), (3, "a"), "{}", a.2);
    assert_eq!((b.0, b.1.trim()), (3, "b"), "{}", b.2);
    let (code, _, stderr) =
        output(cli().args(["double-barrier", &path, "--count", "2", "--timeout", "300ms", "--", "true"]))
            .await;
    assert_eq!(code, 3, "alone, it cannot enter: {stderr}");
    let checker = client(&zk().address()).await;
    assert!(children(&checker, &path).await.is_empty(), "the timed-out entrant left nothing");
    let (code, _, stderr) =
        output(cli().args(["double-barrier", &path, "--count", "1", "--recipe", "nope", "--", "true"])).await;
    assert_eq!(code, 70, "a recipe that is not there: {stderr}");
    assert!(stderr.contains("nope"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_holder_stops_and_releases_when_revoked() {
    let checker = client(&zk().address()).await;
    let path = unique("cli-revoke");
    let (mut child, pid) = hold_with_cli(&path, &[]).await;
    let node = format!("{path}/{}", children(&checker, &path).await[0]);
    let (code, stdout, stderr) = output(cli().args(["revoke", &node])).await;
    assert_eq!((code, stdout.trim()), (0, "asked"), "{stderr}");
    let status = within(LIMIT, "the holder lets go", child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(5), "revoked holders exit with 5");
    assert!(stderr_of(&mut child).await.contains("revoked"));
    assert!(!alive(pid), "the command was stopped");
    assert!(children(&checker, &path).await.is_empty(), "the holder released its node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_two_phase_commit() {
    let checker = client(&zk().address()).await;
    let tx = unique("cli-2pc");
    let mut coordinate = cli();
    coordinate.args(["2pc", "coordinate", &tx, "--sites", "a,b", "--mode", "all-to-all", "--timeout", "30s"]);
    let coordinating = tokio::spawn(async move { output(&mut coordinate).await });
    wait_children(&checker, &tx, 1).await;
    let mut a = cli();
    a.args(["2pc", "vote", &tx, "--site", "a", "commit"]);
    let a = tokio::spawn(async move { output(&mut a).await });
    let (code, stdout, stderr) = output(cli().args(["2pc", "vote", &tx, "--site", "b", "abort"])).await;
    assert_eq!((code, stdout.trim()), (6, "aborted"), "{stderr}");
    let (code, stdout, _) = a.await.unwrap();
    assert_eq!((code, stdout.trim()), (6, "aborted"));
    let (code, stdout, _) = coordinating.await.unwrap();
    assert_eq!((code, stdout.trim()), (6, "aborted"));
    let (code, _, stderr) = output(cli().args(["2pc", "vote", &tx, "--site", "z", "commit"])).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("not a site"), "{stderr}");
}
