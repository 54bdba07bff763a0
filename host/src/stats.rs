//! Counters the host keeps about what guests do, read by tests (the herd check) and reports.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Stats {
    /// Watches armed by guests.
    pub watches_armed: AtomicU64,
    /// `watcher.wait` calls that returned a node event: each is one guest woken by ZooKeeper.
    pub watch_wakeups: AtomicU64,
    /// Host calls made by guests.
    pub calls: AtomicU64,
    /// Guest traps (including sandbox limits).
    pub traps: AtomicU64,
}

impl Stats {
    pub fn watch_wakeups(&self) -> u64 {
        self.watch_wakeups.load(Ordering::SeqCst)
    }

    pub fn watches_armed(&self) -> u64 {
        self.watches_armed.load(Ordering::SeqCst)
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
