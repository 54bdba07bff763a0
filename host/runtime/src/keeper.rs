//! The keeper owns the ZooKeeper session.
//!
//! A [`Live`] session is one zookeeper-client `Client` and everything bound to it. Handles keep
//! the `Live` they started on: when it expires, their ephemeral nodes are gone and they are told
//! so. The keeper then builds a new session for new handles (a `Client` never recovers from
//! expiry). Each tenant will get its own keeper.
//!
//! A session is also judged on time: every `Live` syncs with the ensemble twenty times per
//! session timeout and remembers when the last answered sync was sent. ZooKeeper expires a
//! session no sooner than its timeout after it last heard from the client, so once nothing sent
//! in the last [`CUT_OFF`] of the timeout has been answered, [`Live::cut_off`] says so, and
//! claims count as lost before the server can hand them to anyone else.
//!
//! [`Keeper::resume`] adopts another process's session; ZooKeeper does not tell its old holder,
//! whose zookeeper-client (0.11) reconnects with the session and so takes it back: on one server
//! the two close each other's connection until one gives up (either may win, or both go on side by
//! side), on two ensemble members each write of the one that lost it moves it back (it sees
//! `ConnectionLoss`, not `SessionMoved`). Stop the old holder first (`tests/tests/session_move.rs`),
//! or fence it: a [`KeeperConfig::reconnect_gate`] is asked before every reconnection, and a
//! process that may have been superseded refuses there (`wazoo_daemon::group::MemberFence`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;
use zookeeper_client::{Acls, Client, CreateMode, SessionInfo, SessionState};

/// The share of the negotiated session timeout (numerator, denominator) that may pass without an
/// answer from ZooKeeper before the session is assumed lost: Curator's
/// `SessionConnectionStateErrorPolicy` idea, on the host's own clock. What the claim guards is
/// stopped in the rest of the timeout.
pub const CUT_OFF: (u32, u32) = (2, 3);

/// How many syncs per session timeout tell the keeper that ZooKeeper still answers.
const PROBES_PER_TIMEOUT: u32 = 20;

/// Where and how to connect. Its `Debug` does not show the digest's password.
#[derive(Clone)]
pub struct KeeperConfig {
    /// `host:port[,host:port…][/chroot]`.
    pub zookeeper: String,
    /// Requested session timeout; the server clamps it to [2, 20] × its tickTime.
    pub session_timeout: Duration,
    /// How long to try to reach ZooKeeper before giving up.
    pub connect_timeout: Duration,
    /// A digest identity `user:password` for the session. With it, the chroot (if any) and
    /// every node the host creates can be used by that identity only (a tenant's namespace).
    pub digest: Option<String>,
    /// TLS towards ZooKeeper (its `secureClientPort`); `None` speaks plain text.
    pub tls: Option<ZkTls>,
    /// Asked before the session reconnects, if given: a member of a daemon group refuses once
    /// another member may have resumed its sessions (see [`ReconnectGate`]).
    pub reconnect_gate: Option<ReconnectGate>,
}

/// Asked before a session reconnects after losing its connection: `None` refuses (the session
/// ends as closed), `Some(deadline)` allows a connection made by `deadline`. A process whose
/// sessions another process may resume fences itself with one, because ZooKeeper lets either
/// holder of a session's id and password take the session back by reconnecting.
pub use zookeeper_client::ReconnectGate;

/// TLS towards ZooKeeper: the CA the servers' certificates are checked against (hostnames
/// included), and this host's own certificate for servers that ask for one
/// (`ssl.clientAuth=need`, ZooKeeper's default). Its `Debug` does not show the key.
#[derive(Clone)]
pub struct ZkTls {
    /// CA certificates (PEM).
    pub ca: String,
    /// This host's certificate chain and private key (PEM).
    pub identity: Option<(String, String)>,
}

impl std::fmt::Debug for ZkTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkTls").field("identity", &self.identity.is_some()).finish_non_exhaustive()
    }
}

impl ZkTls {
    /// Checks the PEM now, so a bad file is a clear error at start, not at the first connect.
    pub fn options(&self) -> anyhow::Result<zookeeper_client::TlsOptions> {
        let options = zookeeper_client::TlsOptions::new()
            .with_pem_ca(&self.ca)
            .map_err(|e| anyhow!("the ZooKeeper TLS CA: {e}"))?;
        match &self.identity {
            Some((cert, key)) => options
                .with_pem_identity(cert, key)
                .map_err(|e| anyhow!("the ZooKeeper TLS certificate and key: {e}")),
            None => Ok(options),
        }
    }
}

/// Makes ring the process's rustls provider. zookeeper-client's TLS brings rustls with
/// aws-lc-rs, tonic's brings ring: with both built in, rustls cannot pick one by itself and
/// every TLS setup that does not name its provider would fail. Called before any TLS is set up;
/// a provider already installed (by the embedding program) is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl std::fmt::Debug for KeeperConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = self.digest.as_deref().map(|d| format!("{}:…", d.split(':').next().unwrap_or("")));
        f.debug_struct("KeeperConfig")
            .field("zookeeper", &self.zookeeper)
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("digest", &user)
            .field("tls", &self.tls)
            .field("reconnect_gate", &self.reconnect_gate.is_some())
            .finish()
    }
}

impl Default for KeeperConfig {
    fn default() -> Self {
        KeeperConfig {
            zookeeper: "127.0.0.1:2181".into(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            digest: None,
            tls: None,
            reconnect_gate: None,
        }
    }
}

/// How a ZooKeeper session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionEnd {
    /// The ensemble expired it: every ephemeral node it owned is gone.
    Expired,
    /// It was closed (by this process, or refused a reconnect by its gate).
    Closed,
    /// The ensemble refused its credentials.
    AuthFailed,
}

impl From<SessionState> for SessionEnd {
    fn from(state: SessionState) -> SessionEnd {
        match state {
            SessionState::Expired => SessionEnd::Expired,
            SessionState::AuthFailed => SessionEnd::AuthFailed,
            _ => SessionEnd::Closed,
        }
    }
}

/// One ZooKeeper session and its state.
#[derive(Debug)]
pub struct Live {
    pub(crate) client: Client,
    /// Counts the sessions this keeper has built, from 1.
    pub generation: u64,
    ended: watch::Receiver<Option<SessionState>>,
    /// When the last sync that ZooKeeper answered was sent: the ensemble heard from this session
    /// no earlier.
    answered: watch::Receiver<Instant>,
    prober: tokio::task::AbortHandle,
    /// The paths this session watches persistently, for the repairs ZooKeeper 3.8 needs.
    pub(crate) persistent: crate::watched::Watched,
}

impl Drop for Live {
    fn drop(&mut self) {
        // The prober's clone of the client would keep the session open.
        self.prober.abort();
    }
}

impl Live {
    /// Watches `client`, a session on the servers `hosts` (whose connections get `TCP_NODELAY`,
    /// now and after every reconnect: see `nodelay`).
    async fn new(client: Client, generation: u64, hosts: String) -> Arc<Live> {
        crate::nodelay::apply(&crate::nodelay::servers(&hosts).await);
        let (answered_tx, answered) = watch::channel(Instant::now());
        let prober = tokio::spawn(probe(client.clone(), answered_tx)).abort_handle();
        let (tx, rx) = watch::channel(None);
        let mut states = client.state_watcher();
        tokio::spawn(async move {
            loop {
                let state = states.changed().await;
                if state.is_terminated() {
                    if state == SessionState::Closed {
                        tracing::debug!(generation, "ZooKeeper session closed");
                    } else {
                        tracing::warn!(?state, generation, "ZooKeeper session ended");
                    }
                    let _ = tx.send(Some(state));
                    break;
                }
                if matches!(state, SessionState::SyncConnected | SessionState::ConnectedReadOnly) {
                    crate::nodelay::apply(&crate::nodelay::servers(&hosts).await);
                }
                tracing::debug!(?state, generation, "ZooKeeper connection state");
            }
        });
        Arc::new(Live { client, generation, ended: rx, answered, prober, persistent: Default::default() })
    }

    pub fn session_id(&self) -> i64 {
        self.client.session_id().0
    }

    /// The id and password of this session: what another process needs to resume it
    /// ([`Keeper::resume`]).
    pub fn session_parts(&self) -> (i64, Vec<u8>) {
        let session = self.client.session();
        (session.id().0, session.password().to_vec())
    }

    /// How the session ended, once it has.
    pub fn ended(&self) -> Option<SessionEnd> {
        // The client's own state first: the watcher task may not have run yet.
        let state = self.client.state();
        if state.is_terminated() {
            return Some(state.into());
        }
        self.ended.borrow().map(SessionEnd::from)
    }

    /// Resolves when the session ends, with how it ended.
    pub async fn wait_ended(&self) -> SessionEnd {
        let mut rx = self.ended.clone();
        loop {
            if let Some(state) = *rx.borrow_and_update() {
                return state.into();
            }
            if rx.changed().await.is_err() {
                return SessionEnd::Closed;
            }
        }
    }

    /// Whether the session is connected now (not between connections, not ended).
    pub fn connected(&self) -> bool {
        matches!(self.client.state(), SessionState::SyncConnected | SessionState::ConnectedReadOnly)
    }

    /// The session's negotiated timeout.
    pub fn session_timeout(&self) -> Duration {
        self.client.session_timeout()
    }

    /// How long this session may go without an answer before it counts as lost: [`CUT_OFF`] of
    /// its negotiated timeout.
    pub fn cut_off_after(&self) -> Duration {
        self.client.session_timeout() * CUT_OFF.0 / CUT_OFF.1
    }

    /// Resolves once ZooKeeper has answered nothing this session sent in the last
    /// [`Live::cut_off_after`] (the ensemble may then expire it before anyone hears of it),
    /// with that duration.
    pub async fn cut_off(&self) -> Duration {
        let limit = self.cut_off_after();
        let mut answered = self.answered.clone();
        let mut probing = true;
        loop {
            let deadline = *answered.borrow_and_update() + limit;
            if Instant::now() >= deadline {
                return limit;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                changed = answered.changed(), if probing => probing = changed.is_ok(),
            }
        }
    }
}

/// Syncs with the ensemble [`PROBES_PER_TIMEOUT`] times per session timeout, one at a time, and
/// publishes when the last answered one was sent, until the session ends. A sync is answered
/// only once the ensemble's leader has seen it, so a member cut off from its peers stops
/// answering at once, even while it still answers reads.
async fn probe(client: Client, answered: watch::Sender<Instant>) {
    let every = (client.session_timeout() / PROBES_PER_TIMEOUT).max(Duration::from_millis(20));
    loop {
        let sent = Instant::now();
        match client.sync("/").await {
            Ok(()) => {
                answered.send_replace(sent);
            }
            Err(zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed) => return,
            Err(_) => {}
        }
        tokio::time::sleep_until(sent + every).await;
    }
}

// The repairs of ZooKeeper 3.8's one watch mode per path (see `persistent`).
impl Live {
    /// Sets again the persistent modes this session watches `path` with (plain first, recursive
    /// last: both requests go out at once), after something else changed the server's mode for
    /// it, then tells the path's watchers `missed`: until the server had the modes back, a
    /// change may have gone unreported. The extra watchers the client makes for this are dropped
    /// at once; the client keeps the server's watch while the real ones remain.
    pub(crate) async fn repair_persistent(&self, path: &str) {
        let Some([plain, recursive]) = self.persistent.modes(path) else { return };
        // zookeeper-client sends a request when it is called, so these go out back to back.
        let plain = (plain > 0).then(|| self.client.watch(path, zookeeper_client::AddWatchMode::Persistent));
        let recursive = (recursive > 0)
            .then(|| self.client.watch(path, zookeeper_client::AddWatchMode::PersistentRecursive));
        for (mode, added) in [("persistent", plain), ("recursive", recursive)] {
            if let Some(added) = added {
                if let Err(e) = added.await {
                    tracing::debug!(path, mode, error = %e, "setting a watch again");
                }
            }
        }
        self.persistent.missed(path);
    }

    /// [`Live::repair_persistent`] in the background, if `path` is watched persistently.
    pub(crate) fn repair_later(self: &Arc<Self>, path: &str) {
        if !self.persistent.contains(path) {
            return;
        }
        let (live, path) = (self.clone(), path.to_string());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { live.repair_persistent(&path).await });
        }
    }
}

/// ZooKeeper could not be reached (or refused the session) when a session was opened: the
/// error `wazoo` exits 69 for, whatever context is put around it.
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// Owns the current session and rebuilds it after expiry (unless the session was adopted).
#[derive(Debug)]
pub struct Keeper {
    config: KeeperConfig,
    current: Mutex<Arc<Live>>,
    /// The keeper resumed a session another process opened ([`Keeper::resume`]): it has that
    /// session only, and builds no other once it ends.
    adopted: bool,
}

impl Keeper {
    /// Connects the first session; fails with a clear message when ZooKeeper is unreachable.
    pub async fn connect(config: KeeperConfig) -> anyhow::Result<Keeper> {
        let live =
            Live::new(open(&config, None).await?, 1, split_chroot(&config.zookeeper).0.to_string()).await;
        Ok(Keeper { config, current: Mutex::new(live), adopted: false })
    }

    /// Resumes the session `id` (with its `password`, [`Live::session_parts`]) that another
    /// process opened, with the same handling of hosts, chroot, digest and TLS as
    /// [`Keeper::connect`]; fails with a clear message when ZooKeeper no longer knows the session
    /// (it expired). The keeper has that session only: [`Keeper::live`] fails once it has ended.
    pub async fn resume(config: KeeperConfig, id: i64, password: Vec<u8>) -> anyhow::Result<Keeper> {
        let client = open(&config, Some(SessionInfo::from_parts(id, password))).await?;
        let live = Live::new(client, 1, split_chroot(&config.zookeeper).0.to_string()).await;
        tracing::info!(session = %live.client.session_id(), "adopted ZooKeeper session");
        Ok(Keeper { config, current: Mutex::new(live), adopted: true })
    }

    /// The current session, rebuilt first if it has ended; for a keeper that adopted its
    /// session, an error once that session has ended.
    pub async fn live(&self) -> anyhow::Result<Arc<Live>> {
        let mut current = self.current.lock().await;
        if current.ended().is_some() {
            if self.adopted {
                return Err(anyhow!("the adopted ZooKeeper session {} ended", current.client.session_id()));
            }
            let generation = current.generation + 1;
            *current = Live::new(
                open(&self.config, None).await?,
                generation,
                split_chroot(&self.config.zookeeper).0.to_string(),
            )
            .await;
            tracing::info!(generation, session = %current.client.session_id(), "new ZooKeeper session");
        }
        Ok(current.clone())
    }

    pub fn config(&self) -> &KeeperConfig {
        &self.config
    }

    /// The current session's id, if it is usable now (not ended, not being rebuilt).
    pub fn session_now(&self) -> Option<i64> {
        let current = self.current.try_lock().ok()?;
        current.ended().is_none().then(|| current.client.session_id().0)
    }
}

/// Splits `host:port,…/chroot` into the hosts and the chroot (if any).
pub fn split_chroot(zookeeper: &str) -> (&str, Option<&str>) {
    match zookeeper.find('/') {
        Some(i) if i + 1 < zookeeper.len() => (&zookeeper[..i], Some(&zookeeper[i..])),
        Some(i) => (&zookeeper[..i], None),
        None => (zookeeper, None),
    }
}

/// Connects a new session, or resumes `session` (then the chroot is not created again: it was
/// when the session was opened).
async fn open(config: &KeeperConfig, session: Option<SessionInfo>) -> anyhow::Result<Client> {
    let (hosts, chroot) = split_chroot(&config.zookeeper);
    if hosts.is_empty() {
        return Err(anyhow!("no ZooKeeper address given (expected host:port[,host:port…][/chroot])"));
    }
    if let Some(root) = chroot {
        crate::paths::check_node(root)
            .map_err(|why| anyhow!("bad chroot in {:?}: {why}", config.zookeeper))?;
    }
    let mut connector = Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_connection_timeout(config.connect_timeout.min(Duration::from_secs(5)));
    if let Some(digest) = &config.digest {
        connector = connector.with_auth("digest", digest.as_bytes());
    }
    let resumed = session.as_ref().map(|s| s.id());
    if let Some(session) = session {
        connector = connector.with_session(session);
    }
    if let Some(gate) = &config.reconnect_gate {
        connector = connector.with_reconnect_gate(gate.clone());
    }
    let connect: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>> = match &config.tls {
        Some(tls) => {
            install_crypto_provider();
            let options = tls.options()?;
            Box::pin(connector.with_tls(options).secure_connect(hosts))
        }
        None => Box::pin(connector.connect(hosts)),
    };
    let scheme = if config.tls.is_some() { " (TLS)" } else { "" };
    // Another client connected with the session to the same server takes it back each time it is
    // resumed there: resuming then fails, like an unreachable server (see the module's doc).
    let contested = " (a holder still connected to the same server takes the session back each time)";
    let client = tokio::time::timeout(config.connect_timeout, connect)
        .await
        .map_err(|_| {
            let within = humantime::format_duration(config.connect_timeout);
            Unreachable(match resumed {
                Some(id) => format!(
                    "cannot resume ZooKeeper session {id} at {hosts}{scheme} within {within}{contested}"
                ),
                None => format!("cannot reach ZooKeeper at {hosts}{scheme} within {within}"),
            })
        })?
        .map_err(|e| match (e, resumed) {
            // The server knows no such session, or not with that password.
            (zookeeper_client::Error::SessionExpired, Some(id)) => anyhow!("session {id} has expired"),
            (e, Some(id)) => Unreachable(format!(
                "cannot resume ZooKeeper session {id} at {hosts}{scheme}: {e}{contested}"
            ))
            .into(),
            (e, None) => Unreachable(format!("cannot connect to ZooKeeper at {hosts}{scheme}: {e}")).into(),
        })?;
    let Some(root) = chroot else { return Ok(client) };
    if resumed.is_some() {
        return client.chroot(root.to_string()).map_err(|_| anyhow!("invalid chroot {root}"));
    }
    // The chroot is where this host's namespace starts: make sure it exists. With a digest
    // identity, the namespace's root is that identity's alone (its parents stay open, so other
    // tenants can add their own roots beside it).
    let private = if config.digest.is_some() { Acls::creator_all() } else { Acls::anyone_all() };
    let parent = crate::paths::parent(root);
    if parent != "/" {
        match client.mkdir(parent, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await {
            Ok(()) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => return Err(anyhow!("cannot create {parent}: {e}")),
        }
    }
    match client.create(root, &[], &CreateMode::Persistent.with_acls(private)).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(e) => return Err(anyhow!("cannot create chroot {root}: {e}")),
    }
    client.chroot(root.to_string()).map_err(|_| anyhow!("invalid chroot {root}"))
}
