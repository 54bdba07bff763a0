//! Typed errors on the wire: through `wazoo-client`, against a real `wazoo serve` on a real
//! ZooKeeper, every failed call carries its `ErrorKind` (a `google.rpc.ErrorInfo` in the status
//! details) and every lost claim its `LossReason`. The assertions are on the enums and codes,
//! never on message text.

use std::time::Duration;

use tonic::Code;
use wazoo_client::proto::{
    AcquireRequest, ConfigSetRequest, Family, GroupJoinRequest, HandleRef, LostEvent, PathRequest,
    RevokeRequest,
};
use wazoo_client::{error_kind, Client, Error, ErrorKind, LockOptions, LossReason, Lost, Session};
use wazoo_tests::daemon::Daemon;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

async fn daemon() -> Daemon {
    Daemon::start(&plugins(), &root().join("target/component-cache")).await
}

/// The kind, code and (typed) error of a failed call.
fn failed<T: std::fmt::Debug>(what: &str, outcome: Result<T, tonic::Status>) -> Error {
    let status = outcome.expect_err(what);
    let error = Error::from(&status);
    assert_eq!(error.kind, error_kind(&status), "{what}: {status:?}");
    assert_eq!(error.code, status.code(), "{what}");
    error
}

/// The error of a failed call of the client's own (which already reads the status).
fn refused<T: std::fmt::Debug>(what: &str, outcome: Result<T, Error>) -> Error {
    outcome.expect_err(what)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_set_at_a_stale_version_is_bad_version() {
    let daemon = daemon().await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let mut recipes = client.recipes();
    let path = unique("wire-config");
    let set = |data: &[u8], expected_version| ConfigSetRequest {
        path: path.clone(),
        data: data.to_vec(),
        expected_version,
        recipe: String::new(),
    };
    let first = recipes.config_set(set(b"one", None)).await.unwrap().into_inner();
    let second = recipes.config_set(set(b"two", Some(first.version))).await.unwrap().into_inner();
    assert!(second.version > first.version, "{second:?} after {first:?}");

    let stale =
        failed("a set at the version before", recipes.config_set(set(b"three", Some(first.version))).await);
    assert_eq!(
        (stale.kind, stale.code),
        (Some(ErrorKind::BadVersion), Code::FailedPrecondition),
        "{stale:?}"
    );
    let now = recipes.config_get(PathRequest { path: path.clone(), recipe: String::new() }).await.unwrap();
    assert_eq!(now.into_inner().data, b"two", "the stale set changed nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_that_times_out_is_timeout_and_a_taken_name_node_exists() {
    let daemon = daemon().await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let path = unique("wire-timeout");
    let held = client.lock(&path, LockOptions::default()).await.unwrap();
    let options = LockOptions { timeout: Some(Duration::from_millis(300)), ..LockOptions::default() };
    let waited =
        refused("the lock is taken", client.lock(&path, options).await.map(|c| c.node().to_string()));
    assert_eq!((waited.kind, waited.code), (Some(ErrorKind::Timeout), Code::DeadlineExceeded), "{waited:?}");
    held.release().await.unwrap();

    // A group member's name taken by another member.
    let group = unique("wire-group");
    let session = client.session(Duration::from_secs(10), "wire".into()).await.unwrap();
    let join = || GroupJoinRequest {
        session: session.id(),
        path: group.clone(),
        name: "a".into(),
        data: Vec::new(),
        recipe: String::new(),
    };
    client.recipes().group_join(join()).await.unwrap();
    let taken = failed("the name is taken", client.recipes().group_join(join()).await);
    assert_eq!((taken.kind, taken.code), (Some(ErrorKind::NodeExists), Code::AlreadyExists), "{taken:?}");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sessions_handles_recipes_and_wrong_handles_are_told_apart() {
    let daemon = daemon().await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let mut recipes = client.recipes();
    let path = unique("wire-unknown");
    let acquire = |session: u64, recipe: &str| AcquireRequest {
        session,
        path: path.clone(),
        family: Family::Lock as i32,
        timeout_ms: Some(5000),
        recipe: recipe.into(),
        ..Default::default()
    };

    // A session never opened, and one closed.
    let never = failed("no such session", recipes.acquire(acquire(u64::MAX, "")).await);
    assert_eq!((never.kind, never.code), (Some(ErrorKind::UnknownSession), Code::NotFound), "{never:?}");
    let closed = client.session(Duration::from_secs(10), "wire closed".into()).await.unwrap();
    let closed_id = closed.id();
    closed.close().await;
    let gone = failed("a closed session", recipes.release(HandleRef { session: closed_id, handle: 1 }).await);
    assert_eq!((gone.kind, gone.code), (Some(ErrorKind::UnknownSession), Code::NotFound), "{gone:?}");

    // A handle the session does not hold, on Release and on Lost.
    let session = client.session(Duration::from_secs(10), "wire".into()).await.unwrap();
    let nothing = HandleRef { session: session.id(), handle: u64::MAX };
    let released = failed("no such handle", recipes.release(nothing).await);
    assert_eq!(
        (released.kind, released.code),
        (Some(ErrorKind::UnknownHandle), Code::NotFound),
        "{released:?}"
    );
    let followed = failed("no such handle", recipes.lost(nothing).await.map(drop));
    assert_eq!(
        (followed.kind, followed.code),
        (Some(ErrorKind::UnknownHandle), Code::NotFound),
        "{followed:?}"
    );

    // A handle of another kind of claim: a lock acked as a queue claim.
    let claim = recipes.acquire(acquire(session.id(), "")).await.unwrap().into_inner();
    let lock = HandleRef { session: session.id(), handle: claim.handle };
    let acked = failed("a lock is no queue claim", recipes.queue_ack(lock).await);
    assert_eq!(
        (acked.kind, acked.code),
        (Some(ErrorKind::WrongHandle), Code::FailedPrecondition),
        "{acked:?}"
    );
    recipes.release(lock).await.expect("the lock is still held after the refused ack");

    // A recipe that is not there.
    let missing = failed("no such recipe", recipes.acquire(acquire(session.id(), "no-such-recipe")).await);
    assert_eq!(
        (missing.kind, missing.code),
        (Some(ErrorKind::RecipeUnavailable), Code::FailedPrecondition),
        "{missing:?}"
    );
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_path_is_invalid_path() {
    let daemon = daemon().await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    for path in ["relative/lock", "/t/trailing/", "/t/a//b"] {
        let refused =
            refused(path, client.lock(path, LockOptions::default()).await.map(|c| c.node().to_string()));
        assert_eq!(
            (refused.kind, refused.code),
            (Some(ErrorKind::InvalidPath), Code::InvalidArgument),
            "{path}: {refused:?}"
        );
    }
    let config =
        client.recipes().config_get(PathRequest { path: "relative".into(), recipe: String::new() }).await;
    let refused = failed("a relative config path", config);
    assert_eq!(
        (refused.kind, refused.code),
        (Some(ErrorKind::InvalidPath), Code::InvalidArgument),
        "{refused:?}"
    );
}

/// A lock held in a session of its own, with a Lost stream of the test's own opened on it
/// before it is followed as a [`wazoo_client::Claim`].
async fn held(client: &Client, path: &str) -> (wazoo_client::Claim, tonic::Streaming<LostEvent>, String) {
    let session: Session = client.session(Duration::from_secs(10), format!("wire {path}")).await.unwrap();
    let request = AcquireRequest {
        session: session.id(),
        path: path.to_string(),
        family: Family::Lock as i32,
        timeout_ms: Some(30_000),
        ..Default::default()
    };
    let claim = client.recipes().acquire(request).await.unwrap().into_inner();
    let handle = HandleRef { session: session.id(), handle: claim.handle };
    let events = client.recipes().lost(handle).await.unwrap().into_inner();
    let node = claim.node.clone();
    (client.follow(session, claim).await.unwrap(), events, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_node_deleted_by_another_client_is_lost_as_node_deleted() {
    let daemon = daemon().await;
    let checker = client(&zk().address()).await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let (claim, mut events, node) = held(&client, &unique("wire-deleted")).await;
    let lost = claim.lost();

    checker.delete(&node, None).await.unwrap();
    let event = within(LIMIT, "the Lost event", events.message()).await.unwrap().expect("one event");
    assert_eq!(event.loss_reason(), LossReason::NodeDeleted, "{event:?}");
    assert_eq!(within(LIMIT, "the claim's loss", lost).await, Lost::NodeDeleted);
    claim.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_lock_is_lost_as_revoked() {
    let daemon = daemon().await;
    let client = Client::connect(&daemon.grpc, None, Duration::from_secs(5)).await.unwrap();
    let (claim, mut events, node) = held(&client, &unique("wire-revoked")).await;
    let lost = claim.lost();

    // Another client asks the holder to let go (and never deletes its node).
    let revoking = tokio::spawn({
        let mut recipes = client.recipes();
        async move { recipes.revoke(RevokeRequest { node, grace_ms: None, recipe: String::new() }).await }
    });
    let event = within(LIMIT, "the Lost event", events.message()).await.unwrap().expect("one event");
    assert_eq!(event.loss_reason(), LossReason::Revoked, "{event:?}");
    assert_eq!(within(LIMIT, "the claim's loss", lost).await, Lost::Revoked);
    claim.release().await.unwrap();
    within(LIMIT, "the revoke call ends", revoking).await.unwrap().unwrap();
}
