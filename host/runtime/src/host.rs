//! The host: one engine, one ZooKeeper session owner, the registry of recipe components, and
//! the factory of recipe handles.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail};
use wasmtime::Engine;

use crate::bindings::{
    BarrierRecipePre, CacheRecipePre, ConfigBindings, CustomPre, ElectionRecipePre, GroupRecipePre,
    LockRecipePre, QueueRecipePre, RegistrationRecipePre, RwlockRecipePre, SemaphoreRecipePre,
    TransactionRecipePre,
};
use crate::faults::Faults;
use crate::handle::{
    BarrierHandle, CacheHandle, ConfigHandle, CustomHandle, DynamicHandle, ElectionHandle, GroupHandle,
    LockHandle, QueueHandle, RegistrationHandle, RwLockHandle, Sandbox, SemaphoreHandle, TransactionHandle,
};
use crate::keeper::{Keeper, KeeperConfig, Live};
use crate::ledger::Ledger;
use crate::registry::{Lookup, RecipeInfo, Registry, Version, World};
use crate::sandbox::{self, SandboxLimits};
use crate::state::{HostState, Shared};
use crate::stats::Stats;

/// Everything needed to start a host.
#[derive(Clone, Debug)]
pub struct HostConfig {
    pub keeper: KeeperConfig,
    pub plugins: PathBuf,
    pub limits: SandboxLimits,
    /// Where compiled components are cached (private to the host); `None` compiles every
    /// component on every start.
    pub cache: Option<PathBuf>,
    /// The recipes (names in the plugins directory) this host may load; `None`: any. `*` in a
    /// name matches any run of characters (`alice-*`).
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
    allowed: Option<Vec<String>>,
    engine: Engine,
    keeper: Keeper,
    registry: Registry,
    shared: Arc<Shared>,
    /// One component load at a time.
    loading: tokio::sync::Mutex<()>,
    /// Handles of the lock family let go of cleanly, kept warm for the next contender.
    warm: Arc<crate::claim::Warm>,
    /// Whether the program's own components are served too.
    embedded: bool,
}

/// Instantiates `$pre` (a typed pre for one world) in a fresh sandbox as a `$handle`.
macro_rules! instantiate {
    ($self:ident, $recipe:expr, $world:expr, $pre:ident, $handle:ident) => {{
        let version = $self.version($recipe, $world).await?;
        let pre = $pre::new(version.pre.clone())?;
        let mut sandbox = $self.sandbox().await?;
        let bindings = pre
            .instantiate_async(&mut sandbox.store)
            .await
            .map_err(|e| anyhow!("instantiating {} failed: {e:#}", version.path.display()))?;
        sandbox.version = Some(version);
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
                allowed: config.allowed.clone(),
                engine,
                keeper,
                registry,
                shared,
                loading: tokio::sync::Mutex::new(()),
                warm: Arc::new(crate::claim::Warm::new(config.limits.max_instances)),
                embedded: config.embedded.is_some(),
            }),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
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

    /// The current ZooKeeper session (rebuilt first if it expired).
    pub async fn live(&self) -> anyhow::Result<Arc<Live>> {
        self.inner.keeper.live().await
    }

    /// A fresh handle of the component `recipe` to contend for `want` ([`crate::claim`]).
    pub async fn contender(
        &self,
        want: crate::claim::Want,
        recipe: &str,
    ) -> anyhow::Result<crate::claim::Contender> {
        crate::claim::Contender::new(self, want, recipe).await
    }

    /// How many handles are kept warm for the next contender (see [`crate::claim::Warm`]).
    pub fn warm_handles(&self) -> usize {
        self.inner.warm.len()
    }

    /// The pool of warm handles [`Host::contender`] takes from and a released claim gives back to.
    pub(crate) fn warm(&self) -> &Arc<crate::claim::Warm> {
        &self.inner.warm
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

    /// A new registration handle.
    pub async fn registration(&self, recipe: &str) -> anyhow::Result<RegistrationHandle> {
        instantiate!(self, recipe, World::Registration, RegistrationRecipePre, RegistrationHandle)
    }

    /// A new cache handle.
    pub async fn cache(&self, recipe: &str) -> anyhow::Result<CacheHandle> {
        instantiate!(self, recipe, World::Cache, CacheRecipePre, CacheHandle)
    }

    /// A new configuration and counter handle. A component built against `wazoo:recipes@0.1.0`
    /// serves too; its counter has only the kazoo format.
    pub async fn config(&self, recipe: &str) -> anyhow::Result<ConfigHandle> {
        let version = self.version(recipe, World::Config).await?;
        let mut sandbox = self.sandbox().await?;
        let bindings = ConfigBindings::instantiate(&version.pre, &mut sandbox.store)
            .await
            .map_err(|e| anyhow!("instantiating {} failed: {e:#}", version.path.display()))?;
        sandbox.version = Some(version);
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
        let mut sandbox = self.sandbox().await?;
        let instance = version
            .pre
            .instantiate_async(&mut sandbox.store)
            .await
            .map_err(|e| anyhow!("instantiating {} failed: {e:#}", version.path.display()))?;
        sandbox.version = Some(version);
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
        if let Some(allowed) = &self.inner.allowed {
            if recipe.contains('/') || recipe.ends_with(".wasm") {
                bail!(
                    "recipe {recipe:?}: a daemon's clients name recipes of its plugins directory, not files"
                );
            }
            if !allowed.iter().any(|pattern| matches_pattern(pattern, recipe)) {
                bail!("recipe {recipe:?} is not one this tenant may load (allowed: {})", allowed.join(", "));
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
        self.recipes()
    }

    /// The recipe components this host knows ([`Registry::list`]), less the embedded ones a
    /// tenant may not load: a tenant's list shows its own plugins directory and what it may use.
    pub fn recipes(&self) -> anyhow::Result<Vec<RecipeInfo>> {
        let mut listed = self.inner.registry.list()?;
        if let Some(allowed) = &self.inner.allowed {
            listed.retain(|r| !r.embedded || allowed.iter().any(|pattern| matches_pattern(pattern, &r.name)));
        }
        Ok(listed)
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
        let mut sandbox = self.sandbox().await?;
        let outcome = version.pre.instantiate_async(&mut sandbox.store).await;
        sandbox.clean().await;
        outcome.map(drop).map_err(|e| anyhow!("it fails when instantiated: {e:#}"))
    }

    async fn sandbox(&self) -> anyhow::Result<Sandbox> {
        let live = self.inner.keeper.live().await?;
        let ledger = Arc::new(Ledger::default());
        let state = HostState::new(live.clone(), ledger.clone(), self.inner.shared.clone());
        let store = sandbox::store(&self.inner.engine, state);
        Ok(Sandbox::new(store, live, ledger, self.inner.shared.clone()))
    }
}

/// `pattern`, a glob (`*`, `?`, `[abc]`, `{a,b}`), against a whole recipe name. A pattern that
/// is not a valid glob matches nothing (the tenants file's patterns are checked when it is read).
/// Each pattern is compiled once.
fn matches_pattern(pattern: &str, name: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static COMPILED: OnceLock<Mutex<HashMap<String, Option<globset::GlobMatcher>>>> = OnceLock::new();
    let mut compiled = COMPILED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let matcher = compiled
        .entry(pattern.to_string())
        .or_insert_with(|| globset::Glob::new(pattern).ok().map(|g| g.compile_matcher()));
    matcher.as_ref().is_some_and(|m| m.is_match(name))
}

#[cfg(test)]
mod tests {
    use super::matches_pattern;

    #[test]
    fn recipe_patterns() {
        assert!(matches_pattern("lock", "lock"));
        assert!(!matches_pattern("lock", "lock2"));
        assert!(matches_pattern("alice-*", "alice-lock"));
        assert!(!matches_pattern("alice-*", "mallory-lock"));
        assert!(matches_pattern("*", "anything"));
        assert!(matches_pattern("a*b*c", "axxbyyc"));
        assert!(!matches_pattern("a*b*c", "axxbyy"));
        assert!(matches_pattern("alice-*", "alice-"));
        assert!(!matches_pattern("*-lock", "lock"));
        assert!(matches_pattern("team-?", "team-a"));
        assert!(!matches_pattern("team-?", "team-ab"));
        assert!(matches_pattern("{lock,queue}", "queue"));
        assert!(!matches_pattern("{lock,queue}", "config"));
        assert!(matches_pattern("[ab]-lock", "b-lock"));
        // Case matters, and a pattern that is not a glob matches nothing.
        assert!(!matches_pattern("lock", "LOCK"));
        assert!(!matches_pattern("alice-[", "alice-["));
        assert!(!matches_pattern("alice-[", "alice-lock"));
    }
}
