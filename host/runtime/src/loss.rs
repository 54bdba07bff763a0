//! Loss-watching: why a held claim was lost ([`Lost`]), and the watch that finds out ([`lost`]):
//! the session's end, the claim's node deleted or revoked, or ZooKeeper silent for too long.
//! Below the handles and the claims that report it.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::EventType;

use crate::keeper::{Live, SessionEnd};

/// Curator's `__REVOKE__` and the seed's `unlock`.
fn is_revocation(data: &[u8]) -> bool {
    data == b"__REVOKE__" || data == b"unlock"
}

/// Why a held claim was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The session ended (expired, closed): every ephemeral node is gone.
    Session(SessionEnd),
    /// Someone deleted the claim's node.
    NodeDeleted,
    /// Someone asked the holder to let go (the node's data was set to `__REVOKE__` or
    /// `unlock`); the node is still there until the holder releases.
    Revoked,
    /// ZooKeeper answered nothing the session sent for this long, [`crate::keeper::CUT_OFF`] of
    /// its timeout: the ensemble may expire the session before the host hears of it again, so
    /// the claim counts as lost now.
    CutOff(Duration),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Session(SessionEnd::Expired) => f.write_str("ZooKeeper session expired"),
            Lost::Session(state) => write!(f, "ZooKeeper session ended ({state:?})"),
            Lost::NodeDeleted => f.write_str("lock node was deleted"),
            Lost::Revoked => f.write_str("revoked by another client"),
            Lost::CutOff(after) => write!(
                f,
                "no answer from ZooKeeper for {:.1}s, 2/3 of the session timeout: assuming the session expired",
                after.as_secs_f64()
            ),
        }
    }
}

/// Resolves when the session behind `live` ends, `node` is deleted or revoked by someone else,
/// or ZooKeeper has answered nothing for [`Live::cut_off_after`]: whichever comes first, and a
/// known end of the session before the rest.
pub(crate) async fn lost(live: Arc<Live>, node: Option<String>) -> Lost {
    let node_gone = async {
        let Some(node) = node else { return std::future::pending().await };
        watch_deleted(&live, &node).await
    };
    tokio::select! {
        biased;
        state = live.wait_ended() => Lost::Session(state),
        lost = node_gone => lost,
        after = live.cut_off() => Lost::CutOff(after),
    }
}

/// Waits until `node` is deleted (or the session ends), or its data asks its holder to let go.
async fn watch_deleted(live: &Arc<Live>, node: &str) -> Lost {
    let mut failures = 0u32;
    loop {
        let read = live.client.get_and_watch_data(node).await;
        // A one-shot watch on a path this session also watches persistently replaces its mode
        // on the server, and its removal (this future dropped: the claim let go) removes it.
        let mut guard = match &read {
            Ok(_) => Some(crate::slots::OneShotGuard::set(live, node).await),
            Err(_) => None,
        };
        match read {
            Err(zookeeper_client::Error::NoNode) => return Lost::NodeDeleted,
            Ok((data, _, watcher)) if is_revocation(&data) => {
                // Gone unfired with the guard after it: the path's watches are set again.
                drop(watcher);
                return Lost::Revoked;
            }
            Ok((_, _, watcher)) => {
                let event = watcher.changed().await;
                if let Some(guard) = guard.as_mut() {
                    guard.fired();
                }
                match event.event_type {
                    EventType::NodeDeleted => return Lost::NodeDeleted,
                    EventType::Session => return Lost::Session(event.session_state.into()),
                    // Data changed: look at it again.
                    _ => {}
                }
            }
            Err(zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed) => {
                return Lost::Session(SessionEnd::Expired)
            }
            // Disconnected: the session may still be alive; look again once it reconnects.
            Err(_) => {
                failures += 1;
                tokio::time::sleep(Duration::from_millis(100 * u64::from(failures.min(10)))).await;
            }
        }
    }
}
