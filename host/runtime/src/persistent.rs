//! `wazoo:zk/persistent`: persistent and recursive watches (ZooKeeper 3.6's `addWatch`) as a
//! resource that reports every change until it is dropped.
//!
//! A task per watcher moves zookeeper-client's events into a bounded queue the guest reads with
//! `next`: a guest that stops reading never makes the host hold more than [`QUEUE`] notices for
//! it (the older ones are dropped and `missed` is reported). A broken connection that comes back
//! in the same session is `missed` too: ZooKeeper does not replay to a persistent watch what
//! changed while the connection was down. And the task sets the watch again on the new
//! connection itself, which zookeeper-client 0.11 does not do for persistent watches.
//!
//! ZooKeeper 3.8 keeps one watch mode per path and connection (ZOOKEEPER-4466): a one-shot watch
//! set on a path this session watches persistently turns that watch into a one-shot one, and
//! removing it removes both. Handles share their host's session, so one handle's one-shot watch
//! could silently end another's persistent watch. The session therefore remembers the paths it
//! watches persistently ([`Watched`]), and after every one-shot watch set or dropped on such a
//! path, and every persistent watch added or dropped there, it sets the persistent modes again:
//! the plain one first, the recursive one last, which leaves the server with the union of both.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Resource;
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher, SessionState};

use crate::bindings::persistent::{Change, ChangeKind, Host, HostPersistentWatcher, Notice};
use crate::bindings::types::ZkError;
use crate::error::from_client;
use crate::keeper::Live;
use crate::paths;
use crate::retry::{retry, READ_RETRIES};
use crate::slots::PersistentSlot;
use crate::state::HostState;
use crate::stats::Stats;
use crate::watched::{self, Queue};

type Reply<T> = wasmtime::Result<Result<T, ZkError>>;

/// Moves `watcher`'s events into `queue` until the session ends. After a reconnect it sets the
/// path's persistent watches again before it reports `missed`: zookeeper-client 0.11 sets only
/// one-shot watches again on a new connection (its `resend_watches` never sends the persistent
/// ones), so without this a persistent watch would go quiet after the first broken connection.
async fn feed(mut watcher: PersistentWatcher, queue: Arc<Queue>, live: Arc<Live>, path: String) {
    let mut broken = false;
    loop {
        let event = watcher.changed().await;
        match event.event_type {
            EventType::Session => {
                let state = event.session_state;
                if state.is_terminated() {
                    // The client must not be asked for another event after this one.
                    queue.end();
                    return;
                }
                match state {
                    SessionState::Disconnected => broken = true,
                    SessionState::SyncConnected | SessionState::ConnectedReadOnly if broken => {
                        broken = false;
                        live.repair_persistent(&path).await;
                        queue.push(watched::Notice::Missed);
                    }
                    _ => {}
                }
            }
            kind => queue.push(watched::Notice::Changed { kind, path: event.path }),
        }
    }
}

/// A notice as the guest reads it.
fn wit(notice: watched::Notice) -> Notice {
    let (kind, path) = match notice {
        watched::Notice::Missed => return Notice::Missed,
        watched::Notice::Changed { kind, path } => (kind, path),
    };
    let kind = match kind {
        EventType::NodeCreated => ChangeKind::Created,
        EventType::NodeDeleted => ChangeKind::Deleted,
        EventType::NodeDataChanged => ChangeKind::DataChanged,
        // `feed` queues no session event.
        EventType::NodeChildrenChanged | EventType::Session => ChangeKind::ChildrenChanged,
    };
    Notice::Changed(Change { kind, path })
}

impl HostPersistentWatcher for HostState {
    async fn next(&mut self, slot: Resource<PersistentSlot>, timeout_ms: Option<u64>) -> Reply<Notice> {
        let watcher = self.table.get(&slot)?;
        let queue = watcher.queue.clone();
        let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        loop {
            match queue.pop() {
                Some(Ok(notice)) => {
                    Stats::bump(&self.shared.stats.watch_wakeups);
                    return Ok(Ok(wit(notice)));
                }
                Some(Err(())) => return Ok(Err(ZkError::SessionExpired)),
                None => {}
            }
            // `notify_one` leaves a permit when nobody waits, so a notice pushed since `pop`
            // wakes this at once.
            match deadline {
                None => queue.ready.notified().await,
                Some(at) => {
                    if tokio::time::timeout_at(at, queue.ready.notified()).await.is_err() {
                        return Ok(Err(ZkError::Timeout));
                    }
                }
            }
        }
    }

    async fn drop(&mut self, slot: Resource<PersistentSlot>) -> wasmtime::Result<()> {
        self.table.delete(slot)?;
        Ok(())
    }
}

impl Host for HostState {
    async fn add_watch(&mut self, path: String, recursive: bool) -> Reply<Resource<PersistentSlot>> {
        if let Err(why) = paths::check(&path) {
            return Ok(Err(ZkError::InvalidPath(why)));
        }
        if let Err(e) = self.admit_watch() {
            return Ok(Err(e));
        }
        let live = self.live.clone();
        let mode = if recursive { AddWatchMode::PersistentRecursive } else { AddWatchMode::Persistent };
        let queue = Arc::new(Queue::new(self.shared.usage.queued.clone()));
        // Known before the request goes out, so a one-shot watch set meanwhile repairs it.
        live.persistent.add(&path, recursive, &queue);
        let watcher = match retry(READ_RETRIES, || live.client.watch(&path, mode)).await {
            Ok(watcher) => watcher,
            Err(e) => {
                live.persistent.remove(&path, recursive, &queue);
                return Ok(Err(from_client(e)));
            }
        };
        // A plain watch added where a recursive one was takes the recursive mode's place.
        if !recursive && live.persistent.modes(&path).is_some_and(|[_, r]| r > 0) {
            live.repair_persistent(&path).await;
        }
        self.shared.stats.armed();
        let counted = self.shared.usage.watches.clone();
        counted.fetch_add(1, Ordering::Relaxed);
        let task = tokio::spawn(feed(watcher, queue.clone(), live.clone(), path.clone()));
        let slot = PersistentSlot { queue, task, live, path, recursive, counted };
        Ok(Ok(self.table.push(slot)?))
    }
}
