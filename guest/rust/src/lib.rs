//! The guest side of wazoo: what a Rust recipe author touches.
//!
//! It wraps the generated `wazoo:zk` bindings in a few helpers that every ZooKeeper recipe needs
//! and that are easy to get subtly wrong: sorting sequential children the way Curator does,
//! contending for a turn by watching only the predecessor, deadlines, and deleting through
//! connection loss. Recipes built on these read like the numbered steps of ZooKeeper's "Recipes
//! and Solutions".
//!
//! The subtlest steps are the host's, once for every language (`wazoo:zk@0.1.5`): the protected
//! create that finds its node again after a lost reply (`znode.create-protected`), the whole
//! contention for a turn with its hand-over (`contention.contend`), waiting until a node changes
//! or the session ends (`watch.wait-for-change`, `watcher.changed`), or until one of several
//! watches fires (`watch.wait-any`), the ownership check (`session.owns`), and trying reads again
//! through connection loss (every read the host lends), and a claim's release that does not wait
//! for ZooKeeper's answer (`znode.delete-unwaited`). The helpers here are thin names for those.

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "wazoo:zk/imports@0.1.5",
    });
}

use std::cell::Cell;
use std::time::{Duration, Instant};

/// kazoo's lock family layouts, for the recipes' `kazoo` builds (feature `kazoo`).
#[cfg(any(test, feature = "kazoo"))]
pub mod kazoo;

/// The generated interfaces, for `with:` in a recipe's own `generate!`.
pub use bindings::wazoo::zk as wit;

pub use bindings::wazoo::zk::contention::{enter, Blockers, Contender, Naming, Pick, Rule, Standing};
pub use bindings::wazoo::zk::persistent::{add_watch, Change, ChangeKind, Notice, PersistentWatcher};
pub use bindings::wazoo::zk::session::{info as session_info, owns, unique_id, SessionInfo};
pub use bindings::wazoo::zk::types::{
    CheckOp, CreateMode, CreateOp, Created, DeleteOp, EventKind, MultiError, Op, OpResult, ProtectedOp,
    SetDataOp, Stat, Step, StepResult, WatchEvent, ZkError,
};
pub use bindings::wazoo::zk::watch::{exists_watch, get_children_watch, get_data_watch, Watcher};
pub use bindings::wazoo::zk::znode::{
    check_path, create, create_protected, delete, delete_unwaited, exists, get_children, get_data,
    list_ephemerals, multi, pipeline, set_data, sync,
};

pub type Result<T, E = ZkError> = std::result::Result<T, E>;

/// How many times a write that failed with `connection-loss` is tried again before giving up
/// (reads are tried again by the host).
pub const CONNECTION_LOSS_RETRIES: u32 = 20;

/// This handle's session id (the `ephemeral-owner` of its nodes). A handle keeps the session it
/// started on for life, so the host is asked once.
pub fn session_id() -> i64 {
    thread_local! {
        static ID: Cell<Option<i64>> = const { Cell::new(None) };
    }
    ID.with(|id| match id.get() {
        Some(known) => known,
        None => {
            let fresh = session_info().id;
            id.set(Some(fresh));
            fresh
        }
    })
}

/// An id unique to this recipe instance. Handles on one host share a session, so where a
/// recipe must tell its own nodes from another handle's, it writes this id into them.
pub fn instance_id() -> String {
    thread_local! {
        static ID: std::cell::OnceCell<String> = const { std::cell::OnceCell::new() };
    }
    ID.with(|id| id.get_or_init(new_guid).clone())
}

/// A fresh version-4 UUID, for a protected create the recipe makes itself (inside a `multi`;
/// [`protected_create`] has the host pick its own). The host's `unique-id` seeds a SplitMix64
/// generator once per instance; later ids cost no host call and never repeat within it.
pub fn new_guid() -> String {
    thread_local! {
        static STATE: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
    }
    let (mut hi, mut lo) = STATE.with(|s| s.get()).unwrap_or_else(|| {
        let seed: String = unique_id().chars().filter(|c| c.is_ascii_hexdigit()).collect();
        let bits = u128::from_str_radix(&seed, 16).unwrap_or(0);
        ((bits >> 64) as u64, bits as u64)
    });
    let (a, b) = (splitmix(&mut hi), splitmix(&mut lo));
    STATE.with(|s| s.set(Some((hi, lo))));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `dir` + "/" + `name`.
pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The last component of `path`.
pub fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The parent of `path` ("/" for a top-level node).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Ordering of sequential children, as Curator's lock drivers do it: by the part after the last
/// occurrence of each marker in turn (e.g. `lock-`, or `__READ__` then `__WRIT__`), or the whole
/// name when it has none.
pub fn sort_key<'a>(name: &'a str, markers: &[&str]) -> &'a str {
    markers.iter().fold(name, |key, marker| match key.rfind(marker) {
        Some(i) => &key[i + marker.len()..],
        None => key,
    })
}

/// `children` sorted by [`sort_key`].
pub fn sorted(mut children: Vec<String>, markers: &[&str]) -> Vec<String> {
    children.sort_by(|a, b| sort_key(a, markers).cmp(sort_key(b, markers)));
    children
}

/// A point in time a blocking step must finish by; `None` never expires.
#[derive(Clone, Copy, Debug)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    pub fn after_ms(timeout_ms: Option<u64>) -> Self {
        // A deadline past what the clock can hold is no deadline.
        Deadline(timeout_ms.and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms))))
    }

    pub fn never() -> Self {
        Deadline(None)
    }

    /// Milliseconds left (none: no limit), for `watcher.wait`.
    pub fn remaining_ms(&self) -> Option<u64> {
        self.0.map(|at| at.saturating_duration_since(Instant::now()).as_millis() as u64)
    }

    pub fn expired(&self) -> bool {
        self.remaining_ms() == Some(0)
    }
}

/// Runs `op` again while it fails with `connection-loss`: for writes whose repeat is harmless
/// (a delete, an unconditional write, a step that looks before it writes). Reads need none: the
/// host tries them again itself.
pub fn retrying<T>(mut op: impl FnMut() -> Result<T>) -> Result<T> {
    let mut attempt = 0;
    loop {
        match op() {
            Err(ZkError::ConnectionLoss) if attempt < CONNECTION_LOSS_RETRIES => {
                attempt += 1;
                backoff(attempt);
            }
            other => return other,
        }
    }
}

/// Waits a little longer for each `attempt` (from 1) after a connection loss, at most 0.5 s.
pub fn backoff(attempt: u32) {
    std::thread::sleep(Duration::from_millis(50 * u64::from(attempt.min(10))));
}

/// Creates every missing ancestor of `path` as a container node, as Curator's
/// `creatingParentContainersIfNeeded` does: the server removes them once they are empty.
pub fn ensure_parents(path: &str) -> Result<()> {
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        let ancestor = &path[..at + 1 + i];
        match retrying(|| create(ancestor, &[], CreateMode::Container)) {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e),
        }
        at += 1 + i;
    }
    Ok(())
}

/// Creates `<dir>/_c_<uuid>-<name>` (sequential modes append the sequence), Curator's protected
/// mode: the host's `create-protected`, which finds the node again after a lost reply (for
/// ephemeral modes only one this session owns) and makes missing parents as containers.
pub fn protected_create(dir: &str, name: &str, data: &[u8], mode: CreateMode) -> Result<Created> {
    create_protected(dir, name, data, mode)
}

/// After a protected create inside a `multi` lost its reply (the host's `create-protected` does
/// this itself): the child of `dir` whose name starts with `prefix`, for `ephemeral` nodes only
/// one this session owns. Syncs first, so a create the ensemble applied is seen.
pub fn find_protected(dir: &str, prefix: &str, ephemeral: bool) -> Result<Option<Created>> {
    match sync(dir) {
        Ok(()) | Err(ZkError::NoNode) => {}
        Err(e) => return Err(e),
    }
    let children = match get_children(dir) {
        Ok((children, _)) => children,
        Err(ZkError::NoNode) => return Ok(None),
        Err(e) => return Err(e),
    };
    let me = session_id();
    for child in children.into_iter().filter(|c| c.starts_with(prefix)) {
        let path = join(dir, &child);
        if let Some(stat) = exists(&path)? {
            if !ephemeral || stat.ephemeral_owner == me {
                return Ok(Some(Created { path, stat }));
            }
        }
    }
    Ok(None)
}

/// Blocks until `path` is deleted or changes (then the caller looks again; at once if it is
/// gone already), the session ends (`session-expired`), or the deadline passes (`timeout`): the
/// host's `wait-for-change`.
pub fn wait_for_change(path: &str, deadline: Deadline) -> Result<()> {
    bindings::wazoo::zk::watch::wait_for_change(path, deadline.remaining_ms())
}

/// Blocks until `watcher` fires (`session-expired` if the session ended), or the deadline passes
/// (`timeout`): the host's `watcher.changed`.
pub fn wait_on(watcher: &Watcher, deadline: Deadline) -> Result<()> {
    if deadline.expired() {
        return Err(ZkError::Timeout);
    }
    watcher.changed(deadline.remaining_ms()).map(|_| ())
}

/// Blocks until one of `watchers` fires, and returns its position in the list (the first one
/// that fired already, if any), `session-expired` if the session ended, or `timeout` once the
/// deadline passes: the host's `wait-any`. Every watcher stays armed; the one that fired keeps
/// its event.
pub fn wait_any(watchers: &[&Watcher], deadline: Deadline) -> Result<usize> {
    bindings::wazoo::zk::watch::wait_any(watchers, deadline.remaining_ms()).map(|(at, _)| at as usize)
}

/// Generates a recipe's bindings for `world` (e.g. `"wazoo:recipes/lock-recipe@0.1.0"`), reusing
/// this crate's `wazoo:zk` imports. Recipe crates live in `recipes/NAME`, beside `wit/`; a crate
/// elsewhere names the `wit` directory relative to its own: `recipe_world!("../../../wit", WORLD)`.
#[macro_export]
macro_rules! recipe_world {
    ($world:literal) => {
        $crate::recipe_world!("../../wit", $world);
    };
    ($wit:literal, $world:literal) => {
        wit_bindgen::generate!({
            path: $wit,
            world: $world,
            with: {
                "wazoo:zk/types@0.1.5": wazoo_guest::wit::types,
                "wazoo:zk/znode@0.1.5": wazoo_guest::wit::znode,
                "wazoo:zk/watch@0.1.5": wazoo_guest::wit::watch,
                "wazoo:zk/session@0.1.5": wazoo_guest::wit::session,
                "wazoo:zk/persistent@0.1.5": wazoo_guest::wit::persistent,
                "wazoo:zk/contention@0.1.5": wazoo_guest::wit::contention,
            },
        });
    };
}

/// Declares the wire protocol this recipe speaks, as the host reads it before it lets a recipe
/// switch builds: `wazoo_guest::protocol!("curator-mutex/1");` once in the recipe crate, beside
/// `recipe_world!`. It puts the string in the custom section `wazoo-protocol` of the core module,
/// which the component keeps. The convention is `<name>/<major>` (a peer's format, or
/// `wazoo-<recipe>` for wazoo's own; the next major for a change older builds would misread):
/// 1 to 128 bytes of letters, digits and `-_./:@+`, checked as the crate compiles. A build with
/// another format declares its own string under the same `cfg` as that format:
///
/// ```ignore
/// #[cfg(not(feature = "kazoo"))]
/// wazoo_guest::protocol!("curator-mutex/1");
/// #[cfg(feature = "kazoo")]
/// wazoo_guest::protocol!("kazoo-lock/1");
/// ```
#[macro_export]
macro_rules! protocol {
    ($protocol:literal) => {
        const _: () = ::core::assert!(
            $crate::valid_protocol($protocol),
            ::core::concat!(
                "wazoo_guest::protocol!(",
                ::core::stringify!($protocol),
                "): a protocol is 1 to 128 bytes of letters, digits and `-_./:@+`"
            )
        );
        /// The `wazoo-protocol` custom section (a section of that name only on WebAssembly).
        #[used]
        #[cfg_attr(target_family = "wasm", unsafe(link_section = "wazoo-protocol"))]
        static WAZOO_PROTOCOL: [u8; $protocol.len()] = $crate::protocol_bytes($protocol);
    };
}

/// Whether `protocol` is one the host accepts (`protocol!` checks it as the crate compiles).
#[doc(hidden)]
pub const fn valid_protocol(protocol: &str) -> bool {
    let bytes = protocol.as_bytes();
    if bytes.is_empty() || bytes.len() > 128 {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/' | b':' | b'@' | b'+')) {
            return false;
        }
        i += 1;
    }
    true
}

/// `protocol`'s bytes as an array, for `protocol!`'s static.
#[doc(hidden)]
pub const fn protocol_bytes<const N: usize>(protocol: &str) -> [u8; N] {
    let bytes = protocol.as_bytes();
    let mut out = [0; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// Deletes `path`, trying again through connection loss. A node already gone (or gone with an
/// expired session) counts as deleted.
pub fn delete_retrying(path: &str) -> Result<()> {
    match retrying(|| delete(path, None)) {
        Ok(()) | Err(ZkError::NoNode) | Err(ZkError::SessionExpired) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Lets go of our claim node at `path` without waiting for ZooKeeper's answer: the host's
/// `delete-unwaited`, which sends the delete now (while the connection holds, every later request
/// of the session is applied after it) and settles its outcome itself. A node the host's ledger does not hold is deleted
/// as [`delete_retrying`] deletes it. A node already gone (or gone with an expired session)
/// counts as deleted.
pub fn release_node(path: &str) -> Result<()> {
    match retrying(|| delete_unwaited(path)) {
        Ok(()) | Err(ZkError::NoNode) | Err(ZkError::SessionExpired) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Waits until the node at `path` changes: `true` when it was deleted (or was already gone),
/// `false` for any other change. The session's end is `session-expired`; the deadline passing
/// is `timeout`. A data watch, as Curator's, so an absent node leaves no watch behind.
pub fn wait_gone(path: &str, deadline: Deadline) -> Result<bool> {
    if deadline.expired() {
        return Err(ZkError::Timeout);
    }
    match get_data_watch(path) {
        Err(ZkError::NoNode) => Ok(true),
        Err(e) => Err(e),
        Ok((_, _, watcher)) => Ok(watcher.changed(deadline.remaining_ms())?.kind == EventKind::NodeDeleted),
    }
}

/// Steps 1 and 2 of a contention in one round trip (`znode.pipeline`): the protected create of
/// `name` under `dir`, and the listing of `dir` that follows it. The listing is `None` if it
/// failed (the caller lists again); it always shows the node when given.
pub fn create_and_list(
    dir: &str,
    name: &str,
    data: &[u8],
    mode: CreateMode,
) -> Result<(Created, Option<Vec<String>>)> {
    let steps = [
        Step::CreateProtected(ProtectedOp {
            dir: dir.to_string(),
            name: name.to_string(),
            data: data.to_vec(),
            mode,
        }),
        Step::GetChildren(dir.to_string()),
    ];
    let mut results = pipeline(&steps)?.into_iter();
    let created = match results.next() {
        Some(Ok(StepResult::Created(created))) => created,
        Some(Err(e)) => return Err(e),
        other => return Err(ZkError::Other(format!("pipeline answered {other:?} for a create"))),
    };
    let listed = match results.next() {
        Some(Ok(StepResult::Children((children, _)))) => Some(children),
        _ => None,
    };
    Ok((created, listed))
}

/// The whole contention for a turn (a lock, a lease's mutex, a leadership): the host's
/// `contention.contend`. It creates our ephemeral sequential node `_c_<uuid>-<name><seq>`
/// (holding `data`) under `dir` and lists `dir` in one round trip (protected: after a lost reply
/// the host claims only a node this session owns), orders the children and waits while `rule`
/// says a node ahead keeps ours waiting, watching the one it names; when that was the lowest node
/// and it is deleted, ours is looked at again without listing (the hand-over). It deletes the
/// node again if we give up (`timeout` at the deadline) or fail. Ok is our node, holding.
pub fn contend(dir: &str, name: &str, data: &[u8], rule: &Rule, deadline: Deadline) -> Result<Created> {
    let naming = Naming::Protected(name.to_string());
    bindings::wazoo::zk::contention::contend(dir, &naming, data, rule, deadline.remaining_ms())
}

fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| t.to_string()).collect()
}

/// The exclusive lock's rule over children ordered by `order` (Curator's `["lock-"]`, a
/// writer's `["__READ__", "__WRIT__"]`): ours holds when it is the first, and otherwise watches
/// the node just before it.
pub fn exclusive(order: &[&str]) -> Rule {
    Rule { order: strings(order), blockers: Blockers::Any, pick: Pick::Nearest }
}

/// The rule of Curator's reader over children ordered by `order`: ours holds when no node whose
/// name contains one of `kinds` (`__WRIT__`) is ahead of it, and otherwise watches the first
/// such node (when that writer goes, every reader behind it may proceed, so all wake).
pub fn first_containing(order: &[&str], kinds: &[&str]) -> Rule {
    Rule { order: strings(order), blockers: Blockers::Containing(strings(kinds)), pick: Pick::First }
}

/// A blocking acquire run with a zero timeout, as a try: `timeout` becomes none.
pub fn try_now<T>(acquired: Result<T>) -> Result<Option<T>> {
    match acquired {
        Ok(held) => Ok(Some(held)),
        Err(ZkError::Timeout) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a handle holds, counted for re-entrant acquires of the same key.
pub struct Holding<K, H> {
    inner: std::cell::RefCell<Option<(K, H, u32)>>,
}

impl<K: PartialEq + std::fmt::Debug, H: Clone> Holding<K, H> {
    pub const fn new() -> Self {
        Holding { inner: std::cell::RefCell::new(None) }
    }

    /// Counts up and returns what is held if it is held under `key`; `invalid-argument` if
    /// something else is held.
    pub fn reenter(&self, key: &K) -> Result<Option<H>> {
        match self.inner.borrow_mut().as_mut() {
            Some((held_key, held, count)) if held_key == key => {
                *count += 1;
                Ok(Some(held.clone()))
            }
            Some((held_key, _, _)) => {
                Err(ZkError::InvalidArgument(format!("this handle already holds {held_key:?}")))
            }
            None => Ok(None),
        }
    }

    pub fn hold(&self, key: K, held: H) {
        *self.inner.borrow_mut() = Some((key, held, 1));
    }

    /// Counts one release down; the last one deletes the node `node_of` names (waking the one
    /// waiter behind it).
    pub fn release_deleting(&self, node_of: impl Fn(&H) -> &str) -> Result<()> {
        match self.release()? {
            Some(held) => delete_retrying(node_of(&held)),
            None => Ok(()),
        }
    }

    /// As [`Holding::release_deleting`], but the last release lets go of the node with
    /// [`release_node`]: the delete is sent, not awaited.
    pub fn release_unwaited(&self, node_of: impl Fn(&H) -> &str) -> Result<()> {
        match self.release()? {
            Some(held) => release_node(node_of(&held)),
            None => Ok(()),
        }
    }

    /// Counts one release down: `Some(held)` when the last one ends the hold.
    pub fn release(&self) -> Result<Option<H>> {
        let mut inner = self.inner.borrow_mut();
        let (_, _, count) =
            inner.as_mut().ok_or_else(|| ZkError::InvalidArgument("release: nothing is held".into()))?;
        *count -= 1;
        if *count > 0 {
            return Ok(None);
        }
        Ok(inner.take().map(|(_, held, _)| held))
    }
}

impl<K: PartialEq + std::fmt::Debug, H: Clone> Default for Holding<K, H> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_by_suffix_after_marker_like_curator() {
        let children = vec![
            "_c_bbb-lock-0000000003".to_string(),
            "_c_aaa-lock-0000000010".to_string(),
            "_c_ccc-lock-0000000001".to_string(),
        ];
        let s = sorted(children, &["lock-"]);
        assert_eq!(s, vec!["_c_ccc-lock-0000000001", "_c_bbb-lock-0000000003", "_c_aaa-lock-0000000010"]);
    }

    #[test]
    fn sorts_reads_and_writes_together_like_curator() {
        let children = vec![
            "_c_b-__WRIT__0000000004".to_string(),
            "_c_a-__READ__0000000002".to_string(),
            "_c_c-__READ__0000000003".to_string(),
        ];
        let s = sorted(children, &["__READ__", "__WRIT__"]);
        assert_eq!(s, vec!["_c_a-__READ__0000000002", "_c_c-__READ__0000000003", "_c_b-__WRIT__0000000004"]);
    }

    #[test]
    fn splitmix_outputs_do_not_repeat() {
        let mut state = 42;
        let outputs: std::collections::HashSet<u64> = (0..10_000).map(|_| splitmix(&mut state)).collect();
        assert_eq!(outputs.len(), 10_000);
    }

    #[test]
    fn path_helpers() {
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(node_name("/a/b"), "b");
    }

    // The host's wazoo_runtime::protocol::declared accepts exactly these.
    #[test]
    fn protocol_strings() {
        crate::protocol!("kazoo-lock/1");
        assert_eq!(&WAZOO_PROTOCOL, b"kazoo-lock/1");
        for good in ["curator-mutex/1", "a", "abcXYZ019-_./:@+", &"a".repeat(128)] {
            assert!(valid_protocol(good), "{good:?}");
        }
        for bad in ["", "curator mutex/1", "lock/1\n", "caf\u{e9}/1", "semi;colon", &"a".repeat(129)] {
            assert!(!valid_protocol(bad), "{bad:?}");
        }
        assert_eq!(protocol_bytes::<3>("x/1"), *b"x/1");
    }
}
