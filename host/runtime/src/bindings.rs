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

pub(crate) mod lock_recipe {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "wazoo:recipes/lock-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk/watch.watcher": super::WatchSlot },
    });
}

/// Bindings for one recipe world, reusing the `wazoo:zk` imports generated for `lock_recipe`.
macro_rules! recipe_world {
    ($module:ident, $world:literal) => {
        pub(crate) mod $module {
            wasmtime::component::bindgen!({
                path: "../../wit",
                world: $world,
                imports: { default: async | trappable },
                exports: { default: async },
                with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
            });
        }
    };
}

recipe_world!(rwlock_recipe, "wazoo:recipes/rwlock-recipe");
recipe_world!(election_recipe, "wazoo:recipes/election-recipe");
recipe_world!(barrier_recipe, "wazoo:recipes/barrier-recipe");
recipe_world!(semaphore_recipe, "wazoo:recipes/semaphore-recipe");
recipe_world!(queue_recipe, "wazoo:recipes/queue-recipe");
recipe_world!(group_recipe, "wazoo:recipes/group-recipe");
recipe_world!(config_recipe, "wazoo:recipes/config-recipe");
recipe_world!(transaction_recipe, "wazoo:recipes/transaction-recipe");
recipe_world!(custom, "wazoo:recipes/custom");

pub(crate) use barrier_recipe::BarrierRecipePre;
pub(crate) use config_recipe::ConfigRecipePre;
pub(crate) use custom::CustomPre;
pub(crate) use election_recipe::ElectionRecipePre;
pub(crate) use group_recipe::GroupRecipePre;
pub(crate) use lock_recipe::wazoo::zk::{session, types, watch, znode};
pub(crate) use lock_recipe::LockRecipePre;
pub(crate) use queue_recipe::QueueRecipePre;
pub(crate) use rwlock_recipe::RwlockRecipePre;
pub(crate) use semaphore_recipe::SemaphoreRecipePre;
pub(crate) use transaction_recipe::TransactionRecipePre;

pub use config_recipe::exports::wazoo::recipes::config::Entry;
pub use election_recipe::exports::wazoo::recipes::election::{LeaderInfo, Leadership};
pub use group_recipe::exports::wazoo::recipes::group::{Member, Membership};
pub use lock_recipe::exports::wazoo::recipes::lock::Held;
pub use lock_recipe::wazoo::zk::types::{EventKind, Stat, WatchEvent, ZkError};
pub use queue_recipe::exports::wazoo::recipes::queue::Item;
pub use rwlock_recipe::exports::wazoo::recipes::rwlock::{Held as RwHeld, Mode};
pub use semaphore_recipe::exports::wazoo::recipes::semaphore::Lease;
pub use transaction_recipe::exports::wazoo::recipes::two_phase_commit::{Ballot, Mode as TxMode, Outcome};

/// The host side of a `watcher` resource (its methods are `wazoo:zk/watch`, in the `watch`
/// module): the armed watch, or the event it fired with. It counts against the host's watch
/// limit until it is dropped.
pub struct WatchSlot {
    pub(crate) pending: Option<Pin<Box<dyn Future<Output = WatchedEvent> + Send>>>,
    pub(crate) fired: Option<WatchEvent>,
    live: Arc<AtomicUsize>,
}

impl WatchSlot {
    pub(crate) fn new(watcher: OneshotWatcher, live: Arc<AtomicUsize>) -> WatchSlot {
        WatchSlot { pending: Some(Box::pin(watcher.changed())), fired: None, live }
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Export names that identify each world, for `wazoo recipes list` and load-time checks.
pub const LOCK_EXPORT: &str = "wazoo:recipes/lock@0.1.0";
pub const RWLOCK_EXPORT: &str = "wazoo:recipes/rwlock@0.1.0";
pub const ELECTION_EXPORT: &str = "wazoo:recipes/election@0.1.0";
pub const BARRIER_EXPORT: &str = "wazoo:recipes/barrier@0.1.0";
pub const SEMAPHORE_EXPORT: &str = "wazoo:recipes/semaphore@0.1.0";
pub const QUEUE_EXPORT: &str = "wazoo:recipes/queue@0.1.0";
pub const GROUP_EXPORT: &str = "wazoo:recipes/group@0.1.0";
pub const CONFIG_EXPORT: &str = "wazoo:recipes/config@0.1.0";
pub const TRANSACTION_EXPORT: &str = "wazoo:recipes/two-phase-commit@0.1.0";
pub const CUSTOM_EXPORT: &str = "run";

/// Registers every `wazoo:zk` import on `linker`.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::state::HostState>,
) -> anyhow::Result<()> {
    use wasmtime::component::HasSelf;
    types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    znode::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    watch::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    session::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}
