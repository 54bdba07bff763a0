//! The host's side of the WIT resources a guest holds: a one-shot `watcher` ([`WatchSlot`]), a
//! `persistent-watcher` ([`PersistentSlot`]), and the guard that repairs a path's persistent
//! watches when a one-shot watch on it goes ([`OneShotGuard`]). Below the generated bindings,
//! which name these types, and above the session they belong to.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use zookeeper_client::{OneshotWatcher, WatchedEvent};

use crate::keeper::Live;
use crate::watched::Queue;

/// The host side of a `watcher` resource (its methods are `wazoo:zk/watch`, in the `watch`
/// module): the armed watch, or the event it fired with. It counts against the host's watch
/// limit until it is dropped.
pub struct WatchSlot {
    // Dropped first: dropping the client's watcher before it fired sends the removal that
    // `guard` then repairs.
    pub(crate) pending: Option<Pin<Box<dyn Future<Output = WatchedEvent> + Send>>>,
    pub(crate) fired: Option<WatchedEvent>,
    live: Arc<AtomicUsize>,
    /// Sets the path's persistent watches again if this one is dropped before it fired.
    pub(crate) guard: Option<OneShotGuard>,
}

impl WatchSlot {
    pub(crate) fn new(watcher: OneshotWatcher, live: Arc<AtomicUsize>) -> WatchSlot {
        WatchSlot { pending: Some(Box::pin(watcher.changed())), fired: None, live, guard: None }
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        // The client's watcher goes before the guard, whatever the fields' order.
        self.pending = None;
    }
}

/// The host side of a `persistent-watcher` resource: the queue its task fills. Dropping it ends
/// the task, which drops zookeeper-client's watcher (removing the watch from ZooKeeper) and
/// gives back its place under the watch limit.
pub struct PersistentSlot {
    pub(crate) queue: Arc<Queue>,
    pub(crate) task: tokio::task::JoinHandle<()>,
    pub(crate) live: Arc<Live>,
    pub(crate) path: String,
    pub(crate) recursive: bool,
    pub(crate) counted: Arc<AtomicUsize>,
}

impl Drop for PersistentSlot {
    fn drop(&mut self) {
        self.task.abort();
        self.counted.fetch_sub(1, Ordering::Relaxed);
        // While other watchers of the path remain, the client sends no removal: the server
        // keeps the modes it has, which cover theirs.
        self.live.persistent.remove(&self.path, self.recursive, &self.queue);
    }
}

/// Held beside a one-shot watch on a path that may be watched persistently: dropped before the
/// watch fired (the client then asks the server to remove the path's watch, persistent modes
/// included), it sets the persistent modes again.
#[derive(Debug)]
pub(crate) struct OneShotGuard {
    live: Arc<Live>,
    path: String,
    armed: bool,
}

impl OneShotGuard {
    /// Guards a one-shot watch on `path` just set: if the path is watched persistently, sets its
    /// modes again now (the one-shot watch replaced them on the server). The guard exists before
    /// that repair is awaited, so a call cancelled meanwhile still repairs when dropped.
    pub(crate) async fn set(live: &Arc<Live>, path: &str) -> OneShotGuard {
        let guard = OneShotGuard { live: live.clone(), path: path.to_string(), armed: true };
        if live.persistent.contains(path) {
            live.repair_persistent(path).await;
        }
        guard
    }

    /// The watch fired: the client sends no removal for it.
    pub(crate) fn fired(&mut self) {
        self.armed = false;
    }
}

impl Drop for OneShotGuard {
    fn drop(&mut self) {
        if self.armed {
            self.live.repair_later(&self.path);
        }
    }
}
