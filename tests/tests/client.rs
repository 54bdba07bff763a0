//! `wazoo-client`, the Rust client of the daemon with no wasmtime: a lock through a real
//! `wazoo serve` on a real ZooKeeper excludes, fences, reports its loss and lets go; the
//! example program does the same from the command line.

use std::time::Duration;

use tonic::Code;
use wazoo_client::{Client, LockOptions, Lost};
use wazoo_tests::daemon::{output, Daemon};
use wazoo_tests::procs::{through, Running};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

async fn daemon() -> Daemon {
    Daemon::start(&plugins(), &root().join("target/component-cache")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_through_the_client_excludes_fences_and_reports_its_loss() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let path = unique("client-lock");

    let first = client.lock(&path, LockOptions::default()).await.unwrap();
    let stat = checker.check_stat(first.node()).await.unwrap().expect("the holder's node exists");
    assert_ne!(stat.ephemeral_owner, 0, "the lock node is ephemeral");
    assert_eq!(first.token(), stat.czxid, "the fencing token is the node's czxid");
    assert_eq!(first.recipe_version().len(), 12, "{}", first.recipe_version());

    // Taken: a bounded wait ends with DeadlineExceeded and leaves no node behind.
    let options = LockOptions { timeout: Some(Duration::from_millis(300)), ..LockOptions::default() };
    let refused = client.lock(&path, options).await.err().expect("the lock is taken");
    assert_eq!(refused.code, Code::DeadlineExceeded, "{refused:?}");
    assert_eq!(ephemerals(&checker, &path).await.len(), 1, "only the holder's node is left");

    // A waiter gets it once the holder lets go, with a greater token.
    let waiting = tokio::spawn({
        let client = client.clone();
        let path = path.clone();
        async move { client.lock(&path, LockOptions::default()).await }
    });
    wait_children(&checker, &path, 2).await;
    let first_token = first.token();
    first.release().await.unwrap();
    let second = within(LIMIT, "the waiter takes the lock", waiting).await.unwrap().unwrap();
    assert!(second.token() > first_token, "{} > {first_token}", second.token());

    // Its node deleted by someone else: lost() says so.
    let lost = second.lost();
    checker.delete(second.node(), None).await.unwrap();
    assert_eq!(within(LIMIT, "the loss is reported", lost).await, Lost::NodeDeleted);
    drop(second);
    within(LIMIT, "nothing is left", async {
        while !ephemerals(&checker, &path).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_takes_claims_one_after_another_on_one_stream() {
    use wazoo_client::proto::{hold_request::Step, Empty, HoldRequest, RevokeRequest};
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let path = unique("client-hold");
    let session = client.session(Duration::from_secs(10), "holder a".into()).await.unwrap();
    let other = client.session(Duration::from_secs(10), "holder b".into()).await.unwrap();
    let mut a = client.holder(&session).await.unwrap();
    let mut b = client.holder(&other).await.unwrap();
    let options = LockOptions::default();

    // Held: the node is ephemeral, the token its czxid.
    let first = a.acquire(&path, &options).await.unwrap();
    let stat = checker.check_stat(&first.node).await.unwrap().expect("the holder's node exists");
    assert_eq!(first.fencing_token, stat.czxid, "the fencing token is the node's czxid");

    // Taken: b waits, and takes it once a releases, with a greater token.
    let waiting = tokio::spawn({
        let path = path.clone();
        async move {
            let claim = b.acquire(&path, &LockOptions::default()).await;
            (b, claim)
        }
    });
    wait_children(&checker, &path, 2).await;
    a.release().await.unwrap();
    let (mut b, second) = within(LIMIT, "the waiter takes the lock", waiting).await.unwrap();
    let second = second.unwrap();
    assert!(second.fencing_token > first.fencing_token, "{second:?} after {first:?}");
    assert!(checker.check_stat(&first.node).await.unwrap().is_none(), "a's released node is gone");

    // The same stream takes the next claim: a waits behind b. b's node revoked: b is told, and
    // its node stays until it releases; then a holds.
    let waiting = tokio::spawn({
        let path = path.clone();
        async move {
            let claim = a.acquire(&path, &LockOptions::default()).await;
            (a, claim)
        }
    });
    wait_children(&checker, &path, 2).await;
    let revoke = RevokeRequest { node: second.node.clone(), grace_ms: None, recipe: String::new() };
    client.recipes().revoke(revoke).await.unwrap();
    assert_eq!(within(LIMIT, "b is told of the revocation", b.lost()).await, Lost::Revoked);
    assert!(checker.check_stat(&second.node).await.unwrap().is_some(), "a revoked node stays until released");
    b.release().await.unwrap();
    let (mut a, third) = within(LIMIT, "a takes the lock", waiting).await.unwrap();
    let third = third.unwrap();
    assert!(third.fencing_token > second.fencing_token);

    // Its node deleted by someone else: a is told so.
    checker.delete(&third.node, None).await.unwrap();
    assert_eq!(within(LIMIT, "a is told of the deletion", a.lost()).await, Lost::NodeDeleted);
    a.release().await.unwrap();

    // A bounded wait on a taken lock fails with DeadlineExceeded and leaves no node behind.
    let fourth = b.acquire(&path, &options).await.unwrap();
    let bounded = LockOptions { timeout: Some(Duration::from_millis(300)), ..LockOptions::default() };
    let refused = a.acquire(&path, &bounded).await.err().expect("the lock is taken");
    assert_eq!(refused.code, Code::DeadlineExceeded, "{refused:?}");
    let left = ephemerals(&checker, &path).await;
    assert_eq!(left, std::collections::BTreeSet::from([fourth.node.clone()]), "only b's node is left");

    // A dropped holder lets go of what it holds; its session stays open.
    drop(b);
    within(LIMIT, "the dropped holder's node goes", wait_gone(&checker, &fourth.node)).await;
    let mut c = client.holder(&other).await.expect("the session is still open");
    let fifth = c.acquire(&path, &options).await.unwrap();

    // Its client session closed: the claim is let go and the holder is told why.
    other.close().await;
    let lost = within(LIMIT, "c is told its session ended", c.lost()).await;
    assert_eq!(lost, Lost::ClientSessionEnded);
    within(LIMIT, "the closed session's node goes", wait_gone(&checker, &fifth.node)).await;

    // Steps out of turn end the stream with INVALID_ARGUMENT: a release with nothing held, an
    // acquire while one is held.
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let mut events =
        client.recipes().hold(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    tx.send(HoldRequest { step: Some(Step::Release(Empty {})) }).await.unwrap();
    let refused = events.message().await.err().expect("a release with nothing held is refused");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    let mut d = client.holder(&session).await.unwrap();
    d.acquire(&path, &options).await.unwrap();
    let again = d.acquire(&path, &options).await.err().expect("a second acquire is refused");
    assert_eq!(again.code, Code::InvalidArgument, "{again:?}");
    within(LIMIT, "the refused stream's claim is let go", async {
        while !ephemerals(&checker, &path).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_claim_lets_go_and_an_unreachable_daemon_is_one_error() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let path = unique("client-drop");
    let held = client
        .lock(&path, LockOptions { ttl: Duration::from_secs(1), ..LockOptions::default() })
        .await
        .unwrap();
    let node = held.node().to_string();
    drop(held);
    within(LIMIT, "the dropped claim's node goes", wait_gone(&checker, &node)).await;

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = listener.local_addr().unwrap().to_string();
    let refused =
        Client::connect(&silent, None, Duration::from_millis(500)).await.err().expect("nobody answers");
    assert!(matches!(refused, wazoo_client::ConnectError::Unreachable(_)), "{refused}");
}

/// The names of the sessions the daemon has open.
async fn open_sessions(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client.list_sessions().await.unwrap().into_iter().map(|s| s.name).collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_sessions_share_one_keepalive_stream_and_each_goes_alone() {
    // One stream allowed: a second KeepAlive stream would be refused.
    let cache = root().join("target/component-cache");
    let daemon = Daemon::start_with(&plugins(), &cache, &["--max-streams", "1"]).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let short = Duration::from_secs(1);
    let mut sessions = Vec::new();
    for i in 0..4 {
        sessions.push(client.session(short, format!("short-{i}")).await.unwrap());
    }
    let long = client.session(Duration::from_secs(30), "long".into()).await.unwrap();
    let all = ["long", "short-0", "short-1", "short-2", "short-3"];
    assert_eq!(open_sessions(&client).await, all);

    // Three of the short TTLs later, none has ended: the one stream keeps them all.
    let mut ended = tokio::task::JoinSet::new();
    for session in &sessions {
        ended.spawn(session.ended());
    }
    let early = tokio::time::timeout(3 * short, ended.join_next()).await;
    assert!(early.is_err(), "a session ended: {early:?}");
    assert_eq!(open_sessions(&client).await, all);

    // The long one dropped goes alone, long before its TTL would end it.
    drop(long);
    within(Duration::from_secs(10), "the dropped session closes", async {
        while open_sessions(&client).await.contains(&"long".to_string()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(open_sessions(&client).await, all[1..]);
    assert!(tokio::time::timeout(2 * short, ended.join_next()).await.is_err(), "the others live on");

    // The stream ends with its last session: another connection may then open one.
    drop(sessions);
    let other = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let taken_over = within(Duration::from_secs(10), "the stream's slot is free again", async {
        loop {
            match other.session(short, "other".into()).await {
                Ok(session) => break session,
                Err(e) => {
                    assert_eq!(e.code, Code::ResourceExhausted, "{e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    })
    .await;
    assert_eq!(open_sessions(&client).await, ["other"]);
    // The first connection's next session needs a stream again: refused while the other holds
    // the only one, then opened once that one is gone.
    let refused = client.session(short, "again".into()).await.err().expect("no stream left");
    assert_eq!(refused.code, Code::ResourceExhausted, "{refused}");
    drop(taken_over);
    within(Duration::from_secs(10), "a new stream for the first connection", async {
        while client.session(short, "again".into()).await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_program_takes_a_lock_through_the_daemon() {
    let example = wazoo_bin().with_file_name("examples").join("lock");
    assert!(example.exists(), "{} is built by `cargo test --workspace` (make test)", example.display());
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let path = unique("client-example");
    let mut holder =
        Running::start(tokio::process::Command::new(&example).args([&daemon.grpc, &path]).kill_on_drop(true));
    let line = holder.line("the example holds the lock").await;
    let (node, token) = line.strip_prefix("held ").and_then(|l| l.split_once(" token ")).expect(&line);
    let stat = checker.check_stat(node).await.unwrap().expect("the node exists");
    assert_eq!(token.parse::<i64>().unwrap(), stat.czxid);
    // The CLI through the same daemon finds it taken.
    let (code, _, stderr) = output(through(&daemon).args(["lock", &path, "-n"])).await;
    assert_eq!(code, 3, "{stderr}");
    holder.signal(libc::SIGINT);
    assert_eq!(holder.line("the example lets go").await, "released");
    assert_eq!(holder.exit().await.0, 0);
    // A release is sent without waiting for ZooKeeper's answer: the node goes a moment later.
    within(LIMIT, "the node goes", wait_gone(&checker, node)).await;
}
