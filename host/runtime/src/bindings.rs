//! The WIT contract's generated bindings, kept in this one module. The rest of the host uses
//! the types re-exported here and never names generated modules directly.
//!
//! The one host type the bindings name, the `watcher` resource's [`WatchSlot`], lives here too,
//! so that this module depends on no other module of the host's but the store data it links
//! (`state`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use zookeeper_client::{OneshotWatcher, WatchedEvent};

/// The `wazoo:zk` imports (with the host's [`WatchSlot`] as the `watcher` resource) and the
/// `custom` world, whose one export is `run`. Every family's bindings reuse these imports.
pub(crate) mod custom {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "wazoo:recipes/custom",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "wazoo:zk/watch.watcher": super::WatchSlot,
            "wazoo:zk/persistent.persistent-watcher": crate::persistent::PersistentSlot,
        },
    });
}

/// The version of the `wazoo:recipes` package the families below are read from.
macro_rules! recipes_version {
    () => {
        "0.1.2"
    };
}

/// Generates, from the table of families below: each family's bindings module (its typed
/// `…Pre` re-exported), the [`World`] enum with one variant per family plus `Custom`, and what
/// the registry asks of a world (its name, the export that identifies it, its default recipe,
/// the check of a component's export types).
macro_rules! families {
    ($(
        $(#[$doc:meta])*
        $variant:ident => $module:ident::$pre:ident, world $world:literal, export $export:literal,
            default $default:literal;
    )*) => {
        $(
            pub(crate) mod $module {
                wasmtime::component::bindgen!({
                    path: "../../wit",
                    world: $world,
                    imports: { default: async | trappable },
                    exports: { default: async },
                    with: { "wazoo:zk": super::custom::wazoo::zk },
                });
            }
            #[allow(unused_imports)]
            pub(crate) use $module::$pre;
        )*

        /// The recipe worlds a component can target: one per family, and `custom`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum World {
            $( $(#[$doc])* $variant, )*
            /// `wazoo:recipes/custom`: exports `run`, called by `wazoo run` and `Invoke`.
            Custom,
        }

        impl World {
            /// Every family's world (not `Custom`), in the table's order.
            pub const FAMILIES: &'static [World] = &[$(World::$variant),*];

            /// The recipe (plugin file `NAME.wasm`) that serves this world when a caller names
            /// none: the one place the CLI and the daemon take their defaults from. A custom
            /// recipe is always named by its caller (`""`).
            pub const fn default_recipe(self) -> &'static str {
                match self {
                    $( World::$variant => $default, )*
                    World::Custom => "",
                }
            }

            /// The world's full name, e.g. `wazoo:recipes/lock-recipe@0.1.2`.
            pub const fn name(self) -> &'static str {
                match self {
                    $( World::$variant => concat!($world, "@", recipes_version!()), )*
                    World::Custom => concat!("wazoo:recipes/custom@", recipes_version!()),
                }
            }

            /// The export a component of this world has: an interface, e.g.
            /// `wazoo:recipes/lock@0.1.2`, or the function `run` for `Custom`.
            pub const fn export(self) -> &'static str {
                match self {
                    $( World::$variant => concat!("wazoo:recipes/", $export, "@", recipes_version!()), )*
                    World::Custom => "run",
                }
            }

            /// Checks that `pre`'s exports have this world's types. A config component may
            /// also have those of `wazoo:recipes@0.1.0` ([`KazooCounterIndices`]).
            pub(crate) fn check_exports(
                self,
                pre: &wasmtime::component::InstancePre<crate::state::HostState>,
            ) -> anyhow::Result<()> {
                let checked = match self {
                    $( World::$variant => $module::$pre::new(pre.clone()).map(drop), )*
                    World::Custom => custom::CustomPre::new(pre.clone()).map(drop),
                };
                let checked = match checked {
                    Err(e) if self == World::Config => KazooCounterIndices::new(pre).map(drop).map_err(|_| e),
                    checked => checked,
                };
                checked.map_err(|e| anyhow::anyhow!("its exports do not have the types of {}: {e:#}", self.name()))
            }
        }
    };
}

// The recipe families: one line each is the whole of a family's registration in the runtime.
// A component is of the first family whose export it has. Everything else the host does with a
// family it does through the world's exports by name (`dynamic`: `wazoo call`, `Invoke`); the
// typed handles in `handle/` are for the standard families' own commands.
families! {
    /// `wazoo:recipes/lock-recipe`
    Lock => lock_recipe::LockRecipePre, world "wazoo:recipes/lock-recipe", export "lock", default "lock";
    /// `wazoo:recipes/rwlock-recipe`
    RwLock => rwlock_recipe::RwlockRecipePre, world "wazoo:recipes/rwlock-recipe", export "rwlock",
        default "rwlock";
    /// `wazoo:recipes/election-recipe`
    Election => election_recipe::ElectionRecipePre, world "wazoo:recipes/election-recipe",
        export "election", default "election";
    /// `wazoo:recipes/barrier-recipe` (barrier and double barrier)
    Barrier => barrier_recipe::BarrierRecipePre, world "wazoo:recipes/barrier-recipe", export "barrier",
        default "barrier";
    /// `wazoo:recipes/semaphore-recipe`
    Semaphore => semaphore_recipe::SemaphoreRecipePre, world "wazoo:recipes/semaphore-recipe",
        export "semaphore", default "semaphore";
    /// `wazoo:recipes/queue-recipe`
    Queue => queue_recipe::QueueRecipePre, world "wazoo:recipes/queue-recipe", export "queue",
        default "queue";
    /// `wazoo:recipes/group-recipe`
    Group => group_recipe::GroupRecipePre, world "wazoo:recipes/group-recipe", export "group",
        default "group";
    /// `wazoo:recipes/config-recipe` (config and counter)
    Config => config_recipe::ConfigRecipePre, world "wazoo:recipes/config-recipe", export "config",
        default "config";
    /// `wazoo:recipes/transaction-recipe`
    Transaction => transaction_recipe::TransactionRecipePre, world "wazoo:recipes/transaction-recipe",
        export "two-phase-commit", default "transaction";
    /// `wazoo:recipes/registration-recipe`
    Registration => registration_recipe::RegistrationRecipePre, world "wazoo:recipes/registration-recipe",
        export "registration", default "registration";
    /// `wazoo:recipes/cache-recipe`
    Cache => cache_recipe::CacheRecipePre, world "wazoo:recipes/cache-recipe", export "cache", default "cache";
}

pub(crate) use custom::wazoo::zk::{persistent, session, types, watch, znode};
pub(crate) use custom::CustomPre;

pub use cache_recipe::exports::wazoo::recipes::cache::{Change as CacheChange, Node as CachedNode};
pub use config_recipe::exports::wazoo::recipes::config::Entry;
pub use config_recipe::exports::wazoo::recipes::counter::CounterFormat;
pub use custom::wazoo::zk::types::{EventKind, Stat, WatchEvent, ZkError};
pub use election_recipe::exports::wazoo::recipes::election::{LeaderInfo, Leadership};
pub use group_recipe::exports::wazoo::recipes::group::{Member, Membership};
pub use lock_recipe::exports::wazoo::recipes::lock::Held;
pub use queue_recipe::exports::wazoo::recipes::queue::Item;
pub use registration_recipe::exports::wazoo::recipes::registration::Tended;
pub use rwlock_recipe::exports::wazoo::recipes::rwlock::{Held as RwHeld, Mode};
pub use semaphore_recipe::exports::wazoo::recipes::semaphore::Lease;
pub use transaction_recipe::exports::wazoo::recipes::two_phase_commit::{Ballot, Mode as TxMode, Outcome};

impl CounterFormat {
    /// Every format, in the WIT's order.
    pub const ALL: [CounterFormat; 3] =
        [CounterFormat::Kazoo, CounterFormat::CuratorShared, CounterFormat::CuratorAtomic];

    /// The format's WIT name: `kazoo`, `curator-shared` or `curator-atomic`.
    pub fn name(self) -> &'static str {
        match self {
            CounterFormat::Kazoo => "kazoo",
            CounterFormat::CuratorShared => "curator-shared",
            CounterFormat::CuratorAtomic => "curator-atomic",
        }
    }
}

/// The config family's bindings of one instance: of a component built against this host's
/// `wazoo:recipes`, or of one built against 0.1.0, whose counter has no formats.
pub(crate) enum ConfigBindings {
    Current(config_recipe::ConfigRecipe),
    KazooOnly(KazooCounter),
}

impl ConfigBindings {
    /// Instantiates `pre` in `store` with the bindings its exports have.
    pub(crate) async fn instantiate(
        pre: &wasmtime::component::InstancePre<crate::state::HostState>,
        store: &mut wasmtime::Store<crate::state::HostState>,
    ) -> anyhow::Result<ConfigBindings> {
        use crate::error::from_wasmtime;
        if let Ok(typed) = config_recipe::ConfigRecipePre::new(pre.clone()) {
            return Ok(ConfigBindings::Current(typed.instantiate_async(store).await.map_err(from_wasmtime)?));
        }
        let indices = KazooCounterIndices::new(pre)?;
        let instance = pre.instantiate_async(&mut *store).await.map_err(from_wasmtime)?;
        Ok(ConfigBindings::KazooOnly(indices.load(store, &instance)?))
    }

    /// The `config` interface, the same in every version.
    pub(crate) fn wazoo_recipes_config(&self) -> &config_recipe::exports::wazoo::recipes::config::Guest {
        match self {
            ConfigBindings::Current(b) => b.wazoo_recipes_config(),
            ConfigBindings::KazooOnly(k) => &k.config,
        }
    }
}

/// The exports of a config component built against `wazoo:recipes@0.1.0`: `config` as today, and
/// a `counter` with only `value` and `add` (kazoo's format).
pub(crate) struct KazooCounter {
    pub(crate) config: config_recipe::exports::wazoo::recipes::config::Guest,
    pub(crate) value: wasmtime::component::TypedFunc<(String,), (Result<i64, ZkError>,)>,
    pub(crate) add: wasmtime::component::TypedFunc<(String, i64), (Result<i64, ZkError>,)>,
    /// The `wazoo:recipes` version it was built against, as its export names say.
    pub(crate) built_against: String,
}

/// Where a `wazoo:recipes@0.1.0` config component's exports are, found before instantiating.
pub(crate) struct KazooCounterIndices {
    config: config_recipe::exports::wazoo::recipes::config::GuestIndices,
    value: wasmtime::component::ComponentExportIndex,
    add: wasmtime::component::ComponentExportIndex,
    built_against: String,
}

impl KazooCounterIndices {
    pub(crate) fn new(
        pre: &wasmtime::component::InstancePre<crate::state::HostState>,
    ) -> anyhow::Result<KazooCounterIndices> {
        let component = pre.component();
        let counter = World::Config.export().replace("/config@", "/counter@");
        let engine = component.engine();
        let built_against = component
            .component_type()
            .exports(engine)
            .find_map(|(name, _)| Some(name.strip_prefix("wazoo:recipes/counter@")?.to_string()))
            .ok_or_else(|| anyhow::anyhow!("no exported instance named `{counter}`"))?;
        // Found by semver: the 0.1.0 export answers a lookup of this host's version.
        let instance = component
            .get_export_index(None, counter.as_str())
            .ok_or_else(|| anyhow::anyhow!("no exported instance named `{counter}`"))?;
        let function = |name: &str| {
            component
                .get_export_index(Some(&instance), name)
                .ok_or_else(|| anyhow::anyhow!("instance export `{counter}` does not have export `{name}`"))
        };
        Ok(KazooCounterIndices {
            config: config_recipe::exports::wazoo::recipes::config::GuestIndices::new(pre)?,
            value: function("value")?,
            add: function("add")?,
            built_against,
        })
    }

    fn load(
        self,
        store: &mut wasmtime::Store<crate::state::HostState>,
        instance: &wasmtime::component::Instance,
    ) -> anyhow::Result<KazooCounter> {
        Ok(KazooCounter {
            config: self.config.load(&mut *store, instance)?,
            value: instance.get_typed_func(&mut *store, self.value)?,
            add: instance.get_typed_func(&mut *store, self.add)?,
            built_against: self.built_against,
        })
    }
}

/// The host side of a `watcher` resource (its methods are `wazoo:zk/watch`, in the `watch`
/// module): the armed watch, or the event it fired with. It counts against the host's watch
/// limit until it is dropped.
pub struct WatchSlot {
    // Dropped first: dropping the client's watcher before it fired sends the removal that
    // `guard` then repairs.
    pub(crate) pending: Option<Pin<Box<dyn Future<Output = WatchedEvent> + Send>>>,
    pub(crate) fired: Option<WatchEvent>,
    live: Arc<AtomicUsize>,
    /// Sets the path's persistent watches again if this one is dropped before it fired.
    pub(crate) guard: Option<crate::persistent::OneShotGuard>,
}

impl WatchSlot {
    pub(crate) fn new(watcher: OneshotWatcher, live: Arc<AtomicUsize>) -> WatchSlot {
        WatchSlot { pending: Some(Box::pin(watcher.changed())), fired: None, live, guard: None }
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        // The client's watcher goes before the guard, whatever the fields' order.
        self.pending = None;
    }
}

/// Registers every `wazoo:zk` import on `linker`.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::state::HostState>,
) -> anyhow::Result<()> {
    use wasmtime::component::HasSelf;
    types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    znode::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    watch::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    session::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    persistent::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}
