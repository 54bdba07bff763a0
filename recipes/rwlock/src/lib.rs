//! Read/write lock, ZooKeeper "Recipes and Solutions" 1.5.2 ("Shared Locks"), in Curator's
//! `InterProcessReadWriteLock` wire format: `<path>/_c_<uuid>-__READ__<seq>` and
//! `<path>/_c_<uuid>-__WRIT__<seq>`, ordered together by sequence.

wazoo_guest::recipe_world!("wazoo:recipes/rwlock-recipe@0.1.0");

use exports::wazoo::recipes::rwlock::{Guest, Held, Mode};
use wazoo_guest::{self as zk, Deadline, Holding, Turn, ZkError};

const READ: &str = "__READ__";
/// Curator spells it WRIT, not WRITE.
const WRITE: &str = "__WRIT__";
const MARKERS: [&str; 2] = [READ, WRITE];

thread_local! {
    static HOLDING: Holding<(String, Mode), Held> = const { Holding::new() };
}

/// Reader: holds when no writer is queued before it; otherwise watches the lowest such writer
/// (Curator's rule; when that writer goes, every reader behind it may proceed, so all wake).
fn reader(sorted: &[String], index: usize) -> Turn {
    match sorted[..index].iter().find(|c| c.contains(WRITE)) {
        None => Turn::Hold,
        Some(writer) => Turn::WaitFor(writer.clone()),
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
        let mine = match mode {
            Mode::Read => zk::contend(&path, READ, &[], &MARKERS, deadline, reader)?,
            // A writer is an exclusive lock over readers and writers alike.
            Mode::Write => zk::contend(&path, WRITE, &[], &MARKERS, deadline, zk::exclusive)?,
        };
        let held = Held { node: mine.path, token: mine.stat.czxid, mode };
        HOLDING.with(|h| h.hold((path, mode), held.clone()));
        Ok(held)
    }

    fn try_acquire(path: String, mode: Mode) -> Result<Option<Held>, ZkError> {
        zk::try_now(Self::acquire(path, mode, Some(0)))
    }

    fn release() -> Result<(), ZkError> {
        HOLDING.with(|h| h.release_deleting(|held| &held.node))
    }
}

export!(RwLock);
