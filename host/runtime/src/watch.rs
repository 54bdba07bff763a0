//! `wazoo:zk/watch`: one-shot watches as a resource. `wait` suspends the guest's fiber while the
//! host awaits the watch, so a recipe blocks in straight-line code without blocking a thread.

use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use wasmtime::component::Resource;
use zookeeper_client::{OneshotWatcher, WatchedEvent};

use crate::bindings::types::{EventKind, Stat as WitStat, WatchEvent, ZkError};
use crate::bindings::watch::{Host, HostWatcher};
use crate::error::from_client;
use crate::paths;
use crate::retry::{retry, READ_RETRIES};
use crate::slots::{OneShotGuard, WatchSlot};
use crate::state::HostState;
use crate::stats::Stats;

type Reply<T> = wasmtime::Result<Result<T, ZkError>>;

fn event(e: WatchedEvent) -> WatchEvent {
    e.into()
}

/// Whether `kind` says the session ended rather than the node changed.
pub(crate) fn session_ended(kind: EventKind) -> bool {
    matches!(kind, EventKind::SessionExpired | EventKind::SessionClosed)
}

/// Awaits `slot`'s watch for at most `timeout_ms` (none: without limit): the event, kept in the
/// slot, or `timeout` (the watch stays armed). A node event counts as a guest woken.
pub(crate) async fn await_slot(
    stats: &Stats,
    slot: &mut WatchSlot,
    timeout_ms: Option<u64>,
) -> Result<WatchEvent, ZkError> {
    if let Some(fired) = &slot.fired {
        return Ok(event(fired.clone()));
    }
    let Some(pending) = slot.pending.as_mut() else {
        return Err(ZkError::Other("watch is no longer armed".into()));
    };
    let fired = match timeout_ms {
        None => Some(pending.await),
        Some(ms) => tokio::time::timeout(Duration::from_millis(ms), pending).await.ok(),
    };
    let Some(raw) = fired else { return Err(ZkError::Timeout) };
    Ok(fire(stats, slot, raw))
}

/// Keeps the event `raw` that `slot`'s watch fired with, and returns it. A node event counts as a
/// guest woken.
pub(crate) fn fire(stats: &Stats, slot: &mut WatchSlot, raw: WatchedEvent) -> WatchEvent {
    let e = event(raw.clone());
    slot.pending = None;
    if let Some(guard) = slot.guard.as_mut() {
        guard.fired();
    }
    slot.fired = Some(raw);
    if !session_ended(e.kind) {
        Stats::bump(&stats.watch_wakeups);
    }
    e
}

impl HostState {
    /// A watch ZooKeeper has registered, counted against the host's watch limit until dropped.
    /// Also sets again the persistent watches of `path`, whose mode the one-shot watch just
    /// replaced on the server (see `persistent`), and has them set again when it is dropped
    /// before it fired (dropping it removes the path's watch from the server).
    pub(crate) async fn slot(&mut self, watcher: OneshotWatcher, path: &str) -> WatchSlot {
        self.shared.stats.armed();
        let counted = self.shared.usage.watches.clone();
        counted.fetch_add(1, Ordering::Relaxed);
        let mut slot = WatchSlot::new(watcher, counted);
        slot.guard = Some(OneShotGuard::set(&self.live, path).await);
        slot
    }

    async fn arm(&mut self, watcher: OneshotWatcher, path: &str) -> wasmtime::Result<Resource<WatchSlot>> {
        let slot = self.slot(watcher, path).await;
        Ok(self.table.push(slot)?)
    }
}

impl HostWatcher for HostState {
    async fn wait(&mut self, slot: Resource<WatchSlot>, timeout_ms: Option<u64>) -> Reply<WatchEvent> {
        let watch = self.table.get_mut(&slot)?;
        Ok(await_slot(&self.shared.stats, watch, timeout_ms).await)
    }

    async fn changed(&mut self, slot: Resource<WatchSlot>, timeout_ms: Option<u64>) -> Reply<WatchEvent> {
        Ok(match self.wait(slot, timeout_ms).await? {
            Ok(e) if session_ended(e.kind) => Err(ZkError::SessionExpired),
            other => other,
        })
    }

    async fn drop(&mut self, slot: Resource<WatchSlot>) -> wasmtime::Result<()> {
        // Dropping the future leaves ZooKeeper's one-shot watch to fire into nothing.
        self.table.delete(slot)?;
        Ok(())
    }
}

impl Host for HostState {
    async fn exists_watch(&mut self, path: String) -> Reply<(Option<WitStat>, Resource<WatchSlot>)> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        if let Err(e) = self.admit_watch() {
            return Ok(Err(e));
        }
        let live = self.live.clone();
        let result = retry(READ_RETRIES, || live.client.check_and_watch_stat(&path)).await;
        match result {
            Ok((st, watcher)) => Ok(Ok((st.map(WitStat::from), self.arm(watcher, &path).await?))),
            Err(e) => Ok(Err(from_client(e))),
        }
    }

    async fn get_data_watch(&mut self, path: String) -> Reply<(Vec<u8>, WitStat, Resource<WatchSlot>)> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        if let Err(e) = self.admit_watch() {
            return Ok(Err(e));
        }
        let live = self.live.clone();
        let result = retry(READ_RETRIES, || live.client.get_and_watch_data(&path)).await;
        match result {
            Ok((data, st, watcher)) => Ok(Ok((data, st.into(), self.arm(watcher, &path).await?))),
            Err(e) => Ok(Err(from_client(e))),
        }
    }

    async fn get_children_watch(
        &mut self,
        path: String,
    ) -> Reply<(Vec<String>, WitStat, Resource<WatchSlot>)> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        if let Err(e) = self.admit_watch() {
            return Ok(Err(e));
        }
        let live = self.live.clone();
        let result = retry(READ_RETRIES, || live.client.get_and_watch_children(&path)).await;
        match result {
            Ok((children, st, watcher)) => match self.check_children(children.len()) {
                Ok(()) => Ok(Ok((children, st.into(), self.arm(watcher, &path).await?))),
                Err(e) => {
                    // Dropped unfired: the path's persistent watches are set again.
                    drop(self.slot(watcher, &path).await);
                    Ok(Err(e))
                }
            },
            Err(e) => Ok(Err(from_client(e))),
        }
    }

    async fn wait_for_change(&mut self, path: String, timeout_ms: Option<u64>) -> Reply<()> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        if let Err(e) = self.admit_watch() {
            return Ok(Err(e));
        }
        let live = self.live.clone();
        // getData, not exists: a node already gone leaves no watch behind.
        let watcher = match retry(READ_RETRIES, || live.client.get_and_watch_data(&path)).await {
            Ok((_, _, watcher)) => watcher,
            Err(zookeeper_client::Error::NoNode) => return Ok(Ok(())),
            Err(e) => return Ok(Err(from_client(e))),
        };
        // Counted against the watch limit while it is awaited, dropped with the call.
        let mut slot = self.slot(watcher, &path).await;
        Ok(match await_slot(&self.shared.stats, &mut slot, timeout_ms).await {
            Ok(e) if session_ended(e.kind) => Err(ZkError::SessionExpired),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        })
    }

    async fn wait_any(
        &mut self,
        watchers: Vec<Resource<WatchSlot>>,
        timeout_ms: Option<u64>,
    ) -> Reply<(u32, WatchEvent)> {
        self.wait_on_any(watchers, timeout_ms).await
    }
}

// `watch.wait-any`: one wait on several one-shot watchers, so a guest waiting on two things at
// once (the leader's node and its acknowledgement, the votes and the coordinator) blocks on both
// rather than polling one while it waits on the other.
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
        let max = self.shared.limits.max_watches;
        if watchers.len() > max {
            Stats::bump(&self.shared.stats.limit_hits);
            return Ok(Err(ZkError::LimitExceeded(format!(
                "wait-any on {} watchers; the watch limit is {max}",
                watchers.len()
            ))));
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
