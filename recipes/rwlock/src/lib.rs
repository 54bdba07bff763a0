//! Read/write lock, ZooKeeper "Recipes and Solutions" 1.5.2 ("Shared Locks"), in Curator's
//! `InterProcessReadWriteLock` wire format: `<path>/_c_<uuid>-__READ__<seq>` and
//! `<path>/_c_<uuid>-__WRIT__<seq>`, ordered together by sequence.
//!
//! Built with the feature `kazoo` (plugin `rwlock-kazoo`), it speaks kazoo 2.11's
//! `ReadLock`/`WriteLock` format instead: readers `<path>/<uuid hex>__rlock__<seq>`, blocked by
//! the `__lock__` nodes ahead of them; writers `<path>/<uuid hex>__lock__<seq>`, blocked by every
//! contender ahead of them.

wazoo_guest::recipe_world!("wazoo:recipes/rwlock-recipe@0.1.2");
#[cfg(not(feature = "kazoo"))]
wazoo_guest::protocol!("curator-rwlock/1");
#[cfg(feature = "kazoo")]
wazoo_guest::protocol!("kazoo-rwlock/1");

use exports::wazoo::recipes::rwlock::{Guest, Held, Mode};
use wazoo_guest::{self as zk, Created, Deadline, Holding, ZkError};

#[cfg(not(feature = "kazoo"))]
const READ: &str = "__READ__";
/// Curator spells it WRIT, not WRITE.
#[cfg(not(feature = "kazoo"))]
const WRITE: &str = "__WRIT__";
#[cfg(not(feature = "kazoo"))]
const MARKERS: [&str; 2] = [READ, WRITE];

thread_local! {
    static HOLDING: Holding<(String, Mode), Held> = const { Holding::new() };
}

/// A contention in Curator's layout.
#[cfg(not(feature = "kazoo"))]
fn contend(path: &str, mode: Mode, deadline: Deadline) -> Result<Created, ZkError> {
    match mode {
        // A reader holds when no writer is queued before it; otherwise it watches the lowest such
        // writer (Curator's rule; when that writer goes, every reader behind it may proceed, so
        // all wake).
        Mode::Read => zk::contend(path, READ, &[], &zk::first_containing(&MARKERS, &[WRITE]), deadline),
        // A writer is an exclusive lock over readers and writers alike.
        Mode::Write => zk::contend(path, WRITE, &[], &zk::exclusive(&MARKERS), deadline),
    }
}

/// A contention in kazoo's layout: a reader (`ReadLock`) holds when no `__lock__` node is ahead
/// of it and watches the first one ahead (Curator's rule, so all readers behind a writer wake
/// together); a writer (`WriteLock`) waits for the nearest contender of either kind ahead.
#[cfg(feature = "kazoo")]
fn contend(path: &str, mode: Mode, deadline: Deadline) -> Result<Created, ZkError> {
    use zk::kazoo::{self, LOCK, MARKERS, RLOCK};
    match mode {
        Mode::Read => kazoo::contend(path, RLOCK, &[], &kazoo::first_ahead(&[LOCK]), deadline),
        Mode::Write => kazoo::contend(path, LOCK, &[], &kazoo::behind(&MARKERS), deadline),
    }
}

struct RwLock;

impl Guest for RwLock {
    fn acquire(path: String, mode: Mode, timeout_ms: Option<u64>) -> Result<Held, ZkError> {
        let key = (path, mode);
        if let Some(held) = HOLDING.with(|h| h.reenter(&key))? {
            return Ok(held);
        }
        let (path, mode) = key;
        let deadline = Deadline::after_ms(timeout_ms);
        let mine = contend(&path, mode, deadline)?;
        let held = Held { node: mine.path, token: mine.stat.czxid, mode };
        HOLDING.with(|h| h.hold((path, mode), held.clone()));
        Ok(held)
    }

    fn try_acquire(path: String, mode: Mode) -> Result<Option<Held>, ZkError> {
        zk::try_now(Self::acquire(path, mode, Some(0)))
    }

    fn release() -> Result<(), ZkError> {
        HOLDING.with(|h| h.release_unwaited(|held| &held.node))
    }
}

export!(RwLock);
