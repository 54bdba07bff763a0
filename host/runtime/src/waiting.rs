//! `watch.wait-any`: one wait on several one-shot watchers, so a guest waiting on two things at
//! once (the leader's node and its acknowledgement, the votes and the coordinator) blocks on both
//! rather than polling one while it waits on the other.

use std::task::Poll;
use std::time::Duration;

use wasmtime::component::Resource;

use crate::bindings::types::{WatchEvent, ZkError};
use crate::slots::WatchSlot;
use crate::state::HostState;
use crate::watch::{await_slot, fire, session_ended};

type Reply<T> = wasmtime::Result<Result<T, ZkError>>;

impl HostState {
    /// Blocks until one of `watchers` fires (the first in the list that fired already, at once),
    /// and returns its position and event; the session's end is `session-expired`, `timeout_ms`
    /// passing `timeout`. The watches are awaited where they are, in the table: a call cancelled
    /// meanwhile leaves each armed, as a cancelled `wait` does.
    pub(crate) async fn wait_on_any(
        &mut self,
        watchers: Vec<Resource<WatchSlot>>,
        timeout_ms: Option<u64>,
    ) -> Reply<(u32, WatchEvent)> {
        if watchers.is_empty() {
            return Ok(Err(ZkError::InvalidArgument("wait-any: no watchers to wait on".into())));
        }
        let answer = |at: usize, e: WatchEvent| match session_ended(e.kind) {
            true => Err(ZkError::SessionExpired),
            false => Ok((at as u32, e)),
        };
        for (at, watcher) in watchers.iter().enumerate() {
            let slot = self.table.get_mut(watcher)?;
            if slot.fired.is_some() {
                let e = await_slot(&self.shared.stats, slot, Some(0)).await;
                return Ok(e.and_then(|e| answer(at, e)));
            }
            if slot.pending.is_none() {
                return Ok(Err(ZkError::Other("watch is no longer armed".into())));
            }
        }
        let table = &mut self.table;
        let any = std::future::poll_fn(|cx| {
            for (at, watcher) in watchers.iter().enumerate() {
                let slot = match table.get_mut(watcher) {
                    Ok(slot) => slot,
                    Err(e) => return Poll::Ready(Err(e)),
                };
                if let Some(pending) = slot.pending.as_mut() {
                    if let Poll::Ready(raw) = pending.as_mut().poll(cx) {
                        return Poll::Ready(Ok((at, raw)));
                    }
                }
            }
            Poll::Pending
        });
        let fired = match timeout_ms {
            None => Some(any.await),
            Some(ms) => tokio::time::timeout(Duration::from_millis(ms), any).await.ok(),
        };
        let Some(fired) = fired else { return Ok(Err(ZkError::Timeout)) };
        let (at, raw) = fired?;
        let slot = self.table.get_mut(&watchers[at])?;
        let e = fire(&self.shared.stats, slot, raw);
        Ok(answer(at, e))
    }
}
