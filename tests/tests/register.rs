//! `wazoo register` (Curator's `PersistentNode`, service discovery) and `wazoo services`: the
//! registration stays present while CMD runs, made again when deleted, its data set back when
//! changed, never taking over another session's or a persistent node; gone when CMD ends. While
//! ZooKeeper is out of reach CMD's end and signals still end it, promptly.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::procs::{self, Running};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);
/// How long wazoo may take to end once it has been told to (CMD ended, or a signal) while
/// ZooKeeper is out of reach: its cleanup is bounded well within this.
const PROMPTLY: Duration = Duration::from_secs(15);

/// A `wazoo` process's stderr, read line by line by a task of its own (so that wazoo never
/// blocks writing it), for waiting on what it says.
struct Said {
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Said {
    fn of(running: &mut Running) -> Said {
        let stderr = running.child.stderr.take().expect("stderr piped");
        let (send, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut stderr = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = stderr.next_line().await {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Said { lines, seen: Vec::new() }
    }

    /// Waits for a line containing `text`.
    async fn until(&mut self, text: &str) {
        let found = within(LIMIT, &format!("wazoo says {text:?}"), async {
            while let Some(line) = self.lines.recv().await {
                self.seen.push(line);
                if self.seen.last().unwrap().contains(text) {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(found, "wazoo ended without saying {text:?}; it said: {}", self.seen.join("\n"));
    }

    /// Everything it said, once it has ended.
    async fn all(mut self) -> String {
        while let Some(line) = within(LIMIT, "wazoo's stderr ends", self.lines.recv()).await {
            self.seen.push(line);
        }
        self.seen.join("\n")
    }
}

/// `wazoo register ARGS…` through `proxy`, with a 2 s session.
fn registrant(proxy: &Proxy, args: &[&str]) -> Running {
    let address = proxy.address();
    Running::start(cli().args(["--zookeeper", &address, "--session-timeout", "2s", "register"]).args(args))
}

/// Waits for `running` to exit, within `limit`: its status (-1 for a signal).
async fn exits(running: &mut Running, limit: Duration, what: &str) -> i32 {
    let status = within(limit, what, running.child.wait()).await.unwrap();
    status.code().unwrap_or(-1)
}

/// Waits, by watching it, until `path` exists holding `data`.
async fn wait_data(checker: &zookeeper_client::Client, path: &str, data: &[u8]) -> zookeeper_client::Stat {
    loop {
        match checker.get_and_watch_data(path).await {
            Ok((now, stat, watcher)) => {
                if now == data {
                    return stat;
                }
                watcher.changed().await;
            }
            Err(zookeeper_client::Error::NoNode) => {
                let (stat, watcher) = checker.check_and_watch_stat(path).await.unwrap();
                if stat.is_none() {
                    watcher.changed().await;
                }
            }
            Err(e) => panic!("watching {path}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_heals_while_its_command_runs_and_goes_when_it_ends() {
    let checker = client(&zk().address()).await;
    let dir = unique("register");
    let node = format!("{dir}/host1");
    let mut registrant = cli()
        .args(["register", &node, "--data", r#"{"port":8080}"#, "--", "sh", "-c"])
        .arg("echo \"up $WAZOO_REGISTERED_PATH\"; read line; echo done")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(registrant.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "the command starts", lines.next_line()).await.unwrap().unwrap();
    assert_eq!(line, format!("up {node}"));
    let stat = checker.check_stat(&node).await.unwrap().expect("registered");
    assert_ne!(stat.ephemeral_owner, 0, "an ephemeral node");

    // Listed by `wazoo services`.
    let (code, stdout, _) = output(cli().args(["services", &dir])).await;
    assert_eq!((code, stdout.as_str()), (0, "host1 {\"port\":8080}\n"));

    // Its data changed by someone: set back.
    checker.set_data(&node, b"tampered", None).await.unwrap();
    within(LIMIT, "the data is set back", wait_data(&checker, &node, br#"{"port":8080}"#)).await;

    // Deleted by someone: made again, by the same session.
    checker.delete(&node, None).await.unwrap();
    let again =
        within(LIMIT, "the node is made again", wait_data(&checker, &node, br#"{"port":8080}"#)).await;
    assert_eq!(again.ephemeral_owner, stat.ephemeral_owner);
    assert!(again.czxid > stat.czxid, "a new node");

    // The command ends: its status, the node gone.
    use tokio::io::AsyncWriteExt;
    registrant.stdin.take().unwrap().write_all(b"\n").await.unwrap();
    assert_eq!(within(LIMIT, "the command ends", lines.next_line()).await.unwrap().unwrap(), "done");
    let status = within(LIMIT, "wazoo ends", registrant.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "unregistered");
    let (code, _, stderr) = output(cli().args(["services", &dir])).await;
    assert_eq!(code, 1, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_registration_is_a_ttl_node_and_anothers_registration_is_never_taken() {
    let checker = client(&zk().address()).await;
    let dir = unique("register-ttl");
    let node = format!("{dir}/host1");
    let (code, stdout, stderr) = output(cli().args([
        "register",
        &node,
        "--data",
        "ttl",
        "--ttl",
        "1s",
        "--",
        "sh",
        "-c",
        "sleep 2 & wait; echo $WAZOO_REGISTERED_DATA",
    ]))
    .await;
    // It lived through more than its TTL (touched by its tending), then went with the command.
    assert_eq!((code, stdout.as_str()), (0, "ttl\n"), "{stderr}");
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "unregistered");

    // Held by another session: refused (exit status 3), left alone.
    let other = client(&zk().address()).await;
    other
        .create(
            &dir,
            b"",
            &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .ok();
    other
        .create(
            &node,
            b"theirs",
            &zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let (code, _, stderr) = output(cli().args(["register", &node, "--data", "mine", "--", "true"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("another session"), "{stderr}");
    assert_eq!(checker.get_data(&node).await.unwrap().0, b"theirs");

    // Bad settings are usage errors.
    for args in
        [vec!["register", "no-slash", "--data", "x"], vec!["register", &node, "--data", "x", "--ttl", "soon"]]
    {
        let (code, _, stderr) = output(cli().args(&args)).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_is_made_again_in_a_new_session_after_its_session_expired() {
    let checker = client(&zk().address()).await;
    let node = format!("{}/host1", unique("register-expiry"));
    let proxy = wazoo_tests::proxy::Proxy::start(&zk().address()).await;
    let mut registrant = cli()
        .env("WAZOO_ZOOKEEPER", proxy.address())
        .env("WAZOO_SESSION_TIMEOUT", "2s")
        .args(["register", &node, "--data", "d", "--", "sh", "-c"])
        .arg("echo up; read line; echo done")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(registrant.stdout.take().unwrap()).lines();
    let mut said = BufReader::new(registrant.stderr.take().unwrap()).lines();
    assert_eq!(within(LIMIT, "the command starts", lines.next_line()).await.unwrap().unwrap(), "up");
    let first = checker.check_stat(&node).await.unwrap().expect("registered");

    // Silenced until ZooKeeper expires its session, which deletes the ephemeral node.
    proxy.freeze();
    within(LIMIT, "the session expires", wait_gone(&checker, &node)).await;
    proxy.thaw();

    // Made again, by a new session, while the command runs on.
    let again = within(LIMIT, "the node is made again", wait_data(&checker, &node, b"d")).await;
    assert_ne!(again.ephemeral_owner, first.ephemeral_owner, "a new session's node");
    assert_ne!(again.ephemeral_owner, 0);
    // And says so once its registering again has returned (the node shows a moment before).
    within(LIMIT, "wazoo says it registered again", async {
        let mut stderr = String::new();
        while let Some(line) = said.next_line().await.unwrap() {
            if line.contains("registered again") {
                return;
            }
            stderr.push_str(&line);
            stderr.push('\n');
        }
        panic!("wazoo's stderr ended without saying it registered again: {stderr}");
    })
    .await;

    use tokio::io::AsyncWriteExt;
    registrant.stdin.take().unwrap().write_all(b"\n").await.unwrap();
    assert_eq!(within(LIMIT, "the command ends", lines.next_line()).await.unwrap().unwrap(), "done");
    let status = within(LIMIT, "wazoo ends", registrant.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "unregistered");
}

/// While its session was away (ZooKeeper expired it) the path became another session's
/// registration, or a persistent node: registering again finds it so, and that is the end, as a
/// `tend` finding it would be: CMD stopped, exit status 4 (`--lost-exit-code`), what is there left
/// alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_taken_while_the_session_was_away_stops_the_command_and_exits_lost() {
    let checker = client(&zk().address()).await;
    let dir = unique("register-taken");
    let (taken, persistent) = (format!("{dir}/a"), format!("{dir}/p"));
    let proxy = Proxy::start(&zk().address()).await;
    let forks = procs::forks();
    let mut a = registrant(&proxy, &[&taken, "--data", r#"{"me":"A"}"#, "--", "sh", "-c", &forks]);
    let mut p = registrant(&proxy, &[&persistent, "--data", r#"{"me":"P"}"#, "--", "sh", "-c", &forks]);
    let (a_cmd, p_cmd) = (a.pids().await, p.pids().await);
    let (a_said, p_said) = (Said::of(&mut a), Said::of(&mut p));

    // Silenced until ZooKeeper expires their session, which deletes their ephemeral nodes.
    proxy.freeze();
    within(LIMIT, "A's session expires", wait_gone(&checker, &taken)).await;
    within(LIMIT, "P's session expires", wait_gone(&checker, &persistent)).await;
    // Meanwhile another session registers at the one path, and a persistent node is made at
    // the other.
    let other = client(&zk().address()).await;
    let mode = |mode: zookeeper_client::CreateMode| mode.with_acls(zookeeper_client::Acls::anyone_all());
    other.create(&taken, br#"{"me":"B"}"#, &mode(zookeeper_client::CreateMode::Ephemeral)).await.unwrap();
    other.create(&persistent, b"plain", &mode(zookeeper_client::CreateMode::Persistent)).await.unwrap();
    proxy.thaw();

    let code = exits(&mut a, LIMIT, "A ends").await;
    let said = a_said.all().await;
    assert_eq!(code, 4, "{said}");
    assert!(
        said.contains(&format!("wazoo: another session registered {taken}; stopping the command")),
        "{said}"
    );
    a_cmd.assert_gone("A's registration taken");
    let code = exits(&mut p, LIMIT, "P ends").await;
    let said = p_said.all().await;
    assert_eq!(code, 4, "{said}");
    let refused = format!("wazoo: {persistent} is a persistent node, not a registration");
    assert!(said.contains(&refused), "{said}");
    p_cmd.assert_gone("P's path made a persistent node");

    // What is there is left as it was.
    let (data, stat) = checker.get_data(&taken).await.unwrap();
    assert_eq!((data.as_slice(), stat.ephemeral_owner), (br#"{"me":"B"}"#.as_slice(), other.session_id().0));
    let (data, stat) = checker.get_data(&persistent).await.unwrap();
    assert_eq!((data.as_slice(), stat.ephemeral_owner), (b"plain".as_slice(), 0));
}

/// ZooKeeper out of reach, wazoo registering again: CMD's end still ends wazoo, at once, with
/// CMD's status, and the cleanup of a TTL registration (a fresh instance that cannot reach
/// ZooKeeper) is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_ending_while_zookeeper_is_out_of_reach_ends_wazoo_with_its_status() {
    let dir = unique("register-out-of-reach");
    let proxy = Proxy::start(&zk().address()).await;
    // The command: a shell whose child reads a line; then it exits 7.
    let cmd = "echo up; head -n 1 >/dev/null; exit 7";
    let mut plain = registrant(&proxy, &[&format!("{dir}/plain"), "--data", "x", "--", "sh", "-c", cmd]);
    // A TTL registration, with a connect timeout far longer than its cleanup may take.
    let mut ttl = registrant(
        &proxy,
        &[
            &format!("{dir}/ttl"),
            "--data",
            "y",
            "--ttl",
            "3s",
            "--connect-timeout",
            "60s",
            "--",
            "sh",
            "-c",
            cmd,
        ],
    );
    assert_eq!(plain.line("the command starts").await, "up");
    assert_eq!(ttl.line("the command starts").await, "up");
    let (mut plain_said, mut ttl_said) = (Said::of(&mut plain), Said::of(&mut ttl));

    // No ZooKeeper within reach: the proxy gone, its port closed.
    drop(proxy);
    plain_said.until("registering again").await;
    ttl_said.until("registering again").await;

    // The commands end while wazoo cannot register: it ends with their status.
    plain.go_on().await;
    ttl.go_on().await;
    let since = Instant::now();
    let code = exits(&mut plain, PROMPTLY, "wazoo ends with its command").await;
    assert_eq!(code, 7, "{}", plain_said.all().await);
    let code = exits(&mut ttl, PROMPTLY, "wazoo with a TTL registration ends with its command").await;
    let took = since.elapsed();
    let said = ttl_said.all().await;
    assert_eq!(code, 7, "{said}");
    assert!(took < Duration::from_secs(10), "the cleanup took {took:?}: {said}");
}

/// ZooKeeper out of reach, wazoo registering again: SIGTERM goes to CMD, which ends, and wazoo
/// with it (CMD's status); without CMD, SIGTERM ends wazoo with 128 + 15, as before the first
/// registration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_zookeeper_is_out_of_reach_stops_the_command_and_ends_wazoo() {
    let dir = unique("register-sigterm");
    let proxy = Proxy::start(&zk().address()).await;
    let (with_cmd, without_cmd) = (format!("{dir}/cmd"), format!("{dir}/none"));
    let mut running = registrant(&proxy, &[&with_cmd, "--data", "x", "--", "sh", "-c", &procs::forks()]);
    let cmd = running.pids().await;
    let mut alone = registrant(&proxy, &[&without_cmd, "--data", "y"]);
    assert_eq!(alone.line("registered").await, format!("registered {without_cmd}"));
    let (mut running_said, mut alone_said) = (Said::of(&mut running), Said::of(&mut alone));

    drop(proxy);
    running_said.until("registering again").await;
    alone_said.until("registering again").await;

    running.signal(libc::SIGTERM);
    alone.signal(libc::SIGTERM);
    let code = exits(&mut running, PROMPTLY, "wazoo ends after SIGTERM").await;
    let said = running_said.all().await;
    if !cmd.gone() {
        cmd.kill();
        panic!("the command survived SIGTERM: {said}");
    }
    assert_eq!(code, 128 + libc::SIGTERM, "{said}");
    let code = exits(&mut alone, PROMPTLY, "wazoo without a command ends after SIGTERM").await;
    let said = alone_said.all().await;
    assert_eq!(code, 128 + libc::SIGTERM, "{said}");
    assert!(said.contains(&format!("wazoo: SIGTERM before {without_cmd} was registered again")), "{said}");
}

/// A persistent node at the path is no registration: refused with a definite no (exit status
/// 1) saying what it is, and left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_node_at_the_path_is_refused_as_no_registration() {
    let checker = client(&zk().address()).await;
    let dir = unique("register-persistent");
    let node = format!("{dir}/a");
    let mode = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.create("/t", b"", &mode).await.ok();
    checker.create(&dir, b"", &mode).await.unwrap();
    checker.create(&node, b"plain", &mode).await.unwrap();
    let (code, stdout, stderr) =
        output(cli().args(["register", &node, "--data", "mine", "--", "echo", "ran"])).await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        format!("wazoo: {node} is a persistent node, not a registration (delete it or register elsewhere)\n")
    );
    assert_eq!(stdout, "", "the command ran");
    let (data, stat) = checker.get_data(&node).await.unwrap();
    assert_eq!((data.as_slice(), stat.ephemeral_owner), (b"plain".as_slice(), 0));
}

/// A TTL shorter than a second is refused before anything is asked: a usage error (exit
/// status 2), one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_under_a_second_is_a_usage_error() {
    let checker = client(&zk().address()).await;
    let node = format!("{}/a", unique("register-short-ttl"));
    for ttl in ["1ms", "999ms"] {
        let (code, stdout, stderr) =
            output(cli().args(["register", &node, "--data", "x", "--ttl", ttl, "--", "echo", "ran"])).await;
        assert_eq!((code, stdout.as_str()), (2, ""), "--ttl {ttl}: {stderr}");
        assert_eq!(stderr, format!("wazoo: --ttl {ttl}: a TTL is at least 1s\n"), "--ttl {ttl}");
        assert!(checker.check_stat(&node).await.unwrap().is_none(), "--ttl {ttl}: registered");
    }
}

/// Two clients of one daemon share its ZooKeeper session, so the node's owner cannot tell them
/// apart: the second to register a path is refused all the same (exit 3), and the first keeps
/// it with its own data, never set back and forth between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_of_one_daemon_never_share_a_registration() {
    let daemon = wazoo_tests::daemon::Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    let checker = client(&zk().address()).await;
    let node = format!("{}/svc", unique("register-daemon"));
    let mut first = Running::start(
        daemon
            .wazoo()
            .args(["register", &node, "--data", "first", "--", "sh", "-c"])
            .arg("echo up; exec sleep 30"),
    );
    assert_eq!(first.line("the first registers").await, "up");
    let (code, stdout, stderr) =
        output(daemon.wazoo().args(["register", &node, "--data", "second", "--", "echo", "ran"])).await;
    assert_eq!((code, stdout.as_str()), (3, ""), "{stderr}");
    assert!(stderr.contains("another session's registration"), "{stderr}");
    let (data, stat) = checker.get_data(&node).await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"first"[..], 0), "the first's, never set since");
    first.signal(libc::SIGTERM);
    assert_eq!(first.exit().await.0, 143);
    within(LIMIT, "the registration goes with its command", wait_gone(&checker, &node)).await;
}
