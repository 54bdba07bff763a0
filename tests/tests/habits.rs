//! What users of flock, etcdctl and kazoo expect of the command line, against a real ZooKeeper:
//!
//! - `lock PATH CMD ARGS…` runs CMD (with or without `--`), as flock and etcdctl do; more locks
//!   are named with `--also PATH`, and every claim command reads its CMD the same way;
//! - `semaphore -n` refuses only when every lease is held, also when the contenders arrive
//!   together;
//! - `config delete` (locally and through a daemon), `zk rm` (another's claim node only with
//!   `--force`), `config get --prefix`,
//!   values from stdin (`-`) and values that start with `-`, one watch format;
//! - a line on stderr after a second of waiting (none with `-q`), log lines without colour
//!   unless stderr is a terminal (and `NO_COLOR` unset), a hint between `serve` and `server`;
//! - `--help` lists the command's own options first and ends with the exit statuses, the
//!   environment and examples, the manual pages have the same sections, and `--version` names
//!   the WIT packages and the commit.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::procs::{through, Running};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flock_style_lock_runs_an_absolute_command_and_takes_one_lock() {
    let checker = client(&zk().address()).await;
    let path = unique("habits-flock");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("touched");
    let file = file.to_str().unwrap();
    let (code, stdout, stderr) = output(cli().args(["lock", &path, "/usr/bin/touch", file])).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(std::path::Path::new(file).exists(), "CMD ran: {stderr}");
    // One child of PATH was made and deleted (a cversion of 2), and nothing was made at the
    // command's path or the file's.
    let stat = checker.check_stat(&path).await.unwrap().expect("the lock's directory");
    assert_eq!(stat.cversion, 2, "one lock node at {path}");
    for not_a_lock in ["/usr", file] {
        assert!(checker.check_stat(not_a_lock).await.unwrap().is_none(), "{not_a_lock} became a lock");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_locks_are_named_with_also_and_a_path_after_path_is_a_command() {
    let checker = client(&zk().address()).await;
    let (a, b) = (unique("habits-also-a"), unique("habits-also-b"));
    let (code, stdout, stderr) = output(cli().args([
        "lock",
        &a,
        "--also",
        &b,
        "sh",
        "-c",
        "echo $WAZOO_LOCK_COUNT $WAZOO_LOCK_PATH_1 $WAZOO_LOCK_PATH_2",
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let mut sorted = [a.clone(), b.clone()];
    sorted.sort();
    assert_eq!(stdout.trim(), format!("2 {} {}", sorted[0], sorted[1]));
    // The old syntax (a second path where CMD goes) is refused before any lock is taken.
    let second = unique("habits-also-c");
    let (code, _, stderr) = output(cli().args(["lock", &a, &second])).await;
    assert_eq!(code, 127, "{stderr}");
    assert!(stderr.contains("not found") && stderr.contains("--also"), "{stderr}");
    assert!(checker.check_stat(&second).await.unwrap().is_none(), "{second} became a lock");
    assert_eq!(checker.check_stat(&a).await.unwrap().unwrap().cversion, 2, "no lock was taken at {a}");
    // A CMD that is there but cannot run.
    let (code, _, stderr) = output(cli().args(["lock", &a, "/tmp"])).await;
    assert_eq!(code, 126, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_claim_command_reads_cmd_after_its_arguments_with_or_without_dashes() {
    let cmd = ["sh", "-c", "echo ran \"$1\"", "sh", "-x"];
    let commands: Vec<Vec<String>> = vec![
        vec!["lock".into(), unique("habits-every")],
        vec!["rwlock".into(), "read".into(), unique("habits-every")],
        vec!["semaphore".into(), unique("habits-every"), "--leases".into(), "2".into()],
        vec!["elect".into(), unique("habits-every"), "--id".into(), "me".into()],
        vec!["group".into(), "join".into(), unique("habits-every"), "me".into()],
        vec!["register".into(), format!("{}/me", unique("habits-every")), "--data".into(), "d".into()],
        vec!["double-barrier".into(), unique("habits-every"), "--count".into(), "1".into()],
    ];
    for args in commands {
        for dashes in [&[][..], &["--"][..]] {
            let (code, stdout, stderr) = output(cli().args(&args).args(dashes).args(cmd)).await;
            assert_eq!((code, stdout.trim()), (0, "ran -x"), "{args:?} {dashes:?}: {stderr}");
        }
    }
}

/// The semaphore recipe's try, as `semaphore -n` makes it: three handles try together, a
/// barrier between them, six rounds; every try gets a lease (and all three hold at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn semaphore_tries_arriving_together_all_get_a_free_lease() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("habits-sem-try");
    let arrive = Arc::new(tokio::sync::Barrier::new(3));
    let all_hold = Arc::new(tokio::sync::Barrier::new(3));
    let mut contenders = Vec::new();
    for _ in 0..3 {
        let (host, path, arrive, all_hold) = (host.clone(), path.clone(), arrive.clone(), all_hold.clone());
        contenders.push(tokio::spawn(async move {
            let mut handle = host.semaphore("semaphore").await.unwrap();
            for round in 0..6 {
                arrive.wait().await;
                let got = handle.acquire(&path, 3, Some(Duration::ZERO)).await;
                assert!(got.is_ok(), "round {round}: refused with 3 leases for 3: {got:?}");
                all_hold.wait().await;
                handle.release().await.unwrap();
            }
        }));
    }
    within(LIMIT, "3 contenders × 6 rounds", async {
        for c in contenders {
            c.await.unwrap();
        }
    })
    .await;
    // The last releases are sent without waiting for ZooKeeper's answer: their nodes go a moment
    // later, and then none is left.
    within(LIMIT, "no lease left behind", wait_children(&checker, &format!("{path}/leases"), 0)).await;
    within(LIMIT, "no mutex node left behind", wait_children(&checker, &format!("{path}/locks"), 0)).await;
}

/// `semaphore -n` with the semaphore full is refused at once, even while a waiter holds the
/// semaphore's mutex for as long as the leases stay taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_no_wait_is_refused_when_every_lease_is_held() {
    let checker = client(&zk().address()).await;
    let path = unique("habits-sem-full");
    let mut holder = Running::start(cli().args(["semaphore", &path, "--leases", "1"]));
    assert!(holder.line("the lease is held").await.starts_with("held "));
    let mut waiter = Running::start(cli().args(["semaphore", &path, "--leases", "1", "-q", "true"]));
    // The waiter holds the mutex, its lease node beside the holder's.
    wait_children(&checker, &format!("{path}/leases"), 2).await;
    let (code, _, stderr) = output(cli().args(["semaphore", "-n", &path, "--leases", "1", "true"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("no lease of"), "{stderr}");
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.exit().await.0, 0);
    assert_eq!(waiter.exit().await.0, 0);
}

/// Three `wazoo semaphore -n` processes with 3 leases, six rounds, each round's three started
/// together by a double barrier (each enters, and runs `semaphore -n` once all three are in):
/// every one runs its command.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn semaphore_no_wait_runs_three_contenders_released_together() {
    let path = unique("habits-sem-cli");
    let dir = tempfile::tempdir().unwrap();
    let wazoo = wazoo_bin();
    for round in 0..6 {
        let gate = unique("habits-sem-gate");
        let mut contenders = Vec::new();
        for who in 0..3 {
            let ran = dir.path().join(format!("{round}-{who}"));
            let mut contender = cli();
            contender.args(["double-barrier", &gate, "--count", "3"]).arg(&wazoo).args([
                "semaphore",
                "-n",
                &path,
                "--leases",
                "3",
                "touch",
                ran.to_str().unwrap(),
            ]);
            contenders.push((ran, tokio::spawn(async move { output(&mut contender).await })));
        }
        for (ran, contender) in contenders {
            let (code, stdout, stderr) = contender.await.unwrap();
            assert_eq!(code, 0, "round {round}: {stdout}{stderr}");
            assert!(ran.exists(), "round {round}: {} did not run", ran.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_and_zk_fit_etcdctl_habits() {
    let checker = client(&zk().address()).await;
    let dir = unique("habits-config");
    let (n, motd) = (format!("{dir}/n"), format!("{dir}/sub/motd"));
    // A negative value, and a value from stdin.
    let (code, _, stderr) = output(cli().args(["config", "set", &n, "-5"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(output(cli().args(["config", "get", &n])).await.1, "-5\n");
    let mut from_stdin = cli()
        .args(["config", "set", &motd, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = from_stdin.stdin.take().unwrap();
        stdin.write_all(b"line one\nline two").await.unwrap();
    }
    assert!(from_stdin.wait().await.unwrap().success());
    let (data, _) = checker.get_data(&motd).await.unwrap();
    assert_eq!(data, b"line one\nline two");
    assert_eq!(output(cli().args(["counter", "add", &format!("{dir}/k"), "-1"])).await.1, "-1\n");
    // Every value at and below a prefix, on one line each.
    let (code, stdout, stderr) = output(cli().args(["config", "get", "--prefix", &dir])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!("{dir}/k -1\n{dir}/n -5\n{dir}/sub/motd line one\\nline two\n"),
        "parents first, siblings by name, directories left out"
    );
    assert_eq!(output(cli().args(["config", "get", "--prefix", &format!("{dir}/none")])).await.0, 1);
    // Deleted, once.
    let (code, stdout, _) = output(cli().args(["config", "delete", &n])).await;
    assert_eq!((code, stdout.trim()), (0, format!("deleted {n}").as_str()));
    let (code, _, stderr) = output(cli().args(["config", "delete", &n])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no value at"), "{stderr}");
    let (code, _, _) = output(cli().args(["config", "delete", &motd, "--version", "7"])).await;
    assert_eq!(code, 1, "not at version 7");
    let (code, _, _) = output(cli().args(["zk", "rm", &format!("{dir}/k")])).await;
    assert_eq!(code, 0, "a persistent node is deleted");
}

/// `config delete` through a daemon answers as it does locally: deleted once, then nothing
/// there (1); another version (1); children (1); someone's claim node refused (2), kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_delete_through_a_daemon_answers_as_locally() {
    let daemon = wazoo_tests::daemon::Daemon::start(&plugins(), &wazoo_tests::daemon::cache()).await;
    let checker = client(&zk().address()).await;
    let dir = unique("habits-remote-delete");
    let value = format!("{dir}/v");
    assert_eq!(output(through(&daemon).args(["config", "set", &value, "1"])).await.0, 0);
    let (code, _, stderr) =
        output(through(&daemon).args(["config", "delete", &value, "--version", "3"])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no longer at version 3"), "{stderr}");
    let (code, stdout, stderr) = output(through(&daemon).args(["config", "delete", &value, "--json"])).await;
    assert_eq!(
        (code, stdout.as_str()),
        (0, format!("{{\"deleted\":true,\"path\":\"{value}\"}}\n").as_str()),
        "{stderr}"
    );
    assert_eq!(checker.check_stat(&value).await.unwrap(), None, "deleted in ZooKeeper");
    let (code, _, stderr) = output(through(&daemon).args(["config", "delete", &value])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no value at"), "{stderr}");
    assert_eq!(output(through(&daemon).args(["config", "set", &format!("{dir}/sub/w"), "2"])).await.0, 0);
    let (code, _, stderr) = output(through(&daemon).args(["config", "delete", &format!("{dir}/sub")])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("has children"), "{stderr}");
    let mut holder = Running::start(cli().args(["lock", &format!("{dir}/lock")]));
    let node = holder.line("the lock is held").await.split_whitespace().nth(1).unwrap().to_string();
    let (code, _, stderr) = output(through(&daemon).args(["config", "delete", &node])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ephemeral"), "{stderr}");
    assert!(checker.check_stat(&node).await.unwrap().is_some(), "the claim node is kept");
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.exit().await.0, 0, "the holder let go as asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_rm_refuses_anothers_claim_node_unless_forced_or_its_own() {
    let path = unique("habits-rm");
    let mut holder = Running::start(cli().args(["lock", &path]));
    let line = holder.line("the lock is held").await;
    let node = line.split_whitespace().nth(1).unwrap().to_string();
    let (code, _, stderr) = output(cli().args(["zk", "rm", &node])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("ephemeral") && stderr.contains("--force") && stderr.contains("revoke"),
        "{stderr}"
    );
    // The lock's own command may delete its node (release it early): the lock is then lost.
    let (code, stdout, stderr) = output(
        cli()
            .args([
                "lock",
                &unique("habits-rm-own"),
                "sh",
                "-c",
                "\"$WAZOO\" zk rm \"$WAZOO_LOCK_NODE\" && sleep 30",
            ])
            .env("WAZOO", wazoo_bin()),
    )
    .await;
    assert_eq!(code, 4, "deleting its own node loses the lock: {stdout}{stderr}");
    // (`deleted NODE` may not be printed: the loss stops the command's group at once.)
    assert!(stderr.contains("lock node was deleted"), "{stdout}{stderr}");
    // `config delete` refuses it as `zk rm` does: a config value is never someone's claim.
    let (code, _, stderr) = output(cli().args(["config", "delete", &node])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ephemeral"), "{stderr}");
    let (code, _, stderr) = output(cli().args(["zk", "rm", "--force", &node])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(holder.exit().await.0, 4, "the holder lost its lock");
}

/// A first word after PATH that starts with `-` and is no option of wazoo's is a usage error,
/// not a CMD (a typo, or flock's `-w`), and nothing is claimed; after `--` it is CMD. A script
/// whose interpreter is missing exits 127, as a shell says it, and leaves no node.
#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_option_after_the_path_is_bad_usage_not_a_command() {
    let checker = client(&zk().address()).await;
    let path = unique("habits-unknown");
    for typo in [["--tmeout", "5s"], ["-w", "5"]] {
        let (code, _, stderr) = output(cli().args(["lock", &path]).args(typo).args(["true"])).await;
        assert_eq!(code, 2, "{typo:?}: {stderr}");
        assert!(stderr.contains("unknown option") && stderr.contains("--"), "{stderr}");
    }
    assert_eq!(checker.check_stat(&path).await.unwrap(), None, "nothing claimed");
    // After `--`, a program named `-x` is CMD (and not found).
    let (code, _, stderr) = output(cli().args(["lock", &path, "--", "-x"])).await;
    assert_eq!(code, 127, "{stderr}");
    let script = std::env::temp_dir().join(format!("wazoo-habits-interp-{}", std::process::id()));
    std::fs::write(&script, "#!/nonexistent/interpreter\ntrue\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, _, stderr) = output(cli().args(["lock", &path]).arg(&script)).await;
    assert_eq!(code, 127, "{stderr}");
    assert!(stderr.contains("interpreter"), "{stderr}");
    wait_children(&checker, &path, 0).await;
    let _ = std::fs::remove_file(&script);
}

/// Lines that could be misread are refused before anything is tried: a malformed address
/// (given as an option or in WAZOO_*, empty included), a `--` with nothing after it, and the
/// old `register PATH DATA` form, which gets a hint where DATA goes now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_addresses_an_empty_cmd_after_dashes_and_the_old_register_form_are_refused() {
    let checker = client(&zk().address()).await;
    let path = unique("habits-refused");
    let lock = ["lock", path.as_str(), "--", "true"];
    for (option, value) in [
        ("--zookeeper", "host:notaport"),
        ("--zookeeper", ""),
        ("--zookeeper", "a:2181,,b:2181"),
        ("--server", ""),
        ("--server", "127.0.0.1"),
        ("--server", "a:7181,"),
    ] {
        let (code, _, stderr) = output(cli().args([option, value]).args(lock)).await;
        assert_eq!(code, 2, "{option} {value:?}: {stderr}");
        assert!(stderr.starts_with(&format!("error: invalid value '{value}' for '{option}")), "{stderr}");
    }
    for (variable, value) in [("WAZOO_ZOOKEEPER", ""), ("WAZOO_SERVER", ""), ("WAZOO_SERVER", "x:y")] {
        let (code, _, stderr) = output(cli().env(variable, value).args(lock)).await;
        assert_eq!(code, 2, "{variable}={value:?}: {stderr}");
        assert!(stderr.contains(variable), "the variable is named: {stderr}");
    }
    let (code, _, stderr) = output(cli().args(["lock", &path, "--"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nothing after `--`"), "{stderr}");
    let (code, _, stderr) = output(cli().args(["register", &path, "some-data"])).await;
    assert_eq!(code, 127, "{stderr}");
    assert!(stderr.contains("--data some-data"), "{stderr}");
    assert_eq!(checker.check_stat(&path).await.unwrap(), None, "nothing claimed or registered");
}

/// `holders` on a path it cannot read as one kind of claim is bad usage that asks for the
/// kind, never "nobody holds" (exit 1), which a monitoring script would take for a free lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_that_cannot_tell_the_kind_ask_for_it() {
    let checker = client(&zk().address()).await;
    let path = unique("habits-holders");
    let mut holder = Running::start(cli().args(["lock", &path]));
    holder.line("the lock is held").await;
    let open = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.create(&format!("{path}/child"), b"", &open).await.unwrap();
    let (code, _, stderr) = output(cli().args(["holders", &path])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("pass the kind"), "{stderr}");
    let (code, stdout, stderr) = output(cli().args(["holders", &path, "--kind", "lock"])).await;
    assert_eq!((code, stdout.lines().count()), (0, 1), "the holder, with the kind given: {stderr}");
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.exit().await.0, 0);
    // A held semaphore asked about as a lock: the kind is wrong, not the semaphore free.
    let semaphore = unique("habits-holders-sem");
    let mut lessee = Running::start(cli().args(["semaphore", "--leases", "1", &semaphore]));
    lessee.line("the lease is held").await;
    let (code, _, stderr) = output(cli().args(["holders", &semaphore, "--kind", "lock"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is a semaphore") && stderr.contains("--kind semaphore"), "{stderr}");
    lessee.signal(libc::SIGTERM);
    assert_eq!(lessee.exit().await.0, 0);
}

/// A `--grace` that gives up the bound on a lost claim's CMD is said, and the command goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_above_a_third_of_the_session_timeout_is_warned_of() {
    let path = unique("habits-grace");
    let (code, _, stderr) = output(cli().args(["lock", "--grace", "1h", &path, "true"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: --grace 1h"), "{stderr}");
    let (code, _, stderr) = output(cli().args(["lock", "--grace", "1s", &path, "true"])).await;
    assert_eq!((code, stderr.as_str()), (0, ""), "a short grace is not warned of");
}

/// `services` and `group list` print a member's data on its one line: a trailing newline (from
/// `echo … | --data -`) is `\n`, not a blank line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_data_stays_on_its_line() {
    let checker = client(&zk().address()).await;
    let dir = unique("habits-listed");
    let mut registrant = cli()
        .args(["register", &format!("{dir}/host1"), "--data", "-", "--", "sleep", "30"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = registrant.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"{\"port\":1}\n").await.unwrap();
    drop(stdin);
    wait_children(&checker, &dir, 1).await;
    let (code, stdout, stderr) = output(cli().args(["services", &dir])).await;
    assert_eq!((code, stdout.as_str()), (0, "host1 {\"port\":1}\\n\n"), "{stderr}");
    registrant.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_watch_prints_what_watch_prints() {
    let path = unique("habits-watch");
    let mut watch = Running::start(cli().args(["config", "watch", &path]));
    let mut err = BufReader::new(watch.child.stderr.take().unwrap()).lines();
    let ready = within(LIMIT, "the watch starts", err.next_line()).await.unwrap().unwrap();
    assert!(ready.contains("no value there"), "{ready}");
    output(cli().args(["config", "set", &path, "a b"])).await;
    assert_eq!(watch.line("created").await, format!("created {path} 0 a b"));
    output(cli().args(["config", "set", &path, "c"])).await;
    assert_eq!(watch.line("changed").await, format!("changed {path} 1 c"));
    output(cli().args(["config", "delete", &path])).await;
    assert_eq!(watch.line("deleted").await, format!("deleted {path}"));
    watch.signal(libc::SIGTERM);
    watch.child.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_is_said_after_a_second_unless_quiet() {
    let checker = client(&zk().address()).await;
    let path = unique("habits-wait");
    let mut holder = Running::start(cli().args(["lock", "--id", "deployer-1", &path]));
    holder.line("the lock is held").await;
    let mut quiet = Running::start(cli().args(["lock", "-q", &path, "true"]));
    wait_children(&checker, &path, 2).await;
    let mut noisy = Running::start(cli().args(["lock", &path, "true"]));
    let mut said = BufReader::new(noisy.child.stderr.take().unwrap()).lines();
    let line = within(LIMIT, "the wait is said", said.next_line()).await.unwrap().unwrap();
    // Who holds it: its --id, its session and its token.
    let held_by = format!("wazoo: waiting for the lock at {path} held by deployer-1 (session 0x");
    assert!(line.starts_with(&held_by), "{line}");
    // Giving up is said too, unless -q (the exit status says it, as flock's does).
    let (code, _, stderr) = output(cli().args(["lock", "-n", &path, "true"])).await;
    assert_eq!(code, 3);
    assert!(stderr.contains("held by another"), "{stderr}");
    let (code, _, stderr) = output(cli().args(["lock", "-n", "-q", &path, "true"])).await;
    assert_eq!((code, stderr.as_str()), (3, ""), "-q -n says nothing");
    let (code, _, stderr) = output(cli().args(["lock", "--timeout", "100ms", "-q", &path, "true"])).await;
    assert_eq!((code, stderr.as_str()), (3, ""), "-q --timeout says nothing");
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.exit().await.0, 0);
    let (code, quiet_said) = quiet.exit().await;
    assert_eq!(code, 0);
    assert!(!quiet_said.contains("waiting"), "-q said: {quiet_said}");
    noisy.child.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_have_colour_only_on_a_terminal_without_no_color() {
    let path = unique("habits-colour");
    // stderr a pipe: no colour.
    let (code, _, stderr) = output(cli().args(["lock", &path, "true"]).env("WAZOO_LOG", "wazoo=info")).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("held"), "an info line: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    // stderr a terminal (script(1) gives it one): colour, unless NO_COLOR is set.
    let line = format!("{} lock {path} true", wazoo_bin().display());
    for (no_color, coloured) in [(None, true), (Some("1"), false)] {
        let mut script = tokio::process::Command::new("script");
        script
            .args(["-qec", &line, "/dev/null"])
            .env("WAZOO_ZOOKEEPER", zk().address())
            .env("WAZOO_PLUGINS", plugins())
            .env("WAZOO_LOG", "wazoo=info")
            .env_remove("WAZOO_SERVER")
            .env_remove("NO_COLOR");
        if let Some(value) = no_color {
            script.env("NO_COLOR", value);
        }
        let (code, said, _) = output(&mut script).await;
        assert_eq!(code, 0, "{said}");
        assert_eq!(said.contains('\u{1b}'), coloured, "NO_COLOR={no_color:?}: {said:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_server_mixed_up_get_a_hint() {
    let (code, _, stderr) = output(cli().args(["server", "--listen", "127.0.0.1:7181"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the wazoo daemon is `wazoo serve`"), "{stderr}");
    let (code, _, stderr) = output(cli().args(["serve", "--port", "2181"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is `wazoo server`"), "{stderr}");
    let (code, _, stderr) = output(cli().args([
        "--zookeeper",
        "127.0.0.1:1",
        "--connect-timeout",
        "1s",
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]))
    .await;
    assert_eq!(code, 69, "{stderr}");
    assert!(stderr.contains("is `wazoo server`"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_and_man_pages_say_options_first_then_statuses_environment_examples() {
    let (code, help, _) = output(cli().args(["lock", "--help"])).await;
    assert_eq!(code, 0);
    let at = |what: &str| help.find(what).unwrap_or_else(|| panic!("no {what:?} in:\n{help}"));
    let (own, global) = (at("\nOptions:\n"), at("\nGlobal options:\n"));
    assert!(own < global, "the command's options first");
    let own_options = &help[own..global];
    assert!(own_options.contains("--also") && own_options.contains("--timeout"), "{own_options}");
    for global_option in ["--zookeeper <", "--server <", "--plugins <", "--log-format <"] {
        assert!(!own_options.contains(global_option), "{global_option} among:{own_options}");
        assert!(help[global..].contains(global_option), "{global_option} under Global options");
    }
    let (statuses, environment, examples) =
        (at("\nExit status:\n"), at("\nEnvironment:\n"), at("\nExamples:\n"));
    assert!(global < statuses && statuses < environment && environment < examples);
    for word in
        ["WAZOO_ZOOKEEPER", "WAZOO_LOCK_NODE", "NO_COLOR", "wazoo lock /db/orders --also /db/invoices"]
    {
        assert!(help.contains(word), "{word} in:\n{help}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = output(cli().args(["man", "--dir"]).arg(dir.path())).await;
    assert_eq!(code, 0, "{stderr}");
    let page = std::fs::read_to_string(dir.path().join("wazoo-lock.1")).unwrap();
    for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH EXAMPLES"] {
        assert!(page.contains(section), "{section} in wazoo-lock.1");
    }
    assert!(page.contains("WAZOO_LOCK_NODE") && page.contains("\\-\\-also /db/invoices"), "{page}");
    assert!(!page.contains(".SH EXTRA"), "the same text once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_names_the_wit_packages_and_the_commit() {
    let (code, version, _) = output(cli().arg("--version")).await;
    assert_eq!(code, 0);
    let mut packages = Vec::new();
    for file in [root().join("wit/recipes.wit"), root().join("wit/deps/zk/zk.wit")] {
        let text = std::fs::read_to_string(file).unwrap();
        let line = text.lines().find_map(|l| l.strip_prefix("package ")).unwrap();
        packages.push(line.trim_end_matches(';').to_string());
    }
    packages.sort();
    assert!(version.contains(&format!("WIT packages: {}", packages.join(", "))), "{version}");
    let head = std::process::Command::new("git")
        .arg("-C")
        .arg(root())
        .args(["rev-parse", "--short=12", "HEAD"])
        .output();
    if let Some(head) = head.ok().filter(|h| h.status.success()) {
        let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
        assert!(version.contains(&format!("(commit {head})")), "{version}");
    }
}

/// `-` reads a queue item's data from stdin, as it does a config value.
#[tokio::test(flavor = "multi_thread")]
async fn a_queue_item_is_read_from_stdin_with_a_dash() {
    use tokio::io::AsyncWriteExt;
    let checker = client(&zk().address()).await;
    let queue = unique("habits-queue");
    let mut put = cli()
        .args(["queue", "put", &queue, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    put.stdin.take().unwrap().write_all(b"{\"job\": 7}\n").await.unwrap();
    assert!(put.wait().await.unwrap().success());
    let items = children(&checker, &queue).await;
    assert_eq!(items.len(), 1, "one item: {items:?}");
    let (data, _) = checker.get_data(&format!("{queue}/{}", items[0])).await.unwrap();
    assert_eq!(data, b"{\"job\": 7}\n");
}
