//! Leader election, ZooKeeper "Recipes and Solutions" 1.7, in Curator's `LeaderLatch` wire
//! format (`<path>/_c_<uuid>-latch-<seq>`, data = participant id), plus what etcd's election has
//! and Curator lacks: observing the leader without contending, resigning, and the seed's
//! acknowledgement that the leader procedure ran.

wazoo_guest::recipe_world!("wazoo:recipes/election-recipe@0.1.0");

use std::cell::RefCell;

use exports::wazoo::recipes::election::{Guest, LeaderInfo as Leader, Leadership};
use wazoo_guest::{self as zk, CreateMode, Deadline, EventKind, ZkError};

/// Curator's latch name: the sequence follows it.
const LATCH: &str = "latch-";

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
        let mine = zk::contend(&path, LATCH, id.as_bytes(), &[LATCH], deadline, zk::exclusive)?;
        let leadership = Leadership { node: mine.path, token: mine.stat.czxid };
        CANDIDACY.with(|c| {
            *c.borrow_mut() = Some(Candidacy { path, leadership: leadership.clone(), acknowledged: false })
        });
        Ok(leadership)
    }

    fn acknowledge(note: String) -> Result<(), ZkError> {
        let path = CANDIDACY
            .with(|c| c.borrow().as_ref().map(|c| c.path.clone()))
            .ok_or_else(|| ZkError::InvalidArgument("acknowledge: this handle does not lead".into()))?;
        let ack = ack_path(&path);
        match zk::retrying(|| zk::create(&ack, note.as_bytes(), CreateMode::Ephemeral)) {
            Ok(_) => {}
            // Ours from an earlier acknowledgement (ephemeral, so a stale one from another
            // session would be gone once that session is).
            Err(ZkError::NodeExists) => {
                let (_, stat) = zk::retrying(|| zk::get_data(&ack))?;
                if stat.ephemeral_owner != zk::session_id() {
                    return Err(ZkError::Other("another session's acknowledgement is still there".into()));
                }
                zk::retrying(|| zk::set_data(&ack, note.as_bytes(), None))?;
            }
            Err(e) => return Err(e),
        }
        CANDIDACY.with(|c| {
            if let Some(c) = c.borrow_mut().as_mut() {
                c.acknowledged = true;
            }
        });
        Ok(())
    }

    fn resign() -> Result<(), ZkError> {
        let Some(candidacy) = CANDIDACY.with(|c| c.borrow_mut().take()) else {
            return Err(ZkError::InvalidArgument("resign: this handle is not a candidate".into()));
        };
        if candidacy.acknowledged {
            zk::delete_retrying(&ack_path(&candidacy.path))?;
        }
        zk::delete_retrying(&candidacy.leadership.node)
    }

    fn leader(path: String) -> Result<Option<Leader>, ZkError> {
        zk::check_path(&path)?;
        current_leader(&path)
    }

    fn observe(
        path: String,
        known: Option<String>,
        timeout_ms: Option<u64>,
    ) -> Result<Option<Leader>, ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        loop {
            let now = current_leader(&path)?;
            if now.as_ref().map(|l| &l.node) != known.as_ref() {
                return Ok(now);
            }
            if deadline.expired() {
                return Err(ZkError::Timeout);
            }
            match now {
                // The leader changes only when its node goes.
                Some(leader) => zk::wait_for_change(&leader.node, deadline)?,
                None => wait_for_candidates(&path, deadline)?,
            }
        }
    }
}

/// The lowest proposal, its id, token and (if the same session wrote it) acknowledgement.
fn current_leader(path: &str) -> Result<Option<Leader>, ZkError> {
    loop {
        let children = match zk::retrying(|| zk::get_children(path)) {
            Ok((children, _)) => children,
            Err(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let candidates: Vec<String> = children.into_iter().filter(|c| c.contains(LATCH)).collect();
        let Some(first) = zk::sorted(candidates, &[LATCH]).into_iter().next() else { return Ok(None) };
        let node = zk::join(path, &first);
        let (data, stat) = match zk::retrying(|| zk::get_data(&node)) {
            Ok(found) => found,
            // It went between the listing and the read: look again.
            Err(ZkError::NoNode) => continue,
            Err(e) => return Err(e),
        };
        let acknowledged = match zk::retrying(|| zk::get_data(&ack_path(path))) {
            Ok((note, ack)) if ack.ephemeral_owner == stat.ephemeral_owner => {
                Some(String::from_utf8_lossy(&note).into_owned())
            }
            Ok(_) | Err(ZkError::NoNode) => None,
            Err(e) => return Err(e),
        };
        let id = String::from_utf8_lossy(&data).into_owned();
        return Ok(Some(Leader { node, id, token: stat.czxid, acknowledged }));
    }
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
    match watcher.wait(deadline.remaining_ms())?.kind {
        EventKind::SessionExpired | EventKind::SessionClosed => Err(ZkError::SessionExpired),
        _ => Ok(()),
    }
}

export!(Election);
