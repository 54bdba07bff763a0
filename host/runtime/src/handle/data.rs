//! The handles of the data recipes: barrier (and double barrier), queue, configuration and
//! counter, two-phase commit.

use std::sync::Arc;
use std::time::Duration;

use super::{HasBindings, Sandbox};
use crate::bindings::barrier_recipe::BarrierRecipe;
use crate::bindings::queue_recipe::QueueRecipe;
use crate::bindings::transaction_recipe::TransactionRecipe;
use crate::bindings::{Ballot, ConfigBindings, CounterFormat, Entry, Item, Outcome, TxMode, ZkError};
use crate::error::RecipeError;
use crate::keeper::Live;
use crate::loss::Lost;

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

/// A handle on one configuration (and counter) recipe instance.
pub struct ConfigHandle {
    sandbox: Sandbox,
    bindings: ConfigBindings,
    node: Option<String>,
}

impl HasBindings for ConfigHandle {
    type Bindings = ConfigBindings;
}

handle_basics!(ConfigHandle);

impl ConfigHandle {
    /// The value at `path`, or none.
    pub async fn get(&mut self, path: &str) -> Result<Option<Entry>, RecipeError> {
        self.sandbox.enter()?;
        let store = &mut self.sandbox.store;
        let result = match &self.bindings {
            ConfigBindings::Current(b) => b.wazoo_recipes_config().call_get(store, path).await,
            ConfigBindings::KazooOnly { bindings, .. } => {
                let got = bindings.wazoo_recipes_config().call_get(store, path).await;
                got.map(|r| r.map(|entry| entry.map(Entry::from)))
            }
        };
        Ok(self.sandbox.leave(result).await??)
    }

    /// Writes `data` (compare-and-set with `expected_version`); returns the new version.
    pub async fn set(
        &mut self,
        path: &str,
        data: &[u8],
        expected_version: Option<i32>,
    ) -> Result<i32, RecipeError> {
        self.sandbox.enter()?;
        let store = &mut self.sandbox.store;
        let result = match &self.bindings {
            ConfigBindings::Current(b) => {
                b.wazoo_recipes_config().call_set(store, path, data, expected_version).await
            }
            ConfigBindings::KazooOnly { bindings, .. } => {
                bindings.wazoo_recipes_config().call_set(store, path, data, expected_version).await
            }
        };
        Ok(self.sandbox.leave(result).await??)
    }

    /// Blocks until the version differs from `known`, or `timeout` passes.
    pub async fn watch(
        &mut self,
        path: &str,
        known: Option<i32>,
        timeout: Option<Duration>,
    ) -> Result<Option<Entry>, RecipeError> {
        let ms = timeout.map(|t| t.as_millis() as u64);
        self.sandbox.enter()?;
        let store = &mut self.sandbox.store;
        let result = match &self.bindings {
            ConfigBindings::Current(b) => b.wazoo_recipes_config().call_watch(store, path, known, ms).await,
            ConfigBindings::KazooOnly { bindings, .. } => {
                let seen = bindings.wazoo_recipes_config().call_watch(store, path, known, ms).await;
                seen.map(|r| r.map(|entry| entry.map(Entry::from)))
            }
        };
        Ok(self.sandbox.leave(result).await??)
    }

    /// The counter at `path` in kazoo's format (0 when absent).
    pub async fn counter(&mut self, path: &str) -> Result<i64, RecipeError> {
        self.counter_in(path, CounterFormat::Kazoo).await
    }

    /// Adds `delta` to the counter at `path` in kazoo's format; returns the new value.
    pub async fn add(&mut self, path: &str, delta: i64) -> Result<i64, RecipeError> {
        self.add_in(path, delta, CounterFormat::Kazoo).await
    }

    /// The counter at `path` stored in `format` (0 when absent).
    pub async fn counter_in(&mut self, path: &str, format: CounterFormat) -> Result<i64, RecipeError> {
        self.sandbox.enter()?;
        let result = match &self.bindings {
            ConfigBindings::Current(b) => {
                b.wazoo_recipes_counter().call_value_in(&mut self.sandbox.store, path, format).await
            }
            ConfigBindings::KazooOnly { bindings, built_against } => match self
                .kazoo_only(format, built_against)
            {
                Ok(()) => bindings.wazoo_recipes_counter().call_value(&mut self.sandbox.store, path).await,
                Err(e) => Ok(Err(e)),
            },
        };
        Ok(self.sandbox.leave(result).await??)
    }

    /// Adds `delta` to the counter at `path` stored in `format`; returns the new value.
    pub async fn add_in(
        &mut self,
        path: &str,
        delta: i64,
        format: CounterFormat,
    ) -> Result<i64, RecipeError> {
        self.sandbox.enter()?;
        let result = match &self.bindings {
            ConfigBindings::Current(b) => {
                b.wazoo_recipes_counter().call_add_in(&mut self.sandbox.store, path, delta, format).await
            }
            ConfigBindings::KazooOnly { bindings, built_against } => {
                match self.kazoo_only(format, built_against) {
                    Ok(()) => {
                        bindings.wazoo_recipes_counter().call_add(&mut self.sandbox.store, path, delta).await
                    }
                    Err(e) => Ok(Err(e)),
                }
            }
        };
        Ok(self.sandbox.leave(result).await??)
    }

    /// A component built against `wazoo:recipes@0.1.0` serves only kazoo's format: another is
    /// `invalid-argument`, naming the version it was built against.
    fn kazoo_only(&self, format: CounterFormat, built_against: &str) -> Result<(), ZkError> {
        if format == CounterFormat::Kazoo {
            return Ok(());
        }
        let recipe = self.sandbox.version.as_ref().map(|v| v.name.as_str()).unwrap_or("config");
        Err(ZkError::InvalidArgument(format!(
            "the counter format {} needs a config recipe built against wazoo:recipes@0.1.1 or later; \
             {recipe} was built against wazoo:recipes@{built_against}, whose counter has only the kazoo format",
            format.name()
        )))
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
