//! The command run under a claim lives and dies with it: `wazoo lock|rwlock|semaphore|elect|group
//! join -- CMD`, run as a user runs it against real ZooKeeper servers, locally and through a
//! `wazoo serve` daemon.
//!
//! Every CMD here is a shell that runs a child in the foreground (never `exec`, which would hide
//! a child that outlives its parent) and prints both PIDs; each test then checks, by PID and by
//! process group, that nothing of CMD is left running once the claim is gone, and that a waiter
//! interrupted in the queue leaves it at once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::process::Command;
use wazoo_tests::chaos::Cluster;
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::procs::{ended, forks, group_of, running, through, Running, NODE};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;
use zookeeper_client::{AddWatchMode, Client};

const LIMIT: Duration = Duration::from_secs(60);

/// The longest session the shared server grants (20 ticks of 200 ms).
const LONG_SESSION: &str = "4s";

/// The commands that run CMD under a claim.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Lock,
    Read,
    Write,
    Semaphore,
    Elect,
    Join,
}

impl Kind {
    const ALL: [Kind; 6] = [Kind::Lock, Kind::Read, Kind::Write, Kind::Semaphore, Kind::Elect, Kind::Join];
    /// Those that wait in a queue while another holds (a group has no queue).
    const QUEUED: [Kind; 4] = [Kind::Lock, Kind::Write, Kind::Semaphore, Kind::Elect];
    /// Those `wazoo revoke` applies to.
    const REVOCABLE: [Kind; 3] = [Kind::Lock, Kind::Write, Kind::Semaphore];

    /// The subcommand and its arguments up to `--`; `name` tells contenders apart.
    fn args(self, path: &str, name: &str) -> Vec<String> {
        let words: Vec<&str> = match self {
            Kind::Lock => vec!["lock", path],
            Kind::Read => vec!["rwlock", "read", path],
            Kind::Write => vec!["rwlock", "write", path],
            Kind::Semaphore => vec!["semaphore", path, "--leases", "1"],
            Kind::Elect => vec!["elect", path, "--id", name],
            Kind::Join => vec!["group", "join", path, name],
        };
        words.into_iter().map(str::to_string).collect()
    }
}

/// Waits, by a recursive watch on `path`, until its ephemeral nodes are `before` and `more`
/// others, made by `contender`; returns the others.
async fn wait_more(
    checker: &Client,
    path: &str,
    before: &BTreeSet<String>,
    more: usize,
    contender: &mut Running,
) -> BTreeSet<String> {
    let mut watcher = checker.watch(path, AddWatchMode::PersistentRecursive).await.unwrap();
    let appear = async {
        loop {
            let now = ephemerals(checker, path).await;
            if now.len() == before.len() + more && before.is_subset(&now) {
                return now.difference(before).cloned().collect();
            }
            watcher.changed().await;
        }
    };
    tokio::select! {
        nodes = within(LIMIT, "the contender's nodes appear", appear) => nodes,
        _ = contender.child.wait() => {
            let (code, stderr) = contender.exit().await;
            panic!("the contender exited ({code}) before its nodes appeared: {stderr}");
        }
    }
}

async fn daemon() -> Daemon {
    Daemon::start(&plugins(), &root().join("target/component-cache")).await
}

/// `wazoo KIND PATH … -- sh -c SCRIPT`, started on `base`.
fn claim(base: &mut Command, kind: Kind, path: &str, name: &str, extra: &[&str], script: &str) -> Running {
    base.args(kind.args(path, name)).args(extra).args(["--", "sh", "-c", script]);
    Running::start(base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_wazoo_while_holding_kills_the_whole_command() {
    // Both ways of containing CMD: a cgroup where one can be made, and a process group.
    for cgroup in ["auto", "off"] {
        for kind in Kind::ALL {
            let path = unique("kill9");
            let mut holder = claim(cli().env("WAZOO_CGROUP", cgroup), kind, &path, "a", &[], &forks());
            let cmd = holder.pids().await;
            holder.signal(libc::SIGKILL);
            let killed = Instant::now();
            let what = format!("{kind:?} (cgroup {cgroup}), wazoo SIGKILLed");
            let gone = tokio::time::timeout(Duration::from_secs(1), cmd.ended()).await;
            if gone.is_err() {
                cmd.kill();
            }
            assert!(gone.is_ok(), "{what}: the command still runs 1 s later: {cmd:?}");
            cmd.assert_gone(&what);
            println!("{what}: command gone {:.0?} after", killed.elapsed());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_wazoo_while_holding_through_the_daemon_kills_the_whole_command() {
    let daemon = daemon().await;
    for kind in Kind::ALL {
        let path = unique("kill9-remote");
        let mut holder = claim(&mut through(&daemon), kind, &path, "a", &[], &forks());
        let cmd = holder.pids().await;
        holder.signal(libc::SIGKILL);
        let what = format!("{kind:?} through the daemon, wazoo SIGKILLed");
        let gone = tokio::time::timeout(Duration::from_secs(1), cmd.ended()).await;
        if gone.is_err() {
            cmd.kill();
        }
        assert!(gone.is_ok(), "{what}: the command still runs 1 s later: {cmd:?}");
        cmd.assert_gone(&what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cut_off_stops_the_whole_command_before_the_server_expires_it() {
    let address = zk().address();
    let checker = client(&address).await;
    for kind in Kind::ALL {
        let path = unique("cut-off");
        // wazoo reaches ZooKeeper through a proxy that can silence it.
        let proxy = Proxy::start(&address).await;
        let mut base = cli();
        base.args(["--zookeeper", &proxy.address(), "--session-timeout", "2s"]);
        let mut holder = claim(&mut base, kind, &path, "a", &[], &forks());
        let cmd = holder.pids().await;
        // When the server expires the silent session, it deletes the claim's node: by then,
        // nothing of the command may run.
        let (watcher, node) = (checker.clone(), cmd.node.clone());
        let expiry = tokio::spawn(async move {
            wait_gone(&watcher, &node).await;
            Instant::now()
        });
        proxy.freeze();
        let frozen = Instant::now();
        let gone = tokio::time::timeout(Duration::from_secs(10), cmd.ended()).await.is_ok();
        let gone_at = Instant::now();
        let expired_at = within(LIMIT, "the server expires the session", expiry).await.unwrap();
        let what = format!(
            "{kind:?}, session of 2 s: command gone {:.2} s, session expired on the server {:.2} s after the freeze",
            (gone_at - frozen).as_secs_f64(),
            (expired_at - frozen).as_secs_f64()
        );
        if !cmd.gone() {
            cmd.kill();
        }
        assert!(gone && gone_at < expired_at, "{what}");
        cmd.assert_gone(&what);
        println!("{what}");
        proxy.thaw();
        let (code, stderr) = holder.exit().await;
        assert_eq!(code, 4, "{what}: {stderr}");
        assert!(stderr.contains("session expired"), "{what}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_claim_stops_the_whole_command() {
    let checker = client(&zk().address()).await;
    for kind in Kind::REVOCABLE {
        let path = unique("revoked");
        let mut holder = claim(&mut cli(), kind, &path, "a", &["--grace", "5s"], &forks());
        let cmd = holder.pids().await;
        let (code, stdout, stderr) = output(cli().args(["revoke", &cmd.node])).await;
        assert_eq!((code, stdout.trim()), (0, "asked"), "{stderr}");
        let (code, stderr) = holder.exit().await;
        let what = format!("{kind:?} revoked");
        if !cmd.gone() {
            cmd.kill();
        }
        assert_eq!(code, 5, "{what}: {stderr}");
        cmd.assert_gone(&what);
        assert!(checker.check_stat(&cmd.node).await.unwrap().is_none(), "{what}: the node was released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grace_ends_with_sigkill_for_a_command_that_ignores_sigterm() {
    let checker = client(&zk().address()).await;
    let grace = Duration::from_secs(1);
    let script = format!("trap '' TERM; {}", forks());
    for kind in Kind::ALL {
        let path = unique("grace");
        let mut holder = claim(&mut cli(), kind, &path, "a", &["--grace", "1s"], &script);
        let cmd = holder.pids().await;
        checker.delete(&cmd.node, None).await.unwrap();
        let deleted = Instant::now();
        let what = format!("{kind:?}, node deleted, SIGTERM ignored");
        let gone = tokio::time::timeout(grace + Duration::from_secs(1), cmd.ended()).await;
        let took = deleted.elapsed();
        if gone.is_err() {
            cmd.kill();
        }
        assert!(gone.is_ok(), "{what}: the command still runs {took:.1?} after the loss: {cmd:?}");
        cmd.assert_gone(&what);
        assert!(
            took >= grace - Duration::from_millis(100),
            "{what}: killed after {took:?}, before the grace"
        );
        let (code, stderr) = holder.exit().await;
        assert_eq!(code, 4, "{what}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_holding_reaches_the_whole_command_and_then_releases() {
    let checker = client(&zk().address()).await;
    for (kind, signal) in [
        (Kind::Lock, libc::SIGTERM),
        (Kind::Lock, libc::SIGINT),
        (Kind::Lock, libc::SIGHUP),
        (Kind::Semaphore, libc::SIGTERM),
        (Kind::Elect, libc::SIGINT),
        (Kind::Join, libc::SIGTERM),
    ] {
        let path = unique("forward");
        let mut holder = claim(&mut cli(), kind, &path, "a", &[], &forks());
        let cmd = holder.pids().await;
        holder.signal(signal);
        let (code, stderr) = holder.exit().await;
        let what = format!("{kind:?}, signal {signal} while holding");
        if !cmd.gone() {
            cmd.kill();
        }
        cmd.assert_gone(&what);
        // The shell died of the signal (or of SIGTERM, for a signal it let its child take).
        assert!([128 + signal, 128 + libc::SIGTERM].contains(&code), "{what}: exit {code}: {stderr}");
        assert!(checker.check_stat(&cmd.node).await.unwrap().is_none(), "{what}: the claim was released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_command_leaves_behind_is_stopped_before_the_claim_is_released() {
    let checker = client(&zk().address()).await;
    for kind in [Kind::Lock, Kind::Semaphore, Kind::Join] {
        let path = unique("leftover");
        // CMD starts a background job and exits at once.
        let script = format!(r#"sleep 30 & echo "pids $$ $! node {NODE}""#);
        let mut holder = claim(&mut cli(), kind, &path, "a", &["--grace", "1s"], &script);
        let cmd = holder.pids().await;
        let what = format!("{kind:?}, CMD exited leaving a child");
        within(LIMIT, "the claim is released", wait_gone(&checker, &cmd.node)).await;
        let still = running(cmd.child);
        if !cmd.gone() {
            cmd.kill();
        }
        assert!(!still, "{what}: its child {} ran on after the claim was released", cmd.child);
        let (code, stderr) = holder.exit().await;
        assert_eq!(code, 0, "{what}: {stderr}");
        cmd.assert_gone(&what);
    }
}

/// A waiter queued behind a holder gets `signal`: its nodes are gone within a second, it exits
/// 128 + the signal, its command never runs, and the waiter behind it takes over as soon as the
/// holder lets go.
async fn leaves_the_queue(base: impl Fn() -> Command, kind: Kind, signal: i32, checker: &Client) {
    let path = unique("queued");
    let what = format!("{kind:?}, signal {signal} while queued");
    let long = ["--session-timeout", LONG_SESSION];
    let mut holder = claim(&mut base(), kind, &path, "a", &[], "echo held; read line");
    assert_eq!(holder.line("the holder's command starts").await, "held");
    let held = ephemerals(checker, &path).await;
    let mut waiter = claim(&mut base(), kind, &path, "b", &long, "echo b-ran");
    let queued =
        wait_more(checker, &path, &held, if kind == Kind::Semaphore { 2 } else { 1 }, &mut waiter).await;
    let before = held.union(&queued).cloned().collect();
    let mut next = claim(&mut base(), kind, &path, "c", &long, "echo c-ran");
    wait_more(checker, &path, &before, 1, &mut next).await;

    waiter.signal(signal);
    let sent = Instant::now();
    for node in &queued {
        let left = Duration::from_secs(1).saturating_sub(sent.elapsed());
        within(left, &format!("{what}: {node} is deleted within 1 s"), wait_gone(checker, node)).await;
    }
    let (code, stderr) = waiter.exit().await;
    assert_eq!(code, 128 + signal, "{what}: {stderr}");
    assert!(waiter.lines.next_line().await.unwrap().is_none(), "{what}: its command ran");

    holder.go_on().await;
    let released = Instant::now();
    let line =
        within(Duration::from_secs(2), &format!("{what}: the next waiter takes over"), next.line("c runs"))
            .await;
    assert_eq!(line, "c-ran");
    println!("{what}: nodes gone within 1 s, next waiter ran {:.0?} after the release", released.elapsed());
    assert_eq!(holder.exit().await.0, 0);
    assert_eq!(next.exit().await.0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_queued_leaves_the_queue_at_once() {
    let checker = client(&zk().address()).await;
    for kind in Kind::QUEUED {
        for signal in [libc::SIGTERM, libc::SIGINT] {
            leaves_the_queue(cli, kind, signal, &checker).await;
        }
    }
    leaves_the_queue(cli, Kind::Lock, libc::SIGHUP, &checker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_queued_through_the_daemon_leaves_the_queue_at_once() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    for kind in Kind::QUEUED {
        leaves_the_queue(|| through(&daemon), kind, libc::SIGTERM, &checker).await;
    }
    leaves_the_queue(|| through(&daemon), Kind::Lock, libc::SIGINT, &checker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_calls_setsid_is_caught_only_by_a_cgroup() {
    let path = unique("setsid");
    // CMD's child leaves CMD's process group (and session) before it prints its PIDs.
    let script = r#"setsid sh -c 'echo "pids $PPID $$ node -"; exec sleep 30' & wait"#;
    let mut holder = claim(cli().env("WAZOO_LOG", "wazoo=info"), Kind::Lock, &path, "a", &[], script);
    let cmd = holder.pids().await;
    assert_ne!(group_of(cmd.child), cmd.group, "setsid left the group");
    holder.signal(libc::SIGKILL);
    let (_, stderr) = holder.exit().await;
    let in_cgroup = stderr.contains("runs in cgroup");
    assert!(in_cgroup || stderr.contains("runs in process group"), "wazoo says which: {stderr}");
    let gone = tokio::time::timeout(Duration::from_secs(1), ended(cmd.child)).await.is_ok();
    cmd.kill();
    if in_cgroup {
        assert!(gone, "a cgroup holds every descendant, setsid or not");
    } else {
        assert!(!gone, "a process group cannot hold a child that called setsid (documented)");
    }
}

/// How one partition case came out: when the cut-off holder's command last wrote and when the
/// new holder's command first wrote, after the fault.
struct Partition {
    case: String,
    last_old: Duration,
    first_new: Duration,
}

/// `date +%s%N` lines of `log`, as nanoseconds.
fn stamps(log: &std::path::Path) -> Vec<u128> {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// On a 3-member ensemble, a holder reaches only member `f` (itself, or through a daemon that
/// does); a contender reaches the other two. Then `f` is frozen (SIGSTOP) or cut off from its
/// peers. Both commands append timestamps: the cut-off holder's last must come before the new
/// holder's first.
async fn partition(
    cluster: &Arc<Cluster>,
    kind: Kind,
    session: &str,
    isolate: bool,
    daemon: bool,
) -> Partition {
    cluster.restore().await.unwrap();
    let leader = cluster.leader().await.expect("a leader");
    let f = (leader + 1) % 3;
    let others: Vec<String> = (0..3).filter(|&i| i != f).map(|i| cluster.members[i].clone()).collect();
    let others = others.join(",");
    let checker = client(&others).await;
    let path = unique("partition");
    let dir = std::env::temp_dir().join(format!("wazoo-partition-{}", path.replace('/', "_")));
    std::fs::create_dir_all(&dir).unwrap();
    let (old_log, new_log) = (dir.join("old"), dir.join("new"));
    let heartbeat = r#"echo started; while :; do date +%s%N >> "$LOG"; sleep 0.02; done"#;

    let daemon = match daemon {
        true => {
            let extra = ["--zookeeper", cluster.members[f].as_str(), "--session-timeout", session];
            Some(Daemon::start_with(&plugins(), &root().join("target/component-cache"), &extra).await)
        }
        false => None,
    };
    let mut base = match &daemon {
        Some(daemon) => through(daemon),
        None => {
            let mut base = cli();
            base.args(["--zookeeper", &cluster.members[f]]);
            base
        }
    };
    base.env("LOG", &old_log).args(["--session-timeout", session]);
    let mut holder = claim(&mut base, kind, &path, "a", &[], heartbeat);
    assert_eq!(holder.line("the holder's command starts").await, "started");
    let mut base = cli();
    base.env("LOG", &new_log).args(["--zookeeper", &others, "--session-timeout", session]);
    let stamp = r#"date +%s%N >> "$LOG"; echo started"#;
    let mut contender = match kind {
        // A member's name is its claim, and a join does not queue: the contender asks for the
        // same name again while it is taken (exit status 1).
        Kind::Join => {
            base.args(kind.args(&path, "a")).args(["--", "sh", "-c", stamp]);
            let wazoo = base.as_std();
            let mut retry = Command::new("sh");
            retry
                .args(["-c", r#"while :; do "$@"; s=$?; [ $s -ne 1 ] && exit $s; sleep 0.05; done"#, "sh"])
                .arg(wazoo.get_program())
                .args(wazoo.get_args())
                .kill_on_drop(true);
            for (key, value) in wazoo.get_envs() {
                match value {
                    Some(value) => retry.env(key, value),
                    None => retry.env_remove(key),
                };
            }
            Running::start(&mut retry)
        }
        _ => claim(&mut base, kind, &path, "b", &[], stamp),
    };
    match kind {
        // The waiter's lease node, and its place in the lease mutex's queue.
        Kind::Semaphore => wait_children(&checker, &format!("{path}/leases"), 2).await,
        Kind::Join => wait_children(&checker, &path, 1).await,
        _ => wait_children(&checker, &path, 2).await,
    };

    let fault_at = now_ns();
    if isolate {
        cluster.isolate(f);
    } else {
        cluster.freeze(f).await;
    }
    assert_eq!(contender.line("the contender's command starts").await, "started");
    cluster.heal();
    cluster.thaw(f).await;
    let (code, stderr) = holder.exit().await;
    assert_eq!(code, 4, "the cut-off holder exits 4: {stderr}");
    assert_eq!(contender.exit().await.0, 0);

    let (old, new) = (stamps(&old_log), stamps(&new_log));
    let _ = std::fs::remove_dir_all(&dir);
    let last_old = *old.iter().max().expect("the holder's command wrote");
    let first_new = *new.iter().min().expect("the contender's command wrote");
    let case = format!(
        "{kind:?}, session {session}, member {}, {}",
        if isolate { "isolated" } else { "frozen" },
        if daemon.is_some() { "through a daemon on it" } else { "holder on it" }
    );
    assert!(
        last_old < first_new,
        "{case}: the cut-off holder's command wrote {:.3} s after the new holder's first write",
        (last_old - first_new) as f64 / 1e9
    );
    let since = |t: u128| Duration::from_nanos(t.saturating_sub(fault_at) as u64);
    Partition { case, last_old: since(last_old), first_new: since(first_new) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_holder_stops_its_command_before_the_majority_hands_the_lock_on() {
    // Started and dropped on plain threads: the ensemble's proxies run on a runtime of its own.
    let started = tokio::task::spawn_blocking(|| std::thread::spawn(|| Cluster::start(200)).join().unwrap());
    let cluster = started.await.unwrap().expect("an ensemble");
    let cluster = Arc::new(cluster);
    let mut cases = Vec::new();
    for (kind, session, isolate, daemon) in [
        (Kind::Lock, "2s", false, false),
        (Kind::Lock, "4s", false, false),
        (Kind::Lock, "4s", true, false),
        (Kind::Lock, "2s", false, true),
        (Kind::Lock, "4s", false, true),
        (Kind::Write, "2s", false, false),
        (Kind::Semaphore, "2s", true, false),
        (Kind::Elect, "2s", false, true),
        (Kind::Join, "2s", true, false),
    ] {
        cases.push(partition(&cluster, kind, session, isolate, daemon).await);
    }
    for c in &cases {
        println!(
            "{}: old command's last write {:.2} s, new holder's first write {:.2} s after the fault",
            c.case,
            c.last_old.as_secs_f64(),
            c.first_new.as_secs_f64()
        );
    }
    tokio::task::spawn_blocking(move || std::thread::spawn(move || drop(cluster)).join().unwrap())
        .await
        .unwrap();
}
