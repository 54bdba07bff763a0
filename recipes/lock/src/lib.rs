//! Exclusive lock, ZooKeeper "Recipes and Solutions" 1.5.1, in Curator's `InterProcessMutex`
//! wire format (`<path>/_c_<uuid>-lock-<seq>`), so Curator clients and wazoo exclude each other.

wit_bindgen::generate!({
    path: "../../wit",
    world: "wazoo:recipes/lock-recipe@0.1.0",
    with: {
        "wazoo:zk/types@0.1.0": wazoo_guest::wit::types,
        "wazoo:zk/znode@0.1.0": wazoo_guest::wit::znode,
        "wazoo:zk/watch@0.1.0": wazoo_guest::wit::watch,
        "wazoo:zk/session@0.1.0": wazoo_guest::wit::session,
    },
});

use std::cell::RefCell;

use exports::wazoo::recipes::lock::{Guest, Held};
use wazoo_guest::{self as zk, CreateMode, Deadline, ZkError};

/// Curator's lock name: the part of a node's name after which the sequence follows.
const LOCK_NAME: &str = "lock-";

struct Holding {
    path: String,
    held: Held,
    count: u32,
}

thread_local! {
    static HOLDING: RefCell<Option<Holding>> = const { RefCell::new(None) };
}

struct Lock;

impl Guest for Lock {
    fn acquire(path: String, timeout_ms: Option<u64>) -> Result<Held, ZkError> {
        zk::check_path(&path)?;
        if let Some(held) = reenter(&path)? {
            return Ok(held);
        }
        let deadline = Deadline::after_ms(timeout_ms);
        // 1. Create an ephemeral, sequential child (recoverable through a lost reply).
        let mine = zk::protected_create(&path, LOCK_NAME, &[], CreateMode::EphemeralSequential)?;
        if mine.stat.ephemeral_owner != zk::session_id() {
            let _ = zk::delete_retrying(&mine.path);
            return Err(ZkError::Other("lock node is not owned by this session".into()));
        }
        match wait_turn(&path, zk::node_name(&mine.path), deadline) {
            Ok(()) => {
                let held = Held { node: mine.path, token: mine.stat.czxid };
                HOLDING.with(|h| *h.borrow_mut() = Some(Holding { path, held: held.clone(), count: 1 }));
                Ok(held)
            }
            Err(e) => {
                // Timed out or failed: leave nothing behind.
                let _ = zk::delete_retrying(&mine.path);
                Err(e)
            }
        }
    }

    fn try_acquire(path: String) -> Result<Option<Held>, ZkError> {
        match Self::acquire(path, Some(0)) {
            Ok(held) => Ok(Some(held)),
            Err(ZkError::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn release() -> Result<(), ZkError> {
        let node = HOLDING.with(|h| {
            let mut h = h.borrow_mut();
            let holding =
                h.as_mut().ok_or_else(|| ZkError::InvalidArgument("release: no lock is held".into()))?;
            holding.count -= 1;
            if holding.count > 0 {
                return Ok(None);
            }
            Ok(h.take().map(|holding| holding.held.node))
        })?;
        match node {
            // 5. Delete our node: the next waiter's watch fires.
            Some(node) => zk::delete_retrying(&node),
            None => Ok(()),
        }
    }
}

/// A second acquire of the path this handle holds counts up, as Curator's mutex does.
fn reenter(path: &str) -> Result<Option<Held>, ZkError> {
    HOLDING.with(|h| match h.borrow_mut().as_mut() {
        Some(holding) if holding.path == path => {
            holding.count += 1;
            Ok(Some(holding.held.clone()))
        }
        Some(holding) => {
            Err(ZkError::InvalidArgument(format!("this handle already holds the lock at {}", holding.path)))
        }
        None => Ok(None),
    })
}

/// Steps 2–4 of the recipe, until our node is the lowest.
fn wait_turn(dir: &str, my_name: &str, deadline: Deadline) -> Result<(), ZkError> {
    loop {
        // 2. getChildren without a watch (no herd).
        let (index, sorted) = zk::standing(dir, my_name, LOCK_NAME)?;
        // 3. Lowest: the lock is ours.
        if index == 0 {
            return Ok(());
        }
        if deadline.expired() {
            return Err(ZkError::Timeout);
        }
        // 4. Watch only the node just before ours, then look again.
        zk::wait_for_change(&zk::join(dir, &sorted[index - 1]), deadline)?;
    }
}

export!(Lock);
