//! The commands' backend on this process's own host ([`crate::backend::Backend`]): a ZooKeeper
//! session of its own and the recipe components loaded in-process, each call on a fresh recipe
//! handle closed after it. `holders` and `fence` need no recipe (a ZooKeeper session only), and
//! `recipes list|functions` no ZooKeeper (the plugins directory only).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OnceCell};
use wazoo_runtime::error::describe;
use wazoo_runtime::fence::{Fence, Holder, Written};
use wazoo_runtime::holders::{Contenders, Kind};
use wazoo_runtime::keeper::Keeper;
use wazoo_runtime::zk::{Access, Zk};
use wazoo_runtime::{
    Ballot, BarrierHandle, CacheChange, Claim, ConfigHandle, CounterFormat, DynamicHandle, ElectionHandle,
    Entry, GroupHandle, Host, HostConfig, LeaderInfo, Live, Membership, Outcome, QueueHandle, RecipeError,
    Registry, TxMode, Want, Watching, World, ZkError,
};

use crate::backend::{
    Backend, Contender, Deleted, Ending, Failure, Granted, Holding, Instance, Participant, RecipeRow,
    Recipes, Revocation, SessionInfo,
};
use crate::exit;
use wazoo_daemon::serve::{published, Publishing};
use wazoo_proto as pb;
use wazoo_runtime::rollout::{Follower, Store, ROOT};
use wazoo_runtime::signing::TrustedKeys;

/// How long one `observe` call blocks before `leader --watch` goes on with another (each call's
/// guest CPU is limited).
const OBSERVE_CALL: Duration = Duration::from_secs(60);

/// This process's host, started when first needed.
pub(crate) struct Local {
    config: HostConfig,
    host: OnceCell<Host>,
    /// A ZooKeeper session without a host, for what needs no recipe (`holders`, `fence`).
    keeper: OnceCell<Keeper>,
    /// What lives until [`Backend::end`]: an ephemeral queue item's handle.
    kept: Mutex<Vec<Claim>>,
    /// `--registry`: the host serves the recipe registry's versions.
    follow: bool,
    /// `--trusted-keys`: the keys registry components must be signed by.
    trusted: Option<Arc<TrustedKeys>>,
}

impl Local {
    /// How long a command's end waits for its releases to be applied.
    const SETTLE: Duration = Duration::from_secs(10);

    /// What the command leaves when it ends: its releases (sent without waiting for their
    /// answer, [`Host::settle_releases`]) applied before the process exits, so the next holder
    /// does not wait for this session's expiry.
    pub(crate) async fn finish(&self) {
        if let Some(host) = self.host.get() {
            if !host.settle_releases(Self::SETTLE).await {
                tracing::warn!(
                    "a release was not answered within {:?}: its node goes with the session",
                    Self::SETTLE
                );
            }
        }
    }

    pub(crate) fn new(config: HostConfig) -> Local {
        Local {
            config,
            host: OnceCell::new(),
            keeper: OnceCell::new(),
            kept: Mutex::new(Vec::new()),
            follow: false,
            trusted: None,
        }
    }

    /// With `follow`, the host serves the recipe registry's versions (checked against `trusted`).
    pub(crate) fn following(self, follow: bool, trusted: Option<Arc<TrustedKeys>>) -> Local {
        Local { follow, trusted, ..self }
    }

    /// The host, started (connected to ZooKeeper) on the first call; with `--registry`, serving
    /// the registry's versions from the start.
    pub(crate) async fn host(&self) -> anyhow::Result<&Host> {
        self.host
            .get_or_try_init(|| async {
                let host = Host::start(self.config.clone()).await?;
                if self.follow {
                    self.follower(&host).start().await?;
                }
                Ok(host)
            })
            .await
    }

    /// A follower of the registry for `host`, reporting as this command (`HOSTNAME-cli-PID`).
    fn follower(&self, host: &Host) -> Arc<Follower> {
        let me = format!("{}-cli-{}", wazoo_runtime::rollout::host_name(), std::process::id());
        Follower::new(host.clone(), ROOT, &me, self.registry_dir(), self.trusted.clone())
    }

    /// Where fetched and published components are kept: beside the compiled ones.
    fn registry_dir(&self) -> std::path::PathBuf {
        match &self.config.cache {
            Some(cache) => cache.join("registry"),
            None => std::env::temp_dir().join(format!("wazoo-registry-{}", std::process::id())),
        }
    }

    /// The registry, on the host's session.
    async fn store(&self) -> Result<(&Host, Store), Failure> {
        let host = self.host().await?;
        let live = host.live().await?;
        Ok((host, Store::new(live.zk(), ROOT, host.access())))
    }

    /// A ZooKeeper session of this process's own, without a host (connected on the first call):
    /// also `wazoo zk`'s.
    pub(crate) async fn live(&self) -> anyhow::Result<Arc<Live>> {
        let keeper = self.keeper.get_or_try_init(|| Keeper::connect(self.config.keeper.clone())).await?;
        keeper.live().await
    }

    /// Fenced checks and writes on `live`, with the open ACL and the host's data limit.
    fn fence(&self, live: &Live) -> Fence {
        Fence { zk: live.zk(), access: Access::Open, max_bytes: self.config.limits.max_data_bytes }
    }

    /// The plugins directory's components, compiled (or read from the cache) as the host would.
    fn registry(&self) -> anyhow::Result<Registry> {
        let config = &self.config;
        let engine = wazoo_runtime::sandbox::engine(&config.limits)?;
        Ok(Registry::new(engine, config.plugins.clone(), config.cache.clone())?
            .with_embedded(config.embedded.clone()))
    }
}

impl Backend for Local {
    type Contender = LocalContender;
    type Participant = LocalParticipant;
    type Instance = DynamicHandle;

    async fn contender(
        &self,
        want: &Want,
        recipe: &str,
        _label: &str,
        id: &str,
    ) -> anyhow::Result<LocalContender> {
        let mut inner = self.host().await?.contender(want.clone(), recipe).await?;
        inner.identify(id);
        Ok(LocalContender { inner, granted: None })
    }

    async fn queue_put(
        &self,
        path: &str,
        data: Vec<u8>,
        priority: Option<u8>,
        ephemeral: bool,
    ) -> Result<String, Failure> {
        let mut h = self.queue().await?;
        match h.put(path, &data, priority, ephemeral).await {
            Ok(node) if ephemeral => {
                self.kept.lock().await.push(Claim::queue_item(h, node.clone()));
                Ok(node)
            }
            done => {
                h.close().await;
                Ok(done?)
            }
        }
    }

    async fn queue_take(&self, path: &str, timeout: Option<Duration>) -> Result<Vec<u8>, Failure> {
        let mut h = self.queue().await?;
        let taken = h.take(path, timeout).await.map(|item| item.data);
        h.close().await;
        Ok(taken?)
    }

    async fn queue_len(&self, path: &str) -> Result<u32, Failure> {
        let mut h = self.queue().await?;
        let len = h.len(path).await;
        h.close().await;
        Ok(len?)
    }

    async fn config_get(&self, path: &str) -> Result<Option<Entry>, Failure> {
        let mut h = self.config().await?;
        let got = h.get(path).await;
        h.close().await;
        Ok(got?)
    }

    async fn config_delete(&self, path: &str, version: Option<i32>) -> Result<Deleted, Failure> {
        let live = self.live().await?;
        Ok(config_delete(&live.zk(), path, version).await?)
    }

    async fn config_set(&self, path: &str, data: Vec<u8>, version: Option<i32>) -> Result<i32, Failure> {
        let mut h = self.config().await?;
        let set = h.set(path, &data, version).await;
        h.close().await;
        Ok(set?)
    }

    async fn config_watch(&self, path: &str, each: &mut dyn FnMut(Option<&Entry>)) -> Result<(), Failure> {
        let mut h = self.config().await?;
        let mut now = h.get(path).await?;
        loop {
            each(now.as_ref());
            now = h.watch(path, now.as_ref().map(|e| e.version), None).await?;
        }
    }

    async fn counter_get(&self, path: &str, format: CounterFormat) -> Result<i64, Failure> {
        let mut h = self.config().await?;
        let value = h.counter_in(path, format).await;
        h.close().await;
        Ok(value?)
    }

    async fn counter_add(&self, path: &str, delta: i64, format: CounterFormat) -> Result<i64, Failure> {
        let mut h = self.config().await?;
        let value = h.add_in(path, delta, format).await;
        h.close().await;
        Ok(value?)
    }

    async fn group_members(&self, path: &str) -> Result<Membership, Failure> {
        let mut h = self.group().await?;
        let members = h.members(path).await;
        h.close().await;
        Ok(members?)
    }

    async fn group_watch(&self, path: &str, each: &mut dyn FnMut(&Membership)) -> Result<(), Failure> {
        let mut h = self.group().await?;
        let mut now = h.members(path).await?;
        loop {
            each(&now);
            now = h.watch(path, now.version, None).await?;
        }
    }

    async fn watch(
        &self,
        path: &str,
        recursive: bool,
        recipe: &str,
        each: &mut dyn FnMut(&CacheChange),
    ) -> Result<(), Failure> {
        let mut watching = Watching::new(self.host().await?.clone(), recipe, path, recursive);
        watching.start().await?;
        let mut out_of_reach = false;
        loop {
            match watching.next(None).await {
                Ok(change) => {
                    if std::mem::take(&mut out_of_reach) {
                        eprintln!("wazoo: ZooKeeper answers again");
                    }
                    each(&change);
                }
                // The cache reads everything again once ZooKeeper is back.
                Err(RecipeError::Zk(ZkError::ConnectionLoss)) => {
                    if !std::mem::replace(&mut out_of_reach, true) {
                        eprintln!("wazoo: ZooKeeper is out of reach; watching on");
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn barrier_set(&self, path: &str, recipe: &str) -> Result<bool, Failure> {
        let mut h = self.barrier(recipe).await?;
        let set = h.set(path).await;
        h.close().await;
        Ok(set?)
    }

    async fn barrier_remove(&self, path: &str, recipe: &str) -> Result<bool, Failure> {
        let mut h = self.barrier(recipe).await?;
        let removed = h.remove(path).await;
        h.close().await;
        Ok(removed?)
    }

    async fn barrier_wait(&self, path: &str, timeout: Option<Duration>, recipe: &str) -> Result<(), Failure> {
        let mut h = self.barrier(recipe).await?;
        let down = h.wait(path, timeout).await;
        h.close().await;
        Ok(down?)
    }

    async fn participant(&self, _path: &str, recipe: &str) -> anyhow::Result<LocalParticipant> {
        Ok(LocalParticipant { handle: self.barrier(recipe).await? })
    }

    async fn leader(&self, path: &str, recipe: &str) -> Result<Option<LeaderInfo>, Failure> {
        let mut h = self.host().await?.election(recipe).await?;
        let leader = h.leader(path).await;
        h.close().await;
        Ok(leader?)
    }

    async fn leader_watch(
        &self,
        path: &str,
        recipe: &str,
        each: &mut dyn FnMut(Option<&LeaderInfo>),
    ) -> Result<(), Failure> {
        let mut h = self.host().await?.election(recipe).await?;
        let mut now = h.leader(path).await?;
        loop {
            each(now.as_ref());
            let known = now.as_ref().map(ElectionHandle::seen);
            now = loop {
                match h.observe(path, known.as_deref(), Some(OBSERVE_CALL)).await {
                    Err(RecipeError::Zk(ZkError::Timeout)) => continue,
                    other => break other?,
                }
            };
        }
    }

    async fn holders(
        &self,
        path: &str,
        kind: Option<Kind>,
        leases: Option<u32>,
    ) -> Result<Contenders, Failure> {
        let live = self.live().await?;
        Ok(wazoo_runtime::holders::read(&live.zk(), path, kind, leases).await?)
    }

    async fn claims(&self, prefix: &str) -> Result<Vec<(String, Contenders)>, Failure> {
        let live = self.live().await?;
        // This process's own session: nobody else's operations to keep within.
        let unlimited = |_| Ok(());
        Ok(wazoo_runtime::holders::under(&live.zk(), prefix, wazoo_runtime::holders::MAX_VISITED, &unlimited)
            .await?)
    }

    async fn sessions(&self) -> Result<Option<Vec<SessionInfo>>, Failure> {
        Ok(None)
    }

    async fn revoke(&self, node: &str, grace: Option<Duration>) -> Result<Revocation, Failure> {
        let mut h = self.host().await?.lock(World::Lock.default_recipe()).await?;
        let released = h.revoke(node, grace).await;
        h.close().await;
        Ok(Revocation::of(released?, grace.is_some()))
    }

    async fn fence_check(&self, node: &str, token: i64) -> Result<Holder, Failure> {
        let live = self.live().await?;
        Ok(self.fence(&live).check(node, token).await?)
    }

    async fn fence_write(
        &self,
        node: &str,
        token: i64,
        path: &str,
        value: &[u8],
    ) -> Result<Written, Failure> {
        let live = self.live().await?;
        Ok(self.fence(&live).write(node, token, path, value).await?)
    }

    async fn tx_coordinate(
        &self,
        tx: &str,
        sites: &[String],
        payload: &[u8],
        mode: TxMode,
        timeout: Duration,
    ) -> Result<Outcome, Failure> {
        let mut h = self.host().await?.transaction(World::Transaction.default_recipe()).await?;
        let outcome = h.coordinate(tx, sites, payload, mode, Some(timeout)).await;
        h.close().await;
        Ok(outcome?)
    }

    async fn tx_vote(
        &self,
        tx: &str,
        site: &str,
        ballot: Ballot,
        timeout: Duration,
    ) -> Result<Outcome, Failure> {
        let mut h = self.host().await?.transaction(World::Transaction.default_recipe()).await?;
        let outcome = h.vote(tx, site, ballot, Some(timeout)).await;
        h.close().await;
        Ok(outcome?)
    }

    async fn recipes(&self) -> Result<Recipes, Failure> {
        let rows = self
            .registry()?
            .list()?
            .into_iter()
            .map(|r| {
                let (world, hash) = match (&r.serving, &r.refused) {
                    (_, Some(refusal)) => (format!("refused: {}", refusal.reason), "-".to_string()),
                    (Some(v), None) => (v.world.name().to_string(), v.short_hash().to_string()),
                    (None, None) => ("unknown".to_string(), "-".to_string()),
                };
                RecipeRow {
                    name: r.name,
                    world,
                    hash,
                    bytes: r.bytes,
                    path: r.path.display().to_string(),
                    note: None,
                    embedded: r.embedded,
                }
            })
            .collect();
        let plugins = self.config.plugins.display();
        Ok(Recipes { rows, none: format!("no components in {plugins} (build them with `make recipes`)") })
    }

    async fn publish(&self, request: pb::PublishRequest) -> Result<pb::PublishReply, Failure> {
        let (host, store) = self.store().await?;
        let publishing = Publishing { trusted: self.trusted.clone(), ..Publishing::default() };
        published::publish_on(host, &store, &self.registry_dir(), &publishing, request).await.map_err(refused)
    }

    async fn rollout(&self, name: &str) -> Result<pb::RolloutReply, Failure> {
        let (host, store) = self.store().await?;
        published::rollout_on(host, &store, name).await.map_err(refused)
    }

    async fn rollback(&self, request: pb::RollbackRequest) -> Result<pb::PublishReply, Failure> {
        let (host, store) = self.store().await?;
        published::rollback_on(host, &store, &Publishing::default(), request).await.map_err(refused)
    }

    async fn functions(&self, recipe: &str) -> Result<Vec<String>, Failure> {
        let registry = self.registry()?;
        let path = registry.resolve(recipe);
        Ok(registry.load(&path)?.functions())
    }

    async fn instance(&self, recipe: &str, _label: &str) -> anyhow::Result<DynamicHandle> {
        self.host().await?.dynamic(recipe).await
    }

    async fn run(&self, component: &str, args: &[String]) -> Result<Result<String, String>, Failure> {
        let mut h = self.host().await?.custom(component).await?;
        let outcome = h.run(args).await;
        h.close().await;
        Ok(outcome?)
    }

    async fn end(&self) {
        for claim in self.kept.lock().await.drain(..) {
            claim.close().await;
        }
    }
}

impl Local {
    async fn queue(&self) -> anyhow::Result<QueueHandle> {
        self.host().await?.queue(World::Queue.default_recipe()).await
    }

    async fn config(&self) -> anyhow::Result<ConfigHandle> {
        self.host().await?.config(World::Config.default_recipe()).await
    }

    async fn group(&self) -> anyhow::Result<GroupHandle> {
        self.host().await?.group(World::Group.default_recipe()).await
    }

    async fn barrier(&self, recipe: &str) -> anyhow::Result<BarrierHandle> {
        self.host().await?.barrier(recipe).await
    }
}

pub(crate) struct LocalContender {
    inner: wazoo_runtime::Contender,
    granted: Option<wazoo_runtime::Granted>,
}

impl Contender for LocalContender {
    type Held = Claim;

    async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Granted, Failure> {
        let granted = self.inner.acquire(path, timeout).await?;
        let seen = Granted { node: granted.node().to_string(), token: granted.token() };
        self.granted = Some(granted);
        Ok(seen)
    }

    async fn acknowledge(&mut self, note: &str) -> Result<(), String> {
        match self.inner.election() {
            Some(election) => election.acknowledge(note).await.map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    async fn hold(self) -> anyhow::Result<Claim> {
        match self.granted {
            Some(granted) => Ok(self.inner.claim(granted)),
            None => {
                self.inner.close().await;
                anyhow::bail!("nothing was acquired")
            }
        }
    }

    async fn close(self) {
        self.inner.close().await
    }

    fn session_timeout(&self) -> Duration {
        self.inner.live().session_timeout()
    }
}

impl Holding for Claim {
    fn lost(&self) -> impl std::future::Future<Output = Ending> + Send + 'static {
        let lost = Claim::lost(self);
        async move { Ending::from(lost.await) }
    }

    async fn release(self) -> Result<(), String> {
        Claim::release(self).await.map_err(|e| e.to_string())
    }

    async fn close(self) {
        Claim::close(self).await
    }
}

/// A double barrier's participant: a barrier handle of its own, whose node closing it deletes.
pub(crate) struct LocalParticipant {
    handle: BarrierHandle,
}

impl Participant for LocalParticipant {
    async fn enter(&mut self, path: &str, count: u32, timeout: Option<Duration>) -> Result<(), Failure> {
        Ok(self.handle.enter(path, count, timeout).await?)
    }

    async fn leave(&mut self, timeout: Option<Duration>) -> Result<(), Failure> {
        Ok(self.handle.leave_double(timeout).await?)
    }

    async fn close(self) {
        self.handle.close().await
    }
}

impl Instance for DynamicHandle {
    async fn call(&mut self, function: &str, args: &serde_json::Value) -> Result<serde_json::Value, Failure> {
        Ok(DynamicHandle::call(self, function, args).await?)
    }

    /// An instance of this process's own never stays behind anywhere.
    async fn renew(&mut self, _: &[&str]) -> bool {
        false
    }

    async fn close(self) {
        DynamicHandle::close(self).await
    }
}

/// `config delete` on `client` (this process's own session): an ephemeral node there is
/// someone's claim, refused as `zk rm` refuses it (which alone can force it).
pub(crate) async fn config_delete(zk: &Zk, path: &str, version: Option<i32>) -> anyhow::Result<Deleted> {
    refuse_claim_node(zk, path).await?;
    delete_node(zk, path, version).await
}

/// The variables that name the claim node a command runs under (`zk rm` may delete it).
const OWN_NODES: [&str; 3] = ["WAZOO_LOCK_NODE", "WAZOO_LEASE_NODE", "WAZOO_LEADER_NODE"];

/// `zk rm` of an ephemeral node (a claim's, a registration's, a member's: someone's session
/// keeps it) other than the one this process runs under: a usage error (exit status 2) saying
/// whose it is and what to do instead.
pub(crate) async fn refuse_claim_node(zk: &Zk, path: &str) -> anyhow::Result<()> {
    let stat = zk.exists(path).await.map_err(|e| match e {
        ZkError::ConnectionLoss | ZkError::SessionExpired => {
            exit::unavailable(format!("reading {path}: {}", describe(&e)))
        }
        e => anyhow::anyhow!("reading {path}: {}", describe(&e)),
    })?;
    let Some(stat) = stat else { return Ok(()) };
    if stat.ephemeral_owner == 0 {
        return Ok(());
    }
    let own = OWN_NODES.iter().any(|var| std::env::var(var).is_ok_and(|node| node == path));
    if own {
        return Ok(());
    }
    Err(exit::usage(format!(
        "{path} is an ephemeral node of session 0x{:x}: someone's claim, registration or membership \
         (`wazoo revoke {path}` asks a holder to let go; --force deletes it anyway)",
        stat.ephemeral_owner
    )))
}

/// Deletes `path` (only at `version`, when given), or says why not.
pub(crate) async fn delete_node(zk: &Zk, path: &str, version: Option<i32>) -> anyhow::Result<Deleted> {
    if path == "/" {
        return Err(exit::usage("the root node cannot be deleted"));
    }
    match zk.delete(path, version).await {
        Ok(()) => Ok(Deleted::Yes),
        Err(ZkError::NoNode) => Ok(Deleted::Absent),
        Err(ZkError::BadVersion) => Ok(Deleted::OtherVersion),
        Err(ZkError::NotEmpty) => Ok(Deleted::HasChildren),
        Err(ZkError::ConnectionLoss | ZkError::SessionExpired) => {
            Err(exit::unavailable(format!("deleting {path}: connection lost before the outcome was known")))
        }
        Err(e) => Err(anyhow::anyhow!("deleting {path}: {}", describe(&e))),
    }
}

/// A registry call's refusal, with the exit status the same refusal through a daemon has.
fn refused(status: tonic::Status) -> Failure {
    let code = match wazoo_proto::ErrorKind::of(&status) {
        Some(kind) => exit::kind_code(kind),
        None => exit::FAILED,
    };
    let text = status.message();
    let text = text.strip_prefix("recipe: ").unwrap_or(text).to_string();
    Failure::Error { code, text, after_context: true }
}
