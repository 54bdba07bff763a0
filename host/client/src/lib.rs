//! A Rust client of a `wazoo serve` daemon: claims with fencing tokens over gRPC, kept alive by a
//! client session, with no wasmtime and no ZooKeeper client of its own.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! let client = wazoo_client::Client::connect("127.0.0.1:50051", None, Duration::from_secs(5)).await?;
//! let lock = client.lock("/app/lock", wazoo_client::LockOptions::default()).await?;
//! println!("held {} with token {}", lock.node(), lock.token());
//! // … work that passes lock.token() to what it writes, while watching lock.lost() …
//! lock.release().await?;
//! # Ok(()) }
//! ```
//!
//! A claim lives in a client session of its own. A keepalive goes out every sixth of the
//! session's TTL, on the one KeepAlive stream its connection keeps all of its sessions on (the
//! keepalives due together go as one batch); once none sent in the last [`CUT_OFF`] of the TTL has been answered, the claim
//! counts as lost ([`Claim::lost`] resolves), before the daemon, which ends a session a TTL after
//! the last keepalive it received, can hand it to anyone else. Dropping a claim (or the session)
//! ends the keepalives, and with them the session and what it holds. Through a daemon group
//! (several addresses), the cut-off is also bounded by the daemons' ZooKeeper session timeout,
//! and a daemon silent for a third of it is left: the session is in jeopardy and is taken up
//! by another member in the two thirds that remain (keepalives then go out at least three times
//! per third).
//!
//! ## Errors are typed
//!
//! A failed call returns the daemon's [`tonic::Status`]; every status the daemon's services
//! make carries an [`ErrorKind`] (a `google.rpc.ErrorInfo` of domain `wazoo.v1` in the status
//! details; `host/proto/wazoo.proto` has the table of kinds and codes). Branch on the kind,
//! never on the message, which is for people:
//!
//! ```no_run
//! # async fn example(client: wazoo_client::Client) {
//! use std::time::Duration;
//! use wazoo_client::{error_kind, ErrorKind, LockOptions};
//! let options = LockOptions { timeout: Some(Duration::from_secs(1)), ..LockOptions::default() };
//! match client.lock("/app/lock", options).await {
//!     Ok(lock) => drop(lock),
//!     Err(status) if error_kind(&status) == Some(ErrorKind::Timeout) => println!("taken; later"),
//!     Err(status) => println!("failed: {}", wazoo_client::Error::from(status)),
//! }
//! # }
//! ```
//!
//! [`error_kind`] reads the kind of a status; [`Error`] (`From<Status>`) is a failed call with
//! its kind, code and message, as an [`std::error::Error`]. A status with no kind did not come
//! from the daemon's services (a broken connection, for one). Why a claim was lost comes typed
//! as well ([`Lost`], from the `LostEvent`'s [`LossReason`], and worded by its `Display`).
//!
//! Beyond [`Client::lock`], a claim of any family (a lock, a lease, a leadership, a membership)
//! is asked for by a [`Contender`] made in a session of its own before the wait
//! ([`Session::contender`] with an [`Ask`]), so that a wait can be given up by closing it.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};
use wazoo_proto as pb;
use wazoo_proto::admin_client::AdminClient;
use wazoo_proto::recipes_client::RecipesClient;
use wazoo_proto::sessions_client::SessionsClient;

mod keepalive;
use keepalive::{Answer, Keeping};

pub use wazoo_proto as proto;
pub use wazoo_proto::{ErrorKind, LossReason};

/// The kind of error a failed call's `status` carries, read from its details (never from its
/// message); `None` if it carries none: it did not come from the daemon's services (a broken
/// connection, an unknown method, an older daemon), or its kind is newer than this client
/// (then go by [`Status::code`]).
pub fn error_kind(status: &Status) -> Option<ErrorKind> {
    ErrorKind::of(status)
}

/// A failed call, typed: what [`error_kind`] reads from its status, with the status's code and
/// message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What went wrong; `None` for a status the daemon's services did not make (see
    /// [`error_kind`]).
    pub kind: Option<ErrorKind>,
    /// The gRPC code (the proto's header maps each kind to its code).
    pub code: Code,
    /// The status's message, for people: do not branch on it.
    pub message: String,
}

impl From<Status> for Error {
    fn from(status: Status) -> Error {
        Error::from(&status)
    }
}

impl From<&Status> for Error {
    fn from(status: &Status) -> Error {
        Error { kind: error_kind(status), code: status.code(), message: status.message().to_string() }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The part of a client session's TTL after which a session none of whose keepalives was
/// answered counts as lost: 2/3, as the daemon's own ZooKeeper sessions.
pub const CUT_OFF: (u32, u32) = (2, 3);

/// How often the connection to the daemon is pinged (HTTP/2 PING), calls in flight or not.
pub const PING_EVERY: Duration = Duration::from_secs(1);
/// How long a ping may go unanswered before the connection counts as dead and is dropped.
pub const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a daemon that stopped answering (frozen, cut off, a black hole) goes unnoticed:
/// a ping goes out within [`PING_EVERY`] and is given up after [`PING_TIMEOUT`]. Then the
/// connection is dropped, and every call and stream on it fails with `UNAVAILABLE` (no
/// [`ErrorKind`]), whether it was waiting by design (an Acquire with no timeout, a watch) or not.
pub const SILENCE: Duration = Duration::from_secs(3);

/// The deadline of a call that does not wait by design (Release, Close, a read or a write):
/// past it the call fails `DEADLINE_EXCEEDED` on the client, and the daemon gives it up too
/// (the `grpc-timeout` header). Calls that wait by design are bounded by [`SILENCE`] and, where
/// they have one, by their client session's keepalives.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a claim whose session ended with a word from the daemon (it ended the session or
/// its keepalive stream) waits for the daemon's own reason on the claim's stream: the daemon
/// sends it before it lets the keepalive stream go, but on another stream.
const SETTLE: Duration = Duration::from_secs(1);

/// Why a client session is no longer kept, and whether the daemon went silent (no keepalive
/// answered, the connection broken): then nothing more will come from it.
#[derive(Clone, Debug)]
struct Ending {
    why: String,
    silent: bool,
}

/// `message` as a request bounded by [`CALL_TIMEOUT`].
pub fn bounded<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(CALL_TIMEOUT);
    request
}

/// Whether `token` may be sent as an API token: one or more visible ASCII characters (`!` to
/// `~`), no spaces. The same rule holds for the daemon's tenants file and the Python client.
pub fn valid_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())
}

/// The channel to the daemon, every call carrying the tenant's token (if any).
pub type Authed = tonic::service::interceptor::InterceptedService<Channel, Bearer>;

/// Adds `authorization: Bearer TOKEN` to every call.
#[derive(Clone)]
pub struct Bearer(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// How [`Client::connect_with`] connects. Its `Debug` does not show the token.
#[derive(Clone)]
pub struct Options {
    /// Sent with every call as `authorization: Bearer TOKEN`.
    pub token: Option<String>,
    /// For the connection and the first answer.
    pub timeout: Duration,
    /// TLS, to a daemon started with `--tls-cert`.
    pub tls: Option<Tls>,
}

/// TLS towards the daemon: the CA its certificate is checked against and, for a daemon that
/// asks for client certificates (`--tls-client-ca`), this client's certificate and key. All PEM.
/// Its `Debug` does not show the key.
#[derive(Clone, Default)]
pub struct Tls {
    pub ca: Vec<u8>,
    /// Certificate chain and private key.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The name the daemon's certificate must carry; by default the address's host.
    pub domain: Option<String>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("timeout", &self.timeout)
            .field("tls", &self.tls)
            .finish()
    }
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &format_args!("{} bytes", self.ca.len()))
            .field("identity", &self.identity.as_ref().map(|_| "…"))
            .field("domain", &self.domain)
            .finish()
    }
}

impl Tls {
    /// Reads the CA (and the certificate and key, when given) from PEM files.
    pub fn from_files(
        ca: &std::path::Path,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> std::io::Result<Tls> {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        let identity = match identity {
            Some((cert, key)) => Some((read(cert)?, read(key)?)),
            None => None,
        };
        Ok(Tls { ca: read(ca)?, identity, domain: None })
    }

    fn config(&self) -> tonic::transport::ClientTlsConfig {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca));
        if let Some((cert, key)) = &self.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        config
    }
}

/// Why [`Client::connect`] failed.
#[derive(Debug)]
pub enum ConnectError {
    /// The token is not one or more visible ASCII characters ([`valid_token`]).
    BadToken,
    /// The address is not a URI or `host:port`.
    BadAddress(String),
    /// Nothing answered at the address within the timeout, or the connection was refused.
    Unreachable(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::BadToken => {
                f.write_str("the token must be one or more visible ASCII characters (no spaces)")
            }
            ConnectError::BadAddress(why) | ConnectError::Unreachable(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ConnectError {}

/// A connection to the daemon.
#[derive(Clone)]
pub struct Client {
    /// As given, for messages.
    addr: String,
    channel: Authed,
    /// How it connected, for connecting to another member of a group.
    options: Options,
    /// Every address it was given (`a:7181,b:7181`): where a session is taken up again when
    /// its daemon stops answering.
    addrs: std::sync::Arc<Vec<String>>,
    /// The connection's KeepAlive stream, which keeps every session opened through it.
    keepalives: std::sync::Arc<keepalive::Keepalives>,
    /// The connections to the group's other members made since [`Client::connect`], shared by
    /// every client made from it: the sessions taken up on one member share its connection and
    /// its KeepAlive stream.
    peers: Peers,
}

/// Connections by address: each one's channel and KeepAlive stream (not a [`Client`], which
/// would hold the map itself).
type Peers = std::sync::Arc<
    std::sync::Mutex<std::collections::HashMap<String, (Authed, std::sync::Arc<keepalive::Keepalives>)>>,
>;

impl Client {
    /// Connects to the daemon at `addr` (`host:port` or a URI), sending `token` with every call,
    /// and checks that it answers (`Admin.Health`) within `timeout`: a listener that accepts but
    /// never answers is out of reach too. Plain text; for TLS, [`Client::connect_with`].
    pub async fn connect(addr: &str, token: Option<&str>, timeout: Duration) -> Result<Client, ConnectError> {
        let options = Options { token: token.map(str::to_string), timeout, tls: None };
        Client::connect_with(addr, &options).await
    }

    /// Connects as [`Client::connect`] does, with `options`: over TLS when `options.tls` is set
    /// (then `addr` is `https://HOST:PORT` or `HOST:PORT`), or when `addr` starts `https://`
    /// (which then needs `options.tls` for the CA).
    ///
    /// `addr` may list several daemons of one group, `a:7181,b:7181`: the first that answers
    /// is used, and the others are where a client session is taken up again when its daemon
    /// stops answering (also the group's members, which each daemon names).
    pub async fn connect_with(addr: &str, options: &Options) -> Result<Client, ConnectError> {
        let addrs: Vec<String> =
            addr.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect();
        if addrs.is_empty() {
            return Err(ConnectError::BadAddress(format!("not an address: {addr:?}")));
        }
        let addrs = std::sync::Arc::new(addrs);
        let peers = Peers::default();
        let mut failed = None;
        for one in addrs.iter() {
            match Client::connect_one(one, options, addrs.clone(), peers.clone()).await {
                Ok(client) => return Ok(client),
                Err(e @ ConnectError::Unreachable(_)) => failed = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(failed.expect("at least one address was tried"))
    }

    /// The connection to `addr` already made from this client's [`Client::connect`], if any, or a
    /// new one (which the others then share, unless one was made meanwhile).
    async fn peer(&self, addr: &str, options: &Options) -> Result<Client, ConnectError> {
        if let Some(known) = self.known_peer(addr) {
            return Ok(known);
        }
        let fresh = Client::connect_one(addr, options, self.addrs.clone(), self.peers.clone()).await?;
        Ok(self.known_peer(addr).unwrap_or(fresh))
    }

    fn known_peer(&self, addr: &str) -> Option<Client> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let (channel, keepalives) = peers.get(addr)?.clone();
        let (addrs, peers) = (self.addrs.clone(), self.peers.clone());
        Some(Client {
            addr: addr.to_string(),
            channel,
            options: self.options.clone(),
            addrs,
            keepalives,
            peers,
        })
    }

    /// Connects to the one daemon at `addr`.
    async fn connect_one(
        addr: &str,
        options: &Options,
        addrs: std::sync::Arc<Vec<String>>,
        peers: Peers,
    ) -> Result<Client, ConnectError> {
        let timeout = options.timeout;
        let bearer = match &options.token {
            Some(t) if !valid_token(t) => return Err(ConnectError::BadToken),
            Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| ConnectError::BadToken)?),
            None => None,
        };
        let scheme = if options.tls.is_some() { "https" } else { "http" };
        let uri = if addr.contains("://") { addr.to_string() } else { format!("{scheme}://{addr}") };
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| ConnectError::BadAddress(format!("not an address: {addr:?} ({e})")))?
            .connect_timeout(timeout)
            // A daemon that stops answering is found out within SILENCE, calls or none.
            // Pings go out while a call or stream is open (a claim's keepalive stream, a
            // watch): a client with nothing open has nothing to be held up.
            .http2_keep_alive_interval(PING_EVERY)
            .keep_alive_timeout(PING_TIMEOUT)
            .keep_alive_while_idle(false);
        match (&options.tls, uri.starts_with("https://")) {
            (Some(tls), true) => {
                endpoint = endpoint.tls_config(tls.config()).map_err(|e| {
                    ConnectError::BadAddress(format!("TLS settings for {addr}: {}", causes(&e)))
                })?;
            }
            (Some(_), false) => {
                return Err(ConnectError::BadAddress(format!(
                    "{addr} is plain text (http://) but TLS settings were given: use https://"
                )))
            }
            (None, true) => {
                return Err(ConnectError::BadAddress(format!(
                    "{addr} is TLS (https://): give the CA that signed the daemon's certificate (--tls-ca)"
                )))
            }
            (None, false) => {}
        }
        let unreachable = |why: String| {
            ConnectError::Unreachable(format!("cannot reach the wazoo daemon at {addr}: {why}"))
        };
        let channel = match tokio::time::timeout(timeout, endpoint.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => return Err(unreachable(causes(&e))),
            Err(_) => return Err(unreachable(format!("no connection within {timeout:?}"))),
        };
        let channel = tonic::service::interceptor::InterceptedService::new(channel, Bearer(bearer));
        let keepalives = std::sync::Arc::new(keepalive::Keepalives::new(channel.clone(), addr.to_string()));
        let client =
            Client { addr: addr.to_string(), channel, options: options.clone(), addrs, keepalives, peers };
        let answered = match tokio::time::timeout(timeout, client.admin().health(pb::Empty {})).await {
            Err(_) => Err(ConnectError::Unreachable(format!(
                "the wazoo daemon at {addr} did not answer within {timeout:?}"
            ))),
            // An answer that did not come from the daemon's services (a broken connection, or a
            // TLS listener spoken to in plain text) is no answer.
            Ok(Err(status)) if status.code() == Code::Unavailable || error_kind(&status).is_none() => {
                Err(unreachable(format!("{}: {}", status.code(), status.message())))
            }
            Ok(_) => Ok(()),
        };
        answered?;
        let mut peers = client.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers
            .entry(client.addr.clone())
            .or_insert_with(|| (client.channel.clone(), client.keepalives.clone()));
        drop(peers);
        Ok(client)
    }

    /// The address as given to [`Client::connect`].
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The generated client of the `Recipes` service, on this connection.
    pub fn recipes(&self) -> RecipesClient<Authed> {
        RecipesClient::new(self.channel.clone())
    }

    /// The generated client of the `Admin` service, on this connection.
    pub fn admin(&self) -> AdminClient<Authed> {
        AdminClient::new(self.channel.clone())
    }

    /// The generated client of the `Sessions` service, on this connection.
    pub fn sessions(&self) -> SessionsClient<Authed> {
        SessionsClient::new(self.channel.clone())
    }

    /// The client sessions open on the daemon, the caller's tenant's only (`Admin.ListSessions`):
    /// each with its name, peer address, when it was opened and the claims it holds. Bounded
    /// by [`CALL_TIMEOUT`].
    pub async fn list_sessions(&self) -> Result<Vec<pb::ClientSessionInfo>, Error> {
        Ok(self.admin().list_sessions(bounded(pb::Empty {})).await?.into_inner().sessions)
    }

    /// Every claim at `prefix` or below it in the caller's tenant's namespace (`"/"`: all),
    /// read from ZooKeeper by the daemon (`Admin.ListClaims`): each with its kind and its
    /// contenders, holders first, then waiters in queue order. Claims taken by any client
    /// (wazoo, Curator, kazoo) show. Bounded by [`CALL_TIMEOUT`].
    pub async fn list_claims(&self, prefix: &str) -> Result<Vec<pb::ClaimInfo>, Error> {
        let request = pb::ListClaimsRequest { prefix: prefix.to_string() };
        Ok(self.admin().list_claims(bounded(request)).await?.into_inner().claims)
    }

    /// Opens a client session of `ttl` (the daemon may clamp it), kept alive from a task while
    /// the returned [`Session`] lives; `name` names it in the daemon's logs. When the daemon
    /// breaks off without an answer (it died since [`Client::connect`]) or cannot reach
    /// ZooKeeper, each other address the client was given is tried once, in order: the session
    /// is then kept by the daemon that opened it ([`Session::client`]).
    pub async fn session(&self, ttl: Duration, name: String) -> Result<Session, Error> {
        let broke_off = |e: &Error| {
            e.kind == Some(ErrorKind::ConnectionLoss)
                || (e.kind.is_none()
                    && matches!(e.code, Code::Unavailable | Code::Unknown | Code::Cancelled | Code::Internal))
        };
        let mut failed = match self.open(ttl, name.clone()).await {
            Err(e) if broke_off(&e) => e,
            opened => return opened,
        };
        for addr in self.addrs.iter().filter(|a| **a != self.addr) {
            let Ok(other) = self.peer(addr, &self.options).await else {
                continue;
            };
            match other.open(ttl, name.clone()).await {
                Err(e) if broke_off(&e) => failed = e,
                opened => return opened,
            }
        }
        Err(failed)
    }

    /// Where a session of this daemon is kept: on the connection's one KeepAlive stream, or on
    /// a stream of its own when the daemon does not keep many sessions on one (an older one).
    fn keepalives(&self, shared: bool) -> std::sync::Arc<keepalive::Keepalives> {
        match shared {
            true => self.keepalives.clone(),
            false => std::sync::Arc::new(keepalive::Keepalives::new(self.channel.clone(), self.addr.clone())),
        }
    }

    /// Opens a client session on this daemon.
    async fn open(&self, ttl: Duration, name: String) -> Result<Session, Error> {
        let mut sessions = self.sessions();
        let ttl_ms = ttl.as_millis().try_into().unwrap_or(u64::MAX);
        let opened = sessions.open(bounded(pb::OpenRequest { ttl_ms, name })).await?.into_inner();
        let (id, ttl) = (opened.session, Duration::from_millis(opened.ttl_ms));
        let (ended_tx, ended) = watch::channel(None);
        let (link_tx, link) = watch::channel(Link { client: self.clone(), generation: 0, jeopardy: None });
        let group = Group {
            secret: opened.secret,
            members: std::sync::Arc::new(std::sync::Mutex::new(opened.members)),
            zookeeper_timeout: Duration::from_millis(opened.zookeeper_timeout_ms),
        };
        let grouped = !group.secret.is_empty();
        let kept = Kept { session: id, ttl, ended: ended_tx, link: link_tx, group };
        let keeping = match self.keepalives(opened.shared_keepalive).keep(id, kept.every()).await {
            Ok(keeping) => keeping,
            Err(refused) => {
                // Not kept, so not left open until its TTL passes.
                let _ = sessions.close(bounded(pb::SessionRef { session: id })).await;
                return Err(refused.into());
            }
        };
        let keeper = tokio::spawn(kept.run(self.clone(), keeping));
        Ok(Session { id, ttl, sessions, ended, link, grouped, keeper })
    }

    /// Takes the lock (or one side of a read/write lock, or a lease) at `path` in a session of
    /// its own: waits until it is held, or `options.timeout` passes (`Code::DeadlineExceeded`).
    pub async fn lock(&self, path: &str, options: LockOptions) -> Result<Claim, Error> {
        let session = self.session(options.ttl, format!("wazoo-client lock {path}")).await?;
        let ask = Ask::Acquire { family: options.family, leases: options.leases };
        let mut contender = session.contender(ask, options.recipe);
        match contender.acquire(path, options.timeout).await {
            Ok(_) => contender.hold().await,
            Err(not) => {
                contender.close().await;
                Err(not.into())
            }
        }
    }

    /// A [`Holder`]: claims taken and let go one after another on one `Hold` stream, in
    /// `session` (which must outlive it). Cheaper than [`Client::lock`] for a client that takes
    /// claims over and over: no call per step, no session per claim.
    pub async fn holder(&self, session: &Session) -> Result<Holder, Error> {
        let (steps, rx) = mpsc::channel(2);
        let events = self.recipes().hold(ReceiverStream::new(rx)).await?.into_inner();
        Ok(Holder {
            session: session.id,
            ended: session.ended.clone(),
            addr: self.addr.clone(),
            steps,
            events,
            held: false,
            lost: None,
            link: session.grouped.then(|| (session.link.clone(), session.generation())),
            claim: None,
        })
    }

    /// Follows the loss of `claim`, which `session` holds, from now on: the claim as a [`Claim`].
    /// What [`Client::lock`] does once `Acquire` answers; for the other claim calls
    /// (`Campaign`, `GroupJoin`), made on [`Client::recipes`].
    pub async fn follow(&self, session: Session, claim: pb::Claim) -> Result<Claim, Error> {
        let handle = pb::HandleRef { session: session.id, handle: claim.handle };
        let mut followed = session.generation();
        let lost = match self.recipes().lost(bounded(handle)).await {
            Ok(lost) => Some(lost.into_inner()),
            // The daemon broke off without an answer: in a group, another member takes the
            // session up, and [`Claim::lost`] takes the claim up there.
            Err(status) if session.grouped && error_kind(&status).is_none() => None,
            // Granted by the member before, the session taken up since (by this one, which
            // knows its own handles only): [`Claim::lost`] takes the claim up here at once, as
            // granted on the link before this one.
            Err(status)
                if session.grouped
                    && followed > 0
                    && error_kind(&status) == Some(ErrorKind::UnknownHandle) =>
            {
                followed -= 1;
                None
            }
            Err(status) => {
                session.close().await;
                return Err(status.into());
            }
        };
        Ok(Claim {
            current: std::sync::Arc::new(std::sync::Mutex::new((self.clone(), handle))),
            session,
            claim,
            lost: std::sync::Mutex::new(lost),
            followed: std::sync::Mutex::new(Some(followed)),
        })
    }
}

/// What [`Client::lock`] takes.
#[derive(Clone, Debug)]
pub struct LockOptions {
    /// The lock, the read or write side of a read/write lock, or a semaphore lease.
    pub family: pb::Family,
    /// For a semaphore: how many may hold it at once.
    pub leases: u32,
    /// How long to wait; `None` waits as long as it takes.
    pub timeout: Option<Duration>,
    /// The client session's TTL.
    pub ttl: Duration,
    /// The recipe serving it; empty for the daemon's default.
    pub recipe: String,
    /// Who holds it (`AcquireRequest.holder_id`): written into the claim's node with the client
    /// session's name and address; empty for the session's name.
    pub holder_id: String,
}

impl Default for LockOptions {
    fn default() -> LockOptions {
        LockOptions {
            family: pb::Family::Lock,
            leases: 0,
            timeout: None,
            ttl: Duration::from_secs(10),
            recipe: String::new(),
            holder_id: String::new(),
        }
    }
}

impl LockOptions {
    /// The Acquire asking for this in `session`, at `path`.
    fn request(&self, session: u64, path: &str) -> pb::AcquireRequest {
        pb::AcquireRequest {
            session,
            path: path.to_string(),
            family: self.family as i32,
            max_leases: self.leases,
            timeout_ms: self.timeout.map(|t| t.as_millis().try_into().unwrap_or(u64::MAX)),
            recipe: self.recipe.clone(),
            claim_id: String::new(),
            retry: false,
            holder_id: self.holder_id.clone(),
            ..Default::default()
        }
    }
}

/// What a [`Contender`] asks for, and so the call that asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    /// `Acquire`: the lock, the read or write side of a read/write lock, or a semaphore lease
    /// (`family`), and for a semaphore how many may hold it at once (`leases`).
    Acquire { family: pb::Family, leases: u32 },
    /// `Acquire` of a family the daemon serves from its description (`described`), with the
    /// contender's node `data`.
    Described { family: String, data: Vec<u8> },
    /// `Campaign`: leadership of an election, as participant `id`.
    Campaign { id: String },
    /// `GroupJoin`: membership of a group, as member `name` with `data`.
    Join { name: String, data: Vec<u8> },
}

/// Why [`Contender::acquire`] did not get the claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotAcquired {
    /// The call failed: the daemon's answer (a timeout is of kind [`ErrorKind::Timeout`]), or a
    /// status with no kind (the connection broke, outside a group).
    Failed(Error),
    /// The client session ended while the call waited (the daemon ended it, or stopped
    /// answering and no other member of its group took it up): why, in words.
    SessionEnded(String),
}

impl From<NotAcquired> for Error {
    fn from(not: NotAcquired) -> Error {
        match not {
            NotAcquired::Failed(error) => error,
            NotAcquired::SessionEnded(why) => Status::unavailable(why).into(),
        }
    }
}

/// A claim asked for in a client session of its own ([`Session::contender`]), made before the
/// wait: dropping a wait, or closing the contender, ends the session and with it whatever the
/// wait made. [`Contender::hold`] turns what it acquired into a [`Claim`].
pub struct Contender {
    session: Session,
    ask: Ask,
    /// The recipe serving it; empty for the daemon's default.
    recipe: String,
    /// What the daemon granted.
    granted: Option<pb::Claim>,
    /// Who it contends for (`AcquireRequest.holder_id`); empty for the session's name.
    holder_id: String,
}

impl Session {
    /// A contender for `ask`, served by `recipe` (empty for the daemon's default), in this
    /// session, which it keeps from now on.
    pub fn contender(self, ask: Ask, recipe: impl Into<String>) -> Contender {
        Contender { session: self, ask, recipe: recipe.into(), granted: None, holder_id: String::new() }
    }
}

impl Contender {
    /// Names who this contender is for (an Acquire's `holder_id`: at most 128 bytes of
    /// printable text): the daemon writes it into the claim's node with the client session's
    /// name and address, where `holders`, `claims`, kazoo and Curator show it.
    pub fn holder_id(mut self, id: impl Into<String>) -> Contender {
        self.holder_id = id.into();
        self
    }

    /// Asks for the claim at `path` and waits until it is had, or `timeout` passes (an error of
    /// kind [`ErrorKind::Timeout`]); a membership is had at once. The call ends with the client
    /// session. In a daemon group, a daemon that breaks off without an answer is not a failure:
    /// once another member takes the session up, the call goes again there under the same
    /// claim id, and finds the node the first one made (its place in the queue kept).
    pub async fn acquire(
        &mut self,
        path: &str,
        timeout: Option<Duration>,
    ) -> Result<&pb::Claim, NotAcquired> {
        let claim_id = uuid::Uuid::new_v4().simple().to_string();
        let mut retry = false;
        loop {
            // The daemon that keeps the session (the one that opened it, or the member that took
            // it up since).
            let link = self.session.link.borrow().clone();
            let mut recipes = link.client.recipes();
            let asking = self.ask_once(&mut recipes, path, timeout, &claim_id, retry);
            let reply = tokio::select! {
                reply = asking => reply,
                why = self.session.ended() => return Err(NotAcquired::SessionEnded(why)),
            };
            match reply {
                Ok(claim) => return Ok(self.granted.insert(claim)),
                // No typed answer: the daemon broke off (in a group, another may take over).
                Err(status) if error_kind(&status).is_none() && self.session.in_group() => {
                    tracing::warn!(
                        "jeopardy: {}; waiting for another daemon of the group to take the session up",
                        status.message()
                    );
                    if self.session.next_link(link.generation).await.is_none() {
                        return Err(NotAcquired::SessionEnded(self.session.ended().await));
                    }
                    retry = true;
                }
                Err(status) => return Err(NotAcquired::Failed(status.into())),
            }
        }
    }

    /// One Acquire, Campaign or GroupJoin, sent with `claim_id` (`retry`: sent before).
    async fn ask_once(
        &self,
        recipes: &mut RecipesClient<Authed>,
        path: &str,
        timeout: Option<Duration>,
        claim_id: &str,
        retry: bool,
    ) -> Result<pb::Claim, Status> {
        let (session, path, recipe) = (self.session.id, path.to_string(), self.recipe.clone());
        let timeout_ms = timeout.map(|t| t.as_millis().try_into().unwrap_or(u64::MAX));
        let claim_id = claim_id.to_string();
        let reply = match &self.ask {
            Ask::Acquire { family, leases } => {
                let request = pb::AcquireRequest {
                    session,
                    path,
                    family: *family as i32,
                    max_leases: *leases,
                    timeout_ms,
                    recipe,
                    claim_id,
                    retry,
                    holder_id: self.holder_id.clone(),
                    ..Default::default()
                };
                recipes.acquire(request).await
            }
            Ask::Described { family, data } => {
                let request = pb::AcquireRequest {
                    session,
                    path,
                    described: family.clone(),
                    data: data.clone(),
                    timeout_ms,
                    recipe,
                    claim_id,
                    retry,
                    holder_id: self.holder_id.clone(),
                    ..Default::default()
                };
                recipes.acquire(request).await
            }
            Ask::Campaign { id } => {
                let request = pb::CampaignRequest {
                    session,
                    path,
                    id: id.clone(),
                    timeout_ms,
                    recipe,
                    claim_id,
                    retry,
                };
                recipes.campaign(request).await
            }
            Ask::Join { name, data } => {
                let request =
                    pb::GroupJoinRequest { session, path, name: name.clone(), data: data.clone(), recipe };
                recipes.group_join(request).await
            }
        };
        reply.map(tonic::Response::into_inner)
    }

    /// What the daemon granted, once [`Contender::acquire`] had it.
    pub fn granted(&self) -> Option<&pb::Claim> {
        self.granted.as_ref()
    }

    /// The client session it asks in.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// A leader's acknowledgement (`note`), for observers to see that it started its work;
    /// nothing before the claim is had.
    pub async fn acknowledge(&mut self, note: &str) -> Result<(), Error> {
        let Some(claim) = &self.granted else { return Ok(()) };
        let request =
            pb::AcknowledgeRequest { session: self.session.id, handle: claim.handle, note: note.to_string() };
        let mut recipes = self.session.client().recipes();
        recipes.acknowledge(bounded(request)).await.map(drop).map_err(Error::from)
    }

    /// What was acquired as a [`Claim`], its loss followed from now on, on the daemon that keeps
    /// the session now ([`Client::follow`]). Nothing acquired: the session is closed, and the
    /// error is of code `FAILED_PRECONDITION`.
    pub async fn hold(self) -> Result<Claim, Error> {
        let Some(claim) = self.granted else {
            self.session.close().await;
            return Err(Status::failed_precondition("nothing was acquired").into());
        };
        let client = self.session.client();
        client.follow(self.session, claim).await
    }

    /// Closes its session, deleting whatever it made.
    pub async fn close(self) {
        self.session.close().await
    }
}

/// Claims taken and let go one after another on one `Hold` stream ([`Client::holder`]): one
/// claim at a time, each a handle of the session the holder was made in. Dropping the holder
/// ends the stream, and the daemon lets go of a claim still held.
///
/// A holder does not fail over: when its daemon goes, [`Holder::lost`] says `Disconnected`, and
/// in a group the member that takes the session up lets the claim's node go, so that nobody
/// waits on a claim no one holds. Take the next claims on a new holder from
/// [`Session::client`].
///
/// ```no_run
/// # async fn example(client: wazoo_client::Client) -> Result<(), wazoo_client::Error> {
/// use std::time::Duration;
/// let session = client.session(Duration::from_secs(10), "worker".into()).await?;
/// let mut holder = client.holder(&session).await?;
/// for _ in 0..3 {
///     let claim = holder.acquire("/app/lock", &wazoo_client::LockOptions::default()).await?;
///     // … work that passes claim.fencing_token on, while watching holder.lost() …
///     holder.release().await?;
/// }
/// # Ok(()) }
/// ```
pub struct Holder {
    session: u64,
    /// Why the session is no longer kept, once it is not (as [`Session::ended`]).
    ended: watch::Receiver<Option<Ending>>,
    addr: String,
    steps: mpsc::Sender<pb::HoldRequest>,
    events: Streaming<pb::HoldEvent>,
    /// Whether a claim is held.
    held: bool,
    /// Why the held claim was lost, once the daemon said so.
    lost: Option<Lost>,
    /// In a daemon group: the session's link, and its generation when the stream was opened.
    link: Option<(watch::Receiver<Link>, u64)>,
    /// The held claim's node and token.
    claim: Option<(String, i64)>,
}

impl Holder {
    /// Takes the claim `options` asks for at `path` (its `ttl` is the session's business, not
    /// read here): waits until it is held, or `options.timeout` passes (an error of kind
    /// [`ErrorKind::Timeout`], which ends the stream as any failed step does). Not cancel-safe:
    /// to give up a wait, drop the holder (the daemon lets go of whatever it took).
    pub async fn acquire(&mut self, path: &str, options: &LockOptions) -> Result<pb::Claim, Error> {
        use pb::hold_request::Step;
        if let Some(ending) = self.ended.borrow().clone() {
            return Err(self.broken(&ending.why));
        }
        self.send(Step::Acquire(options.request(self.session, path))).await?;
        match self.next().await? {
            pb::hold_event::Event::Claim(claim) => {
                (self.held, self.lost) = (true, None);
                self.claim = Some((claim.node.clone(), claim.fencing_token));
                Ok(claim)
            }
            other => Err(self.unexpected(&other)),
        }
    }

    /// Resolves once the held claim is lost, with why (at once if it was already); never if no
    /// claim is held. Lost too once the session is no longer kept ([`Session::ended`]: no
    /// keepalive answered for 2/3 of its TTL), before the daemon can hand the claim to another.
    /// Cancel-safe: use it in a `select!` beside the work.
    pub async fn lost(&mut self) -> Lost {
        if !self.held {
            return std::future::pending().await;
        }
        if let Some(lost) = &self.lost {
            return lost.clone();
        }
        let mut ended = self.ended.clone();
        let event = tokio::select! {
            biased;
            event = self.events.message() => event,
            ending = async { ended.wait_for(Option::is_some).await.map(|w| w.clone()).ok().flatten() } => {
                match ending {
                    // No keepalive answered, or the connection broke: the claim counts as lost
                    // now, whatever the stream says later.
                    Some(Ending { why, silent: true }) => {
                        let lost = Lost::Disconnected(why);
                        self.lost = Some(lost.clone());
                        self.let_go_elsewhere();
                        return lost;
                    }
                    // The daemon ended the session or its keepalive stream: its reason for the
                    // claim is on the way on the Hold stream.
                    Some(Ending { why, silent: false }) => {
                        match tokio::time::timeout(SETTLE, self.events.message()).await {
                            Ok(Ok(Some(event))) => Ok(Some(event)),
                            _ => {
                                let lost = Lost::Disconnected(why);
                                self.lost = Some(lost.clone());
                                return lost;
                            }
                        }
                    }
                    // The session was closed or dropped here: the daemon says why on the stream
                    // (its client session ended), within SILENCE of a daemon that went quiet.
                    None => match tokio::time::timeout(SILENCE, self.events.message()).await {
                        Ok(event) => event,
                        Err(_) => Ok(None),
                    },
                }
            }
        };
        let lost = match event {
            Ok(Some(pb::HoldEvent { event: Some(pb::hold_event::Event::Lost(event)) })) => {
                Lost::from_event(&event)
            }
            Ok(Some(other)) => Lost::Other(format!("the wazoo daemon at {} sent {other:?}", self.addr)),
            Ok(None) => {
                self.let_go_elsewhere();
                Lost::Disconnected(format!("the wazoo daemon at {} ended the Hold stream", self.addr))
            }
            Err(status) => {
                self.let_go_elsewhere();
                Lost::Disconnected(format!(
                    "lost the Hold stream to the wazoo daemon at {}: {}",
                    self.addr,
                    status.message()
                ))
            }
        };
        self.lost = Some(lost.clone());
        lost
    }

    /// The held claim went with its stream's daemon. In a group, the member that takes the
    /// session up keeps the claim's node, which nobody holds any more: it is let go there (taken
    /// up by its node and token, then released), in the background, once the session has moved.
    /// A session that ends instead takes the node with it.
    fn let_go_elsewhere(&mut self) {
        let (Some((link, generation)), Some((node, token))) = (self.link.clone(), self.claim.take()) else {
            return;
        };
        let (ended, session) = (self.ended.clone(), self.session);
        tokio::spawn(async move {
            let Some(client) = Session::wait_link(link, ended, generation).await else { return };
            let mut recipes = client.recipes();
            let resume = pb::ResumeRequest { session, node: node.clone(), fencing_token: token };
            if let Ok(claim) = recipes.resume(bounded(resume)).await {
                let handle = pb::HandleRef { session, handle: claim.into_inner().handle };
                if let Err(status) = recipes.release(bounded(handle)).await {
                    tracing::warn!(
                        session,
                        node,
                        "letting go of a Hold stream's claim after a move: {status}"
                    );
                }
            }
        });
    }

    /// Lets the held claim go (its node deleted); the holder can take the next. Not
    /// cancel-safe: to give up, drop the holder (the daemon lets go of the claim).
    pub async fn release(&mut self) -> Result<(), Error> {
        use pb::hold_event::Event;
        if !self.held {
            return Err(Error {
                kind: Some(ErrorKind::InvalidArgument),
                code: Code::InvalidArgument,
                message: "this holder holds no claim".into(),
            });
        }
        self.send(pb::hold_request::Step::Release(pb::Empty {})).await?;
        (self.held, self.claim) = (false, None);
        loop {
            match self.next().await? {
                Event::Released(_) => return Ok(()),
                // A loss said before the release was read: the release still ends the handle.
                Event::Lost(_) => continue,
                other => return Err(self.unexpected(&other)),
            }
        }
    }

    /// Lets the held claim go and takes it again as the last [`Holder::acquire`] asked, at the
    /// back of its queue (a waiter goes first): for a client that takes the same lock in a loop.
    /// Where the recipe allows, the daemon sends the release and the new node's create to
    /// ZooKeeper in one write. Returns the new claim (handle, node, fencing token). Not
    /// cancel-safe, as [`Holder::acquire`]; an error ends the stream, the old claim let go of.
    pub async fn requeue(&mut self) -> Result<pb::Claim, Error> {
        use pb::hold_event::Event;
        if !self.held {
            return Err(Error {
                kind: Some(ErrorKind::InvalidArgument),
                code: Code::InvalidArgument,
                message: "this holder holds no claim".into(),
            });
        }
        self.send(pb::hold_request::Step::Requeue(pb::Empty {})).await?;
        (self.held, self.claim) = (false, None);
        loop {
            match self.next().await? {
                Event::Claim(claim) => {
                    (self.held, self.lost) = (true, None);
                    self.claim = Some((claim.node.clone(), claim.fencing_token));
                    return Ok(claim);
                }
                // A loss of the old claim said before the requeue was read.
                Event::Lost(_) => continue,
                other => return Err(self.unexpected(&other)),
            }
        }
    }

    async fn send(&mut self, step: pb::hold_request::Step) -> Result<(), Error> {
        let request = pb::HoldRequest { step: Some(step) };
        if self.steps.send(request).await.is_err() {
            return Err(self.broken("the Hold stream is closed"));
        }
        Ok(())
    }

    async fn next(&mut self) -> Result<pb::hold_event::Event, Error> {
        match self.events.message().await {
            Ok(Some(pb::HoldEvent { event: Some(event) })) => Ok(event),
            Ok(Some(pb::HoldEvent { event: None })) => Err(self.broken("the daemon sent an empty HoldEvent")),
            Ok(None) => Err(self.broken("the daemon ended the Hold stream")),
            Err(status) => Err(Error::from(status)),
        }
    }

    fn unexpected(&self, event: &pb::hold_event::Event) -> Error {
        self.broken(&format!("the daemon sent {event:?} out of turn"))
    }

    fn broken(&self, what: &str) -> Error {
        Error {
            kind: None,
            code: Code::Unavailable,
            message: format!("{what} (wazoo daemon at {})", self.addr),
        }
    }
}

/// A client session: kept alive by a task while this lives.
pub struct Session {
    id: u64,
    /// As the daemon granted it.
    ttl: Duration,
    sessions: SessionsClient<Authed>,
    /// Why the daemon no longer keeps the session, once it does not.
    ended: watch::Receiver<Option<Ending>>,
    /// The daemon that keeps it now, and whether it is in jeopardy (its daemon stopped
    /// answering and no other member of the group has taken it up yet).
    link: watch::Receiver<Link>,
    /// Whether its daemon is in a group.
    grouped: bool,
    keeper: tokio::task::JoinHandle<()>,
}

/// Where a session is kept: the client of its daemon, counted up each time another member of
/// the group takes it up.
#[derive(Clone)]
struct Link {
    client: Client,
    generation: u64,
    /// Why the session is in jeopardy, while it is.
    jeopardy: Option<String>,
}

/// What a daemon of a group said about the session, to take it up elsewhere with.
struct Group {
    /// Empty outside a group.
    secret: Vec<u8>,
    /// The members, as the daemon last named them (refreshed every [`MEMBERS_EVERY`]).
    members: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    zookeeper_timeout: Duration,
}

/// How often a session in a group asks its daemon for the group's members: members replaced
/// since the session opened are then known when its daemon stops answering.
const MEMBERS_EVERY: Duration = Duration::from_secs(2);

/// How long a taken-up session's daemon is given to answer, per address tried.
const REATTACH_TRY: Duration = Duration::from_millis(500);

impl Session {
    /// The session's id, for the calls that take one.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The TTL the daemon granted.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Resolves, with why, once the session is no longer kept: the daemon ended it, the stream
    /// broke, or no keepalive sent in the last [`CUT_OFF`] of the TTL was answered.
    pub fn ended(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let ending = self.ending();
        async move { ending.await.why }
    }

    /// As [`Session::ended`], with whether the daemon went silent.
    fn ending(&self) -> impl std::future::Future<Output = Ending> + Send + 'static {
        let mut ended = self.ended.clone();
        async move {
            let _ = ended.wait_for(Option::is_some).await;
            let ending = ended.borrow().clone();
            ending.unwrap_or_else(|| Ending { why: "the client session ended".to_string(), silent: false })
        }
    }

    /// Whether the session belongs to a daemon group (and can be taken up elsewhere).
    pub fn in_group(&self) -> bool {
        self.grouped
    }

    /// Resolves with why once the session is in jeopardy: its daemon stopped answering and no
    /// other member of the group has taken it up yet (at once if it is now). Claims are still
    /// held meanwhile; [`Session::ended`] says when they are not.
    pub fn jeopardy(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut link = self.link.clone();
        async move {
            loop {
                if let Some(why) = link.borrow_and_update().jeopardy.clone() {
                    return why;
                }
                if link.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }

    /// Resolves once another daemon took the session up after link `generation` (with its
    /// client), or `None` once the session ended instead.
    /// The client of the daemon that keeps the session now.
    pub fn client(&self) -> Client {
        self.link.borrow().client.clone()
    }

    /// Counts the times the session was taken up by another daemon of its group.
    pub fn generation(&self) -> u64 {
        self.link.borrow().generation
    }

    /// Resolves once another daemon has taken the session up after `generation` (with that
    /// daemon's client), or with `None` once the session ended instead.
    pub async fn taken_up_after(&self, generation: u64) -> Option<Client> {
        self.next_link(generation).await
    }

    async fn next_link(&self, generation: u64) -> Option<Client> {
        Session::wait_link(self.link.clone(), self.ended.clone(), generation).await
    }

    async fn wait_link(
        mut link: watch::Receiver<Link>,
        mut ended: watch::Receiver<Option<Ending>>,
        generation: u64,
    ) -> Option<Client> {
        loop {
            {
                let now = link.borrow_and_update();
                if now.generation > generation {
                    return Some(now.client.clone());
                }
            }
            if ended.borrow().is_some() {
                return None;
            }
            tokio::select! {
                changed = link.changed() => if changed.is_err() { return None },
                _ = ended.changed() => {}
            }
        }
    }

    /// Closes the session, deleting whatever it still holds. Bounded by [`CALL_TIMEOUT`]: a
    /// daemon that does not answer ends the session itself a TTL after the last keepalive.
    pub async fn close(self) {
        // In jeopardy, the close goes to the member that takes the session up; if none does in
        // time, the session is over anyway, and a silent daemon is not waited for.
        let jeopardy = self.link.borrow().jeopardy.is_some();
        if self.grouped && jeopardy {
            let generation = self.link.borrow().generation;
            if Session::wait_link(self.link.clone(), self.ended.clone(), generation).await.is_none() {
                return;
            }
        }
        let mut sessions = match self.link.borrow().generation {
            0 => self.sessions.clone(),
            _ => self.link.borrow().client.sessions(),
        };
        let _ = sessions.close(bounded(pb::SessionRef { session: self.id })).await;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Ends the session's keepalives (its `Keeping` sends its end), and with them the session.
        self.keeper.abort();
    }
}

/// The task that keeps a session: keepalives, and in a group, taking the session up again
/// through another member when its daemon stops answering.
struct Kept {
    session: u64,
    ttl: Duration,
    ended: watch::Sender<Option<Ending>>,
    link: watch::Sender<Link>,
    group: Group,
}

impl Kept {
    /// How long the session may go unanswered before its claims count as lost: [`CUT_OFF`] of
    /// its TTL, and in a group also of the daemon's ZooKeeper session timeout (a session no
    /// member takes up expires that long after its daemon last reached ZooKeeper, and another
    /// client may then hold what this one did).
    fn limit(&self) -> Duration {
        let mut base = self.ttl;
        if !self.group.secret.is_empty() && !self.group.zookeeper_timeout.is_zero() {
            base = base.min(self.group.zookeeper_timeout);
        }
        base * CUT_OFF.0 / CUT_OFF.1
    }

    /// How long its daemon may go unanswered before the session is in jeopardy: in a group, a
    /// daemon silent for a third of the limit is left while two thirds remain to take the
    /// session up elsewhere; alone, it is waited for to the end.
    fn silence(&self) -> Duration {
        match self.group.secret.is_empty() {
            true => self.limit(),
            false => self.limit() / 3,
        }
    }

    /// How often a keepalive goes out: every sixth of the TTL, and at least three in each
    /// silence.
    fn every(&self) -> Duration {
        (self.ttl / 6).min(self.silence() / 3).max(Duration::from_millis(50))
    }

    async fn run(mut self, mut client: Client, mut keeping: Keeping) {
        let limit = self.limit();
        let grouped = !self.group.secret.is_empty();
        let silence = self.silence();
        let mut answered = tokio::time::Instant::now();
        loop {
            let refresh = grouped.then(|| {
                let (client, members) = (client.clone(), self.group.members.clone());
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(MEMBERS_EVERY).await;
                        if let Ok(reply) = client.sessions().members(bounded(pb::Empty {})).await {
                            let named = reply.into_inner().members;
                            if !named.is_empty() {
                                *members.lock().unwrap_or_else(|e| e.into_inner()) = named;
                            }
                        }
                    }
                })
            });
            let kept = keep_alive(silence, &mut keeping, &mut answered, &client.addr).await;
            if let Some(refresh) = refresh {
                refresh.abort();
            }
            let (why, silent, over) = kept;
            if over || !grouped {
                self.ended.send_replace(Some(Ending { why, silent }));
                return;
            }
            tracing::warn!(
                session = self.session,
                "jeopardy: {why}; taking the session up through another daemon of the group"
            );
            self.link.send_modify(|l| l.jeopardy = Some(why.clone()));
            match self.reattach(&client, answered + limit).await {
                Ok((next, kept_there)) => {
                    tracing::warn!(session = self.session, daemon = %next.addr, "safe: the session was taken up by the daemon at {}", next.addr);
                    (client, keeping) = (next.clone(), kept_there);
                    answered = tokio::time::Instant::now();
                    self.link.send_modify(|l| {
                        l.client = next;
                        l.generation += 1;
                        l.jeopardy = None;
                    });
                }
                Err(failed) => {
                    self.ended.send_replace(Some(Ending { why: format!("{why}; {failed}"), silent: true }));
                    return;
                }
            }
        }
    }

    /// Takes the session up through a member of the group (those the daemon named, then the
    /// addresses the client was given) before `deadline`: the new daemon's client and keepalive
    /// stream.
    async fn reattach(
        &mut self,
        old: &Client,
        deadline: tokio::time::Instant,
    ) -> Result<(Client, Keeping), String> {
        let mut candidates: Vec<String> =
            self.group.members.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for addr in old.addrs.iter() {
            if !candidates.contains(addr) {
                candidates.push(addr.clone());
            }
        }
        // The daemon that stopped answering is tried last: it may be back, but most often a
        // try there only costs time the others need.
        candidates.sort_by_key(|addr| *addr == old.addr);
        let options = Options { timeout: REATTACH_TRY, ..old.options.clone() };
        let mut last = String::from("no member of the group answered");
        loop {
            let mut learned: Vec<String> = Vec::new();
            for addr in &candidates {
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!("no member of the group took the session up in time ({last})"));
                }
                let attempt = async {
                    // The sessions taken up on one member share one connection there; the
                    // silent daemon's is never trusted again (a new one, its own stream).
                    let client = match *addr == old.addr {
                        true => {
                            Client::connect_one(addr, &options, old.addrs.clone(), old.peers.clone()).await
                        }
                        false => old.peer(addr, &options).await,
                    };
                    let client = client.map_err(|e| (e.to_string(), Vec::new()))?;
                    let client = Client { options: old.options.clone(), ..client };
                    let mut sessions = client.sessions();
                    let request =
                        pb::ReattachRequest { session: self.session, secret: self.group.secret.clone() };
                    let reply = sessions
                        .reattach(bounded(request))
                        .await
                        .map_err(|s| (s.code(), s.message().to_string()));
                    let reply = match reply {
                        Ok(r) => r.into_inner(),
                        Err((Code::NotFound, why)) => return Err((format!("gone: {why}"), Vec::new())),
                        // A member that answers but does not take the session up (another is
                        // adopting it, say one that joined after this session was opened): the
                        // members it knows are tried too.
                        Err((_, why)) => {
                            let known = sessions.members(bounded(pb::Empty {})).await;
                            let known = known.map(|m| m.into_inner().members).unwrap_or_default();
                            return Err((why, known));
                        }
                    };
                    let mut keeping = client
                        .keepalives(reply.shared_keepalive)
                        .keep(self.session, self.every())
                        .await
                        .map_err(|s| (s.message().to_string(), Vec::new()))?;
                    // One keepalive answered on the new stream before the old one is let go:
                    // a daemon that takes the session back (it was only slow) then counts the
                    // new stream first, and does not end the session when the old one ends.
                    match keeping.next(&client.addr).await {
                        Answer::Heard(_) => {}
                        Answer::Ended => return Err(("gone: the session ended".to_string(), Vec::new())),
                        Answer::Broke { why, .. } => return Err((why, Vec::new())),
                    }
                    Ok::<_, (String, Vec<String>)>((client, reply, keeping))
                };
                match tokio::time::timeout_at(deadline, attempt).await {
                    Ok(Ok((client, reply, keeping))) => {
                        if !reply.members.is_empty() {
                            *self.group.members.lock().unwrap_or_else(|e| e.into_inner()) = reply.members;
                        }
                        return Ok((client, keeping));
                    }
                    Ok(Err((why, _))) if why.starts_with("gone: ") => {
                        return Err(format!("the group no longer keeps the session ({})", &why[6..]));
                    }
                    Ok(Err((why, known))) => {
                        last = format!("{addr}: {why}");
                        learned.extend(known);
                    }
                    Err(_) => {
                        return Err(format!("no member of the group took the session up in time ({last})"))
                    }
                }
            }
            for addr in learned {
                if !candidates.contains(&addr) {
                    candidates.insert(0, addr);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Waits on the session's keepalives (sent by its connection's stream) until the stream fails
/// or nothing sent in the last `silence` was answered: why, whether the daemon went silent,
/// and whether the daemon ended the session itself (then it is over, wherever the client goes).
async fn keep_alive(
    silence: Duration,
    keeping: &mut Keeping,
    answered: &mut tokio::time::Instant,
    addr: &str,
) -> (String, bool, bool) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(*answered + silence) => {
                return (format!(
                    "no keepalive answer from the wazoo daemon at {addr} for {:.1}s",
                    silence.as_secs_f64()
                ), true, false);
            }
            answer = keeping.next(addr) => match answer {
                // The daemon heard from the client no earlier than the last answered one.
                Answer::Heard(at) => *answered = at,
                Answer::Ended => return (format!("the wazoo daemon at {addr} ended the client session"), false, true),
                Answer::Broke { why, silent } => return (why, silent, false),
            },
        }
    }
}

/// A claim the daemon holds for this client (a lock, a lease, a leadership, a membership), in a
/// session of its own. Dropping it ends the session, which lets the claim go.
pub struct Claim {
    /// The daemon that keeps the claim now and its handle there (another member's once the
    /// session was taken up elsewhere).
    current: std::sync::Arc<std::sync::Mutex<(Client, pb::HandleRef)>>,
    session: Session,
    claim: pb::Claim,
    /// The Lost stream, opened before the claim is handed out (none if its daemon broke off
    /// meanwhile, in a group); taken by [`Claim::lost`].
    lost: std::sync::Mutex<Option<Streaming<pb::LostEvent>>>,
    /// The session's link (generation) the claim was followed on; taken by [`Claim::lost`].
    followed: std::sync::Mutex<Option<u64>>,
}

/// Why a claim was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The daemon's ZooKeeper session expired: the claim's node is gone.
    SessionExpired,
    /// The daemon's ZooKeeper session was closed (the daemon stopping): the claim's node is gone.
    SessionClosed,
    /// The claim's node was deleted by someone else.
    NodeDeleted,
    /// Another client revoked the claim.
    Revoked,
    /// The daemon had no answer from ZooKeeper for [`CUT_OFF`] of its session timeout.
    CutOff,
    /// Another call let the claim go (a `Release` of its handle while a [`Holder`] held it).
    Released,
    /// The claim's client session ended while it was held (closed, or its TTL passed without a
    /// keepalive the daemon received): the daemon deleted its node.
    ClientSessionEnded,
    /// The client session ended, or the connection to the daemon broke (the reason in words).
    Disconnected(String),
    /// A reason this client does not know (or none, from an older daemon), with the daemon's
    /// words for it.
    Other(String),
}

impl Lost {
    /// Why a `LostEvent` says the claim was lost: its typed `loss_reason`.
    pub fn from_event(event: &pb::LostEvent) -> Lost {
        match LossReason::try_from(event.loss_reason) {
            Ok(LossReason::SessionExpired) => Lost::SessionExpired,
            Ok(LossReason::SessionClosed) => Lost::SessionClosed,
            Ok(LossReason::NodeDeleted) => Lost::NodeDeleted,
            Ok(LossReason::Revoked) => Lost::Revoked,
            Ok(LossReason::CutOff) => Lost::CutOff,
            Ok(LossReason::Released) => Lost::Released,
            Ok(LossReason::ClientSessionEnded) => Lost::ClientSessionEnded,
            Ok(LossReason::Unspecified) | Err(_) => Lost::Other(event.reason.clone()),
        }
    }

    /// A `LostEvent`'s reason in words.
    #[deprecated(note = "the words are going; use Lost::from_event, which reads the typed loss_reason")]
    pub fn from_reason(reason: &str) -> Lost {
        match reason {
            "session-expired" => Lost::SessionExpired,
            "node-deleted" => Lost::NodeDeleted,
            "revoked" => Lost::Revoked,
            "cut-off" => Lost::CutOff,
            other => Lost::Other(other.to_string()),
        }
    }
}

/// Why a claim was lost, in words: a loss the local path also knows (the ZooKeeper session's
/// end, the node deleted, a revocation) is worded as `wazoo_runtime::Lost` words it there.
impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::SessionExpired => f.write_str("ZooKeeper session expired"),
            Lost::SessionClosed => f.write_str("ZooKeeper session ended (Closed)"),
            Lost::NodeDeleted => f.write_str("lock node was deleted"),
            Lost::Revoked => f.write_str("revoked by another client"),
            Lost::CutOff => f.write_str(
                "the wazoo daemon had no answer from ZooKeeper for 2/3 of its session timeout: assuming the session expired",
            ),
            Lost::Released => f.write_str("another call released the claim"),
            Lost::ClientSessionEnded => f.write_str(
                "the wazoo daemon ended the claim's client session (closed, or no keepalive within its TTL)",
            ),
            Lost::Disconnected(why) | Lost::Other(why) => f.write_str(why),
        }
    }
}

impl Claim {
    /// The claim's node.
    pub fn node(&self) -> &str {
        &self.claim.node
    }

    /// The fencing token: the node's czxid; every later holder's is greater.
    pub fn token(&self) -> i64 {
        self.claim.fencing_token
    }

    /// The version (SHA-256, 12 hex digits) of the recipe component that serves the claim.
    pub fn recipe_version(&self) -> &str {
        &self.claim.recipe_version
    }

    /// The client session holding the claim.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Resolves once the claim is lost, with why. The first call follows the daemon's `Lost`
    /// stream and the session; a later call follows the session alone. In a daemon group, a
    /// daemon that stops answering is not a loss while another member takes the session up in
    /// time: the claim is then taken up there (same node, same fencing token) and followed on.
    pub fn lost(&self) -> impl std::future::Future<Output = Lost> + Send + 'static {
        let first = self.lost.lock().unwrap_or_else(|e| e.into_inner()).take();
        let ending = self.session.ending();
        let link = self.session.link.clone();
        let ended = self.session.ended.clone();
        let grouped = self.session.grouped;
        let current = self.current.clone();
        let (session, node, token) = (self.session.id, self.claim.node.clone(), self.claim.fencing_token);
        // The first stream is the daemon's the claim was followed on, whichever keeps the
        // session by now.
        let mut followed = self.followed.lock().unwrap_or_else(|e| e.into_inner()).take();
        async move {
            let mut stream = first;
            tokio::pin!(ending);
            loop {
                let (client, generation) = {
                    let l = link.borrow();
                    (l.client.clone(), followed.take().unwrap_or(l.generation))
                };
                let addr = client.addr.clone();
                let broke = {
                    let event = async {
                        let Some(stream) = stream.as_mut() else { return std::future::pending().await };
                        match stream.message().await {
                            Ok(Some(event)) => Ok(Lost::from_event(&event)),
                            // The daemon ends the stream quietly when the claim was released.
                            Ok(None) => {
                                Ok(Lost::Disconnected(format!("the wazoo daemon at {addr} closed the claim")))
                            }
                            Err(status) => Err(format!(
                                "lost the connection to the wazoo daemon at {addr}: {}",
                                status.message()
                            )),
                        }
                    };
                    tokio::pin!(event);
                    tokio::select! {
                        biased;
                        said = &mut event => match said {
                            Ok(lost) => return lost,
                            Err(why) if !grouped => return Lost::Disconnected(why),
                            Err(why) => why,
                        },
                        Ending { why, silent } = &mut ending => {
                            return match silent {
                                true => Lost::Disconnected(why),
                                false => tokio::time::timeout(SETTLE, event).await.ok().and_then(Result::ok).unwrap_or(Lost::Disconnected(why)),
                            }
                        }
                        // Taken up by another daemon while the old one is silent: whatever the
                        // old one says later (it may wake up, and end what it thinks it serves)
                        // is no longer about this claim.
                        Some(_) = Session::wait_link(link.clone(), ended.clone(), generation), if grouped => {
                            format!("the wazoo daemon at {addr} went silent")
                        }
                    }
                };
                // In a group: wait for the session to be taken up elsewhere, then take the
                // claim up there.
                let waiting = Session::wait_link(link.clone(), ended.clone(), generation);
                let Some(next) = waiting.await else {
                    return Lost::Disconnected(ending.await.why);
                };
                let mut recipes = next.recipes();
                let request = pb::ResumeRequest { session, node: node.clone(), fencing_token: token };
                let resumed = match recipes.resume(bounded(request)).await {
                    Ok(claim) => claim.into_inner(),
                    Err(status) if error_kind(&status) == Some(ErrorKind::UnknownHandle) => {
                        return Lost::NodeDeleted
                    }
                    Err(status) => {
                        return Lost::Disconnected(format!(
                            "{broke}; taking the claim up again: {}",
                            status.message()
                        ))
                    }
                };
                let handle = pb::HandleRef { session, handle: resumed.handle };
                stream = match recipes.lost(bounded(handle)).await {
                    Ok(s) => Some(s.into_inner()),
                    Err(status) => {
                        return Lost::Disconnected(format!(
                            "{broke}; following the claim again: {}",
                            status.message()
                        ))
                    }
                };
                *current.lock().unwrap_or_else(|e| e.into_inner()) = (next, handle);
                tracing::warn!(session, node = %node, "safe: the claim was taken up again (same node, same fencing token)");
            }
        }
    }

    /// Lets the claim go (its node deleted) and closes its session.
    pub async fn release(mut self) -> Result<(), Error> {
        let released = self.release_only().await;
        self.session.close().await;
        released
    }

    /// Lets the claim go and keeps the session, for [`Claim::close`] to end.
    ///
    /// In a daemon group, a daemon that breaks off without an answer may or may not have let
    /// the claim go: once another member takes the session up, the claim is taken up there by
    /// its node and let go of; a node already gone means the first release was done.
    pub async fn release_only(&mut self) -> Result<(), Error> {
        loop {
            let generation = self.session.generation();
            let (client, handle) = self.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let status = match client.recipes().release(bounded(handle)).await {
                Ok(_) => return Ok(()),
                Err(status) if error_kind(&status).is_none() && self.session.in_group() => status,
                Err(status) => return Err(Error::from(status)),
            };
            // Taken up already (the claim not yet followed there), or once it is.
            let now = self.session.client();
            let next = match now.addr != client.addr {
                true => now,
                false => match self.session.taken_up_after(generation).await {
                    Some(next) => next,
                    None => return Err(Error::from(status)),
                },
            };
            let (session, node, token) = (self.session.id, self.claim.node.clone(), self.claim.fencing_token);
            let request = pb::ResumeRequest { session, node, fencing_token: token };
            match next.recipes().resume(bounded(request)).await {
                Ok(claim) => {
                    let handle = pb::HandleRef { session, handle: claim.into_inner().handle };
                    *self.current.lock().unwrap_or_else(|e| e.into_inner()) = (next, handle);
                }
                Err(status) if error_kind(&status) == Some(ErrorKind::UnknownHandle) => return Ok(()),
                Err(status) => return Err(Error::from(status)),
            }
        }
    }

    /// Closes the claim's session, deleting whatever it still holds.
    pub async fn close(self) {
        self.session.close().await;
    }
}

/// An error and its sources on one line, each said once (tonic repeats some).
pub fn causes(error: &dyn std::error::Error) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if said.last() != Some(&text) {
            said.push(text);
        }
        next = e.source();
    }
    said.join(": ")
}
