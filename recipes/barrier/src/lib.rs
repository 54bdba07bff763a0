//! Barrier, ZooKeeper "Recipes and Solutions" 1.3: the barrier is up while its node exists.
//! Wire compatible with kazoo's `Barrier` (a persistent node at the barrier path). And the
//! double barrier, 1.3.1, with the seed's leave that wakes one process per departure.
//!
//! The double barrier is reused round after round, so rounds are told apart. The barrier node
//! `PATH` holds the number of the last round opened (none yet: empty). A participant joins the
//! next round: it reads that number N and, in one `multi` that checks the barrier node is still
//! at the version read, creates its ephemeral process node `PATH/_c_<uuid>-r<N+1>-proc-<seq>`.
//! So every node of round N+1 was made before round N+1 opened. The participant that finds
//! `count` nodes of its round sets the barrier node to N+1 (at the version read), which opens it
//! for every node of that round. A participant leaves when no node of its own round is left, as
//! Curator's `DistributedDoubleBarrier` does: a fast participant that already joined the next
//! round is not waited for, and a participant of an earlier round never lets a newcomer in.
//! Participants that die inside leave nothing that opens a later round. The barrier node is a
//! container where wazoo made it, removed by ZooKeeper once no process is left.

wazoo_guest::recipe_world!("wazoo:recipes/barrier-recipe@0.1.2");
wazoo_guest::protocol!("wazoo-barrier/1");

use std::cell::RefCell;

use exports::wazoo::recipes::barrier::Guest;
use exports::wazoo::recipes::double_barrier::Guest as DoubleGuest;
use wazoo_guest::{self as zk, CheckOp, CreateMode, CreateOp, Deadline, MultiError, Op, OpResult, ZkError};

const PROC: &str = "proc-";

/// The double barrier this handle entered.
#[derive(Clone)]
struct Entered {
    path: String,
    /// Our process node.
    node: String,
    round: u64,
}

thread_local! {
    static ENTERED: RefCell<Option<Entered>> = const { RefCell::new(None) };
}

/// The round a process node joined, from its name `…-r<round>-proc-<seq>`.
fn round_of(name: &str) -> Option<u64> {
    let before = &name[..name.rfind(&format!("-{PROC}"))?];
    before[before.rfind('-')? + 1..].strip_prefix('r')?.parse().ok()
}

/// The last round opened, as the barrier node's data says (none yet: 0).
fn opened(data: &[u8]) -> u64 {
    std::str::from_utf8(data).ok().and_then(|text| text.parse().ok()).unwrap_or(0)
}

/// The process nodes of `round` under `path`, ordered by sequence (none once the barrier node
/// is gone).
fn processes(path: &str, round: u64) -> Result<Vec<String>, ZkError> {
    let children = match zk::get_children(path) {
        Ok((children, _)) => children,
        Err(ZkError::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(zk::sorted(children.into_iter().filter(|c| round_of(c) == Some(round)).collect(), &[PROC]))
}

/// Creates our process node in the next round to open: the round is read from the barrier node
/// and fixed by a `multi` that checks it has not changed. Returns the node and its round.
fn join_round(path: &str) -> Result<(String, u64), ZkError> {
    let prefix = format!("_c_{}-", zk::new_guid());
    let mut attempt = 0;
    loop {
        let (data, stat) = match zk::get_data(path) {
            Ok(read) => read,
            Err(ZkError::NoNode) => {
                zk::ensure_parents(&zk::join(path, PROC))?;
                continue;
            }
            Err(e) => return Err(e),
        };
        let round = opened(&data) + 1;
        let ops = [
            Op::Check(CheckOp { path: path.to_string(), version: stat.version }),
            Op::Create(CreateOp {
                path: zk::join(path, &format!("{prefix}r{round}-{PROC}")),
                data: Vec::new(),
                mode: CreateMode::EphemeralSequential,
            }),
        ];
        match zk::multi(&ops) {
            Ok(results) => match results.get(1) {
                Some(OpResult::Created(created)) => return Ok((created.path.clone(), round)),
                other => return Err(ZkError::Other(format!("multi answered {other:?} for a create"))),
            },
            // A round opened (or the barrier node went) since we read it: read again.
            Err(MultiError { index: Some(0), error: ZkError::BadVersion | ZkError::NoNode }) => {}
            Err(MultiError { index: None, error: ZkError::ConnectionLoss })
                if attempt < zk::CONNECTION_LOSS_RETRIES =>
            {
                attempt += 1;
                if let Some(found) = zk::find_protected(path, &prefix, true)? {
                    let round = round_of(zk::node_name(&found.path)).unwrap_or(round);
                    return Ok((found.path, round));
                }
                zk::backoff(attempt);
            }
            Err(e) => return Err(e.error),
        }
    }
}

/// Waits until `round` is open, opening it when `count` of its processes are in.
///
/// The processes are listed before the barrier node is read and watched: a participant that
/// joins after the list sees our node in its own list and opens the round, and the watch, armed
/// after the list, sees it open. So a participant that is waiting has already counted.
fn wait_open(path: &str, round: u64, count: u32, deadline: Deadline) -> Result<(), ZkError> {
    loop {
        let full = processes(path, round)?.len() >= count as usize;
        let (data, stat, watcher) = zk::get_data_watch(path)?;
        if opened(&data) >= round {
            return Ok(());
        }
        if full {
            let open = round.to_string();
            match zk::retrying(|| zk::set_data(path, open.as_bytes(), Some(stat.version))) {
                Ok(_) => return Ok(()),
                // Opened by another, or our own write whose reply was lost: look again.
                Err(ZkError::BadVersion) => continue,
                Err(e) => return Err(e),
            }
        }
        zk::wait_on(&watcher, deadline)?;
    }
}

impl DoubleGuest for Barrier {
    fn enter(path: String, count: u32, timeout_ms: Option<u64>) -> Result<(), ZkError> {
        if count == 0 {
            return Err(ZkError::InvalidArgument("count must be at least 1".into()));
        }
        if let Some(entered) = ENTERED.with(|e| e.borrow().clone()) {
            return Err(ZkError::InvalidArgument(format!("this handle already entered {}", entered.path)));
        }
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        let (node, round) = join_round(&path)?;
        match wait_open(&path, round, count, deadline) {
            Ok(()) => {
                ENTERED.with(|e| *e.borrow_mut() = Some(Entered { path, node, round }));
                Ok(())
            }
            Err(e) => {
                let _ = zk::delete_retrying(&node);
                Err(e)
            }
        }
    }

    fn leave(timeout_ms: Option<u64>) -> Result<(), ZkError> {
        let entered = ENTERED
            .with(|e| e.borrow_mut().take())
            .ok_or_else(|| ZkError::InvalidArgument("leave: this handle has not entered".into()))?;
        let left = leave_round(&entered, Deadline::after_ms(timeout_ms));
        // Not out yet (a timeout, a lost connection): the handle is still in the barrier, and
        // leaving again goes on where this left off.
        if left.is_err() {
            ENTERED.with(|e| *e.borrow_mut() = Some(entered));
        }
        left
    }
}

/// Leaves the round of the double barrier that `entered` joined: blocks until no process node of
/// that round is left, or the deadline passes.
fn leave_round(entered: &Entered, deadline: Deadline) -> Result<(), ZkError> {
    let Entered { path, node, round } = entered;
    let my_name = zk::node_name(node).to_string();
    loop {
        // 1. List the processes of our round; 2. none left: done.
        let procs = processes(path, *round)?;
        let Some(lowest) = procs.first() else { return Ok(()) };
        let here = procs.contains(&my_name);
        // 3. Only us left: delete our node and go.
        if here && procs.len() == 1 {
            return zk::delete_retrying(node);
        }
        // 4. Lowest: wait for the highest to go; 5. otherwise delete ours and wait for the
        // lowest to go.
        let watch = if here && *lowest == my_name {
            procs[procs.len() - 1].clone()
        } else {
            if here {
                zk::delete_retrying(node)?;
            }
            lowest.clone()
        };
        let (stat, watcher) = zk::exists_watch(&zk::join(path, &watch))?;
        if stat.is_some() {
            zk::wait_on(&watcher, deadline)?;
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
            let (stat, watcher) = zk::exists_watch(&path)?;
            if stat.is_none() {
                return Ok(());
            }
            zk::wait_on(&watcher, deadline)?;
        }
    }
}

export!(Barrier);
