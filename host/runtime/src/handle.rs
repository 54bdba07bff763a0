//! Recipe handles: one component instance in its own store, plus what the host tracks for it.
//!
//! A handle is reused only after calls that returned cleanly: a trap, a sandbox limit or a
//! cancelled call retires it (the rule lives in [`Sandbox::enter`] and [`Sandbox::leave`]), and a
//! retired, closed or dropped handle's ephemeral nodes are deleted from its ledger.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::Store;

use crate::bindings::barrier_recipe::BarrierRecipe;
use crate::bindings::config_recipe::ConfigRecipe;
use crate::bindings::custom::Custom;
use crate::bindings::election_recipe::ElectionRecipe;
use crate::bindings::group_recipe::GroupRecipe;
use crate::bindings::lock_recipe::LockRecipe;
use crate::bindings::queue_recipe::QueueRecipe;
use crate::bindings::rwlock_recipe::RwlockRecipe;
use crate::bindings::semaphore_recipe::SemaphoreRecipe;
use crate::bindings::transaction_recipe::TransactionRecipe;
use crate::bindings::{
    Ballot, Entry, Held, Item, LeaderInfo, Leadership, Lease, Membership, Mode, Outcome, RwHeld, TxMode,
};
use crate::claim::Lost;
use crate::error::RecipeError;
use crate::keeper::Live;
use crate::ledger::Ledger;
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
        Sandbox { store, live, ledger, retired: false, cleaned: false, shared, version: None }
    }

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

    pub(crate) async fn clean(&mut self) {
        self.cleaned = true;
        if !self.ledger.is_empty() {
            let n = self.ledger.clean(&self.live.client).await;
            self.shared.usage.znodes.fetch_sub(n as i64, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(deleted = n, "ledger cleaned");
        }
    }

    /// Resolves when this handle's claim on `node` is lost ([`crate::claim::lost`]).
    fn lost(&self, node: Option<String>) -> impl Future<Output = Lost> + Send + 'static {
        crate::claim::lost(self.live.clone(), node)
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
            pub fn lost(&self) -> impl Future<Output = Lost> + Send + 'static {
                self.sandbox.lost(self.node.clone())
            }

            /// Ends the handle now, deleting whatever nodes it still owns.
            pub async fn close(mut self) {
                self.sandbox.clean().await;
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

/// A handle on one lock recipe instance.
pub struct LockHandle {
    sandbox: Sandbox,
    bindings: LockRecipe,
    node: Option<String>,
}

impl HasBindings for LockHandle {
    type Bindings = LockRecipe;
}

handle_basics!(LockHandle);

impl LockHandle {
    /// Blocks until the lock at `path` is held, or `timeout` passes.
    pub async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Held, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        let held = call!(self, wazoo_recipes_lock.call_acquire(path, ms))?;
        self.claimed(Some(&held.node));
        Ok(held)
    }

    /// Takes the lock only if it is free right now.
    pub async fn try_acquire(&mut self, path: &str) -> Result<Option<Held>, RecipeError> {
        let held = call!(self, wazoo_recipes_lock.call_try_acquire(path))?;
        if let Some(h) = &held {
            self.claimed(Some(&h.node));
        }
        Ok(held)
    }

    pub async fn release(&mut self) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_lock.call_release())?;
        self.claimed(None);
        Ok(())
    }

    /// Asks the holder of `node` to let go; with `grace`, deletes the node after it. True if the
    /// holder released, false if it was forced.
    pub async fn revoke(&mut self, node: &str, grace: Option<Duration>) -> Result<bool, RecipeError> {
        let ms = grace.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_lock.call_revoke(node, ms))?)
    }
}

/// A handle on one read/write lock recipe instance.
pub struct RwLockHandle {
    sandbox: Sandbox,
    bindings: RwlockRecipe,
    node: Option<String>,
}

impl HasBindings for RwLockHandle {
    type Bindings = RwlockRecipe;
}

handle_basics!(RwLockHandle);

impl RwLockHandle {
    /// Blocks until the lock at `path` is held in `mode`, or `timeout` passes.
    pub async fn acquire(
        &mut self,
        path: &str,
        mode: Mode,
        timeout: Option<Duration>,
    ) -> Result<RwHeld, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        let held = call!(self, wazoo_recipes_rwlock.call_acquire(path, mode, ms))?;
        self.claimed(Some(&held.node));
        Ok(held)
    }

    /// Takes the lock in `mode` only if that is possible right now.
    pub async fn try_acquire(&mut self, path: &str, mode: Mode) -> Result<Option<RwHeld>, RecipeError> {
        let held = call!(self, wazoo_recipes_rwlock.call_try_acquire(path, mode))?;
        if let Some(h) = &held {
            self.claimed(Some(&h.node));
        }
        Ok(held)
    }

    pub async fn release(&mut self) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_rwlock.call_release())?;
        self.claimed(None);
        Ok(())
    }
}

/// A handle on one leader election recipe instance.
pub struct ElectionHandle {
    sandbox: Sandbox,
    bindings: ElectionRecipe,
    node: Option<String>,
}

impl HasBindings for ElectionHandle {
    type Bindings = ElectionRecipe;
}

handle_basics!(ElectionHandle);

impl ElectionHandle {
    /// Joins the election at `path` as `id` and blocks until this handle leads (or `timeout`).
    pub async fn campaign(
        &mut self,
        path: &str,
        id: &str,
        timeout: Option<Duration>,
    ) -> Result<Leadership, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        let leadership = call!(self, wazoo_recipes_election.call_campaign(path, id, ms))?;
        self.claimed(Some(&leadership.node));
        Ok(leadership)
    }

    /// Records that the leader procedure ran, for observers to see.
    pub async fn acknowledge(&mut self, note: &str) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_election.call_acknowledge(note))?;
        Ok(())
    }

    /// Gives up leadership or candidacy.
    pub async fn resign(&mut self) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_election.call_resign())?;
        self.claimed(None);
        Ok(())
    }

    /// The current leader of the election at `path`, without contending.
    pub async fn leader(&mut self, path: &str) -> Result<Option<LeaderInfo>, RecipeError> {
        Ok(call!(self, wazoo_recipes_election.call_leader(path))?)
    }

    /// Blocks until the leader or its acknowledgement differs from `known` (what the caller last
    /// saw, as [`ElectionHandle::seen`] gives it; none: no leader), or `timeout` passes.
    pub async fn observe(
        &mut self,
        path: &str,
        known: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Option<LeaderInfo>, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_election.call_observe(path, known, ms))?)
    }

    /// What an observer that has seen `leader` passes to [`ElectionHandle::observe`] as `known`:
    /// the leader's node, and once shown, a newline and its acknowledgement.
    pub fn seen(leader: &LeaderInfo) -> String {
        match &leader.acknowledged {
            Some(note) => format!("{}\n{note}", leader.node),
            None => leader.node.clone(),
        }
    }
}

/// A handle on one barrier recipe instance.
pub struct BarrierHandle {
    sandbox: Sandbox,
    bindings: BarrierRecipe,
    node: Option<String>,
}

impl HasBindings for BarrierHandle {
    type Bindings = BarrierRecipe;
}

handle_basics!(BarrierHandle);

impl BarrierHandle {
    /// Puts the barrier at `path` up; false if it was already up.
    pub async fn set(&mut self, path: &str) -> Result<bool, RecipeError> {
        Ok(call!(self, wazoo_recipes_barrier.call_set(path))?)
    }

    /// Takes the barrier down; false if it was not up.
    pub async fn remove(&mut self, path: &str) -> Result<bool, RecipeError> {
        Ok(call!(self, wazoo_recipes_barrier.call_remove(path))?)
    }

    /// Blocks until the barrier is down, or `timeout` passes.
    pub async fn wait(&mut self, path: &str, timeout: Option<Duration>) -> Result<(), RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_barrier.call_wait(path, ms))?)
    }

    /// Enters the double barrier at `path`; blocks until `count` participants are in.
    pub async fn enter(
        &mut self,
        path: &str,
        count: u32,
        timeout: Option<Duration>,
    ) -> Result<(), RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_double_barrier.call_enter(path, count, ms))?)
    }

    /// Leaves the double barrier; blocks until every participant has left.
    pub async fn leave_double(&mut self, timeout: Option<Duration>) -> Result<(), RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_double_barrier.call_leave(ms))?)
    }
}

/// A handle on one counting semaphore recipe instance.
pub struct SemaphoreHandle {
    sandbox: Sandbox,
    bindings: SemaphoreRecipe,
    node: Option<String>,
}

impl HasBindings for SemaphoreHandle {
    type Bindings = SemaphoreRecipe;
}

handle_basics!(SemaphoreHandle);

impl SemaphoreHandle {
    /// Blocks until one of `max_leases` leases at `path` is ours, or `timeout` passes.
    pub async fn acquire(
        &mut self,
        path: &str,
        max_leases: u32,
        timeout: Option<Duration>,
    ) -> Result<Lease, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        let lease = call!(self, wazoo_recipes_semaphore.call_acquire(path, max_leases, ms))?;
        self.claimed(Some(&lease.node));
        Ok(lease)
    }

    /// Takes a lease only if one is free right now.
    pub async fn try_acquire(&mut self, path: &str, max_leases: u32) -> Result<Option<Lease>, RecipeError> {
        let lease = call!(self, wazoo_recipes_semaphore.call_try_acquire(path, max_leases))?;
        if let Some(l) = &lease {
            self.claimed(Some(&l.node));
        }
        Ok(lease)
    }

    pub async fn release(&mut self) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_semaphore.call_release())?;
        self.claimed(None);
        Ok(())
    }
}

/// A handle on one queue recipe instance.
pub struct QueueHandle {
    sandbox: Sandbox,
    bindings: QueueRecipe,
    node: Option<String>,
}

impl HasBindings for QueueHandle {
    type Bindings = QueueRecipe;
}

handle_basics!(QueueHandle);

impl QueueHandle {
    /// Appends an item; returns its node.
    pub async fn put(
        &mut self,
        path: &str,
        data: &[u8],
        priority: Option<u8>,
        ephemeral: bool,
    ) -> Result<String, RecipeError> {
        Ok(call!(self, wazoo_recipes_queue.call_put(path, data, priority, ephemeral))?)
    }

    /// Removes and returns the head item (delete-to-claim), or `timeout`.
    pub async fn take(&mut self, path: &str, timeout: Option<Duration>) -> Result<Item, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_queue.call_take(path, ms))?)
    }

    /// Claims the head unclaimed item without deleting it (two-phase take), or `timeout`.
    pub async fn claim(&mut self, path: &str, timeout: Option<Duration>) -> Result<Item, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_queue.call_claim(path, ms))?)
    }

    /// Deletes a claimed item and its claim.
    pub async fn ack(&mut self, node: &str) -> Result<(), RecipeError> {
        Ok(call!(self, wazoo_recipes_queue.call_ack(node))?)
    }

    /// Items in the queue.
    pub async fn len(&mut self, path: &str) -> Result<u32, RecipeError> {
        Ok(call!(self, wazoo_recipes_queue.call_len(path))?)
    }
}

/// A handle on one group membership recipe instance; membership is its claim.
pub struct GroupHandle {
    sandbox: Sandbox,
    bindings: GroupRecipe,
    node: Option<String>,
}

impl HasBindings for GroupHandle {
    type Bindings = GroupRecipe;
}

handle_basics!(GroupHandle);

impl GroupHandle {
    /// Joins the group at `path` as `name` with `data`.
    pub async fn join(&mut self, path: &str, name: &str, data: &[u8]) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_group.call_join(path, name, data))?;
        let node = if path == "/" { format!("/{name}") } else { format!("{path}/{name}") };
        self.claimed(Some(&node));
        Ok(())
    }

    /// Leaves the group this handle joined.
    pub async fn leave(&mut self) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_group.call_leave())?;
        self.claimed(None);
        Ok(())
    }

    /// The current members.
    pub async fn members(&mut self, path: &str) -> Result<Membership, RecipeError> {
        Ok(call!(self, wazoo_recipes_group.call_members(path))?)
    }

    /// Blocks until the membership version differs from `known`, or `timeout` passes.
    pub async fn watch(
        &mut self,
        path: &str,
        known: i32,
        timeout: Option<Duration>,
    ) -> Result<Membership, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_group.call_watch(path, known, ms))?)
    }
}

/// A handle on one configuration (and counter) recipe instance.
pub struct ConfigHandle {
    sandbox: Sandbox,
    bindings: ConfigRecipe,
    node: Option<String>,
}

impl HasBindings for ConfigHandle {
    type Bindings = ConfigRecipe;
}

handle_basics!(ConfigHandle);

impl ConfigHandle {
    /// The value at `path`, or none.
    pub async fn get(&mut self, path: &str) -> Result<Option<Entry>, RecipeError> {
        Ok(call!(self, wazoo_recipes_config.call_get(path))?)
    }

    /// Writes `data` (compare-and-set with `expected_version`); returns the new version.
    pub async fn set(
        &mut self,
        path: &str,
        data: &[u8],
        expected_version: Option<i32>,
    ) -> Result<i32, RecipeError> {
        Ok(call!(self, wazoo_recipes_config.call_set(path, data, expected_version))?)
    }

    /// Blocks until the version differs from `known`, or `timeout` passes.
    pub async fn watch(
        &mut self,
        path: &str,
        known: Option<i32>,
        timeout: Option<Duration>,
    ) -> Result<Option<Entry>, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_config.call_watch(path, known, ms))?)
    }

    /// The counter at `path` (0 when absent).
    pub async fn counter(&mut self, path: &str) -> Result<i64, RecipeError> {
        Ok(call!(self, wazoo_recipes_counter.call_value(path))?)
    }

    /// Adds `delta` to the counter at `path`; returns the new value.
    pub async fn add(&mut self, path: &str, delta: i64) -> Result<i64, RecipeError> {
        Ok(call!(self, wazoo_recipes_counter.call_add(path, delta))?)
    }
}

/// A handle on one two-phase commit recipe instance.
pub struct TransactionHandle {
    sandbox: Sandbox,
    bindings: TransactionRecipe,
    node: Option<String>,
}

impl HasBindings for TransactionHandle {
    type Bindings = TransactionRecipe;
}

handle_basics!(TransactionHandle);

impl TransactionHandle {
    /// Starts transaction `tx` over `sites` and waits for its outcome.
    pub async fn coordinate(
        &mut self,
        tx: &str,
        sites: &[String],
        payload: &[u8],
        mode: TxMode,
        timeout: Option<Duration>,
    ) -> Result<Outcome, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_two_phase_commit.call_coordinate(tx, sites, payload, mode, ms))?)
    }

    /// The transaction's payload.
    pub async fn payload(&mut self, tx: &str) -> Result<Vec<u8>, RecipeError> {
        Ok(call!(self, wazoo_recipes_two_phase_commit.call_payload(tx))?)
    }

    /// Votes as `site` and waits for the outcome.
    pub async fn vote(
        &mut self,
        tx: &str,
        site: &str,
        ballot: Ballot,
        timeout: Option<Duration>,
    ) -> Result<Outcome, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        Ok(call!(self, wazoo_recipes_two_phase_commit.call_vote(tx, site, ballot, ms))?)
    }
}

/// A handle on one custom recipe instance.
pub struct CustomHandle {
    sandbox: Sandbox,
    bindings: Custom,
    node: Option<String>,
}

impl HasBindings for CustomHandle {
    type Bindings = Custom;
}

handle_basics!(CustomHandle);

impl CustomHandle {
    /// Calls the recipe's `run` export.
    pub async fn run(&mut self, args: &[String]) -> Result<Result<String, String>, RecipeError> {
        self.sandbox.enter()?;
        let result = self.bindings.call_run(&mut self.sandbox.store, args).await;
        self.sandbox.leave(result).await
    }
}

/// A handle on any recipe instance, called by export name with JSON arguments (see
/// [`crate::dynamic`]): the generic `Invoke` of `wazoo serve` and `wazoo call`.
pub struct DynamicHandle {
    sandbox: Sandbox,
    bindings: wasmtime::component::Instance,
    node: Option<String>,
}

impl HasBindings for DynamicHandle {
    type Bindings = wasmtime::component::Instance;
}

handle_basics!(DynamicHandle);

impl DynamicHandle {
    /// Every function the component exports.
    pub fn exports(&self) -> Vec<crate::dynamic::Export> {
        match &self.sandbox.version {
            Some(v) => crate::dynamic::exports(self.sandbox.store.engine(), v.pre.component()),
            None => Vec::new(),
        }
    }

    /// Calls export `function` (`lock.acquire`, `interface#func`, or a unique bare name) with
    /// `args` (a JSON array or object) and returns its result as JSON (`null` for none).
    /// Argument errors are `invalid-argument`. Afterwards the handle's claim (what its `lost`
    /// watches) is the `node` the result names if the handle owns it (a lock's `held.node`),
    /// else the last ephemeral node it owns in path order, else none.
    pub async fn call(
        &mut self,
        function: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, RecipeError> {
        let exports = self.exports();
        let bad = |e: String| RecipeError::Zk(crate::ZkError::InvalidArgument(e));
        let export = crate::dynamic::find(&exports, function).map_err(bad)?;
        let params = crate::dynamic::arguments(export, args).map_err(bad)?;
        let index = match &export.interface {
            Some(iface) => {
                self.bindings.get_export_index(&mut self.sandbox.store, None, iface).and_then(|i| {
                    self.bindings.get_export_index(&mut self.sandbox.store, Some(&i), &export.name)
                })
            }
            None => self.bindings.get_export_index(&mut self.sandbox.store, None, &export.name),
        };
        let func = index
            .and_then(|i| self.bindings.get_func(&mut self.sandbox.store, &i))
            .ok_or_else(|| bad(format!("{function} is not a function of this instance")))?;
        let result_types: Vec<wasmtime::component::Type> = export.ty.results().collect();
        let mut results = vec![wasmtime::component::Val::Bool(false); result_types.len()];
        self.sandbox.enter()?;
        let outcome = func.call_async(&mut self.sandbox.store, &params, &mut results).await;
        self.sandbox.leave(outcome).await?;
        let json = match (result_types.as_slice(), results.as_slice()) {
            ([], []) => serde_json::Value::Null,
            ([ty], [value]) => crate::dynamic::to_json(ty, value),
            (types, values) => serde_json::Value::Array(
                types.iter().zip(values).map(|(t, v)| crate::dynamic::to_json(t, v)).collect(),
            ),
        };
        let owned = self.sandbox.ledger.owned();
        let named = named_node(&json).filter(|n| owned.iter().any(|o| o == n));
        self.node = named.map(str::to_string).or_else(|| owned.last().cloned());
        Ok(json)
    }
}

/// The first string field called `node` in `json`, searched depth-first.
fn named_node(json: &serde_json::Value) -> Option<&str> {
    match json {
        serde_json::Value::Object(o) => {
            o.get("node").and_then(|n| n.as_str()).or_else(|| o.values().find_map(named_node))
        }
        serde_json::Value::Array(a) => a.iter().find_map(named_node),
        _ => None,
    }
}
