//! kazoo 2.11's layouts of the lock family, for the `kazoo` builds of the lock, read/write lock
//! and semaphore recipes.
//!
//! kazoo's `Lock`, `WriteLock` and `ReadLock` contend under the lock path with ephemeral
//! sequential nodes `<uuid hex><marker><seq>`: `__lock__` for `Lock` and `WriteLock`, `__rlock__`
//! for `ReadLock`. A contender is any child whose name ends in a marker and a 10-digit sequence
//! (`(?:__lock__|__rlock__)(-?\d{10})$`); contenders are ordered by that sequence, compared as
//! text. Each kind is blocked by the contenders ahead of it whose marker it excludes: `Lock` by
//! `__lock__` nodes, `WriteLock` by `__lock__` and `__rlock__` nodes, `ReadLock` by `__lock__`
//! nodes. Every other child is ignored. kazoo creates the lock path and its ancestors as
//! persistent nodes (`ensure_path`), so these builds do too.
//!
//! The contention is the host's (`contention.contend`), as for the Curator layouts, with kazoo's
//! names (`naming.kazoo`) and kazoo's rule (`blockers.sequenced`). The uuid prefix makes the
//! create protected as Curator's `_c_<uuid>-` does: after a lost reply the host finds the node
//! again by its prefix and claims it only if this session owns it.

use crate::{
    backoff, create, exists, join, new_guid, retrying, strings, Blockers, CreateMode, Created, Deadline,
    Naming, Pick, Result, Rule, ZkError, CONNECTION_LOSS_RETRIES,
};

/// The marker of kazoo's `Lock` and `WriteLock` nodes.
pub const LOCK: &str = "__lock__";
/// The marker of kazoo's `ReadLock` nodes.
pub const RLOCK: &str = "__rlock__";
/// Both markers: every kazoo contender is ordered by the sequence after one of them.
pub const MARKERS: [&str; 2] = [LOCK, RLOCK];

/// The sequence of a kazoo contender named `name` whose marker is one of `markers`, as kazoo's
/// `(?:markers)(-?\d{10})$` finds it: the 10 digits at the end (after a `-` when the server's
/// counter overflowed), right after the marker. None for any other name.
pub fn sequence<'a>(name: &'a str, markers: &[&str]) -> Option<&'a str> {
    let digits_at = name.len().checked_sub(10)?;
    if !name.is_char_boundary(digits_at) || !name[digits_at..].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let at = match name[..digits_at].strip_suffix('-') {
        Some(stem) if markers.iter().any(|m| stem.ends_with(m)) => digits_at - 1,
        _ => digits_at,
    };
    markers.iter().any(|m| name[..at].ends_with(m)).then(|| &name[at..])
}

/// kazoo's node name prefix for one contender: a fresh `uuid4().hex` (32 hex digits) and the
/// marker. Unique, so a create whose reply was lost is found again by it.
pub fn prefix(marker: &str) -> String {
    format!("{}{marker}", hex_id())
}

/// A fresh version-4 UUID as 32 hex digits, as Python's `uuid.uuid4().hex`.
pub fn hex_id() -> String {
    new_guid().replace('-', "")
}

/// kazoo's rule for a contender that `excludes` those markers (`Lock`: `[LOCK]`, `WriteLock`:
/// `[LOCK, RLOCK]`): it holds when no such contender is ahead of it, and otherwise watches the
/// nearest one ahead (kazoo's `_get_predecessor`).
pub fn behind(excludes: &[&str]) -> Rule {
    Rule { order: strings(&MARKERS), blockers: Blockers::Sequenced(strings(excludes)), pick: Pick::Nearest }
}

/// The reader's rule (`ReadLock`, which excludes `[LOCK]`): it holds when no `__lock__` node is
/// ahead of it, as kazoo's does. It watches the first one ahead rather than kazoo's nearest: the
/// same nodes block it, and when that one was the lowest node and goes, the host looks again
/// without listing (the contention's hand-over), finding the next writer, if any, in what it
/// already knows.
pub fn first_ahead(excludes: &[&str]) -> Rule {
    Rule { order: strings(&MARKERS), blockers: Blockers::Sequenced(strings(excludes)), pick: Pick::First }
}

/// Creates `path` and every missing ancestor as persistent nodes, as kazoo's `ensure_path`.
pub fn ensure_path(path: &str) -> Result<()> {
    if path == "/" {
        return Ok(());
    }
    let ends = path.match_indices('/').skip(1).map(|(i, _)| i).chain([path.len()]);
    for end in ends {
        match retrying(|| create(&path[..end], &[], CreateMode::Persistent)) {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A whole contention in kazoo's layout, the host's `contention.contend`: create our node
/// `<dir>/<uuid hex><marker><seq>` (ephemeral sequential, holding `data`; a missing `dir` made
/// as kazoo makes it, persistent) and list `dir` in one round trip, wait until `rule` ([`behind`],
/// [`first_ahead`]) says it holds, and delete the node again if we give up or fail.
pub fn contend(dir: &str, marker: &str, data: &[u8], rule: &Rule, deadline: Deadline) -> Result<Created> {
    let naming = Naming::Kazoo(marker.to_string());
    crate::bindings::wazoo::zk::contention::contend(dir, &naming, data, rule, deadline.remaining_ms())
}

/// The max-leases a kazoo semaphore's node stores, as kazoo reads it: decimal text, or none when
/// the data is anything else (kazoo then checks nothing).
pub fn stored_leases(data: &[u8]) -> Option<i64> {
    std::str::from_utf8(data).ok()?.trim().parse().ok()
}

/// kazoo's `Semaphore._ensure_path`: the semaphore node `path` holds its max-leases as decimal
/// text. A missing node is created (persistent, with its ancestors) holding `max_leases`; an
/// existing one that holds a different number refuses the caller (`invalid-argument`), as kazoo
/// raises `ValueError`. Data that is not a number (a node kazoo is still setting up, which it
/// creates empty first, or one used for something else) is not checked, as kazoo does not.
pub fn ensure_semaphore(path: &str, max_leases: u32) -> Result<()> {
    let value = max_leases.to_string();
    for _ in 0..3 {
        let data = match crate::get_data(path) {
            Ok((data, _)) => data,
            Err(ZkError::NoNode) => {
                ensure_path(crate::parent(path))?;
                match retrying(|| create(path, value.as_bytes(), CreateMode::Persistent)) {
                    Ok(_) => return Ok(()),
                    // Made meanwhile, by another or by our own create whose reply was lost.
                    Err(ZkError::NodeExists) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        return match stored_leases(&data) {
            Some(stored) if stored != i64::from(max_leases) => Err(ZkError::InvalidArgument(format!(
                "semaphore {path} has max-leases {stored}, not {max_leases} (kazoo keeps it in the node's data; delete the node to change it)"
            ))),
            _ => Ok(()),
        };
    }
    Err(ZkError::Other(format!("semaphore {path} was deleted again each time it was made")))
}

/// kazoo's lease: while the caller holds the semaphore's mutex, and once fewer than
/// `max_leases` children are under `path`, create the ephemeral `<path>/<uuid hex>` (kazoo's
/// `_get_lease`); until then wait for the children to change. A create whose reply was lost is
/// sent again, and a `node-exists` then is our own node when this session owns it.
pub fn take_lease(path: &str, max_leases: u32, deadline: Deadline) -> Result<Created> {
    let lease = join(path, &hex_id());
    loop {
        let (children, _, watcher) = crate::get_children_watch(path)?;
        if children.len() < max_leases as usize {
            return create_lease(&lease);
        }
        crate::wait_on(&watcher, deadline)?;
    }
}

fn create_lease(lease: &str) -> Result<Created> {
    let mut lost = 0;
    loop {
        match create(lease, &[], CreateMode::Ephemeral) {
            Ok(created) => return Ok(created),
            Err(ZkError::ConnectionLoss) if lost < CONNECTION_LOSS_RETRIES => {
                lost += 1;
                backoff(lost);
            }
            // The name is unique to this call: it exists only if an earlier try made it.
            Err(ZkError::NodeExists) if lost > 0 => {
                return match exists(lease)? {
                    Some(stat) if stat.ephemeral_owner == crate::session_id() => {
                        Ok(Created { path: lease.to_string(), stat })
                    }
                    _ => Err(ZkError::NodeExists),
                };
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_found_as_kazoos_pattern_finds_them() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(sequence(&format!("{hex}__lock__0000000042"), &[LOCK]), Some("0000000042"));
        assert_eq!(sequence(&format!("{hex}__rlock__0000000042"), &[LOCK]), None);
        assert_eq!(sequence(&format!("{hex}__rlock__0000000042"), &MARKERS), Some("0000000042"));
        assert_eq!(sequence(&format!("{hex}__lock__-2147483648"), &[LOCK]), Some("-2147483648"));
        assert_eq!(sequence(&format!("{hex}__lock__000000042"), &[LOCK]), None, "nine digits");
        assert_eq!(sequence("_c_x-lock-0000000001", &MARKERS), None, "a Curator node is not a contender");
        assert_eq!(sequence("0000000001", &MARKERS), None);
    }

    #[test]
    fn the_rules_are_kazoos() {
        // WriteLock: blocked by both kinds, watches the nearest; Lock: readers do not block it;
        // ReadLock: blocked by the `__lock__` nodes ahead, watches the first. The host applies
        // them (wazoo-runtime's contention tests).
        let markers = |r: &Rule| match &r.blockers {
            Blockers::Sequenced(m) => m.clone(),
            _ => panic!("kazoo's contenders are found by their sequence"),
        };
        let writer = behind(&MARKERS);
        assert_eq!((markers(&writer), writer.pick), (strings(&MARKERS), Pick::Nearest));
        let lock = behind(&[LOCK]);
        assert_eq!((markers(&lock), lock.pick), (strings(&[LOCK]), Pick::Nearest));
        let reader = first_ahead(&[LOCK]);
        assert_eq!((markers(&reader), reader.pick), (strings(&[LOCK]), Pick::First));
        assert!([writer, lock, reader].iter().all(|r| r.order == strings(&MARKERS)));
    }

    #[test]
    fn stored_leases_read_like_kazoo() {
        assert_eq!(stored_leases(b"3"), Some(3));
        assert_eq!(stored_leases(b" 3\n"), Some(3));
        assert_eq!(stored_leases(b""), None);
        assert_eq!(stored_leases(b"leases"), None);
    }
}
