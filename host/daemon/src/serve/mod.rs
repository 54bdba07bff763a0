//! `wazoo serve`: a long-running host that serves the recipes over gRPC (`host/proto/wazoo.proto`),
//! watches its plugins directory and swaps changed components in without dropping the ZooKeeper
//! session, and exposes Prometheus metrics.
//!
//! Every claim a client makes (lock, lease, leadership, group membership, queue claim, double
//! barrier participation) is a recipe handle tied to its client session; a session that ends
//! (its keepalive stream closes, or its TTL passes without a keepalive) closes its handles,
//! which deletes their nodes.

// The modules here, lowest first (none names one above it, and none names this file's parent
// but through it): `state` (the client sessions, their claims, the ZooKeeper sessions adopted
// for them); `adopt` (taking up another member's work, into the states) over `state`;
// `listing` (a state's client sessions and the claims under a prefix, for `Admin.ListSessions`,
// `Admin.ListClaims` and the console) over `state`; `api` (the `Sessions` and `Admin`
// services, which reach `adopt` for `Reattach` and `listing` for the listings) over them;
// `recipes` (the `Recipes` service, a file per family; inside it `claims` is below `election`
// and `group`, and the other families name no sibling) over `state` alone; `console_view`
// (what the web console shows of a state) over `state` and `listing`. Below `serve`, at the
// crate's top: `wire`, `group`, `metrics`, `console` and `tenants`, none of which names another
// module of the crate.

mod adopt;
mod api;
mod console_view;
pub(crate) mod listing;
pub mod published;
mod recipes;
mod state;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::server::NamedService as _;
use tonic::Status;

use crate::metrics::Metrics;
pub use crate::tenants::Tenant;
use crate::wire;
use wazoo_runtime::Host;

use wazoo_proto as pb;

use pb::admin_server::AdminServer;
use pb::recipes_server::RecipesServer;
use pb::sessions_server::SessionsServer;

use api::Api;
use recipes::Service as RecipesService;
pub(crate) use state::State;
use state::{reaper, watch_plugins, watcher};

/// Shortest client-session TTL accepted.
const MIN_TTL: Duration = Duration::from_millis(500);
/// The longest a client session's name may be, in bytes (a longer one is cut, at a character).
const MAX_NAME: usize = 256;
/// Streams one HTTP/2 connection may have open at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 1024;
/// How long a TLS handshake may take.
const TLS_HANDSHAKE: Duration = Duration::from_secs(10);
/// The largest message the `Sessions` service reads (its messages are an id, a TTL and a
/// name): a larger one is refused before it is read whole. The other services take gRPC's 4 MiB.
const MAX_SESSIONS_MESSAGE: usize = 16 << 10;
/// How often expired client sessions are looked for.
const REAP_EVERY: Duration = Duration::from_millis(100);

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// gRPC address.
    pub listen: SocketAddr,
    /// Prometheus address (`/metrics`), if any.
    pub metrics: Option<SocketAddr>,
    /// How often the plugins directory is checked for new, changed and removed components.
    pub watch_every: Duration,
    /// Serve TLS (else plain text).
    pub tls: Option<ServerTls>,
    /// The API token every client of the one host ([`run`]) presents; none: open to every
    /// client that can connect (and, with `tls.client_ca`, has a certificate signed by it).
    pub token: Option<String>,
    /// What a client can grow.
    pub bounds: Bounds,
    /// The group this daemon is a member of (joined), if any: its client sessions are recorded
    /// there and taken up by another member when this one dies or stops.
    pub group: Option<crate::group::GroupJoin>,
    /// Follow the recipe registry in ZooKeeper ([`wazoo_runtime::rollout`]).
    pub registry: bool,
    /// The keys whose signatures the one host ([`run`]) requires of registry components.
    pub trusted_keys: Option<Arc<wazoo_runtime::signing::TrustedKeys>>,
    /// This daemon's name in the registry's reports (else its gRPC address).
    pub advertise: Option<String>,
}

pub use crate::publishing::Publishing;

/// The daemon's TLS identity, PEM; with `client_ca`, every client must show a certificate that
/// CA signed (mutual TLS), which authenticates it.
#[derive(Clone, Debug)]
pub struct ServerTls {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub client_ca: Option<Vec<u8>>,
}

/// Caps on what clients can make the daemon hold; past one, a call fails `RESOURCE_EXHAUSTED`.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Client sessions open at once, over all tenants.
    pub sessions: u32,
    /// Client sessions open at once per tenant (or for the one host).
    pub sessions_per_tenant: u32,
    /// Handles kept in one client session.
    pub handles_per_session: u32,
    /// The longest TTL a client session is granted (a longer one asked for is cut to it).
    pub max_ttl: Duration,
    /// Streams (keepalives, Lost, watches) open at once per tenant (or for the one host).
    pub streams: u32,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            sessions: 10_000,
            sessions_per_tenant: 1_000,
            handles_per_session: 256,
            max_ttl: Duration::from_secs(60),
            streams: 4_000,
        }
    }
}

/// Address space a compile worker may use: a recipe compiles in tens of MiB.
pub const COMPILE_MEMORY: u64 = 1 << 30;

/// Serves `host` until `shutdown` resolves, to the clients that present `config.token` (with
/// one), else to every client that can connect (and, with `config.tls.client_ca`, has a
/// certificate that CA signed). `ready` is
/// called with the bound addresses (gRPC, metrics) once clients can connect.
pub async fn run(
    host: Host,
    config: ServeConfig,
    ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let token = config.token.as_ref().map(|t| {
        use sha2::Digest as _;
        <[u8; 32]>::from(sha2::Sha256::digest(t.as_bytes()))
    });
    let clients = Default::default();
    let publishing = Publishing { trusted: config.trusted_keys.clone(), ..Publishing::default() };
    serve(vec![Served { name: None, token, host, clients, publishing }], config, None, ready, shutdown).await
}

/// Serves each tenant's host to the clients that present its token (gRPC metadata
/// `authorization: Bearer TOKEN`); a call without a known token is UNAUTHENTICATED. Each tenant
/// has its own client sessions, recipes and limits; metrics carry it in a `tenant` label.
///
/// Each [`TenantChange`] received on `changes` is applied while serving: a tenant that is added
/// starts serving, and one that is removed or replaced stops (its client sessions close, which
/// deletes their nodes); a replacement serves from then on with its new token, host and limits.
pub async fn run_tenants(
    tenants: Vec<Tenant>,
    config: ServeConfig,
    changes: mpsc::Receiver<TenantChange>,
    ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    anyhow::ensure!(!tenants.is_empty(), "no tenants to serve");
    let hosts = tenants
        .into_iter()
        .map(|t| Served {
            name: Some(t.name),
            token: Some(t.token_sha256),
            host: t.host,
            clients: t.clients,
            publishing: t.publishing,
        })
        .collect();
    serve(hosts, config, Some(changes), ready, shutdown).await
}

/// A change to the tenants of a running daemon (`wazoo serve --tenants`, on SIGHUP).
pub enum TenantChange {
    /// Serve this tenant, replacing one of the same name.
    Put(Tenant),
    /// Stop serving the tenant of this name.
    Remove(String),
}

/// A host to serve, with its tenant's name (none: the one host) and the SHA-256 of the token
/// its clients present (none: open to every client).
struct Served {
    name: Option<String>,
    token: Option<[u8; 32]>,
    host: Host,
    /// The tenant's own caps, where it has them.
    clients: crate::tenants::ClientBounds,
    publishing: Publishing,
}

async fn serve(
    hosts: Vec<Served>,
    config: ServeConfig,
    changes: Option<mpsc::Receiver<TenantChange>>,
    ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::new());
    // Compile in a worker process when the binary has one beside it (a compile bomb then costs
    // a refused file, not the daemon).
    let worker = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join("wazoo-compile")));
    let worker = worker.filter(|w| w.exists());
    if worker.is_none() {
        tracing::warn!("no wazoo-compile beside this binary: components compile in-process");
    }
    // The TLS settings are built (the key loaded and checked against the certificate) before
    // anything binds or is announced: a fault is an error of the start, never one after `ready`.
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        // A peer that stops answering HTTP/2 pings is dropped, as is one that opens more
        // streams on one connection than a client needs.
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .trace_fn(|request| tracing::info_span!("call", method = %request.uri().path()));
    if let Some(tls) = &config.tls {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        wazoo_runtime::keeper::install_crypto_provider();
        // A connection that has not finished its handshake within the timeout is dropped.
        let mut settings =
            ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert, &tls.key)).timeout(TLS_HANDSHAKE);
        if let Some(ca) = &tls.client_ca {
            settings = settings.client_ca_root(Certificate::from_pem(ca));
        }
        // tonic's error says `transport error`; its source says what is wrong.
        builder = builder.tls_config(settings).map_err(|e| anyhow::Error::new(e).context("TLS settings"))?;
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("--listen {}: cannot listen there: {e}", config.listen))?;
    let grpc = listener.local_addr()?;
    let open = Arc::new(AtomicU64::new(0));
    // A member of a group joins it once its address is known.
    let adopter = match &config.group {
        Some(join) => {
            let group = Arc::new(crate::group::Group::join(join, grpc).await?);
            join.fence.arm(group.clone());
            group.reap_orphans(2 * join.session_timeout + crate::group::LEASE);
            Some(Arc::new(adopt::Adopter::new(group, config.tls.is_some())))
        }
        None => None,
    };
    // The `Sessions` and `Admin` services of a state (`Reattach` takes up through the adopter).
    let api = |state: &Arc<State>| Api { state: state.clone(), adopter: adopter.clone() };
    let me = config
        .advertise
        .clone()
        .unwrap_or_else(|| format!("{}:{}", wazoo_runtime::rollout::host_name(), grpc.port()));
    let new_state =
        |host: Host, name: Option<String>, clients: crate::tenants::ClientBounds, publishing: Publishing| {
            if let Some(w) = &worker {
                host.registry().use_compile_worker(w.clone(), COMPILE_MEMORY, host.limits());
            }
            let rollout =
                config.registry.then(|| follower(&host, &me, name.as_deref(), publishing.trusted.clone()));
            let state = Arc::new(State {
                group: adopter.as_ref().map(|a| a.group.clone()),
                host,
                tenant: name,
                sessions: Mutex::default(),
                next: AtomicU64::new(1),
                metrics: metrics.clone(),
                streams: Arc::default(),
                stopped: tokio::sync::watch::channel(false).0,
                bounds: Bounds {
                    sessions_per_tenant: clients.sessions.unwrap_or(config.bounds.sessions_per_tenant),
                    handles_per_session: clients.handles.unwrap_or(config.bounds.handles_per_session),
                    max_ttl: clients.max_ttl.unwrap_or(config.bounds.max_ttl),
                    ..config.bounds
                },
                open: open.clone(),
                rollout,
                publishing,
                pulse: Default::default(),
            });
            if let Some(adopter) = &adopter {
                adopter.serve(&state);
            }
            state
        };
    let mut states = Vec::new();
    for Served { name, token, host, clients, publishing } in hosts {
        states.push((token, new_state(host, name, clients, publishing)));
    }
    // The web console on the metrics port shows every state served, each to its own token.
    let console = crate::console::Console::new();
    console.show(console_view::shown(&states));
    let metrics_addr = match config.metrics {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("--metrics {addr}: cannot listen there: {e}"))?;
            let bound = listener.local_addr()?;
            tokio::spawn(crate::metrics::serve(listener, metrics.clone(), console.router()));
            Some(bound)
        }
        None => None,
    };
    // Check each plugins directory once now, then keep watching it.
    let mut tasks: HashMap<Option<String>, Vec<tokio::task::JoinHandle<()>>> = HashMap::new();
    for (_, state) in &states {
        tasks.insert(state.tenant.clone(), tend(state, config.watch_every).await);
    }
    if let Some(adopter) = &adopter {
        // The sessions are on record before any client is served, so that any member can take
        // them up from the first claim on; and this member stops at once once another has
        // begun to (it was taken for dead).
        adopter.group.record_sessions(&adopter.sessions().await).await?;
        tokio::spawn(adopter.clone().keep_recording(Duration::from_secs(1)));
        let group = adopter.group.clone();
        tokio::spawn(async move {
            let why = group.superseded().await;
            tracing::error!("stopping at once: {why}");
            std::process::exit(75);
        });
    }
    ready(grpc, metrics_addr);
    // Replies go out at once (no Nagle delay waiting for the client's delayed ACK).
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let until = async {
        let _ = stopped.await;
    };
    let mut routes = None;
    let served_hosts =
        |states: &[(Option<[u8; 32]>, Arc<State>)]| states.iter().map(|(_, s)| s.host.clone()).collect();
    let (hosts, watched) = tokio::sync::watch::channel(served_hosts(&states));
    let (health, health_task) = health(watched);
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| anyhow::anyhow!("the API's descriptors: {e}"))?;
    let builder = builder.clone().add_service(health).add_service(reflection);
    let mut server = match states.as_slice() {
        [(None, state)] => {
            let api = api(state);
            tokio::spawn(
                builder
                    .clone()
                    .add_service(sessions_server(api.clone()))
                    .add_service(RecipesServer::new(RecipesService(state.clone())))
                    .add_service(admin_server(api))
                    .serve_with_incoming_shutdown(incoming, until),
            )
        }
        _ => {
            let sessions = ByTenant::new(&states, |state| sessions_server(api(state)));
            let recipes = ByTenant::new(&states, |state| RecipesServer::new(RecipesService(state.clone())));
            let admin = ByTenant::new(&states, |state| admin_server(api(state)));
            routes = Some((sessions.clone(), recipes.clone(), admin.clone()));
            tokio::spawn(
                builder
                    .clone()
                    .add_service(sessions)
                    .add_service(recipes)
                    .add_service(admin)
                    .serve_with_incoming_shutdown(incoming, until),
            )
        }
    };
    let mut changes = changes;
    tokio::pin!(shutdown);
    let served = loop {
        let change = async {
            match changes.as_mut() {
                Some(c) => c.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            done = &mut server => break Some(done),
            () = &mut shutdown => break None,
            Some(change) = change => {
                let Some((sessions, recipes, admin)) = &routes else { continue };
                // The tenant of that name stops first (its routes, tasks and sessions).
                let name = match &change {
                    TenantChange::Put(t) => t.name.clone(),
                    TenantChange::Remove(name) => name.clone(),
                };
                if let Some(i) = states.iter().position(|(_, s)| s.tenant.as_deref() == Some(name.as_str())) {
                    let (token, old) = states.remove(i);
                    old.stopped.send_replace(true);
                    // A token another tenant took over in this reload routes to that tenant now.
                    let token = token.filter(|t| !states.iter().any(|(other, _)| other.as_ref() == Some(t)));
                    if let Some(token) = token {
                        sessions.remove(&token);
                        recipes.remove(&token);
                        admin.remove(&token);
                    }
                    for task in tasks.remove(&old.tenant).unwrap_or_default() {
                        task.abort();
                    }
                    if let Some(follower) = &old.rollout {
                        follower.stop();
                    }
                    let closing: Vec<_> = old.sessions.lock().unwrap().drain().map(|(_, s)| s).collect();
                    for session in closing {
                        session.end(state::Ended::Stopping).await;
                    }
                    tracing::info!(tenant = %name, "tenant stopped");
                }
                if let TenantChange::Put(t) = change {
                    let state = new_state(t.host, Some(t.name.clone()), t.clients, t.publishing);
                    tasks.insert(state.tenant.clone(), tend(&state, config.watch_every).await);
                    sessions.insert(t.token_sha256, sessions_server(api(&state)));
                    recipes.insert(t.token_sha256, RecipesServer::new(RecipesService(state.clone())));
                    admin.insert(t.token_sha256, admin_server(api(&state)));
                    states.push((Some(t.token_sha256), state));
                    tracing::info!(tenant = %t.name, "tenant serving");
                }
                hosts.send_replace(served_hosts(&states));
                console.show(console_view::shown(&states));
            }
        }
    };
    health_task.abort();
    for task in tasks.into_values().flatten() {
        task.abort();
    }
    if let (Some(adopter), None) = (&adopter, &served) {
        // A member told to stop hands its work to the group: it leaves (so another member
        // adopts at once, without asking whether it answers), stops serving, and exits without
        // closing a ZooKeeper session or a client session: every claim carries on elsewhere.
        // Releases sent without their answer yet are applied first: the member that takes the
        // session up finds no node a client of this one let go of.
        settle_releases(&states).await;
        if let Some(join) = &config.group {
            join.fence.leave();
        }
        adopter.group.leave().await;
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(3), &mut server).await;
        tracing::info!("handed this daemon's sessions over to its group");
        std::mem::forget(states);
        return Ok(());
    }
    settle_releases(&states).await;
    // Every client session ends with the daemon: close what they hold. That also ends their
    // Lost streams; keepalive streams end when their clients see the connection go.
    for (_, state) in &states {
        state.stopped.send_replace(true);
        let sessions: Vec<_> = state.sessions.lock().unwrap().drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.end(state::Ended::Stopping).await;
        }
    }
    // Claims held as data let go with unwaited deletes: those are answered before the end too.
    settle_releases(&states).await;
    let served = match served {
        Some(done) => done,
        None => {
            let _ = stop.send(());
            // Streams still open get a moment to finish; then the server is dropped.
            match tokio::time::timeout(Duration::from_secs(3), &mut server).await {
                Ok(done) => done,
                Err(_) => {
                    server.abort();
                    Ok(Ok(()))
                }
            }
        }
    };
    match served {
        Ok(result) => result.map_err(|e| anyhow::anyhow!("gRPC server failed: {e}")),
        Err(e) => Err(anyhow::anyhow!("gRPC server task failed: {e}")),
    }
}

/// The `Sessions` service on `api`, reading messages of at most [`MAX_SESSIONS_MESSAGE`].
fn sessions_server(api: Api) -> SessionsServer<Api> {
    SessionsServer::new(api).max_decoding_message_size(MAX_SESSIONS_MESSAGE)
}

/// `grpc.health.v1.Health`: the overall status (`""`) and each service's are SERVING while
/// every host in `hosts` (the served ones, updated as tenants change) has its ZooKeeper session
/// up, NOT_SERVING otherwise; looked at every second by the returned task.
fn health(
    hosts: tokio::sync::watch::Receiver<Vec<Host>>,
) -> (
    tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    tokio::task::JoinHandle<()>,
) {
    let (reporter, service) = tonic_health::server::health_reporter();
    let names =
        ["", SessionsServer::<Api>::NAME, RecipesServer::<RecipesService>::NAME, AdminServer::<Api>::NAME];
    let task = tokio::spawn(async move {
        let mut up = None;
        loop {
            let hosts = hosts.borrow().clone();
            let mut all = true;
            for host in &hosts {
                // The same judgement as `Admin.Health` and `/healthz`.
                let status =
                    tokio::time::timeout(Duration::from_secs(2), state::zookeeper_status(host)).await;
                all &= matches!(status, Ok((s, _)) if s == state::SERVING);
            }
            drop(hosts);
            if up != Some(all) {
                up = Some(all);
                let status = match all {
                    true => tonic_health::ServingStatus::Serving,
                    false => tonic_health::ServingStatus::NotServing,
                };
                for name in names {
                    reporter.set_service_status(name, status).await;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    (service, task)
}

/// One gRPC service per tenant behind one name: each call goes to the service of the tenant
/// whose token it presents (`authorization: Bearer TOKEN`, compared by SHA-256, in constant
/// time). The one host with `--token-file` is served this way too, as the one route.
#[derive(Clone)]
struct ByTenant<S> {
    routes: Arc<std::sync::RwLock<HashMap<[u8; 32], S>>>,
}

impl<S> ByTenant<S> {
    fn new(states: &[(Option<[u8; 32]>, Arc<State>)], make: impl Fn(&Arc<State>) -> S) -> ByTenant<S> {
        let routes = states.iter().filter_map(|(token, state)| Some(((*token)?, make(state)))).collect();
        ByTenant { routes: Arc::new(std::sync::RwLock::new(routes)) }
    }

    fn insert(&self, token: [u8; 32], service: S) {
        self.routes.write().unwrap().insert(token, service);
    }

    fn remove(&self, token: &[u8; 32]) {
        self.routes.write().unwrap().remove(token);
    }
}

/// The plugins watcher and the session reaper of `state`, after a first look at its plugins.
async fn tend(state: &Arc<State>, every: Duration) -> Vec<tokio::task::JoinHandle<()>> {
    // The registry's versions serve before any client does.
    if let Some(follower) = &state.rollout {
        if let Err(e) = follower.start().await {
            tracing::warn!("following the recipe registry: {e:#}");
        }
    }
    let mut seen = HashMap::new();
    watch_plugins(state, &mut seen).await;
    vec![tokio::spawn(watcher(state.clone(), seen, every)), tokio::spawn(reaper(state.clone()))]
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for ByTenant<S> {
    const NAME: &'static str = S::NAME;
}

type HttpRequest = tonic::codegen::http::Request<tonic::body::Body>;
type HttpResponse = tonic::codegen::http::Response<tonic::body::Body>;

impl<S> tonic::codegen::Service<HttpRequest> for ByTenant<S>
where
    S: tonic::codegen::Service<HttpRequest, Response = HttpResponse, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<HttpResponse, std::convert::Infallible>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: HttpRequest) -> Self::Future {
        use sha2::Digest as _;
        let token = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| <[u8; 32]>::from(sha2::Sha256::digest(t.as_bytes())));
        // Each known hash is compared in constant time, so how long the lookup takes says
        // nothing about how close a guess came.
        let found = token.and_then(|t| {
            use subtle::ConstantTimeEq as _;
            let routes = self.routes.read().unwrap();
            routes.iter().find(|(known, _)| bool::from(known.ct_eq(&t))).map(|(_, s)| s.clone())
        });
        match found {
            Some(mut service) => Box::pin(async move { service.call(request).await }),
            None => Box::pin(async {
                Ok(wire::unauthenticated("no tenant has this token (authorization: Bearer TOKEN)")
                    .into_http())
            }),
        }
    }
}

type Events<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A follower of the registry for `host`, reporting as `me` (with its tenant's name), keeping
/// fetched components beside its compiled ones (else in a private directory of its own).
fn follower(
    host: &Host,
    me: &str,
    tenant: Option<&str>,
    trusted: Option<Arc<wazoo_runtime::signing::TrustedKeys>>,
) -> Arc<wazoo_runtime::rollout::Follower> {
    let base = match host.registry().cache_dir() {
        Some(cache) => cache.join("registry"),
        None => std::env::temp_dir().join(format!("wazoo-registry-{}", std::process::id())),
    };
    let dir = match tenant {
        Some(t) => base.join(t),
        None => base,
    };
    wazoo_runtime::rollout::Follower::new(host.clone(), wazoo_runtime::rollout::ROOT, me, dir, trusted)
}

/// The largest `Admin` request: a component to publish (at most 64 MiB) and its signatures.
const ADMIN_MAX_REQUEST: usize = 80 << 20;

fn admin_server(api: Api) -> AdminServer<Api> {
    AdminServer::new(api).max_decoding_message_size(ADMIN_MAX_REQUEST)
}

/// Waits (3 s at most for each) until the releases every host sent without waiting for their
/// answer are settled, before the daemon's sessions move on or close.
async fn settle_releases(states: &[(Option<[u8; 32]>, Arc<State>)]) {
    for (_, state) in states {
        if !state.host.settle_releases(Duration::from_secs(3)).await {
            tracing::warn!(tenant = ?state.tenant, "a release was not answered before the daemon stopped");
        }
    }
}
