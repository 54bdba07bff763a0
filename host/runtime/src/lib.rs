//! wazoo: ZooKeeper coordination recipes as sandboxed WebAssembly components.
//!
//! The host owns the ZooKeeper session ([`keeper`]) and lends znode primitives to recipe
//! components through the `wazoo:zk` WIT interfaces ([`znode`], [`watch`], [`session`]). Each
//! recipe handle is one component instance in its own sandboxed store ([`sandbox`]); the
//! [`ledger`] deletes what a handle leaves behind.

mod admit;
mod bindings;
pub mod claim;
pub mod dynamic;
pub mod embedded;
pub mod error;
pub mod family;
pub mod faults;
pub mod fence;
mod handle;
pub mod holders;
mod host;
pub mod keeper;
pub mod ledger;
mod loss;
pub mod nodelay;
mod output;
pub mod paths;
mod persistent;
pub mod protocol;
pub mod registry;
mod retry;
pub mod rollout;
pub mod sandbox;
mod session;
pub mod signing;
mod slots;
mod state;
pub mod stats;
mod versions;
mod watch;
mod watched;
mod watching;
pub mod zk;
mod znode;

pub use bindings::{
    Ballot, CacheChange, CachedNode, ClaimHeld, CounterFormat, Entry, EventKind, Held, Item, LeaderInfo,
    Leadership, Lease, Member, Membership, Mode, Outcome, RwHeld, Stat, Tended, TxMode, WatchEvent, ZkError,
};
pub use claim::{Claim, ClaimKind, Contender, Granted, Want};
pub use error::RecipeError;
pub use handle::{
    BarrierHandle, CacheHandle, ClaimHandle, ConfigHandle, CustomHandle, DynamicHandle, ElectionHandle,
    GroupHandle, LockHandle, QueueHandle, RwLockHandle, SemaphoreHandle, TransactionHandle,
};
pub use host::{Host, HostConfig};
pub use keeper::{KeeperConfig, Live, SessionEnd, ZkTls};
pub use loss::Lost;
pub use registry::{RecipeInfo, Registry, World};
pub use sandbox::SandboxLimits;
pub use state::ClaimTag;
/// The WIT packages this host offers, and their versions (as `wazoo --version` names them).
pub use versions::PACKAGES as WIT_PACKAGES;
pub use watching::Watching;
