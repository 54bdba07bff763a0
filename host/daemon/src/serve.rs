//! `wazoo serve`: a long-running host that serves the recipes over gRPC (`host/proto/wazoo.proto`),
//! watches its plugins directory and swaps changed components in without dropping the ZooKeeper
//! session, and exposes Prometheus metrics.
//!
//! Every claim a client makes (lock, lease, leadership, group membership, queue claim, double
//! barrier participation) is a recipe handle tied to its client session; a session that ends
//! (its keepalive stream closes, or its TTL passes without a keepalive) closes its handles,
//! which deletes their nodes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};

use crate::metrics::Metrics;
pub use crate::tenants::Tenant;
use crate::wire::{self, no_handle, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::fence::{Fence, Holder, Written};
use wazoo_runtime::{Claim, ClaimKind, ElectionHandle, Host, Mode, Outcome, Want, World, ZkError};

use wazoo_proto as pb;

use pb::admin_server::{Admin, AdminServer};
use pb::recipes_server::{Recipes, RecipesServer};
use pb::sessions_server::{Sessions, SessionsServer};

/// One call on a fresh handle of `$recipe` (made by `Host::$make`) that ends with the call:
/// measured, with its error mapped to a gRPC status.
macro_rules! once {
    ($self:ident, $method:literal, $recipe:expr, $make:ident, |$h:ident| $call:expr, $reply:expr) => {{
        let recipe = $recipe.to_string();
        $self
            .measured($method, &recipe, async {
                let mut $h = $self.host.$make(&recipe).await.map_err(no_handle)?;
                let outcome = $call.await;
                $h.close().await;
                outcome.map($reply).map_err(status)
            })
            .await
    }};
}

/// A stream over a fresh handle (bound to `$h`): what `first` finds, then every change `next`
/// reports (blocking up to [`STREAM_POLL`], told the `key` of what was last sent), until the
/// client goes or the recipe fails; then the handle ends.
macro_rules! follow {
    ($h:ident = $open:expr, first: $first:expr, key: $key:expr, event: $event:expr,
     next: |$known:ident| $next:expr) => {{
        let mut $h = $open.await.map_err(no_handle)?;
        let first = match $first.await {
            Ok(first) => first,
            Err(e) => {
                $h.close().await;
                return Err(status(e));
            }
        };
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            let (key, event) = ($key, $event);
            let mut $known = key(&first);
            let mut open = tx.send(Ok(event(first))).await.is_ok();
            while open && !tx.is_closed() {
                match $next.await {
                    Ok(now) => {
                        let seen = key(&now);
                        if seen != $known {
                            $known = seen;
                            open = tx.send(Ok(event(now))).await.is_ok();
                        }
                    }
                    Err(RecipeError::Zk(ZkError::Timeout)) => {}
                    Err(e) => {
                        let _ = tx.send(Err(status(e))).await;
                        break;
                    }
                }
            }
            $h.close().await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }};
}

/// Shortest client-session TTL accepted.
const MIN_TTL: Duration = Duration::from_millis(500);
/// The longest TTL a client session is granted (a longer one asked for is cut to it).
const MAX_TTL: Duration = Duration::from_secs(3600);
/// The longest timeout a call takes; a longer one means no timeout.
const LONGEST_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often expired client sessions are looked for.
const REAP_EVERY: Duration = Duration::from_millis(100);
/// How long a streaming call blocks in the recipe before it looks whether its client left.
const STREAM_POLL: Duration = Duration::from_secs(1);

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// gRPC address.
    pub listen: SocketAddr,
    /// Prometheus address (`/metrics`), if any.
    pub metrics: Option<SocketAddr>,
    /// How often the plugins directory is checked for new, changed and removed components.
    pub watch_every: Duration,
}

/// Address space a compile worker may use: a recipe compiles in tens of MiB.
pub const COMPILE_MEMORY: u64 = 1 << 30;

/// Serves `host` to every client (no authentication) until `shutdown` resolves. `ready` is
/// called with the bound addresses (gRPC, metrics) once clients can connect.
pub async fn run(
    host: Host,
    config: ServeConfig,
    ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    serve(vec![(None, host)], config, None, ready, shutdown).await
}

/// Serves each tenant's host to the clients that present its token (gRPC metadata
/// `authorization: Bearer TOKEN`); a call without a known token is UNAUTHENTICATED. Each tenant
/// has its own client sessions, recipes and limits; metrics carry the tenant in the recipe label
/// (`alice/lock`).
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
    let hosts = tenants.into_iter().map(|t| (Some((t.name, t.token_sha256)), t.host)).collect();
    serve(hosts, config, Some(changes), ready, shutdown).await
}

/// A change to the tenants of a running daemon (`wazoo serve --tenants`, on SIGHUP).
pub enum TenantChange {
    /// Serve this tenant, replacing one of the same name.
    Put(Tenant),
    /// Stop serving the tenant of this name.
    Remove(String),
}

async fn serve(
    hosts: Vec<(Option<(String, [u8; 32])>, Host)>,
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
    let new_state = |host: Host, name: Option<String>| {
        if let Some(w) = &worker {
            host.registry().use_compile_worker(w.clone(), COMPILE_MEMORY, host.limits());
        }
        Arc::new(State {
            host,
            tenant: name,
            sessions: Mutex::default(),
            next: AtomicU64::new(1),
            metrics: metrics.clone(),
        })
    };
    let mut states = Vec::new();
    for (tenant, host) in hosts {
        let (name, token) = match tenant {
            Some((name, token)) => (Some(name), Some(token)),
            None => (None, None),
        };
        states.push((token, new_state(host, name)));
    }
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let grpc = listener.local_addr()?;
    let metrics_addr = match config.metrics {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let bound = listener.local_addr()?;
            tokio::spawn(crate::metrics::serve(listener, metrics.clone()));
            Some(bound)
        }
        None => None,
    };
    // Check each plugins directory once now, then keep watching it.
    let mut tasks: HashMap<Option<String>, Vec<tokio::task::JoinHandle<()>>> = HashMap::new();
    for (_, state) in &states {
        tasks.insert(state.tenant.clone(), tend(state, config.watch_every).await);
    }
    ready(grpc, metrics_addr);
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let builder = tonic::transport::Server::builder().http2_keepalive_interval(Some(Duration::from_secs(10)));
    let until = async {
        let _ = stopped.await;
    };
    let mut routes = None;
    let mut server = match states.as_slice() {
        [(None, state)] => {
            let api = Api(state.clone());
            tokio::spawn(
                builder
                    .clone()
                    .add_service(SessionsServer::new(api.clone()))
                    .add_service(RecipesServer::new(api.clone()))
                    .add_service(AdminServer::new(api))
                    .serve_with_incoming_shutdown(incoming, until),
            )
        }
        _ => {
            let sessions = ByTenant::new(&states, |api| SessionsServer::new(api));
            let recipes = ByTenant::new(&states, |api| RecipesServer::new(api));
            let admin = ByTenant::new(&states, |api| AdminServer::new(api));
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
                    if let Some(token) = token {
                        sessions.remove(&token);
                        recipes.remove(&token);
                        admin.remove(&token);
                    }
                    for task in tasks.remove(&old.tenant).unwrap_or_default() {
                        task.abort();
                    }
                    let closing: Vec<_> = old.sessions.lock().unwrap().drain().map(|(_, s)| s).collect();
                    for session in closing {
                        session.close().await;
                    }
                    tracing::info!(tenant = %name, "tenant stopped");
                }
                if let TenantChange::Put(t) = change {
                    let state = new_state(t.host, Some(t.name.clone()));
                    tasks.insert(state.tenant.clone(), tend(&state, config.watch_every).await);
                    sessions.insert(t.token_sha256, SessionsServer::new(Api(state.clone())));
                    recipes.insert(t.token_sha256, RecipesServer::new(Api(state.clone())));
                    admin.insert(t.token_sha256, AdminServer::new(Api(state.clone())));
                    states.push((Some(t.token_sha256), state));
                    tracing::info!(tenant = %t.name, "tenant serving");
                }
            }
        }
    };
    for task in tasks.into_values().flatten() {
        task.abort();
    }
    // Every client session ends with the daemon: close what they hold. That also ends their
    // Lost streams; keepalive streams end when their clients see the connection go.
    for (_, state) in &states {
        let sessions: Vec<_> = state.sessions.lock().unwrap().drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.close().await;
        }
    }
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

/// One gRPC service per tenant behind one name: each call goes to the service of the tenant
/// whose token it presents (`authorization: Bearer TOKEN`, compared by SHA-256).
#[derive(Clone)]
struct ByTenant<S> {
    routes: Arc<std::sync::RwLock<HashMap<[u8; 32], S>>>,
}

impl<S> ByTenant<S> {
    fn new(states: &[(Option<[u8; 32]>, Arc<State>)], make: impl Fn(Api) -> S) -> ByTenant<S> {
        let routes =
            states.iter().filter_map(|(token, state)| Some(((*token)?, make(Api(state.clone()))))).collect();
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
        let found = token.and_then(|t| self.routes.read().unwrap().get(&t).cloned());
        match found {
            Some(mut service) => Box::pin(async move { service.call(request).await }),
            None => Box::pin(async {
                Ok(wire::unauthenticated("no tenant has this token (authorization: Bearer TOKEN)")
                    .into_http())
            }),
        }
    }
}

struct State {
    host: Host,
    /// The tenant this state serves, in a multi-tenant daemon.
    tenant: Option<String>,
    sessions: Mutex<HashMap<u64, Arc<ClientSession>>>,
    /// Session and handle ids (one sequence; never reused).
    next: AtomicU64,
    metrics: Arc<Metrics>,
}

struct Entry {
    /// What the client holds (`wazoo_runtime::Claim`); taken when it ends.
    held: tokio::sync::Mutex<Option<Claim>>,
    /// Set when the claim is given up on purpose: a Lost stream then ends quietly.
    released: watch::Sender<bool>,
}

struct ClientSession {
    id: u64,
    name: String,
    ttl: Duration,
    deadline: Mutex<Instant>,
    handles: Mutex<HashMap<u64, Arc<Entry>>>,
    closed: watch::Sender<bool>,
}

impl ClientSession {
    fn alive(&self) -> bool {
        !*self.closed.borrow()
    }

    fn touch(&self) {
        *self.deadline.lock().unwrap() = Instant::now() + self.ttl;
    }

    /// Closes every handle (deleting their nodes); later calls find the session gone.
    async fn close(&self) {
        self.closed.send_replace(true);
        let entries: Vec<_> = self.handles.lock().unwrap().drain().map(|(_, e)| e).collect();
        for entry in entries {
            entry.released.send_replace(true);
            if let Some(held) = entry.held.lock().await.take() {
                held.close().await;
            }
        }
    }
}

impl State {
    fn session(&self, id: u64) -> Result<Arc<ClientSession>, Status> {
        match self.sessions.lock().unwrap().get(&id) {
            Some(s) if s.alive() => Ok(s.clone()),
            _ => Err(wire::unknown_session(format!("session: {id} is not open (expired or closed)"))),
        }
    }

    async fn end_session(&self, id: u64, why: &str) {
        let session = self.sessions.lock().unwrap().remove(&id);
        if let Some(session) = session {
            tracing::info!(session = id, name = %session.name, "client session ended: {why}");
            session.close().await;
        }
        self.gauges();
    }

    /// Adds a claim to `session`: its handle id. A session that closed meanwhile gets the
    /// claim closed at once.
    async fn keep(&self, session: &ClientSession, held: Claim) -> Result<u64, Status> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let entry =
            Arc::new(Entry { held: tokio::sync::Mutex::new(Some(held)), released: watch::channel(false).0 });
        session.handles.lock().unwrap().insert(id, entry.clone());
        if !session.alive() {
            session.handles.lock().unwrap().remove(&id);
            if let Some(held) = entry.held.lock().await.take() {
                held.close().await;
            }
            return Err(wire::unknown_session(format!("session: {} closed while acquiring", session.id)));
        }
        self.gauges();
        Ok(id)
    }

    /// Takes `want` at `path` for `session` with a fresh handle of `recipe`, and keeps it there.
    async fn claim(
        &self,
        session: &ClientSession,
        want: Want,
        recipe: &str,
        path: &str,
        timeout: Option<Duration>,
    ) -> Result<pb::Claim, Status> {
        let mut contender = self.host.contender(want, recipe).await.map_err(no_handle)?;
        let granted = match contender.acquire(path, timeout).await {
            Ok(granted) => granted,
            Err(e) => {
                contender.close().await;
                return Err(status(e));
            }
        };
        let claim = contender.claim(granted);
        let (node, fencing_token, recipe_version) =
            (claim.node().to_string(), claim.token(), version_of(&claim));
        let handle = self.keep(session, claim).await?;
        Ok(pb::Claim { handle, node, fencing_token, recipe_version })
    }

    fn entry(&self, session: u64, handle: u64) -> Result<(Arc<ClientSession>, Arc<Entry>), Status> {
        let s = self.session(session)?;
        let e = s.handles.lock().unwrap().get(&handle).cloned();
        match e {
            Some(e) => Ok((s, e)),
            None => Err(wire::unknown_handle(format!("handle: {handle} is not held by session {session}"))),
        }
    }

    /// Takes `handle` out of `session` if its claim is of `kind`: the claim, to be ended by the
    /// caller. A handle of another kind stays held (FAILED_PRECONDITION, message `handle:`).
    async fn take_held(&self, session: u64, handle: u64, kind: ClaimKind) -> Result<Claim, Status> {
        let (s, entry) = self.entry(session, handle)?;
        let mut slot = entry.held.lock().await;
        match slot.as_ref() {
            Some(held) if held.kind() == kind => {}
            Some(_) => {
                return Err(wire::wrong_handle(format!("handle: {handle} holds another kind of claim")))
            }
            None => return Err(wire::unknown_handle(format!("handle: {handle} was released"))),
        }
        s.handles.lock().unwrap().remove(&handle);
        entry.released.send_replace(true);
        let held = slot.take();
        drop(slot);
        self.gauges();
        held.ok_or_else(|| wire::unknown_handle(format!("handle: {handle} was released")))
    }

    fn gauges(&self) {
        let sessions = self.sessions.lock().unwrap();
        let handles: usize = sessions.values().map(|s| s.handles.lock().unwrap().len()).sum();
        match &self.tenant {
            None => {
                self.metrics.gauge("client_sessions", sessions.len() as f64);
                self.metrics.gauge("live_handles", handles as f64);
            }
            Some(t) => {
                let stats = self.host.stats();
                self.metrics.gauge(&format!("tenant_{t}_client_sessions"), sessions.len() as f64);
                self.metrics.gauge(&format!("tenant_{t}_live_handles"), handles as f64);
                self.metrics.gauge(
                    &format!("tenant_{t}_limit_hits"),
                    stats.limit_hits.load(Ordering::Relaxed) as f64,
                );
                self.metrics.gauge(&format!("tenant_{t}_traps"), stats.traps.load(Ordering::Relaxed) as f64);
            }
        }
    }

    /// Fenced checks and writes on the host's ZooKeeper session (`live`); the nodes a tenant's
    /// writes create are its own.
    fn fence<'a>(&self, live: &'a wazoo_runtime::Live) -> Fence<'a> {
        let acls = match self.tenant {
            Some(_) => zookeeper_client::Acls::creator_all(),
            None => zookeeper_client::Acls::anyone_all(),
        };
        Fence { client: &live.client, acls, max_bytes: self.host.limits().max_data_bytes }
    }

    /// The host's ZooKeeper session, for calls that run on it without a recipe.
    async fn live(&self) -> Result<Arc<wazoo_runtime::Live>, Status> {
        self.host.live().await.map_err(wire::no_zookeeper)
    }

    /// Runs `f`, recording the call's outcome and latency.
    async fn measured<T>(
        &self,
        method: &str,
        recipe: &str,
        f: impl std::future::Future<Output = Result<T, Status>>,
    ) -> Result<Response<T>, Status> {
        let started = Instant::now();
        let outcome = f.await;
        let code = match &outcome {
            Ok(_) => "ok".to_string(),
            Err(s) => format!("{:?}", s.code()).to_lowercase(),
        };
        match &self.tenant {
            Some(t) => self.metrics.call(method, &format!("{t}/{recipe}"), &code, started.elapsed()),
            None => self.metrics.call(method, recipe, &code, started.elapsed()),
        }
        outcome.map(Response::new)
    }
}

/// Ends client sessions whose TTL passed without a keepalive.
async fn reaper(state: Arc<State>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        if state.tenant.is_some() {
            state.gauges();
        }
        let now = Instant::now();
        let expired: Vec<u64> = state
            .sessions
            .lock()
            .unwrap()
            .values()
            .filter(|s| *s.deadline.lock().unwrap() < now)
            .map(|s| s.id)
            .collect();
        for id in expired {
            state.end_session(id, "no keepalive within its TTL").await;
        }
    }
}

/// Watches the plugins directory (inotify, through `notify`) and looks at it once changes have
/// settled for [`SETTLE`], so a file still being written is not taken for a broken one; it also
/// looks every `every` whatever happens, in case an event was missed (or watching failed).
/// Counts swaps and refusals per recipe.
async fn watcher(state: Arc<State>, mut seen: HashMap<String, (String, String)>, every: Duration) {
    let (tx, mut changes) = mpsc::unbounded_channel::<()>();
    let dir = state.host.registry().dir().to_path_buf();
    let watching = (|| -> notify::Result<notify::RecommendedWatcher> {
        use notify::Watcher as _;
        let mut w = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok_and(|e| !e.kind.is_access()) {
                let _ = tx.send(());
            }
        })?;
        w.watch(&dir, notify::RecursiveMode::NonRecursive)?;
        Ok(w)
    })();
    let _watching = match watching {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!("cannot watch {} ({e}); looking every {every:?} instead", dir.display());
            None
        }
    };
    loop {
        tokio::select! {
            Some(()) = changes.recv() => {
                // Let a burst of writes settle.
                while let Ok(Some(())) = tokio::time::timeout(SETTLE, changes.recv()).await {}
            }
            () = tokio::time::sleep(every) => {}
        }
        watch_plugins(&state, &mut seen).await;
    }
}

/// How long the plugins directory must be quiet after a change before it is looked at.
const SETTLE: Duration = Duration::from_millis(50);

/// One look at the plugins directory: `seen` maps each recipe to (serving version, refusal).
async fn watch_plugins(state: &State, seen: &mut HashMap<String, (String, String)>) {
    let listed = match state.host.reload().await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!("checking the plugins directory: {e:#}");
            return;
        }
    };
    for r in listed {
        let version = r.serving.as_ref().map(|v| v.sha256.clone()).unwrap_or_default();
        let refused = r.refused.as_ref().map(|f| f.reason.clone()).unwrap_or_default();
        if let Some((before, before_refused)) = seen.get(&r.name) {
            if !before.is_empty() && !version.is_empty() && *before != version {
                state.metrics.count("swaps", &r.name, 1);
            }
            if !refused.is_empty() && *before_refused != refused {
                state.metrics.count("refusals", &r.name, 1);
            }
        } else if !refused.is_empty() {
            state.metrics.count("refusals", &r.name, 1);
        }
        seen.insert(r.name.clone(), (version, refused));
    }
    let stats = state.host.registry().stats();
    state.metrics.gauge("compiles", stats.compiles.load(Ordering::Relaxed) as f64);
    state.metrics.gauge("cache_hits", stats.cache_hits.load(Ordering::Relaxed) as f64);
}

/// A request's timeout: none beyond [`LONGEST_WAIT`], which is waiting for good (and could not
/// be added to a clock).
fn millis(ms: Option<u64>) -> Option<Duration> {
    ms.map(Duration::from_millis).filter(|d| *d <= LONGEST_WAIT)
}

fn or<'a>(recipe: &'a str, default: &'a str) -> &'a str {
    if recipe.is_empty() {
        default
    } else {
        recipe
    }
}

type Events<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The gRPC services, over the shared state.
#[derive(Clone)]
struct Api(Arc<State>);

impl std::ops::Deref for Api {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

#[tonic::async_trait]
impl Sessions for Api {
    async fn open(&self, request: Request<pb::OpenRequest>) -> Result<Response<pb::OpenReply>, Status> {
        let req = request.into_inner();
        let ttl = Duration::from_millis(req.ttl_ms).clamp(MIN_TTL, MAX_TTL);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let session = Arc::new(ClientSession {
            id,
            name: req.name.clone(),
            ttl,
            deadline: Mutex::new(Instant::now() + ttl),
            handles: Mutex::default(),
            closed: watch::channel(false).0,
        });
        self.sessions.lock().unwrap().insert(id, session);
        tracing::info!(session = id, name = %req.name, ttl_ms = ttl.as_millis() as u64, "client session opened");
        self.gauges();
        Ok(Response::new(pb::OpenReply { session: id, ttl_ms: ttl.as_millis() as u64 }))
    }

    type KeepAliveStream = Events<pb::KeepAliveReply>;

    async fn keep_alive(
        &self,
        request: Request<Streaming<pb::KeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let state = self.0.clone();
        tokio::spawn(async move {
            let mut kept = Vec::new();
            while let Some(Ok(req)) = incoming.next().await {
                let ttl = match state.session(req.session) {
                    Ok(s) => {
                        s.touch();
                        if !kept.contains(&s.id) {
                            kept.push(s.id);
                        }
                        s.ttl.as_millis() as u64
                    }
                    Err(_) => 0,
                };
                if tx.send(Ok(pb::KeepAliveReply { session: req.session, ttl_ms: ttl })).await.is_err() {
                    break;
                }
            }
            // The stream ended: the client is gone (or says it is done).
            for id in kept {
                state.end_session(id, "its keepalive stream ended").await;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn close(&self, request: Request<pb::SessionRef>) -> Result<Response<pb::Empty>, Status> {
        let id = request.into_inner().session;
        self.session(id)?;
        self.end_session(id, "closed by the client").await;
        Ok(Response::new(pb::Empty {}))
    }
}

#[tonic::async_trait]
impl Recipes for Api {
    async fn acquire(&self, request: Request<pb::AcquireRequest>) -> Result<Response<pb::Claim>, Status> {
        let req = request.into_inner();
        let family =
            pb::Family::try_from(req.family).map_err(|_| wire::invalid_argument("unknown family"))?;
        let want = match family {
            pb::Family::Lock => Want::Lock,
            pb::Family::ReadLock => Want::ReadWrite(Mode::Read),
            pb::Family::WriteLock => Want::ReadWrite(Mode::Write),
            pb::Family::Semaphore => Want::Lease { max_leases: req.max_leases },
        };
        let recipe = or(&req.recipe, want.world().default_recipe()).to_string();
        self.measured("Acquire", &recipe, async {
            let session = self.session(req.session)?;
            self.claim(&session, want, &recipe, &req.path, millis(req.timeout_ms)).await
        })
        .await
    }

    async fn release(&self, request: Request<pb::HandleRef>) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        self.measured("Release", "", async {
            let (session, entry) = self.entry(req.session, req.handle)?;
            session.handles.lock().unwrap().remove(&req.handle);
            entry.released.send_replace(true);
            let held = entry.held.lock().await.take();
            self.gauges();
            let Some(held) = held else { return Ok(pb::Empty {}) };
            held.release().await.map(|()| pb::Empty {}).map_err(status)
        })
        .await
    }

    type LostStream = Events<pb::LostEvent>;

    async fn lost(&self, request: Request<pb::HandleRef>) -> Result<Response<Self::LostStream>, Status> {
        let req = request.into_inner();
        let (_, entry) = self.entry(req.session, req.handle)?;
        let lost = match entry.held.lock().await.as_ref() {
            Some(held) => held.lost(),
            None => return Err(wire::unknown_handle(format!("handle: {} was released", req.handle))),
        };
        let mut released = entry.released.subscribe();
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let why = tokio::select! {
                why = lost => Some(why),
                _ = async { let _ = released.wait_for(|r| *r).await; } => None,
                _ = tx.closed() => None,
            };
            // A claim given up on purpose deletes its node too: that is no loss.
            let on_purpose = *released.borrow();
            if let (Some(why), false) = (why, on_purpose) {
                let _ = tx.send(Ok(wire::lost_event(&why))).await;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn campaign(&self, request: Request<pb::CampaignRequest>) -> Result<Response<pb::Claim>, Status> {
        let req = request.into_inner();
        let recipe = or(&req.recipe, World::Election.default_recipe()).to_string();
        self.measured("Campaign", &recipe, async {
            let session = self.session(req.session)?;
            let want = Want::Leadership { id: req.id.clone() };
            self.claim(&session, want, &recipe, &req.path, millis(req.timeout_ms)).await
        })
        .await
    }

    type ObserveStream = Events<pb::LeaderEvent>;

    async fn observe(
        &self,
        request: Request<pb::ObserveRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let req = request.into_inner();
        follow!(
            h = self.host.election(or(&req.recipe, World::Election.default_recipe())),
            first: h.leader(&req.path),
            key: |info: &Option<wazoo_runtime::LeaderInfo>| info.as_ref().map(ElectionHandle::seen),
            event: |info: Option<wazoo_runtime::LeaderInfo>| match info {
                Some(i) => pb::LeaderEvent {
                    leader_id: i.id,
                    node: i.node,
                    fencing_token: i.token,
                    acknowledged: i.acknowledged,
                },
                None => pb::LeaderEvent::default(),
            },
            next: |known| h.observe(&req.path, known.as_deref(), Some(STREAM_POLL))
        )
    }

    async fn acknowledge(
        &self,
        request: Request<pb::AcknowledgeRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        self.measured("Acknowledge", "", async {
            let (_, entry) = self.entry(req.session, req.handle)?;
            let mut slot = entry.held.lock().await;
            let Some(h) = slot.as_mut().and_then(Claim::election) else {
                return Err(wire::wrong_handle(format!("handle: {} holds no leadership", req.handle)));
            };
            h.acknowledge(&req.note).await.map(|()| pb::Empty {}).map_err(status)
        })
        .await
    }

    async fn barrier_set(&self, request: Request<pb::PathRequest>) -> Result<Response<pb::Done>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "BarrierSet",
            or(&req.recipe, World::Barrier.default_recipe()),
            barrier,
            |h| h.set(&req.path),
            |changed| { pb::Done { changed } }
        )
    }

    async fn barrier_remove(&self, request: Request<pb::PathRequest>) -> Result<Response<pb::Done>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "BarrierRemove",
            or(&req.recipe, World::Barrier.default_recipe()),
            barrier,
            |h| h.remove(&req.path),
            |changed| pb::Done { changed }
        )
    }

    async fn barrier_wait(&self, request: Request<pb::WaitRequest>) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "BarrierWait",
            or(&req.recipe, World::Barrier.default_recipe()),
            barrier,
            |h| h.wait(&req.path, millis(req.timeout_ms)),
            |()| pb::Empty {}
        )
    }

    async fn queue_put(
        &self,
        request: Request<pb::QueuePutRequest>,
    ) -> Result<Response<pb::QueueItem>, Status> {
        let req = request.into_inner();
        let recipe = or(&req.recipe, World::Queue.default_recipe()).to_string();
        self.measured("QueuePut", &recipe, async {
            let priority = match req.priority {
                Some(p) => Some(u8::try_from(p).map_err(|_| wire::invalid_argument("priority is 0 to 255"))?),
                None => None,
            };
            let session = if req.ephemeral { Some(self.session(req.session)?) } else { None };
            let mut h = self.host.queue(&recipe).await.map_err(no_handle)?;
            let outcome = h.put(&req.path, &req.data, priority, req.ephemeral).await;
            let node = match (outcome, session) {
                (Ok(node), Some(session)) => {
                    let handle = self.keep(&session, Claim::queue_item(h, node.clone())).await?;
                    return Ok(pb::QueueItem { node, data: req.data.clone(), handle });
                }
                (outcome, _) => {
                    h.close().await;
                    outcome.map_err(status)?
                }
            };
            Ok(pb::QueueItem { node, data: req.data.clone(), handle: 0 })
        })
        .await
    }

    async fn queue_take(&self, request: Request<pb::WaitRequest>) -> Result<Response<pb::QueueItem>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "QueueTake",
            or(&req.recipe, World::Queue.default_recipe()),
            queue,
            |h| h.take(&req.path, millis(req.timeout_ms)),
            |item| pb::QueueItem { node: item.node, data: item.data, handle: 0 }
        )
    }

    async fn config_get(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<pb::ConfigEntry>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "ConfigGet",
            or(&req.recipe, World::Config.default_recipe()),
            config,
            |h| h.get(&req.path),
            entry
        )
    }

    async fn config_set(
        &self,
        request: Request<pb::ConfigSetRequest>,
    ) -> Result<Response<pb::ConfigEntry>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "ConfigSet",
            or(&req.recipe, World::Config.default_recipe()),
            config,
            |h| h.set(&req.path, &req.data, req.expected_version),
            |version| pb::ConfigEntry { exists: true, data: req.data.clone(), version }
        )
    }

    type ConfigWatchStream = Events<pb::ConfigEntry>;

    async fn config_watch(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<Self::ConfigWatchStream>, Status> {
        let req = request.into_inner();
        follow!(
            h = self.host.config(or(&req.recipe, World::Config.default_recipe())),
            first: h.get(&req.path),
            key: |found: &Option<wazoo_runtime::Entry>| found.as_ref().map(|e| e.version),
            event: entry,
            next: |known| h.watch(&req.path, known, Some(STREAM_POLL))
        )
    }

    async fn revoke(&self, request: Request<pb::RevokeRequest>) -> Result<Response<pb::RevokeReply>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "Revoke",
            or(&req.recipe, World::Lock.default_recipe()),
            lock,
            |h| h.revoke(&req.node, millis(req.grace_ms)),
            |released| pb::RevokeReply { released }
        )
    }

    async fn queue_len(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<pb::QueueLength>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "QueueLen",
            or(&req.recipe, World::Queue.default_recipe()),
            queue,
            |h| h.len(&req.path),
            |items| { pb::QueueLength { items } }
        )
    }

    async fn queue_claim(
        &self,
        request: Request<pb::QueueClaimRequest>,
    ) -> Result<Response<pb::QueueClaimed>, Status> {
        let req = request.into_inner();
        let recipe = or(&req.recipe, World::Queue.default_recipe()).to_string();
        self.measured("QueueClaim", &recipe, async {
            let session = self.session(req.session)?;
            let mut h = self.host.queue(&recipe).await.map_err(no_handle)?;
            match h.claim(&req.path, millis(req.timeout_ms)).await {
                Ok(item) => {
                    let claimed = pb::QueueItem { node: item.node.clone(), data: item.data, handle: 0 };
                    let handle = self.keep(&session, Claim::queue_claim(h, item.node)).await?;
                    Ok(pb::QueueClaimed { handle, item: Some(claimed) })
                }
                Err(e) => {
                    h.close().await;
                    Err(status(e))
                }
            }
        })
        .await
    }

    async fn queue_ack(&self, request: Request<pb::HandleRef>) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        self.measured("QueueAck", "", async {
            let mut held = self.take_held(req.session, req.handle, ClaimKind::QueueClaim).await?;
            let node = held.node().to_string();
            let outcome = match held.queue() {
                Some(h) => h.ack(&node).await,
                None => Err(RecipeError::Retired),
            };
            held.close().await;
            outcome.map(|()| pb::Empty {}).map_err(status)
        })
        .await
    }

    async fn counter_get(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<pb::CounterValue>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "CounterGet",
            or(&req.recipe, World::Config.default_recipe()),
            config,
            |h| h.counter(&req.path),
            |value| { pb::CounterValue { value } }
        )
    }

    async fn counter_add(
        &self,
        request: Request<pb::CounterAddRequest>,
    ) -> Result<Response<pb::CounterValue>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "CounterAdd",
            or(&req.recipe, World::Config.default_recipe()),
            config,
            |h| h.add(&req.path, req.delta),
            |value| pb::CounterValue { value }
        )
    }

    async fn group_join(
        &self,
        request: Request<pb::GroupJoinRequest>,
    ) -> Result<Response<pb::Claim>, Status> {
        let req = request.into_inner();
        let recipe = or(&req.recipe, World::Group.default_recipe()).to_string();
        self.measured("GroupJoin", &recipe, async {
            let session = self.session(req.session)?;
            let want = Want::Membership { name: req.name.clone(), data: req.data.clone() };
            self.claim(&session, want, &recipe, &req.path, None).await
        })
        .await
    }

    async fn group_members(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<pb::Membership>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "GroupMembers",
            or(&req.recipe, World::Group.default_recipe()),
            group,
            |h| h.members(&req.path),
            membership
        )
    }

    type GroupWatchStream = Events<pb::Membership>;

    async fn group_watch(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<Self::GroupWatchStream>, Status> {
        let req = request.into_inner();
        follow!(
            h = self.host.group(or(&req.recipe, World::Group.default_recipe())),
            first: h.members(&req.path),
            key: |m: &wazoo_runtime::Membership| m.version,
            event: membership,
            next: |known| h.watch(&req.path, known, Some(STREAM_POLL))
        )
    }

    async fn double_barrier_enter(
        &self,
        request: Request<pb::DoubleBarrierEnterRequest>,
    ) -> Result<Response<pb::Entered>, Status> {
        let req = request.into_inner();
        let recipe = or(&req.recipe, World::Barrier.default_recipe()).to_string();
        self.measured("DoubleBarrierEnter", &recipe, async {
            let session = self.session(req.session)?;
            let mut h = self.host.barrier(&recipe).await.map_err(no_handle)?;
            match h.enter(&req.path, req.count, millis(req.timeout_ms)).await {
                Ok(()) => {
                    let held = Claim::participant(h, String::new());
                    let recipe_version = version_of(&held);
                    let handle = self.keep(&session, held).await?;
                    Ok(pb::Entered { handle, recipe_version })
                }
                Err(e) => {
                    h.close().await;
                    Err(status(e))
                }
            }
        })
        .await
    }

    async fn double_barrier_leave(
        &self,
        request: Request<pb::DoubleBarrierLeaveRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        self.measured("DoubleBarrierLeave", "", async {
            let mut held = self.take_held(req.session, req.handle, ClaimKind::Participant).await?;
            let outcome = match held.barrier() {
                Some(h) => h.leave_double(millis(req.timeout_ms)).await,
                None => Err(RecipeError::Retired),
            };
            held.close().await;
            outcome.map(|()| pb::Empty {}).map_err(status)
        })
        .await
    }

    async fn tx_coordinate(
        &self,
        request: Request<pb::TxCoordinateRequest>,
    ) -> Result<Response<pb::TxOutcome>, Status> {
        let req = request.into_inner();
        let recipe = or(&req.recipe, World::Transaction.default_recipe()).to_string();
        self.measured("TxCoordinate", &recipe, async {
            let mode = wire::tx_mode(req.mode)?;
            let mut h = self.host.transaction(&recipe).await.map_err(no_handle)?;
            let outcome = h.coordinate(&req.tx, &req.sites, &req.payload, mode, millis(req.timeout_ms)).await;
            h.close().await;
            outcome.map(tx_outcome).map_err(status)
        })
        .await
    }

    async fn tx_vote(&self, request: Request<pb::TxVoteRequest>) -> Result<Response<pb::TxOutcome>, Status> {
        let req = request.into_inner();
        let recipe = or(&req.recipe, World::Transaction.default_recipe()).to_string();
        self.measured("TxVote", &recipe, async {
            let ballot = wire::ballot(req.ballot)?;
            // The vote node is the handle's: it lives for this call only.
            let mut h = self.host.transaction(&recipe).await.map_err(no_handle)?;
            let outcome = h.vote(&req.tx, &req.site, ballot, millis(req.timeout_ms)).await;
            h.close().await;
            outcome.map(tx_outcome).map_err(status)
        })
        .await
    }

    async fn fence_check(
        &self,
        request: Request<pb::FenceCheckRequest>,
    ) -> Result<Response<pb::FenceCheckReply>, Status> {
        let req = request.into_inner();
        self.measured("FenceCheck", "fence", async {
            let live = self.live().await?;
            let found = self.fence(&live).check(&req.node, req.token).await;
            let (holder, holder_token) = match found.map_err(|e| status(RecipeError::Zk(e)))? {
                Holder::Holds => (pb::FenceHolder::Holds, 0),
                Holder::Gone => (pb::FenceHolder::Gone, 0),
                Holder::OtherToken(token) => (pb::FenceHolder::OtherToken, token),
            };
            Ok(pb::FenceCheckReply { holder: holder as i32, holder_token })
        })
        .await
    }

    async fn fence_write(
        &self,
        request: Request<pb::FenceWriteRequest>,
    ) -> Result<Response<pb::FenceWriteReply>, Status> {
        let req = request.into_inner();
        self.measured("FenceWrite", "fence", async {
            let live = self.live().await?;
            let written = self.fence(&live).write(&req.node, req.token, &req.path, &req.value).await;
            let refused =
                |holder: pb::FenceHolder| pb::FenceWriteReply { holder: holder as i32, ..Default::default() };
            Ok(match written.map_err(|e| status(RecipeError::Zk(e)))? {
                Written::Accepted { version, previous } => {
                    pb::FenceWriteReply { written: true, version, last_token: previous, ..Default::default() }
                }
                Written::Gone => refused(pb::FenceHolder::Gone),
                Written::OtherToken(token) => {
                    pb::FenceWriteReply { holder_token: token, ..refused(pb::FenceHolder::OtherToken) }
                }
                Written::Superseded { last } => {
                    pb::FenceWriteReply { last_token: Some(last), ..refused(pb::FenceHolder::Holds) }
                }
            })
        })
        .await
    }

    async fn holders(
        &self,
        request: Request<pb::HoldersRequest>,
    ) -> Result<Response<pb::HoldersReply>, Status> {
        use wazoo_runtime::holders::{self, Kind, State};
        let req = request.into_inner();
        self.measured("Holders", "holders", async {
            let kind = match pb::HoldersKind::try_from(req.kind) {
                Ok(pb::HoldersKind::Detect) => None,
                Ok(pb::HoldersKind::Lock) => Some(Kind::Lock),
                Ok(pb::HoldersKind::ReadWrite) => Some(Kind::ReadWrite),
                Ok(pb::HoldersKind::Semaphore) => Some(Kind::Semaphore),
                Ok(pb::HoldersKind::Election) => Some(Kind::Election),
                Err(_) => return Err(wire::invalid_argument("invalid-argument: unknown holders kind")),
            };
            // A tenant's client is rooted in its namespace, as for FenceCheck.
            let live = self.live().await?;
            let found = holders::read(&live.client, &req.path, kind, req.leases)
                .await
                .map_err(|e| status(RecipeError::Zk(e)))?;
            let kind = match found.kind {
                Kind::Lock => pb::HoldersKind::Lock,
                Kind::ReadWrite => pb::HoldersKind::ReadWrite,
                Kind::Semaphore => pb::HoldersKind::Semaphore,
                Kind::Election => pb::HoldersKind::Election,
            };
            let contenders = found
                .contenders
                .into_iter()
                .map(|c| pb::Contender {
                    node: c.node,
                    sequence: c.sequence,
                    holds: c.state == State::Holds,
                    mode: match c.mode {
                        None => pb::ContenderMode::Unspecified,
                        Some(Mode::Read) => pb::ContenderMode::Read,
                        Some(Mode::Write) => pb::ContenderMode::Write,
                    } as i32,
                    data: c.data,
                    session: c.session,
                    fencing_token: c.token,
                })
                .collect();
            Ok(pb::HoldersReply { kind: kind as i32, contenders })
        })
        .await
    }

    async fn invoke(&self, request: Request<pb::InvokeRequest>) -> Result<Response<pb::InvokeReply>, Status> {
        let req = request.into_inner();
        let recipe = req.recipe.clone();
        self.measured("Invoke", &recipe, async {
            let args: serde_json::Value = if req.args_json.trim().is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::from_str(&req.args_json)
                    .map_err(|e| wire::invalid_argument(format!("args_json is not JSON: {e}")))?
            };
            if req.handle != 0 {
                // A call on a kept instance.
                let (_, entry) = self.entry(req.session, req.handle)?;
                let mut slot = entry.held.lock().await;
                let Some(h) = slot.as_mut().and_then(Claim::instance_mut) else {
                    return Err(wire::wrong_handle(format!("handle: {} was not kept by Invoke", req.handle)));
                };
                let result = h.call(&req.function, &args).await.map_err(status)?;
                return Ok(pb::InvokeReply { result_json: result.to_string(), handle: req.handle });
            }
            if req.function.is_empty() {
                // A custom recipe's `run`, its arguments a list of strings.
                let args: Vec<String> = if args.is_null() {
                    Vec::new()
                } else {
                    serde_json::from_value(args).map_err(|e| {
                        wire::invalid_argument(format!("args_json must be a JSON array of strings: {e}"))
                    })?
                };
                let mut h = self.host.custom(&recipe).await.map_err(no_handle)?;
                let outcome = h.run(&args).await;
                h.close().await;
                let result = match outcome.map_err(status)? {
                    Ok(text) => serde_json::json!({ "ok": text }),
                    Err(text) => serde_json::json!({ "err": text }),
                };
                return Ok(pb::InvokeReply { result_json: result.to_string(), handle: 0 });
            }
            let session = if req.keep { Some(self.session(req.session)?) } else { None };
            let mut h = self.host.dynamic(&recipe).await.map_err(no_handle)?;
            let result = match h.call(&req.function, &args).await {
                Ok(result) => result,
                Err(e) => {
                    h.close().await;
                    return Err(status(e));
                }
            };
            let handle = match session {
                Some(session) => self.keep(&session, Claim::instance(h)).await?,
                None => {
                    h.close().await;
                    0
                }
            };
            Ok(pb::InvokeReply { result_json: result.to_string(), handle })
        })
        .await
    }
}

#[tonic::async_trait]
impl Admin for Api {
    async fn list_recipes(&self, _: Request<pb::Empty>) -> Result<Response<pb::RecipeList>, Status> {
        let listed = self.host.registry().list().map_err(|e| wire::internal(format!("{e:#}")))?;
        Ok(Response::new(recipe_list(listed)))
    }

    async fn reload(&self, _: Request<pb::Empty>) -> Result<Response<pb::RecipeList>, Status> {
        let listed = self.host.reload().await.map_err(|e| wire::internal(format!("{e:#}")))?;
        Ok(Response::new(recipe_list(listed)))
    }

    async fn health(&self, _: Request<pb::Empty>) -> Result<Response<pb::HealthReply>, Status> {
        let (status, zookeeper_session) = match self.host.live().await {
            Ok(live) if live.ended().is_none() => ("serving".to_string(), live.session_id()),
            Ok(live) => (format!("ZooKeeper session ended ({:?})", live.ended()), live.session_id()),
            Err(e) => (format!("no ZooKeeper session: {e:#}"), 0),
        };
        let (client_sessions, handles) = {
            let sessions = self.sessions.lock().unwrap();
            let handles: usize = sessions.values().map(|s| s.handles.lock().unwrap().len()).sum();
            (sessions.len() as u64, handles as u64)
        };
        let stats = self.host.registry().stats();
        Ok(Response::new(pb::HealthReply {
            status,
            zookeeper_session,
            client_sessions,
            handles,
            compiles: stats.compiles.load(Ordering::Relaxed),
            cache_hits: stats.cache_hits.load(Ordering::Relaxed),
            swaps: stats.swaps.load(Ordering::Relaxed),
            refusals: stats.refusals.load(Ordering::Relaxed),
        }))
    }
}

fn version_of(held: &Claim) -> String {
    held.version().map(|v| v.short_hash().to_string()).unwrap_or_default()
}

fn entry(found: Option<wazoo_runtime::Entry>) -> pb::ConfigEntry {
    match found {
        Some(e) => pb::ConfigEntry { exists: true, data: e.data, version: e.version },
        None => pb::ConfigEntry::default(),
    }
}

fn membership(m: wazoo_runtime::Membership) -> pb::Membership {
    let members = m.members.into_iter().map(|m| pb::Member { name: m.name, data: m.data }).collect();
    pb::Membership { members, version: m.version }
}

fn tx_outcome(outcome: Outcome) -> pb::TxOutcome {
    pb::TxOutcome { committed: matches!(outcome, Outcome::Committed) }
}

fn recipe_list(listed: Vec<wazoo_runtime::RecipeInfo>) -> pb::RecipeList {
    let recipes = listed
        .into_iter()
        .map(|r| pb::Recipe {
            name: r.name,
            path: r.path.display().to_string(),
            bytes: r.bytes,
            world: r.serving.as_ref().map(|v| v.world.name().to_string()).unwrap_or_default(),
            version: r.serving.as_ref().map(|v| v.short_hash().to_string()).unwrap_or_default(),
            from_cache: r.serving.as_ref().is_some_and(|v| v.from_cache),
            refused: r.refused.map(|f| f.reason).unwrap_or_default(),
            functions: r.serving.as_ref().map(|v| v.functions()).unwrap_or_default(),
        })
        .collect();
    pb::RecipeList { recipes }
}
