//! What one ZooKeeper session watches persistently, and the queues its persistent watchers
//! fill: below the session ([`crate::keeper::Live`] keeps a [`Watched`]) and below the WIT
//! resources that read the queues (`slots`).
//!
//! ZooKeeper 3.8 keeps one watch mode per path and connection (ZOOKEEPER-4466): see
//! `persistent` for why the session remembers the paths it watches persistently.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The most notices a watcher keeps unread; past it, the queue is replaced by one `missed`.
pub(crate) const QUEUE: usize = 1024;

/// The most notices all the watchers of one host (one tenant) keep unread together: past it, the
/// queue a notice arrives for is replaced by one `missed`. So a guest that makes many watchers
/// and reads none makes its host hold at most this many, whatever its watch limit.
pub(crate) const HOST_QUEUE: usize = 16 * 1024;

/// What a persistent watcher tells its guest: the host's own form of the WIT `notice`, made one
/// when the guest reads it (`persistent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A node changed: `kind` is one of the node events (never `Session`).
    Changed { kind: zookeeper_client::EventType, path: String },
    /// Changes may have gone unreported: read everything again.
    Missed,
}

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
    pub(crate) fn add(&self, path: &str, recursive: bool, queue: &Arc<Queue>) {
        let mut watched = self.0.lock().unwrap();
        let entry = watched.entry(path.to_string()).or_default();
        entry.counts[usize::from(recursive)] += 1;
        entry.queues.push(Arc::downgrade(queue));
    }

    pub(crate) fn remove(&self, path: &str, recursive: bool, queue: &Arc<Queue>) {
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

    pub(crate) fn modes(&self, path: &str) -> Option<[usize; 2]> {
        self.0.lock().unwrap().get(path).map(|entry| entry.counts)
    }

    /// Whether any persistent watch of this session is on `path`.
    pub(crate) fn contains(&self, path: &str) -> bool {
        self.modes(path).is_some()
    }

    /// Tells every watcher of `path` that changes may have gone unreported.
    pub(crate) fn missed(&self, path: &str) {
        let queues: Vec<Arc<Queue>> = match self.0.lock().unwrap().get(path) {
            Some(entry) => entry.queues.iter().filter_map(std::sync::Weak::upgrade).collect(),
            None => return,
        };
        for queue in queues {
            queue.push(Notice::Missed);
        }
    }
}

/// What the task feeding a watcher leaves for the guest. Its notices count against its host's
/// budget ([`HOST_QUEUE`]) as well as its own ([`QUEUE`]).
#[derive(Debug, Default)]
pub(crate) struct Queue {
    notices: Mutex<(VecDeque<Notice>, bool)>,
    pub(crate) ready: Notify,
    /// Notices queued by every watcher of the host.
    host: Arc<AtomicUsize>,
}

impl Queue {
    pub(crate) fn new(host: Arc<AtomicUsize>) -> Queue {
        Queue { notices: Mutex::default(), ready: Notify::new(), host }
    }

    pub(crate) fn push(&self, notice: Notice) {
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

    pub(crate) fn end(&self) {
        self.notices.lock().unwrap().1 = true;
        self.ready.notify_one();
    }

    /// The next notice, `Err(())` once the session ended and every notice was read, or `None`.
    pub(crate) fn pop(&self) -> Option<Result<Notice, ()>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(path: &str) -> Notice {
        Notice::Changed { kind: zookeeper_client::EventType::NodeDataChanged, path: path.into() }
    }

    #[test]
    fn a_full_queue_becomes_one_missed_and_then_fills_again() {
        let q = Queue::default();
        for i in 0..QUEUE {
            q.push(changed(&format!("/n{i}")));
        }
        q.push(changed("/last"));
        assert!(matches!(q.pop(), Some(Ok(Notice::Missed))));
        assert!(matches!(q.pop(), Some(Ok(Notice::Changed { path, .. })) if path == "/last"));
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
        assert!(matches!(q.pop(), Some(Ok(Notice::Changed { .. }))));
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
