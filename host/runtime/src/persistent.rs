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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use wasmtime::component::Resource;
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher, SessionState};

use crate::bindings::persistent::{Change, ChangeKind, Host, HostPersistentWatcher, Notice};
use crate::bindings::types::ZkError;
use crate::error::{from_client, retry, READ_RETRIES};
use crate::keeper::Live;
use crate::paths;
use crate::state::HostState;
use crate::stats::Stats;

type Reply<T> = wasmtime::Result<Result<T, ZkError>>;

/// The most notices a watcher keeps unread; past it, the queue is replaced by one `missed`.
pub(crate) const QUEUE: usize = 1024;

/// The most notices all the watchers of one host (one tenant) keep unread together: past it, the
/// queue a notice arrives for is replaced by one `missed`. So a guest that makes many watchers
/// and reads none makes its host hold at most this many, whatever its watch limit.
pub(crate) const HOST_QUEUE: usize = 16 * 1024;

/// The paths one session watches persistently: per path, how many plain and how many recursive
/// watchers, and their queues (to tell them of a repair's window).
#[derive(Debug, Default)]
pub(crate) struct Watched(Mutex<HashMap<String, Path>>);

#[derive(Debug, Default)]
struct Path {
    counts: [usize; 2],
    queues: Vec<std::sync::Weak<Queue>>,
}

impl Watched {
    fn add(&self, path: &str, recursive: bool, queue: &Arc<Queue>) {
        let mut watched = self.0.lock().unwrap();
        let entry = watched.entry(path.to_string()).or_default();
        entry.counts[usize::from(recursive)] += 1;
        entry.queues.push(Arc::downgrade(queue));
    }

    fn remove(&self, path: &str, recursive: bool, queue: &Arc<Queue>) {
        let mut watched = self.0.lock().unwrap();
        if let Some(entry) = watched.get_mut(path) {
            let count = &mut entry.counts[usize::from(recursive)];
            *count = count.saturating_sub(1);
            entry.queues.retain(|q| q.upgrade().is_some_and(|q| !Arc::ptr_eq(&q, queue)));
            if entry.counts == [0, 0] {
                watched.remove(path);
            }
        }
    }

    fn modes(&self, path: &str) -> Option<[usize; 2]> {
        self.0.lock().unwrap().get(path).map(|entry| entry.counts)
    }

    /// Whether any persistent watch of this session is on `path`.
    pub(crate) fn contains(&self, path: &str) -> bool {
        self.modes(path).is_some()
    }

    /// Tells every watcher of `path` that changes may have gone unreported.
    fn missed(&self, path: &str) {
        let queues: Vec<Arc<Queue>> = match self.0.lock().unwrap().get(path) {
            Some(entry) => entry.queues.iter().filter_map(std::sync::Weak::upgrade).collect(),
            None => return,
        };
        for queue in queues {
            queue.push(Notice::Missed);
        }
    }
}

impl Live {
    /// Sets again the persistent modes this session watches `path` with (plain first, recursive
    /// last: both requests go out at once), after something else changed the server's mode for
    /// it, then tells the path's watchers `missed`: until the server had the modes back, a
    /// change may have gone unreported. The extra watchers the client makes for this are dropped
    /// at once; the client keeps the server's watch while the real ones remain.
    pub(crate) async fn repair_persistent(&self, path: &str) {
        let Some([plain, recursive]) = self.persistent.modes(path) else { return };
        // zookeeper-client sends a request when it is called, so these go out back to back.
        let plain = (plain > 0).then(|| self.client.watch(path, AddWatchMode::Persistent));
        let recursive = (recursive > 0).then(|| self.client.watch(path, AddWatchMode::PersistentRecursive));
        for (mode, added) in [("persistent", plain), ("recursive", recursive)] {
            if let Some(added) = added {
                if let Err(e) = added.await {
                    tracing::debug!(path, mode, error = %e, "setting a watch again");
                }
            }
        }
        self.persistent.missed(path);
    }

    /// [`Live::repair_persistent`] in the background, if `path` is watched persistently.
    pub(crate) fn repair_later(self: &Arc<Self>, path: &str) {
        if !self.persistent.contains(path) {
            return;
        }
        let (live, path) = (self.clone(), path.to_string());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { live.repair_persistent(&path).await });
        }
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

/// What the task feeding a watcher leaves for the guest. Its notices count against its host's
/// budget ([`HOST_QUEUE`]) as well as its own ([`QUEUE`]).
#[derive(Debug, Default)]
struct Queue {
    notices: Mutex<(VecDeque<Notice>, bool)>,
    ready: Notify,
    /// Notices queued by every watcher of the host.
    host: Arc<AtomicUsize>,
}

impl Queue {
    fn new(host: Arc<AtomicUsize>) -> Queue {
        Queue { notices: Mutex::default(), ready: Notify::new(), host }
    }

    fn push(&self, notice: Notice) {
        let mut q = self.notices.lock().unwrap();
        if q.0.len() >= QUEUE || self.host.load(Ordering::Relaxed) >= HOST_QUEUE {
            // Too many unread: they go, and the guest reads everything again.
            self.host.fetch_sub(q.0.len(), Ordering::Relaxed);
            q.0.clear();
            q.0.push_back(Notice::Missed);
            self.host.fetch_add(1, Ordering::Relaxed);
        }
        if !(matches!(notice, Notice::Missed) && matches!(q.0.back(), Some(Notice::Missed))) {
            q.0.push_back(notice);
            self.host.fetch_add(1, Ordering::Relaxed);
        }
        drop(q);
        self.ready.notify_one();
    }

    fn end(&self) {
        self.notices.lock().unwrap().1 = true;
        self.ready.notify_one();
    }

    /// The next notice, `Err(())` once the session ended and every notice was read, or `None`.
    fn pop(&self) -> Option<Result<Notice, ()>> {
        let mut q = self.notices.lock().unwrap();
        match q.0.pop_front() {
            Some(notice) => {
                self.host.fetch_sub(1, Ordering::Relaxed);
                Some(Ok(notice))
            }
            None if q.1 => Some(Err(())),
            None => None,
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let left = self.notices.get_mut().map(|q| q.0.len()).unwrap_or(0);
        self.host.fetch_sub(left, Ordering::Relaxed);
    }
}

/// Moves `watcher`'s events into `queue` until the session ends. After a reconnect it sets the
/// path's persistent watches again before it reports `missed`: zookeeper-client 0.11 sets only
/// one-shot watches again on a new connection (its `resend_watches` never sends the persistent
/// ones), so without this a persistent watch would go quiet after the first broken connection.
async fn feed(mut watcher: PersistentWatcher, queue: Arc<Queue>, live: Arc<Live>, path: String) {
    let mut broken = false;
    loop {
        let event = watcher.changed().await;
        let kind = match event.event_type {
            EventType::NodeCreated => ChangeKind::Created,
            EventType::NodeDeleted => ChangeKind::Deleted,
            EventType::NodeDataChanged => ChangeKind::DataChanged,
            EventType::NodeChildrenChanged => ChangeKind::ChildrenChanged,
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
                        queue.push(Notice::Missed);
                    }
                    _ => {}
                }
                continue;
            }
        };
        queue.push(Notice::Changed(Change { kind, path: event.path }));
    }
}

/// The host side of a `persistent-watcher` resource: the queue its task fills. Dropping it ends
/// the task, which drops zookeeper-client's watcher (removing the watch from ZooKeeper) and
/// gives back its place under the watch limit.
pub struct PersistentSlot {
    queue: Arc<Queue>,
    task: tokio::task::JoinHandle<()>,
    live: Arc<Live>,
    path: String,
    recursive: bool,
    counted: Arc<AtomicUsize>,
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

impl HostPersistentWatcher for HostState {
    async fn next(&mut self, slot: Resource<PersistentSlot>, timeout_ms: Option<u64>) -> Reply<Notice> {
        let watcher = self.table.get(&slot)?;
        let queue = watcher.queue.clone();
        let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        loop {
            match queue.pop() {
                Some(Ok(notice)) => {
                    Stats::bump(&self.shared.stats.watch_wakeups);
                    return Ok(Ok(notice));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(path: &str) -> Notice {
        Notice::Changed(Change { kind: ChangeKind::DataChanged, path: path.into() })
    }

    #[test]
    fn a_full_queue_becomes_one_missed_and_then_fills_again() {
        let q = Queue::default();
        for i in 0..QUEUE {
            q.push(changed(&format!("/n{i}")));
        }
        q.push(changed("/last"));
        assert!(matches!(q.pop(), Some(Ok(Notice::Missed))));
        assert!(matches!(q.pop(), Some(Ok(Notice::Changed(c))) if c.path == "/last"));
        assert!(q.pop().is_none());
    }

    #[test]
    fn the_host_budget_turns_any_queue_past_it_into_missed() {
        let host = Arc::new(AtomicUsize::new(0));
        let queues: Vec<Queue> = (0..HOST_QUEUE / 512 + 1).map(|_| Queue::new(host.clone())).collect();
        for q in &queues {
            for i in 0..512 {
                q.push(changed(&format!("/n{i}")));
            }
        }
        assert!(host.load(Ordering::Relaxed) <= HOST_QUEUE + 2, "{}", host.load(Ordering::Relaxed));
        let last = queues.last().unwrap();
        assert!(matches!(last.pop(), Some(Ok(Notice::Missed))), "the queue past the budget says missed");
        drop(queues);
        assert_eq!(host.load(Ordering::Relaxed), 0, "dropped queues give their notices back");
    }

    #[test]
    fn missed_twice_in_a_row_is_said_once_and_the_end_comes_after_the_notices() {
        let q = Queue::default();
        q.push(Notice::Missed);
        q.push(Notice::Missed);
        q.push(changed("/a"));
        q.end();
        assert!(matches!(q.pop(), Some(Ok(Notice::Missed))));
        assert!(matches!(q.pop(), Some(Ok(Notice::Changed(_)))));
        assert!(matches!(q.pop(), Some(Err(()))));
        assert!(matches!(q.pop(), Some(Err(()))));
    }

    #[test]
    fn watched_paths_count_each_mode_and_tell_their_watchers() {
        let w = Watched::default();
        let (q1, q2, q3) =
            (Arc::new(Queue::default()), Arc::new(Queue::default()), Arc::new(Queue::default()));
        w.add("/a", true, &q1);
        w.add("/a", false, &q2);
        w.add("/a", true, &q3);
        assert_eq!(w.modes("/a"), Some([1, 2]));
        w.remove("/a", true, &q1);
        w.remove("/a", false, &q2);
        assert_eq!(w.modes("/a"), Some([0, 1]));
        w.missed("/a");
        assert!(q1.pop().is_none() && q2.pop().is_none());
        assert!(matches!(q3.pop(), Some(Ok(Notice::Missed))));
        w.remove("/a", true, &q3);
        assert!(!w.contains("/a"));
    }
}
