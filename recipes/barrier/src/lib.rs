//! Barrier, ZooKeeper "Recipes and Solutions" 1.3: the barrier is up while its node exists.
//! Wire compatible with kazoo's `Barrier` (a persistent node at the barrier path). And the
//! double barrier, 1.3.1, with the seed's leave that wakes one process per departure.

wazoo_guest::recipe_world!("wazoo:recipes/barrier-recipe@0.1.0");

use std::cell::RefCell;

use exports::wazoo::recipes::barrier::Guest;
use exports::wazoo::recipes::double_barrier::Guest as DoubleGuest;
use wazoo_guest::{self as zk, CreateMode, Deadline, EventKind, ZkError};

const PROC: &str = "proc-";

thread_local! {
    /// The double barrier this handle entered: its path and our process node.
    static ENTERED: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// The process nodes under `path`, ordered by sequence.
fn processes(path: &str) -> Result<Vec<String>, ZkError> {
    let (children, _) = zk::retrying(|| zk::get_children(path))?;
    Ok(zk::sorted(children.into_iter().filter(|c| c.contains(PROC)).collect(), &[PROC]))
}

impl DoubleGuest for Barrier {
    fn enter(path: String, count: u32, timeout_ms: Option<u64>) -> Result<(), ZkError> {
        if count == 0 {
            return Err(ZkError::InvalidArgument("count must be at least 1".into()));
        }
        if let Some((entered, _)) = ENTERED.with(|e| e.borrow().clone()) {
            return Err(ZkError::InvalidArgument(format!("this handle already entered {entered}")));
        }
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        // 1. Create our process node.
        let mine = zk::protected_create(&path, PROC, &[], CreateMode::EphemeralSequential)?;
        let ready = zk::join(&path, "ready");
        let entered = (|| loop {
            // 2. Watch for `ready`; 3. count the processes; 4. wait, or 5. open the barrier.
            let (open, watcher) = zk::retrying(|| zk::exists_watch(&ready))?;
            if open.is_some() {
                return Ok(());
            }
            if processes(&path)?.len() >= count as usize {
                return match zk::retrying(|| zk::create(&ready, &[], CreateMode::Persistent)) {
                    Ok(_) | Err(ZkError::NodeExists) => Ok(()),
                    Err(e) => Err(e),
                };
            }
            zk::wait_on(&watcher, deadline)?;
        })();
        match entered {
            Ok(()) => {
                ENTERED.with(|e| *e.borrow_mut() = Some((path, mine.path)));
                Ok(())
            }
            Err(e) => {
                let _ = zk::delete_retrying(&mine.path);
                Err(e)
            }
        }
    }

    fn leave(timeout_ms: Option<u64>) -> Result<(), ZkError> {
        let (path, mine) = ENTERED
            .with(|e| e.borrow_mut().take())
            .ok_or_else(|| ZkError::InvalidArgument("leave: this handle has not entered".into()))?;
        let deadline = Deadline::after_ms(timeout_ms);
        let my_name = zk::node_name(&mine).to_string();
        loop {
            // 1. List the processes; 2. none left: done.
            let procs = processes(&path)?;
            let Some(lowest) = procs.first() else { break };
            let here = procs.contains(&my_name);
            // 3. Only us left: delete our node and go.
            if here && procs.len() == 1 {
                zk::delete_retrying(&mine)?;
                break;
            }
            // 4. Lowest: wait for the highest to go; 5. otherwise delete ours and wait for the
            // lowest to go.
            let watch = if here && *lowest == my_name {
                procs.last().unwrap().clone()
            } else {
                if here {
                    zk::delete_retrying(&mine)?;
                }
                lowest.clone()
            };
            let (stat, watcher) = zk::retrying(|| zk::exists_watch(&zk::join(&path, &watch)))?;
            if stat.is_some() {
                zk::wait_on(&watcher, deadline)?;
            }
        }
        // The last to leave closes the barrier for its next use.
        match zk::retrying(|| zk::delete(&zk::join(&path, "ready"), None)) {
            Ok(()) | Err(ZkError::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

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
