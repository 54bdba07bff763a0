//! Fault hooks, driven by tests and the chaos suite: faults that a real network produces only
//! by chance, produced here on command.

use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, Default)]
pub struct Faults {
    lost_create_replies: AtomicU32,
    dropped_unwaited_deletes: AtomicU32,
    lost_fold_replies: AtomicU32,
    /// Not a fault, what the host did about one: how many unwaited deletes whose reply was lost
    /// were settled, and how many of those found their node still there and deleted it.
    after_loss: tokio::sync::watch::Sender<(u32, u32)>,
}

impl Faults {
    /// The next `n` creates are performed on the server, then answered with `connection-loss`:
    /// the guest sees exactly what a reply lost on the wire looks like.
    pub fn lose_create_replies(&self, n: u32) {
        self.lost_create_replies.store(n, Ordering::SeqCst);
    }

    /// How many lost replies are still to be produced.
    pub fn pending_lost_create_replies(&self) -> u32 {
        self.lost_create_replies.load(Ordering::SeqCst)
    }

    pub(crate) fn take_lost_create_reply(&self) -> bool {
        take_one(&self.lost_create_replies)
    }

    /// The next `n` deletes of `znode.delete-unwaited` are never sent, and settled as if their
    /// reply was lost: a request lost on its way, so the node is still there when the host looks.
    pub fn drop_unwaited_deletes(&self, n: u32) {
        self.dropped_unwaited_deletes.store(n, Ordering::SeqCst);
    }

    /// How many dropped unwaited deletes are still to be produced.
    pub fn pending_dropped_unwaited_deletes(&self) -> u32 {
        self.dropped_unwaited_deletes.load(Ordering::SeqCst)
    }

    pub(crate) fn take_dropped_unwaited_delete(&self) -> bool {
        take_one(&self.dropped_unwaited_deletes)
    }

    /// The next `n` hand-overs in one `multi` (a release and the next create,
    /// [`crate::Claim::requeue`]) are performed on the server, then answered with
    /// `connection-loss`.
    pub fn lose_fold_replies(&self, n: u32) {
        self.lost_fold_replies.store(n, Ordering::SeqCst);
    }

    /// How many lost hand-over replies are still to be produced.
    pub fn pending_lost_fold_replies(&self) -> u32 {
        self.lost_fold_replies.load(Ordering::SeqCst)
    }

    pub(crate) fn take_lost_fold_reply(&self) -> bool {
        take_one(&self.lost_fold_replies)
    }

    /// Waits until the host has settled `n` unwaited deletes whose reply was lost (or never
    /// came: a dropped one) in all, and returns how many of those found their node still there,
    /// so the ledger deleted it.
    pub async fn settled_after_loss(&self, n: u32) -> u32 {
        let mut seen = self.after_loss.subscribe();
        let settled = seen.wait_for(|&(settled, _)| settled >= n).await.expect("the sender lives in self");
        settled.1
    }

    /// An unwaited delete whose reply was lost is settled: its node was `deleted_again` by the
    /// ledger, or found gone.
    pub(crate) fn settled_lost(&self, deleted_again: bool) {
        self.after_loss.send_modify(|(settled, again)| {
            *settled += 1;
            *again += u32::from(deleted_again);
        });
    }
}

/// Takes one of the faults still to be produced from `counter`: whether there was one.
fn take_one(counter: &AtomicU32) -> bool {
    counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
}
