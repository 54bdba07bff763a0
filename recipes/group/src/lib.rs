//! Group membership, ZooKeeper "Recipes and Solutions" 1.2: members are ephemeral children
//! holding their data; a watcher waits on the group's child version.
//!
//! The group node is made as a container, so ZooKeeper deletes it some time after its last
//! member left, and the next member to join makes it again (its child version starting over).
//! A group whose node does not exist has no members and version -1: a watcher that knew a
//! version is told the group is empty when the node goes, and one that knew -1 is told when
//! members come back.

wazoo_guest::recipe_world!("wazoo:recipes/group-recipe@0.1.2");
wazoo_guest::protocol!("wazoo-group/1");

use std::cell::RefCell;

use exports::wazoo::recipes::group::{Guest, Member, Membership};
use wazoo_guest::{self as zk, CreateMode, Deadline, ZkError};

thread_local! {
    static JOINED: RefCell<Option<String>> = const { RefCell::new(None) };
}

struct Group;

impl Guest for Group {
    fn join(path: String, name: String, data: Vec<u8>) -> Result<(), ZkError> {
        zk::check_path(&path)?;
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(ZkError::InvalidArgument(format!("member name {name:?} must be one path component")));
        }
        if let Some(node) = JOINED.with(|j| j.borrow().clone()) {
            return Err(ZkError::InvalidArgument(format!("this handle is already the member {node}")));
        }
        let node = zk::join(&path, &name);
        zk::check_path(&node)?;
        let mut attempt = 0;
        // Whether an earlier create of ours may have made the node (its reply was lost). Only
        // then can `node-exists` be our own node; after a definite answer it is another member.
        // Handles on one host share a session, so `owns` alone cannot tell them apart.
        let mut maybe_made = false;
        loop {
            attempt += 1;
            match zk::create(&node, &data, CreateMode::Ephemeral) {
                Ok(_) => break,
                Err(ZkError::NoNode) if attempt == 1 => zk::ensure_parents(&node)?,
                Err(ZkError::NodeExists) if maybe_made && zk::owns(&node, Some(&data))? => break,
                Err(ZkError::ConnectionLoss) if attempt <= 20 => maybe_made = true,
                Err(e) => return Err(e),
            }
        }
        JOINED.with(|j| *j.borrow_mut() = Some(node));
        Ok(())
    }

    fn leave() -> Result<(), ZkError> {
        let node = JOINED
            .with(|j| j.borrow_mut().take())
            .ok_or_else(|| ZkError::InvalidArgument("leave: this handle is not a member".into()))?;
        zk::delete_retrying(&node)
    }

    fn members(path: String) -> Result<Membership, ZkError> {
        zk::check_path(&path)?;
        membership(&path)
    }

    fn watch(path: String, known: i32, timeout_ms: Option<u64>) -> Result<Membership, ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        loop {
            let (children, stat, watcher) = match zk::get_children_watch(&path) {
                Ok(listed) => listed,
                // The group we knew is gone (an empty container is reaped): it is empty now.
                Err(ZkError::NoNode) if known != ABSENT => return Ok(absent()),
                Err(ZkError::NoNode) => {
                    // No group yet and none known: wait for it to be created.
                    let (stat, watcher) = zk::exists_watch(&path)?;
                    if stat.is_none() {
                        zk::wait_on(&watcher, deadline)?;
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Known absent means known empty: a group node made again without members yet is no
            // change.
            let changed = match known {
                ABSENT => !children.is_empty(),
                _ => stat.cversion != known,
            };
            if changed {
                return membership(&path);
            }
            zk::wait_on(&watcher, deadline)?;
        }
    }
}

/// The version of a group whose node does not exist.
const ABSENT: i32 = -1;

/// The membership of a group whose node does not exist: no one.
fn absent() -> Membership {
    Membership { members: Vec::new(), version: ABSENT }
}

fn membership(path: &str) -> Result<Membership, ZkError> {
    let (mut names, stat) = match zk::get_children(path) {
        Ok(listed) => listed,
        Err(ZkError::NoNode) => return Ok(absent()),
        Err(e) => return Err(e),
    };
    names.sort();
    let mut members = Vec::with_capacity(names.len());
    for name in names {
        match zk::get_data(&zk::join(path, &name)) {
            Ok((data, _)) => members.push(Member { name, data }),
            Err(ZkError::NoNode) => {} // left while we read
            Err(e) => return Err(e),
        }
    }
    Ok(Membership { members, version: stat.cversion })
}

export!(Group);
