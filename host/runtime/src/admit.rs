//! What a guest's call is admitted under: the host's limits on operations and bytes per second,
//! nodes, children listed, data and watches armed, checked (and counted) before a request goes
//! to ZooKeeper. Below every import that checks them (`znode`, `watch`, `persistent`,
//! `session`), so none of those needs another for its limits.

use std::sync::atomic::Ordering;

use crate::bindings::types::ZkError;
use crate::state::HostState;
use crate::stats::Stats;

impl HostState {
    /// Counts a call refused for a sandbox limit, for the host and for the version it runs.
    pub(crate) fn limit_hit(&self) {
        Stats::bump(&self.shared.stats.limit_hits);
        if let Some(usage) = &self.version_usage {
            Stats::bump(&usage.limit_hits);
        }
    }

    /// Counts a ZooKeeper operation, refused once the host's operations per second are spent.
    pub(crate) fn count_call(&self) -> Result<(), ZkError> {
        // A release held back goes before whatever this call sends.
        self.flush_held_back();
        let per_sec = self.shared.limits.ops_per_sec;
        if !self.shared.usage.take_op(per_sec) {
            self.limit_hit();
            return Err(ZkError::LimitExceeded(format!(
                "more than {per_sec} ZooKeeper operations per second"
            )));
        }
        Stats::bump(&self.shared.stats.calls);
        Ok(())
    }

    /// Room for `n` more nodes under the host's node limit.
    pub(crate) fn admit_nodes(&self, n: usize) -> Result<(), ZkError> {
        let max = self.shared.limits.max_znodes;
        let now = self.shared.usage.znodes.load(std::sync::atomic::Ordering::Relaxed);
        if max > 0 && now.max(0) as u64 + n as u64 > max {
            self.limit_hit();
            return Err(ZkError::LimitExceeded(format!("{now} nodes created; the limit is {max}")));
        }
        Ok(())
    }

    pub(crate) fn nodes_changed(&self, delta: i64) {
        self.shared.usage.znodes.fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
    }

    /// A listing of at most the limit's children.
    pub(crate) fn check_children(&self, n: usize) -> Result<(), ZkError> {
        let max = self.shared.limits.max_children;
        if n > max {
            self.limit_hit();
            return Err(ZkError::LimitExceeded(format!(
                "the node has {n} children; a listing returns at most {max}"
            )));
        }
        Ok(())
    }

    /// Data within the per-node limit and the bytes-per-second budget (which it then spends).
    pub(crate) fn check_data(&self, data: &[u8]) -> Result<(), ZkError> {
        let max = self.shared.limits.max_data_bytes;
        if data.len() > max {
            self.limit_hit();
            return Err(ZkError::LimitExceeded(format!(
                "node data is {} bytes; the limit is {max}",
                data.len()
            )));
        }
        let per_sec = self.shared.limits.bytes_per_sec;
        if !self.shared.usage.take_bytes(per_sec, data.len()) {
            self.limit_hit();
            return Err(ZkError::LimitExceeded(format!("more than {per_sec} bytes written per second")));
        }
        Ok(())
    }

    /// Room for one more watch, and one more operation.
    pub(crate) fn admit_watch(&self) -> Result<(), ZkError> {
        let max = self.shared.limits.max_watches;
        let now = self.shared.usage.watches.load(Ordering::Relaxed);
        if now >= max {
            self.limit_hit();
            return Err(ZkError::LimitExceeded(format!("{now} watches armed; the limit is {max}")));
        }
        self.count_call()
    }
}
