//! A cache of one node, or of the whole tree below it, as Apache Curator's `CuratorCache` and
//! kazoo's `TreeCache` keep one, on a single persistent watch (ZooKeeper 3.6's `addWatch`): unlike
//! a one-shot watch, set again after each event, it misses no change between two events.
//!
//! The cache keeps, for the node at its path and (recursive) every node below it, the node's
//! data and stat as last read. Nothing else grows with time: what it holds, and the changes it
//! has read but not yet handed out, are bounded by the size of the tree.
//!
//! Every node the cache holds below its path is held under its own parent: the very node, not
//! one of the same path deleted and made again since (another `czxid`). ZooKeeper answers one
//! session's requests in the order sent, so a node read after a child of its path and older
//! than it (a lower `czxid`) is that child's parent, and a child whose `czxid` is at most the
//! `pzxid` of its parent's listing was there at the listing, under the node listed.
//!
//! 1. `start` watches the path first (`persistent.add-watch`, recursive or not), then reads it,
//!    so a change made while it reads is reported by the watch afterwards. Recursive, it reads
//!    level by level, each node's data and children, 32 nodes (64 steps) per `znode.pipeline`.
//!    A node deleted between its parent's listing and its own read is left out; so is one made
//!    after that listing (its `czxid` above the listing's `pzxid`: another node of that name,
//!    perhaps under a parent made again since), whose creation the watch reports. A listing of
//!    a node made again after its data was read (another `czxid`) is not used: the node is kept
//!    without children, and the watch reports its deletion and the new one. Every node read is
//!    queued as `created`, in path order (a parent before its children), then `initialized`.
//!    A node the cache may not read is left out (below). A read error other than `no-node` and
//!    `no-auth` fails `start`, which may be called again.
//! 2. `next` hands out the queued changes one by one. When none is left it waits on the watch,
//!    within one deadline across every wait, and for each notice about a node it covers:
//!    - `created` or `data-changed`: reads, in one `znode.pipeline`, the node, then each of its
//!      ancestors the cache lacks, bottom up, then the `czxid` of the nearest ancestor it holds
//!      (none above the cache's own path). Absent: if cached, it and everything cached below it
//!      are `deleted`, children first; else nothing. Cached with the same `czxid`: `changed` if
//!      the `mzxid` differs, else nothing (an earlier read already saw it). Otherwise it is put
//!      in the cache only under its own parent: each ancestor read must be there and older than
//!      the node below it, and the nearest one held must still have the cached `czxid`. When
//!      one is not, that ancestor was deleted (and perhaps made again) after the node below it
//!      was read, which went first: nothing is reported now, as the notices of that deletion
//!      and of what was made after it are still to come, and handling them brings the node if
//!      it is there. When all are: the missing ancestors are `created`, top down, then the
//!      node: `created`, or, when the cache holds another node of that path (deleted and made
//!      again between two reads), the cached one and everything cached below it are `deleted`,
//!      children first, then the new one is `created`.
//!    - `deleted`: if cached, asks whether the node is there (`exists`). Gone, or made again
//!      since: it and everything cached below it are `deleted`, children first (a node made
//!      again comes with its own `created` notice). There with the cached `czxid`: nothing, the
//!      cache read it after this deletion, whose end it reported then.
//!    - `children-changed` (only without `recursive`): nothing; the cache holds the node alone.
//! 3. After `missed` (the connection broke, or the host dropped notices) the cache reads the
//!    whole tree again as in step 1 and queues the differences: `deleted` for each node gone,
//!    made again or unreadable (and all cached below it), children first, then `created` for
//!    each new node and `changed` for each whose `mzxid` differs, in path order. No
//!    `initialized`.
//! 4. A read that fails while a notice is handled (say `connection-loss` after the host's own
//!    tries) is returned by `next`, and the next call reads the whole tree again as after
//!    `missed`, so no change is lost. `timeout`: the deadline passed with nothing to report.
//!
//! A node the cache may not read (`no-auth`: say one made with an ACL that grants its creator
//! alone) is treated as a node that is not there, as Curator and kazoo carry on past it: it is left
//! out of the cache, with everything below it (its children cannot be listed), and the rest of the
//! tree is cached as usual. A cached node that a read finds unreadable (its ACL was changed) is
//! reported `deleted`, with everything cached below it; this is the one case where a node that is
//! there is reported deleted.
//!
//! What a change report guarantees: the node it carries is what ZooKeeper held at some moment, and
//! the changes to one node come in ZooKeeper's order; quick changes may be seen as one, and a node
//! made and deleted between two reads may not be seen at all. A node is reported `deleted` only
//! once it is gone, never while it is there (unless unreadable, above), so one node (one `czxid`)
//! is never reported `created` again after its `deleted` (unless readable again). The cache never
//! holds a node without its parent, nor under another node of its parent's path: applying the
//! changes in the order given keeps a whole tree, of nodes that were parent and child. `get` and
//! `nodes` answer with the changes handed out so far, never with queued ones.
//!
//! Once the session has expired, `next` returns `session-expired` on this call and every later
//! one: the cache is over, and a new one is started on a new handle, in the host's new session.

wazoo_guest::recipe_world!("wazoo:recipes/cache-recipe@0.1.2");
wazoo_guest::protocol!("wazoo-cache/1");

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use exports::wazoo::recipes::cache::{Change, Guest, Node};
use wazoo_guest::{self as zk, ChangeKind, Deadline, Notice, PersistentWatcher, Step, StepResult, ZkError};

/// Steps per `znode.pipeline`, the host's limit: 32 nodes of a full read (data and children).
const STEPS_PER_PIPELINE: usize = 64;

/// Nodes by full path; path order puts every node before the nodes below it.
type Nodes = BTreeMap<String, Node>;

/// Whether `path` is `top` or below it.
fn within(top: &str, path: &str) -> bool {
    match path.strip_prefix(top) {
        Some("") => true,
        Some(rest) => top.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

/// Removes the node at `path` and every node below it from `known`: a `deleted` for each,
/// children before their parent. Nothing when `path` is not there.
fn remove(known: &mut Nodes, path: &str) -> Vec<Change> {
    let doomed: Vec<String> = known
        .range::<str, _>((Bound::Included(path), Bound::Unbounded))
        .take_while(|(key, _)| key.starts_with(path))
        .filter(|(key, _)| within(path, key))
        .map(|(key, _)| key.clone())
        .collect();
    doomed.iter().rev().filter_map(|key| known.remove(key)).map(Change::Deleted).collect()
}

/// Puts `node`, as just read, into `known`: `created` if it was not there, `changed` if its data
/// changed, nothing if it is what `known` holds, and when it was made again since (another
/// `czxid`) `deleted` for the cached one and everything below it, then `created`. The node's
/// parent must be in `known` already (unless it is the top of the cache).
fn put(known: &mut Nodes, node: Node) -> Vec<Change> {
    let mut changes = Vec::new();
    match known.get(&node.path) {
        None => changes.push(Change::Created(node.clone())),
        Some(old) if old.stat.czxid != node.stat.czxid => {
            changes = remove(known, &node.path);
            changes.push(Change::Created(node.clone()));
        }
        Some(old) if old.stat.mzxid != node.stat.mzxid => changes.push(Change::Changed(node.clone())),
        Some(_) => return changes,
    }
    known.insert(node.path.clone(), node);
    changes
}

/// Makes `known` hold what `fresh` (a whole tree, as read) holds: the changes that takes, in an
/// order that never leaves a node without its parent. First `deleted` for every node gone or made
/// again and everything below it, children first; then `created` and `changed`, in path order.
fn diff(known: &mut Nodes, fresh: Nodes) -> Vec<Change> {
    let gone: Vec<String> = known
        .iter()
        .filter(|(path, old)| fresh.get(*path).is_none_or(|new| new.stat.czxid != old.stat.czxid))
        .map(|(path, _)| path.clone())
        .collect();
    // Deepest first: a subtree already removed with an ancestor yields nothing more.
    let mut changes: Vec<Change> = gone.iter().rev().flat_map(|path| remove(known, path)).collect();
    for node in fresh.into_values() {
        changes.extend(put(known, node));
    }
    changes
}

/// Applies a change handed out by `next` to the nodes `get` and `nodes` answer with.
fn apply(reported: &mut Nodes, change: &Change) {
    match change {
        Change::Created(node) | Change::Changed(node) => {
            reported.insert(node.path.clone(), node.clone());
        }
        Change::Deleted(node) => {
            reported.remove(&node.path);
        }
        Change::Initialized => {}
    }
}

/// What the cache knows of ZooKeeper: the nodes as queued, which the reads are compared with.
struct Tree {
    top: String,
    recursive: bool,
    known: Nodes,
}

impl Tree {
    /// Whether the cache holds nodes at `path`.
    fn covers(&self, path: &str) -> bool {
        if reserved(path) {
            return false;
        }
        if self.recursive {
            within(&self.top, path)
        } else {
            path == self.top
        }
    }

    /// The changes a notice leads to, looking at ZooKeeper through `zk`.
    fn notice(&mut self, kind: ChangeKind, path: &str, mut zk: impl Look) -> Result<Vec<Change>, ZkError> {
        if !self.covers(path) {
            return Ok(Vec::new());
        }
        match kind {
            ChangeKind::ChildrenChanged => Ok(Vec::new()),
            ChangeKind::Deleted => {
                let Some(czxid) = self.known.get(path).map(|cached| cached.stat.czxid) else {
                    return Ok(Vec::new());
                };
                let answers = run(&mut zk, &[Step::Exists(path.to_string())])?;
                // Still there as cached: the cache read it after this deletion, and reported
                // the earlier one's end then.
                if czxid_of(path, answers.into_iter().next())? == Some(czxid) {
                    return Ok(Vec::new());
                }
                Ok(remove(&mut self.known, path))
            }
            ChangeKind::Created | ChangeKind::DataChanged => {
                // The node, then each ancestor the cache lacks, bottom up, then the nearest one
                // it holds (none above the top): one round trip, each read after the one below.
                let mut chain = vec![path.to_string()];
                let mut holder = None;
                loop {
                    let lowest = &chain[chain.len() - 1];
                    if *lowest == self.top || lowest == "/" {
                        break;
                    }
                    let up = zk::parent(lowest).to_string();
                    if self.known.contains_key(&up) {
                        holder = Some(up);
                        break;
                    }
                    chain.push(up);
                }
                let mut steps: Vec<Step> = chain.iter().map(|path| Step::GetData(path.clone())).collect();
                steps.extend(holder.iter().map(|path| Step::Exists(path.clone())));
                let mut answers = run(&mut zk, &steps)?.into_iter();
                let Some(node) = node_of(path, answers.next())? else {
                    return Ok(remove(&mut self.known, path));
                };
                if self.known.get(path).is_some_and(|cached| cached.stat.czxid == node.stat.czxid) {
                    return Ok(put(&mut self.known, node));
                }
                // New to the cache: put only under its own parent.
                let mut read = vec![node];
                for up in &chain[1..] {
                    match node_of(up, answers.next())? {
                        Some(ancestor) if ancestor.stat.czxid < read[read.len() - 1].stat.czxid => {
                            read.push(ancestor)
                        }
                        // Gone or made again after the node below it was read (which went
                        // first; the notices of both are still to come), or unreadable (and so
                        // is what is below it).
                        _ => return Ok(Vec::new()),
                    }
                }
                if let Some(holder) = holder {
                    let held = self.known.get(&holder).map(|cached| cached.stat.czxid);
                    // The node held was deleted since (its notice is still to come): so was
                    // every node below it read here, or it was made later, under a newer one.
                    if czxid_of(&holder, answers.next())? != held {
                        return Ok(Vec::new());
                    }
                }
                Ok(read.into_iter().rev().flat_map(|node| put(&mut self.known, node)).collect())
            }
        }
    }
}

/// How the cache looks at ZooKeeper: `znode.pipeline`, which a test fakes.
trait Look {
    /// Sends `steps` (at most 64, reads only) at once, as `znode.pipeline` does.
    fn pipeline(&mut self, steps: &[Step]) -> Result<Vec<Result<StepResult, ZkError>>, ZkError>;
}

/// ZooKeeper itself, through the host.
struct ZooKeeper;

impl Look for ZooKeeper {
    fn pipeline(&mut self, steps: &[Step]) -> Result<Vec<Result<StepResult, ZkError>>, ZkError> {
        zk::pipeline(steps)
    }
}

/// Sends `steps` in order, 64 per pipeline, and returns one answer per step.
fn run(zk: &mut impl Look, steps: &[Step]) -> Result<Vec<Result<StepResult, ZkError>>, ZkError> {
    let mut answers = Vec::with_capacity(steps.len());
    for batch in steps.chunks(STEPS_PER_PIPELINE) {
        let answered = zk.pipeline(batch)?;
        if answered.len() != batch.len() {
            return Err(ZkError::Other(format!(
                "pipeline answered {} results for {} steps",
                answered.len(),
                batch.len()
            )));
        }
        answers.extend(answered);
    }
    Ok(answers)
}

/// A step's answer, with none for a node that is not there or that the cache may not read.
fn readable(path: &str, answer: Option<Result<StepResult, ZkError>>) -> Result<Option<StepResult>, ZkError> {
    match answer {
        Some(Ok(result)) => Ok(Some(result)),
        Some(Err(ZkError::NoNode | ZkError::NoAuth)) => Ok(None),
        Some(Err(e)) => Err(e),
        None => Err(ZkError::Other(format!("pipeline answered nothing for {path}"))),
    }
}

/// The node at `path` from the answer to its `get-data` step; none when it is not there or
/// may not be read.
fn node_of(path: &str, answer: Option<Result<StepResult, ZkError>>) -> Result<Option<Node>, ZkError> {
    match readable(path, answer)? {
        None => Ok(None),
        Some(StepResult::Data((data, stat))) => Ok(Some(Node { path: path.to_string(), data, stat })),
        Some(other) => Err(ZkError::Other(format!("pipeline answered {other:?} for a read of {path}"))),
    }
}

/// The `czxid` of the node at `path` from the answer to its `exists` step; none when it is
/// not there.
fn czxid_of(path: &str, answer: Option<Result<StepResult, ZkError>>) -> Result<Option<i64>, ZkError> {
    match readable(path, answer)? {
        None | Some(StepResult::Exists(None)) => Ok(None),
        Some(StepResult::Exists(Some(stat))) => Ok(Some(stat.czxid)),
        Some(other) => Err(ZkError::Other(format!("pipeline answered {other:?} for exists {path}"))),
    }
}

/// Whether `path` is ZooKeeper's own (`/zookeeper` and below), which no recipe may read: a
/// cache of the whole tree (`/`, recursive) leaves it out.
fn reserved(path: &str) -> bool {
    path == "/zookeeper" || path.starts_with("/zookeeper/")
}

/// Reads the node at `top` and, when `recursive`, every node below it, level by level, each
/// under its own parent. Left out, with everything below it: a node not there when it was
/// read, one made after its parent's listing (a `czxid` above the listing's `pzxid`; the watch
/// reports it), and one the cache may not read. A node made again between the reads of its
/// data and its children is kept without them (the watch reports its deletion).
fn read_tree(top: &str, recursive: bool, mut zk: impl Look) -> Result<Nodes, ZkError> {
    let mut found = Nodes::new();
    if !recursive {
        let answers = run(&mut zk, &[Step::GetData(top.to_string())])?;
        if let Some(node) = node_of(top, answers.into_iter().next())? {
            found.insert(node.path.clone(), node);
        }
        return Ok(found);
    }
    // Each path to read, with the `pzxid` of its parent's listing (none above the top).
    let mut level = vec![(top.to_string(), i64::MAX)];
    while !level.is_empty() {
        let steps: Vec<Step> = level
            .iter()
            .flat_map(|(path, _)| [Step::GetData(path.clone()), Step::GetChildren(path.clone())])
            .collect();
        let mut answers = run(&mut zk, &steps)?.into_iter();
        let mut below = Vec::new();
        for (path, listed) in level {
            let (data, children) = (answers.next(), answers.next());
            let Some(node) = node_of(&path, data)? else { continue };
            // Made after the listing: perhaps under a parent made again since.
            if node.stat.czxid > listed {
                continue;
            }
            match children {
                Some(Ok(StepResult::Children((names, stat)))) => {
                    // Listed from the node itself, not one made again after its data was read.
                    if stat.czxid == node.stat.czxid {
                        below.extend(
                            names
                                .iter()
                                .map(|name| (zk::join(&path, name), stat.pzxid))
                                .filter(|(child, _)| !reserved(child)),
                        );
                    }
                }
                // Deleted after its data was read: the watch reports it.
                Some(Err(ZkError::NoNode)) => {}
                // Made unreadable after its data was read: left out as unreadable.
                Some(Err(ZkError::NoAuth)) => continue,
                Some(Err(e)) => return Err(e),
                other => {
                    return Err(ZkError::Other(format!(
                        "pipeline answered {other:?} for a listing of {path}"
                    )))
                }
            }
            found.insert(path, node);
        }
        below.sort();
        level = below;
    }
    Ok(found)
}

/// A started cache.
struct Cache {
    tree: Tree,
    watcher: PersistentWatcher,
    /// Changes read but not yet handed out.
    queue: VecDeque<Change>,
    /// The nodes as the changes handed out so far left them.
    reported: Nodes,
    /// The whole tree must be read again (after `missed`, or a read that failed).
    resync: bool,
    /// The session ended: nothing more will be reported.
    expired: bool,
}

impl Cache {
    fn next(&mut self, deadline: Deadline) -> Result<Change, ZkError> {
        if self.expired {
            return Err(ZkError::SessionExpired);
        }
        let mut waited = false;
        loop {
            if let Some(change) = self.queue.pop_front() {
                apply(&mut self.reported, &change);
                return Ok(change);
            }
            if self.resync {
                let fresh = read_tree(&self.tree.top, self.tree.recursive, ZooKeeper)?;
                self.queue.extend(diff(&mut self.tree.known, fresh));
                self.resync = false;
                continue;
            }
            // A zero timeout still takes a notice already waiting; after one wait, time is up.
            if waited && deadline.expired() {
                return Err(ZkError::Timeout);
            }
            waited = true;
            match self.watcher.next(deadline.remaining_ms())? {
                Notice::Missed => self.resync = true,
                Notice::Changed(change) => match self.tree.notice(change.kind, &change.path, ZooKeeper) {
                    Ok(changes) => self.queue.extend(changes),
                    Err(e) => {
                        self.resync = true;
                        return Err(e);
                    }
                },
            }
        }
    }
}

thread_local! {
    static CACHE: RefCell<Option<Cache>> = const { RefCell::new(None) };
}

struct Recipe;

impl Guest for Recipe {
    fn start(path: String, recursive: bool) -> Result<(), ZkError> {
        zk::check_path(&path)?;
        if CACHE.with(|c| c.borrow().is_some()) {
            return Err(ZkError::InvalidArgument("the cache is already started".into()));
        }
        // Watch first: a change made while the tree is read is reported afterwards.
        let watcher = zk::add_watch(&path, recursive)?;
        let fresh = read_tree(&path, recursive, ZooKeeper)?;
        let mut tree = Tree { top: path, recursive, known: Nodes::new() };
        let mut queue: VecDeque<Change> = diff(&mut tree.known, fresh).into();
        queue.push_back(Change::Initialized);
        let cache = Cache { tree, watcher, queue, reported: Nodes::new(), resync: false, expired: false };
        CACHE.with(|c| *c.borrow_mut() = Some(cache));
        Ok(())
    }

    fn next(timeout_ms: Option<u64>) -> Result<Change, ZkError> {
        CACHE.with(|c| {
            let mut cache = c.borrow_mut();
            let cache =
                cache.as_mut().ok_or_else(|| ZkError::InvalidArgument("the cache is not started".into()))?;
            let next = cache.next(Deadline::after_ms(timeout_ms));
            if let Err(ZkError::SessionExpired) = next {
                cache.expired = true;
            }
            next
        })
    }

    fn get(path: String) -> Option<Node> {
        CACHE.with(|c| c.borrow().as_ref().and_then(|cache| cache.reported.get(&path).cloned()))
    }

    fn nodes() -> Vec<Node> {
        CACHE.with(|c| {
            c.borrow().as_ref().map(|cache| cache.reported.values().cloned().collect()).unwrap_or_default()
        })
    }
}

export!(Recipe);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use wazoo_guest::Stat;

    fn node(path: &str, czxid: i64, mzxid: i64) -> Node {
        let stat = Stat {
            czxid,
            mzxid,
            pzxid: czxid,
            ctime: 0,
            mtime: 0,
            version: (mzxid - czxid) as i32,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        };
        Node { path: path.to_string(), data: mzxid.to_string().into_bytes(), stat }
    }

    fn nodes(list: &[(&str, i64, i64)]) -> Nodes {
        list.iter().map(|&(path, c, m)| (path.to_string(), node(path, c, m))).collect()
    }

    /// Each change as "kind path", for comparing.
    fn said(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|change| match change {
                Change::Created(n) => format!("created {}", n.path),
                Change::Changed(n) => format!("changed {}", n.path),
                Change::Deleted(n) => format!("deleted {}", n.path),
                Change::Initialized => "initialized".to_string(),
            })
            .collect()
    }

    /// Path, czxid and mzxid of every node, for comparing.
    fn shape(nodes: &Nodes) -> Vec<(String, i64, i64)> {
        nodes.values().map(|n| (n.path.clone(), n.stat.czxid, n.stat.mzxid)).collect()
    }

    /// Applies `changes` to `reported` one by one, checking after each that no node is held
    /// without its parent (below `top`).
    fn replay(reported: &mut Nodes, changes: &[Change], top: &str) {
        for change in changes {
            apply(reported, change);
            for path in reported.keys().filter(|p| *p != top) {
                assert!(
                    reported.contains_key(zk::parent(path)),
                    "{path} without its parent after {change:?}"
                );
            }
        }
    }

    #[test]
    fn within_tells_a_subtree_from_a_sibling_with_the_same_prefix() {
        assert!(within("/a", "/a"));
        assert!(within("/a", "/a/b/c"));
        assert!(!within("/a", "/ab"));
        assert!(!within("/a", "/a-b/c"));
        assert!(!within("/a/b", "/a"));
        assert!(within("/", "/"));
        assert!(within("/", "/x/y"));
    }

    #[test]
    fn the_first_read_is_created_parents_first() {
        let fresh =
            nodes(&[("/c", 1, 1), ("/c/b", 3, 3), ("/c/a", 2, 2), ("/c/a/x", 4, 4), ("/c/a-b", 5, 5)]);
        let mut known = Nodes::new();
        let changes = diff(&mut known, fresh.clone());
        assert_eq!(
            said(&changes),
            ["created /c", "created /c/a", "created /c/a-b", "created /c/a/x", "created /c/b"]
        );
        assert_eq!(shape(&known), shape(&fresh));
        let mut reported = Nodes::new();
        replay(&mut reported, &changes, "/c");
    }

    #[test]
    fn remove_takes_the_subtree_children_first_and_leaves_siblings() {
        let mut known =
            nodes(&[("/c", 1, 1), ("/c/a", 2, 2), ("/c/a/x", 3, 3), ("/c/a-b", 4, 4), ("/c/ab", 5, 5)]);
        assert_eq!(said(&remove(&mut known, "/c/a")), ["deleted /c/a/x", "deleted /c/a"]);
        assert_eq!(known.keys().collect::<Vec<_>>(), ["/c", "/c/a-b", "/c/ab"]);
        assert!(remove(&mut known, "/c/zz").is_empty());
    }

    #[test]
    fn put_reports_new_changed_and_made_again_and_ignores_what_it_has() {
        let mut known = nodes(&[("/c", 1, 1), ("/c/a", 2, 2), ("/c/a/x", 3, 3)]);
        assert!(put(&mut known, node("/c/a", 2, 2)).is_empty());
        assert_eq!(said(&put(&mut known, node("/c/a", 2, 7))), ["changed /c/a"]);
        assert_eq!(known["/c/a"].stat.mzxid, 7);
        assert_eq!(said(&put(&mut known, node("/c/b", 8, 8))), ["created /c/b"]);
        assert_eq!(
            said(&put(&mut known, node("/c/a", 9, 9))),
            ["deleted /c/a/x", "deleted /c/a", "created /c/a"]
        );
        assert_eq!(shape(&known), [("/c".into(), 1, 1), ("/c/a".into(), 9, 9), ("/c/b".into(), 8, 8)]);
    }

    #[test]
    fn a_second_read_reports_only_the_differences_and_keeps_a_whole_tree() {
        let before = nodes(&[
            ("/c", 1, 1),
            ("/c/a", 2, 2),
            ("/c/a/x", 3, 3),
            ("/c/b", 4, 4),
            ("/c/b/y", 5, 5),
            ("/c/d", 6, 6),
        ]);
        // /c/a gone with its child, /c/b made again with a new child, /c/d changed, /c/e new.
        let fresh =
            nodes(&[("/c", 1, 1), ("/c/b", 10, 10), ("/c/b/z", 11, 11), ("/c/d", 6, 12), ("/c/e", 13, 13)]);
        let mut known = before.clone();
        let changes = diff(&mut known, fresh.clone());
        assert_eq!(
            said(&changes),
            [
                "deleted /c/b/y",
                "deleted /c/b",
                "deleted /c/a/x",
                "deleted /c/a",
                "created /c/b",
                "created /c/b/z",
                "changed /c/d",
                "created /c/e",
            ]
        );
        assert_eq!(shape(&known), shape(&fresh));
        let mut reported = before;
        replay(&mut reported, &changes, "/c");
        assert_eq!(shape(&reported), shape(&fresh));
        assert!(diff(&mut known, fresh).is_empty(), "reading an unchanged tree again reports nothing");
    }

    /// A ZooKeeper stand-in: the `n`th step it answers sees `states[n]`, or the last state once
    /// past the end, so that ZooKeeper can change between two steps. It may not read `locked`.
    struct Fake {
        states: Vec<Nodes>,
        locked: Vec<String>,
        /// The first step that may not read `locked`.
        locked_from: usize,
        answered: usize,
    }

    impl Fake {
        fn new(states: Vec<Nodes>) -> Self {
            Fake { states, locked: Vec::new(), locked_from: 0, answered: 0 }
        }

        fn locking(mut self, paths: &[&str]) -> Self {
            self.locked = paths.iter().map(|path| path.to_string()).collect();
            self
        }

        fn answer(&self, zk: &Nodes, step: &Step) -> Result<StepResult, ZkError> {
            match step {
                Step::Exists(path) => Ok(StepResult::Exists(zk.get(path).map(|node| node.stat))),
                Step::GetData(path) | Step::GetChildren(path)
                    if self.answered >= self.locked_from && self.locked.contains(path) =>
                {
                    Err(ZkError::NoAuth)
                }
                Step::GetData(path) => {
                    let node = zk.get(path).ok_or(ZkError::NoNode)?;
                    Ok(StepResult::Data((node.data.clone(), node.stat)))
                }
                Step::GetChildren(path) => {
                    let node = zk.get(path).ok_or(ZkError::NoNode)?;
                    let children: Vec<&Node> =
                        zk.values().filter(|c| c.path != *path && zk::parent(&c.path) == path).collect();
                    // The last child made, at least: its deletions are not kept.
                    let mut stat = node.stat;
                    stat.pzxid = children.iter().map(|c| c.stat.czxid).fold(stat.pzxid, i64::max);
                    let names = children.iter().map(|c| zk::node_name(&c.path).to_string()).collect();
                    Ok(StepResult::Children((names, stat)))
                }
                other => panic!("the cache only reads, yet sent {other:?}"),
            }
        }
    }

    impl Look for Fake {
        fn pipeline(&mut self, steps: &[Step]) -> Result<Vec<Result<StepResult, ZkError>>, ZkError> {
            assert!(steps.len() <= STEPS_PER_PIPELINE, "{} steps in one pipeline", steps.len());
            let mut answers = Vec::new();
            for step in steps {
                let zk = &self.states[self.answered.min(self.states.len() - 1)];
                answers.push(self.answer(zk, step));
                self.answered += 1;
            }
            Ok(answers)
        }
    }

    /// Every step fails as on a connection that keeps breaking.
    struct Broken;

    impl Look for Broken {
        fn pipeline(&mut self, steps: &[Step]) -> Result<Vec<Result<StepResult, ZkError>>, ZkError> {
            Ok(steps.iter().map(|_| Err(ZkError::ConnectionLoss)).collect())
        }
    }

    /// A cache of the whole tree leaves ZooKeeper's own `/zookeeper` out: not read, and its
    /// notices ignored (no recipe may read it).
    #[test]
    fn a_cache_of_the_root_leaves_zookeepers_own_nodes_out() {
        let zk = nodes(&[("/", 0, 0), ("/zookeeper", 0, 0), ("/zookeeper/quota", 0, 0), ("/app", 1, 1)]);
        let fresh = read_tree("/", true, reader(&zk)).unwrap();
        assert_eq!(fresh.keys().collect::<Vec<_>>(), ["/", "/app"]);
        let mut t = tree("/", true, fresh);
        assert!(t.notice(ChangeKind::DataChanged, "/zookeeper/quota", reader(&zk)).unwrap().is_empty());
        assert!(t.notice(ChangeKind::Created, "/zookeeperish", reader(&zk)).is_ok());
    }

    /// ZooKeeper holding `zk` throughout.
    fn reader(zk: &Nodes) -> Fake {
        Fake::new(vec![zk.clone()])
    }

    impl Look for &mut Fake {
        fn pipeline(&mut self, steps: &[Step]) -> Result<Vec<Result<StepResult, ZkError>>, ZkError> {
            (**self).pipeline(steps)
        }
    }

    fn tree(top: &str, recursive: bool, known: Nodes) -> Tree {
        Tree { top: top.to_string(), recursive, known }
    }

    /// Checks what no run of changes may do: report a node (one path and `czxid`) `created`
    /// twice, or again after its `deleted`.
    fn check_history(changes: &[Change]) {
        let mut created = BTreeSet::new();
        let mut deleted = BTreeSet::new();
        for change in changes {
            match change {
                Change::Created(n) => {
                    let key = (n.path.clone(), n.stat.czxid);
                    assert!(!deleted.contains(&key), "{key:?} created again after its deletion");
                    assert!(created.insert(key.clone()), "{key:?} created twice");
                }
                Change::Deleted(n) => {
                    deleted.insert((n.path.clone(), n.stat.czxid));
                }
                Change::Changed(_) | Change::Initialized => {}
            }
        }
    }

    /// Checks that no change reports deleted a node `zk` holds (the same `czxid`).
    fn check_gone(changes: &[Change], zk: &Nodes) {
        for change in changes {
            if let Change::Deleted(n) = change {
                let there = zk.get(&n.path).is_some_and(|now| now.stat.czxid == n.stat.czxid);
                assert!(!there, "{} ({}) reported deleted while it is there", n.path, n.stat.czxid);
            }
        }
    }

    /// Checks that `known` holds every node below `top` under its own parent: one that some
    /// state of ZooKeeper held together with it.
    fn check_parents(known: &Nodes, states: &[Nodes], top: &str) {
        let held = |state: &Nodes, node: &Node| {
            state.get(&node.path).is_some_and(|n| n.stat.czxid == node.stat.czxid)
        };
        for (path, node) in known.iter().filter(|(path, _)| *path != top) {
            let Some(parent) = known.get(zk::parent(path)) else { panic!("{path} held without its parent") };
            assert!(
                states.iter().any(|state| held(state, node) && held(state, parent)),
                "{path} ({}) held under a parent ({}) it never was under",
                node.stat.czxid,
                parent.stat.czxid
            );
        }
    }

    /// What one client does to ZooKeeper.
    enum Op {
        Make(&'static str),
        Set(&'static str),
        Drop(&'static str),
    }

    /// ZooKeeper's states, from `start` (made in that order) through each of `ops`, and the
    /// notice each op sends a recursive watch.
    fn script(start: &[&str], ops: &[Op]) -> (Vec<Nodes>, Vec<(ChangeKind, String)>) {
        let mut zxid = 0;
        let mut zk = Nodes::new();
        let make = |zk: &mut Nodes, zxid: i64, path: &str| {
            if let Some(parent) = zk.get_mut(zk::parent(path)) {
                parent.stat.pzxid = zxid;
            }
            zk.insert(path.to_string(), node(path, zxid, zxid));
        };
        for path in start {
            zxid += 1;
            make(&mut zk, zxid, path);
        }
        let mut states = vec![zk.clone()];
        let mut notices = Vec::new();
        for op in ops {
            zxid += 1;
            let notice = match *op {
                Op::Make(path) => {
                    make(&mut zk, zxid, path);
                    (ChangeKind::Created, path)
                }
                Op::Set(path) => {
                    let old = &zk[path];
                    let mut new = node(path, old.stat.czxid, zxid);
                    new.stat.pzxid = old.stat.pzxid;
                    zk.insert(path.to_string(), new);
                    (ChangeKind::DataChanged, path)
                }
                Op::Drop(path) => {
                    zk.remove(path);
                    if let Some(parent) = zk.get_mut(zk::parent(path)) {
                        parent.stat.pzxid = zxid;
                    }
                    (ChangeKind::Deleted, path)
                }
            };
            states.push(zk.clone());
            notices.push((notice.0, notice.1.to_string()));
        }
        (states, notices)
    }

    /// Every nondecreasing list of `len` numbers up to `most`, the `i`th at least `least(i)`.
    fn rising(len: usize, least: &dyn Fn(usize) -> usize, most: usize) -> Vec<Vec<usize>> {
        fn go(
            len: usize,
            least: &dyn Fn(usize) -> usize,
            most: usize,
            so_far: &mut Vec<usize>,
            all: &mut Vec<Vec<usize>>,
        ) {
            let i = so_far.len();
            if i == len {
                all.push(so_far.clone());
                return;
            }
            let low = so_far.last().copied().unwrap_or(0).max(least(i));
            for at in low..=most {
                so_far.push(at);
                go(len, least, most, so_far, all);
                so_far.pop();
            }
        }
        let mut all = Vec::new();
        go(len, least, most, &mut Vec::new(), &mut all);
        all
    }

    /// Starts a recursive cache of `top` on `start` while `ops` run, then handles the notices,
    /// checking every promise: a whole tree after each change, no node reported deleted while
    /// it is there, none created again after its deletion, and in the end what ZooKeeper holds.
    /// The full read runs on every timeline (the state each of its steps sees), each followed by
    /// the notices handled as soon as they may be, all at the end, and while the ops go on (one
    /// to three ops between two steps); and at every even pace (an op every `pace` steps),
    /// followed by every schedule of the notices.
    fn check_script(top: &str, start: &[&str], ops: &[Op]) -> usize {
        let (states, notices) = script(start, ops);
        let n = ops.len();
        let steps = 2 * states.iter().map(Nodes::len).max().unwrap_or(0);
        let mut runs = 0;
        for seen in rising(steps, &|_| 0, n) {
            runs += check_run(top, &states, &notices, &seen, &|from| {
                vec![(0..n).map(|i| (i + 1).max(from)).collect(), vec![n; n]]
            });
        }
        for pace in 1..=steps {
            let seen: Vec<usize> = (0..steps).map(|step| (step / pace).min(n)).collect();
            runs += check_run(top, &states, &notices, &seen, &|from| rising(n, &|i| (i + 1).max(from), n));
        }
        runs
    }

    /// One start of `check_script`: the full read on `seen`, then the notices on each of
    /// `schedules(read_at)` (the state each notice is handled at, given the read's last).
    fn check_run(
        top: &str,
        states: &[Nodes],
        notices: &[(ChangeKind, String)],
        seen: &[usize],
        schedules: &dyn Fn(usize) -> Vec<Vec<usize>>,
    ) -> usize {
        let n = notices.len();
        let mut fake = Fake::new(seen.iter().map(|&at| states[at].clone()).collect());
        let fresh = read_tree(top, true, &mut fake).unwrap();
        check_parents(&fresh, states, top);
        let read_at = seen[(fake.answered - 1).min(seen.len() - 1)];
        let mut started = tree(top, true, Nodes::new());
        let first = diff(&mut started.known, fresh);
        check_gone(&first, &states[read_at]);
        let mut runs = 0;
        // Each notice handled at the state a schedule gives; or, with none, as soon as it may
        // be, while the ops go on: `jump` ops between two of its steps.
        let plans = schedules(read_at).into_iter().map(|schedule| (Some(schedule), 0));
        for (schedule, jump) in plans.chain((1..=3).map(|jump| (None, jump))) {
            let run = std::panic::AssertUnwindSafe(|| {
                let mut t = tree(top, true, started.known.clone());
                let mut changes = first.clone();
                let mut now = read_at;
                for (i, (kind, path)) in notices.iter().enumerate() {
                    let at = schedule.as_ref().map_or(now.max(i + 1), |schedule| schedule[i]);
                    let timeline = match jump {
                        0 => vec![states[at].clone()],
                        _ => states[at..].iter().step_by(jump).cloned().collect(),
                    };
                    let mut fake = Fake::new(timeline);
                    let more = t.notice(*kind, path, &mut fake).unwrap();
                    now = (at + (fake.answered.max(1) - 1) * jump).min(n);
                    check_gone(&more, &states[now]);
                    check_parents(&t.known, states, top);
                    changes.extend(more);
                }
                check_history(&changes);
                let mut reported = Nodes::new();
                replay(&mut reported, &changes, top);
                assert_eq!(shape(&reported), shape(&states[n]), "{:?}", said(&changes));
                assert_eq!(shape(&t.known), shape(&states[n]), "{:?}", said(&changes));
            });
            if std::panic::catch_unwind(run).is_err() {
                panic!("failed reading on {seen:?}, then handling the notices at {schedule:?} (jump {jump})");
            }
            runs += 1;
        }
        runs
    }

    #[test]
    fn notices_are_answered_by_reading_the_node() {
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1), ("/c/a", 2, 2)]));
        let zk = nodes(&[("/c", 1, 1), ("/c/a", 2, 5), ("/c/b", 6, 6)]);
        let changes = t.notice(ChangeKind::Created, "/c/b", reader(&zk)).unwrap();
        assert_eq!(said(&changes), ["created /c/b"]);
        let changes = t.notice(ChangeKind::DataChanged, "/c/a", reader(&zk)).unwrap();
        assert_eq!(said(&changes), ["changed /c/a"]);
        // A second notice the first read already covered.
        assert!(t.notice(ChangeKind::DataChanged, "/c/a", reader(&zk)).unwrap().is_empty());
        // Outside the cache.
        assert!(t.notice(ChangeKind::Created, "/cc", reader(&zk)).unwrap().is_empty());
        // Created and deleted before it was read.
        assert!(t.notice(ChangeKind::Created, "/c/gone", reader(&zk)).unwrap().is_empty());
        assert!(t.notice(ChangeKind::Deleted, "/c/gone", reader(&zk)).unwrap().is_empty());
        let zk = nodes(&[("/c", 1, 1), ("/c/a", 2, 5)]);
        let changes = t.notice(ChangeKind::Deleted, "/c/b", reader(&zk)).unwrap();
        assert_eq!(said(&changes), ["deleted /c/b"]);
        // Read as gone while cached.
        let zk = nodes(&[("/c", 1, 1)]);
        let changes = t.notice(ChangeKind::DataChanged, "/c/a", reader(&zk)).unwrap();
        assert_eq!(said(&changes), ["deleted /c/a"]);
        assert_eq!(t.known.keys().collect::<Vec<_>>(), ["/c"]);
    }

    #[test]
    fn a_node_read_before_its_ancestors_brings_them_first() {
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1)]));
        let zk = nodes(&[("/c", 1, 1), ("/c/a", 2, 2), ("/c/a/b", 3, 3), ("/c/a/b/x", 4, 4)]);
        let changes = t.notice(ChangeKind::Created, "/c/a/b/x", reader(&zk)).unwrap();
        assert_eq!(said(&changes), ["created /c/a", "created /c/a/b", "created /c/a/b/x"]);
        // The notices for the ancestors then find nothing new.
        assert!(t.notice(ChangeKind::Created, "/c/a", reader(&zk)).unwrap().is_empty());
        // An ancestor gone by the time it is read: nothing, the node's deletion is on its way.
        let mut t = tree("/c", true, Nodes::new());
        let zk = nodes(&[("/c/a", 2, 2)]);
        assert!(t.notice(ChangeKind::Created, "/c/a", reader(&zk)).unwrap().is_empty());
        assert!(t.known.is_empty());
    }

    #[test]
    fn a_deleted_node_takes_what_is_cached_below_it() {
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1), ("/c/a", 2, 2), ("/c/a/x", 3, 3)]));
        let changes = t.notice(ChangeKind::Deleted, "/c", reader(&Nodes::new())).unwrap();
        assert_eq!(said(&changes), ["deleted /c/a/x", "deleted /c/a", "deleted /c"]);
        assert!(t.known.is_empty());
    }

    #[test]
    fn a_deletion_the_cache_read_past_is_not_reported_again() {
        // /c/b was deleted and made again: a stale notice read the new one first.
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1), ("/c/b", 2, 2)]));
        let zk = nodes(&[("/c", 1, 1), ("/c/b", 9, 9)]);
        let changes = t.notice(ChangeKind::DataChanged, "/c/b", reader(&zk)).unwrap();
        assert_eq!(said(&changes), ["deleted /c/b", "created /c/b"]);
        // Then the notices of the deletion and the creation themselves: nothing more.
        assert!(t.notice(ChangeKind::Deleted, "/c/b", reader(&zk)).unwrap().is_empty());
        assert!(t.notice(ChangeKind::Created, "/c/b", reader(&zk)).unwrap().is_empty());
        assert_eq!(t.known["/c/b"].stat.czxid, 9);
        // Deleted and made again, both after the last read: the deletion now, the new node
        // with its own notice.
        let zk = nodes(&[("/c", 1, 1), ("/c/b", 12, 12)]);
        assert_eq!(said(&t.notice(ChangeKind::Deleted, "/c/b", reader(&zk)).unwrap()), ["deleted /c/b"]);
        assert_eq!(said(&t.notice(ChangeKind::Created, "/c/b", reader(&zk)).unwrap()), ["created /c/b"]);
    }

    #[test]
    fn the_node_alone_ignores_its_children() {
        let mut t = tree("/c", false, nodes(&[("/c", 1, 1)]));
        let zk = nodes(&[("/c", 1, 4), ("/c/a", 3, 3)]);
        assert!(t.notice(ChangeKind::ChildrenChanged, "/c", reader(&zk)).unwrap().is_empty());
        assert!(t.notice(ChangeKind::Created, "/c/a", reader(&zk)).unwrap().is_empty());
        assert_eq!(said(&t.notice(ChangeKind::DataChanged, "/c", reader(&zk)).unwrap()), ["changed /c"]);
        // Made again between two reads.
        let zk = nodes(&[("/c", 9, 9)]);
        assert_eq!(
            said(&t.notice(ChangeKind::Created, "/c", reader(&zk)).unwrap()),
            ["deleted /c", "created /c"]
        );
    }

    #[test]
    fn a_failed_read_is_returned_and_changes_nothing() {
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1)]));
        let failed = t.notice(ChangeKind::Created, "/c/a", Broken);
        assert!(matches!(failed, Err(ZkError::ConnectionLoss)));
        let failed = t.notice(ChangeKind::Deleted, "/c", Broken);
        assert!(matches!(failed, Err(ZkError::ConnectionLoss)));
        assert_eq!(t.known.keys().collect::<Vec<_>>(), ["/c"]);
    }

    #[test]
    fn the_root_caches_everything() {
        let mut t = tree("/", true, nodes(&[("/", 0, 0)]));
        let zk = nodes(&[("/", 0, 0), ("/a", 1, 1)]);
        assert_eq!(said(&t.notice(ChangeKind::Created, "/a", reader(&zk)).unwrap()), ["created /a"]);
        assert_eq!(
            said(&t.notice(ChangeKind::Deleted, "/", reader(&Nodes::new())).unwrap()),
            ["deleted /a", "deleted /"]
        );
    }

    #[test]
    fn a_node_is_not_put_under_a_parent_made_again_since() {
        // set /g/a/x, rm /g/a/x, rm /g/a, mk /g/a, mk /g/a/x, all before the first notice is
        // handled: the new /g/a/x is there throughout, and is reported once.
        let before = nodes(&[("/g", 1, 1), ("/g/a", 2, 2), ("/g/a/x", 3, 3)]);
        let zk = nodes(&[("/g", 1, 1), ("/g/a", 6, 6), ("/g/a/x", 7, 7)]);
        let mut t = tree("/g", true, before.clone());
        let notices = [
            (ChangeKind::DataChanged, "/g/a/x"),
            (ChangeKind::Deleted, "/g/a/x"),
            (ChangeKind::Deleted, "/g/a"),
            (ChangeKind::Created, "/g/a"),
            (ChangeKind::Created, "/g/a/x"),
        ];
        let mut changes = Vec::new();
        for (kind, path) in notices {
            changes.extend(t.notice(kind, path, reader(&zk)).unwrap());
        }
        assert_eq!(said(&changes), ["deleted /g/a/x", "deleted /g/a", "created /g/a", "created /g/a/x"]);
        check_gone(&changes, &zk);
        check_history(&changes);
        let mut reported = before;
        replay(&mut reported, &changes, "/g");
        assert_eq!(shape(&reported), shape(&zk));
    }

    #[test]
    fn an_ancestor_made_again_after_the_node_below_it_was_read_is_not_its_parent() {
        // /c/a/x is read; then /c/a/x and /c/a are deleted and /c/a made again before /c/a is
        // read: the /c/a read is younger than the /c/a/x read, so not its parent.
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1)]));
        let then = nodes(&[("/c", 1, 1), ("/c/a", 2, 2), ("/c/a/x", 3, 3)]);
        let now = nodes(&[("/c", 1, 1), ("/c/a", 6, 6)]);
        assert!(t
            .notice(ChangeKind::Created, "/c/a/x", Fake::new(vec![then, now.clone()]))
            .unwrap()
            .is_empty());
        assert_eq!(t.known.keys().collect::<Vec<_>>(), ["/c"]);
        // The notices still to come bring the new /c/a alone.
        let changes = t.notice(ChangeKind::Created, "/c/a", reader(&now)).unwrap();
        assert_eq!(said(&changes), ["created /c/a"]);
        // The same, the nearest node held being the one made again: /c/a/b/x, read under a
        // /c/a that is not the one cached.
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1), ("/c/a", 2, 2)]));
        let zk = nodes(&[("/c", 1, 1), ("/c/a", 6, 6), ("/c/a/b", 7, 7), ("/c/a/b/x", 8, 8)]);
        assert!(t.notice(ChangeKind::Created, "/c/a/b/x", reader(&zk)).unwrap().is_empty());
        assert_eq!(said(&t.notice(ChangeKind::Deleted, "/c/a", reader(&zk)).unwrap()), ["deleted /c/a"]);
        assert_eq!(said(&t.notice(ChangeKind::Created, "/c/a", reader(&zk)).unwrap()), ["created /c/a"]);
        assert_eq!(
            said(&t.notice(ChangeKind::Created, "/c/a/b/x", reader(&zk)).unwrap()),
            ["created /c/a/b", "created /c/a/b/x"]
        );
        assert_eq!(shape(&t.known), shape(&zk));
    }

    #[test]
    fn a_deep_node_new_to_the_cache_is_read_with_all_its_ancestors() {
        // More ancestors than one pipeline takes.
        let mut path = "/c".to_string();
        let mut zk = nodes(&[("/c", 1, 1)]);
        for depth in 2..=80 {
            path = zk::join(&path, "n");
            zk.insert(path.clone(), node(&path, depth, depth));
        }
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1)]));
        let changes = t.notice(ChangeKind::Created, &path, reader(&zk)).unwrap();
        assert_eq!(changes.len(), 79);
        assert_eq!(shape(&t.known), shape(&zk));
    }

    #[test]
    fn a_full_read_keeps_each_node_under_its_own_parent() {
        // /g/a and /g/a/x are made again between the listing of /g/a and the read of /g/a/x
        // (steps 0 and 1: /g, steps 2 and 3: /g/a, step 4: /g/a/x).
        let then = nodes(&[("/g", 1, 1), ("/g/a", 2, 2), ("/g/a/x", 3, 3)]);
        let now = nodes(&[("/g", 1, 1), ("/g/a", 6, 6), ("/g/a/x", 7, 7)]);
        let timeline = vec![then.clone(), then.clone(), then.clone(), then.clone(), now.clone()];
        let fresh = read_tree("/g", true, Fake::new(timeline)).unwrap();
        assert_eq!(shape(&fresh), [("/g".into(), 1, 1), ("/g/a".into(), 2, 2)]);
        // /g/a/x alone made again after the listing: left out too, the watch reports it.
        let now = nodes(&[("/g", 1, 1), ("/g/a", 2, 2), ("/g/a/x", 5, 5)]);
        let timeline = vec![then.clone(), then.clone(), then.clone(), then.clone(), now];
        let fresh = read_tree("/g", true, Fake::new(timeline)).unwrap();
        assert_eq!(shape(&fresh), [("/g".into(), 1, 1), ("/g/a".into(), 2, 2)]);
        // /g/a made again with a new child between the reads of its data and its children:
        // its listing is the new one's, so not used.
        let now = nodes(&[("/g", 1, 1), ("/g/a", 6, 6), ("/g/a/y", 7, 7)]);
        let timeline = vec![then.clone(), then.clone(), then, now];
        let fresh = read_tree("/g", true, Fake::new(timeline)).unwrap();
        assert_eq!(shape(&fresh), [("/g".into(), 1, 1), ("/g/a".into(), 2, 2)]);
    }

    #[test]
    fn every_schedule_of_a_parent_made_again_keeps_the_promises() {
        use Op::*;
        let runs = check_script(
            "/g",
            &["/g", "/g/a", "/g/a/x"],
            &[Set("/g/a/x"), Drop("/g/a/x"), Drop("/g/a"), Make("/g/a"), Make("/g/a/x")],
        );
        assert!(runs > 100, "{runs} runs");
        check_script(
            "/g",
            &["/g"],
            &[
                Make("/g/a"),
                Make("/g/a/x"),
                Drop("/g/a/x"),
                Drop("/g/a"),
                Make("/g/a"),
                Make("/g/a/x"),
                Set("/g/a"),
            ],
        );
        check_script(
            "/g",
            &["/g", "/g/a", "/g/a/x"],
            &[Drop("/g/a/x"), Drop("/g/a"), Make("/g/a"), Make("/g/a/y"), Set("/g/a/y"), Make("/g/a/x")],
        );
        check_script(
            "/g",
            &["/g", "/g/a", "/g/a/b", "/g/a/b/x"],
            &[Drop("/g/a/b/x"), Drop("/g/a/b"), Drop("/g/a"), Make("/g/a"), Make("/g/a/b"), Make("/g/a/b/x")],
        );
        check_script(
            "/g",
            &[],
            &[Make("/g"), Make("/g/a"), Make("/g/a/x"), Drop("/g/a/x"), Drop("/g/a"), Drop("/g"), Make("/g")],
        );
    }

    #[test]
    fn a_node_the_cache_may_not_read_is_left_out_of_a_full_read() {
        let zk = nodes(&[("/c", 1, 1), ("/c/a", 2, 2), ("/c/b", 3, 3), ("/c/b/y", 4, 4), ("/c/d", 5, 5)]);
        let fresh = read_tree("/c", true, reader(&zk).locking(&["/c/b"])).unwrap();
        assert_eq!(fresh.keys().collect::<Vec<_>>(), ["/c", "/c/a", "/c/d"]);
        assert!(read_tree("/c", true, reader(&zk).locking(&["/c"])).unwrap().is_empty());
        assert!(read_tree("/c", false, reader(&zk).locking(&["/c"])).unwrap().is_empty());
        // A listing refused after the data was read: left out as well.
        // (Steps 0 and 1: /c; 2 and 3: /c/a; 4 and 5: /c/b.)
        let mut fake = reader(&zk).locking(&["/c/b"]);
        fake.locked_from = 5;
        let fresh = read_tree("/c", true, fake).unwrap();
        assert_eq!(fresh.keys().collect::<Vec<_>>(), ["/c", "/c/a", "/c/d"]);
        // Other errors still fail the read.
        assert!(matches!(read_tree("/c", true, Broken), Err(ZkError::ConnectionLoss)));
        assert!(matches!(read_tree("/c", false, Broken), Err(ZkError::ConnectionLoss)));
        // After `missed`, a node made unreadable is reported gone, with what is below it.
        let mut known = zk.clone();
        let fresh = read_tree("/c", true, reader(&zk).locking(&["/c/b"])).unwrap();
        assert_eq!(said(&diff(&mut known, fresh)), ["deleted /c/b/y", "deleted /c/b"]);
    }

    #[test]
    fn a_node_the_cache_may_not_read_is_treated_as_absent_on_a_notice() {
        let mut t = tree("/c", true, nodes(&[("/c", 1, 1), ("/c/a", 2, 2), ("/c/a/x", 3, 3)]));
        let zk = nodes(&[("/c", 1, 1), ("/c/a", 2, 9), ("/c/a/x", 3, 3), ("/c/b", 4, 4), ("/c/b/y", 5, 5)]);
        let locked = || reader(&zk).locking(&["/c/a", "/c/b"]);
        assert!(t.notice(ChangeKind::Created, "/c/b", locked()).unwrap().is_empty());
        // Below an unreadable node: left out with it.
        assert!(t.notice(ChangeKind::Created, "/c/b/y", locked()).unwrap().is_empty());
        // Cached, then unreadable.
        let changes = t.notice(ChangeKind::DataChanged, "/c/a", locked()).unwrap();
        assert_eq!(said(&changes), ["deleted /c/a/x", "deleted /c/a"]);
        assert_eq!(t.known.keys().collect::<Vec<_>>(), ["/c"]);
        // Readable again: back in the cache.
        assert_eq!(
            said(&t.notice(ChangeKind::Created, "/c/b/y", reader(&zk)).unwrap()),
            ["created /c/b", "created /c/b/y"]
        );
    }
}
