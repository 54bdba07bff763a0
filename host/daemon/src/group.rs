//! A daemon group's state in ZooKeeper (`wazoo serve --group NAME`): who the members are, the
//! ZooKeeper sessions each serves its clients on, and every client session of the group. Any
//! member can then take up (adopt) the work of one that died or handed over.
//!
//! Everything lives under `/wazoo/groups/NAME`, made readable and writable by the group's
//! digest identity alone (`NAME:SECRET`, the secret from `--group-secret-file`):
//!
//! - `members/<id>`: ephemeral, one per running daemon, its address as data;
//! - `sessions/<id>`: the ZooKeeper sessions (tenant, id, password) member `<id>` serves on;
//! - `clients/<session>`: one per client session (16 hex digits): the member serving it, its
//!   tenant, TTL, name and the SHA-256 of the secret its client holds;
//! - `adoptions/<id>`: made by the member that adopts `<id>`'s work, so that only one does;
//!   kept until `members/<id>` is gone, so that `<id>`, if it was only frozen or cut off, finds
//!   it when it comes back.
//!
//! This module keeps the records and fences this member ([`MemberFence`]); adopting is the server's
//! business (`serve::adopt`).
//!
//! # Fencing
//!
//! ZooKeeper lets any process that knows a session's id and password take it over by
//! reconnecting, and it does not stop the old holder from taking it back the same way. A member
//! that was frozen (SIGSTOP, a paused VM) or cut off while another adopted its sessions would
//! do exactly that when it comes back, and act on claims that are no longer its own. So every
//! ZooKeeper session a member serves on asks its [`MemberFence`] before it reconnects: the fence reads,
//! through the group's own session and after a `sync`, that no adoption of this member exists
//! and that its member node still does, and then allows a connection made within [`LEASE`] of
//! that read. An adopter that cannot tell the member is dead (its port accepts connections but
//! does not answer) waits [`LEASE`] after taking the adoption before it resumes any session, so
//! any reconnection the member was allowed before the adoption existed is done by then, and
//! every later one is refused: the member then exits (status 75) without another request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use serde::{Deserialize, Serialize};
use wazoo_runtime::error::describe;
use wazoo_runtime::zk::{session_ended, Access, NodeMode, Zk};
use wazoo_runtime::{EventKind, ZkError};

/// Where a group's state lives.
pub const GROUPS: &str = "/wazoo/groups";

/// How a daemon joins its group.
#[derive(Clone)]
pub struct GroupJoin {
    /// The group's name (a ZooKeeper node name).
    pub name: String,
    /// The group's secret: every member has the same.
    pub secret: String,
    /// The address clients reach this member at; none: the address it listens on.
    pub advertise: Option<String>,
    /// The ensemble (`host:port,…`, no chroot).
    pub hosts: String,
    pub tls: Option<wazoo_runtime::ZkTls>,
    /// The group session's timeout.
    pub session_timeout: Duration,
    /// Fences this member's ZooKeeper sessions ([`MemberFence::gate`] in each), armed once the
    /// member has joined.
    pub fence: Arc<MemberFence>,
}

impl std::fmt::Debug for GroupJoin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupJoin").field("name", &self.name).field("advertise", &self.advertise).finish()
    }
}

/// A ZooKeeper session a member serves on, as kept in `sessions/<member>`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SessionRecord {
    /// The tenant it serves (none: the one host).
    pub tenant: Option<String>,
    pub id: i64,
    /// The session's password, hex.
    pub password: String,
}

/// A client session of the group, as kept in `clients/<session>`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientRecord {
    /// The member serving it.
    pub member: String,
    pub tenant: Option<String>,
    pub ttl_ms: u64,
    pub name: String,
    /// SHA-256 of the client's secret, hex.
    pub secret: String,
    /// The ZooKeeper session its claims live in (a member may serve on several per tenant: its
    /// own and those it adopted).
    pub zookeeper_session: i64,
}

/// This daemon's membership of its group.
pub struct Group {
    client: Zk,
    root: String,
    /// Handing its work over ([`Group::leave`]).
    leaving: AtomicBool,
    /// This member's id (fresh for every start).
    pub me: String,
    pub address: String,
}

fn node_error(what: &str, e: ZkError) -> anyhow::Error {
    anyhow!("group state: {what}: {}", describe(&e))
}

impl Group {
    /// Connects to ZooKeeper (`hosts`, no chroot) with the group's identity, makes the group's
    /// nodes if they are missing, and announces this member.
    pub async fn join(config: &GroupJoin, listening: std::net::SocketAddr) -> anyhow::Result<Group> {
        let (hosts, tls, session_timeout) =
            (config.hosts.as_str(), config.tls.as_ref(), config.session_timeout);
        let advertise = config.advertise.clone().unwrap_or_else(|| listening.to_string());
        wazoo_runtime::paths::check_node(&format!("/{}", config.name))
            .map_err(|why| anyhow!("bad group name {:?}: {why}", config.name))?;
        let identity = format!("{}:{}", config.name, config.secret);
        let client = Zk::connect(hosts, Some(session_timeout), Some(&identity), tls)
            .await
            .map_err(|e| anyhow!("connecting to ZooKeeper at {hosts} for the group: {e:#}"))?;
        let root = format!("{GROUPS}/{}", config.name);
        match client.mkdir(GROUPS, Access::Open).await {
            Ok(()) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(node_error(GROUPS, e)),
        }
        for path in [
            root.clone(),
            format!("{root}/members"),
            format!("{root}/sessions"),
            format!("{root}/clients"),
            format!("{root}/adoptions"),
        ] {
            match client.create(&path, &[], NodeMode::Persistent, Access::Private).await {
                Ok(_) | Err(ZkError::NodeExists) => {}
                Err(ZkError::NoAuth) => {
                    return Err(anyhow!(
                    "group {:?}: its state belongs to another identity (is --group-secret-file the group's?)",
                    config.name
                ))
                }
                Err(e) => return Err(node_error(&path, e)),
            }
        }
        // A member that cannot read the root has the wrong secret.
        client.children_stat(&root).await.map_err(|e| match e {
            ZkError::NoAuth => {
                anyhow!(
                    "group {:?}: its state belongs to another identity (is --group-secret-file the group's?)",
                    config.name
                )
            }
            e => node_error(&root, e),
        })?;
        let me = uuid::Uuid::new_v4().simple().to_string();
        client
            .create(
                &format!("{root}/members/{me}"),
                advertise.as_bytes(),
                NodeMode::Ephemeral,
                Access::Private,
            )
            .await
            .map_err(|e| node_error("announcing this member", e))?;
        tracing::info!(group = %config.name, member = %me, %advertise, "joined the group");
        let group = Group { client, root, me, address: advertise, leaving: AtomicBool::new(false) };
        group.sweep().await;
        Ok(group)
    }

    fn path(&self, dir: &str, name: &str) -> String {
        format!("{}/{dir}/{name}", self.root)
    }

    /// Records the ZooKeeper sessions this member serves on (replacing what was recorded).
    pub async fn record_sessions(&self, sessions: &[SessionRecord]) -> anyhow::Result<()> {
        let data = serde_json::to_vec(sessions)?;
        self.put(&self.path("sessions", &self.me), &data).await
    }

    async fn put(&self, path: &str, data: &[u8]) -> anyhow::Result<()> {
        match self.client.set_data(path, data, None).await {
            Ok(_) => Ok(()),
            Err(ZkError::NoNode) => {
                match self.client.create(path, data, NodeMode::Persistent, Access::Private).await {
                    Ok(_) => Ok(()),
                    Err(ZkError::NodeExists) => self
                        .client
                        .set_data(path, data, None)
                        .await
                        .map(|_| ())
                        .map_err(|e| node_error(path, e)),
                    Err(e) => Err(node_error(path, e)),
                }
            }
            Err(e) => Err(node_error(path, e)),
        }
    }

    async fn read<T: for<'de> Deserialize<'de>>(&self, path: &str) -> anyhow::Result<Option<T>> {
        match self.client.get_data(path).await {
            Ok((data, _)) => {
                Ok(Some(serde_json::from_slice(&data).with_context(|| format!("group state {path}"))?))
            }
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(node_error(path, e)),
        }
    }

    /// Records a client session (opened here, or adopted).
    pub async fn record_client(&self, session: u64, record: &ClientRecord) -> anyhow::Result<()> {
        self.put(&self.path("clients", &format!("{session:016x}")), &serde_json::to_vec(record)?).await
    }

    /// Forgets a client session that ended while `member` served it: its record goes unless it
    /// names another member by now (the session was taken up there, and is that member's).
    pub async fn forget_client(&self, session: u64, member: &str) {
        let path = self.path("clients", &format!("{session:016x}"));
        let (data, stat) = match self.client.get_data(&path).await {
            Ok(read) => read,
            Err(ZkError::NoNode) => return,
            Err(e) => {
                tracing::warn!("group state: forgetting client session {session}: {}", describe(&e));
                return;
            }
        };
        if serde_json::from_slice::<ClientRecord>(&data).is_ok_and(|record| record.member != member) {
            return;
        }
        // Rewritten meanwhile (taken up elsewhere): no longer this one to forget.
        match self.client.delete(&path, Some(stat.version)).await {
            Ok(()) | Err(ZkError::NoNode | ZkError::BadVersion) => {}
            Err(e) => tracing::warn!("group state: forgetting client session {session}: {}", describe(&e)),
        }
    }

    pub async fn client_record(&self, session: u64) -> anyhow::Result<Option<ClientRecord>> {
        self.read(&self.path("clients", &format!("{session:016x}"))).await
    }

    /// The client sessions `member` serves, read together.
    pub async fn clients_of(&self, member: &str) -> anyhow::Result<Vec<(u64, ClientRecord)>> {
        let dir = format!("{}/clients", self.root);
        let names = self.client.children(&dir).await.map_err(|e| node_error(&dir, e))?;
        let reads: Vec<_> = names.iter().map(|n| self.client.get_data(&format!("{dir}/{n}"))).collect();
        let mut found = Vec::new();
        for (name, read) in names.iter().zip(reads) {
            let Ok((data, _)) = read.await else { continue };
            let (Ok(id), Ok(record)) =
                (u64::from_str_radix(name, 16), serde_json::from_slice::<ClientRecord>(&data))
            else {
                continue;
            };
            if record.member == member {
                found.push((id, record));
            }
        }
        Ok(found)
    }

    /// The sessions `member` recorded.
    pub async fn sessions_of(&self, member: &str) -> anyhow::Result<Vec<SessionRecord>> {
        Ok(self.read(&self.path("sessions", member)).await?.unwrap_or_default())
    }

    /// The members now: (id, address).
    pub async fn members(&self) -> anyhow::Result<Vec<(String, String)>> {
        let dir = format!("{}/members", self.root);
        let names = self.client.children(&dir).await.map_err(|e| node_error(&dir, e))?;
        let reads: Vec<_> = names.iter().map(|n| self.client.get_data(&format!("{dir}/{n}"))).collect();
        let mut members = Vec::new();
        for (name, read) in names.into_iter().zip(reads) {
            if let Ok((data, _)) = read.await {
                members.push((name, String::from_utf8_lossy(&data).into_owned()));
            }
        }
        Ok(members)
    }

    /// The address of `member` while it is announced.
    pub async fn member_address(&self, member: &str) -> anyhow::Result<Option<String>> {
        match self.client.get_data(&self.path("members", member)).await {
            Ok((data, _)) => Ok(Some(String::from_utf8_lossy(&data).into_owned())),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(node_error("reading a member", e)),
        }
    }

    /// Takes the adoption of `member`'s work: `Ok(None)` if this member now has it, else the
    /// member that took it first.
    pub async fn claim_adoption(&self, member: &str) -> anyhow::Result<Option<String>> {
        let path = self.path("adoptions", member);
        match self.client.create(&path, self.me.as_bytes(), NodeMode::Persistent, Access::Private).await {
            Ok(_) => Ok(None),
            Err(ZkError::NodeExists) => match self.client.get_data(&path).await {
                Ok((data, _)) => Ok(Some(String::from_utf8_lossy(&data).into_owned())),
                Err(ZkError::NoNode) => Err(anyhow!("the adoption of {member} just ended; try again")),
                Err(e) => Err(node_error(&path, e)),
            },
            Err(e) => Err(node_error(&path, e)),
        }
    }

    /// The adoption of `member` is done: its sessions' record goes (every client of it points
    /// here now), and the adoption's node once `member`'s node is gone (until then, `member`
    /// may come back and must find it).
    pub async fn adopted(self: &Arc<Self>, member: &str) {
        self.remove(&self.path("sessions", member)).await;
        let (group, member) = (self.clone(), member.to_string());
        tokio::spawn(async move {
            let node = group.path("members", &member);
            loop {
                match group.client.exists_watch(&node).await {
                    Ok((None, _)) => break,
                    Ok((Some(_), watcher)) => {
                        let event = watcher.changed().await;
                        if session_ended(event.kind) {
                            return;
                        }
                    }
                    Err(ZkError::SessionExpired) => return,
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
            group.remove(&group.path("adoptions", &member)).await;
        });
    }

    async fn remove(&self, path: &str) {
        if let Err(e) = self.client.delete(path, None).await {
            if !matches!(e, ZkError::NoNode) {
                tracing::warn!("group state: removing {path}: {}", describe(&e));
            }
        }
    }

    /// Removes the adoptions' nodes left by adopters that stopped before their member's node
    /// went: done (no sessions' record left) and of members that are gone.
    async fn sweep(&self) {
        let Ok((adopted, _)) = self.client.children_stat(&format!("{}/adoptions", self.root)).await else {
            return;
        };
        for member in adopted {
            let (node, sessions) = (self.path("members", &member), self.path("sessions", &member));
            if let (Ok(None), Ok(None)) =
                (self.client.exists(&node).await, self.client.exists(&sessions).await)
            {
                self.remove(&self.path("adoptions", &member)).await;
            }
        }
    }

    /// Clears, for as long as the group's session lasts, what members that went without being
    /// adopted left in the group's state: their client sessions' records and their sessions'
    /// record. None of their clients came back to have them taken up, so their claims went with
    /// their ZooKeeper sessions, but the records would stay forever. A member counts as gone
    /// for good `grace` after its node was first seen missing with no adoption of it: by then
    /// its sessions have expired (the members of a group share their session timeout, and
    /// `grace` is well past it), so nothing is left to adopt. Every member does this; the
    /// deletes are the same whoever makes them.
    pub fn reap_orphans(self: &Arc<Self>, grace: Duration) {
        let group = self.clone();
        tokio::spawn(async move {
            let mut gone_since: std::collections::HashMap<String, tokio::time::Instant> = Default::default();
            let (members, recorded) = (format!("{}/members", group.root), format!("{}/sessions", group.root));
            // The members client records name, read every half grace: a member that recorded a
            // client after its adoption (it answered an Open from its backlog as it woke) has no
            // sessions' record left to be found by.
            let (mut named, mut next_scan) = (Vec::new(), tokio::time::Instant::now());
            loop {
                let (present, watcher) = match group.client.children_watch(&members).await {
                    Ok(listed) => listed,
                    Err(ZkError::SessionExpired) => return,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                let Ok(recorded) = group.client.children(&recorded).await else {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                let now = tokio::time::Instant::now();
                if now >= next_scan {
                    named = group.members_named_by_clients().await;
                    next_scan = now + grace / 2;
                }
                let candidates: Vec<&String> =
                    recorded.iter().chain(&named).filter(|m| !present.contains(*m)).collect();
                gone_since.retain(|member, _| candidates.contains(&member));
                for member in candidates {
                    gone_since.entry(member.clone()).or_insert(now);
                }
                let ripe: Vec<String> = gone_since
                    .iter()
                    .filter(|(_, since)| now >= **since + grace)
                    .map(|(m, _)| m.clone())
                    .collect();
                for member in ripe {
                    group.reap(&member).await;
                    gone_since.remove(&member);
                }
                let next = gone_since
                    .values()
                    .map(|since| *since + grace)
                    .chain([next_scan])
                    .min()
                    .unwrap_or(next_scan);
                tokio::select! {
                    event = watcher.changed() => {
                        if session_ended(event.kind) {
                            return;
                        }
                    }
                    _ = tokio::time::sleep_until(next) => {}
                }
            }
        });
    }

    /// The members that client records name, each once.
    async fn members_named_by_clients(&self) -> Vec<String> {
        let dir = format!("{}/clients", self.root);
        let Ok(names) = self.client.children(&dir).await else { return Vec::new() };
        let reads: Vec<_> = names.iter().map(|n| self.client.get_data(&format!("{dir}/{n}"))).collect();
        let mut named = Vec::new();
        for read in reads {
            let Ok((data, _)) = read.await else { continue };
            if let Ok(record) = serde_json::from_slice::<ClientRecord>(&data) {
                if !named.contains(&record.member) {
                    named.push(record.member);
                }
            }
        }
        named
    }

    /// Clears the records of `member`, gone for good, unless someone adopts it after all.
    async fn reap(&self, member: &str) {
        let synced = self.client.sync(&self.root);
        let adoption = self.client.exists(&self.path("adoptions", member));
        let (synced, adoption) = tokio::join!(synced, adoption);
        if synced.is_err() || !matches!(adoption, Ok(None)) {
            return;
        }
        let Ok(clients) = self.clients_of(member).await else { return };
        tracing::info!(
            member,
            clients = clients.len(),
            "clearing the records of a member that went unadopted"
        );
        for (session, _) in clients {
            self.forget_client(session, member).await;
        }
        self.remove(&self.path("sessions", member)).await;
    }

    /// Leaves the group on purpose (a hand-over): the member node goes at once, so the other
    /// members adopt this one's work without asking whether it still answers.
    pub async fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
        let _ = self.client.delete(&self.path("members", &self.me), None).await;
    }

    /// Whether this member may end a client session whose client did not ask it to (its
    /// keepalives stopped): yes while it is a member that nobody adopts, read after a `sync`;
    /// no while it hands its work over (its clients' streams end as they move on). A member
    /// found adopted or out of the group stops here and now (status 75): it was frozen or cut
    /// off, its clients went elsewhere, and their sessions are another member's now.
    pub async fn may_end_sessions(&self) -> bool {
        loop {
            if self.leaving.load(Ordering::Acquire) {
                return false;
            }
            match self.standing().await {
                Ok(Standing::Member) => return true,
                Ok(Standing::Out(_)) | Err(_) if self.leaving.load(Ordering::Acquire) => return false,
                Ok(Standing::Out(why)) => {
                    tracing::error!("stopping at once, before ending a client session: {why}");
                    std::process::exit(75);
                }
                Err(ZkError::SessionExpired) => {
                    tracing::error!(
                        "stopping at once, before ending a client session: the group's session ended"
                    );
                    std::process::exit(75);
                }
                // ZooKeeper out of reach: the session's nodes could not go anyway.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Where this member stands, read after a `sync` (a linearizable read of the group's state).
    async fn standing(&self) -> Result<Standing, ZkError> {
        let (adoption, member) = (self.path("adoptions", &self.me), self.path("members", &self.me));
        // Sent in this order without waiting: the reads are ordered after the sync.
        let synced = self.client.sync(&self.root);
        let adopted = self.client.exists(&adoption);
        let present = self.client.exists(&member);
        let (synced, adopted, present) = tokio::join!(synced, adopted, present);
        synced?;
        Ok(match (adopted?, present?) {
            (Some(_), _) => Standing::Out("another member of the group adopted this daemon's sessions"),
            (None, None) => Standing::Out("this daemon is no longer a member of its group"),
            (None, Some(_)) => Standing::Member,
        })
    }

    /// Resolves once another member has begun adopting this one's work (it found this member
    /// dead or out of reach), or this member's group session has ended: this daemon must then
    /// stop serving at once, whatever it still believes it holds.
    pub async fn superseded(&self) -> String {
        let path = self.path("adoptions", &self.me);
        loop {
            match self.client.exists_watch(&path).await {
                Ok((Some(_), _)) => {
                    return "another member of the group adopted this daemon's sessions".into()
                }
                Ok((None, watcher)) => {
                    let event = watcher.changed().await;
                    if session_ended(event.kind) {
                        let how = if event.kind == EventKind::SessionExpired { "Expired" } else { "Closed" };
                        return format!("the group's ZooKeeper session ended ({how})");
                    }
                }
                Err(ZkError::SessionExpired) => return "the group's ZooKeeper session ended".into(),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// How long a fence's read allows a member's session to reconnect in; an adopter that is not
/// sure the member is dead waits this long before it resumes the member's sessions.
pub const LEASE: Duration = Duration::from_secs(1);

/// Where a member stands, as its fence reads it.
enum Standing {
    /// Still a member, and nobody adopts its work.
    Member,
    /// Adopted, or no longer a member (it left, or its group session ended).
    Out(&'static str),
}

/// Fences this member's ZooKeeper sessions: each asks it before reconnecting (see the module's
/// doc). Made before the sessions are, armed once the member has joined its group.
#[derive(Default)]
pub struct MemberFence {
    group: OnceLock<Arc<Group>>,
    /// Handing over on purpose: no session reconnects, and nothing else changes until the
    /// process exits.
    leaving: AtomicBool,
}

impl MemberFence {
    /// The gate for this member's sessions' [`wazoo_runtime::KeeperConfig`]. Its reads run on
    /// the runtime current here.
    pub fn gate(self: &Arc<Self>) -> wazoo_runtime::keeper::ReconnectGate {
        let fence = self.clone();
        let runtime = tokio::runtime::Handle::current();
        Arc::new(move || {
            let fence = fence.clone();
            let asked = runtime.spawn(async move { fence.allow().await });
            Box::pin(async move { asked.await.ok().flatten() })
        })
    }

    /// From now on, reads the group's state before allowing a reconnection.
    pub fn arm(&self, group: Arc<Group>) {
        let _ = self.group.set(group);
    }

    /// This member hands its work over: no session of it reconnects any more.
    pub fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
    }

    /// A reconnection's deadline. A member found adopted or out of the group stops here and
    /// now (status 75); one that is leaving waits here for its exit.
    async fn allow(&self) -> Option<std::time::Instant> {
        loop {
            if self.leaving.load(Ordering::Acquire) {
                std::future::pending::<()>().await;
            }
            let asked = std::time::Instant::now();
            let Some(group) = self.group.get() else { return Some(asked + LEASE) };
            match group.standing().await {
                Ok(Standing::Member) => return Some(asked + LEASE),
                Ok(Standing::Out(_)) if self.leaving.load(Ordering::Acquire) => continue,
                Ok(Standing::Out(why)) => {
                    tracing::error!("stopping at once, before a ZooKeeper session reconnects: {why}");
                    std::process::exit(75);
                }
                Err(ZkError::SessionExpired) if !self.leaving.load(Ordering::Acquire) => {
                    tracing::error!(
                        "stopping at once, before a ZooKeeper session reconnects: the group's session ended"
                    );
                    std::process::exit(75);
                }
                // ZooKeeper out of reach: the session waits for it too.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

/// Hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of `hex` (empty if it is not hex).
pub fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2).filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect()
}
