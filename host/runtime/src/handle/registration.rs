//! The registration handle: a node kept present while its registrant tends it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{HasBindings, Sandbox};
use crate::bindings::registration_recipe::RegistrationRecipe;
use crate::bindings::Tended;
use crate::claim::Lost;
use crate::error::RecipeError;
use crate::keeper::Live;

/// A handle on one registration recipe instance.
pub struct RegistrationHandle {
    sandbox: Sandbox,
    bindings: RegistrationRecipe,
    node: Option<String>,
}

impl HasBindings for RegistrationHandle {
    type Bindings = RegistrationRecipe;
}

handle_basics!(RegistrationHandle);

impl RegistrationHandle {
    /// Makes the node at `path` holding `data`: ephemeral, or persistent with `ttl`.
    pub async fn register(
        &mut self,
        path: &str,
        data: &[u8],
        ttl: Option<Duration>,
    ) -> Result<(), RecipeError> {
        let ttl_ms = ttl.map(|t| t.as_millis().try_into().unwrap_or(u64::MAX));
        call!(self, wazoo_recipes_registration.call_register(path, data, ttl_ms))?;
        self.claimed(Some(path));
        Ok(())
    }

    /// Waits until the node is deleted or changed, or `timeout` passes, and puts it right.
    pub async fn tend(&mut self, timeout: Option<Duration>) -> Result<Tended, RecipeError> {
        let ms = timeout.map(|t| t.as_millis().try_into().unwrap_or(u64::MAX));
        Ok(call!(self, wazoo_recipes_registration.call_tend(ms))?)
    }

    /// Deletes the node, if it is still this registration's.
    pub async fn unregister(&mut self) -> Result<(), RecipeError> {
        call!(self, wazoo_recipes_registration.call_unregister())?;
        self.claimed(None);
        Ok(())
    }
}
