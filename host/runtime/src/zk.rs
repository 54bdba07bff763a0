//! Plain ZooKeeper requests for the host's own callers (the daemon's group records, `wazoo zk`,
//! a node's checked deletion, the cleanup of a session's ephemerals), with the runtime's own
//! types: [`Stat`] and [`ZkError`] as a guest sees them, [`Access`] for ACLs, [`NodeMode`],
//! and [`Watch`] for a one-shot watch. zookeeper-client stays inside the runtime: no crate above
//! names it.
//!
//! Each request is sent when its method is called, not when its future is first polled, as
//! zookeeper-client does: requests made one after another share a round trip, and go out, and
//! are answered, in call order.

use std::future::Future;
use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, OneshotWatcher};

use crate::bindings::{EventKind, Stat, WatchEvent, ZkError};
use crate::error::from_client;
use crate::keeper::{Live, ZkTls};

/// Who may use a node made through [`Zk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone (ZooKeeper's `world:anyone`, every permission).
    Open,
    /// Only the identity that made it (`auth`: the session's digest), every permission.
    Private,
}

impl Access {
    pub(crate) fn acls(self) -> Acls<'static> {
        match self {
            Access::Open => Acls::anyone_all(),
            Access::Private => Acls::creator_all(),
        }
    }
}

/// How long a node made through [`Zk`] lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeMode {
    /// Until it is deleted.
    Persistent,
    /// Until it is deleted or its session ends.
    Ephemeral,
}

/// A ZooKeeper session, or a view of one the host owns (a [`crate::Live`]'s, through
/// [`crate::Live::zk`]).
#[derive(Clone, Debug)]
pub struct Zk {
    pub(crate) client: Client,
}

/// A one-shot watch: fires once, with the node's change or the session's end.
#[derive(Debug)]
pub struct Watch(OneshotWatcher);

impl Watch {
    /// The event it fired with: a node event, or `session-expired` / `session-closed` once the
    /// session ended (a broken connection alone does not fire it).
    pub async fn changed(self) -> WatchEvent {
        self.0.changed().await.into()
    }
}

fn stat(s: &zookeeper_client::Stat) -> Stat {
    Stat::from(*s)
}

impl Live {
    /// Plain requests on this session ([`Zk`]): what the host's own callers read and write.
    pub fn zk(&self) -> Zk {
        Zk { client: self.client.clone() }
    }
}

/// The raw client, for tests of the session protocol itself (moving a session, expiring one):
/// only with the feature `test-access`, which no crate of the product turns on.
#[cfg(feature = "test-access")]
impl Zk {
    pub fn from_client(client: Client) -> Zk {
        Zk { client }
    }
}

#[cfg(feature = "test-access")]
impl Live {
    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl Zk {
    /// Opens a session on `hosts` (with a chroot if it names one), asking for `session_timeout`
    /// (else the client's default), authenticated with `digest` (`user:password`) when given,
    /// over TLS when `tls` is.
    pub async fn connect(
        hosts: &str,
        session_timeout: Option<Duration>,
        digest: Option<&str>,
        tls: Option<&ZkTls>,
    ) -> anyhow::Result<Zk> {
        let mut connector = Client::connector();
        if let Some(timeout) = session_timeout {
            connector = connector.with_session_timeout(timeout);
        }
        if let Some(digest) = digest {
            connector = connector.with_auth("digest", digest.as_bytes());
        }
        let connected = match tls {
            Some(tls) => {
                crate::keeper::install_crypto_provider();
                connector.with_tls(tls.options()?).secure_connect(hosts).await
            }
            None => connector.connect(hosts).await,
        };
        Ok(Zk { client: connected? })
    }

    /// Opens a session on `hosts` with no identity and the default timeout, as an operator's
    /// tool would (a tenant's quota nodes are set this way).
    pub async fn connect_anonymous(hosts: &str, tls: Option<&ZkTls>) -> anyhow::Result<Zk> {
        Zk::connect(hosts, None, None, tls).await.map_err(|e| anyhow::anyhow!("connecting to {hosts}: {e:#}"))
    }

    /// The session's negotiated timeout.
    pub fn session_timeout(&self) -> Duration {
        self.client.session_timeout()
    }

    /// The session's id.
    pub fn session_id(&self) -> i64 {
        self.client.session_id().0
    }

    /// Makes `path` and every missing parent (with `access`); `node-exists` if `path` was there.
    pub fn mkdir<'a>(
        &'a self,
        path: &'a str,
        access: Access,
    ) -> impl Future<Output = Result<(), ZkError>> + Send + 'a {
        async move {
            let mode = CreateMode::Persistent.with_acls(access.acls());
            self.client.mkdir(path, &mode).await.map_err(from_client)
        }
    }

    /// Makes `path` with `data`.
    pub fn create<'a>(
        &'a self,
        path: &'a str,
        data: &[u8],
        mode: NodeMode,
        access: Access,
    ) -> impl Future<Output = Result<Stat, ZkError>> + Send + 'a {
        let mode = match mode {
            NodeMode::Persistent => CreateMode::Persistent,
            NodeMode::Ephemeral => CreateMode::Ephemeral,
        };
        let sent = self.client.create(path, data, &mode.with_acls(access.acls()));
        async move { sent.await.map(|(s, _)| stat(&s)).map_err(from_client) }
    }

    /// Deletes `path`, if its version is `version` when one is given.
    pub fn delete(
        &self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = Result<(), ZkError>> + Send + 'static {
        let sent = self.client.delete(path, version);
        async move { sent.await.map_err(from_client) }
    }

    /// The node's data and stat.
    pub fn get_data(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat), ZkError>> + Send + 'static {
        let sent = self.client.get_data(path);
        async move { sent.await.map(|(d, s)| (d, stat(&s))).map_err(from_client) }
    }

    /// Sets the node's data, if its version is `version` when one is given.
    pub fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> impl Future<Output = Result<Stat, ZkError>> + Send + 'static {
        let sent = self.client.set_data(path, data, version);
        async move { sent.await.map(|s| stat(&s)).map_err(from_client) }
    }

    /// The node's stat, or `None` if it does not exist.
    pub fn exists(&self, path: &str) -> impl Future<Output = Result<Option<Stat>, ZkError>> + Send + 'static {
        let sent = self.client.check_stat(path);
        async move { sent.await.map(|s| s.as_ref().map(stat)).map_err(from_client) }
    }

    /// The node's children's names.
    pub fn children<'a>(
        &'a self,
        path: &str,
    ) -> impl Future<Output = Result<Vec<String>, ZkError>> + Send + 'a {
        let sent = self.client.list_children(path);
        async move { sent.await.map_err(from_client) }
    }

    /// The node's children's names, and its stat.
    pub fn children_stat(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<String>, Stat), ZkError>> + Send + 'static {
        let sent = self.client.get_children(path);
        async move { sent.await.map(|(c, s)| (c, stat(&s))).map_err(from_client) }
    }

    /// Waits until the server this session is connected to has every change the ensemble had
    /// committed when it was sent.
    pub fn sync<'a>(&'a self, path: &str) -> impl Future<Output = Result<(), ZkError>> + Send + 'a {
        let sent = self.client.sync(path);
        async move { sent.await.map_err(from_client) }
    }

    /// The ephemeral nodes this session owns at or under `path`.
    pub fn ephemerals<'a>(
        &'a self,
        path: &str,
    ) -> impl Future<Output = Result<Vec<String>, ZkError>> + Send + 'a {
        let sent = self.client.list_ephemerals(path);
        async move { sent.await.map_err(from_client) }
    }

    /// The node's stat (or `None`), and a watch on its creation, change or deletion.
    pub fn exists_watch<'a>(
        &'a self,
        path: &str,
    ) -> impl Future<Output = Result<(Option<Stat>, Watch), ZkError>> + Send + 'a {
        let sent = self.client.check_and_watch_stat(path);
        async move { sent.await.map(|(s, w)| (s.as_ref().map(stat), Watch(w))).map_err(from_client) }
    }

    /// The node's data and stat, and a watch on its change or deletion.
    pub fn get_data_watch<'a>(
        &'a self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat, Watch), ZkError>> + Send + 'a {
        let sent = self.client.get_and_watch_data(path);
        async move { sent.await.map(|(d, s, w)| (d, stat(&s), Watch(w))).map_err(from_client) }
    }

    /// Makes a persistent sequential node `path` + a ten-digit sequence number; its full path.
    pub fn create_sequential<'a>(
        &'a self,
        path: &'a str,
        data: &[u8],
        access: Access,
    ) -> impl Future<Output = Result<String, ZkError>> + Send + 'a {
        let sent = self.client.create(path, data, &CreateMode::PersistentSequential.with_acls(access.acls()));
        async move { sent.await.map(|(_, seq)| format!("{path}{seq}")).map_err(from_client) }
    }

    /// Applies `ops` as one transaction: all of them, or (with the index of the one that
    /// failed and why) none.
    pub fn multi<'a>(&'a self, ops: &[Op]) -> impl Future<Output = Result<(), MultiError>> + Send + 'a {
        let mut writer = self.client.new_multi_writer();
        let mut bad = None;
        for (i, op) in ops.iter().enumerate() {
            let added = match op {
                Op::Check { path, version } => writer.add_check_version(path, *version),
                Op::Create { path, data, sequential, access } => {
                    let mode =
                        if *sequential { CreateMode::PersistentSequential } else { CreateMode::Persistent };
                    writer.add_create(path, data, &mode.with_acls(access.acls()))
                }
                Op::SetData { path, data, version } => writer.add_set_data(path, data, *version),
                Op::Delete { path, version } => writer.add_delete(path, *version),
            };
            if let Err(e) = added {
                bad.get_or_insert((i, from_client(e)));
            }
        }
        let sent = bad.is_none().then(|| writer.commit());
        async move {
            if let Some((index, error)) = bad {
                return Err(MultiError { index: Some(index), error });
            }
            match sent.expect("sent").await {
                Ok(_) => Ok(()),
                Err(zookeeper_client::MultiWriteError::OperationFailed { index, source }) => {
                    Err(MultiError { index: Some(index), error: from_client(source) })
                }
                Err(zookeeper_client::MultiWriteError::RequestFailed { source }) => {
                    Err(MultiError { index: None, error: from_client(source) })
                }
            }
        }
    }

    /// The node's children's names, and a watch on them.
    pub fn children_watch<'a>(
        &'a self,
        path: &str,
    ) -> impl Future<Output = Result<(Vec<String>, Watch), ZkError>> + Send + 'a {
        let sent = self.client.list_and_watch_children(path);
        async move { sent.await.map(|(c, w)| (c, Watch(w))).map_err(from_client) }
    }
}

/// One operation of a [`Zk::multi`] transaction.
#[derive(Clone, Debug)]
pub enum Op {
    /// The node's version is `version`.
    Check { path: String, version: i32 },
    /// Makes a persistent node (`sequential`: with a sequence number after `path`).
    Create { path: String, data: Vec<u8>, sequential: bool, access: Access },
    /// Sets the node's data, if its version is `version` when one is given.
    SetData { path: String, data: Vec<u8>, version: Option<i32> },
    /// Deletes the node, if its version is `version` when one is given.
    Delete { path: String, version: Option<i32> },
}

/// Why a [`Zk::multi`] applied nothing: the operation that failed (`None`: the request itself,
/// a connection loss for one, after which the transaction may or may not have been applied).
#[derive(Clone, Debug)]
pub struct MultiError {
    pub index: Option<usize>,
    pub error: ZkError,
}

/// Whether an error says the session is gone for good (expired, or closed).
pub fn session_gone(e: &ZkError) -> bool {
    matches!(e, ZkError::SessionExpired)
}

/// Whether `kind` says the session ended rather than the node changed.
pub fn session_ended(kind: EventKind) -> bool {
    matches!(kind, EventKind::SessionExpired | EventKind::SessionClosed)
}
