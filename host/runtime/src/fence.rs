//! Fencing tokens checked where the protected resource lives: ZooKeeper's sequencer, as the
//! seed's recipe 004 ("CheckSequencer") describes it.
//!
//! A claim's node has a czxid, the zxid of the transaction that created it, and every later
//! node has a higher one: that is the holder's fencing token (`WAZOO_FENCING_TOKEN`, the
//! `fencing_token` of a daemon's `Claim`). A service the claim protects asks two things of it:
//!
//! - [`Fence::check`]: does the node still exist with that token? (The read is preceded by a
//!   `sync`, so a lagging server cannot vouch for a holder that is gone.)
//! - [`Fence::write`]: the guarded write. One multi checks the holder's node (it still exists,
//!   at the version read together with its czxid) and then sets the protected node at the
//!   version read together with the last token written there, so the write lands only while
//!   the holder holds and only at or above that token. A protected node records the token that
//!   wrote it: its data is the token in decimal, a newline, then the value ([`encode`]). A
//!   write that finds either node changed since it read them reads again and tries again.
//!
//! Only an exclusive claim's token fences anything: a lock, the write side of a read/write lock,
//! a leadership. Semaphore leases and read locks are held by several clients at once, and each
//! has a token of its own, so a higher one proves nothing about who else still holds.
//!
//! The multi can check the holder's node only by version (ZooKeeper's `check` knows no czxid):
//! a node deleted and created again under the same name, at the same version, between the read
//! and the multi would pass it. Lock nodes are sequential, so that takes their parent emptied,
//! reaped and made again within those milliseconds.

use zookeeper_client::{CreateMode, MultiWriteError, MultiWriteResult};

use crate::error::from_client;
use crate::paths;
use crate::zk::{Access, Zk};
use crate::ZkError;

/// How many times a write that lost a race reads again before it gives up.
const RACES: u32 = 100;

/// What [`Fence::check`] found at the holder's node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// The node exists with the token: its holder still holds.
    Holds,
    /// The node is gone: whoever held it no longer does.
    Gone,
    /// A node of that name exists with this other token.
    OtherToken(i64),
}

/// What [`Fence::write`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The value was written: the protected node's new version, and the token that wrote it
    /// before (none for a node this write created, or one never written fenced).
    Accepted { version: i32, previous: Option<i64> },
    /// Refused: the holder's node is gone.
    Gone,
    /// Refused: the holder's node has this other token.
    OtherToken(i64),
    /// Refused: the protected node was written with this higher token.
    Superseded { last: i64 },
}

/// Fenced checks and writes on one ZooKeeper session.
pub struct Fence {
    /// The session the checks and writes go on (a host's: `Live::zk`).
    pub zk: Zk,
    /// Who may use the nodes a write creates (a tenant's are its own).
    pub access: Access,
    /// The largest value a write takes.
    pub max_bytes: usize,
}

impl Fence {
    /// Whether `node` still exists with fencing token `token`.
    pub async fn check(&self, node: &str, token: i64) -> Result<Holder, ZkError> {
        paths::check_node(node).map_err(ZkError::InvalidPath)?;
        match self.zk.client.sync(node).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => return Err(from_client(e)),
        }
        let found = self.zk.client.check_stat(node).await.map_err(from_client)?;
        Ok(match found {
            None => Holder::Gone,
            Some(stat) if stat.czxid == token => Holder::Holds,
            Some(stat) => Holder::OtherToken(stat.czxid),
        })
    }

    /// Writes `value` to `path` for the holder of `node` with fencing token `token`: only while
    /// `node` exists with that token, and only if `path` was not written with a higher one.
    /// Creates `path` (and missing parents) on the first write.
    pub async fn write(&self, node: &str, token: i64, path: &str, value: &[u8]) -> Result<Written, ZkError> {
        paths::check_node(node).map_err(ZkError::InvalidPath)?;
        paths::check_node(path).map_err(ZkError::InvalidPath)?;
        if node == path {
            return Err(ZkError::InvalidArgument("the holder's node cannot be the protected one".into()));
        }
        let data = encode(token, value);
        if data.len() > self.max_bytes {
            return Err(ZkError::LimitExceeded(format!(
                "a fenced value is at most {} bytes with its token; this one is {}",
                self.max_bytes,
                data.len()
            )));
        }
        let create = CreateMode::Persistent.with_acls(self.access.acls());
        for _ in 0..RACES {
            let holder = match self.zk.client.check_stat(node).await.map_err(from_client)? {
                None => return Ok(Written::Gone),
                Some(stat) if stat.czxid != token => return Ok(Written::OtherToken(stat.czxid)),
                Some(stat) => stat,
            };
            let (last, version) = match self.zk.client.get_data(path).await {
                Ok((data, stat)) => (last_token(path, &data)?, Some(stat.version)),
                Err(zookeeper_client::Error::NoNode) => (None, None),
                Err(e) => return Err(from_client(e)),
            };
            if let Some(last) = last.filter(|last| *last > token) {
                return Ok(Written::Superseded { last });
            }
            let mut multi = self.zk.client.new_multi_writer();
            multi.add_check_version(node, holder.version).map_err(from_client)?;
            match version {
                Some(version) => multi.add_set_data(path, &data, Some(version)),
                None => multi.add_create(path, &data, &create),
            }
            .map_err(from_client)?;
            match multi.commit().await {
                Ok(results) => {
                    let version = match results.get(1) {
                        Some(MultiWriteResult::SetData { stat }) => stat.version,
                        _ => 0,
                    };
                    return Ok(Written::Accepted { version, previous: last });
                }
                // The holder's node changed (or went) since it was read: look again.
                Err(MultiWriteError::OperationFailed { index: 0, .. }) => {}
                // A first write under a missing parent.
                Err(MultiWriteError::OperationFailed {
                    index: 1,
                    source: zookeeper_client::Error::NoNode,
                }) if version.is_none() => match self.zk.client.mkdir(paths::parent(path), &create).await {
                    Ok(()) | Err(zookeeper_client::Error::NodeExists) => {}
                    Err(e) => return Err(from_client(e)),
                },
                // Another write got to the protected node first: read it again.
                Err(MultiWriteError::OperationFailed {
                    index: 1,
                    source:
                        zookeeper_client::Error::BadVersion
                        | zookeeper_client::Error::NodeExists
                        | zookeeper_client::Error::NoNode,
                }) => {}
                Err(MultiWriteError::OperationFailed { source, .. }) => return Err(from_client(source)),
                Err(MultiWriteError::RequestFailed { source }) => return Err(from_client(source)),
            }
        }
        Err(ZkError::Other(format!("{path} kept changing under {RACES} fenced writes; try again")))
    }
}

/// A fenced value as it is stored: the writer's token in decimal, a newline, the value.
pub fn encode(token: i64, value: &[u8]) -> Vec<u8> {
    let mut data = format!("{token}\n").into_bytes();
    data.extend_from_slice(value);
    data
}

/// The token and value of a fenced node's data; none if it is not one.
pub fn decode(data: &[u8]) -> Option<(i64, &[u8])> {
    let end = data.iter().position(|b| *b == b'\n')?;
    let token = std::str::from_utf8(&data[..end]).ok()?.parse().ok()?;
    Some((token, &data[end + 1..]))
}

/// The token that last wrote `path` (whose data is `data`): none for a node with no data yet.
fn last_token(path: &str, data: &[u8]) -> Result<Option<i64>, ZkError> {
    if data.is_empty() {
        return Ok(None);
    }
    match decode(data) {
        Some((token, _)) => Ok(Some(token)),
        None => Err(ZkError::InvalidArgument(format!(
            "{path} does not hold a fenced value (a token, a newline, the value)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_token() {
        assert_eq!(encode(42, b"a\nb"), b"42\na\nb");
        assert_eq!(decode(b"42\na\nb"), Some((42, &b"a\nb"[..])));
        assert_eq!(decode(b"-7\n"), Some((-7, &b""[..])));
        assert_eq!(decode(b"42"), None);
        assert_eq!(decode(b"x\ny"), None);
        assert_eq!(last_token("/p", b"").unwrap(), None);
        assert!(last_token("/p", b"plain").is_err());
    }
}
