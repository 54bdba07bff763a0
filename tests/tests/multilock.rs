//! `wazoo lock PATH --also PATH… CMD` (Curator's `InterProcessMultiLock`): every lock or none, taken
//! in path order so overlapping sets never deadlock, released together; the command learns each
//! lock's fencing token; losing one lock stops it.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// The critical section each multi-locker runs: for each lock it holds, claim a marker
/// directory (`mkdir` fails if another holder has it: a violation), log the lock's token, work in
/// a forked child, then give the markers back.
const SECTION: &str = r#"
i=1
while [ "$i" -le "$WAZOO_LOCK_COUNT" ]; do
  eval "path=\$WAZOO_LOCK_PATH_$i token=\$WAZOO_FENCING_TOKEN_$i"
  name=${path##*/}
  mkdir "$DIR/held-$name" 2>/dev/null || echo "two holders of $name" >> "$DIR/violations"
  echo "$name $token" >> "$DIR/tokens"
  i=$((i + 1))
done
sleep 0.02 & wait
i=1
while [ "$i" -le "$WAZOO_LOCK_COUNT" ]; do
  eval "path=\$WAZOO_LOCK_PATH_$i"
  rmdir "$DIR/held-${path##*/}"
  i=$((i + 1))
done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_taking_overlapping_sets_of_three_of_five_locks_never_deadlock_or_share() {
    const PROCESSES: usize = 8;
    const RUN: Duration = Duration::from_secs(30);
    let root = unique("multilock");
    let locks: Vec<String> = (0..5).map(|i| format!("{root}/l{i}")).collect();
    // Every set of 3 of the 5.
    let mut sets = Vec::new();
    for a in 0..5 {
        for b in a + 1..5 {
            for c in b + 1..5 {
                sets.push([a, b, c]);
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut workers = Vec::new();
    for p in 0..PROCESSES {
        let (locks, sets, dir) = (locks.clone(), sets.clone(), dir.path().to_path_buf());
        workers.push(tokio::spawn(async move {
            let mut rounds = 0usize;
            while started.elapsed() < RUN {
                // A different set each round, named in a different order each time: the order
                // taken is the command's business.
                let set = sets[(p * 3 + rounds) % sets.len()];
                let mut named: Vec<&str> = set.iter().map(|&i| locks[i].as_str()).collect();
                named.rotate_left((p + rounds) % 3);
                if (p + rounds) % 2 == 1 {
                    named.reverse();
                }
                // The first named is PATH, each other one --also PATH.
                let also = named[1..].iter().flat_map(|path| ["--also", path]);
                let (code, _, stderr) =
                    output(cli().env("DIR", &dir).args(["lock", named[0]]).args(also).args([
                        "--timeout",
                        "25s",
                        "--",
                        "sh",
                        "-c",
                        SECTION,
                    ]))
                    .await;
                assert_eq!(code, 0, "process {p} round {rounds} ({named:?}): {stderr}");
                rounds += 1;
            }
            rounds
        }));
    }
    let mut rounds = Vec::new();
    for worker in workers {
        rounds.push(within(RUN + LIMIT, "every multi-locker finishes", worker).await.unwrap());
    }
    let violations = std::fs::read_to_string(dir.path().join("violations")).unwrap_or_default();
    assert!(violations.is_empty(), "{violations}");
    // Nobody starved: every process got its locks again and again.
    assert!(rounds.iter().all(|&r| r >= 3), "rounds per process: {rounds:?}");
    // Each lock's holders, in the order they held it, had ever greater tokens.
    let tokens = std::fs::read_to_string(dir.path().join("tokens")).unwrap();
    let mut last: HashMap<&str, i64> = HashMap::new();
    let mut held = 0;
    for line in tokens.lines() {
        let (name, token) = line.split_once(' ').unwrap();
        let token: i64 = token.parse().unwrap();
        if let Some(before) = last.insert(name, token) {
            assert!(token > before, "lock {name}: token {token} after {before}");
        }
        held += 1;
    }
    assert_eq!(held, rounds.iter().sum::<usize>() * 3, "every round held three locks");
    assert_eq!(last.len(), 5, "every lock was held");
    let checker = client(&zk().address()).await;
    assert!(ephemerals(&checker, &root).await.is_empty(), "no lock node is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_is_all_or_none_and_ends_with_any_of_its_locks() {
    let checker = client(&zk().address()).await;
    let root = unique("multilock-none");
    let (a, b, c) = (format!("{root}/a"), format!("{root}/b"), format!("{root}/c"));

    // b is held by another process.
    let mut other = cli().args(["lock", &b]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(other.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "b is held", lines.next_line()).await.unwrap().unwrap();
    assert!(line.starts_with("held "), "{line}");

    // Without waiting, or within a timeout: nothing is held, a (taken first) is let go again.
    let (code, _, stderr) =
        output(cli().args(["lock", &c, "--also", &b, "-p", &a, "-n", "--", "true"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains(&b), "{stderr}");
    let (code, _, stderr) =
        output(cli().args(["lock", &b, "--also", &a, "--timeout", "500ms", "--", "true"])).await;
    assert_eq!(code, 3, "{stderr}");
    let left = ephemerals(&checker, &root).await;
    assert_eq!(left.len(), 1, "only the other process's node is left: {left:?}");
    assert!(left.iter().all(|n| n.starts_with(&format!("{b}/"))), "{left:?}");

    // Once b is let go, all three are held together; without a command, a line each.
    terminate(&other);
    let _ = other.wait().await;
    wait_children(&checker, &b, 0).await;
    let mut all = cli()
        .args(["lock", &c, "--also", &a, "--also", &b])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(all.stdout.take().unwrap()).lines();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(within(LIMIT, "all three are held", lines.next_line()).await.unwrap().unwrap());
    }
    for (line, path) in held.iter().zip([&a, &b, &c]) {
        assert!(line.starts_with(&format!("held {path}/")), "taken in path order: {held:?}");
    }
    assert_eq!(ephemerals(&checker, &root).await.len(), 3);
    terminate(&all);
    let status = within(LIMIT, "a signal releases them", all.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(ephemerals(&checker, &root).await.is_empty(), "all three released");

    // One lock's node deleted while the command runs: the command is stopped (exit status 4)
    // and the other locks are let go.
    let mut running = cli()
        .args(["lock", &a, "--also", &b, "--grace", "2s", "--", "sh", "-c", "echo started; sleep 30; true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(running.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "the command starts", lines.next_line()).await.unwrap().unwrap();
    assert_eq!(line, "started");
    let b_node = ephemerals(&checker, &b).await.into_iter().next().expect("b's node");
    checker.delete(&b_node, None).await.unwrap();
    let status = within(LIMIT, "the loss stops the command", running.wait()).await.unwrap();
    assert_eq!(status.code(), Some(4));
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut running.stderr.take().unwrap(), &mut stderr).await.unwrap();
    assert!(stderr.contains(&format!("the lock at {b}")), "{stderr}");
    assert!(ephemerals(&checker, &root).await.is_empty(), "a's node is gone too");

    // The same lock twice is a usage error.
    let (code, _, stderr) = output(cli().args(["lock", &a, "--also", &a, "--", "true"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("named twice"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_or_a_signal_while_waiting_for_the_next_leaves_nothing_and_runs_nothing() {
    let checker = client(&zk().address()).await;
    let root = unique("multilock-wait");
    let (a, b) = (format!("{root}/a"), format!("{root}/b"));
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");

    // b is held by another process; the multi-locker takes a and waits for b.
    let mut other = cli().args(["lock", &b]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(other.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "b is held", lines.next_line()).await.unwrap().unwrap();
    assert!(line.starts_with("held "), "{line}");
    let mut waiting = cli()
        .args(["lock", &b, "--also", &a, "--", "sh", "-c", &format!("touch {}", ran.display())])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_children(&checker, &b, 2).await;
    let a_node = ephemerals(&checker, &a).await.into_iter().next().expect("a is held");
    // a is lost while b is awaited: nothing runs, exit status 4, b's waiting node goes too.
    checker.delete(&a_node, None).await.unwrap();
    let status = within(LIMIT, "the loss ends the wait", waiting.wait()).await.unwrap();
    assert_eq!(status.code(), Some(4));
    assert!(!ran.exists(), "the command never ran");
    wait_children(&checker, &b, 1).await;

    // A signal while waiting for the first lock: its waiting node goes at once, not with the
    // session (10 s).
    let mut waiting =
        cli().args(["lock", &b, "--also", &a, "--", "true"]).stderr(Stdio::null()).spawn().unwrap();
    wait_children(&checker, &b, 2).await;
    terminate(&waiting);
    let status = within(LIMIT, "the signal ends the wait", waiting.wait()).await.unwrap();
    assert_eq!(status.code(), Some(143));
    within(Duration::from_secs(5), "the waiting node goes at once", wait_children(&checker, &b, 1)).await;
    terminate(&other);
    let _ = other.wait().await;
}

/// Sends SIGTERM to `child`: wazoo releases what it holds and exits.
fn terminate(child: &tokio::process::Child) {
    let pid = child.id().expect("still running") as i32;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
}
