//! Handing a ZooKeeper session from one host to another ([`Host::adopt`], [`Keeper::resume`]),
//! and what the session's old holder then sees. ZooKeeper lets any client that knows a session's
//! id and password resume it and does not tell the old holder; zookeeper-client 0.11 takes any
//! closed connection for a passing fault and reconnects with the session, which moves it back:
//!
//! - on one server (standalone, or both clients on one member), a connect with the session
//!   usually closes the session's other connection; the one still connecting then loses each
//!   round and gives up after 7/5 of the session timeout: mostly the adopter (the adoption
//!   fails), sometimes the holder (its client ends with the session `Expired`). And sometimes the
//!   server closes nothing and both serve the session side by side, each unaware of the other;
//! - on two members of an ensemble, the adoption succeeds and the old holder reads and syncs on
//!   unaware; its next write makes its member close its connection (the leader finds the session
//!   moved; the client sees `ConnectionLoss`, never `SessionMoved`), its reconnect moves the
//!   session back, and then the adopter's next write fails the same way, and so on;
//! - a holder cut off from ZooKeeper (a frozen proxy) gives up 7/5 of the timeout after it last
//!   heard from it; its requests fail with `SessionExpired`, and the adopter keeps the session.
//!
//! So whoever hands a session over must stop its old holder first (a process killed without
//! closing the session, or a client dropped with `Connector::with_detached`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wazoo_runtime::keeper::Keeper;
use wazoo_runtime::{Host, Live, SessionEnd};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;
use zookeeper_client::{Acls, Client, CreateMode, Error, SessionState, StateWatcher};

const LIMIT: Duration = Duration::from_secs(60);
/// The longest session the shared server's 200 ms tick allows: the cut-off holder gives up
/// after 7/5 of it.
const SESSION: Duration = Duration::from_secs(4);

/// Creates a directory of its own and an ephemeral node in it through `live`'s session.
async fn ephemeral(live: &Live, name: &str) -> String {
    let dir = unique(name);
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    live.client().mkdir(&dir, &open).await.unwrap();
    let node = format!("{dir}/held");
    live.client().create(&node, b"old", &CreateMode::Ephemeral.with_acls(Acls::anyone_all())).await.unwrap();
    node
}

/// The session that owns the ephemeral `node`, as another client sees it.
async fn owner(checker: &Client, node: &str) -> i64 {
    checker.check_stat(node).await.unwrap().expect("the ephemeral node is there").ephemeral_owner
}

/// Sets `node`'s data through `client`, again if a connection closed under the request (a race
/// on one server may still close one connection after it is decided): the session still there.
async fn set(client: &Client, node: &str, data: &[u8]) -> Result<(), Error> {
    for _ in 0..5 {
        match client.set_data(node, data, None).await {
            Err(Error::ConnectionLoss) => continue,
            done => return done.map(drop),
        }
    }
    Err(Error::ConnectionLoss)
}

/// Counts the times `client` lost its connection (entered `Disconnected`), until it ends.
fn count_disconnects(client: &Client) -> Arc<AtomicU32> {
    let count = Arc::new(AtomicU32::new(0));
    let (mut states, counted) = (client.state_watcher(), count.clone());
    tokio::spawn(async move {
        loop {
            let state = states.changed().await;
            if state == SessionState::Disconnected {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            if state.is_terminated() {
                return;
            }
        }
    });
    count
}

/// Waits, on `states` (taken while the client was connected), until the client has changed state
/// and is connected again: it has reconnected with its session.
async fn reconnected(states: &mut StateWatcher) {
    within(LIMIT, "the client reconnects", async {
        loop {
            match states.changed().await {
                SessionState::SyncConnected => return,
                state => assert!(!state.is_terminated(), "the session ended: {state}"),
            }
        }
    })
    .await
}

/// On one server, the holder and the adopter close each other's connection at every connect
/// (the server closes the session's older connection for the newer one). A client whose session
/// is established reconnects at once; one still connecting (zookeeper-client waits for the reply
/// to a ping after the connect response) loses its connection before its handshake is done and
/// tries again after a growing pause. So the first to finish a handshake while the other is
/// between tries keeps the session, and the other gives up after 7/5 of the session timeout:
/// mostly the holder keeps it (the adoption fails), sometimes the adopter (the holder's client
/// counts the session as expired). Sometimes the server does not close the holder's connection
/// at all (likely because ZooKeeper 3.8 unlists a session's connection by the session's id alone
/// when any connection of it closes), and both serve the session side by side. The node stays
/// the session's in every case.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_one_server_the_holder_and_the_adopter_race_for_the_session() {
    let host = Host::start(config(&zk().address(), SESSION)).await.unwrap();
    let checker = client(&zk().address()).await;
    let live = host.live().await.unwrap();
    let node = ephemeral(&live, "move-same").await;
    let (id, password) = live.session_parts();
    assert_eq!(id, live.session_id());
    let disconnects = count_disconnects(live.client());

    match within(LIMIT, "the adoption", host.adopt(id, password)).await {
        Err(refused) => {
            eprintln!("the holder kept the session after {} disconnects", disconnects.load(Ordering::SeqCst));
            let message = format!("{refused:#}");
            let expected = format!("cannot resume ZooKeeper session {id:#x} at {}: timeout", zk().address());
            assert!(message.starts_with(&expected), "{message}");
            assert!(message.contains("takes the session back"), "{message}");
            // Each try of the adopter closed the holder's connection; the holder came back each time.
            assert!(disconnects.load(Ordering::SeqCst) >= 1, "the holder's connection was never closed");
            set(live.client(), &node, b"still mine").await.expect("the holder's next write");
            assert!(live.ended().is_none());
            assert_eq!(owner(&checker, &node).await, id);
            let again = host.live().await.unwrap();
            assert!(Arc::ptr_eq(&again, &live), "the host kept its session");
        }
        Ok(adopted) => {
            let taken = adopted.live().await.unwrap();
            assert_eq!(taken.session_id(), id, "the adopted host runs on the same session");
            assert_eq!(taken.generation, 1);
            // The one still connecting loses each round to the one connected, until it gives up
            // (7/5 of the session timeout after its last handshake): mostly the holder, unless
            // the race turns again. Or the server never closed the holder's connection at all.
            let bound = SESSION * 12 / 5;
            let outcome = tokio::time::timeout(bound, async {
                tokio::select! {
                    state = live.wait_ended() => (state, true),
                    state = taken.wait_ended() => (state, false),
                }
            })
            .await;
            let Ok((state, holder_lost)) = outcome else {
                // Both serve the session side by side: on one server, nothing tells them apart.
                eprintln!("the adopter took the session; the holder was never told");
                assert!(live.ended().is_none() && taken.ended().is_none());
                set(live.client(), &node, b"old").await.expect("the holder writes");
                set(taken.client(), &node, b"new").await.expect("the adopter writes");
                assert_eq!(owner(&checker, &node).await, id);
                return;
            };
            eprintln!(
                "the adopter took the session; the {} gave up",
                ["adopter", "holder"][holder_lost as usize]
            );
            assert_eq!(state, SessionEnd::Expired);
            let (lost, kept) = if holder_lost { (&live, &taken) } else { (&taken, &live) };
            let write = lost.client().set_data(&node, b"lost", None).await;
            assert_eq!(write.unwrap_err(), Error::SessionExpired, "the loser's next write");
            set(kept.client(), &node, b"kept").await.expect("the winner writes");
            assert!(kept.ended().is_none());
            assert_eq!(owner(&checker, &node).await, id);
            if holder_lost {
                // The old host, not an adopter, starts a new session of its own.
                let fresh = host.live().await.unwrap();
                assert_eq!(fresh.generation, 2);
                assert_ne!(fresh.session_id(), id);
            } else {
                let error = adopted.live().await.expect_err("no new session for an adopted host");
                assert_eq!(format!("{error:#}"), format!("the adopted ZooKeeper session {id:#x} ended"));
            }
        }
    }
}

/// Once its holder is cut off (a frozen proxy: a stopped process or a partition), the session
/// is adopted: same id, same ephemeral node, generation 1. The cut-off holder's next request
/// fails with `SessionExpired` when its client gives the session up, 7/5 of the timeout after
/// it last heard from ZooKeeper; the adopter keeps the session. A host that adopted a session
/// builds no other when that one ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_holder_loses_its_session_to_the_adopter() {
    let (old_link, new_link) = (Proxy::start(&zk().address()).await, Proxy::start(&zk().address()).await);
    let old = Host::start(config(&old_link.address(), SESSION)).await.unwrap();
    let host = Host::start(config(&new_link.address(), SESSION)).await.unwrap();
    let checker = client(&zk().address()).await;
    let live = old.live().await.unwrap();
    let node = ephemeral(&live, "move-cut").await;
    let (id, password) = live.session_parts();
    let mut old_states = live.client().state_watcher();

    old_link.freeze();
    let adopted =
        within(LIMIT, "the adoption", host.adopt(id, password)).await.expect("adopting the session");
    let taken = adopted.live().await.unwrap();
    assert_eq!(taken.session_id(), id, "the adopted host runs on the same session");
    assert_eq!(taken.generation, 1);
    assert_eq!(owner(&checker, &node).await, id, "the ephemeral node is still the session's");
    taken.client().set_data(&node, b"adopted", None).await.expect("the adopter writes");

    // Resuming the session on the same server closed the old holder's connection (a frozen proxy
    // still passes on the end of a connection); the holder cannot reconnect through the link.
    within(LIMIT, "the old holder's connection is closed", async {
        while old_states.changed().await != SessionState::Disconnected {}
    })
    .await;
    // Its next request waits for a reconnect that never comes, and fails when the client gives
    // the session up: 7/5 of the session timeout after it last heard from ZooKeeper.
    let request =
        within(LIMIT, "the old holder's request", live.client().set_data(&node, b"old", None)).await;
    assert_eq!(request.unwrap_err(), Error::SessionExpired, "the old holder's write");
    assert_eq!(live.wait_ended().await, SessionEnd::Expired, "the old holder gives up");
    assert_eq!(live.client().get_data(&node).await.unwrap_err(), Error::SessionExpired);
    // Gone for good. (Thawed, the proxy would deliver the connect requests of the holder's tries
    // that it held, late, and each would move the session back to a connection nobody uses.)
    drop(old_link);
    taken.client().set_data(&node, b"adopted again", None).await.expect("the adopter still writes");
    assert_eq!(owner(&checker, &node).await, id);
    assert_eq!(checker.get_data(&node).await.unwrap().0, b"adopted again");

    // The adopted session ends (its link frozen past the timeout): the adopter has no other.
    new_link.freeze();
    assert_eq!(within(LIMIT, "the adopted session ends", taken.wait_ended()).await, SessionEnd::Expired);
    wait_gone(&checker, &node).await;
    let error = adopted.live().await.expect_err("no new session for an adopted host");
    assert_eq!(format!("{error:#}"), format!("the adopted ZooKeeper session {id:#x} ended"));
    assert!(adopted.lock("lock").await.is_err(), "no handle without the adopted session");
}

/// On a 3-member ensemble with the holder on one member and the adopter on another, the
/// adoption succeeds and the holder is not told: it reads and syncs on. Its next write makes
/// its member close its connection (the leader found the session moved: the client sees
/// `ConnectionLoss`), it reconnects with the session and so takes it back, and then the
/// adopter's next write fails the same way: each reconnect moves the session to the one that
/// reconnected. The ephemeral node stays the session's throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_two_members_the_holder_and_the_adopter_take_the_session_in_turn() {
    let ensemble = tokio::task::spawn_blocking(|| Ensemble::start(3, 200)).await.unwrap().unwrap();
    let (first, second) = (ensemble.servers[0].address(), ensemble.servers[1].address());
    let old = Host::start(config(&first, SESSION)).await.unwrap();
    let host = Host::start(config(&second, SESSION)).await.unwrap();
    let checker = client(&ensemble.address()).await;
    let live = old.live().await.unwrap();
    let node = ephemeral(&live, "move-members").await;
    let (id, password) = live.session_parts();

    let adopted =
        within(LIMIT, "the adoption", host.adopt(id, password)).await.expect("adopting the session");
    let taken = adopted.live().await.unwrap();
    assert_eq!(taken.session_id(), id);
    assert_eq!(taken.generation, 1);
    assert_eq!(owner(&checker, &node).await, id);
    taken.client().set_data(&node, b"adopted", None).await.expect("the adopter writes");

    // Reads and syncs are its member's own business: the old holder notices nothing.
    assert_eq!(live.client().get_data(&node).await.unwrap().0, b"adopted");
    live.client().sync("/").await.unwrap();
    assert_eq!(live.client().state(), SessionState::SyncConnected);

    // Its next write: the connection is closed, the client reconnects with the session.
    let mut old_states = live.client().state_watcher();
    let write = live.client().set_data(&node, b"old", None).await;
    assert_eq!(write.unwrap_err(), Error::ConnectionLoss, "the old holder's write on a moved session");
    reconnected(&mut old_states).await;
    live.client().set_data(&node, b"old again", None).await.expect("the old holder has the session back");

    // Now the adopter's write meets the moved session, and it takes the session back in turn.
    let mut new_states = taken.client().state_watcher();
    let write = taken.client().set_data(&node, b"adopter", None).await;
    assert_eq!(write.unwrap_err(), Error::ConnectionLoss, "the adopter's write after the holder came back");
    reconnected(&mut new_states).await;
    taken.client().set_data(&node, b"adopter again", None).await.expect("the adopter has it back");
    assert_eq!(owner(&checker, &node).await, id);
    assert!(live.ended().is_none() && taken.ended().is_none(), "neither side's session ended");
    drop((old, host, adopted, live, taken));
    tokio::task::spawn_blocking(move || drop(ensemble)).await.unwrap();
}

/// Resuming a session ZooKeeper no longer knows (never existed, closed, or named with the wrong
/// password) is a clear error, not a connection failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resuming_an_unknown_session_is_a_clear_error() {
    let settings = config(&zk().address(), SESSION).keeper;
    let expired = |id: i64| format!("session {id:#x} has expired");

    let unknown = 0x7fff_0000_dead_beef;
    let error = Keeper::resume(settings.clone(), unknown, vec![0; 16]).await.unwrap_err();
    assert_eq!(format!("{error:#}"), expired(unknown));

    // A session closed by its client.
    let closing = client(&zk().address()).await;
    let node = format!("{}-closed", unique("move-closed"));
    closing.create(&node, b"", &CreateMode::Ephemeral.with_acls(Acls::anyone_all())).await.unwrap();
    let (id, password) = (closing.session().id().0, closing.session().password().to_vec());
    drop(closing);
    wait_gone(&client(&zk().address()).await, &node).await;
    let error = Keeper::resume(settings.clone(), id, password).await.unwrap_err();
    assert_eq!(format!("{error:#}"), expired(id));

    // A live session, with the wrong password.
    let host = Host::start(config(&zk().address(), SESSION)).await.unwrap();
    let live = host.live().await.unwrap();
    let (id, mut password) = live.session_parts();
    password[0] ^= 0xff;
    let error = Keeper::resume(settings, id, password).await.unwrap_err();
    assert_eq!(format!("{error:#}"), expired(id));
    assert!(live.ended().is_none(), "a wrong password does not touch the session");
}
