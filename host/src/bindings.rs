//! The WIT contract's generated bindings, kept in this one module. The rest of the host uses
//! the types re-exported here and never names generated modules directly.

pub(crate) mod lock_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/lock-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk/watch.watcher": crate::watch::WatchSlot },
    });
}

pub(crate) mod rwlock_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/rwlock-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod election_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/election-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod barrier_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/barrier-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod semaphore_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/semaphore-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod queue_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/queue-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod group_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/group-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod config_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/config-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod transaction_recipe {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/transaction-recipe",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

pub(crate) mod custom {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wazoo:recipes/custom",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "wazoo:zk": super::lock_recipe::wazoo::zk },
    });
}

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
