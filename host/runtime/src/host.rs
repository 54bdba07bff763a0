//! The host: one engine, one ZooKeeper session owner, the registry of recipe components, and
//! the factory of recipe handles.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail};
use wasmtime::Engine;

use crate::bindings::{
    BarrierRecipePre, CacheRecipePre, ClaimRecipePre, ConfigBindings, CustomPre, ElectionRecipePre,
    GroupRecipePre, LockRecipePre, QueueRecipePre, RwlockRecipePre, SemaphoreRecipePre, TransactionRecipePre,
};
use crate::claim::{Contender, Holder, Want, Warm};
use crate::faults::Faults;
use crate::handle::{
    BarrierHandle, CacheHandle, ClaimHandle, ConfigHandle, CustomHandle, DynamicHandle, ElectionHandle,
    GroupHandle, LockHandle, QueueHandle, RwLockHandle, Sandbox, SemaphoreHandle, TransactionHandle,
};
use crate::keeper::{Keeper, KeeperConfig, Live};
use crate::ledger::Ledger;
use crate::registry::{Lookup, RecipeInfo, Registry, Version, World};
use crate::sandbox::{self, SandboxLimits};
use crate::state::{HostState, Shared};
use crate::stats::Stats;
use crate::ZkError;

/// Everything needed to start a host.
#[derive(Clone, Debug)]
pub struct HostConfig {
    pub keeper: KeeperConfig,
    pub plugins: PathBuf,
    pub limits: SandboxLimits,
    /// Where compiled components are cached (private to the host); `None` compiles every
    /// component on every start.
    pub cache: Option<PathBuf>,
    /// The recipes (names in the plugins directory) this host may load; `None`: any. Glob
    /// patterns (`alice-*`, `team-?`, `{lock,queue}`), compiled into one matcher when the host
    /// starts.
    pub allowed: Option<Vec<String>>,
    /// The components the program carries, written out ([`crate::embedded::materialize`]):
    /// served for recipes that have no file in `plugins`.
    pub embedded: Option<PathBuf>,
}

/// A wazoo host. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    /// Shared with the hosts [`Host::adopt`] makes.
    allowed: Option<Arc<Allowed>>,
    engine: Engine,
    keeper: Keeper,
    /// Shared with the hosts [`Host::adopt`] makes.
    registry: Arc<Registry>,
    shared: Arc<Shared>,
    /// One component load at a time (in the hosts that share the registry too).
    loading: Arc<tokio::sync::Mutex<()>>,
    /// Handles of the lock family let go of cleanly, kept warm for the next contender.
    warm: Arc<Warm>,
    /// Whether the program's own components are served too.
    embedded: bool,
}

/// Instantiates `$pre` (a typed pre for one world) in a fresh sandbox as a `$handle`.
macro_rules! instantiate {
    ($self:ident, $recipe:expr, $world:expr, $pre:ident, $handle:ident) => {{
        let version = $self.version($recipe, $world).await?;
        let pre = $pre::new(version.pre.clone())?;
        let mut sandbox = $self.sandbox(&version.name).await?;
        let bindings = pre
            .instantiate_async(&mut sandbox.store)
            .await
            .map_err(|e| crate::error::instantiation(&version.path, crate::error::from_wasmtime(e)))?;
        sandbox.runs(version);
        Ok($handle::new(sandbox, bindings))
    }};
}

impl Host {
    /// Connects to ZooKeeper and prepares the engine.
    pub async fn start(config: HostConfig) -> anyhow::Result<Host> {
        let engine = sandbox::engine(&config.limits)?;
        let registry = Registry::new(engine.clone(), config.plugins.clone(), config.cache.clone())?
            .with_embedded(config.embedded.clone());
        let keeper = Keeper::connect(config.keeper.clone()).await?;
        let shared = Arc::new(Shared {
            limits: config.limits.clone(),
            private_acls: config.keeper.digest.is_some(),
            ..Shared::default()
        });
        Ok(Host {
            inner: Arc::new(Inner {
                allowed: config.allowed.as_deref().map(|patterns| Arc::new(Allowed::new(patterns))),
                engine,
                keeper,
                registry: Arc::new(registry),
                shared,
                loading: Default::default(),
                warm: Arc::new(Warm::new(config.limits.max_instances)),
                embedded: config.embedded.is_some(),
            }),
        })
    }

    /// A host on the session `id` (with its `password`, [`Live::session_parts`]) that another
    /// host or process opened: this host's engine, registry and allowed recipes, its sandbox
    /// limits and node ACLs, and ZooKeeper settings ([`Keeper::resume`]), with handles and a warm
    /// pool of its own. Fails with a clear message when the session has expired; once it ends,
    /// the new host's handles fail rather than start on a new session.
    pub async fn adopt(&self, id: i64, password: Vec<u8>) -> anyhow::Result<Host> {
        let keeper = Keeper::resume(self.inner.keeper.config().clone(), id, password).await?;
        let shared = Arc::new(Shared {
            limits: self.inner.shared.limits.clone(),
            private_acls: self.inner.shared.private_acls,
            usage: crate::state::Usage::sharing_instances(&self.inner.shared.usage),
            ..Shared::default()
        });
        Ok(Host {
            inner: Arc::new(Inner {
                allowed: self.inner.allowed.clone(),
                engine: self.inner.engine.clone(),
                keeper,
                registry: self.inner.registry.clone(),
                warm: Arc::new(Warm::new(shared.limits.max_instances)),
                shared,
                loading: self.inner.loading.clone(),
                embedded: self.inner.embedded,
            }),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Where and how this host connects to ZooKeeper.
    pub fn keeper_config(&self) -> &KeeperConfig {
        self.inner.keeper.config()
    }

    /// The sandbox limits of every handle.
    pub fn limits(&self) -> &SandboxLimits {
        &self.inner.shared.limits
    }

    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub fn faults(&self) -> &Faults {
        &self.inner.shared.faults
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.shared.stats
    }

    /// Spends `n` of the host's operations per second (its sandbox limit, as every guest's call
    /// does) on requests it sends for itself: the walk of a listing of claims. Refused as
    /// `limit-exceeded` when the second's budget has fewer left, counted as a limit hit.
    pub fn spend_ops(&self, n: usize) -> Result<(), ZkError> {
        let shared = &self.inner.shared;
        let per_sec = shared.limits.ops_per_sec;
        if n == 0 || shared.usage.take_ops(per_sec, n) {
            return Ok(());
        }
        Stats::bump(&shared.stats.limit_hits);
        Err(ZkError::LimitExceeded(format!(
            "{n} ZooKeeper requests at once, beyond what is left of {per_sec} operations per second: pass a narrower prefix, or try again"
        )))
    }

    /// Waits until every unwaited delete (`znode.delete-unwaited`: a claim's release) this host
    /// sent is settled, for at most `limit`: what a process does before it ends, so that its
    /// releases are applied rather than left to its session's expiry. Whether all were, none
    /// given up on since the host started.
    pub async fn settle_releases(&self, limit: std::time::Duration) -> bool {
        let usage = &self.inner.shared.usage;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let settled = usage.settled.notified();
            tokio::pin!(settled);
            // Registered before the count is read: a settle in between is not missed.
            settled.as_mut().enable();
            let given_up = || usage.given_up.load(std::sync::atomic::Ordering::Acquire) > 0;
            if usage.unsettled.load(std::sync::atomic::Ordering::Acquire) == 0 {
                return !given_up();
            }
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                return usage.unsettled.load(std::sync::atomic::Ordering::Acquire) == 0 && !given_up();
            }
        }
    }

    /// The current ZooKeeper session's id, if it is usable now.
    pub fn session_now(&self) -> Option<i64> {
        self.inner.keeper.session_now()
    }

    /// The current ZooKeeper session (rebuilt first if it expired).
    pub async fn live(&self) -> anyhow::Result<Arc<Live>> {
        self.inner.keeper.live().await
    }

    /// A fresh handle of the component `recipe` to contend for `want` ([`crate::claim`]).
    /// A contender of the lock family takes a warm handle when one is kept for the recipe's
    /// current version on the current session ([`Warm`]).
    pub async fn contender(&self, want: Want, recipe: &str) -> anyhow::Result<Contender> {
        if !matches!(want, Want::Lock | Want::ReadWrite(_) | Want::Lease { .. }) {
            let holder = self.holder(&want, recipe).await?;
            return Ok(Contender::new(want, holder, None));
        }
        let warm = self.inner.warm.clone();
        let version = self.version(recipe, want.world()).await?;
        let live = self.current_live().await?;
        let holder = match warm.take(recipe, &want, &version, &live) {
            Some(holder) => holder,
            None => match self.holder(&want, recipe).await {
                Ok(holder) => holder,
                // Warm handles take instances of the host's pool: give them back and try again.
                Err(_) if warm.clear() > 0 => self.holder(&want, recipe).await?,
                Err(e) => return Err(e),
            },
        };
        let mut contender = Contender::new(want, holder, Some((warm, recipe.to_string())));
        // A warm handle forgets whom its last claim was for.
        contender.identify("");
        Ok(contender)
    }

    /// A fresh handle for `want`.
    async fn holder(&self, want: &Want, recipe: &str) -> anyhow::Result<Holder> {
        Ok(match want {
            Want::Lock => Holder::Lock(self.lock(recipe).await?),
            Want::ReadWrite(_) => Holder::RwLock(self.rwlock(recipe).await?),
            Want::Lease { .. } => Holder::Semaphore(self.semaphore(recipe).await?),
            Want::Leadership { .. } => Holder::Election(self.election(recipe).await?),
            Want::Membership { .. } => Holder::Group(self.group(recipe).await?),
            Want::Claim { .. } => Holder::Claim(self.claim(recipe).await?),
        })
    }

    /// Ends every handle kept warm (they hold their component version alive).
    pub fn cool(&self) -> usize {
        self.inner.warm.clear()
    }

    /// How many handles are kept warm for the next contender (see [`Warm`]).
    pub fn warm_handles(&self) -> usize {
        self.inner.warm.len()
    }

    /// How many recipe instances its handles keep alive now: held, waiting, warm, or in a
    /// call. Claims held as data keep none.
    pub fn instances(&self) -> usize {
        self.inner.shared.usage.instances.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The current session, rebuilt first if it has ended.
    pub(crate) async fn current_live(&self) -> anyhow::Result<Arc<Live>> {
        self.inner.keeper.live().await
    }

    /// A new lock handle running the component `recipe` (a name in the plugins directory or a
    /// path to a `.wasm` file).
    pub async fn lock(&self, recipe: &str) -> anyhow::Result<LockHandle> {
        instantiate!(self, recipe, World::Lock, LockRecipePre, LockHandle)
    }

    /// A new read/write lock handle.
    pub async fn rwlock(&self, recipe: &str) -> anyhow::Result<RwLockHandle> {
        instantiate!(self, recipe, World::RwLock, RwlockRecipePre, RwLockHandle)
    }

    /// A new leader election handle.
    pub async fn election(&self, recipe: &str) -> anyhow::Result<ElectionHandle> {
        instantiate!(self, recipe, World::Election, ElectionRecipePre, ElectionHandle)
    }

    /// A new handle of a claim recipe (`wazoo:recipes/claim-recipe`), for a family served from
    /// its description.
    pub async fn claim(&self, recipe: &str) -> anyhow::Result<ClaimHandle> {
        instantiate!(self, recipe, World::Claim, ClaimRecipePre, ClaimHandle)
    }

    /// A new barrier handle.
    pub async fn barrier(&self, recipe: &str) -> anyhow::Result<BarrierHandle> {
        instantiate!(self, recipe, World::Barrier, BarrierRecipePre, BarrierHandle)
    }

    /// A new counting semaphore handle.
    pub async fn semaphore(&self, recipe: &str) -> anyhow::Result<SemaphoreHandle> {
        instantiate!(self, recipe, World::Semaphore, SemaphoreRecipePre, SemaphoreHandle)
    }

    /// A new queue handle.
    pub async fn queue(&self, recipe: &str) -> anyhow::Result<QueueHandle> {
        instantiate!(self, recipe, World::Queue, QueueRecipePre, QueueHandle)
    }

    /// A new group membership handle.
    pub async fn group(&self, recipe: &str) -> anyhow::Result<GroupHandle> {
        instantiate!(self, recipe, World::Group, GroupRecipePre, GroupHandle)
    }

    /// A new cache handle.
    pub async fn cache(&self, recipe: &str) -> anyhow::Result<CacheHandle> {
        instantiate!(self, recipe, World::Cache, CacheRecipePre, CacheHandle)
    }

    /// A new configuration and counter handle. A component built against `wazoo:recipes@0.1.0`
    /// serves too; its counter has only the kazoo format.
    pub async fn config(&self, recipe: &str) -> anyhow::Result<ConfigHandle> {
        let version = self.version(recipe, World::Config).await?;
        let mut sandbox = self.sandbox(&version.name).await?;
        let bindings = instantiate_config(&version.pre, &mut sandbox.store)
            .await
            .map_err(|e| crate::error::instantiation(&version.path, e))?;
        sandbox.runs(version);
        Ok(ConfigHandle::new(sandbox, bindings))
    }

    /// A new two-phase commit handle.
    pub async fn transaction(&self, recipe: &str) -> anyhow::Result<TransactionHandle> {
        instantiate!(self, recipe, World::Transaction, TransactionRecipePre, TransactionHandle)
    }

    /// A new handle on a custom recipe component.
    pub async fn custom(&self, recipe: &str) -> anyhow::Result<CustomHandle> {
        instantiate!(self, recipe, World::Custom, CustomPre, CustomHandle)
    }

    /// A new handle on `recipe`, whatever world it implements, whose exports are called by name
    /// with JSON arguments.
    pub async fn dynamic(&self, recipe: &str) -> anyhow::Result<DynamicHandle> {
        let version = self.serving(recipe).await?;
        let mut sandbox = self.sandbox(&version.name).await?;
        let instance = version
            .pre
            .instantiate_async(&mut sandbox.store)
            .await
            .map_err(|e| crate::error::instantiation(&version.path, crate::error::from_wasmtime(e)))?;
        sandbox.runs(version);
        Ok(DynamicHandle::new(sandbox, instance))
    }

    /// The version of `recipe` that new handles get, checked against `world`. A new or changed
    /// file is loaded (compiled, or taken from the cache), checked, and instantiated once as a
    /// trial before it replaces what served; if it fails, what served before goes on serving.
    pub async fn version(&self, recipe: &str, world: World) -> anyhow::Result<Arc<Version>> {
        let version = self.serving(recipe).await?;
        if version.world != world {
            bail!("{} implements {}, not {}", version.path.display(), version.world.name(), world.name());
        }
        Ok(version)
    }

    /// The version of `recipe` that new handles get, whatever its world.
    pub async fn serving(&self, recipe: &str) -> anyhow::Result<Arc<Version>> {
        // A recipe switching wire protocol takes no new handle until the old version drained, and
        // a recipe the registry's follower follows none on a session it has not looked on yet.
        let session = self.current_live().await?.zk().session_id();
        self.inner.registry.open(recipe, session).await;
        self.loaded(recipe).await
    }

    /// The version of `recipe` that new handles get (loaded now if it is new or changed), even
    /// while new handles of it wait for a switch of protocol.
    pub async fn loaded(&self, recipe: &str) -> anyhow::Result<Arc<Version>> {
        if let Some(allowed) = &self.inner.allowed {
            if recipe.contains('/') || recipe.ends_with(".wasm") {
                bail!(
                    "recipe {:?}: a daemon's clients name recipes of its plugins directory, not files",
                    Allowed::cut(recipe)
                );
            }
            // A file name is at most 255 bytes: a longer recipe name names nothing.
            if recipe.len() > 255 {
                bail!("recipe {:?}: a recipe's name is at most 255 bytes", Allowed::cut(recipe));
            }
            if !allowed.matches(recipe) {
                bail!(
                    "recipe {:?} is not one this tenant may load (allowed: {})",
                    Allowed::cut(recipe),
                    allowed.named()
                );
            }
        }
        let path = self.inner.registry.resolve(recipe);
        Ok(match self.inner.registry.lookup(&path)? {
            Lookup::Serving(v) | Lookup::Refused { serving: Some(v), .. } => v,
            Lookup::Refused { serving: None, reason } => bail!("{} was refused: {reason}", path.display()),
            Lookup::Changed { .. } => self.load(&path).await?,
        })
    }

    /// Checks every component in the plugins directory now (new and changed files are loaded
    /// and swapped in, or refused), rather than when a handle next asks for them.
    pub async fn reload(&self) -> anyhow::Result<Vec<RecipeInfo>> {
        let dir = self.inner.registry.dir().to_path_buf();
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries {
                    let path = entry?.path();
                    if path.extension().and_then(|e| e.to_str()) == Some("wasm") {
                        if let Ok(Lookup::Changed { .. }) = self.inner.registry.lookup(&path) {
                            let _ = self.load(&path).await;
                        }
                    }
                }
            }
            // No plugins directory: the recipes the program carries are all there is.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.inner.embedded => {}
            Err(e) => bail!("cannot read {}: {e}", dir.display()),
        }
        // The rest (embedded recipes no handle asked for yet): only what changed compiles.
        let host = self.clone();
        tokio::task::spawn_blocking(move || host.inner.registry.check()).await??;
        self.recipes()
    }

    /// The recipe components this host knows, as last checked ([`Registry::listed`]: never
    /// waits for a compile), less the embedded ones a tenant may not load: a tenant's list
    /// shows its own plugins directory and what it may use.
    pub fn recipes(&self) -> anyhow::Result<Vec<RecipeInfo>> {
        let mut listed = self.inner.registry.listed()?;
        if let Some(allowed) = &self.inner.allowed {
            listed.retain(|r| !r.embedded || allowed.matches(&r.name));
        }
        Ok(listed)
    }

    /// Who may use the nodes the host's own callers make: only its identity when it has one
    /// (a tenant's), else anyone.
    pub fn access(&self) -> crate::zk::Access {
        match self.inner.shared.private_acls {
            true => crate::zk::Access::Private,
            false => crate::zk::Access::Open,
        }
    }

    /// Whether this host may load the recipe `name` (a tenant's `recipes` patterns).
    pub fn allows(&self, name: &str) -> bool {
        self.inner.allowed.as_ref().is_none_or(|allowed| allowed.matches(name))
    }

    /// Loads `path` (compiled or from the cache), checks it and instantiates it once as a trial,
    /// as a changed plugins file is, and installs it: a version ready to serve. Unlike a
    /// plugins file, a refusal is an error here, for the caller to say.
    pub async fn load_file(&self, path: &Path) -> anyhow::Result<Arc<Version>> {
        let _one = self.inner.loading.lock().await;
        if let Lookup::Serving(v) = self.inner.registry.lookup(path)? {
            return Ok(v);
        }
        let host = self.clone();
        let file = path.to_path_buf();
        let loaded = tokio::task::spawn_blocking(move || host.inner.registry.load(&file)).await?;
        let checked = match loaded {
            Ok(v) => self.trial(&v).await.map(|()| v),
            Err(e) => Err(e),
        };
        // A refusal is the caller's to say (a publish, a follower's report).
        checked.map(|v| self.inner.registry.install(v))
    }

    /// Loads a new or changed file, one load at a time.
    async fn load(&self, path: &Path) -> anyhow::Result<Arc<Version>> {
        let _one = self.inner.loading.lock().await;
        // Another task may have loaded it while this one waited.
        let serving = match self.inner.registry.lookup(path)? {
            Lookup::Serving(v) | Lookup::Refused { serving: Some(v), .. } => return Ok(v),
            Lookup::Refused { serving: None, reason } => bail!("{} was refused: {reason}", path.display()),
            Lookup::Changed { serving } => serving,
        };
        let host = self.clone();
        let file = path.to_path_buf();
        let loaded = tokio::task::spawn_blocking(move || host.inner.registry.load(&file)).await?;
        let checked = match loaded {
            Ok(v) => match &serving {
                Some(old) if old.world != v.world => Err(anyhow!(
                    "it implements {}, but this recipe is a {}",
                    v.world.name(),
                    old.world.name()
                )),
                _ => self.trial(&v).await.map(|()| v),
            },
            Err(e) => Err(e),
        };
        match checked {
            Ok(v) => Ok(self.inner.registry.install(v)),
            Err(e) => {
                self.inner.registry.refuse(path, format!("{e:#}"));
                serving.ok_or_else(|| anyhow!("{}: {e:#}", path.display()))
            }
        }
    }

    /// Instantiates `version` once in a sandbox of its own: a component that traps while it
    /// starts never serves.
    async fn trial(&self, version: &Version) -> anyhow::Result<()> {
        let mut sandbox = self.sandbox(&version.name).await?;
        let outcome = version.pre.instantiate_async(&mut sandbox.store).await;
        sandbox.clean().await;
        outcome.map(drop).map_err(|e| anyhow!("it fails when instantiated: {e:#}"))
    }

    /// A fresh sandbox for an instance of `recipe` (whose output the log tags with its name).
    async fn sandbox(&self, recipe: &str) -> anyhow::Result<Sandbox> {
        let live = self.inner.keeper.live().await?;
        let ledger = Arc::new(Ledger::default());
        let output = crate::output::GuestOutput::new(recipe);
        let state = HostState::new(live.clone(), ledger.clone(), self.inner.shared.clone(), output);
        let store = sandbox::store(&self.inner.engine, state);
        Ok(Sandbox::new(store, live, ledger, self.inner.shared.clone()))
    }
}

/// The recipes a host may load ([`HostConfig::allowed`]): glob patterns (`*`, `?`, `[abc]`,
/// `{a,b}`) matched against whole recipe names, compiled once when the host starts, so that a
/// check costs about the same for ten patterns or a hundred thousand. Plain names, `PREFIX*`
/// and `*SUFFIX` (what long lists are mostly made of) are looked up in hash sets; any other glob
/// is matched by [`globset::GlobSet`]s of at most [`Allowed::PER_SET`] globs each (one set of
/// them all can outgrow the regex engine's size limit, and costs far more to build). A pattern
/// that is not a valid glob matches nothing (the tenants file's patterns are checked when it is
/// read).
struct Allowed {
    /// Patterns with no glob syntax: the names themselves.
    names: std::collections::HashSet<Box<str>>,
    /// `PREFIX*` patterns, by their prefix (`*` alone is the empty prefix).
    prefixes: std::collections::HashSet<Box<str>>,
    /// `*SUFFIX` patterns, by their suffix.
    suffixes: std::collections::HashSet<Box<str>>,
    /// The longest prefix and suffix: only cuts of a name that short are looked up.
    longest: (usize, usize),
    /// Every other pattern, compiled.
    sets: Vec<globset::GlobSet>,
    /// How a refusal names the list ([`Allowed::named`]), made once.
    named: String,
}

impl Allowed {
    /// How many patterns a refusal names; the rest are counted.
    const NAMED: usize = 5;
    /// How much of each named pattern a refusal shows, in bytes (cut at a character).
    const PATTERN_SHOWN: usize = 64;
    /// The most globs compiled into one set.
    const PER_SET: usize = 1000;

    fn new(patterns: &[String]) -> Allowed {
        /// No glob syntax at all (what globset reads specially, `,` included).
        fn plain(text: &str) -> bool {
            !text.contains(['*', '?', '[', ']', '{', '}', '\\', ','])
        }
        let mut allowed = Allowed {
            names: Default::default(),
            prefixes: Default::default(),
            suffixes: Default::default(),
            longest: (0, 0),
            sets: Vec::new(),
            named: Self::name(patterns),
        };
        let mut globs = Vec::new();
        for pattern in patterns {
            if plain(pattern) {
                allowed.names.insert(pattern.as_str().into());
            } else if let Some(prefix) = pattern.strip_suffix('*').filter(|p| plain(p)) {
                allowed.longest.0 = allowed.longest.0.max(prefix.len());
                allowed.prefixes.insert(prefix.into());
            } else if let Some(suffix) = pattern.strip_prefix('*').filter(|s| plain(s)) {
                allowed.longest.1 = allowed.longest.1.max(suffix.len());
                allowed.suffixes.insert(suffix.into());
            } else if let Ok(glob) = globset::Glob::new(pattern) {
                globs.push(glob);
            }
        }
        for chunk in globs.chunks(Self::PER_SET) {
            let mut set = globset::GlobSetBuilder::new();
            for glob in chunk {
                set.add(glob.clone());
            }
            match set.build() {
                Ok(set) => allowed.sets.push(set),
                // Too large even so: each glob on its own (a glob alone always builds).
                Err(_) => {
                    for glob in chunk {
                        let mut one = globset::GlobSetBuilder::new();
                        one.add(glob.clone());
                        allowed.sets.extend(one.build().ok());
                    }
                }
            }
        }
        allowed
    }

    /// Whether `name` matches one of the patterns: a look-up per cut of the name no longer
    /// than the longest prefix or suffix, so a long name costs no more than a short one.
    fn matches(&self, name: &str) -> bool {
        let cuts = || name.char_indices().map(|(i, _)| i).chain([name.len()]);
        let (prefix, suffix) = self.longest;
        self.names.contains(name)
            || (!self.prefixes.is_empty()
                && cuts().take_while(|i| *i <= prefix).any(|i| self.prefixes.contains(&name[..i])))
            || (!self.suffixes.is_empty()
                && cuts().filter(|i| name.len() - i <= suffix).any(|i| self.suffixes.contains(&name[i..])))
            || self.sets.iter().any(|set| set.is_match(name))
    }

    /// How a refusal names the patterns, bounded whatever the list.
    fn named(&self) -> &str {
        &self.named
    }

    /// The first [`Allowed::NAMED`] patterns, each cut to [`Allowed::PATTERN_SHOWN`] bytes,
    /// then how many more.
    fn name(patterns: &[String]) -> String {
        let mut shown: Vec<String> = patterns.iter().take(Self::NAMED).map(|p| Self::cut(p)).collect();
        if patterns.len() > Self::NAMED {
            shown.push(format!("and {} more", patterns.len() - Self::NAMED));
        }
        match shown.is_empty() {
            true => "none".to_string(),
            false => shown.join(", "),
        }
    }

    /// A pattern or a name as a refusal shows it: at most [`Allowed::PATTERN_SHOWN`] bytes (cut
    /// at a character, then `…`), since a client's recipe name can be of any length.
    fn cut(text: &str) -> String {
        match text.len() > Self::PATTERN_SHOWN {
            true => format!("{}…", &text[..text.floor_char_boundary(Self::PATTERN_SHOWN)]),
            false => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Allowed;

    fn matches_pattern(pattern: &str, name: &str) -> bool {
        Allowed::new(&[pattern.to_string()]).matches(name)
    }

    #[test]
    fn recipe_patterns() {
        assert!(matches_pattern("lock", "lock"));
        assert!(!matches_pattern("lock", "lock2"));
        assert!(matches_pattern("alice-*", "alice-lock"));
        assert!(!matches_pattern("alice-*", "mallory-lock"));
        assert!(matches_pattern("*", "anything"));
        assert!(matches_pattern("*", ""));
        assert!(matches_pattern("a*b*c", "axxbyyc"));
        assert!(!matches_pattern("a*b*c", "axxbyy"));
        assert!(matches_pattern("alice-*", "alice-"));
        assert!(!matches_pattern("*-lock", "lock"));
        assert!(matches_pattern("*-lock", "-lock"));
        assert!(matches_pattern("team-?", "team-a"));
        assert!(!matches_pattern("team-?", "team-ab"));
        assert!(matches_pattern("{lock,queue}", "queue"));
        assert!(!matches_pattern("{lock,queue}", "config"));
        assert!(matches_pattern("[ab]-lock", "b-lock"));
        assert!(matches_pattern("é-*", "é-lock") && matches_pattern("*-é", "lock-é"));
        // Case matters, and a pattern that is not a glob matches nothing.
        assert!(!matches_pattern("lock", "LOCK"));
        assert!(!matches_pattern("alice-[", "alice-["));
        assert!(!matches_pattern("alice-[", "alice-lock"));
        // Nor does it spoil the valid patterns beside it.
        let mixed = Allowed::new(&["alice-[".to_string(), "lock".to_string()]);
        assert!(mixed.matches("lock") && !mixed.matches("alice-lock"));
        assert!(!Allowed::new(&[]).matches("lock"));
    }

    /// Whatever path a pattern takes (a name, a prefix, a suffix, or a compiled glob), it
    /// matches what globset's own matcher of it matches.
    #[test]
    fn every_pattern_matches_as_its_glob_does() {
        let patterns = "lock lock* *lock * ** l*k *lo* lo?k lock\\* \\*lock [l]ock {lock,queue} {lock}* \
                        *{,x} a,b lock-[!a] lock-[^a] [a-c]* *] é* *é ?é [é]";
        let names = [
            "", "lock", "lock*", "*lock", "lock-a", "lock-b", "block", "lok", "look", "queue", "a,b", "b",
            "x", "lockx", "é", "éé", "xé", "]", "a]",
        ];
        for pattern in patterns.split_whitespace() {
            let glob = globset::Glob::new(pattern).map(|g| g.compile_matcher());
            let allowed = Allowed::new(&[pattern.to_string()]);
            for name in names {
                let expected = glob.as_ref().is_ok_and(|g| g.is_match(name));
                assert_eq!(allowed.matches(name), expected, "{pattern:?} against {name:?}");
            }
        }
    }

    /// A long list is compiled once, in sets small enough to build, and a refusal names a few
    /// of its patterns, each cut short, and counts the rest.
    #[test]
    fn a_long_list_is_matched_at_once_and_named_briefly() {
        let mut patterns: Vec<String> = (0..100_000)
            .map(|i| match i % 4 {
                0 => format!("team-{i}-lock"),
                1 => format!("team-{i}-*"),
                2 => format!("*-team-{i}"),
                _ => format!("team-{i}-[ab]?"),
            })
            .collect();
        patterns.push(format!("{}*", "é".repeat(100)));
        let started = std::time::Instant::now();
        let allowed = Allowed::new(&patterns);
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
        assert_eq!(allowed.sets.len(), 25, "25,000 globs, {} to a set", Allowed::PER_SET);
        let yes = ["team-0-lock", "team-1-", "team-1-x", "x-team-2", "-team-2", "team-99999-bz", "team-3-ax"];
        let no = ["team-4-x", "team-0-lockx", "team-2-x", "team-99999-cz", "team-99999-a", "lock", ""];
        for name in yes {
            assert!(allowed.matches(name), "{name}");
        }
        for name in no {
            assert!(!allowed.matches(name), "{name}");
        }
        assert!(allowed.matches(&"é".repeat(101)));
        assert_eq!(
            allowed.named(),
            "team-0-lock, team-1-*, *-team-2, team-3-[ab]?, team-4-lock, and 99996 more"
        );
        let long = Allowed::new(&[format!("{}*", "é".repeat(100))]);
        let shown = long.named();
        assert!(shown.len() <= Allowed::PATTERN_SHOWN + "…".len() && shown.ends_with('…'), "{shown}");
        assert_eq!(Allowed::new(&[]).named(), "none");
        assert_eq!(Allowed::cut(&"x".repeat(20_000)).len(), Allowed::PATTERN_SHOWN + "…".len());
    }
}

/// Instantiates a config component with the bindings its exports have: of this host's
/// `wazoo:recipes`, or of 0.1.0 (`config_recipe_0_1_0`, from its WIT), whose counter has no formats.
async fn instantiate_config(
    pre: &wasmtime::component::InstancePre<HostState>,
    store: &mut wasmtime::Store<HostState>,
) -> anyhow::Result<ConfigBindings> {
    use crate::bindings::{config_recipe::ConfigRecipePre, config_recipe_0_1_0};
    use crate::error::from_wasmtime;
    if let Ok(typed) = ConfigRecipePre::new(pre.clone()) {
        return Ok(ConfigBindings::Current(typed.instantiate_async(store).await.map_err(from_wasmtime)?));
    }
    let typed = config_recipe_0_1_0::ConfigRecipePre::new(pre.clone())?;
    // The version its export names say (its counter is found by semver, so it may not be 0.1.0).
    let component = pre.component();
    let built_against = component
        .component_type()
        .exports(component.engine())
        .find_map(|(name, _)| Some(name.strip_prefix("wazoo:recipes/counter@")?.to_string()))
        .ok_or_else(|| anyhow!("no exported instance named `wazoo:recipes/counter@0.1.0`"))?;
    let bindings = typed.instantiate_async(store).await.map_err(from_wasmtime)?;
    Ok(ConfigBindings::KazooOnly { bindings, built_against })
}
