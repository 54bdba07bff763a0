//! The handles that take claims: lock, read/write lock, leader election, semaphore, group, and
//! a claim of a family served from its description (`ClaimHandle`).

use std::sync::Arc;
use std::time::Duration;

use super::{HasBindings, Sandbox};
use crate::bindings::claim_recipe::ClaimRecipe;
use crate::bindings::election_recipe::ElectionRecipe;
use crate::bindings::group_recipe::GroupRecipe;
use crate::bindings::lock_recipe::LockRecipe;
use crate::bindings::rwlock_recipe::RwlockRecipe;
use crate::bindings::semaphore_recipe::SemaphoreRecipe;
use crate::bindings::{ClaimHeld, Held, LeaderInfo, Leadership, Lease, Membership, Mode, RwHeld};
use crate::error::RecipeError;
use crate::keeper::Live;
use crate::loss::Lost;

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

/// A handle on one claim recipe instance (`wazoo:recipes/claim-recipe`): the one handle of every
/// family served from its description ([`crate::family`]).
pub struct ClaimHandle {
    sandbox: Sandbox,
    bindings: ClaimRecipe,
    node: Option<String>,
}

impl HasBindings for ClaimHandle {
    type Bindings = ClaimRecipe;
}

handle_basics!(ClaimHandle);

impl ClaimHandle {
    /// Blocks until a claim at `path` is held, with `data` as the contender's node data, or
    /// `timeout` passes.
    pub async fn acquire(
        &mut self,
        path: &str,
        data: &[u8],
        timeout: Option<Duration>,
    ) -> Result<ClaimHeld, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        let held = call!(self, wazoo_recipes_claim.call_acquire(path, data, ms))?;
        self.claimed(Some(&held.node));
        Ok(held)
    }

    pub async fn release(&mut self) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_claim.call_release())?;
        self.claimed(None);
        Ok(())
    }
}
