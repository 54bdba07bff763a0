//! Barrier, ZooKeeper "Recipes and Solutions" 1.3: the barrier is up while its node exists.
//! Wire compatible with kazoo's `Barrier` (a persistent node at the barrier path).

wit_bindgen::generate!({
    path: "../../wit",
    world: "wazoo:recipes/barrier-recipe@0.1.0",
    with: {
        "wazoo:zk/types@0.1.0": wazoo_guest::wit::types,
        "wazoo:zk/znode@0.1.0": wazoo_guest::wit::znode,
        "wazoo:zk/watch@0.1.0": wazoo_guest::wit::watch,
        "wazoo:zk/session@0.1.0": wazoo_guest::wit::session,
    },
});

use exports::wazoo::recipes::barrier::Guest;
use wazoo_guest::{self as zk, CreateMode, Deadline, EventKind, ZkError};

struct Barrier;

impl Guest for Barrier {
    fn set(path: String) -> Result<bool, ZkError> {
        zk::check_path(&path)?;
        zk::ensure_parents(&path)?;
        // A create that lost its reply and is retried finds the node: "already up" then means
        // "up", which is what the caller asked for.
        match zk::retrying(|| zk::create(&path, &[], CreateMode::Persistent)) {
            Ok(_) => Ok(true),
            Err(ZkError::NodeExists) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn remove(path: String) -> Result<bool, ZkError> {
        zk::check_path(&path)?;
        match zk::retrying(|| zk::delete(&path, None)) {
            Ok(()) => Ok(true),
            Err(ZkError::NoNode) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn wait(path: String, timeout_ms: Option<u64>) -> Result<(), ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        loop {
            // 1. exists with a watch; 2. absent: proceed; 3. otherwise wait for the watch and
            // check again (a delete followed by a new set keeps the barrier up).
            let (stat, watcher) = zk::retrying(|| zk::exists_watch(&path))?;
            if stat.is_none() {
                return Ok(());
            }
            if deadline.expired() {
                return Err(ZkError::Timeout);
            }
            match watcher.wait(deadline.remaining_ms())?.kind {
                EventKind::SessionExpired | EventKind::SessionClosed => return Err(ZkError::SessionExpired),
                _ => {}
            }
        }
    }
}

export!(Barrier);
