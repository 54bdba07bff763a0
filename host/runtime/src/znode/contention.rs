//! `wazoo:zk/contention`: the contention for a turn (a lock, either side of a read/write lock, a
//! semaphore's mutex, a leadership), once for every guest language.
//!
//! A contender creates its ephemeral sequential node and lists its directory in one round trip
//! (a `znode.pipeline` of the two), orders the children by the rule's markers, and while a node
//! ahead of its own keeps it waiting, watches that node with a data watch and looks again once it
//! changes. When the node waited for was the lowest and is deleted, the last look without it is
//! what a new listing would show ahead of ours (sequence numbers only grow), so the host looks
//! again on that without a request, provided our own node is still there: a data watch on it,
//! armed before such a wait, has not fired. ZooKeeper delivers one session's events in order, so
//! had our node gone before the node we waited for, that watch would have fired first.
//!
//! Every request goes through the `znode` and `watch` functions' own paths: paths checked,
//! requests counted, the create recorded in the ledger and found again after a lost reply, reads
//! tried again through connection loss, watches counted against the watch limit.
//!
//! The rule is data (`rule`): how children are ordered, which nodes ahead keep ours waiting, and
//! which of them it watches. Curator's layouts and kazoo's are rules over the same steps:
//!
//! | recipe | order | blockers | pick |
//! |---|---|---|---|
//! | lock, semaphore's mutex, leadership (Curator) | `lock-` / `latch-` | any | nearest |
//! | read/write lock, reader (Curator) | `__READ__`, `__WRIT__` | containing `__WRIT__` | first |
//! | read/write lock, writer (Curator) | `__READ__`, `__WRIT__` | any | nearest |
//! | `Lock`, semaphore's mutex (kazoo) | `__lock__`, `__rlock__` | sequenced `__lock__` | nearest |
//! | `ReadLock` (kazoo) | `__lock__`, `__rlock__` | sequenced `__lock__` | first |
//! | `WriteLock` (kazoo) | `__lock__`, `__rlock__` | sequenced both | nearest |

use std::time::{Duration, Instant};

use wasmtime::component::Resource;

use crate::bindings::contention::{Blockers, Contender, Host, HostContender, Naming, Pick, Rule, Standing};
use crate::bindings::types::{
    CreateMode, CreateOp, Created, EventKind, ProtectedOp, Step, StepResult, ZkError,
};
use crate::bindings::znode::Host as _;
use crate::error::from_client;
use crate::paths;
use crate::retry::{backoff, retry, READ_RETRIES};
use crate::slots::WatchSlot;
use crate::state::HostState;
use crate::stats::Stats;
use crate::watch::{await_slot, session_ended};

type Reply<T> = wasmtime::Result<Result<T, ZkError>>;

/// Most markers in a rule's `order`, and in its `blockers`: every listing sorts by them, on the
/// host's time, not the guest's.
const MAX_MARKERS: usize = 16;
/// Longest marker, in bytes.
const MAX_MARKER_BYTES: usize = 256;
/// How many times a write (the kazoo create, a withdrawal) is tried again through connection loss.
const WRITE_RETRIES: u32 = READ_RETRIES;

/// The path a sequential create at `path` (the name's prefix, under `dir`) makes when it is the
/// first create in `dir` since the one that made `old`: `old`'s sequence number plus one.
fn next_in_sequence(old: &str, dir: &str, path: &str) -> Option<String> {
    let (parent, name) = old.rsplit_once('/')?;
    let parent = if parent.is_empty() { "/" } else { parent };
    if parent != dir || name.len() < 10 {
        return None;
    }
    let sequence: i32 = name[name.len() - 10..].parse().ok()?;
    Some(format!("{path}{:010}", sequence.checked_add(1)?))
}

/// The host side of a `contender` resource. The bindings know it only by its handle (the
/// generated `Contender`); the table holds this.
pub(crate) struct ContenderSlot {
    dir: String,
    /// Our node's name (its last path component).
    name: String,
    created: Created,
    rule: Rule,
    /// The children, ordered, as the next look sees them without listing: the listing made with
    /// the create, until the first look takes it.
    known: Option<Vec<String>>,
}

/// The resource handle the guest holds, for the slot in the table.
fn slot(handle: &Resource<Contender>) -> Resource<ContenderSlot> {
    Resource::new_borrow(handle.rep())
}

/// The part of `name` after the last occurrence of each of `markers` in turn (the whole name
/// when it has none): Curator's and kazoo's order of sequential nodes.
fn sort_key<'a>(name: &'a str, markers: &[String]) -> &'a str {
    markers.iter().fold(name, |key, marker| match key.rfind(marker.as_str()) {
        Some(i) => &key[i + marker.len()..],
        None => key,
    })
}

/// `children` ordered by [`sort_key`], ties in the order given.
pub(crate) fn ordered(children: Vec<String>, markers: &[String]) -> Vec<String> {
    let mut keyed: Vec<(String, String)> =
        children.into_iter().map(|c| (sort_key(&c, markers).to_string(), c)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, c)| c).collect()
}

/// Whether `name` ends in one of `markers` and a 10-digit sequence (after a `-` when the server's
/// counter overflowed), as kazoo's `(?:markers)(-?\d{10})$` finds its contenders.
fn sequenced(name: &str, markers: &[String]) -> bool {
    let Some(digits_at) = name.len().checked_sub(10) else { return false };
    if !name.is_char_boundary(digits_at) || !name[digits_at..].bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let ends_in_marker = |stem: &str| markers.iter().any(|m| stem.ends_with(m.as_str()));
    let at = match name[..digits_at].strip_suffix('-') {
        Some(stem) if ends_in_marker(stem) => digits_at - 1,
        _ => digits_at,
    };
    ends_in_marker(&name[..at])
}

/// Whether the node `name`, ahead of ours, keeps ours waiting.
fn blocks(name: &str, blockers: &Blockers) -> bool {
    match blockers {
        Blockers::Any => true,
        Blockers::Containing(texts) => texts.iter().any(|t| name.contains(t.as_str())),
        Blockers::Sequenced(markers) => sequenced(name, markers),
    }
}

/// The node ours (at `index` of `sorted`) waits for under `rule`, or none when it holds.
pub(crate) fn waits_for<'a>(sorted: &'a [String], index: usize, rule: &Rule) -> Option<&'a String> {
    let mut ahead = sorted[..index].iter().filter(|c| blocks(c, &rule.blockers));
    match rule.pick {
        Pick::Nearest => ahead.next_back(),
        Pick::First => ahead.next(),
    }
}

/// Refuses a rule the host would spend too long on, or whose markers match everything.
fn check_rule(rule: &Rule) -> Result<(), ZkError> {
    let blockers: &[String] = match &rule.blockers {
        Blockers::Any => &[],
        Blockers::Containing(m) | Blockers::Sequenced(m) => m,
    };
    for (what, markers) in [("order", &rule.order[..]), ("blockers", blockers)] {
        if markers.len() > MAX_MARKERS {
            return Err(ZkError::InvalidArgument(format!(
                "a rule's {what} has {} markers; at most {MAX_MARKERS}",
                markers.len()
            )));
        }
        if let Some(bad) = markers.iter().find(|m| m.is_empty() || m.len() > MAX_MARKER_BYTES) {
            return Err(ZkError::InvalidArgument(format!(
                "a rule's {what} marker must be 1 to {MAX_MARKER_BYTES} bytes, not {} bytes",
                bad.len()
            )));
        }
    }
    Ok(())
}

/// A deadline `timeout_ms` from now; none never passes.
fn deadline(timeout_ms: Option<u64>) -> Option<Instant> {
    timeout_ms.and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms)))
}

/// Whole milliseconds left before `deadline` (none: no limit).
fn remaining_ms(deadline: Option<Instant>) -> Option<u64> {
    deadline.map(|at| at.saturating_duration_since(Instant::now()).as_millis() as u64)
}

fn expired(deadline: Option<Instant>) -> bool {
    remaining_ms(deadline) == Some(0)
}

/// A `znode` function's reply (whose outer error the host never returns).
fn flat<T>(reply: wasmtime::Result<Result<T, ZkError>>) -> Result<T, ZkError> {
    reply.unwrap_or_else(|e| Err(ZkError::Other(e.to_string())))
}

impl HostState {
    /// Steps 1 and 2: our node and, when it could be read with it, the listing of `dir`.
    async fn enter_contention(
        &mut self,
        dir: String,
        naming: Naming,
        data: Vec<u8>,
        rule: Rule,
    ) -> Result<ContenderSlot, ZkError> {
        paths::check(&dir).map_err(ZkError::InvalidPath)?;
        check_rule(&rule)?;
        let (created, listed) = match naming {
            Naming::Protected(name) => self.create_protected_and_list(&dir, name, data).await?,
            Naming::Kazoo(marker) => self.create_kazoo_and_list(&dir, &marker, data).await?,
        };
        let name = created.path.rsplit('/').next().unwrap_or_default().to_string();
        let known = listed.map(|children| ordered(children, &rule.order));
        Ok(ContenderSlot { dir, name, created, rule, known })
    }

    /// The protected create of `<dir>/_c_<uuid>-<name>` and the listing of `dir`, as one
    /// pipeline. The listing is none if it failed (the next look lists again).
    async fn create_protected_and_list(
        &mut self,
        dir: &str,
        name: String,
        data: Vec<u8>,
    ) -> Result<(Created, Option<Vec<String>>), ZkError> {
        // Checked before the release held back is taken, so a refusal leaves it held (and sent).
        let (prefix, path) = super::protect(dir, &name, self.claim.as_ref())?;
        if let Some(released) = self.take_held_back() {
            if let Some(folded) = self.folded_and_listed(released, dir, &prefix, &path, data.clone()).await? {
                return Ok(folded);
            }
        }
        let steps = vec![
            Step::CreateProtected(ProtectedOp {
                dir: dir.to_string(),
                name,
                data,
                mode: CreateMode::EphemeralSequential,
            }),
            Step::GetChildren(dir.to_string()),
        ];
        let mut results = self.do_pipeline(steps).await?.into_iter();
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

    /// kazoo's create of `<dir>/<uuid hex><marker><seq>` and the listing of `dir`, as one
    /// pipeline. A missing `dir` is made as kazoo makes it (persistent, with its ancestors).
    /// After a lost reply the node is looked for by its unique prefix (after a `sync`) and taken
    /// only if this session owns it; only if it is not there is the create sent again. The
    /// listing is none when it failed or the node was found that way.
    async fn create_kazoo_and_list(
        &mut self,
        dir: &str,
        marker: &str,
        data: Vec<u8>,
    ) -> Result<(Created, Option<Vec<String>>), ZkError> {
        if marker.contains('/') {
            return Err(ZkError::InvalidArgument(format!("kazoo node marker {marker:?} contains '/'")));
        }
        let prefix = format!("{}{marker}", uuid::Uuid::new_v4().simple());
        let path = paths::join(dir, &prefix);
        paths::check_node(&path).map_err(ZkError::InvalidPath)?;
        if let Some(released) = self.take_held_back() {
            if let Some(folded) = self.folded_and_listed(released, dir, &prefix, &path, data.clone()).await? {
                return Ok(folded);
            }
        }
        let (mut made_dir, mut lost) = (false, 0);
        loop {
            let steps = vec![
                Step::Create(CreateOp {
                    path: path.clone(),
                    data: data.clone(),
                    mode: CreateMode::EphemeralSequential,
                }),
                Step::GetChildren(dir.to_string()),
            ];
            let mut results = self.do_pipeline(steps).await?.into_iter();
            match results.next() {
                Some(Ok(StepResult::Created(created))) => {
                    let listed = match results.next() {
                        Some(Ok(StepResult::Children((children, _)))) => Some(children),
                        _ => None,
                    };
                    return Ok((created, listed));
                }
                Some(Err(ZkError::NoNode)) if !made_dir => {
                    made_dir = true;
                    self.ensure_path(dir).await?;
                }
                Some(Err(ZkError::ConnectionLoss)) if lost < WRITE_RETRIES => {
                    lost += 1;
                    if let Some(found) = self.find_protected(dir, &prefix, true, &path).await? {
                        return Ok((found, None));
                    }
                    backoff(lost).await;
                }
                Some(Err(e)) => return Err(e),
                other => return Err(ZkError::Other(format!("pipeline answered {other:?} for a create"))),
            }
        }
    }

    /// The release held back for this contention ([`HostState::folding`]), unless the
    /// acquire is a retried one (which looks for its earlier node first, and so cannot fold).
    fn take_held_back(&mut self) -> Option<(String, Option<i64>)> {
        if self.claim.is_some_and(|c| c.retry) {
            return None;
        }
        self.held_back.get_mut().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The hand-over in one write: the release held back and our new node's create (`path`, a
    /// sequential name under `dir` unique by `prefix`) in one `multi`, and the listing of `dir`
    /// right behind it, in one round trip. ZooKeeper applies both or neither, so the new node
    /// goes to the back of the queue as the old one leaves, and a lost reply is settled by
    /// looking for the new node: found, both applied; not found, neither.
    ///
    /// None when the `multi` did not apply (the old node already gone, `dir` missing, a refusal):
    /// the release has then been sent on its own, unwaited, and the caller creates as usual.
    async fn folded_and_listed(
        &mut self,
        released: (String, Option<i64>),
        dir: &str,
        prefix: &str,
        path: &str,
        data: Vec<u8>,
    ) -> Result<Option<(Created, Option<Vec<String>>)>, ZkError> {
        let (old, czxid) = released;
        let predicted = next_in_sequence(&old, dir, path);
        let mode = CreateMode::EphemeralSequential;
        let data = self.contender_data(data, &mode);
        let admitted = self
            .check_data(&data)
            .and_then(|()| self.admit_nodes(1))
            .and_then(|()| super::options(&mode, self.shared.private_acls))
            // The `multi`, the listing, and the look at the predicted path.
            .and_then(|options| {
                (0..2 + usize::from(predicted.is_some()))
                    .try_for_each(|_| self.count_call())
                    .map(|()| options)
            });
        let options = match admitted {
            Ok(options) => options,
            Err(e) => {
                self.send_unwaited(old, czxid);
                return Err(e);
            }
        };
        let live = self.live.clone();
        let mut writer = live.client.new_multi_writer();
        if writer.add_delete(&old, None).and_then(|()| writer.add_create(path, &data, &options)).is_err() {
            self.send_unwaited(old, czxid);
            return Ok(None);
        }
        self.ledger.uncertain(path);
        // Both go out here, the listing behind the `multi`.
        // ZooKeeper 3.8 answers a create in a `multi` without its stat (ZOOKEEPER-4026), and the
        // stat's czxid is the fencing token. A directory's sequence numbers grow by one a create,
        // so when nobody else created meanwhile (a client taking its lock in a loop), our new
        // node is the old one's number plus one: a look at that path goes out with the rest, and
        // counts if the `multi` did make that very path (the look is applied after it).
        let committed = writer.commit();
        let listing = live.client.get_children(dir);
        let looked = predicted.as_deref().map(|p| live.client.check_stat(p));
        let (committed, listing) = (committed.await, listing.await);
        let looked = match looked {
            Some(looked) => looked.await.ok().flatten(),
            None => None,
        };
        let committed = match committed {
            Ok(_) if self.shared.faults.take_lost_fold_reply() => {
                Err(zookeeper_client::MultiWriteError::RequestFailed {
                    source: zookeeper_client::Error::ConnectionLoss,
                })
            }
            other => other,
        };
        let listed = listing.ok().map(|(children, _)| children);
        match committed {
            Ok(results) => {
                let made = results.into_iter().find_map(|r| match r {
                    zookeeper_client::MultiWriteResult::Create { path, stat } => Some((path, stat)),
                    _ => None,
                });
                let Some((made, st)) = made else {
                    return Err(ZkError::Other("a multi of a delete and a create answered no create".into()));
                };
                self.released_in_fold(&old);
                self.nodes_changed(1);
                let st = match looked {
                    Some(seen)
                        if predicted.as_deref() == Some(made.as_str())
                            && seen.ephemeral_owner == live.session_id() =>
                    {
                        self.ledger.created(&made, seen.czxid);
                        seen
                    }
                    // A server that answers a create in a `multi` with its stat (3.9).
                    _ if !st.is_invalid() => {
                        self.ledger.created(&made, st.czxid);
                        st
                    }
                    // Someone else created meanwhile: read back, as reads are, through connection
                    // loss. A node whose czxid cannot be read is no claim to grant: it stays
                    // uncertain (its handle's cleanup finds it by owner).
                    _ => match retry(READ_RETRIES, || live.client.check_stat(&made)).await {
                        Ok(Some(seen)) if seen.ephemeral_owner == live.session_id() => {
                            self.ledger.created(&made, seen.czxid);
                            seen
                        }
                        Ok(_) => {
                            self.ledger.resolved(path);
                            return Err(ZkError::NoNode);
                        }
                        Err(e) => return Err(from_client(e)),
                    },
                };
                self.ledger.resolved(path);
                Stats::bump(&self.shared.stats.folded);
                Ok(Some((Created { path: made, stat: super::stat(st) }, listed)))
            }
            Err(zookeeper_client::MultiWriteError::RequestFailed { source })
                if matches!(from_client(source.clone()), ZkError::ConnectionLoss) =>
            {
                match self.find_protected(dir, prefix, true, path).await {
                    // A claim named by its client keeps its prefix from turn to turn: the old
                    // node, still there, says the `multi` did not apply. It is released on its
                    // own, and the new node created as usual.
                    Ok(Some(found)) if found.path == old => {
                        self.ledger.resolved(path);
                        // `find_protected` took it for a new node.
                        self.nodes_changed(-1);
                        let czxid = self.ledger.releasing(&old).flatten().or(czxid);
                        self.send_unwaited(old, czxid);
                        Ok(None)
                    }
                    Ok(Some(found)) => {
                        self.released_in_fold(&old);
                        // `find_protected` counted the node it found as a new one.
                        Stats::bump(&self.shared.stats.folded);
                        Ok(Some((found, None)))
                    }
                    // Not there: the `multi` did not apply.
                    Ok(None) => {
                        self.ledger.resolved(path);
                        self.send_unwaited(old, czxid);
                        Ok(None)
                    }
                    // Could not look: the new node, if made, stays uncertain (cleaned up by
                    // owner); the old one is deleted if it is still there.
                    Err(e) => {
                        self.send_unwaited(old, czxid);
                        Err(e)
                    }
                }
            }
            // Refused as a whole (the old node already gone, `dir` missing): nothing applied.
            Err(zookeeper_client::MultiWriteError::OperationFailed { .. }) => {
                self.ledger.resolved(path);
                self.send_unwaited(old, czxid);
                Ok(None)
            }
            // Outcome unknown: as for a look that failed.
            Err(zookeeper_client::MultiWriteError::RequestFailed { source }) => {
                self.send_unwaited(old, czxid);
                Err(from_client(source))
            }
        }
    }

    /// The old node of a hand-over is gone with the `multi` that made the new one.
    fn released_in_fold(&mut self, old: &str) {
        self.ledger.settled_in_fold(old);
        self.nodes_changed(-1);
    }

    /// Creates `path` and every missing ancestor as persistent nodes, as kazoo's `ensure_path`.
    async fn ensure_path(&mut self, path: &str) -> Result<(), ZkError> {
        if path == "/" {
            return Ok(());
        }
        let ends = path.match_indices('/').skip(1).map(|(i, _)| i).chain([path.len()]);
        for end in ends.collect::<Vec<_>>() {
            let mut attempt = 0;
            loop {
                match self.do_create(path[..end].to_string(), Vec::new(), CreateMode::Persistent).await {
                    Ok(_) | Err(ZkError::NodeExists) => break,
                    Err(ZkError::ConnectionLoss) if attempt < WRITE_RETRIES => {
                        attempt += 1;
                        backoff(attempt).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// The children of `dir`, ordered by `markers`.
    async fn look(&mut self, dir: &str, markers: &[String]) -> Result<Vec<String>, ZkError> {
        let (children, _) = flat(self.get_children(dir.to_string()).await)?;
        Ok(ordered(children, markers))
    }

    /// Steps 2 to 4, from the listing `known` when given: looks, and while a node ahead keeps
    /// ours waiting, waits for it to change and looks again (without listing after the
    /// hand-over). Ok once ours holds; `no-node` once it is gone.
    async fn wait_turn(
        &mut self,
        dir: &str,
        name: &str,
        rule: &Rule,
        mut known: Option<Vec<String>>,
        deadline: Option<Instant>,
    ) -> Result<(), ZkError> {
        let own_path = paths::join(dir, name);
        // A watch on our own node, armed (once) before the first wait that may end in a
        // hand-over, and dropped with this call.
        let mut own = None;
        loop {
            let sorted = match known.take() {
                Some(sorted) => sorted,
                None => self.look(dir, &rule.order).await?,
            };
            let index = sorted.iter().position(|c| c == name).ok_or(ZkError::NoNode)?;
            let Some(ahead) = waits_for(&sorted, index, rule) else { return Ok(()) };
            if expired(deadline) {
                return Err(ZkError::Timeout);
            }
            let ahead = ahead.clone();
            let lowest = sorted.first() == Some(&ahead);
            if lowest && own.is_none() {
                own = Some(self.data_watch(&own_path).await?.ok_or(ZkError::NoNode)?);
            }
            let gone = self.wait_gone(&paths::join(dir, &ahead), deadline).await?;
            if gone && lowest {
                // Whether our own node is still there as of the event just received, without
                // asking ZooKeeper: its watch has not fired. One that fired is dropped, and the
                // next look lists again.
                let there = match own.as_mut() {
                    None => false,
                    Some(watch) => match self.await_watch(watch, Some(0)).await {
                        Err(ZkError::Timeout) => true,
                        Err(e) => return Err(e),
                        Ok(_) => false,
                    },
                };
                if there {
                    known = Some(sorted.into_iter().filter(|c| *c != ahead).collect());
                } else {
                    own = None;
                }
            }
        }
    }

    /// Waits until the node at `path` changes: true when it was deleted (or was already gone),
    /// false for any other change. The session's end is `session-expired`; the deadline passing
    /// is `timeout`. A data watch, as Curator's, so an absent node leaves no watch behind.
    async fn wait_gone(&mut self, path: &str, deadline: Option<Instant>) -> Result<bool, ZkError> {
        if expired(deadline) {
            return Err(ZkError::Timeout);
        }
        let Some(mut watch) = self.data_watch(path).await? else { return Ok(true) };
        let event = self.await_watch(&mut watch, remaining_ms(deadline)).await?;
        match event {
            kind if session_ended(kind) => Err(ZkError::SessionExpired),
            kind => Ok(kind == EventKind::NodeDeleted),
        }
    }

    /// Deletes our node through connection loss; a node already gone counts as deleted.
    async fn withdraw_node(&mut self, path: &str) -> Result<(), ZkError> {
        let mut attempt = 0;
        loop {
            match flat(self.delete(path.to_string(), None).await) {
                Ok(()) | Err(ZkError::NoNode | ZkError::SessionExpired) => return Ok(()),
                Err(ZkError::ConnectionLoss) if attempt < WRITE_RETRIES => {
                    attempt += 1;
                    backoff(attempt).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `contention.contend`: enter, wait within the deadline, withdraw on any failure.
    async fn do_contend(
        &mut self,
        dir: String,
        naming: Naming,
        data: Vec<u8>,
        rule: Rule,
        timeout_ms: Option<u64>,
    ) -> Result<Created, ZkError> {
        let deadline = deadline(timeout_ms);
        let mut mine = self.enter_contention(dir, naming, data, rule).await?;
        let known = mine.known.take();
        match self.wait_turn(&mine.dir, &mine.name, &mine.rule, known, deadline).await {
            Ok(()) => Ok(mine.created),
            Err(e) => {
                let _ = self.withdraw_node(&mine.created.path).await;
                Err(e)
            }
        }
    }
}

impl HostState {
    /// A data watch on `path` (none when the node is absent, leaving no watch behind), counted
    /// against the watch limit while it is held, as `watch.get-data-watch` arms one.
    async fn data_watch(&mut self, path: &str) -> Result<Option<WatchSlot>, ZkError> {
        paths::check(path).map_err(ZkError::InvalidPath)?;
        self.admit_watch()?;
        let live = self.live.clone();
        match retry(READ_RETRIES, || live.client.get_and_watch_data(path)).await {
            Ok((_, _, watcher)) => Ok(Some(self.slot(watcher, path).await)),
            Err(zookeeper_client::Error::NoNode) => Ok(None),
            Err(e) => Err(from_client(e)),
        }
    }

    /// What `watch` fired with, within `timeout_ms` (`timeout` when it did not).
    async fn await_watch(
        &mut self,
        watch: &mut WatchSlot,
        timeout_ms: Option<u64>,
    ) -> Result<EventKind, ZkError> {
        await_slot(&self.shared.stats, watch, timeout_ms).await.map(|e| e.kind)
    }
}

impl HostContender for HostState {
    async fn node(&mut self, handle: Resource<Contender>) -> wasmtime::Result<Created> {
        Ok(self.table.get(&slot(&handle))?.created.clone())
    }

    async fn standing(&mut self, handle: Resource<Contender>) -> Reply<Standing> {
        let mine = self.table.get_mut(&slot(&handle))?;
        let known = mine.known.take();
        let (dir, name, rule) = (mine.dir.clone(), mine.name.clone(), mine.rule.clone());
        let sorted = match known {
            Some(sorted) => sorted,
            None => match self.look(&dir, &rule.order).await {
                Ok(sorted) => sorted,
                Err(e) => return Ok(Err(e)),
            },
        };
        let Some(index) = sorted.iter().position(|c| *c == name) else { return Ok(Err(ZkError::NoNode)) };
        Ok(Ok(match waits_for(&sorted, index, &rule) {
            None => Standing::Held,
            Some(ahead) => Standing::Waiting(paths::join(&dir, ahead)),
        }))
    }

    async fn wait(&mut self, handle: Resource<Contender>, timeout_ms: Option<u64>) -> Reply<()> {
        let deadline = deadline(timeout_ms);
        let mine = self.table.get_mut(&slot(&handle))?;
        let known = mine.known.take();
        let (dir, name, rule) = (mine.dir.clone(), mine.name.clone(), mine.rule.clone());
        Ok(self.wait_turn(&dir, &name, &rule, known, deadline).await)
    }

    async fn withdraw(&mut self, handle: Resource<Contender>) -> Reply<()> {
        let path = self.table.get(&slot(&handle))?.created.path.clone();
        Ok(self.withdraw_node(&path).await)
    }

    async fn drop(&mut self, handle: Resource<Contender>) -> wasmtime::Result<()> {
        // The node stays: it is the handle's (its ledger deletes it when the handle ends).
        self.table.delete(Resource::<ContenderSlot>::new_own(handle.rep()))?;
        Ok(())
    }
}

impl Host for HostState {
    async fn enter(
        &mut self,
        dir: String,
        naming: Naming,
        data: Vec<u8>,
        rule: Rule,
    ) -> Reply<Resource<Contender>> {
        match self.enter_contention(dir, naming, data, rule).await {
            Ok(mine) => {
                let pushed = self.table.push(mine)?;
                Ok(Ok(Resource::new_own(pushed.rep())))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    async fn contend(
        &mut self,
        dir: String,
        naming: Naming,
        data: Vec<u8>,
        rule: Rule,
        timeout_ms: Option<u64>,
    ) -> Reply<Created> {
        Ok(self.do_contend(dir, naming, data, rule, timeout_ms).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn rule(order: &[&str], blockers: Blockers, pick: Pick) -> Rule {
        Rule { order: names(order), blockers, pick }
    }

    const KAZOO: [&str; 2] = ["__lock__", "__rlock__"];

    #[test]
    fn orders_by_the_suffix_after_each_marker_like_curator_and_kazoo() {
        let children = names(&["_c_bbb-lock-0000000003", "_c_aaa-lock-0000000010", "_c_ccc-lock-0000000001"]);
        assert_eq!(
            ordered(children, &names(&["lock-"])),
            names(&["_c_ccc-lock-0000000001", "_c_bbb-lock-0000000003", "_c_aaa-lock-0000000010"])
        );
        let children =
            names(&["_c_b-__WRIT__0000000004", "_c_a-__READ__0000000002", "_c_c-__READ__0000000003"]);
        assert_eq!(
            ordered(children, &names(&["__READ__", "__WRIT__"])),
            names(&["_c_a-__READ__0000000002", "_c_c-__READ__0000000003", "_c_b-__WRIT__0000000004"])
        );
    }

    #[test]
    fn sequences_are_found_as_kazoos_pattern_finds_them() {
        let hex = "0123456789abcdef0123456789abcdef";
        let lock = names(&["__lock__"]);
        let both = names(&KAZOO);
        assert!(sequenced(&format!("{hex}__lock__0000000042"), &lock));
        assert!(!sequenced(&format!("{hex}__rlock__0000000042"), &lock));
        assert!(sequenced(&format!("{hex}__rlock__0000000042"), &both));
        assert!(sequenced(&format!("{hex}__lock__-2147483648"), &lock));
        assert!(!sequenced(&format!("{hex}__lock__000000042"), &lock), "nine digits");
        assert!(!sequenced("_c_x-lock-0000000001", &both), "a Curator node is not a contender");
        assert!(!sequenced("0000000001", &both));
    }

    fn waits(sorted: &[String], name: &str, rule: &Rule) -> Option<String> {
        let index = sorted.iter().position(|c| c == name).unwrap();
        waits_for(sorted, index, rule).cloned()
    }

    #[test]
    fn the_next_sequence_is_predicted_only_in_the_same_directory() {
        let next = |old: &str, dir: &str, path: &str| next_in_sequence(old, dir, path);
        assert_eq!(
            next("/a/b/_c_1-lock-0000000041", "/a/b", "/a/b/_c_2-lock-").as_deref(),
            Some("/a/b/_c_2-lock-0000000042")
        );
        assert_eq!(next("/x/lock-0000000009", "/x", "/x/lock-").as_deref(), Some("/x/lock-0000000010"));
        assert_eq!(next("/lock-0000000001", "/", "/lock-").as_deref(), Some("/lock-0000000002"));
        assert_eq!(next("/a/c/lock-0000000041", "/a/b", "/a/b/lock-"), None, "another directory");
        assert_eq!(next("/a/b/lock-00x0000041", "/a/b", "/a/b/lock-"), None, "no sequence");
        assert_eq!(next("/a/b/lock-2147483647", "/a/b", "/a/b/lock-"), None, "no next number");
        assert_eq!(next("/a/b/x", "/a/b", "/a/b/lock-"), None, "too short");
    }

    #[test]
    fn curators_rules() {
        let exclusive = rule(&["lock-"], Blockers::Any, Pick::Nearest);
        let sorted = ordered(
            names(&["_c_b-lock-0000000002", "_c_a-lock-0000000001", "_c_c-lock-0000000003"]),
            &exclusive.order,
        );
        assert_eq!(waits(&sorted, "_c_a-lock-0000000001", &exclusive), None);
        assert_eq!(
            waits(&sorted, "_c_c-lock-0000000003", &exclusive).as_deref(),
            Some("_c_b-lock-0000000002")
        );

        let order = ["__READ__", "__WRIT__"];
        let reader = rule(&order, Blockers::Containing(names(&["__WRIT__"])), Pick::First);
        let writer = rule(&order, Blockers::Any, Pick::Nearest);
        let sorted = ordered(
            names(&[
                "_c_r1-__READ__0000000001",
                "_c_w1-__WRIT__0000000002",
                "_c_r2-__READ__0000000003",
                "_c_w2-__WRIT__0000000004",
                "_c_r3-__READ__0000000005",
            ]),
            &reader.order,
        );
        assert_eq!(waits(&sorted, "_c_r1-__READ__0000000001", &reader), None);
        assert_eq!(
            waits(&sorted, "_c_r3-__READ__0000000005", &reader).as_deref(),
            Some("_c_w1-__WRIT__0000000002")
        );
        assert_eq!(
            waits(&sorted, "_c_w2-__WRIT__0000000004", &writer).as_deref(),
            Some("_c_r2-__READ__0000000003")
        );
        assert_eq!(waits(&sorted, "_c_r1-__READ__0000000001", &writer), None);
    }

    #[test]
    fn kazoos_rules() {
        let sorted = ordered(
            names(&[
                "bbb__rlock__0000000002",
                "ccc__lock__0000000003",
                "aaa__lock__0000000001",
                "not-a-contender",
                "ddd__lock__0000000004",
            ]),
            &names(&KAZOO),
        );
        // WriteLock: kept waiting by both kinds, watches the nearest.
        let writer = rule(&KAZOO, Blockers::Sequenced(names(&KAZOO)), Pick::Nearest);
        assert_eq!(
            waits(&sorted, "ccc__lock__0000000003", &writer).as_deref(),
            Some("bbb__rlock__0000000002")
        );
        assert_eq!(waits(&sorted, "aaa__lock__0000000001", &writer), None);
        // Lock: readers do not keep it waiting.
        let lock = rule(&KAZOO, Blockers::Sequenced(names(&["__lock__"])), Pick::Nearest);
        assert_eq!(waits(&sorted, "ccc__lock__0000000003", &lock).as_deref(), Some("aaa__lock__0000000001"));
        // ReadLock: kept waiting by the `__lock__` nodes ahead, watches the first.
        let reader = rule(&KAZOO, Blockers::Sequenced(names(&["__lock__"])), Pick::First);
        assert_eq!(
            waits(&sorted, "bbb__rlock__0000000002", &reader).as_deref(),
            Some("aaa__lock__0000000001")
        );
    }

    #[test]
    fn rules_the_host_would_spend_too_long_on_are_refused() {
        assert!(check_rule(&rule(&["lock-"], Blockers::Any, Pick::Nearest)).is_ok());
        let many: Vec<String> = (0..17).map(|i| format!("m{i}")).collect();
        let too_many = Rule { order: many.clone(), blockers: Blockers::Any, pick: Pick::First };
        assert!(matches!(check_rule(&too_many), Err(ZkError::InvalidArgument(_))));
        let blockers = rule(&["lock-"], Blockers::Containing(many), Pick::First);
        assert!(matches!(check_rule(&blockers), Err(ZkError::InvalidArgument(_))));
        assert!(matches!(
            check_rule(&rule(&[""], Blockers::Any, Pick::First)),
            Err(ZkError::InvalidArgument(_))
        ));
    }
}
