//! `wazoo:zk/session` and `wazoo:zk/types`: what a guest may know about its session.

use crate::bindings::session::{Host, SessionInfo};
use crate::bindings::types::ZkError;
use crate::error::from_client;
use crate::paths;
use crate::retry::{retry, READ_RETRIES};
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

    async fn owns(&mut self, path: String, data: Option<Vec<u8>>) -> wasmtime::Result<Result<bool, ZkError>> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        let live = self.live.clone();
        if let Err(e) = self.count_call() {
            return Ok(Err(e));
        }
        let me = live.session_id();
        Ok(match data {
            None => match retry(READ_RETRIES, || live.client.check_stat(&path)).await {
                Ok(stat) => Ok(stat.is_some_and(|s| s.ephemeral_owner == me)),
                Err(e) => Err(from_client(e)),
            },
            Some(want) => match retry(READ_RETRIES, || live.client.get_data(&path)).await {
                Ok((found, stat)) => Ok(stat.ephemeral_owner == me && found == want),
                Err(zookeeper_client::Error::NoNode) => Ok(false),
                Err(e) => Err(from_client(e)),
            },
        })
    }
}

impl crate::bindings::types::Host for HostState {}
