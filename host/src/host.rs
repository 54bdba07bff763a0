//! The host: one engine, one ZooKeeper session owner, and recipe handles.
//!
//! A handle is one component instance in its own store, made from a cached `InstancePre`. It is
//! reused only after calls that returned cleanly: a trap, a sandbox limit or a cancelled call
//! retires it, and a retired or dropped handle's ephemeral nodes are deleted from its ledger.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};
use zookeeper_client::{EventType, SessionState};

use crate::bindings::{self, custom::Custom, lock_recipe::LockRecipe, CustomPre, Held, LockRecipePre};
use crate::error::RecipeError;
use crate::faults::Faults;
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
    lock_pres: Mutex<HashMap<PathBuf, (Component, LockRecipePre<HostState>)>>,
    custom_pres: Mutex<HashMap<PathBuf, (Component, CustomPre<HostState>)>>,
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
            inner: Arc::new(Inner {
                engine,
                linker,
                keeper,
                registry,
                shared,
                lock_pres: Mutex::default(),
                custom_pres: Mutex::default(),
            }),
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
        let path = self.inner.registry.resolve(recipe);
        let pre = self.lock_pre(&path)?;
        let mut sandbox = self.sandbox().await?;
        let bindings =
            pre.instantiate_async(&mut sandbox.store).await.map_err(|e| instantiate_error(&path, e))?;
        Ok(LockHandle { sandbox, bindings, node: None })
    }

    /// A new handle on a custom recipe component.
    pub async fn custom(&self, recipe: &str) -> anyhow::Result<CustomHandle> {
        let path = self.inner.registry.resolve(recipe);
        let pre = self.custom_pre(&path)?;
        let mut sandbox = self.sandbox().await?;
        let bindings =
            pre.instantiate_async(&mut sandbox.store).await.map_err(|e| instantiate_error(&path, e))?;
        Ok(CustomHandle { sandbox, bindings })
    }

    /// Compiles (once) and pre-links `path` for the lock world.
    pub fn lock_pre(&self, path: &Path) -> anyhow::Result<LockRecipePre<HostState>> {
        let component = self.checked(path, World::Lock)?;
        let mut cache = self.inner.lock_pres.lock().unwrap();
        if let Some((cached, pre)) = cache.get(path) {
            if same(cached, &component) {
                return Ok(pre.clone());
            }
        }
        let pre = LockRecipePre::new(self.link(path, &component)?)?;
        cache.insert(path.to_path_buf(), (component, pre.clone()));
        Ok(pre)
    }

    fn custom_pre(&self, path: &Path) -> anyhow::Result<CustomPre<HostState>> {
        let component = self.checked(path, World::Custom)?;
        let mut cache = self.inner.custom_pres.lock().unwrap();
        if let Some((cached, pre)) = cache.get(path) {
            if same(cached, &component) {
                return Ok(pre.clone());
            }
        }
        let pre = CustomPre::new(self.link(path, &component)?)?;
        cache.insert(path.to_path_buf(), (component, pre.clone()));
        Ok(pre)
    }

    fn link(
        &self,
        path: &Path,
        component: &Component,
    ) -> anyhow::Result<wasmtime::component::InstancePre<HostState>> {
        self.inner
            .linker
            .instantiate_pre(component)
            .map_err(|e| anyhow!("{} imports something this host does not offer: {e:#}", path.display()))
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
        Ok(Sandbox { store, live, ledger, retired: false, cleaned: false, shared: self.inner.shared.clone() })
    }
}

fn same(a: &Component, b: &Component) -> bool {
    std::ptr::eq(a.image_range().start, b.image_range().start)
}

fn instantiate_error(path: &Path, e: wasmtime::Error) -> anyhow::Error {
    anyhow!("instantiating {} failed: {e:#}", path.display())
}

/// One instance's store plus what the host tracks for it; shared by every kind of handle.
struct Sandbox {
    store: Store<HostState>,
    live: Arc<Live>,
    ledger: Arc<Ledger>,
    /// Set while a call is under way and left set if it does not return cleanly.
    retired: bool,
    cleaned: bool,
    shared: Arc<Shared>,
}

impl Sandbox {
    /// Marks a call as begun. If the caller drops the call's future, the mark stays: the
    /// instance is then in an unknown state and is never called again.
    fn enter(&mut self) -> Result<(), RecipeError> {
        if self.retired {
            return Err(RecipeError::Retired);
        }
        self.retired = true;
        self.store.data_mut().clock.begin();
        Ok(())
    }

    /// Ends a call: a clean return keeps the instance, a trap retires it and deletes its nodes.
    async fn leave<T>(&mut self, result: wasmtime::Result<T>) -> Result<T, RecipeError> {
        match result {
            Ok(value) => {
                self.retired = false;
                Ok(value)
            }
            Err(trap) => {
                Stats::bump(&self.shared.stats.traps);
                let why = match trap.downcast_ref::<wasmtime::Trap>() {
                    Some(wasmtime::Trap::Interrupt) => format!(
                        "the recipe ran longer than its CPU limit of {:?} per call",
                        self.shared.limits.cpu_per_call
                    ),
                    _ => format!("{trap:#}"),
                };
                tracing::warn!(error = %why, "recipe trapped; retiring its handle");
                self.clean().await;
                Err(RecipeError::Trapped(why))
            }
        }
    }

    async fn clean(&mut self) {
        self.cleaned = true;
        if !self.ledger.is_empty() {
            let n = self.ledger.clean(&self.live.client).await;
            tracing::debug!(deleted = n, "ledger cleaned");
        }
    }

    /// Resolves when this handle's session ends or `node` is deleted by someone else.
    fn lost(&self, node: Option<String>) -> impl Future<Output = Lost> + Send + 'static {
        let live = self.live.clone();
        async move {
            let node_gone = async {
                let Some(node) = node else { return std::future::pending().await };
                watch_deleted(&live, &node).await
            };
            tokio::select! {
                state = live.wait_ended() => Lost::Session(state),
                lost = node_gone => lost,
            }
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.cleaned || self.ledger.is_empty() {
            return;
        }
        let (ledger, live) = (self.ledger.clone(), self.live.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    ledger.clean(&live.client).await;
                });
            }
            // Without a runtime the session's end removes the nodes.
            Err(_) => tracing::warn!("handle dropped outside a runtime; its nodes go with the session"),
        }
    }
}

/// Waits until `node` is deleted (or the session ends).
async fn watch_deleted(live: &Live, node: &str) -> Lost {
    let mut failures = 0u32;
    loop {
        match live.client.check_and_watch_stat(node).await {
            Ok((None, _)) => return Lost::NodeDeleted,
            Ok((Some(_), watcher)) => {
                let event = watcher.changed().await;
                match event.event_type {
                    EventType::NodeDeleted => return Lost::NodeDeleted,
                    EventType::Session => return Lost::Session(event.session_state),
                    _ => {}
                }
            }
            Err(zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed) => {
                return Lost::Session(SessionState::Expired)
            }
            // Disconnected: the session may still be alive; look again once it reconnects.
            Err(_) => {
                failures += 1;
                tokio::time::sleep(Duration::from_millis(100 * u64::from(failures.min(10)))).await;
            }
        }
    }
}

/// Why a held lock (or any handle's claim) was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The session ended (expired, closed): every ephemeral node is gone.
    Session(SessionState),
    /// Someone deleted the lock node.
    NodeDeleted,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Session(SessionState::Expired) => f.write_str("ZooKeeper session expired"),
            Lost::Session(state) => write!(f, "ZooKeeper session ended ({state:?})"),
            Lost::NodeDeleted => f.write_str("lock node was deleted"),
        }
    }
}

/// A handle on one lock recipe instance.
pub struct LockHandle {
    sandbox: Sandbox,
    bindings: LockRecipe,
    node: Option<String>,
}

impl LockHandle {
    /// Blocks until the lock at `path` is held, or `timeout` passes.
    pub async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Held, RecipeError> {
        self.sandbox.enter()?;
        let ms = timeout.map(|t| t.as_millis() as u64);
        let result = self.bindings.wazoo_recipes_lock().call_acquire(&mut self.sandbox.store, path, ms).await;
        let held = self.sandbox.leave(result).await??;
        self.node = Some(held.node.clone());
        Ok(held)
    }

    /// Takes the lock only if it is free right now.
    pub async fn try_acquire(&mut self, path: &str) -> Result<Option<Held>, RecipeError> {
        self.sandbox.enter()?;
        let result = self.bindings.wazoo_recipes_lock().call_try_acquire(&mut self.sandbox.store, path).await;
        let held = self.sandbox.leave(result).await??;
        if let Some(h) = &held {
            self.node = Some(h.node.clone());
        }
        Ok(held)
    }

    pub async fn release(&mut self) -> Result<(), RecipeError> {
        self.sandbox.enter()?;
        let result = self.bindings.wazoo_recipes_lock().call_release(&mut self.sandbox.store).await;
        self.sandbox.leave(result).await??;
        if self.sandbox.ledger.is_empty() {
            self.node = None;
        }
        Ok(())
    }

    /// Resolves when the lock this handle holds is lost: its session ended, or its node was
    /// deleted. Take it right after `acquire`.
    pub fn lost(&self) -> impl Future<Output = Lost> + Send + 'static {
        self.sandbox.lost(self.node.clone())
    }

    /// The ZooKeeper session this handle runs on.
    pub fn live(&self) -> &Arc<Live> {
        &self.sandbox.live
    }

    /// Ephemeral nodes this handle owns right now, per the host's ledger.
    pub fn ledger(&self) -> Vec<String> {
        self.sandbox.ledger.owned()
    }

    pub fn is_retired(&self) -> bool {
        self.sandbox.retired
    }

    /// Ends the handle now, deleting whatever nodes it still owns.
    pub async fn close(mut self) {
        self.sandbox.clean().await;
    }
}

/// A handle on one custom recipe instance.
pub struct CustomHandle {
    sandbox: Sandbox,
    bindings: Custom,
}

impl CustomHandle {
    /// Calls the recipe's `run` export.
    pub async fn run(&mut self, args: &[String]) -> Result<Result<String, String>, RecipeError> {
        self.sandbox.enter()?;
        let result = self.bindings.call_run(&mut self.sandbox.store, args).await;
        self.sandbox.leave(result).await
    }

    pub async fn close(mut self) {
        self.sandbox.clean().await;
    }
}
