//! The WIT contract's generated bindings, kept in this one module. The rest of the host uses
//! the types re-exported here and never names generated modules directly.
//!
//! The host types the bindings name, those of the resources a guest holds, are below it
//! (`slots`); nothing else of the host's is named here, so every module that needs a WIT type
//! sits above this one.

/// The `wazoo:zk` imports (with the host's `slots` as their resources) and the
/// `custom` world, whose one export is `run`. Every family's bindings reuse these imports.
pub(crate) mod custom {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "wazoo:recipes/custom",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "wazoo:zk/watch.watcher": crate::slots::WatchSlot,
            "wazoo:zk/persistent.persistent-watcher": crate::slots::PersistentSlot,
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
            /// also have those of `wazoo:recipes@0.1.0` ([`config_recipe_0_1_0`]).
            pub(crate) fn check_exports<T: 'static>(
                self,
                pre: &wasmtime::component::InstancePre<T>,
            ) -> anyhow::Result<()> {
                let checked = match self {
                    $( World::$variant => $module::$pre::new(pre.clone()).map(drop), )*
                    World::Custom => custom::CustomPre::new(pre.clone()).map(drop),
                };
                let checked = match checked {
                    Err(e) if self == World::Config => {
                        config_recipe_0_1_0::ConfigRecipePre::new(pre.clone()).map(drop).map_err(|_| e)
                    }
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
    /// `wazoo:recipes/claim-recipe`: the claim families served from their description alone
    /// (`family`); each names its own default recipe.
    Claim => claim_recipe::ClaimRecipePre, world "wazoo:recipes/claim-recipe", export "claim", default "";
}

pub(crate) use custom::wazoo::zk::{contention, persistent, session, types, watch, znode};
pub(crate) use custom::CustomPre;

pub use cache_recipe::exports::wazoo::recipes::cache::{Change as CacheChange, Node as CachedNode};
pub use claim_recipe::exports::wazoo::recipes::claim::Held as ClaimHeld;
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

impl From<zookeeper_client::Stat> for Stat {
    fn from(s: zookeeper_client::Stat) -> Stat {
        Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            pzxid: s.pzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            ephemeral_owner: s.ephemeral_owner,
            data_length: s.data_length,
            num_children: s.num_children,
        }
    }
}

impl From<zookeeper_client::WatchedEvent> for WatchEvent {
    /// A node event, or the session's end (`session-expired`, else `session-closed`).
    fn from(e: zookeeper_client::WatchedEvent) -> WatchEvent {
        use zookeeper_client::{EventType, SessionState};
        let kind = match e.event_type {
            EventType::NodeCreated => EventKind::NodeCreated,
            EventType::NodeDeleted => EventKind::NodeDeleted,
            EventType::NodeDataChanged => EventKind::NodeDataChanged,
            EventType::NodeChildrenChanged => EventKind::NodeChildrenChanged,
            EventType::Session if e.session_state == SessionState::Expired => EventKind::SessionExpired,
            EventType::Session => EventKind::SessionClosed,
        };
        WatchEvent { kind, path: e.path }
    }
}

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

/// `wazoo:recipes@0.1.0`'s config world, which the host still serves: `config` as today's, and a
/// `counter` with only `value` and `add` (kazoo's format). Older versions the host accepts are
/// kept as WIT, not as tables of exports: this one is `wit/old/recipes@0.1.0/recipes.wit`, read
/// from a root of its own whose `deps/` holds the `wazoo:zk@0.1.2` it was last built on. It is not
/// under `wit/deps/`, because every package there joins the resolve of `wit/` that the families
/// above (and every guest) are generated from, and two versions of `wazoo:recipes` in one resolve
/// make bindgen name the package's modules by version (`recipes0_1_2`) everywhere. Its
/// `wazoo:zk` is today's bindings (`with`), so its `zk-error` is [`ZkError`]; a 0.1.0 component's
/// imports (`wazoo:zk@0.1.0` to `0.1.2`) are linked to this host's later 0.1 by semver.
pub(crate) mod config_recipe_0_1_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/old/recipes@0.1.0",
        world: "wazoo:recipes/config-recipe@0.1.0",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::custom::wazoo::zk },
    });
}

impl From<config_recipe_0_1_0::exports::wazoo::recipes::config::Entry> for Entry {
    /// 0.1.0's entry is today's.
    fn from(e: config_recipe_0_1_0::exports::wazoo::recipes::config::Entry) -> Entry {
        Entry { data: e.data, version: e.version }
    }
}

/// The config family's bindings of one instance: of a component built against this host's
/// `wazoo:recipes`, or of one built against 0.1.0, whose counter has no formats.
pub(crate) enum ConfigBindings {
    Current(config_recipe::ConfigRecipe),
    KazooOnly {
        bindings: config_recipe_0_1_0::ConfigRecipe,
        /// The `wazoo:recipes` version it was built against, as its export names say.
        built_against: String,
    },
}
