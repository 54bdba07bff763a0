//! The cache handle: one cache recipe instance on one session (`Watching`, above the host,
//! keeps a cache going across sessions).

use std::sync::Arc;
use std::time::Duration;

use super::{HasBindings, Sandbox};
use crate::bindings::cache_recipe::CacheRecipe;
use crate::bindings::{CacheChange, CachedNode};
use crate::error::RecipeError;
use crate::keeper::Live;
use crate::loss::Lost;

fn millis(timeout: Option<Duration>) -> Option<u64> {
    timeout.map(|t| t.as_millis().try_into().unwrap_or(u64::MAX))
}

/// A handle on one cache recipe instance.
pub struct CacheHandle {
    sandbox: Sandbox,
    bindings: CacheRecipe,
    node: Option<String>,
}

impl HasBindings for CacheHandle {
    type Bindings = CacheRecipe;
}

handle_basics!(CacheHandle);

impl CacheHandle {
    /// Starts caching `path`: with `recursive`, the whole tree below it too.
    pub async fn start(&mut self, path: &str, recursive: bool) -> Result<(), RecipeError> {
        Ok(call!(self, wazoo_recipes_cache.call_start(path, recursive))?)
    }

    /// The next change, or `timeout` once `timeout` has passed without one.
    pub async fn next(&mut self, timeout: Option<Duration>) -> Result<CacheChange, RecipeError> {
        Ok(call!(self, wazoo_recipes_cache.call_next(millis(timeout)))?)
    }

    /// The cached node at `path`, as reported so far.
    pub async fn get(&mut self, path: &str) -> Result<Option<CachedNode>, RecipeError> {
        Ok(call!(self, wazoo_recipes_cache.call_get(path)))
    }

    /// Every cached node, as reported so far, sorted by path.
    pub async fn nodes(&mut self) -> Result<Vec<CachedNode>, RecipeError> {
        Ok(call!(self, wazoo_recipes_cache.call_nodes()))
    }
}
