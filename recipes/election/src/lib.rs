//! Leader election, ZooKeeper "Recipes and Solutions" 1.7, in Curator's `LeaderLatch` wire
//! format (`<path>/_c_<uuid>-latch-<seq>`, data = participant id), plus what etcd's election has
//! and Curator lacks: observing the leader without contending, resigning, and the seed's
//! acknowledgement that the leader procedure ran.
//!
//! The acknowledgement is the ephemeral node `<path>-leader-ack`, holding the leader's node path,
//! a newline and the note. It is shown only with the node it names: handles on one host share a
//! session, so the node's owner cannot tell one handle's leadership from another's. A leader
//! writes it in one `multi` that first checks its own node still exists (a deposed leader cannot
//! acknowledge) and replaces an acknowledgement naming any other node (stale, since that node no
//! longer leads). Resigning deletes the acknowledgement and the node together.

wazoo_guest::recipe_world!("wazoo:recipes/election-recipe@0.1.2");
#[cfg(not(feature = "selector"))]
wazoo_guest::protocol!("curator-leader-latch/1");
#[cfg(feature = "selector")]
wazoo_guest::protocol!("curator-leader-selector/1");

use std::cell::RefCell;

use exports::wazoo::recipes::election::{Guest, LeaderInfo as Leader, Leadership};
use wazoo_guest::{
    self as zk, CheckOp, CreateMode, CreateOp, Deadline, DeleteOp, MultiError, Op, Watcher, ZkError,
};

/// Curator's latch name: the sequence follows it.
#[cfg(not(feature = "selector"))]
const LATCH: &str = "latch-";
/// Built with the `selector` feature (`election-selector.wasm`): Curator's `LeaderSelector`
/// format, whose candidates are `InterProcessMutex` nodes (`_c_<uuid>-lock-<seq>`) holding the
/// participant id. The protocol is the same: the lowest node leads.
#[cfg(feature = "selector")]
const LATCH: &str = "lock-";
/// How many times an acknowledgement is written again after another write came in between.
const ACK_ATTEMPTS: u32 = 10;

struct Candidacy {
    path: String,
    leadership: Leadership,
    acknowledged: bool,
}

thread_local! {
    static CANDIDACY: RefCell<Option<Candidacy>> = const { RefCell::new(None) };
}

fn ack_path(path: &str) -> String {
    format!("{path}-leader-ack")
}

/// The acknowledgement's data: the leader's node, a newline (never in a path), the note.
fn ack_data(node: &str, note: &str) -> Vec<u8> {
    format!("{node}\n{note}").into_bytes()
}

/// The note of an acknowledgement's `data` if it names `node`.
fn note_for(data: &[u8], node: &str) -> Option<String> {
    let rest = data.strip_prefix(node.as_bytes())?.strip_prefix(b"\n")?;
    Some(String::from_utf8_lossy(rest).into_owned())
}

/// What `observe`'s caller passes as `known` after seeing `leader`.
fn seen(leader: &Leader) -> String {
    match &leader.acknowledged {
        Some(note) => format!("{}\n{note}", leader.node),
        None => leader.node.clone(),
    }
}

struct Election;

impl Guest for Election {
    fn campaign(path: String, id: String, timeout_ms: Option<u64>) -> Result<Leadership, ZkError> {
        if let Some(current) =
            CANDIDACY.with(|c| c.borrow().as_ref().map(|c| (c.path.clone(), c.leadership.clone())))
        {
            return match current {
                (p, leadership) if p == path => Ok(leadership),
                (p, _) => Err(ZkError::InvalidArgument(format!("this handle already leads {p}"))),
            };
        }
        // 1. Create an ephemeral sequential proposal holding our id; 2. list the proposals; 3. if
        // ours is the lowest we lead; 4. otherwise watch only the next lower one and look again.
        let deadline = Deadline::after_ms(timeout_ms);
        let mine = zk::contend(&path, LATCH, id.as_bytes(), &zk::exclusive(&[LATCH]), deadline)?;
        let leadership = Leadership { node: mine.path, token: mine.stat.czxid };
        CANDIDACY.with(|c| {
            *c.borrow_mut() = Some(Candidacy { path, leadership: leadership.clone(), acknowledged: false })
        });
        Ok(leadership)
    }

    fn acknowledge(note: String) -> Result<(), ZkError> {
        let (path, node) = CANDIDACY
            .with(|c| c.borrow().as_ref().map(|c| (c.path.clone(), c.leadership.node.clone())))
            .ok_or_else(|| ZkError::InvalidArgument("acknowledge: this handle does not lead".into()))?;
        let (ack, data) = (ack_path(&path), ack_data(&node, &note));
        for _ in 0..ACK_ATTEMPTS {
            if zk::retrying(|| write_ack(&ack, &node, &data))? {
                CANDIDACY.with(|c| {
                    if let Some(c) = c.borrow_mut().as_mut() {
                        c.acknowledged = true;
                    }
                });
                return Ok(());
            }
        }
        Err(ZkError::Other(format!("acknowledge: {ack} kept changing under this write")))
    }

    fn resign() -> Result<(), ZkError> {
        let Some(candidacy) = CANDIDACY.with(|c| c.borrow_mut().take()) else {
            return Err(ZkError::InvalidArgument("resign: this handle is not a candidate".into()));
        };
        let node = &candidacy.leadership.node;
        if candidacy.acknowledged {
            // Together, so no observer sees this leader without its acknowledgement. A node
            // already gone (deposed) leaves its acknowledgement to the next leader's.
            let ack = ack_path(&candidacy.path);
            let together = zk::retrying(|| match zk::get_data(&ack) {
                Ok((data, stat)) if note_for(&data, node).is_some() => {
                    let ops = [
                        Op::Delete(DeleteOp { path: ack.clone(), version: Some(stat.version) }),
                        Op::Delete(DeleteOp { path: node.clone(), version: None }),
                    ];
                    zk::multi(&ops).map(|_| ()).map_err(|e| e.error)
                }
                Ok(_) | Err(ZkError::NoNode) => Ok(()),
                Err(e) => Err(e),
            });
            match together {
                Ok(()) | Err(ZkError::NoNode | ZkError::BadVersion) => {}
                Err(e) => return Err(e),
            }
        }
        zk::delete_retrying(node)
    }

    fn leader(path: String) -> Result<Option<Leader>, ZkError> {
        zk::check_path(&path)?;
        // Catch up with the ensemble's leader first: a lagging server would still show a
        // deposed leader.
        zk::sync(&path)?;
        current_leader(&path)
    }

    fn observe(
        path: String,
        known: Option<String>,
        timeout_ms: Option<u64>,
    ) -> Result<Option<Leader>, ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        let ack = ack_path(&path);
        loop {
            // Armed before the look, so no acknowledgement written after it goes unseen.
            let (_, on_ack) = zk::exists_watch(&ack)?;
            let now = current_leader(&path)?;
            if now.as_ref().map(seen) != known {
                return Ok(now);
            }
            if deadline.expired() {
                return Err(ZkError::Timeout);
            }
            match now {
                Some(leader) => {
                    let on_leader = match zk::get_data_watch(&leader.node) {
                        Ok((_, _, watcher)) => watcher,
                        Err(ZkError::NoNode) => continue,
                        Err(e) => return Err(e),
                    };
                    wait_either(&on_leader, &on_ack, deadline)?;
                }
                None => wait_for_candidates(&path, deadline)?,
            }
        }
    }
}

/// One try at writing this leader's acknowledgement `data` at `ack`: `Ok(false)` when another
/// write came between our look and ours. Our `node` must still exist.
fn write_ack(ack: &str, node: &str, data: &[u8]) -> Result<bool, ZkError> {
    let replaced = match zk::get_data(ack) {
        Ok((current, _)) if current == data => return still_leading(node).map(|()| true),
        Ok((_, stat)) => Some(stat.version),
        Err(ZkError::NoNode) => None,
        Err(e) => return Err(e),
    };
    let mut ops = vec![Op::Check(CheckOp { path: node.to_string(), version: -1 })];
    if let Some(version) = replaced {
        ops.push(Op::Delete(DeleteOp { path: ack.to_string(), version: Some(version) }));
    }
    ops.push(Op::Create(CreateOp {
        path: ack.to_string(),
        data: data.to_vec(),
        mode: CreateMode::Ephemeral,
    }));
    match zk::multi(&ops) {
        Ok(_) => Ok(true),
        Err(MultiError { index: Some(0), error: ZkError::NoNode }) => Err(deposed(node)),
        Err(MultiError {
            index: Some(_),
            error: ZkError::NoNode | ZkError::NodeExists | ZkError::BadVersion,
        }) => Ok(false),
        Err(MultiError { error, .. }) => Err(error),
    }
}

/// `Ok` while this handle's `node` exists (so it leads).
fn still_leading(node: &str) -> Result<(), ZkError> {
    match zk::exists(node)? {
        Some(_) => Ok(()),
        None => Err(deposed(node)),
    }
}

fn deposed(node: &str) -> ZkError {
    ZkError::Other(format!("acknowledge: this handle no longer leads ({node} is gone)"))
}

/// The lowest proposal, its id, token and (if it names that proposal) acknowledgement.
fn current_leader(path: &str) -> Result<Option<Leader>, ZkError> {
    loop {
        let children = match zk::get_children(path) {
            Ok((children, _)) => children,
            Err(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let candidates: Vec<String> = children.into_iter().filter(|c| c.contains(LATCH)).collect();
        let Some(first) = zk::sorted(candidates, &[LATCH]).into_iter().next() else { return Ok(None) };
        let node = zk::join(path, &first);
        // The acknowledgement first, then the leader's node: a resign deletes both in one
        // multi, so a node still there after the read of its acknowledgement means that read
        // was not torn by a resignation in between.
        let acknowledged = match zk::get_data(&ack_path(path)) {
            Ok((ack, _)) => note_for(&ack, &node),
            Err(ZkError::NoNode) => None,
            Err(e) => return Err(e),
        };
        let (data, stat) = match zk::get_data(&node) {
            Ok(found) => found,
            // It went between the listing and the read: look again.
            Err(ZkError::NoNode) => continue,
            Err(e) => return Err(e),
        };
        let id = String::from_utf8_lossy(&data).into_owned();
        return Ok(Some(Leader { node, id, token: stat.czxid, acknowledged }));
    }
}

/// Blocks until `first` or `second` fires (`session-expired` if the session ended), or the
/// deadline passes (`timeout`): one wait on both (the host's `wait-any`).
fn wait_either(first: &Watcher, second: &Watcher, deadline: Deadline) -> Result<(), ZkError> {
    zk::wait_any(&[first, second], deadline).map(|_| ())
}

/// Blocks until the election directory gains a child (or is created).
fn wait_for_candidates(path: &str, deadline: Deadline) -> Result<(), ZkError> {
    let watcher = match zk::get_children_watch(path) {
        Ok((children, _, watcher)) if children.is_empty() => watcher,
        Ok(_) => return Ok(()),
        Err(ZkError::NoNode) => match zk::exists_watch(path)? {
            (None, watcher) => watcher,
            (Some(_), _) => return Ok(()),
        },
        Err(e) => return Err(e),
    };
    watcher.changed(deadline.remaining_ms()).map(|_| ())
}

export!(Election);
