//! A registration kept present, as Apache Curator's `PersistentNode` keeps one and as service
//! discovery needs: the node at a path holding the registrant's data, ephemeral (gone with the
//! session) or persistent with a TTL (gone once unmodified for that long, so a registrant that
//! died leaves it only that long).
//!
//! `tend` watches the node (`getData` with a watch) and puts it right: a deleted node is made
//! again, changed data set back (a versioned set, so a registrant never overwrites a change it
//! has not seen). An ephemeral node of another session in its place is someone else's
//! registration: `node-exists`, never taken over; so is one of this session that another handle
//! made (handles on one host, the clients of one daemon, share its session), told apart by the
//! czxid of the node this handle made. A persistent node (a TTL node included) where
//! an ephemeral registration belongs is no registration at all: `invalid-argument`, naming it,
//! never taken over either. A TTL node is touched on every `tend` that found nothing wrong, which
//! keeps it alive while the registrant tends it.

wazoo_guest::recipe_world!("wazoo:recipes/registration-recipe@0.1.2");
wazoo_guest::protocol!("wazoo-registration/1");

use std::cell::RefCell;

use exports::wazoo::recipes::registration::{Guest, Tended};
use wazoo_guest::{self as zk, CreateMode, Deadline, ZkError};

/// What this handle keeps present.
#[derive(Clone)]
struct Registration {
    path: String,
    data: Vec<u8>,
    ttl_ms: Option<u64>,
    /// The czxid of the node this handle made or took over, once it has.
    czxid: Option<i64>,
}

impl Registration {
    fn mode(&self) -> CreateMode {
        match self.ttl_ms {
            Some(ttl) => CreateMode::PersistentTtl(ttl),
            None => CreateMode::Ephemeral,
        }
    }

    /// Whether a node with `owner` as its ephemeral owner may be this registration's: an
    /// ephemeral one of this session; for a TTL registration, any node that is not another
    /// session's ephemeral (a TTL node's owner field holds its TTL, marked by its top byte).
    fn may_be_ours(&self, owner: i64) -> bool {
        match self.ttl_ms {
            None => owner == zk::session_id(),
            Some(_) => !ephemeral(owner),
        }
    }

    /// Why a node with `owner` that may not be ours is left alone: another session's ephemeral
    /// node is its registration (`node-exists`); a persistent node where an ephemeral
    /// registration belongs is no registration at all (`invalid-argument`, naming it).
    fn refusal(&self, owner: i64) -> ZkError {
        if ephemeral(owner) {
            return ZkError::NodeExists;
        }
        ZkError::InvalidArgument(format!(
            "{} is a persistent node, not a registration (delete it or register elsewhere)",
            self.path
        ))
    }

    /// Whether an ephemeral node of this session (`czxid`) is another handle's: handles on one
    /// host share its session, so two clients of one daemon registering one path would both
    /// take it for theirs. Only the node this handle made (or, after a create whose reply was
    /// lost, the one that create may have made) is its own.
    fn another_handles(&self, czxid: i64, uncertain: bool) -> bool {
        self.ttl_ms.is_none() && !uncertain && self.czxid != Some(czxid)
    }

    /// Makes the node, or takes over the one there if it may be ours (its data set): the
    /// node's czxid.
    fn put(&self) -> Result<i64, ZkError> {
        let mut attempt = 0;
        // Whether a create's reply was lost: the node found then may be that create's.
        let mut uncertain = false;
        loop {
            attempt += 1;
            match zk::create(&self.path, &self.data, self.mode()) {
                Ok(created) => return Ok(created.stat.czxid),
                Err(ZkError::NoNode) if attempt <= 2 => zk::ensure_parents(&self.path)?,
                Err(ZkError::ConnectionLoss) if attempt <= zk::CONNECTION_LOSS_RETRIES => {
                    uncertain = true;
                    zk::backoff(attempt)
                }
                Err(ZkError::NodeExists) => match zk::get_data(&self.path) {
                    // Deleted meanwhile: make it.
                    Err(ZkError::NoNode) => continue,
                    Err(e) => return Err(e),
                    Ok((_, stat)) if !self.may_be_ours(stat.ephemeral_owner) => {
                        return Err(self.refusal(stat.ephemeral_owner));
                    }
                    Ok((_, stat)) if self.another_handles(stat.czxid, uncertain) => {
                        return Err(ZkError::NodeExists);
                    }
                    Ok((data, stat)) if data == self.data => return Ok(stat.czxid),
                    Ok((_, stat)) => match zk::set_data(&self.path, &self.data, Some(stat.version)) {
                        Ok(_) => return Ok(stat.czxid),
                        Err(ZkError::BadVersion | ZkError::NoNode | ZkError::ConnectionLoss) => continue,
                        Err(e) => return Err(e),
                    },
                },
                Err(e) => return Err(e),
            }
            if attempt > zk::CONNECTION_LOSS_RETRIES + 2 {
                return Err(ZkError::ConnectionLoss);
            }
        }
    }
}

/// Whether a node with `owner` as its ephemeral owner is an ephemeral node: a session's id,
/// neither 0 (persistent) nor a TTL node's TTL (marked by its top byte).
fn ephemeral(owner: i64) -> bool {
    owner != 0 && (owner as u64) >> 56 != 0xff
}

thread_local! {
    static REGISTERED: RefCell<Option<Registration>> = const { RefCell::new(None) };
}

fn registered() -> Result<Registration, ZkError> {
    REGISTERED
        .with(|r| r.borrow().clone())
        .ok_or_else(|| ZkError::InvalidArgument("this handle registered nothing".into()))
}

struct Recipe;

impl Guest for Recipe {
    fn register(path: String, data: Vec<u8>, ttl_ms: Option<u64>) -> Result<(), ZkError> {
        zk::check_path(&path)?;
        if path == "/" {
            return Err(ZkError::InvalidPath("the root cannot be registered".into()));
        }
        if ttl_ms == Some(0) {
            return Err(ZkError::InvalidArgument("a TTL of 0 ms".into()));
        }
        if let Ok(already) = registered() {
            return Err(ZkError::InvalidArgument(format!("this handle registered {} already", already.path)));
        }
        let mut registration = Registration { path, data, ttl_ms, czxid: None };
        registration.czxid = Some(registration.put()?);
        REGISTERED.with(|r| *r.borrow_mut() = Some(registration));
        Ok(())
    }

    fn tend(timeout_ms: Option<u64>) -> Result<Tended, ZkError> {
        let registration = registered()?;
        let deadline = Deadline::after_ms(timeout_ms);
        loop {
            let (data, stat, watcher) = match zk::get_data_watch(&registration.path) {
                Err(ZkError::NoNode) => {
                    let czxid = registration.put()?;
                    REGISTERED.with(|r| {
                        if let Some(r) = r.borrow_mut().as_mut() {
                            r.czxid = Some(czxid);
                        }
                    });
                    return Ok(Tended::Recreated);
                }
                Err(e) => return Err(e),
                Ok(found) => found,
            };
            if !registration.may_be_ours(stat.ephemeral_owner) {
                return Err(registration.refusal(stat.ephemeral_owner));
            }
            if registration.another_handles(stat.czxid, false) {
                return Err(ZkError::NodeExists);
            }
            if data != registration.data {
                match zk::set_data(&registration.path, &registration.data, Some(stat.version)) {
                    Ok(_) => return Ok(Tended::Corrected),
                    // Changed or deleted again meanwhile, or the reply lost: look again.
                    Err(ZkError::BadVersion | ZkError::NoNode | ZkError::ConnectionLoss) => continue,
                    Err(e) => return Err(e),
                }
            }
            match zk::wait_on(&watcher, deadline) {
                Ok(()) => continue,
                Err(ZkError::Timeout) => {
                    if registration.ttl_ms.is_some() {
                        // Touch it: a TTL node lives while it is modified within its TTL.
                        match zk::set_data(&registration.path, &registration.data, Some(stat.version)) {
                            Ok(_) => {}
                            Err(ZkError::BadVersion | ZkError::NoNode | ZkError::ConnectionLoss) => continue,
                            Err(e) => return Err(e),
                        }
                    }
                    return Ok(Tended::Intact);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn unregister() -> Result<(), ZkError> {
        let registration = registered()?;
        REGISTERED.with(|r| r.borrow_mut().take());
        match zk::get_data(&registration.path) {
            Err(ZkError::NoNode) => Ok(()),
            Err(e) => Err(e),
            Ok((data, stat))
                if data == registration.data
                    && registration.may_be_ours(stat.ephemeral_owner)
                    && !registration.another_handles(stat.czxid, false) =>
            {
                match zk::retrying(|| zk::delete(&registration.path, Some(stat.version))) {
                    Ok(()) | Err(ZkError::NoNode | ZkError::BadVersion) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            // Someone else's now: left alone.
            Ok(_) => Ok(()),
        }
    }
}

export!(Recipe);
