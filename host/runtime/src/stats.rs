//! Counters the host keeps about what guests do, read by tests (the herd check) and reports.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct Stats {
    /// Watches armed by guests (counted once ZooKeeper has registered them).
    pub watches_armed: AtomicU64,
    /// `watcher.wait` calls that returned a node event: each is one guest woken by ZooKeeper.
    pub watch_wakeups: AtomicU64,
    /// Host calls made by guests.
    pub calls: AtomicU64,
    /// Guest traps (including sandbox limits).
    pub traps: AtomicU64,
    /// Calls refused with `limit-exceeded` (rate, nodes, watches, listing, data size).
    pub limit_hits: AtomicU64,
    /// Releases sent in one `multi` with the create of the same handle's next node: a claim
    /// taken again at the back of its queue in one write ([`crate::Claim::requeue`]).
    pub folded: AtomicU64,
    armed: Notify,
}

impl Stats {
    pub fn watch_wakeups(&self) -> u64 {
        self.watch_wakeups.load(Ordering::SeqCst)
    }

    pub fn watches_armed(&self) -> u64 {
        self.watches_armed.load(Ordering::SeqCst)
    }

    /// Resolves once guests have armed at least `n` watches in all: a test's way to know a
    /// waiter is really waiting on ZooKeeper, not only queued.
    pub async fn armed_at_least(&self, n: u64) {
        loop {
            let notified = self.armed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.watches_armed() >= n {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn armed(&self) {
        Self::bump(&self.watches_armed);
        self.armed.notify_waiters();
    }
}

/// What the handles of one component version ([`crate::registry::Version`]) did since it was
/// loaded: a canary's record.
#[derive(Debug, Default)]
pub struct Usage {
    /// Calls into the component (an acquire, a release, …).
    pub calls: AtomicU64,
    /// Calls that trapped (a sandbox limit of memory or CPU time included).
    pub traps: AtomicU64,
    /// Host calls refused because a sandbox limit was reached (`limit-exceeded`).
    pub limit_hits: AtomicU64,
}
