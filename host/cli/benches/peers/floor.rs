//! The protocol's floor for a lock acquire+release, measured by zookeeper-client alone (no wazoo
//! code): the requests a lock needs and nothing else, on a client of its own.
//!
//! - 2 round trips: the create of an ephemeral sequential node with Curator's protected prefix
//!   (`_c_<uuid>-lock-`, as the native lock names it) and the listing of its parent, sent
//!   together without waiting in between; then the delete, awaited.
//! - 1 round trip: the same, but the delete is sent without waiting, and the next operation's
//!   create and listing go right behind it (the server still commits two writes per operation).
//!
//! zookeeper-client sends each request when the method is called and only awaits the reply, so
//! requests leave in call order; ZooKeeper answers one session's requests in order. The library
//! leaves Nagle's algorithm on, which would hold the listing back until the create's reply: the
//! floor sets `TCP_NODELAY` on its own connection (only), found by its peer address with the
//! host's own helpers (`wazoo_runtime::nodelay`).

use anyhow::Context;
use std::collections::HashSet;
use wazoo_runtime::nodelay::{servers, set_nodelay, sockets_to};
use zookeeper_client::{Acls, Client, CreateMode};

/// One floor client looping acquire+release on a directory of its own.
pub struct Floor {
    client: Client,
    dir: String,
    /// 1 round trip: the node whose delete goes out with the next operation's requests.
    pending: Option<String>,
    one_trip: bool,
}

impl Floor {
    /// Connects a client of its own to `address` (`TCP_NODELAY` on its connection) and creates
    /// `dir` (persistent; its missing ancestors as containers). `one_trip`: the release rides
    /// with the next operation's requests.
    pub async fn start(address: &str, dir: &str, one_trip: bool) -> anyhow::Result<Floor> {
        let servers = servers(address).await;
        anyhow::ensure!(!servers.is_empty(), "floor: cannot resolve {address}");
        let before: HashSet<i32> = sockets_to(&servers).into_iter().collect();
        let client = Client::connector().connect(address).await?;
        let new: Vec<i32> = sockets_to(&servers).into_iter().filter(|fd| !before.contains(fd)).collect();
        anyhow::ensure!(
            new.iter().filter(|&&fd| set_nodelay(fd)).count() == 1,
            "floor: found {} new connections to {address}, wanted 1 to set TCP_NODELAY on",
            new.len()
        );
        let mut at = String::new();
        let parts: Vec<&str> = dir.trim_start_matches('/').split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            at = format!("{at}/{part}");
            let mode = if i + 1 == parts.len() { CreateMode::Persistent } else { CreateMode::Container };
            match client.create(&at, b"", &mode.with_acls(Acls::anyone_all())).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => return Err(e).with_context(|| format!("floor: creating {at}")),
            }
        }
        Ok(Floor { client, dir: dir.to_string(), pending: None, one_trip })
    }

    /// One acquire+release at the floor.
    pub async fn once(&mut self) -> anyhow::Result<()> {
        let prefix = format!("{}/_c_{}-lock-", self.dir, uuid::Uuid::new_v4());
        let previous = self.pending.take();
        // Sent in this order before any reply is awaited: the previous release (1 round trip
        // only), the create, the listing.
        let release = previous.as_deref().map(|node| self.client.delete(node, None));
        let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let created = self.client.create(&prefix, b"", &options);
        let listed = self.client.list_children(&self.dir);
        if let Some(release) = release {
            release.await.context("floor: delete")?;
        }
        let (_, sequence) = created.await.context("floor: create")?;
        let children = listed.await.context("floor: list")?;
        let node = format!("{prefix}{sequence}");
        // Held when it sorts first by its sequence, as Curator's rule says.
        let name = &node[self.dir.len() + 1..];
        let lowest = children.iter().min_by(|a, b| suffix(a).cmp(suffix(b)));
        anyhow::ensure!(
            lowest.map(String::as_str) == Some(name),
            "floor: {name} is not the lowest of {children:?}"
        );
        if self.one_trip {
            self.pending = Some(node);
        } else {
            self.client.delete(&node, None).await.context("floor: delete")?;
        }
        Ok(())
    }

    /// Deletes the node a 1-round-trip floor still holds, and the floor's directory.
    pub async fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(node) = self.pending.take() {
            self.client.delete(&node, None).await.context("floor: last delete")?;
        }
        let _ = self.client.delete(&self.dir, None).await;
        Ok(())
    }
}

/// The part of a lock node's name after its lock name: the sequence.
fn suffix(name: &str) -> &str {
    name.rsplit_once("-lock-").map_or(name, |(_, sequence)| sequence)
}
