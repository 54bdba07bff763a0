//! What the web console ([`crate::console`]) shows of a served state: its client sessions and
//! claims through `listing` (as `Admin.ListSessions` and `Admin.ListClaims` give them), its
//! recipes, and its pulse (fed where each call is measured, `State::measured`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::listing;
use super::state::{zookeeper_status, State, SERVING};
use crate::console::{Look, Pulse, Shown, View};
use wazoo_runtime::registry::RecipeInfo;

use wazoo_proto as pb;

impl View for State {
    fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    fn zookeeper(&self) -> Look<'_, Result<(), String>> {
        Box::pin(async {
            match zookeeper_status(&self.host).await {
                (status, _) if status == SERVING => Ok(()),
                (status, _) => Err(status),
            }
        })
    }

    fn sessions(&self) -> pb::SessionList {
        listing::sessions(self)
    }

    fn claims<'a>(&'a self, prefix: &'a str) -> Look<'a, Result<pb::ClaimList, tonic::Status>> {
        Box::pin(listing::claims(self, prefix))
    }

    fn recipes(&self) -> anyhow::Result<Vec<RecipeInfo>> {
        self.host.recipes()
    }

    fn swaps(&self) -> u64 {
        self.host.registry().stats().swaps.load(Ordering::Relaxed)
    }

    fn follows_registry(&self) -> bool {
        self.rollout.is_some()
    }

    fn pulse(&self) -> &Pulse {
        &self.pulse
    }

    fn queues(&self) -> Vec<(String, i64)> {
        self.metrics.queue_depths(self.tenant.as_deref())
    }
}

/// The states served, as the console shows them (each with its token's hash).
pub(super) fn shown(states: &[(Option<[u8; 32]>, Arc<State>)]) -> Vec<Shown> {
    states
        .iter()
        .map(|(token, state)| {
            let view: Arc<dyn View> = state.clone();
            (*token, Arc::downgrade(&view))
        })
        .collect()
}
