//! `wazoo:zk/session` and `wazoo:zk/types`: what a guest may know about its session.

use crate::bindings::session::{Host, SessionInfo};
use crate::state::HostState;

impl Host for HostState {
    async fn info(&mut self) -> wasmtime::Result<SessionInfo> {
        Ok(SessionInfo {
            id: self.live.session_id(),
            timeout_ms: self.live.client.session_timeout().as_millis() as u32,
            generation: self.live.generation,
        })
    }

    async fn unique_id(&mut self) -> wasmtime::Result<String> {
        Ok(uuid::Uuid::new_v4().to_string())
    }
}

impl crate::bindings::types::Host for HostState {}
