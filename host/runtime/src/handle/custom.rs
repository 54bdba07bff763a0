//! The handles of custom recipes: `run` of the custom world, and any export called by name.

use std::sync::Arc;

use super::{HasBindings, Sandbox};
use crate::bindings::custom::Custom;
use crate::error::RecipeError;
use crate::keeper::Live;
use crate::loss::Lost;

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
    /// Takes up the ephemeral nodes of this session at `paths` that an instance of the same
    /// client made before (through a daemon of the group that is gone): the first create of
    /// one of these paths that finds this session's node there returns that node as if it had
    /// made it, and the node is this handle's from then on (a registration keeps its node, and
    /// its czxid, across the move). A node of another session is still `node-exists`.
    pub fn take_up(&mut self, paths: Vec<String>) {
        self.sandbox.store.data_mut().take_up = paths;
    }

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
            .and_then(|i| self.bindings.get_func(&mut self.sandbox.store, i))
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
