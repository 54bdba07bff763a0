//! Fault hooks, driven by tests and the chaos suite: faults that a real network produces only
//! by chance, produced here on command.

use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, Default)]
pub struct Faults {
    lost_create_replies: AtomicU32,
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
        self.lost_create_replies
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}
