//! The ledger: which ephemeral nodes a recipe handle created.
//!
//! Ephemeral nodes live as long as the host's session, not as long as the guest. When a handle
//! ends (dropped, trapped, cancelled) the host deletes what is still in its ledger, so a dead
//! recipe never leaves a lock held. Persistent nodes (queue items, barrier nodes) are meant to
//! outlive the handle and are not recorded.
//!
//! A node is recorded with its `czxid`, and deleted only while a node of that name still has
//! it: handles on one host share a session, so once someone else deleted our node, a later one
//! of the same name (another handle's, say) is owned by our session too, but is not ours.
//!
//! An ephemeral create is recorded as *uncertain* before it is sent, and resolved when its reply
//! arrives: a reply that was lost, or a call cancelled while the request was in flight, leaves
//! it uncertain, and cleanup looks for nodes that start with the requested name and are owned by
//! this session.
//!
//! A node released by `znode.delete-unwaited` leaves the ledger when its delete is sent: the
//! claim counts as let go of from then on, and the handle may serve another. The node is kept
//! aside as *releasing* until the delete's reply settles it ([`Ledger::settle`]): applied, or
//! gone already, it is forgotten; if the reply is lost, it is looked at again and deleted if it
//! is still ours, as cleanup does, for as long as the session lasts; if the session ended, it
//! went with it. Only a node recorded with its `czxid` is released so: one whose create's reply
//! was lost (judged by owner) is deleted the waited way. A delete that cannot be settled (the
//! client closed under it, a refusal) puts the node back among the owned, for the handle's
//! cleanup.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use zookeeper_client::{Client, Error};

use crate::paths;
use crate::retry::retry;

#[derive(Debug, Default)]
pub struct Ledger {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Path → the `czxid` of the node we created there.
    owned: BTreeMap<String, i64>,
    uncertain: BTreeSet<String>,
    /// Path → the `czxid` (none: judged by owner) of a node whose unwaited delete is in flight.
    releasing: BTreeMap<String, Option<i64>>,
}

/// How an unwaited delete ended ([`Ledger::settle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The server applied it.
    Deleted,
    /// The node was gone already, or went with the session.
    Gone,
    /// Its reply was lost and the node was still ours: the ledger deleted it.
    DeletedAgain,
    /// Its reply was lost, and the node could not be looked at or deleted again: it stays
    /// releasing, for cleanup or the session's end.
    Unsettled,
}

/// How often a cleanup delete is retried through connection loss before it is given up (the
/// session timeout then removes the node).
const CLEANUP_ATTEMPTS: u32 = 10;

impl Ledger {
    pub(crate) fn created(&self, path: &str, czxid: i64) {
        self.inner.lock().unwrap().owned.insert(path.to_string(), czxid);
    }

    pub(crate) fn uncertain(&self, requested: &str) {
        self.inner.lock().unwrap().uncertain.insert(requested.to_string());
    }

    /// Whether a create of `requested` is recorded as uncertain (its reply never came).
    pub(crate) fn is_uncertain(&self, requested: &str) -> bool {
        self.inner.lock().unwrap().uncertain.contains(requested)
    }

    /// A create recorded as uncertain got a definite answer.
    pub(crate) fn resolved(&self, requested: &str) {
        self.inner.lock().unwrap().uncertain.remove(requested);
    }

    pub(crate) fn deleted(&self, path: &str) {
        let mut entries = self.inner.lock().unwrap();
        entries.owned.remove(path);
        entries.uncertain.retain(|requested| !may_have_made(requested, path));
    }

    /// Takes `path` out of the ledger for a delete sent without awaiting its reply, and keeps
    /// it aside as releasing: the czxid it was created with, or none when the ledger does not
    /// hold it with one (then the caller must await its delete: a node known only by its owner,
    /// the session, could be another handle's by the time a lost reply is looked into).
    pub(crate) fn releasing(&self, path: &str) -> Option<Option<i64>> {
        let mut entries = self.inner.lock().unwrap();
        let czxid = entries.owned.remove(path)?;
        entries.uncertain.retain(|requested| !may_have_made(requested, path));
        entries.releasing.insert(path.to_string(), Some(czxid));
        Some(Some(czxid))
    }

    /// Takes `path` out of the ledger without deleting it, for a claim kept as data
    /// ([`crate::Claim::into_data`]): the czxid it was created with.
    pub(crate) fn forget(&self, path: &str) -> Option<i64> {
        self.inner.lock().unwrap().owned.remove(path)
    }

    /// Whether the ledger holds `path` and nothing else: no other node, no uncertain create, no
    /// release in flight.
    pub(crate) fn holds_only(&self, path: &str) -> bool {
        let entries = self.inner.lock().unwrap();
        entries.owned.len() == 1
            && entries.owned.contains_key(path)
            && entries.uncertain.is_empty()
            && entries.releasing.is_empty()
    }

    /// A releasing node deleted by the `multi` that made the next node of its handle
    /// ([`crate::Claim::requeue`]): forgotten.
    pub(crate) fn settled_in_fold(&self, path: &str) {
        self.inner.lock().unwrap().releasing.remove(path);
    }

    /// Settles the unwaited delete of `path` (created with `czxid`, none: judged by owner) on
    /// its reply: applied or gone, it is forgotten; a lost reply (the connection broke, or the
    /// client gave up waiting) has the node looked at again and deleted if it is still ours.
    pub(crate) async fn settle(
        &self,
        client: &Client,
        path: &str,
        czxid: Option<i64>,
        reply: Result<(), Error>,
    ) -> Settled {
        let settled = match reply {
            Ok(()) => Settled::Deleted,
            Err(Error::NoNode | Error::SessionExpired) => Settled::Gone,
            // Closed under it: the session may live on (taken up by another process), and
            // nobody here can look.
            Err(Error::ClientClosed) => Settled::Unsettled,
            Err(Error::ConnectionLoss | Error::Timeout | Error::Custom(_)) => loop {
                // Looked at again for as long as the session lasts: the node must not outlive
                // the release while the session does.
                match delete_if_ours(client, path, czxid, client.session_id().0).await {
                    Ok(true) => break Settled::DeletedAgain,
                    Ok(false) | Err(Error::SessionExpired) => break Settled::Gone,
                    Err(Error::ConnectionLoss | Error::Timeout | Error::Custom(_)) => {
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                    Err(e) => {
                        tracing::warn!(%path, error = %e, "an unwaited delete could not be settled");
                        break Settled::Unsettled;
                    }
                }
            },
            // Not one of ours to retry (no auth, say): as after a failed cleanup, the session's
            // end removes it.
            Err(e) => {
                tracing::warn!(%path, error = %e, "an unwaited delete failed");
                Settled::Unsettled
            }
        };
        let mut entries = self.inner.lock().unwrap();
        if entries.releasing.get(path) == Some(&czxid) {
            entries.releasing.remove(path);
            // Not settled: owned again, so the handle is not lent out as empty and its cleanup
            // tries once more when it ends.
            if let (Settled::Unsettled, Some(czxid)) = (settled, czxid) {
                entries.owned.insert(path.to_string(), czxid);
            }
        }
        settled
    }

    /// Nodes recorded as owned right now.
    pub fn owned(&self) -> Vec<String> {
        self.inner.lock().unwrap().owned.keys().cloned().collect()
    }

    /// Whether it holds no node and no uncertain create. A node whose unwaited delete is in
    /// flight does not count: it is let go of, and settled on its own.
    pub fn is_empty(&self) -> bool {
        let entries = self.inner.lock().unwrap();
        entries.owned.is_empty() && entries.uncertain.is_empty()
    }

    /// Deletes every recorded node that is still the one we created (releasing ones too: their
    /// delete, sent earlier in the session, is applied before these looks), and every node an
    /// uncertain create may have made that `client`'s session owns; returns how many.
    pub(crate) async fn clean(&self, client: &Client) -> usize {
        let Entries { owned, uncertain, releasing } = std::mem::take(&mut *self.inner.lock().unwrap());
        let session = client.session_id().0;
        let mut targets: BTreeMap<String, Option<i64>> = releasing;
        targets.extend(owned.into_iter().map(|(path, czxid)| (path, Some(czxid))));
        for requested in uncertain {
            let (dir, name) =
                (paths::parent(&requested), &requested[requested.rfind('/').unwrap_or(0) + 1..]);
            let Ok(children) = retry(CLEANUP_ATTEMPTS, || client.list_children(dir)).await else { continue };
            for child in children.iter().filter(|c| made_name(name, c)) {
                // Judged by owner, even where a node of ours was recorded under that name: that
                // one may be gone (deleted by someone) and this one made by the uncertain create.
                targets.insert(paths::join(dir, child), None);
            }
        }
        let mut deleted = 0;
        for (path, czxid) in targets {
            match delete_if_ours(client, &path, czxid, session).await {
                Ok(true) => deleted += 1,
                Ok(false) => {}
                // The session is gone: ZooKeeper removed every ephemeral node already.
                Err(Error::SessionExpired | Error::ClientClosed) => break,
                Err(e) => tracing::warn!(%path, error = %e, "ledger cleanup could not delete node"),
            }
        }
        deleted
    }
}

/// Whether a create of `requested` may have made the node at `path`: the same path, or (for a
/// sequential create) the path with ZooKeeper's 10-digit sequence appended. A mere prefix is
/// not enough: a create of `/g/worker-1` never made `/g/worker-10`.
fn may_have_made(requested: &str, path: &str) -> bool {
    paths::parent(requested) == paths::parent(path)
        && made_name(
            &requested[requested.rfind('/').unwrap_or(0) + 1..],
            &path[path.rfind('/').unwrap_or(0) + 1..],
        )
}

/// Whether a create named `name` may have made the child `child` (see [`may_have_made`]).
fn made_name(name: &str, child: &str) -> bool {
    match child.strip_prefix(name) {
        Some("") => true,
        Some(sequence) => sequence.len() == 10 && sequence.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

/// Deletes `path` if it is still the node created with `czxid` (with none: if `session` owns
/// it). The delete is at the version just seen, so a node made again in between is left alone;
/// a node whose data changed in between is looked at again.
async fn delete_if_ours(
    client: &Client,
    path: &str,
    czxid: Option<i64>,
    session: i64,
) -> Result<bool, Error> {
    // Whether a delete of ours may have applied (its reply was lost).
    let mut sent = false;
    for _ in 0..CLEANUP_ATTEMPTS {
        let Some(stat) = retry(CLEANUP_ATTEMPTS, || client.check_stat(path)).await? else { return Ok(sent) };
        let ours = match czxid {
            Some(czxid) => stat.czxid == czxid,
            None => stat.ephemeral_owner == session,
        };
        if !ours {
            return Ok(sent);
        }
        // Not sent again blindly after a lost reply: a node made again in between starts at
        // version 0 too. Looked at again instead; gone then, it was our delete that applied.
        match client.delete(path, Some(stat.version)).await {
            Ok(()) => return Ok(true),
            Err(Error::NoNode) => return Ok(sent),
            Err(Error::BadVersion) => continue,
            Err(Error::ConnectionLoss | Error::Timeout | Error::Custom(_)) => {
                sent = true;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_uncertain_create_is_matched_exactly_or_with_its_sequence() {
        assert!(may_have_made("/g/worker-1", "/g/worker-1"));
        assert!(!may_have_made("/g/worker-1", "/g/worker-10"));
        assert!(may_have_made("/q/_c_ab-lock-", "/q/_c_ab-lock-0000000007"));
        assert!(!may_have_made("/q/_c_ab-lock-", "/q/_c_ab-lock-00000000071"));
        assert!(!may_have_made("/q/_c_ab-lock-", "/q/_c_ab-lock-x000000007"));
        assert!(!may_have_made("/g/a", "/h/a"));
    }
}
