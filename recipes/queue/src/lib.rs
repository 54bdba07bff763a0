//! Queue and priority queue, ZooKeeper "Recipes and Solutions" 1.4 and 1.4.1.
//!
//! Producers create sequential children `_c_<uuid>-queue-<seq>` (or `_c_<uuid>-queue-<YY><seq>`
//! with a priority); items are ordered by what follows the last `queue-`, priority first (00 to
//! 99, an item without one after them all, as kazoo's default of 100), then sequence, so the
//! unique prefix does not change the order, and items named the seed's way (`queue-<seq>`) are
//! taken too. A
//! consumer lists the children once per batch and works through the cached, sorted list. In a
//! priority queue the cached list is dropped as soon as the children watch set with it fires, so
//! a new higher-priority item is never passed over; in a plain queue new items always sort after
//! the cached ones, so the batch is used up first (one getChildren per batch).
//!
//! Every consumer claims an item before it has it: an ephemeral claim `<path>-claims/<item>`
//! holding the claimer's instance id (handles on one host share a session, so the owner alone
//! cannot tell them apart). `claim` returns the item with its claim; `take` reads it and deletes
//! item and claim in one `multi`. Items claimed by someone else are skipped.
//!
//! No lost reply loses or doubles an item:
//!
//! - `put` creates the item and an ephemeral marker `<path>/_c_<uuid>-put-<seq>` with the same
//!   unique prefix in one `multi` (which also deletes the marker of this handle's previous put).
//!   When its reply is lost, the marker says whether it applied, even if a consumer has taken
//!   the item meanwhile: present, it did (and the item's sequence is the marker's less one, the
//!   two being created in one transaction under one parent); absent, it did not, and the same
//!   `multi` is sent again. A put is never retried after it applied.
//! - `take` and `claim` create their claim; a lost reply is retried, and `node-exists` with our
//!   instance id in the claim means the lost create was ours. Reads are idempotent.
//! - The `multi` deleting item and claim is atomic, so after a lost reply a look settles it:
//!   both gone, it applied and the item is ours; both there, it did not, and it is sent again.
//!   Until then our claim keeps every other consumer off the item, and if we die first the claim
//!   vanishes with our handle or session and the item goes to another consumer.
//!
//! A lost reply is looked into after a `sync`, so the server answering is up to date with the
//! leader.

wazoo_guest::recipe_world!("wazoo:recipes/queue-recipe@0.1.2");
wazoo_guest::protocol!("wazoo-queue/1");

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};

use exports::wazoo::recipes::queue::{Guest, Item};
use wazoo_guest::{
    self as zk, CreateMode, CreateOp, Deadline, DeleteOp, MultiError, Op, OpResult, Watcher, ZkError,
};

const ITEM: &str = "queue-";
/// The name of a put's marker, after its unique prefix.
const MARKER: &str = "put-";
/// The unique prefix of a protected name starts so (Curator's protected mode).
const PROTECTED: &str = "_c_";

/// The current batch: sorted item names and the watch armed when they were listed.
struct Batch {
    path: String,
    names: VecDeque<String>,
    watcher: Watcher,
    /// Holds priority items (`queue-YY<seq>`), where a newcomer can sort first.
    prioritised: bool,
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
    /// The marker of this handle's last put, deleted by its next put (or with the handle).
    static LAST_MARKER: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// An item's sort key, what follows its last `queue-`: 10 sequence digits, or 12 with the
/// priority in front. None for a child that is not an item (a put's marker).
fn item_key(name: &str) -> Option<&str> {
    let at = name.rfind(ITEM)?;
    let before = &name[..at];
    if !(before.is_empty() || (before.starts_with(PROTECTED) && before.ends_with('-'))) {
        return None;
    }
    let key = &name[at + ITEM.len()..];
    (matches!(key.len(), 10 | 12) && key.bytes().all(|b| b.is_ascii_digit())).then_some(key)
}

/// A sequence suffix is 10 digits; a priority item has 2 more in front.
fn is_prioritised(name: &str) -> bool {
    item_key(name).is_some_and(|key| key.len() == 12)
}

/// The priority an item without one sorts with: after every item with a priority (0 to 99), as
/// kazoo's queues put an item of no stated priority at 100.
const NO_PRIORITY: u32 = 100;

/// Where an item sorts: its priority (lower first; [`NO_PRIORITY`] without one), then its
/// sequence number. Not the key's text: a 10-digit and a 12-digit key do not compare as text.
fn item_order(name: &str) -> (u32, u64) {
    let key = item_key(name).unwrap_or_default();
    let (priority, sequence) = match key.len() {
        12 => (key[..2].parse().unwrap_or(NO_PRIORITY), &key[2..]),
        _ => (NO_PRIORITY, key),
    };
    (priority, sequence.parse().unwrap_or(u64::MAX))
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
        let (children, _, watcher) = match zk::get_children_watch(path) {
            Ok(listed) => listed,
            Err(ZkError::NoNode) => {
                // No queue yet: wait for it to appear.
                let (stat, watcher) = zk::exists_watch(path)?;
                if stat.is_none() {
                    zk::wait_on(&watcher, deadline)?;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut names: Vec<String> = children.into_iter().filter(|c| item_key(c).is_some()).collect();
        names.sort_by_key(|name| item_order(name));
        let names: VecDeque<String> = names.into();
        if names.is_empty() {
            // Empty: wait for the watch set with this very listing.
            zk::wait_on(&watcher, deadline)?;
            continue;
        }
        let prioritised = names.iter().any(|n| is_prioritised(n));
        BATCH.with(|b| *b.borrow_mut() = Some(Batch { path: path.to_string(), names, watcher, prioritised }));
    }
}

/// Claims the head unclaimed item: its node, its claim and its data.
fn claim_next(path: &str, deadline: Deadline) -> Result<(String, String, Vec<u8>), ZkError> {
    let claims = claims_dir(path);
    // Items found claimed by others since the last wait: meeting one again means a whole pass
    // found nothing to claim, so wait for a claim to go (or time to pass) rather than list
    // again at once.
    let mut taken: HashSet<String> = HashSet::new();
    loop {
        let name = next_name(path, deadline)?;
        if !taken.insert(name.clone()) {
            wait_for_claims(&claims, deadline)?;
            taken.clear();
            continue;
        }
        let node = zk::join(path, &name);
        let claim = zk::join(&claims, &name);
        if !create_claim(&claim)? {
            continue;
        }
        match zk::get_data(&node) {
            Ok((data, _)) => return Ok((node, claim, data)),
            // Taken by an earlier claimer whose claim went just before ours was made.
            Err(ZkError::NoNode) => zk::delete_retrying(&claim)?,
            Err(e) => return Err(e),
        }
    }
}

/// Creates our claim: true if it is ours (made now, or by our own create whose reply was
/// lost), false if another consumer holds it.
fn create_claim(claim: &str) -> Result<bool, ZkError> {
    let me = zk::instance_id();
    let mut made_parents = false;
    loop {
        match zk::retrying(|| zk::create(claim, me.as_bytes(), CreateMode::Ephemeral)) {
            Ok(_) => return Ok(true),
            Err(ZkError::NoNode) if !made_parents => {
                zk::ensure_parents(claim)?;
                made_parents = true;
            }
            Err(ZkError::NodeExists) => return owned_claim(claim),
            Err(e) => return Err(e),
        }
    }
}

/// Deletes a claimed item and its claim in one `multi`: true once they are gone (by this call,
/// or by an earlier attempt whose reply was lost), false if the item is no longer ours to
/// delete (it went another way, or our claim did), our claim then removed.
fn remove_claimed(node: &str, claim: &str) -> Result<bool, ZkError> {
    let ops = [
        Op::Delete(DeleteOp { path: node.to_string(), version: None }),
        Op::Delete(DeleteOp { path: claim.to_string(), version: None }),
    ];
    let mut attempt = 0;
    loop {
        match zk::multi(&ops) {
            Ok(_) => return Ok(true),
            Err(MultiError { index: None, error: ZkError::ConnectionLoss })
                if attempt < zk::CONNECTION_LOSS_RETRIES =>
            {
                attempt += 1;
                zk::sync(node)?;
                let item_left = zk::exists(node)?.is_some();
                match (item_left, owned_claim(claim)?) {
                    // All or nothing: both gone, it applied.
                    (false, false) => return Ok(true),
                    (true, true) => zk::backoff(attempt),
                    (false, true) => {
                        zk::delete_retrying(claim)?;
                        return Ok(false);
                    }
                    (true, false) => return Ok(false),
                }
            }
            Err(MultiError { index: Some(0), error: ZkError::NoNode }) => {
                zk::delete_retrying(claim)?;
                return Ok(false);
            }
            Err(MultiError { index: Some(1), error: ZkError::NoNode }) => return Ok(false),
            Err(e) => return Err(e.error),
        }
    }
}

/// The path a `multi` made at `index`.
fn created_at(results: &[OpResult], index: usize) -> Result<String, ZkError> {
    match results.get(index) {
        Some(OpResult::Created(created)) => Ok(created.path.clone()),
        other => Err(ZkError::Other(format!("multi answered {other:?} for a create"))),
    }
}

/// After a put whose reply was lost: the item and marker it made, if it applied. The marker
/// (ephemeral, so it outlives no taker) is there whether or not the item was taken since, and
/// the item's sequence is the marker's less one.
fn applied_put(path: &str, prefix: &str, name: &str) -> Result<Option<(String, String)>, ZkError> {
    zk::sync(path)?;
    let children = match zk::get_children(path) {
        Ok((children, _)) => children,
        Err(ZkError::NoNode) => return Ok(None),
        Err(e) => return Err(e),
    };
    let marker = format!("{prefix}{MARKER}");
    let Some(found) = children.into_iter().find(|c| c.starts_with(&marker)) else { return Ok(None) };
    let sequence: u64 = found[marker.len()..]
        .parse()
        .map_err(|_| ZkError::Other(format!("{found} does not end in a sequence number")))?;
    let item = zk::join(path, &format!("{prefix}{name}{:010}", sequence.saturating_sub(1)));
    Ok(Some((item, zk::join(path, &found))))
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
        let prefix = format!("{PROTECTED}{}-", zk::new_guid());
        let item = zk::join(&path, &format!("{prefix}{name}"));
        let marker = zk::join(&path, &format!("{prefix}{MARKER}"));
        let (mut made_parents, mut attempt) = (false, 0);
        loop {
            let stale = LAST_MARKER.with(|m| m.borrow().clone());
            let mut ops = vec![
                Op::Create(CreateOp { path: item.clone(), data: data.clone(), mode }),
                Op::Create(CreateOp {
                    path: marker.clone(),
                    data: Vec::new(),
                    mode: CreateMode::EphemeralSequential,
                }),
            ];
            if let Some(stale) = &stale {
                ops.push(Op::Delete(DeleteOp { path: stale.clone(), version: None }));
            }
            let (made, marked) = match zk::multi(&ops) {
                Ok(results) => (created_at(&results, 0)?, created_at(&results, 1)?),
                Err(MultiError { index: Some(0), error: ZkError::NoNode }) if !made_parents => {
                    zk::ensure_parents(&item)?;
                    made_parents = true;
                    continue;
                }
                // The previous marker is gone already.
                Err(MultiError { index: Some(2), error: ZkError::NoNode }) => {
                    LAST_MARKER.with(|m| *m.borrow_mut() = None);
                    continue;
                }
                Err(MultiError { index: None, error: ZkError::ConnectionLoss })
                    if attempt < zk::CONNECTION_LOSS_RETRIES =>
                {
                    attempt += 1;
                    match applied_put(&path, &prefix, &name)? {
                        Some(found) => found,
                        None => {
                            zk::backoff(attempt);
                            continue;
                        }
                    }
                }
                Err(e) => return Err(e.error),
            };
            LAST_MARKER.with(|m| *m.borrow_mut() = Some(marked));
            return Ok(made);
        }
    }

    fn take(path: String, timeout_ms: Option<u64>) -> Result<Item, ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        loop {
            let (node, claim, data) = claim_next(&path, deadline)?;
            if remove_claimed(&node, &claim)? {
                return Ok(Item { node, data });
            }
        }
    }

    fn claim(path: String, timeout_ms: Option<u64>) -> Result<Item, ZkError> {
        zk::check_path(&path)?;
        let (node, _, data) = claim_next(&path, Deadline::after_ms(timeout_ms))?;
        Ok(Item { node, data })
    }

    fn ack(node: String) -> Result<(), ZkError> {
        zk::check_path(&node)?;
        let claim = zk::join(&claims_dir(zk::parent(&node)), zk::node_name(&node));
        if !owned_claim(&claim)? {
            return Err(ZkError::InvalidArgument(format!("{node} is not claimed by this handle")));
        }
        match remove_claimed(&node, &claim)? {
            true => Ok(()),
            false => Err(ZkError::NoNode),
        }
    }

    fn len(path: String) -> Result<u32, ZkError> {
        zk::check_path(&path)?;
        match zk::get_children(&path) {
            Ok((children, _)) => Ok(children.iter().filter(|c| item_key(c).is_some()).count() as u32),
            Err(ZkError::NoNode) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// Every item is claimed: waits until a claim is deleted or made (its claimer acked, or died),
/// at most `CLAIMED_WAIT_MS` at a time, since a new item does not touch the claims directory.
fn wait_for_claims(claims: &str, deadline: Deadline) -> Result<(), ZkError> {
    let (_, _, watcher) = match zk::get_children_watch(claims) {
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

/// Whether the claim node exists and is this instance's: handles on one host share a session,
/// so the claim's data (the claimer's instance id) decides, not its owner.
fn owned_claim(claim: &str) -> Result<bool, ZkError> {
    zk::owns(claim, Some(zk::instance_id().as_bytes()))
}

export!(Queue);
