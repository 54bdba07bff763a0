//! Exclusive lock, ZooKeeper "Recipes and Solutions" 1.5.1, in Curator's `InterProcessMutex`
//! wire format (`<path>/_c_<uuid>-lock-<seq>`), so Curator clients and wazoo exclude each other.
//!
//! Built with the feature `kazoo` (plugin `lock-kazoo`), it speaks kazoo 2.11's `Lock` format
//! instead: `<path>/<uuid hex>__lock__<seq>`, blocked only by the `__lock__` nodes ahead of it
//! (kazoo's `Lock` and `WriteLock`), so kazoo clients and wazoo exclude each other.

wazoo_guest::recipe_world!("wazoo:recipes/lock-recipe@0.1.2");
#[cfg(not(feature = "kazoo"))]
wazoo_guest::protocol!("curator-mutex/1");
#[cfg(feature = "kazoo")]
wazoo_guest::protocol!("kazoo-lock/1");

use exports::wazoo::recipes::lock::{Guest, Held};
use wazoo_guest::{self as zk, Created, Deadline, Holding, ZkError};

/// Curator's lock name: the sequence follows it.
#[cfg(not(feature = "kazoo"))]
const LOCK_NAME: &str = "lock-";

/// The lock node's data: left blank, so the host writes the holder's identity there (`wazoo
/// lock --id`; through a daemon, the client's id, session name and address). Curator writes
/// its client's address there and kazoo its `identifier`, and both read it as the holder's
/// identity (kazoo's `contenders()`), so any text interoperates.
const NO_DATA: &[u8] = &[];

thread_local! {
    static HOLDING: Holding<String, Held> = const { Holding::new() };
}

struct Lock;

/// Steps 1 to 4 in Curator's layout.
#[cfg(not(feature = "kazoo"))]
fn contend(path: &str, deadline: Deadline) -> Result<Created, ZkError> {
    zk::contend(path, LOCK_NAME, NO_DATA, &zk::exclusive(&[LOCK_NAME]), deadline)
}

/// Steps 1 to 4 in kazoo's layout: a `__lock__` node that waits for the nearest `__lock__` node
/// ahead of it (kazoo's `Lock` ignores `__rlock__` readers, and so does this build).
#[cfg(feature = "kazoo")]
fn contend(path: &str, deadline: Deadline) -> Result<Created, ZkError> {
    use zk::kazoo::{self, LOCK};
    kazoo::contend(path, LOCK, NO_DATA, &kazoo::behind(&[LOCK]), deadline)
}

impl Guest for Lock {
    fn acquire(path: String, timeout_ms: Option<u64>) -> Result<Held, ZkError> {
        if let Some(held) = HOLDING.with(|h| h.reenter(&path))? {
            return Ok(held);
        }
        // 1. Create an ephemeral sequential node; 2. list the children without a watch;
        // 3. if ours is the lowest, the lock is ours; 4. otherwise watch only the node just
        // before ours and go back to 2.
        let deadline = Deadline::after_ms(timeout_ms);
        let mine = contend(&path, deadline)?;
        let held = Held { node: mine.path, token: mine.stat.czxid };
        HOLDING.with(|h| h.hold(path, held.clone()));
        Ok(held)
    }

    fn try_acquire(path: String) -> Result<Option<Held>, ZkError> {
        zk::try_now(Self::acquire(path, Some(0)))
    }

    fn release() -> Result<(), ZkError> {
        HOLDING.with(|h| h.release_unwaited(|held| &held.node))
    }

    fn revoke(node: String, grace_ms: Option<u64>) -> Result<bool, ZkError> {
        zk::check_path(&node)?;
        if !is_claim_node(zk::node_name(&node)) {
            return Err(ZkError::InvalidArgument(format!(
                "{node} is not a lock, read/write lock or lease node ({CLAIM_NAMES} and a 10-digit sequence)"
            )));
        }
        match zk::retrying(|| zk::set_data(&node, REVOKE, None)) {
            Ok(_) => {}
            Err(ZkError::NoNode) => return Ok(true),
            Err(e) => return Err(e),
        }
        let Some(grace) = grace_ms else { return Ok(true) };
        let deadline = Deadline::after_ms(Some(grace));
        loop {
            let (stat, watcher) = zk::exists_watch(&node)?;
            if stat.is_none() {
                return Ok(true);
            }
            match watcher.changed(deadline.remaining_ms()) {
                Ok(_) => continue,
                // The grace period is over: take the lock away.
                // An expired session deleted nothing: that is an error, not "forced".
                Err(ZkError::Timeout) => {
                    return match zk::retrying(|| zk::delete(&node, None)) {
                        Ok(()) | Err(ZkError::NoNode) => Ok(false),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Curator's revocation message.
const REVOKE: &[u8] = b"__REVOKE__";

export!(Lock);

/// What precedes the 10-digit sequence of a claim node revocation applies to: Curator's lock,
/// read/write lock and semaphore lease names.
#[cfg(not(feature = "kazoo"))]
const CLAIM_MARKERS: [&str; 4] = ["-lock-", "__READ__", "__WRIT__", "-lease-"];
#[cfg(not(feature = "kazoo"))]
const CLAIM_NAMES: &str = "…-lock-, …__READ__, …__WRIT__ or …-lease-";

/// As the Curator build, and kazoo's lock and read lock names. A kazoo semaphore's lease is a
/// bare uuid, which no name check can tell from any other node: it is not revoked by name.
#[cfg(feature = "kazoo")]
const CLAIM_MARKERS: [&str; 6] = ["-lock-", "__READ__", "__WRIT__", "-lease-", "__lock__", "__rlock__"];
#[cfg(feature = "kazoo")]
const CLAIM_NAMES: &str = "…-lock-, …__READ__, …__WRIT__, …-lease-, …__lock__ or …__rlock__";

/// Whether `name` is a claim node's name in the formats revocation applies to: a lock's, either
/// side of a read/write lock's, or a semaphore lease's, each ending in its 10-digit sequence. No
/// other node (a configuration value, a queue item) is ever written `__REVOKE__` or deleted.
fn is_claim_node(name: &str) -> bool {
    let Some(stem) = name.len().checked_sub(10).and_then(|at| name.get(..at)) else { return false };
    let sequence = &name[stem.len()..];
    sequence.bytes().all(|b| b.is_ascii_digit()) && CLAIM_MARKERS.iter().any(|marker| stem.ends_with(marker))
}
