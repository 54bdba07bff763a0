//! Recipe handles: one component instance in its own store, plus what the host tracks for it.
//!
//! A handle is reused only after calls that returned cleanly: a trap, a sandbox limit or a
//! cancelled call retires it (the rule lives in [`Sandbox::enter`] and [`Sandbox::leave`]), and a
//! retired, closed or dropped handle's ephemeral nodes are deleted from its ledger.

use std::future::Future;
use std::sync::Arc;

use wasmtime::Store;

use crate::error::RecipeError;
use crate::keeper::Live;
use crate::ledger::Ledger;
use crate::loss::Lost;
use crate::state::{HostState, Shared};
use crate::stats::Stats;

/// One instance's store plus what the host tracks for it; shared by every kind of handle.
pub(crate) struct Sandbox {
    pub(crate) store: Store<HostState>,
    live: Arc<Live>,
    ledger: Arc<Ledger>,
    /// Set while a call is under way and left set if it does not return cleanly.
    retired: bool,
    cleaned: bool,
    shared: Arc<Shared>,
    /// The component version this instance runs (kept alive as long as the handle).
    pub(crate) version: Option<Arc<crate::registry::Version>>,
}

impl Sandbox {
    pub(crate) fn new(
        store: Store<HostState>,
        live: Arc<Live>,
        ledger: Arc<Ledger>,
        shared: Arc<Shared>,
    ) -> Sandbox {
        shared.usage.instances.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Sandbox { store, live, ledger, retired: false, cleaned: false, shared, version: None }
    }

    /// Records that this handle runs `version`.
    pub(crate) fn runs(&mut self, version: Arc<crate::registry::Version>) {
        self.store.data_mut().version_usage = Some(version.usage.clone());
        self.version = Some(version);
    }

    /// Marks a call as begun. If the caller drops the call's future, the mark stays: the
    /// instance is then in an unknown state and is never called again.
    fn enter(&mut self) -> Result<(), RecipeError> {
        if self.retired {
            return Err(RecipeError::Retired);
        }
        self.retired = true;
        self.store.data_mut().clock.begin();
        if let Some(version) = &self.version {
            Stats::bump(&version.usage.calls);
        }
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
                if let Some(version) = &self.version {
                    Stats::bump(&version.usage.traps);
                }
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

    /// Deletes the nodes the handle's ledger holds. The deletes run on a task of their own, so a
    /// caller that gives up waiting (a call cancelled while it closes a handle) does not cut them
    /// short: once begun, a clean-up ends.
    pub(crate) async fn clean(&mut self) {
        self.cleaned = true;
        if !self.ledger.is_empty() {
            let (ledger, live, shared) = (self.ledger.clone(), self.live.clone(), self.shared.clone());
            let cleaning = tokio::spawn(async move {
                let n = ledger.clean(&live.client).await;
                shared.usage.znodes.fetch_sub(n as i64, std::sync::atomic::Ordering::Relaxed);
                n
            });
            if let Ok(n) = cleaning.await {
                tracing::debug!(deleted = n, "ledger cleaned");
            }
        }
    }

    /// Resolves when this handle's claim on `node` is lost ([`crate::loss::lost`]).
    fn lost(&self, node: Option<String>) -> impl Future<Output = Lost> + Send + 'static {
        crate::loss::lost(self.live.clone(), node)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.shared.usage.instances.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
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

/// Methods every handle has, over its `sandbox` and the `node` it last claimed.
macro_rules! handle_basics {
    ($handle:ident) => {
        impl $handle {
            pub(crate) fn new(sandbox: Sandbox, bindings: <Self as HasBindings>::Bindings) -> Self {
                $handle { sandbox, bindings, node: None }
            }

            /// The ZooKeeper session this handle runs on.
            pub fn live(&self) -> &Arc<Live> {
                &self.sandbox.live
            }

            /// Ephemeral nodes this handle owns right now, per the host's ledger.
            pub fn ledger(&self) -> Vec<String> {
                self.sandbox.ledger.owned()
            }

            /// Whether the host's ledger tracks any node of this handle (owned, or created by a
            /// request whose answer never came).
            pub fn tracks_nodes(&self) -> bool {
                !self.sandbox.ledger.is_empty()
            }

            /// The component version this handle runs: it keeps it until it ends, whatever
            /// replaces the file meanwhile.
            pub fn version(&self) -> Option<&Arc<crate::registry::Version>> {
                self.sandbox.version.as_ref()
            }

            /// Whether an earlier trap or cancelled call retired this handle.
            pub fn is_retired(&self) -> bool {
                self.sandbox.retired
            }

            /// Resolves when the claim this handle holds is lost ([`Lost`]): its session ended,
            /// its node was deleted or revoked, or ZooKeeper stopped answering for 2/3 of the
            /// session timeout. Take it right after acquiring.
            pub fn lost(&self) -> impl std::future::Future<Output = Lost> + Send + 'static {
                self.sandbox.lost(self.node.clone())
            }

            /// Ends the handle now, deleting whatever nodes it still owns.
            pub async fn close(mut self) {
                self.sandbox.clean().await;
            }

            /// Takes `node` out of the handle's ledger, if the ledger holds it and nothing else:
            /// the czxid it was created with, and what the host counts its nodes in. The handle
            /// then owns nothing ([`crate::Claim::into_data`]).
            #[allow(dead_code)]
            pub(crate) fn give_up_node(&mut self, node: &str) -> Option<(i64, Arc<crate::state::Shared>)> {
                if self.sandbox.retired || !self.sandbox.ledger.holds_only(node) {
                    return None;
                }
                let czxid = self.sandbox.ledger.forget(node)?;
                Some((czxid, self.sandbox.shared.clone()))
            }

            /// Names the claim the next acquire makes (none: a claim of its own).
            #[allow(dead_code)]
            pub(crate) fn tag(&mut self, tag: Option<crate::state::ClaimTag>) {
                self.sandbox.store.data_mut().claim = tag;
            }

            /// Who the claims the next calls make are for: the data of the contender nodes the
            /// recipe leaves blank (none: they stay blank).
            #[allow(dead_code)]
            pub(crate) fn identify(&mut self, identity: Option<std::sync::Arc<str>>) {
                self.sandbox.store.data_mut().identity = identity;
            }

            /// Holds the recipe's unwaited release back, to go in one `multi` with its next
            /// contention's create, holds no more, or sends the one held
            /// ([`crate::Claim::requeue`]).
            #[allow(dead_code)]
            pub(crate) fn fold(&mut self, fold: crate::state::Fold) {
                self.sandbox.store.data_mut().fold(fold);
            }

            #[allow(dead_code)]
            fn claimed(&mut self, node: Option<&str>) {
                match node {
                    Some(node) => self.node = Some(node.to_string()),
                    None if self.sandbox.ledger.is_empty() => self.node = None,
                    None => {}
                }
            }
        }
    };
}

/// Ties each handle to its generated bindings type without naming it in the public API.
pub(crate) trait HasBindings {
    type Bindings;
}

/// Calls an export under the sandbox's rule ([`Sandbox::enter`], then [`Sandbox::leave`]):
/// `call!(self, interface.call_method(args…))` yields the recipe's own `Result`.
macro_rules! call {
    ($self:ident, $iface:ident . $method:ident ( $($arg:expr),* )) => {{
        $self.sandbox.enter()?;
        let result = $self.bindings.$iface().$method(&mut $self.sandbox.store, $($arg),*).await;
        $self.sandbox.leave(result).await?
    }};
}

mod cache;
mod claiming;
mod custom;
mod data;

pub use cache::CacheHandle;
pub use claiming::{ClaimHandle, ElectionHandle, GroupHandle, LockHandle, RwLockHandle, SemaphoreHandle};
pub use custom::{CustomHandle, DynamicHandle};
pub use data::{BarrierHandle, ConfigHandle, QueueHandle, TransactionHandle};
