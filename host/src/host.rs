//! The host: one engine, one ZooKeeper session owner, the registry of recipe components, and
//! the factory of recipe handles.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::anyhow;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::Engine;

use crate::bindings::{
    self, BarrierRecipePre, ConfigRecipePre, CustomPre, ElectionRecipePre, GroupRecipePre, LockRecipePre,
    QueueRecipePre, RwlockRecipePre, SemaphoreRecipePre, TransactionRecipePre,
};
use crate::faults::Faults;
use crate::handle::{
    BarrierHandle, ConfigHandle, CustomHandle, ElectionHandle, GroupHandle, LockHandle, QueueHandle,
    RwLockHandle, Sandbox, SemaphoreHandle, TransactionHandle,
};
use crate::keeper::{Keeper, KeeperConfig, Live};
use crate::ledger::Ledger;
use crate::registry::{Registry, World};
use crate::sandbox::{self, SandboxLimits};
use crate::state::{HostState, Shared};
use crate::stats::Stats;

/// Everything needed to start a host.
#[derive(Clone, Debug)]
pub struct HostConfig {
    pub keeper: KeeperConfig,
    pub plugins: PathBuf,
    pub limits: SandboxLimits,
}

/// A wazoo host. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<HostState>,
    keeper: Keeper,
    registry: Registry,
    shared: Arc<Shared>,
    /// Linked components by file and world; a changed file is linked again.
    pres: Mutex<HashMap<(PathBuf, World), (Component, InstancePre<HostState>)>>,
}

/// Instantiates `$pre` (a typed pre for one world) in a fresh sandbox as a `$handle`.
macro_rules! instantiate {
    ($self:ident, $recipe:expr, $world:expr, $pre:ident, $handle:ident) => {{
        let (path, pre) = $self.pre($recipe, $world)?;
        let pre = $pre::new(pre)?;
        let mut sandbox = $self.sandbox().await?;
        let bindings = pre
            .instantiate_async(&mut sandbox.store)
            .await
            .map_err(|e| anyhow!("instantiating {} failed: {e:#}", path.display()))?;
        Ok($handle::new(sandbox, bindings))
    }};
}

impl Host {
    /// Connects to ZooKeeper and prepares the engine.
    pub async fn start(config: HostConfig) -> anyhow::Result<Host> {
        let engine = sandbox::engine(&config.limits)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        bindings::add_to_linker(&mut linker)?;
        let keeper = Keeper::connect(config.keeper.clone()).await?;
        let shared = Arc::new(Shared { limits: config.limits.clone(), ..Shared::default() });
        let registry = Registry::new(engine.clone(), config.plugins.clone());
        Ok(Host {
            inner: Arc::new(Inner { engine, linker, keeper, registry, shared, pres: Mutex::default() }),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
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

    /// A new configuration and counter handle.
    pub async fn config(&self, recipe: &str) -> anyhow::Result<ConfigHandle> {
        instantiate!(self, recipe, World::Config, ConfigRecipePre, ConfigHandle)
    }

    /// A new two-phase commit handle.
    pub async fn transaction(&self, recipe: &str) -> anyhow::Result<TransactionHandle> {
        instantiate!(self, recipe, World::Transaction, TransactionRecipePre, TransactionHandle)
    }

    /// A new handle on a custom recipe component.
    pub async fn custom(&self, recipe: &str) -> anyhow::Result<CustomHandle> {
        instantiate!(self, recipe, World::Custom, CustomPre, CustomHandle)
    }

    /// The linked component for `recipe`, checked against `world`, compiled and linked once.
    fn pre(&self, recipe: &str, world: World) -> anyhow::Result<(PathBuf, InstancePre<HostState>)> {
        let path = self.inner.registry.resolve(recipe);
        let component = self.checked(&path, world)?;
        let mut cache = self.inner.pres.lock().unwrap();
        let key = (path.clone(), world);
        if let Some((cached, pre)) = cache.get(&key) {
            if same(cached, &component) {
                return Ok((path, pre.clone()));
            }
        }
        let pre =
            self.inner.linker.instantiate_pre(&component).map_err(|e| {
                anyhow!("{} imports something this host does not offer: {e:#}", path.display())
            })?;
        cache.insert(key, (component, pre.clone()));
        Ok((path, pre))
    }

    fn checked(&self, path: &Path, want: World) -> anyhow::Result<Component> {
        let component = self.inner.registry.component(path)?;
        match self.inner.registry.world_of(&component) {
            Ok(world) if world == want => Ok(component),
            Ok(world) => Err(anyhow!("{} implements {}, not {}", path.display(), world.name(), want.name())),
            Err(why) => Err(anyhow!("{}: {why}; expected {}", path.display(), want.name())),
        }
    }

    async fn sandbox(&self) -> anyhow::Result<Sandbox> {
        let live = self.inner.keeper.live().await?;
        let ledger = Arc::new(Ledger::default());
        let state = HostState::new(live.clone(), ledger.clone(), self.inner.shared.clone());
        let store = sandbox::store(&self.inner.engine, state);
        Ok(Sandbox::new(store, live, ledger, self.inner.shared.clone()))
    }
}

fn same(a: &Component, b: &Component) -> bool {
    std::ptr::eq(a.image_range().start, b.image_range().start)
}
