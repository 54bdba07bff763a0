//! `wazoo:zk/znode`: reads and writes, each path checked, each ephemeral create recorded.

mod contention;
mod pipeline;

use std::time::Duration;

use zookeeper_client::{Acls, CreateOptions, MultiWriteError, MultiWriteResult};

use crate::bindings::types::{
    CreateMode, Created, MultiError, Op, OpResult, Stat as WitStat, Step, StepResult, ZkError,
};
use crate::bindings::znode::Host;
use crate::error::from_client;
use crate::paths;
use crate::retry::{backoff, retry, READ_RETRIES};
use crate::state::HostState;

type Reply<T> = wasmtime::Result<Result<T, ZkError>>;

pub(crate) fn stat(s: zookeeper_client::Stat) -> WitStat {
    s.into()
}

/// The client-side mode and options for a WIT create mode; with `private`, only the session's
/// own identity may use the node.
fn options(mode: &CreateMode, private: bool) -> Result<CreateOptions<'static>, ZkError> {
    use zookeeper_client::CreateMode as M;
    let acls = if private { Acls::creator_all() } else { Acls::anyone_all() };
    let ttl = |ms: u64| {
        if ms == 0 {
            Err(ZkError::InvalidArgument("TTL must be at least 1 ms".into()))
        } else {
            Ok(Duration::from_millis(ms))
        }
    };
    Ok(match mode {
        CreateMode::Persistent => M::Persistent.with_acls(acls),
        CreateMode::PersistentSequential => M::PersistentSequential.with_acls(acls),
        CreateMode::Ephemeral => M::Ephemeral.with_acls(acls),
        CreateMode::EphemeralSequential => M::EphemeralSequential.with_acls(acls),
        CreateMode::Container => M::Container.with_acls(acls),
        CreateMode::PersistentTtl(ms) => M::Persistent.with_acls(acls).with_ttl(ttl(*ms)?),
        CreateMode::PersistentSequentialTtl(ms) => {
            M::PersistentSequential.with_acls(acls).with_ttl(ttl(*ms)?)
        }
    })
}

fn is_ephemeral(mode: &CreateMode) -> bool {
    matches!(mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
}

fn is_sequential_ephemeral(mode: &CreateMode) -> bool {
    matches!(mode, CreateMode::EphemeralSequential)
}

fn is_sequential(mode: &CreateMode) -> bool {
    matches!(
        mode,
        CreateMode::PersistentSequential
            | CreateMode::EphemeralSequential
            | CreateMode::PersistentSequentialTtl(_)
    )
}

/// How many times a protected create whose reply was lost, and which left no node, is sent
/// again.
const PROTECTED_ATTEMPTS: u32 = READ_RETRIES;

/// How many times a protected create makes the missing ancestors of its node (a container
/// reaped between those creates and ours asks for a second time).
const PARENT_ATTEMPTS: u32 = 2;

/// A create checked, counted and recorded, ready to send.
pub(crate) struct PreparedCreate {
    pub(crate) path: String,
    pub(crate) data: Vec<u8>,
    pub(crate) mode: CreateMode,
    pub(crate) options: CreateOptions<'static>,
    /// An earlier create of this path lost its reply.
    retried: bool,
}

/// A protected create's unique prefix `_c_<uuid>-` and its node's path under `dir`, checked:
/// the uuid of the claim being made when its client named it, else a fresh one.
pub(crate) fn protect(
    dir: &str,
    name: &str,
    claim: Option<&crate::state::ClaimTag>,
) -> Result<(String, String), ZkError> {
    paths::check(dir).map_err(ZkError::InvalidPath)?;
    if name.contains('/') {
        return Err(ZkError::InvalidArgument(format!("protected node name {name:?} contains '/'")));
    }
    let uuid = claim.map_or_else(uuid::Uuid::new_v4, |c| c.uuid);
    let prefix = format!("_c_{uuid}-");
    let path = paths::join(dir, &format!("{prefix}{name}"));
    paths::check_node(&path).map_err(ZkError::InvalidPath)?;
    Ok((prefix, path))
}

impl HostState {
    async fn do_create(&mut self, path: String, data: Vec<u8>, mode: CreateMode) -> Result<Created, ZkError> {
        let create = self.prepare_create(path, data, mode)?;
        let live = self.live.clone();
        let result = live.client.create(&create.path, &create.data, &create.options).await;
        match self.finish_create(&create, result) {
            Err(ZkError::NodeExists) if is_ephemeral(&create.mode) && self.take_up.contains(&create.path) => {
                self.taken_up(&create.path).await
            }
            result => result,
        }
    }

    /// The ephemeral node at `path` the handle was told to take up, found by its create: its
    /// own from now on (deleted with the handle) if it is this session's, else `node-exists`.
    async fn taken_up(&mut self, path: &str) -> Result<Created, ZkError> {
        self.take_up.retain(|p| p != path);
        let live = self.live.clone();
        match live.client.check_stat(path).await.map_err(from_client)? {
            Some(st) if st.ephemeral_owner == live.session_id() => {
                self.ledger.created(path, st.czxid);
                tracing::info!(path, czxid = st.czxid, "an ephemeral node taken up by a new instance");
                Ok(Created { path: path.to_string(), stat: stat(st) })
            }
            _ => Err(ZkError::NodeExists),
        }
    }

    /// A contender's node the recipe leaves blank carries who contends (`znode.create`).
    pub(crate) fn contender_data(&self, data: Vec<u8>, mode: &CreateMode) -> Vec<u8> {
        match &self.identity {
            Some(identity) if data.is_empty() && is_sequential_ephemeral(mode) => {
                identity.as_bytes().to_vec()
            }
            _ => data,
        }
    }

    /// Checks a create, counts it and records an ephemeral one as uncertain before it is sent
    /// (so a call cancelled in flight is cleaned up).
    pub(crate) fn prepare_create(
        &mut self,
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
    ) -> Result<PreparedCreate, ZkError> {
        paths::check_node(&path).map_err(ZkError::InvalidPath)?;
        let data = self.contender_data(data, &mode);
        self.check_data(&data)?;
        self.admit_nodes(1)?;
        let options = options(&mode, self.shared.private_acls)?;
        let ephemeral = is_ephemeral(&mode);
        self.count_call()?;
        // An earlier create of this path whose reply was lost: a `node-exists` now may be that
        // very node, so it stays uncertain (cleaned up by owner) rather than forgotten.
        let retried = ephemeral && self.ledger.is_uncertain(&path);
        if ephemeral {
            self.ledger.uncertain(&path);
        }
        Ok(PreparedCreate { path, data, mode, options, retried })
    }

    /// What a sent create did, recorded.
    pub(crate) fn finish_create(
        &mut self,
        create: &PreparedCreate,
        result: Result<(zookeeper_client::Stat, zookeeper_client::CreateSequence), zookeeper_client::Error>,
    ) -> Result<Created, ZkError> {
        let PreparedCreate { path, mode, retried, .. } = create;
        let ephemeral = is_ephemeral(mode);
        let result = match result {
            Ok(_) if self.shared.faults.take_lost_create_reply() => Err(ZkError::ConnectionLoss),
            other => other.map_err(from_client),
        };
        match result {
            Ok((st, sequence)) => {
                self.nodes_changed(1);
                let actual = if is_sequential(mode) { format!("{path}{sequence}") } else { path.clone() };
                if ephemeral {
                    // A server before 3.5 answers a create without its stat: matched by owner.
                    match st.is_invalid() {
                        false => self.ledger.created(&actual, st.czxid),
                        true => self.ledger.uncertain(&actual),
                    }
                    self.ledger.resolved(path);
                }
                Ok(Created { path: actual, stat: stat(st) })
            }
            // Outcome unknown: stays uncertain.
            Err(ZkError::ConnectionLoss) => Err(ZkError::ConnectionLoss),
            Err(ZkError::NodeExists) if *retried => Err(ZkError::NodeExists),
            Err(e) => {
                if ephemeral {
                    self.ledger.resolved(path);
                }
                Err(e)
            }
        }
    }

    /// What a sent delete did, recorded.
    pub(crate) fn finish_delete(
        &mut self,
        path: &str,
        result: Result<(), zookeeper_client::Error>,
    ) -> Result<(), ZkError> {
        match result {
            Ok(()) => {
                self.nodes_changed(-1);
                self.ledger.deleted(path);
                Ok(())
            }
            Err(zookeeper_client::Error::NoNode) => {
                self.ledger.deleted(path);
                Err(ZkError::NoNode)
            }
            Err(e) => Err(from_client(e)),
        }
    }

    /// `znode.delete-unwaited`: the delete of a node the ledger holds is sent now, and its
    /// reply settled by a task of its own ([`crate::ledger::Ledger::settle`]); any other path,
    /// or any path while the session is not connected, is deleted as `delete` deletes it.
    async fn do_delete_unwaited(&mut self, path: String) -> Result<(), ZkError> {
        paths::check_node(&path).map_err(ZkError::InvalidPath)?;
        self.count_call()?;
        let live = self.live.clone();
        // Between connections, or once the session ended, there is no next request for the
        // delete to ride with, and its answer (the session's end) is the caller's to hear.
        let releasing = if live.connected() { self.ledger.releasing(&path) } else { None };
        let Some(czxid) = releasing else {
            let result = live.client.delete(&path, None).await;
            return self.finish_delete(&path, result);
        };
        if self.folding {
            // Taken by the next contention's create, into one `multi` with it. One release only
            // (the claim's own): any other, made while the claim is taken again (a semaphore's
            // mutex), goes at once, so nothing waits on a delete held back.
            self.folding = false;
            *self.held_back.get_mut().unwrap_or_else(|e| e.into_inner()) = Some((path, czxid));
            return Ok(());
        }
        self.send_unwaited(path, czxid);
        Ok(())
    }

    /// Records an ephemeral node a `multi` created. ZooKeeper 3.8 leaves out the stat of a create
    /// in a `multi` (ZOOKEEPER-4026), so it is read back for the node's `czxid`; if that read
    /// fails, the node is recorded as uncertain (matched by owner when the handle ends).
    async fn record_created(
        client: &zookeeper_client::Client,
        ledger: &crate::ledger::Ledger,
        path: &str,
        st: zookeeper_client::Stat,
    ) -> zookeeper_client::Stat {
        let found = match st.is_invalid() {
            false => Some(st),
            true => client.check_stat(path).await.ok().flatten(),
        };
        match found {
            Some(found) => {
                ledger.created(path, found.czxid);
                ledger.resolved(path);
                found
            }
            None => {
                ledger.uncertain(path);
                st
            }
        }
    }

    /// `znode.create-protected`: Curator's protected create, `<dir>/_c_<uuid>-<name>`, made
    /// once however many replies are lost.
    async fn do_create_protected(
        &mut self,
        dir: String,
        name: String,
        data: Vec<u8>,
        mode: CreateMode,
    ) -> Result<Created, ZkError> {
        let (prefix, path) = protect(&dir, &name, self.claim.as_ref())?;
        if let Some(found) = self.retried_protected(&dir, &prefix, &mode, &path).await? {
            return Ok(found);
        }
        self.protected_from(&dir, &prefix, path, data, mode, None).await
    }

    /// For an acquire sent again ([`crate::state::ClaimTag::retry`]): the node an earlier try
    /// made under `prefix` in `dir`, if there is one of this session's.
    pub(crate) async fn retried_protected(
        &mut self,
        dir: &str,
        prefix: &str,
        mode: &CreateMode,
        requested: &str,
    ) -> Result<Option<Created>, ZkError> {
        if !self.claim.is_some_and(|c| c.retry) {
            return Ok(None);
        }
        self.find_protected(dir, prefix, is_ephemeral(mode), requested).await
    }

    /// The protected create of `path` (`dir`/`prefix`…), whose first try already returned
    /// `first` when given (sent in a pipeline), until it is made or found.
    pub(crate) async fn protected_from(
        &mut self,
        dir: &str,
        prefix: &str,
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
        mut first: Option<Result<Created, ZkError>>,
    ) -> Result<Created, ZkError> {
        let ephemeral = is_ephemeral(&mode);
        let (mut parents_made, mut lost) = (0, 0);
        loop {
            let attempt = match first.take() {
                Some(result) => result,
                None => self.do_create(path.clone(), data.clone(), mode).await,
            };
            match attempt {
                Ok(created) => return Ok(created),
                Err(ZkError::NoNode) if parents_made < PARENT_ATTEMPTS => {
                    parents_made += 1;
                    self.make_parents(&path).await?;
                }
                Err(ZkError::ConnectionLoss) if lost < PROTECTED_ATTEMPTS => {
                    lost += 1;
                    if let Some(found) = self.find_protected(dir, prefix, ephemeral, &path).await? {
                        return Ok(found);
                    }
                    backoff(lost).await;
                }
                // A node of this unique name exists only if an earlier try of ours made it.
                Err(ZkError::NodeExists) if lost > 0 => {
                    return match self.find_protected(dir, prefix, ephemeral, &path).await? {
                        Some(found) => Ok(found),
                        None => Err(ZkError::NodeExists),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Creates every missing ancestor of `path` as a container, as Curator's
    /// `creatingParentContainersIfNeeded` does: the server removes them once they are empty.
    async fn make_parents(&mut self, path: &str) -> Result<(), ZkError> {
        let ancestors: Vec<&str> = path.match_indices('/').skip(1).map(|(i, _)| &path[..i]).collect();
        for ancestor in ancestors {
            let mut attempt = 0;
            loop {
                match self.do_create(ancestor.to_string(), Vec::new(), CreateMode::Container).await {
                    Ok(_) | Err(ZkError::NodeExists) => break,
                    // Making a container again is harmless: `node-exists` then.
                    Err(ZkError::ConnectionLoss) if attempt < READ_RETRIES => {
                        attempt += 1;
                        backoff(attempt).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// After a lost reply: the child of `dir` whose name starts with `prefix`, if the create
    /// applied (for `ephemeral` modes, only a node this session owns), recorded as the create's
    /// outcome. The server this session reads from is synced first, so a create the ensemble
    /// applied is seen.
    async fn find_protected(
        &mut self,
        dir: &str,
        prefix: &str,
        ephemeral: bool,
        requested: &str,
    ) -> Result<Option<Created>, ZkError> {
        let live = self.live.clone();
        self.count_call()?;
        match retry(READ_RETRIES, || live.client.sync(dir)).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => return Err(from_client(e)),
        }
        self.count_call()?;
        let children = match retry(READ_RETRIES, || live.client.list_children(dir)).await {
            Ok(children) => children,
            Err(zookeeper_client::Error::NoNode) => return Ok(None),
            Err(e) => return Err(from_client(e)),
        };
        let me = live.session_id();
        for child in children.into_iter().filter(|c| c.starts_with(prefix)) {
            let path = paths::join(dir, &child);
            self.count_call()?;
            let Some(st) =
                retry(READ_RETRIES, || live.client.check_stat(&path)).await.map_err(from_client)?
            else {
                continue;
            };
            if ephemeral && st.ephemeral_owner != me {
                continue;
            }
            self.nodes_changed(1);
            if ephemeral {
                self.ledger.created(&path, st.czxid);
                self.ledger.resolved(requested);
            }
            return Ok(Some(Created { path, stat: stat(st) }));
        }
        Ok(None)
    }

    async fn do_multi(&mut self, ops: Vec<Op>) -> Result<Vec<OpResult>, MultiError> {
        let at = |index: usize, error: ZkError| MultiError { index: Some(index as u32), error };
        let live = self.live.clone();
        let mut writer = live.client.new_multi_writer();
        let mut ephemeral_creates = Vec::new();
        let creates = ops.iter().filter(|op| matches!(op, Op::Create(_))).count();
        self.admit_nodes(creates).map_err(|e| MultiError { index: None, error: e })?;
        for (i, op) in ops.iter().enumerate() {
            let added = match op {
                Op::Create(c) => {
                    paths::check_node(&c.path).map_err(|why| at(i, ZkError::InvalidPath(why)))?;
                    self.check_data(&c.data).map_err(|e| at(i, e))?;
                    let options = options(&c.mode, self.shared.private_acls).map_err(|e| at(i, e))?;
                    if is_ephemeral(&c.mode) {
                        ephemeral_creates.push(c.path.clone());
                    }
                    writer.add_create(&c.path, &c.data, &options)
                }
                Op::Delete(d) => {
                    paths::check_node(&d.path).map_err(|why| at(i, ZkError::InvalidPath(why)))?;
                    writer.add_delete(&d.path, d.version)
                }
                Op::SetData(s) => {
                    paths::check_node(&s.path).map_err(|why| at(i, ZkError::InvalidPath(why)))?;
                    self.check_data(&s.data).map_err(|e| at(i, e))?;
                    writer.add_set_data(&s.path, &s.data, s.version)
                }
                Op::Check(c) => {
                    paths::check(&c.path).map_err(|why| at(i, ZkError::InvalidPath(why)))?;
                    writer.add_check_version(&c.path, c.version)
                }
            };
            added.map_err(|e| at(i, from_client(e)))?;
        }
        self.count_call().map_err(|e| MultiError { index: None, error: e })?;
        for path in &ephemeral_creates {
            self.ledger.uncertain(path);
        }
        let result = writer.commit().await;
        let request_failed = matches!(&result, Err(MultiWriteError::RequestFailed { source }) if matches!(from_client(source.clone()), ZkError::ConnectionLoss));
        // A multi that applied resolves its creates only once each is recorded as owned (below):
        // a call cancelled in between still finds them among the uncertain.
        if !request_failed && result.is_err() {
            for path in &ephemeral_creates {
                self.ledger.resolved(path);
            }
        }
        let ledger = self.ledger.clone();
        match result {
            Ok(results) => {
                let mut done = Vec::with_capacity(results.len());
                for (result, op) in results.into_iter().zip(ops.iter()) {
                    done.push(match result {
                        MultiWriteResult::Create { path, stat: st } => {
                            self.nodes_changed(1);
                            let st = match op {
                                Op::Create(c) if is_ephemeral(&c.mode) => {
                                    Self::record_created(&live.client, &ledger, &path, st).await
                                }
                                _ => st,
                            };
                            OpResult::Created(Created { path, stat: stat(st) })
                        }
                        MultiWriteResult::Delete => {
                            self.nodes_changed(-1);
                            if let Op::Delete(d) = op {
                                self.ledger.deleted(&d.path);
                            }
                            OpResult::Deleted
                        }
                        MultiWriteResult::SetData { stat: st } => OpResult::DataSet(stat(st)),
                        _ => OpResult::Checked,
                    });
                }
                Ok(done)
            }
            Err(MultiWriteError::OperationFailed { index, source }) => Err(at(index, from_client(source))),
            Err(MultiWriteError::RequestFailed { source }) => {
                Err(MultiError { index: None, error: from_client(source) })
            }
        }
    }
}

impl Host for HostState {
    async fn create(&mut self, path: String, data: Vec<u8>, mode: CreateMode) -> Reply<Created> {
        Ok(self.do_create(path, data, mode).await)
    }

    async fn delete(&mut self, path: String, version: Option<i32>) -> Reply<()> {
        if let Err(why) = paths::check_node(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let result = live.client.delete(&path, version).await;
        Ok(self.finish_delete(&path, result))
    }

    async fn exists(&mut self, path: String) -> Reply<Option<WitStat>> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let result = retry(READ_RETRIES, || live.client.check_stat(&path)).await;
        Ok(result.map(|s| s.map(stat)).map_err(from_client))
    }

    async fn get_data(&mut self, path: String) -> Reply<(Vec<u8>, WitStat)> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let result = retry(READ_RETRIES, || live.client.get_data(&path)).await;
        Ok(result.map(|(data, s)| (data, stat(s))).map_err(from_client))
    }

    async fn get_children(&mut self, path: String) -> Reply<(Vec<String>, WitStat)> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let result = retry(READ_RETRIES, || live.client.get_children(&path)).await;
        Ok(match result {
            Ok((children, s)) => self.check_children(children.len()).map(|()| (children, stat(s))),
            Err(e) => Err(from_client(e)),
        })
    }

    async fn set_data(&mut self, path: String, data: Vec<u8>, version: Option<i32>) -> Reply<WitStat> {
        if let Err(why) = paths::check_node(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        if let Err(e) = self.check_data(&data) {
            return Ok(Err(e));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let result = live.client.set_data(&path, &data, version).await;
        Ok(result.map(stat).map_err(from_client))
    }

    async fn multi(&mut self, ops: Vec<Op>) -> wasmtime::Result<Result<Vec<OpResult>, MultiError>> {
        Ok(self.do_multi(ops).await)
    }

    async fn sync(&mut self, path: String) -> Reply<()> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let result = retry(READ_RETRIES, || live.client.sync(&path)).await;
        Ok(result.map_err(from_client))
    }

    async fn check_path(&mut self, path: String) -> Reply<()> {
        Ok(paths::check(&path).map_err(ZkError::InvalidPath))
    }

    async fn create_protected(
        &mut self,
        dir: String,
        name: String,
        data: Vec<u8>,
        mode: CreateMode,
    ) -> Reply<Created> {
        Ok(self.do_create_protected(dir, name, data, mode).await)
    }

    async fn pipeline(&mut self, steps: Vec<Step>) -> Reply<Vec<Result<StepResult, ZkError>>> {
        Ok(self.do_pipeline(steps).await)
    }

    async fn delete_unwaited(&mut self, path: String) -> Reply<()> {
        Ok(self.do_delete_unwaited(path).await)
    }

    async fn list_ephemerals(&mut self, path: String) -> Reply<Vec<String>> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let result = retry(READ_RETRIES, || live.client.list_ephemerals(&path)).await;
        Ok(result.map_err(from_client))
    }
}
