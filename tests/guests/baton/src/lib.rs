//! The example claim family of ARCHITECTURE.md ("Adding a claim family"): a baton at a path,
//! passed from holder to holder in the order they asked for it. Contenders are ephemeral
//! sequential nodes `<path>/_c_<uuid>-baton-<seq>` holding the holder's name; the first holds.
//! Its description, `baton.family.toml` beside this crate, tells the host the rest: the marker
//! `holders` reads, the words of its messages, and what CMD is told.

wazoo_guest::recipe_world!("../../../wit", "wazoo:recipes/claim-recipe@0.1.2");

use exports::wazoo::recipes::claim::{Guest, Held};
use wazoo_guest::{self as zk, Deadline, ZkError};

/// The node marker: the sequence follows it. The description names the same one.
const MARKER: &str = "baton-";

thread_local! {
    /// The node this handle holds.
    static HELD: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

struct Baton;

impl Guest for Baton {
    fn acquire(path: String, data: Vec<u8>, timeout_ms: Option<u64>) -> Result<Held, ZkError> {
        if let Some(node) = HELD.with(|h| h.borrow().clone()) {
            return Err(ZkError::InvalidArgument(format!("this handle already holds {node}")));
        }
        // The host's contention step: create our node and list in one round trip, then wait
        // for the node just before ours.
        let rule = zk::exclusive(&[MARKER]);
        let mine = zk::contend(&path, MARKER, &data, &rule, Deadline::after_ms(timeout_ms))?;
        HELD.with(|h| *h.borrow_mut() = Some(mine.path.clone()));
        Ok(Held { node: mine.path, token: mine.stat.czxid })
    }

    fn release() -> Result<(), ZkError> {
        match HELD.with(|h| h.borrow_mut().take()) {
            Some(node) => zk::delete_retrying(&node),
            None => Ok(()),
        }
    }
}

export!(Baton);
