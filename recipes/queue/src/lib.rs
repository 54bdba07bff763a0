//! Queue and priority queue, ZooKeeper "Recipes and Solutions" 1.4 and 1.4.1.
//!
//! Producers create sequential children `queue-<seq>` (or `queue-<YY><seq>` with a priority).
//! A consumer lists the children once per batch and works through the cached, sorted list,
//! claiming each item by deleting it (`take`) or by creating an ephemeral claim (`claim`). In a
//! priority queue the cached list is dropped as soon as the children watch set with it fires, so
//! a new higher-priority item is never passed over; in a plain queue new items always sort after
//! the cached ones, so the batch is used up first (one getChildren per batch).

wazoo_guest::recipe_world!("wazoo:recipes/queue-recipe@0.1.0");

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};

use exports::wazoo::recipes::queue::{Guest, Item};
use wazoo_guest::{self as zk, CreateMode, Deadline, DeleteOp, Op, Watcher, ZkError};

const ITEM: &str = "queue-";

/// The current batch: sorted item names and the watch armed when they were listed.
struct Batch {
    path: String,
    names: VecDeque<String>,
    watcher: Watcher,
    /// Holds priority items (`queue-YY<seq>`), where a newcomer can sort first.
    prioritised: bool,
}

/// A sequence suffix is 10 digits; a priority item has 2 more in front.
fn is_prioritised(name: &str) -> bool {
    name.len() == ITEM.len() + 12
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

fn claims_dir(path: &str) -> String {
    format!("{path}-claims")
}

/// The next candidate item name, listing the queue again when the batch is used up or stale.
/// Blocks (on the children watch) while the queue is empty.
fn next_name(path: &str, deadline: Deadline) -> Result<String, ZkError> {
    loop {
        let cached = BATCH.with(|b| {
            let mut b = b.borrow_mut();
            match b.as_mut() {
                Some(batch) if batch.path == path => {
                    // In a priority queue a fired watch means new items may sort before the
                    // cached ones.
                    if batch.prioritised && matches!(batch.watcher.wait(Some(0)), Ok(_)) {
                        *b = None;
                        return None;
                    }
                    batch.names.pop_front()
                }
                _ => None,
            }
        });
        if let Some(name) = cached {
            return Ok(name);
        }
        let (children, _, watcher) = match zk::retrying(|| zk::get_children_watch(path)) {
            Ok(listed) => listed,
            Err(ZkError::NoNode) => {
                // No queue yet: wait for it to appear.
                let (stat, watcher) = zk::retrying(|| zk::exists_watch(path))?;
                if stat.is_none() {
                    zk::wait_on(&watcher, deadline)?;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let names: VecDeque<String> =
            zk::sorted(children.into_iter().filter(|c| c.starts_with(ITEM)).collect(), &[ITEM]).into();
        if names.is_empty() {
            // Empty: wait for the watch set with this very listing.
            zk::wait_on(&watcher, deadline)?;
            continue;
        }
        let prioritised = names.iter().any(|n| is_prioritised(n));
        BATCH.with(|b| *b.borrow_mut() = Some(Batch { path: path.to_string(), names, watcher, prioritised }));
    }
}

struct Queue;

impl Guest for Queue {
    fn put(path: String, data: Vec<u8>, priority: Option<u8>, ephemeral: bool) -> Result<String, ZkError> {
        zk::check_path(&path)?;
        let name = match priority {
            Some(p) if p > 99 => return Err(ZkError::InvalidArgument(format!("priority {p} is above 99"))),
            Some(p) => format!("{ITEM}{p:02}"),
            None => ITEM.to_string(),
        };
        let mode = if ephemeral { CreateMode::EphemeralSequential } else { CreateMode::PersistentSequential };
        let node = zk::join(&path, &name);
        let mut attempt = 0;
        loop {
            // A lost reply is retried: the seed's queue accepts an item appearing twice
            // rather than not at all (at-least-once put).
            match zk::retrying(|| zk::create(&node, &data, mode)) {
                Ok(created) => return Ok(created.path),
                Err(ZkError::NoNode) if attempt == 0 => {
                    attempt += 1;
                    zk::ensure_parents(&node)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn take(path: String, timeout_ms: Option<u64>) -> Result<Item, ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        loop {
            let name = next_name(&path, deadline)?;
            let node = zk::join(&path, &name);
            let data = match zk::retrying(|| zk::get_data(&node)) {
                Ok((data, _)) => data,
                Err(ZkError::NoNode) => continue, // another consumer took it
                Err(e) => return Err(e),
            };
            // Delete-to-claim: whoever deletes it owns it.
            match zk::delete(&node, None) {
                Ok(()) => return Ok(Item { node, data }),
                Err(ZkError::NoNode) => continue,
                // Outcome unknown: if it is gone now, it may be ours or another's; never
                // return an item we cannot be sure we took.
                Err(ZkError::ConnectionLoss) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn claim(path: String, timeout_ms: Option<u64>) -> Result<Item, ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        let claims = claims_dir(&path);
        // Items found claimed by others since the last wait: meeting one again means a whole
        // pass found nothing to claim, so wait for a claim to go (or time to pass) rather than
        // list again at once.
        let mut taken: HashSet<String> = HashSet::new();
        loop {
            let name = next_name(&path, deadline)?;
            if !taken.insert(name.clone()) {
                wait_for_claims(&claims, deadline)?;
                taken.clear();
                continue;
            }
            let node = zk::join(&path, &name);
            let claim = zk::join(&claims, &name);
            let me = zk::instance_id();
            let created = match zk::retrying(|| zk::create(&claim, me.as_bytes(), CreateMode::Ephemeral)) {
                Ok(_) => true,
                Err(ZkError::NoNode) => {
                    zk::ensure_parents(&claim)?;
                    match zk::create(&claim, me.as_bytes(), CreateMode::Ephemeral) {
                        Ok(_) => true,
                        Err(ZkError::NodeExists) => false,
                        Err(e) => return Err(e),
                    }
                }
                // Claimed by someone (or by our own lost-reply retry: then it is ours).
                Err(ZkError::NodeExists) => owned_claim(&claim)?,
                Err(e) => return Err(e),
            };
            if !created {
                continue;
            }
            match zk::retrying(|| zk::get_data(&node)) {
                Ok((data, _)) => return Ok(Item { node, data }),
                // Acked by an earlier claimer whose claim we just replaced: drop ours.
                Err(ZkError::NoNode) => {
                    zk::delete_retrying(&claim)?;
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn ack(node: String) -> Result<(), ZkError> {
        zk::check_path(&node)?;
        let claim = zk::join(&claims_dir(zk::parent(&node)), zk::node_name(&node));
        if !owned_claim(&claim)? {
            return Err(ZkError::InvalidArgument(format!("{node} is not claimed by this handle")));
        }
        let ops = vec![
            Op::Delete(DeleteOp { path: node.clone(), version: None }),
            Op::Delete(DeleteOp { path: claim, version: None }),
        ];
        zk::multi(&ops).map(|_| ()).map_err(|e| e.error)
    }

    fn len(path: String) -> Result<u32, ZkError> {
        zk::check_path(&path)?;
        match zk::retrying(|| zk::get_children(&path)) {
            Ok((children, _)) => Ok(children.iter().filter(|c| c.starts_with(ITEM)).count() as u32),
            Err(ZkError::NoNode) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// Whether the claim node exists and is this instance's: handles on one host share a session,
/// so the claim's data (the claimer's instance id) decides, not its owner.
/// Every item is claimed: waits until a claim is deleted or made (its claimer acked, or died),
/// at most `CLAIMED_WAIT_MS` at a time, since a new item does not touch the claims directory.
fn wait_for_claims(claims: &str, deadline: Deadline) -> Result<(), ZkError> {
    let (_, _, watcher) = match zk::retrying(|| zk::get_children_watch(claims)) {
        Ok(listed) => listed,
        Err(ZkError::NoNode) => return Ok(()),
        Err(e) => return Err(e),
    };
    let slice = match deadline.remaining_ms() {
        Some(ms) => ms.min(CLAIMED_WAIT_MS),
        None => CLAIMED_WAIT_MS,
    };
    match zk::wait_on(&watcher, Deadline::after_ms(Some(slice))) {
        Err(ZkError::Timeout) if !deadline.expired() => Ok(()),
        other => other,
    }
}

/// How long a claimer waits on the claims before it looks at the items again.
const CLAIMED_WAIT_MS: u64 = 250;

fn owned_claim(claim: &str) -> Result<bool, ZkError> {
    match zk::retrying(|| zk::get_data(claim)) {
        Ok((data, stat)) => {
            Ok(stat.ephemeral_owner == zk::session_id() && data == zk::instance_id().as_bytes())
        }
        Err(ZkError::NoNode) => Ok(false),
        Err(e) => Err(e),
    }
}

export!(Queue);
