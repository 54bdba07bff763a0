//! The daemon's client sessions at their edges, with a real `wazoo serve` on the real ZooKeeper:
//! a session that ends (its TTL passes, it is closed) while its calls wait in a lock's queue
//! leaves no ghost waiter; a claim that ends outside its Hold stream, or with the daemon, is told
//! why; a session kept by two KeepAlive streams outlives the first; one stream keeps many
//! sessions and lets each go alone; one client cannot guess another's session; the instance
//! pool's limit is a passing shortage; `revoke` without a grace says it only asked; and a
//! frozen daemon (SIGSTOP) holds up no client past its bound.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::Code;
use wazoo_proto::{
    hold_event::Event, hold_request::Step, recipes_client::RecipesClient, sessions_client::SessionsClient,
    AcquireRequest, Empty, ErrorKind, Family, HandleRef, HoldEvent, HoldRequest, KeepAliveRequest,
    LossReason, OpenRequest, RevokeOutcome, RevokeRequest, SessionRef,
};
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::procs::{self, Running};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn cache() -> PathBuf {
    root().join("target/component-cache")
}

/// A daemon of its own on the standard recipes (for the tests that stop or freeze it).
async fn daemon() -> Daemon {
    Daemon::start(&plugins(), &cache()).await
}

/// Opens a session of `ttl_ms` and keeps it alive over one KeepAlive stream for as long as the
/// returned [`Keeper`] lives (a keepalive every third of the TTL).
async fn kept_session(channel: &Channel, ttl_ms: u64) -> (u64, Keeper) {
    let id = silent_session(channel, ttl_ms).await;
    (id, keepalive_stream(channel, id, ttl_ms).await)
}

/// A session that nobody keeps alive: it ends when its TTL passes.
async fn silent_session(channel: &Channel, ttl_ms: u64) -> u64 {
    let mut sessions = SessionsClient::new(channel.clone());
    sessions.open(OpenRequest { ttl_ms, name: "test".into() }).await.unwrap().into_inner().session
}

/// A KeepAlive stream naming a session: open while this lives (dropping it ends the stream);
/// it sends keepalives until told to go quiet.
struct Keeper {
    _stream: tokio::sync::mpsc::Sender<KeepAliveRequest>,
    quiet: Arc<AtomicBool>,
}

impl Keeper {
    /// Sends no more keepalives, the stream left open: the session's TTL runs out.
    fn go_quiet(&self) {
        self.quiet.store(true, Ordering::SeqCst);
    }
}

/// A KeepAlive stream naming `id` every third of `ttl_ms`.
async fn keepalive_stream(channel: &Channel, id: u64, ttl_ms: u64) -> Keeper {
    let mut sessions = SessionsClient::new(channel.clone());
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(KeepAliveRequest { session: id, end: false }).await.unwrap();
    let mut replies = sessions.keep_alive(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let first = replies.message().await.unwrap().expect("a keepalive answer");
    assert!(first.ttl_ms > 0, "the session {id} is open");
    let quiet = Arc::new(AtomicBool::new(false));
    let (keeper, stop) = (tx.downgrade(), quiet.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(ttl_ms / 3)).await;
            let Some(keeper) = keeper.upgrade() else { break };
            if stop.load(Ordering::SeqCst) {
                continue;
            }
            if keeper.send(KeepAliveRequest { session: id, end: false }).await.is_err() {
                break;
            }
            drop(keeper);
            match replies.message().await {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    });
    Keeper { _stream: tx, quiet }
}

fn acquire(session: u64, path: &str, timeout_ms: Option<u64>) -> AcquireRequest {
    AcquireRequest {
        session,
        path: path.into(),
        family: Family::Lock as i32,
        timeout_ms,
        ..Default::default()
    }
}

fn kind(status: &tonic::Status) -> Option<ErrorKind> {
    ErrorKind::of(status)
}

/// A Hold stream: its steps' sender and its events.
async fn hold_stream(
    channel: &Channel,
) -> (tokio::sync::mpsc::Sender<HoldRequest>, tonic::Streaming<HoldEvent>) {
    let (steps, rx) = tokio::sync::mpsc::channel(2);
    let events =
        RecipesClient::new(channel.clone()).hold(ReceiverStream::new(rx)).await.unwrap().into_inner();
    (steps, events)
}

async fn step(steps: &tokio::sync::mpsc::Sender<HoldRequest>, step: Step) {
    steps.send(HoldRequest { step: Some(step) }).await.unwrap();
}

async fn next_event(events: &mut tonic::Streaming<HoldEvent>, what: &str) -> Event {
    let event = within(LIMIT, what, events.message()).await;
    match event {
        Ok(Some(HoldEvent { event: Some(event) })) => event,
        other => panic!("{what}: the Hold stream gave {other:?}"),
    }
}

/// The queue at `dir` once it holds `n` nodes, waited for by watching it (at most `limit`).
async fn queue_of(checker: &zookeeper_client::Client, dir: &str, n: usize, limit: Duration) -> Vec<String> {
    within(limit, &format!("{dir} holds {n} nodes"), wait_children(checker, dir, n)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_whose_session_ends_leaves_the_queue_at_once() {
    let daemon = daemon().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let path = unique("sessions-ghost");
    let recipes = RecipesClient::new(channel.clone());
    let (holder, _kept) = kept_session(&channel, 10_000).await;
    let held = recipes.clone().acquire(acquire(holder, &path, None)).await.unwrap().into_inner();
    let holder_node = held.node.rsplit('/').next().unwrap().to_string();

    // A waiter whose keepalives stop once it waits: its 1 s TTL passes. Its node leaves the
    // queue then, long before the lock frees, and its call is told.
    let (silent, keeper) = kept_session(&channel, 1000).await;
    let waiting = tokio::spawn({
        let (mut recipes, path) = (recipes.clone(), path.clone());
        async move { recipes.acquire(acquire(silent, &path, None)).await }
    });
    queue_of(&checker, &path, 2, LIMIT).await;
    keeper.go_quiet();
    let started = Instant::now();
    let left = queue_of(&checker, &path, 1, Duration::from_secs(5)).await;
    assert_eq!(left, vec![holder_node.clone()], "only the holder is left");
    let refused = within(Duration::from_secs(5), "the waiter's call ends", waiting).await.unwrap();
    let refused = refused.expect_err("a waiter whose session ended holds nothing");
    assert_eq!(kind(&refused), Some(ErrorKind::UnknownSession), "{refused:?}");
    assert!(started.elapsed() < Duration::from_secs(4), "gone within its TTL: {:?}", started.elapsed());

    // A waiter whose session is closed: gone at once.
    let (closed, _kept_closed) = kept_session(&channel, 10_000).await;
    let waiting = tokio::spawn({
        let (mut recipes, path) = (recipes.clone(), path.clone());
        async move { recipes.acquire(acquire(closed, &path, None)).await }
    });
    queue_of(&checker, &path, 2, LIMIT).await;
    SessionsClient::new(channel.clone()).close(SessionRef { session: closed }).await.unwrap();
    let left = queue_of(&checker, &path, 1, Duration::from_secs(2)).await;
    assert_eq!(left, vec![holder_node.clone()]);
    let refused = within(Duration::from_secs(2), "the closed waiter's call ends", waiting).await.unwrap();
    assert_eq!(kind(&refused.expect_err("closed")), Some(ErrorKind::UnknownSession));

    // A Hold stream waiting in a session that is closed: its node goes, the stream is told.
    let (hold_session, _kept_hold) = kept_session(&channel, 10_000).await;
    let (steps, mut events) = hold_stream(&channel).await;
    step(&steps, Step::Acquire(acquire(hold_session, &path, None))).await;
    queue_of(&checker, &path, 2, LIMIT).await;
    SessionsClient::new(channel.clone()).close(SessionRef { session: hold_session }).await.unwrap();
    let left = queue_of(&checker, &path, 1, Duration::from_secs(2)).await;
    assert_eq!(left, vec![holder_node.clone()]);
    let ended = within(Duration::from_secs(2), "the Hold stream ends", events.message()).await;
    assert_eq!(kind(&ended.expect_err("the stream fails")), Some(ErrorKind::UnknownSession));

    // Nobody queues behind a ghost: once the holder lets go, the next contender holds at once.
    let (next, _kept_next) = kept_session(&channel, 10_000).await;
    let mut recipes_next = recipes.clone();
    let next_path = path.clone();
    let taking = tokio::spawn(async move { recipes_next.acquire(acquire(next, &next_path, None)).await });
    queue_of(&checker, &path, 2, LIMIT).await;
    recipes.clone().release(HandleRef { session: holder, handle: held.handle }).await.unwrap();
    let taken = within(Duration::from_secs(5), "the next contender holds", taking).await.unwrap();
    taken.expect("the lock passes to the next live contender");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_ended_outside_its_stream_is_told_why() {
    let daemon = daemon().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let path = unique("sessions-told");
    let mut recipes = RecipesClient::new(channel.clone());
    let (session, _kept) = kept_session(&channel, 10_000).await;

    // A unary Release of the handle a Hold stream holds: the stream is told `released`; its own
    // release then answers at once, and the stream takes the next claim.
    let (steps, mut events) = hold_stream(&channel).await;
    step(&steps, Step::Acquire(acquire(session, &path, None))).await;
    let Event::Claim(claim) = next_event(&mut events, "the claim").await else { panic!("not a claim") };
    recipes.release(HandleRef { session, handle: claim.handle }).await.unwrap();
    let Event::Lost(lost) = next_event(&mut events, "told of the release").await else { panic!("not lost") };
    assert_eq!(lost.loss_reason(), LossReason::Released, "{lost:?}");
    within(LIMIT, "the node goes", wait_gone(&checker, &claim.node)).await;
    step(&steps, Step::Release(Empty {})).await;
    assert!(matches!(next_event(&mut events, "released").await, Event::Released(_)));
    step(&steps, Step::Acquire(acquire(session, &path, None))).await;
    let Event::Claim(again) = next_event(&mut events, "the next claim").await else { panic!("not a claim") };

    // A Lost stream on a unary claim of the same session.
    let (other, _kept_other) = kept_session(&channel, 10_000).await;
    let other_path = unique("sessions-told-lost");
    let unary = recipes.acquire(acquire(other, &other_path, None)).await.unwrap().into_inner();
    let mut lost_stream =
        recipes.lost(HandleRef { session: other, handle: unary.handle }).await.unwrap().into_inner();

    // The client sessions closed: both are told their client session ended.
    let mut sessions = SessionsClient::new(channel.clone());
    sessions.close(SessionRef { session }).await.unwrap();
    let Event::Lost(lost) = next_event(&mut events, "told of the session's end").await else {
        panic!("not lost")
    };
    assert_eq!(lost.loss_reason(), LossReason::ClientSessionEnded, "{lost:?}");
    within(LIMIT, "the node goes", wait_gone(&checker, &again.node)).await;
    sessions.close(SessionRef { session: other }).await.unwrap();
    let lost =
        within(LIMIT, "the Lost stream tells", lost_stream.message()).await.unwrap().expect("an event");
    assert_eq!(lost.loss_reason(), LossReason::ClientSessionEnded, "{lost:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_daemon_tells_its_claims_their_session_closed() {
    let daemon = daemon().await;
    let channel = daemon.channel().await;
    let mut recipes = RecipesClient::new(channel.clone());
    let (session, _kept) = kept_session(&channel, 10_000).await;
    let (steps, mut events) = hold_stream(&channel).await;
    step(&steps, Step::Acquire(acquire(session, &unique("sessions-stop-hold"), None))).await;
    let Event::Claim(_) = next_event(&mut events, "the claim").await else { panic!("not a claim") };
    let unary =
        recipes.acquire(acquire(session, &unique("sessions-stop-lost"), None)).await.unwrap().into_inner();
    let mut lost_stream =
        recipes.lost(HandleRef { session, handle: unary.handle }).await.unwrap().into_inner();

    unsafe { libc::kill(daemon.pid() as i32, libc::SIGTERM) };
    let Event::Lost(lost) = next_event(&mut events, "the Hold stream is told").await else {
        panic!("not lost")
    };
    assert_eq!(lost.loss_reason(), LossReason::SessionClosed, "{lost:?}");
    let lost =
        within(LIMIT, "the Lost stream tells", lost_stream.message()).await.unwrap().expect("an event");
    assert_eq!(lost.loss_reason(), LossReason::SessionClosed, "{lost:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_kept_by_two_streams_outlives_the_first() {
    let daemon = daemon().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let path = unique("sessions-two-streams");
    let ttl_ms = 1500;
    let (session, first) = kept_session(&channel, ttl_ms).await;
    // A client that reconnects opens its new stream before it lets the old one go.
    let second = keepalive_stream(&Daemon::channel(&daemon).await, session, ttl_ms).await;
    let held = RecipesClient::new(channel.clone()).acquire(acquire(session, &path, None)).await.unwrap();
    let node = held.into_inner().node;
    drop(first);
    // Two TTLs later the node is still there, untouched: nothing was deleted.
    let (stat, watcher) = checker.check_and_watch_stat(&node).await.unwrap();
    assert!(stat.is_some(), "held");
    let changed = tokio::time::timeout(Duration::from_millis(2 * ttl_ms), watcher.changed()).await;
    assert!(changed.is_err(), "the claim's node changed after the first stream ended: {changed:?}");
    // The last stream's end ends it.
    drop(second);
    within(Duration::from_secs(5), "the node goes with the last stream", wait_gone(&checker, &node)).await;
}

/// Sends one keepalive (or `end`) for `session` on a KeepAlive stream, and reads its answer:
/// the TTL the daemon gives it, none for an end.
async fn answer(
    tx: &tokio::sync::mpsc::Sender<KeepAliveRequest>,
    replies: &mut tonic::Streaming<wazoo_proto::KeepAliveReply>,
    session: u64,
    end: bool,
) -> Option<u64> {
    tx.send(KeepAliveRequest { session, end }).await.unwrap();
    if end {
        return None;
    }
    let reply = within(LIMIT, "a keepalive answer", replies.message()).await.unwrap().expect("an answer");
    assert_eq!(reply.session, session, "answers come in order, none for an end");
    Some(reply.ttl_ms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_stream_keeps_many_sessions_and_lets_each_go_alone() {
    let daemon = daemon().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    // A TTL long enough that nothing here ends by it.
    let ttl_ms = 20_000;
    let mut ids = Vec::new();
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let id = silent_session(&channel, ttl_ms).await;
        let held = RecipesClient::new(channel.clone())
            .acquire(acquire(id, &unique("sessions-one-stream"), None))
            .await
            .unwrap();
        ids.push(id);
        nodes.push(held.into_inner().node);
    }
    let (a, b, c) = (ids[0], ids[1], ids[2]);
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let mut replies =
        SessionsClient::new(channel.clone()).keep_alive(ReceiverStream::new(rx)).await.unwrap().into_inner();
    for id in [a, b, c] {
        assert_eq!(answer(&tx, &mut replies, id, false).await, Some(ttl_ms), "{id} is kept");
    }

    // An end lets the one session go at once, with what it holds.
    answer(&tx, &mut replies, a, true).await;
    within(Duration::from_secs(5), "the ended session's node goes", wait_gone(&checker, &nodes[0])).await;

    // A session closed meanwhile is told so (TTL 0); the stream goes on for the others.
    SessionsClient::new(channel.clone()).close(SessionRef { session: b }).await.unwrap();
    assert_eq!(answer(&tx, &mut replies, b, false).await, Some(0), "the closed session is no longer kept");
    assert_eq!(answer(&tx, &mut replies, c, false).await, Some(ttl_ms), "the stream still keeps the third");
    assert!(checker.check_stat(&nodes[2]).await.unwrap().is_some(), "the third still holds");

    // The stream's end ends the rest.
    drop(tx);
    within(
        Duration::from_secs(5),
        "the last session's node goes with the stream",
        wait_gone(&checker, &nodes[2]),
    )
    .await;
    assert!(within(LIMIT, "the stream ends", replies.message()).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_client_cannot_end_another_clients_session() {
    let daemon = daemon().await;
    let channel = daemon.channel().await;
    let checker = client(&zk().address()).await;
    let (victim, _kept) = kept_session(&channel, 10_000).await;
    let node = RecipesClient::new(channel.clone())
        .acquire(acquire(victim, &unique("sessions-guess"), None))
        .await
        .unwrap()
        .into_inner()
        .node;
    // The attacker knows only its own session's id, and tries the ids around it.
    let attacker = silent_session(&channel, 10_000).await;
    let mut sessions = SessionsClient::new(channel.clone());
    for delta in 1..=64u64 {
        for guess in [attacker.wrapping_add(delta), attacker.wrapping_sub(delta)] {
            let refused =
                sessions.close(SessionRef { session: guess }).await.expect_err("not the attacker's");
            assert_eq!(kind(&refused), Some(ErrorKind::UnknownSession), "guess {guess}: {refused:?}");
        }
    }
    assert!(checker.check_stat(&node).await.unwrap().is_some(), "the victim still holds");
    // Ids spread over the whole range: of 32 sessions, some are above 2^32.
    let mut ids = Vec::new();
    for _ in 0..32 {
        ids.push(silent_session(&channel, 1000).await);
    }
    assert!(ids.iter().any(|id| *id > u64::from(u32::MAX)), "{ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_instance_left_is_a_limit_not_a_missing_recipe() {
    let dir = tempfile::tempdir().unwrap();
    let name = unique("pool").replace('/', "").to_lowercase();
    let token = format!("{name}-token-0123456789");
    let tenants = serde_json::json!({"tenants": [
        {"name": name, "token": token, "zookeeper_secret": "s", "root": format!("/sessions/{name}"),
         "limits": {"instances": 4}},
    ]});
    let file = dir.path().join("tenants.json");
    std::fs::write(&file, tenants.to_string()).unwrap();
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--tenants", file.to_str().unwrap()]).await;
    let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    let channel = daemon.channel().await;
    let authed = move |mut request: tonic::Request<()>| {
        request.metadata_mut().insert("authorization", bearer.clone());
        Ok(request)
    };
    let mut sessions = SessionsClient::with_interceptor(channel.clone(), authed.clone());
    let recipes = RecipesClient::with_interceptor(channel.clone(), authed);
    let session = sessions
        .open(OpenRequest { ttl_ms: 60_000, name: "pool".into() })
        .await
        .unwrap()
        .into_inner()
        .session;
    // Ten contenders on one lock at once: four instances hold or wait, the rest find none left.
    let path = "/pool";
    let mut calls = Vec::new();
    for _ in 0..10 {
        let mut recipes = recipes.clone();
        calls.push(tokio::spawn(async move { recipes.acquire(acquire(session, path, Some(3000))).await }));
    }
    let mut exhausted = 0;
    for call in calls {
        match within(LIMIT, "a contender's answer", call).await.unwrap() {
            Ok(_) => {}
            Err(status) => match kind(&status) {
                Some(ErrorKind::Timeout) => {}
                Some(ErrorKind::LimitExceeded) => {
                    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                    exhausted += 1;
                }
                other => panic!("{other:?}: {status:?}"),
            },
        }
    }
    assert!(exhausted > 0, "ten contenders on four instances: some must find none left");
    let _ = sessions.close(SessionRef { session }).await;
}

/// A node in the lock format whose holder ignores revocation: a plain ephemeral node of the
/// checker's own session.
async fn deaf_holder(checker: &zookeeper_client::Client, dir: &str) -> String {
    let node = format!("{dir}/_c_00000000-0000-0000-0000-000000000000-lock-0000000000");
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    // `dir`'s parent first: it may not exist yet.
    let parent = &dir[..dir.rfind('/').unwrap()];
    for path in [parent, dir] {
        match checker.create(path, b"", &persistent).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => panic!("creating {path}: {e}"),
        }
    }
    let ephemeral = zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    checker.create(&node, b"", &ephemeral).await.unwrap();
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revoke_without_a_grace_says_it_only_asked() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    for through_daemon in [false, true] {
        let node = deaf_holder(&checker, &unique("sessions-revoke")).await;
        let mut command = if through_daemon { daemon.wazoo() } else { cli() };
        let (code, stdout, stderr) = output(command.args(["revoke", &node])).await;
        assert_eq!((code, stdout.as_str()), (0, "asked\n"), "{stderr}");
        let (data, _) = checker.get_data(&node).await.unwrap();
        assert_eq!(data, b"__REVOKE__", "asked");
        let mut command = if through_daemon { daemon.wazoo() } else { cli() };
        let (code, stdout, stderr) =
            output(command.args(["revoke", &node, "--grace", "100ms", "--json"])).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
            serde_json::json!({"node": node, "outcome": "forced"})
        );
        assert!(checker.check_stat(&node).await.unwrap().is_none(), "forced: deleted");
    }
    // The wire says so too: no grace is ASKED, and `released` is false.
    let node = deaf_holder(&checker, &unique("sessions-revoke-wire")).await;
    let mut recipes = RecipesClient::new(daemon.channel().await);
    let request = RevokeRequest { node: node.clone(), grace_ms: None, recipe: String::new() };
    let reply = recipes.revoke(request).await.unwrap().into_inner();
    assert_eq!((reply.outcome(), reply.released), (RevokeOutcome::Asked, false));
}

/// Freezes a process (SIGSTOP) until dropped (SIGCONT).
struct Frozen(u32);

impl Frozen {
    fn new(pid: u32) -> Frozen {
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// The most a client may take to give up on a frozen daemon: its claim counts as lost at 2/3
/// of the session's TTL (here 3 s: 2 s), or its connection is dropped after
/// `wazoo_client::SILENCE` (3 s); then the command's grace (1 s) and a margin for a loaded
/// machine.
const FROZEN_BOUND: Duration = Duration::from_secs(9);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_daemon_holds_up_no_client() {
    let daemon = daemon().await;
    let path = unique("sessions-frozen");
    let config = format!("{}/config", unique("sessions-frozen-config"));
    let watched = unique("sessions-frozen-watch");
    let checker = client(&zk().address()).await;
    // The value's parents are made with it (`/t` among them), then the watched node beside it.
    let (code, _, stderr) = output(daemon.wazoo().args(["config", "set", &config, "v1"])).await;
    assert_eq!(code, 0, "{stderr}");
    checker
        .create(
            &watched,
            b"",
            &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();

    // A guarded command through the daemon, a watch of each kind, and the Rust client's claim.
    let mut guarded = Running::start(daemon.wazoo().args([
        "--session-timeout",
        "3s",
        "lock",
        &path,
        "--grace",
        "1s",
        "--",
        "sh",
        "-c",
        &procs::forks(),
    ]));
    let cmd = guarded.pids().await;
    let mut watches = Vec::new();
    for args in [
        vec!["watch", "-r", watched.as_str()],
        vec!["config", "watch", config.as_str()],
        vec!["leader", "--watch", path.as_str()],
    ] {
        let mut watch = daemon.wazoo();
        watch.args(&args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let mut child = watch.spawn().unwrap();
        // Each prints its first state (or its readiness line) before the freeze.
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        within(LIMIT, &format!("{args:?} starts"), async {
            tokio::select! {
                line = out.next_line() => line.unwrap(),
                line = err.next_line() => line.unwrap(),
            }
        })
        .await;
        // Its stdout stays read: a reader gone would make its next line a SIGPIPE (exit 141).
        watches.push((args.join(" "), child, err, out));
    }
    let rust = wazoo_client::Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let options = wazoo_client::LockOptions { ttl: Duration::from_secs(3), ..Default::default() };
    let claim = rust.lock(&unique("sessions-frozen-rust"), options).await.unwrap();
    let lost = claim.lost();

    let frozen = Frozen::new(daemon.pid());
    let started = Instant::now();
    // The guarded command is stopped and wazoo exits 4 (lost).
    let (code, stderr) = within(FROZEN_BOUND, "wazoo lock exits", guarded.exit()).await;
    assert_eq!(code, 4, "{stderr}");
    cmd.assert_gone("the guarded command");
    // Each watch says on stderr that the daemon went silent and exits 69.
    for (what, mut child, mut err, mut out) in watches {
        let status = within(FROZEN_BOUND, &format!("{what} exits"), child.wait()).await.unwrap();
        let mut said = Vec::new();
        while let Ok(Some(line)) = err.next_line().await {
            said.push(line);
        }
        while let Ok(Some(line)) = out.next_line().await {
            said.push(format!("(stdout) {line}"));
        }
        assert_eq!(status.code(), Some(69), "{what}: {said:?}");
        assert!(said.iter().any(|l| l.contains(&daemon.grpc)), "{what} names the daemon: {said:?}");
    }
    // The Rust client's claim is lost, and letting it go returns.
    within(FROZEN_BOUND, "the Rust claim is lost", lost).await;
    within(FROZEN_BOUND, "the Rust claim's release returns", claim.release()).await.ok();
    assert!(started.elapsed() < FROZEN_BOUND * 2, "{:?}", started.elapsed());
    drop(frozen);
}
