//! The web console of `wazoo serve`, on the metrics port beside `/metrics` and `/healthz`: a
//! read-only page (`GET /`) that shows, live, what one served host has: the claims under its
//! namespace (who holds each lock, semaphore and leadership, who waits behind in what order,
//! their identities and ages), its client sessions with what each holds and waits for, the
//! recipes it serves (version, digest, when each was swapped in), and a chart of acquisitions
//! per second and of the time their calls waited over the last five minutes ([`Pulse`]).
//!
//! The page is three small files carried in the binary (`console/index.html`, `console.js`,
//! `console.css`: no framework, nothing from elsewhere); it follows `GET /console/events`
//! (server-sent events), one JSON snapshot whenever what it shows changes, looked at every
//! second. An event stream ends after [`STREAM_FOR`] (the metrics port closes every connection
//! after 10 s) and the browser's `EventSource` opens the next at once (`retry`): no connection
//! stays open for long, and no more than [`MAX_STREAMS`] are open at once, of which no more than
//! [`MAX_STREAMS_PER_HOST`] on one host.
//!
//! Who sees what is the API's rule: a daemon without tokens shows its one host to anyone who
//! can reach the port (loopback unless `--metrics` says otherwise); with `--token-file` or
//! `--tenants`, a token shows only its own host (its tenant's). The token comes once, from the
//! login form (`POST /console/login`) or as `/?token=TOKEN` (for scripts; answered with a
//! redirect to `/`, so it does not stay in the address bar), and the browser keeps a cookie that
//! is not the token: a random login id this daemon keeps beside the token's SHA-256 ([`Logins`]),
//! which opens the console only, only of this daemon (the cookie's name is this process's own,
//! so two daemons on one machine keep apart), only until it logs out, the daemon restarts or the
//! token changes. Nothing the console sends contains a token. A form must come from the
//! console's own page: its `Origin` is the address the request was sent to (`Host`, or the
//! `X-Forwarded-Host` a reverse proxy in front sets).
//!
//! The streams of one host look at it together: one walk of the claims a second (for each
//! prefix followed, `?prefix=`) whatever the number of viewers, and that walk is spent from the
//! host's operations per second as any listing is.
//!
//! It names no other module of the crate: the states served are [`View`]s, which `serve`
//! implements and hands over with [`Console::show`].

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use tokio_stream::StreamExt as _;

use wazoo_proto as pb;
use wazoo_runtime::registry::RecipeInfo;

/// How long one event stream lasts before the browser opens the next (below the metrics
/// port's 10 s connection limit, so a stream ends cleanly rather than being cut).
pub const STREAM_FOR: Duration = Duration::from_secs(8);

/// How long the browser waits before it opens the next event stream.
const RETRY_MS: u64 = 250;

/// Event streams open at once, over every viewer.
pub const MAX_STREAMS: usize = 32;

/// Event streams open at once on one host (a tenant's): one tenant cannot take every place.
pub const MAX_STREAMS_PER_HOST: usize = 8;

/// How often a stream looks for changes.
const TICK: Duration = Duration::from_secs(1);

/// How long a look at ZooKeeper (the claims, the session's state) may take.
const LOOK_LIMIT: Duration = Duration::from_secs(3);

/// Seconds of history the chart shows.
pub const WINDOW: u64 = 300;

/// The calls that take a claim after waiting for it, which the chart counts.
const ACQUIRING: [&str; 4] = ["Acquire", "Hold/acquire", "Hold/requeue", "Campaign"];

/// The start of the name of the cookie that keeps a viewer logged in; the rest is this
/// process's own ([`Console::cookie_name`]).
const COOKIE: &str = "wazoo_console_";

/// The most logins kept at once: past it, the oldest is forgotten (its viewer logs in again).
const MAX_LOGINS: usize = 4096;

/// How long a look at a host stays the one its streams show: a stream that looks within it
/// takes what another stream's look found.
const FRESH: Duration = Duration::from_millis(900);

/// The longest prefix a viewer may follow.
const MAX_PREFIX: usize = 1024;

/// The most claims, and contenders per claim, one snapshot carries.
const MAX_CLAIMS: usize = 500;
const MAX_CONTENDERS: usize = 100;
/// The most bytes of a holder's identity shown.
const MAX_IDENTITY: usize = 256;

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// The page may load only its own script and style, and talk only to its own origin.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                      img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A served host as the console shows it.
pub trait View: Send + Sync {
    /// Its tenant; `None` for the one host of a daemon without tenants.
    fn tenant(&self) -> Option<&str>;
    /// `Ok` while its ZooKeeper session is up, else why not (one line).
    fn zookeeper(&self) -> Look<'_, Result<(), String>>;
    /// Its client sessions, with the claims each holds and waits for.
    fn sessions(&self) -> pb::SessionList;
    /// Every claim of its namespace, read from ZooKeeper.
    fn claims<'a>(&'a self, prefix: &'a str) -> Look<'a, Result<pb::ClaimList, tonic::Status>>;
    /// The recipes it serves.
    fn recipes(&self) -> anyhow::Result<Vec<RecipeInfo>>;
    /// Versions installed over an earlier one since it started.
    fn swaps(&self) -> u64;
    /// Whether it follows the recipe registry in ZooKeeper.
    fn follows_registry(&self) -> bool;
    /// Its acquisitions and waits, second by second.
    fn pulse(&self) -> &Pulse;
    /// The queues its clients use whose depth it follows, each with its depth, by path.
    fn queues(&self) -> Vec<(String, i64)>;
}

/// What a [`View`] answers later.
pub type Look<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A host shown, and the SHA-256 of the token that shows it (none: open to all). Held weakly:
/// the console keeps no host alive (and no ZooKeeper session open) that is no longer served.
pub type Shown = (Option<[u8; 32]>, Weak<dyn View>);

/// The console: the hosts it shows, its viewers' logins, its open streams and what they last
/// looked at.
pub struct Console {
    shown: RwLock<Vec<Shown>>,
    /// The name of the cookie of this process's logins.
    cookie_name: String,
    logins: Mutex<Logins>,
    streams: Arc<AtomicUsize>,
    /// The streams open on each host, by tenant.
    per_host: Arc<Mutex<HashMap<Option<String>, usize>>>,
    /// The last look at each host and prefix followed, shared by its streams.
    looks: Mutex<HashMap<(usize, String), Looked>>,
}

/// The last look at a host under a prefix: the host (to tell it from one made later at the same
/// address), the snapshot and when it was taken, and when a stream last asked for it.
struct Looked {
    host: Weak<dyn View>,
    snapshot: Arc<tokio::sync::Mutex<Option<(Instant, String)>>>,
    asked: Instant,
}

/// The viewers logged in: by the SHA-256 of their cookie's value, the SHA-256 of the token they
/// logged in with, oldest first.
#[derive(Default)]
struct Logins {
    by_cookie: HashMap<[u8; 32], [u8; 32]>,
    order: VecDeque<[u8; 32]>,
}

impl Logins {
    /// A new login for the token whose SHA-256 is `token`: the cookie's value.
    fn add(&mut self, token: [u8; 32]) -> String {
        let mut id = [0u8; 32];
        id[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        id[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        let value = hex(&id);
        let key: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        while self.order.len() >= MAX_LOGINS {
            if let Some(oldest) = self.order.pop_front() {
                self.by_cookie.remove(&oldest);
            }
        }
        self.by_cookie.insert(key, token);
        self.order.push_back(key);
        value
    }

    /// The token hash a cookie's value stands for.
    fn token(&self, cookie: &str) -> Option<[u8; 32]> {
        self.by_cookie.get(&<[u8; 32]>::from(Sha256::digest(cookie.as_bytes()))).copied()
    }

    /// Forgets the login of a cookie's value.
    fn remove(&mut self, cookie: &str) {
        let key: [u8; 32] = Sha256::digest(cookie.as_bytes()).into();
        if self.by_cookie.remove(&key).is_some() {
            self.order.retain(|k| *k != key);
        }
    }
}

impl Console {
    /// A console that shows nothing yet.
    pub fn new() -> Arc<Console> {
        let own = uuid::Uuid::new_v4().simple().to_string();
        Arc::new(Console {
            shown: RwLock::default(),
            cookie_name: format!("{COOKIE}{}", &own[..12]),
            logins: Mutex::default(),
            streams: Arc::default(),
            per_host: Arc::default(),
            looks: Mutex::default(),
        })
    }

    /// Shows these hosts from now on (every one served, as tenants come and go).
    pub fn show(&self, shown: Vec<Shown>) {
        *self.shown.write().unwrap_or_else(PoisonError::into_inner) = shown;
    }

    /// The console's routes: `GET /`, its script and style, the login, logout, who is viewing,
    /// and the event stream.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/", get(index))
            .route("/console/console.js", get(|| asset("text/javascript; charset=utf-8", SCRIPT)))
            .route("/console/console.css", get(|| asset("text/css; charset=utf-8", STYLE)))
            .route("/console/login", post(login))
            .route("/console/logout", post(logout))
            .route("/console/whoami", get(whoami))
            .route("/console/events", get(events))
            .with_state(self.clone())
    }

    /// The host the token whose SHA-256 is `hashed` shows, if any.
    fn by_hash(&self, hashed: &[u8; 32]) -> Option<Arc<dyn View>> {
        let shown = self.shown.read().unwrap_or_else(PoisonError::into_inner);
        // Every known hash is compared in constant time, as the API compares them.
        let mut found = None;
        for (known, view) in shown.iter() {
            if let Some(known) = known {
                if bool::from(known.ct_eq(hashed)) && found.is_none() {
                    found = view.upgrade();
                }
            }
        }
        found
    }

    /// The host a token (not hashed) shows, if any.
    fn by_token(&self, token: &str) -> Option<Arc<dyn View>> {
        self.by_hash(&Sha256::digest(token.as_bytes()).into())
    }

    /// Logs a viewer in with `token`: the cookie (its value) that now stands for it, if the
    /// token shows a host.
    fn log_in(&self, token: &str) -> Option<String> {
        let hashed: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.by_hash(&hashed)?;
        Some(self.logins.lock().unwrap_or_else(PoisonError::into_inner).add(hashed))
    }

    /// The host this request may see: open (a daemon without tokens), or the one its cookie or
    /// `?token=` stands for; else the answer to give (401).
    fn viewer(&self, headers: &HeaderMap, uri: &Uri) -> Result<Arc<dyn View>, Response> {
        let shown = self.shown.read().unwrap_or_else(PoisonError::into_inner).clone();
        if let [(None, view)] = shown.as_slice() {
            // Open to whoever reaches it, so only by address: a page of another site whose name
            // was made to point here (DNS rebinding) is not let read it.
            if !addressed_by_ip(headers) {
                let body = json!({"error": "a console without tokens answers only at an IP address or localhost, not a name: give the daemon a token (--token-file) to reach it by name"});
                return Err((StatusCode::FORBIDDEN, json_headers(), body.to_string()).into_response());
            }
            return view.upgrade().ok_or_else(refused);
        }
        if let Some(token) = query(uri, "token") {
            return self.by_token(&token).ok_or_else(refused);
        }
        let cookie = cookie(headers, &self.cookie_name).unwrap_or_default();
        let token = self.logins.lock().unwrap_or_else(PoisonError::into_inner).token(&cookie);
        token.and_then(|hashed| self.by_hash(&hashed)).ok_or_else(refused)
    }

    /// What `view` shows under `prefix` now: the look another stream of the same host and
    /// prefix took less than [`FRESH`] ago, else a new one (which the streams that ask
    /// meanwhile wait for and share).
    async fn look(&self, view: &Arc<dyn View>, prefix: &str) -> String {
        let slot = {
            let mut looks = self.looks.lock().unwrap_or_else(PoisonError::into_inner);
            // What no stream asked for lately, or of a host no longer served, goes.
            looks.retain(|_, l| l.host.strong_count() > 0 && l.asked.elapsed() < STREAM_FOR);
            let key = (Arc::as_ptr(view) as *const () as usize, prefix.to_string());
            let looked = looks.entry(key).or_insert_with(|| Looked {
                host: Arc::downgrade(view),
                snapshot: Arc::default(),
                asked: Instant::now(),
            });
            if !Weak::ptr_eq(&looked.host, &Arc::downgrade(view)) {
                looked.host = Arc::downgrade(view);
                looked.snapshot = Arc::default();
            }
            looked.asked = Instant::now();
            looked.snapshot.clone()
        };
        let mut last = slot.lock().await;
        if let Some((at, data)) = last.as_ref() {
            if at.elapsed() < FRESH {
                return data.clone();
            }
        }
        let data = snapshot(view.as_ref(), prefix).await.to_string();
        *last = Some((Instant::now(), data.clone()));
        data
    }

    /// Whether the console needs a token.
    fn guarded(&self) -> bool {
        !matches!(self.shown.read().unwrap_or_else(PoisonError::into_inner).as_slice(), [(None, _)])
    }
}

/// Whether the request's `Host` is an IP address or `localhost` (or absent, as HTTP/1.0 allows).
fn addressed_by_ip(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else { return true };
    let Ok(host) = host.to_str() else { return false };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
}

fn refused() -> Response {
    let body = json!({"error": "log in with a token of this daemon (its --token-file, or a tenant's)"});
    (StatusCode::UNAUTHORIZED, json_headers(), body.to_string()).into_response()
}

fn json_headers() -> [(header::HeaderName, &'static str); 2] {
    [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")]
}

async fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// The page; with `?token=`, a login that sets the cookie and sends the browser back to `/`.
async fn index(State(console): State<Arc<Console>>, uri: Uri) -> Response {
    if let Some(token) = query(&uri, "token") {
        return logged_in(&console, &token);
    }
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    // Same-origin: its own forms carry their `Origin` (checked), other sites learn nothing.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `POST /console/login` with the form field `token`.
async fn login(State(console): State<Arc<Console>>, headers: HeaderMap, body: String) -> Response {
    if !same_origin(&headers) {
        return (StatusCode::FORBIDDEN, "a login from another site's page").into_response();
    }
    let token = form_field(&body, "token").unwrap_or_default();
    logged_in(&console, &token)
}

/// Sets the cookie for `token` and sends the browser to `/` (`/?refused` for a token that
/// shows nothing).
fn logged_in(console: &Console, token: &str) -> Response {
    match console.log_in(token.trim()) {
        Some(cookie) => {
            let set = format!("{}={cookie}; Path=/; HttpOnly; SameSite=Strict", console.cookie_name);
            see_other("/", Some(set))
        }
        None => see_other("/?refused", None),
    }
}

/// `POST /console/logout`: the login is forgotten here (its cookie opens nothing from now on,
/// wherever it was copied to), and the browser's cookie is cleared.
async fn logout(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return (StatusCode::FORBIDDEN, "a logout from another site's page").into_response();
    }
    if let Some(cookie) = cookie(&headers, &console.cookie_name) {
        console.logins.lock().unwrap_or_else(PoisonError::into_inner).remove(&cookie);
    }
    let name = &console.cookie_name;
    see_other("/", Some(format!("{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")))
}

fn see_other(location: &'static str, cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static(location));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::try_from(c).ok()) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// Who is viewing: the tenant (null for the one host), and whether a token was needed.
async fn whoami(State(console): State<Arc<Console>>, headers: HeaderMap, uri: Uri) -> Response {
    match console.viewer(&headers, &uri) {
        Ok(view) => {
            let body = json!({"tenant": view.tenant(), "guarded": console.guarded()});
            (json_headers(), body.to_string()).into_response()
        }
        Err(refused) => refused,
    }
}

/// One place among the open event streams (the daemon's, and its host's), given back when the
/// stream ends.
#[derive(Debug)]
struct StreamSlot {
    all: Arc<AtomicUsize>,
    per_host: Arc<Mutex<HashMap<Option<String>, usize>>>,
    host: Option<String>,
}

impl StreamSlot {
    /// A place for a stream of `host`, or why there is none.
    fn take(console: &Console, host: Option<&str>) -> Result<StreamSlot, String> {
        let mut per_host = console.per_host.lock().unwrap_or_else(PoisonError::into_inner);
        let open = per_host.entry(host.map(str::to_string)).or_default();
        if *open >= MAX_STREAMS_PER_HOST {
            return Err(format!(
                "{MAX_STREAMS_PER_HOST} console streams of this host are open, the most one host has"
            ));
        }
        if console.streams.fetch_add(1, Ordering::AcqRel) >= MAX_STREAMS {
            console.streams.fetch_sub(1, Ordering::AcqRel);
            return Err(format!("{MAX_STREAMS} console streams are open, the most this daemon keeps"));
        }
        *open += 1;
        Ok(StreamSlot {
            all: console.streams.clone(),
            per_host: console.per_host.clone(),
            host: host.map(str::to_string),
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.all.fetch_sub(1, Ordering::AcqRel);
        let mut per_host = self.per_host.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = per_host.get_mut(&self.host) {
            *open -= 1;
            if *open == 0 {
                per_host.remove(&self.host);
            }
        }
    }
}

/// `GET /console/events[?prefix=PATH]`: a snapshot of the viewer's host (its claims under
/// `PATH`, `/` when none is given) now and whenever it changes, for [`STREAM_FOR`].
async fn events(State(console): State<Arc<Console>>, headers: HeaderMap, uri: Uri) -> Response {
    let view = match console.viewer(&headers, &uri) {
        Ok(view) => view,
        Err(refused) => return refused,
    };
    let prefix = query(&uri, "prefix").filter(|p| !p.is_empty()).unwrap_or_else(|| "/".to_string());
    if !prefix.starts_with('/') || prefix.len() > MAX_PREFIX || prefix.chars().any(char::is_control) {
        let body = json!({"error": format!("a prefix is an absolute path of at most {MAX_PREFIX} bytes")});
        return (StatusCode::BAD_REQUEST, json_headers(), body.to_string()).into_response();
    }
    let slot = match StreamSlot::take(&console, view.tenant()) {
        Ok(slot) => slot,
        Err(why) => return (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(1);
    // Held weakly between looks: a host no longer served ends its streams, and is not kept.
    let view = Arc::downgrade(&view);
    tokio::spawn(async move {
        let _slot = slot;
        let console = console;
        let until = tokio::time::Instant::now() + STREAM_FOR;
        let mut last = String::new();
        let mut first = true;
        loop {
            let Some(shown) = view.upgrade() else { return };
            let data = console.look(&shown, &prefix).await;
            drop(shown);
            if data != last {
                let mut event = Event::default()
                    .event("snapshot")
                    .data(format!("{{\"now_ms\":{},\"view\":{data}}}", now_ms()));
                if first {
                    event = event.retry(Duration::from_millis(RETRY_MS));
                    first = false;
                }
                if tx.send(event).await.is_err() {
                    return;
                }
                last = data;
            }
            if tokio::time::Instant::now() + TICK >= until {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(TICK) => {}
                () = tx.closed() => return,
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<Event, Infallible>);
    let mut response = Sse::new(stream).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// What the page shows of `view`, its claims under `prefix`, now (without the time, so two
/// snapshots of the same state compare equal).
async fn snapshot(view: &dyn View, prefix: &str) -> Value {
    let zookeeper = match tokio::time::timeout(LOOK_LIMIT, view.zookeeper()).await {
        Ok(Ok(())) => "serving".to_string(),
        Ok(Err(why)) => why,
        Err(_) => format!("no word of ZooKeeper within {LOOK_LIMIT:?}"),
    };
    let (claims, claims_more, claims_error) =
        match tokio::time::timeout(LOOK_LIMIT, view.claims(prefix)).await {
            Ok(Ok(list)) => (claims_json(&list), list.claims.len().saturating_sub(MAX_CLAIMS), Value::Null),
            Ok(Err(status)) => (json!([]), 0, json!(status.message())),
            Err(_) => (json!([]), 0, json!(format!("the claims were not read within {LOOK_LIMIT:?}"))),
        };
    let (recipes, recipes_error) = match view.recipes() {
        Ok(listed) => (recipes_json(&listed), Value::Null),
        Err(e) => (json!([]), json!(format!("{e:#}"))),
    };
    json!({
        "tenant": view.tenant(),
        "zookeeper": zookeeper,
        "prefix": prefix,
        "claims": claims,
        "claims_more": claims_more,
        "claims_error": claims_error,
        "sessions": sessions_json(&view.sessions()),
        "recipes": recipes,
        "recipes_error": recipes_error,
        "swaps": view.swaps(),
        "registry": view.follows_registry(),
        "pulse": view.pulse().series(now_ms() / 1000),
        "queues": view.queues().into_iter().map(|(path, depth)| json!({"path": path, "depth": depth})).collect::<Vec<_>>(),
    })
}

fn kind_name(kind: i32) -> &'static str {
    match pb::HoldersKind::try_from(kind) {
        Ok(pb::HoldersKind::Lock) => "lock",
        Ok(pb::HoldersKind::ReadWrite) => "read/write lock",
        Ok(pb::HoldersKind::Semaphore) => "semaphore",
        Ok(pb::HoldersKind::Election) => "election",
        _ => "claim",
    }
}

fn mode_name(mode: i32) -> &'static str {
    match pb::ContenderMode::try_from(mode) {
        Ok(pb::ContenderMode::Read) => "read",
        Ok(pb::ContenderMode::Write) => "write",
        _ => "",
    }
}

/// A holder's identity (its node's data) as text, cut to [`MAX_IDENTITY`] bytes.
fn identity(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(&data[..data.len().min(MAX_IDENTITY)]).into_owned();
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

fn claims_json(list: &pb::ClaimList) -> Value {
    let claims: Vec<Value> = list
        .claims
        .iter()
        .take(MAX_CLAIMS)
        .map(|c| {
            let contenders: Vec<Value> = c
                .contenders
                .iter()
                .take(MAX_CONTENDERS)
                .map(|k| {
                    json!({
                        "node": k.node,
                        "sequence": k.sequence,
                        "holds": k.holds,
                        "mode": mode_name(k.mode),
                        "identity": identity(&k.data),
                        // As strings: a JavaScript number keeps 53 bits.
                        "session": format!("{:#x}", k.session),
                        "token": k.fencing_token.to_string(),
                        "since_ms": k.since_ms,
                    })
                })
                .collect();
            json!({
                "path": c.path,
                "kind": kind_name(c.kind),
                "contenders": contenders,
                "more": c.contenders.len().saturating_sub(MAX_CONTENDERS),
            })
        })
        .collect();
    Value::Array(claims)
}

fn sessions_json(list: &pb::SessionList) -> Value {
    let sessions: Vec<Value> = list
        .sessions
        .iter()
        .map(|s| {
            let claims: Vec<Value> = s
                .claims
                .iter()
                .map(|c| {
                    json!({
                        "path": c.path,
                        "family": c.family,
                        "holds": c.holds,
                        "node": c.node,
                        "token": c.fencing_token.to_string(),
                        "since_ms": c.since_ms,
                    })
                })
                .collect();
            json!({
                "session": format!("{:#x}", s.session),
                "name": s.name,
                "peer": s.peer,
                "opened_ms": s.opened_ms,
                "claims": claims,
            })
        })
        .collect();
    Value::Array(sessions)
}

fn recipes_json(listed: &[RecipeInfo]) -> Value {
    let recipes: Vec<Value> = listed
        .iter()
        .map(|r| {
            let serving = r.serving.as_ref();
            let loaded_ms = serving
                .and_then(|v| v.loaded_at.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64);
            json!({
                "name": r.name,
                "version": serving.map(|v| v.short_hash().to_string()),
                "digest": serving.map(|v| v.sha256.clone()),
                "world": serving.map(|v| v.world.name()),
                "protocol": serving.and_then(|v| v.protocol.clone()),
                "loaded_ms": loaded_ms,
                "source": if r.published { "registry" } else if r.embedded { "built in" } else { "plugins" },
                "refused": r.refused.as_ref().map(|f| f.reason.clone()),
            })
        })
        .collect();
    Value::Array(recipes)
}

/// One second of a [`Pulse`].
#[derive(Clone, Copy, Debug, Default)]
struct Second {
    /// The second, since the Unix epoch.
    at: u64,
    acquired: u32,
    /// Acquiring calls that ended (held or not), and how long they waited in all and at most.
    waits: u32,
    wait_sum: f64,
    wait_max: f64,
}

/// The acquiring calls of one host over the last [`WINDOW`] seconds, second by second: how
/// many took their claim, and how long the calls waited (those that ended without the claim,
/// a timeout say, count in the waits too). Fed by one line where the daemon measures each call.
#[derive(Debug, Default)]
pub struct Pulse(Mutex<VecDeque<Second>>);

impl Pulse {
    /// Counts a call of `method` that took `elapsed`, if it is one that acquires.
    pub fn record(&self, method: &str, acquired: bool, elapsed: Duration) {
        if ACQUIRING.contains(&method) {
            self.add(now_ms() / 1000, acquired, elapsed);
        }
    }

    fn add(&self, at: u64, acquired: bool, waited: Duration) {
        let mut seconds = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seconds.back().is_none_or(|s| s.at < at) {
            seconds.push_back(Second { at, ..Second::default() });
        }
        // A call that ended in an earlier second than the last one recorded (clocks) counts
        // in the last.
        let second = seconds.back_mut().expect("one second at least");
        second.acquired += u32::from(acquired);
        second.waits += 1;
        let waited = waited.as_secs_f64();
        second.wait_sum += waited;
        second.wait_max = second.wait_max.max(waited);
        while seconds.front().is_some_and(|s| s.at + WINDOW <= at) {
            seconds.pop_front();
        }
    }

    /// The last [`WINDOW`] seconds up to `now` (seconds since the epoch), oldest first:
    /// acquisitions, and the mean and longest wait in milliseconds (0 with no call).
    fn series(&self, now: u64) -> Value {
        let seconds = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut acquired, mut mean, mut max) =
            (vec![0u32; WINDOW as usize], vec![0u64; WINDOW as usize], vec![0u64; WINDOW as usize]);
        for s in seconds.iter() {
            let Some(ago) = now.checked_sub(s.at) else { continue };
            if ago >= WINDOW {
                continue;
            }
            let i = (WINDOW - 1 - ago) as usize;
            acquired[i] = s.acquired;
            if s.waits > 0 {
                mean[i] = (s.wait_sum / f64::from(s.waits) * 1000.0).round() as u64;
                max[i] = (s.wait_max * 1000.0).round() as u64;
            }
        }
        json!({"acquired": acquired, "wait_mean_ms": mean, "wait_max_ms": max})
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a form was sent from the console's own page: a browser names the page's origin
/// (`Origin`), which must be this server as the request addressed it: its `Host`, or the
/// `X-Forwarded-Host` a reverse proxy in front of it sets (a page of another site cannot set
/// that header on a form it sends). A request with no `Origin` is not a browser's form from
/// another site.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let origin = origin.to_str().unwrap_or_default();
    let Some(origin) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    [header::HOST.as_str(), "x-forwarded-host"]
        .into_iter()
        .filter_map(|name| headers.get(name)?.to_str().ok())
        // A proxy behind another adds its own after a comma: the first is what the browser asked.
        .filter_map(|value| value.split(',').next().map(str::trim))
        .any(|host| !host.is_empty() && host.eq_ignore_ascii_case(origin))
}

/// The value of the cookie `name` in the request's cookies.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_string())
}

/// The value of `name` in the URI's query, decoded.
fn query(uri: &Uri, name: &str) -> Option<String> {
    form_field(uri.query()?, name)
}

/// The value of `name` in `application/x-www-form-urlencoded` text, decoded.
fn form_field(text: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(text.as_bytes()).find(|(n, _)| n == name).map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A host of `tenant` holding one lock at `PREFIX/<tenant>-lock`, and how many times its
    /// claims were read.
    struct Fake(Option<&'static str>, Pulse, AtomicUsize);

    impl View for Fake {
        fn tenant(&self) -> Option<&str> {
            self.0
        }

        fn zookeeper(&self) -> Look<'_, Result<(), String>> {
            Box::pin(async { Ok(()) })
        }

        fn sessions(&self) -> pb::SessionList {
            let name = format!("{}'s client", self.0.unwrap_or("someone"));
            pb::SessionList {
                sessions: vec![pb::ClientSessionInfo { session: u64::MAX, name, ..Default::default() }],
            }
        }

        fn claims<'a>(&'a self, prefix: &'a str) -> Look<'a, Result<pb::ClaimList, tonic::Status>> {
            self.2.fetch_add(1, Ordering::Relaxed);
            let path = format!(
                "{}{}-lock",
                prefix.trim_end_matches('/'),
                self.0.map_or("/open".into(), |t| format!("/{t}"))
            );
            let holder = pb::Contender {
                holds: true,
                data: b"<img src=x onerror=alert(1)>\n".to_vec(),
                session: 0x1234,
                fencing_token: 1 << 60,
                ..Default::default()
            };
            let claim = pb::ClaimInfo { path, kind: pb::HoldersKind::Lock as i32, contenders: vec![holder] };
            Box::pin(async move { Ok(pb::ClaimList { claims: vec![claim] }) })
        }

        fn recipes(&self) -> anyhow::Result<Vec<RecipeInfo>> {
            Ok(Vec::new())
        }

        fn swaps(&self) -> u64 {
            0
        }

        fn follows_registry(&self) -> bool {
            false
        }

        fn pulse(&self) -> &Pulse {
            &self.1
        }

        fn queues(&self) -> Vec<(String, i64)> {
            vec![("/jobs".to_string(), 3)]
        }
    }

    fn fake(tenant: Option<&'static str>) -> Arc<dyn View> {
        Arc::new(Fake(tenant, Pulse::default(), AtomicUsize::new(0)))
    }

    fn sha(token: &str) -> [u8; 32] {
        Sha256::digest(token.as_bytes()).into()
    }

    fn cookie_header(console: &Console, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let name = &console.cookie_name;
        headers.insert(header::COOKIE, HeaderValue::from_str(&format!("a=b; {name}={value}")).unwrap());
        headers
    }

    #[test]
    fn one_host_cannot_take_every_stream() {
        let console = Console::new();
        let mut alice: Vec<StreamSlot> =
            (0..MAX_STREAMS_PER_HOST).map(|_| StreamSlot::take(&console, Some("alice")).unwrap()).collect();
        assert!(StreamSlot::take(&console, Some("alice")).is_err(), "alice's places are taken");
        let bob = StreamSlot::take(&console, Some("bob")).expect("bob has his own");
        alice.pop();
        let again = StreamSlot::take(&console, Some("alice")).expect("a place given back");
        assert_eq!(console.streams.load(Ordering::Acquire), MAX_STREAMS_PER_HOST + 1);
        drop((alice, bob, again));
        assert_eq!(console.streams.load(Ordering::Acquire), 0);
        assert!(console.per_host.lock().unwrap().is_empty());
        // Past the daemon's cap, whatever the hosts.
        let many: Vec<_> = (0..MAX_STREAMS)
            .map(|i| StreamSlot::take(&console, Some(&format!("t{}", i / 4))).unwrap())
            .collect();
        assert!(StreamSlot::take(&console, Some("late")).unwrap_err().contains("this daemon"));
        drop(many);
    }

    #[test]
    fn an_open_console_answers_only_at_an_address() {
        let host = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_str(value).unwrap());
            addressed_by_ip(&headers)
        };
        for ok in ["127.0.0.1:9181", "localhost:9181", "[::1]:9181", "10.1.2.3", "LOCALHOST"] {
            assert!(host(ok), "{ok}");
        }
        for rebound in ["attacker.example:9181", "attacker.example", "127.0.0.1.nip.io:9181", "[evil]:1"] {
            assert!(!host(rebound), "{rebound}");
        }
        assert!(addressed_by_ip(&HeaderMap::new()), "no Host (HTTP/1.0)");
    }

    #[test]
    fn the_pulse_keeps_five_minutes_of_acquisitions_and_waits() {
        let pulse = Pulse::default();
        pulse.add(1000, true, Duration::from_millis(100));
        pulse.add(1000, true, Duration::from_millis(300));
        pulse.add(1000, false, Duration::from_millis(2000)); // a wait that timed out
        pulse.add(1010, true, Duration::from_millis(5));
        let series = pulse.series(1010);
        let last = WINDOW as usize - 1;
        assert_eq!(series["acquired"][last], 1);
        assert_eq!(series["acquired"][last - 10], 2);
        assert_eq!(series["wait_mean_ms"][last - 10], 800);
        assert_eq!(series["wait_max_ms"][last - 10], 2000);
        assert_eq!(series["acquired"].as_array().unwrap().len(), WINDOW as usize);
        assert_eq!(series["acquired"].as_array().unwrap().iter().filter(|n| *n != 0).count(), 2);
        // Seconds older than the window drop out, as read and as kept.
        let later = pulse.series(1000 + WINDOW);
        assert_eq!(later["acquired"][9], 1, "second 1010, 290 s ago");
        assert_eq!(later["acquired"].as_array().unwrap().iter().filter(|n| *n != 0).count(), 1);
        assert!(pulse.series(1010 + WINDOW)["acquired"].as_array().unwrap().iter().all(|n| *n == 0));
        pulse.add(1000 + WINDOW, true, Duration::ZERO);
        assert_eq!(pulse.0.lock().unwrap().len(), 2, "second 1000 is gone");
        // Only the calls that acquire count.
        let pulse = Pulse::default();
        for method in ["Release", "Holders", "QueuePut", "Acquire", "Hold/acquire", "Campaign"] {
            pulse.record(method, true, Duration::from_millis(1));
        }
        let counted: u32 = pulse.0.lock().unwrap().iter().map(|s| s.acquired).sum();
        assert_eq!(counted, 3);
    }

    #[test]
    fn forms_and_queries_are_decoded() {
        assert_eq!(form_field("t=a+b%20c%2Fd%zz%4", "t").as_deref(), Some("a b c/d%zz%4"));
        assert_eq!(form_field("x=1&token=t%2Bk+n&y=", "token").as_deref(), Some("t+k n"));
        assert_eq!(form_field("tokens=1", "token"), None);
        let uri: Uri = "/?refused&token=abc".parse().unwrap();
        assert_eq!(query(&uri, "token").as_deref(), Some("abc"));
        let console = Console::new();
        assert_eq!(cookie(&cookie_header(&console, "v"), &console.cookie_name).as_deref(), Some("v"));
        assert_eq!(cookie(&cookie_header(&Console::new(), "v"), &console.cookie_name), None, "another's");
    }

    #[test]
    fn each_token_shows_its_own_host_and_a_daemon_without_tokens_is_open() {
        let console = Console::new();
        let root: Uri = "/".parse().unwrap();
        // Open: the one host without a token.
        let open = fake(None);
        console.show(vec![(None, Arc::downgrade(&open))]);
        assert!(!console.guarded());
        assert!(console.viewer(&HeaderMap::new(), &root).is_ok_and(|v| v.tenant().is_none()));

        let (alice, bob) = (fake(Some("alice")), fake(Some("bob")));
        console.show(vec![
            (Some(sha("alice-token")), Arc::downgrade(&alice)),
            (Some(sha("bob-token")), Arc::downgrade(&bob)),
        ]);
        assert!(console.guarded());
        assert_eq!(
            console.viewer(&HeaderMap::new(), &root).err().map(|r| r.status()),
            Some(StatusCode::UNAUTHORIZED)
        );
        let by_query = |token: &str| {
            let uri: Uri = format!("/console/events?token={token}").parse().unwrap();
            console.viewer(&HeaderMap::new(), &uri).ok().and_then(|v| v.tenant().map(str::to_string))
        };
        assert_eq!(by_query("alice-token").as_deref(), Some("alice"));
        assert_eq!(by_query("bob-token").as_deref(), Some("bob"));
        assert_eq!(by_query("carol-token"), None);
        // The cookie stands for one login, is neither the token nor its hash, and opens only
        // its host.
        assert_eq!(console.log_in("carol-token"), None);
        let cookie = console.log_in("bob-token").unwrap();
        let again = console.log_in("bob-token").unwrap();
        assert_ne!(cookie, again, "each login its own");
        assert!(!cookie.contains("bob-token") && cookie != hex(&sha("bob-token")));
        let viewer = |cookie: &str| {
            console
                .viewer(&cookie_header(&console, cookie), &root)
                .ok()
                .map(|v| v.tenant().map(str::to_string))
        };
        assert_eq!(viewer(&cookie), Some(Some("bob".to_string())));
        assert_eq!(viewer("0000"), None);
        // Another daemon does not take it, under its cookie's name or under its own.
        let other = Console::new();
        other.show(vec![(Some(sha("bob-token")), Arc::downgrade(&bob))]);
        assert!(other.viewer(&cookie_header(&other, &cookie), &root).is_err());
        assert!(other.viewer(&cookie_header(&console, &cookie), &root).is_err());
        // Logged out, the login opens nothing, wherever its cookie was copied; the other stays.
        console.logins.lock().unwrap().remove(&cookie);
        assert_eq!(viewer(&cookie), None);
        assert_eq!(viewer(&again), Some(Some("bob".to_string())));
        // A host no longer served is shown to nobody, its logins included.
        drop(bob);
        assert_eq!(viewer(&again), None);
        assert_eq!(by_query("bob-token"), None);
        // Logins past the most kept forget the oldest.
        let first = console.log_in("alice-token").unwrap();
        for _ in 0..MAX_LOGINS {
            console.log_in("alice-token").unwrap();
        }
        assert_eq!(viewer(&first), None);
        assert_eq!(console.logins.lock().unwrap().order.len(), MAX_LOGINS);
    }

    #[tokio::test]
    async fn a_snapshot_carries_the_hosts_view_as_data_not_markup() {
        let alice = fake(Some("alice"));
        alice.pulse().record("Acquire", true, Duration::from_millis(7));
        let snapshot = snapshot(alice.as_ref(), "/").await;
        assert_eq!(snapshot["tenant"], "alice");
        assert_eq!(snapshot["zookeeper"], "serving");
        let claim = &snapshot["claims"][0];
        assert_eq!((claim["path"].as_str(), claim["kind"].as_str()), (Some("/alice-lock"), Some("lock")));
        let holder = &claim["contenders"][0];
        // Control characters out; the rest is text for the page's textContent.
        assert_eq!(holder["identity"], "<img src=x onerror=alert(1)> ");
        // Numbers past 2^53 travel as strings.
        assert_eq!(holder["token"], (1i64 << 60).to_string());
        assert_eq!(holder["session"], "0x1234");
        assert_eq!(snapshot["sessions"][0]["session"], format!("{:#x}", u64::MAX));
        assert_eq!(snapshot["pulse"]["acquired"][WINDOW as usize - 1], 1);
    }

    /// Sends `request` to `addr` and reads the answer until the server closes: status, head
    /// (lower case), body.
    async fn ask(addr: std::net::SocketAddr, request: &str) -> (u16, String, String) {
        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            stream.write_all(request.as_bytes()).await.expect("send");
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).await.expect("read");
            String::from_utf8_lossy(&raw).into_owned()
        };
        let raw =
            tokio::time::timeout(STREAM_FOR + Duration::from_secs(5), exchange).await.expect("an answer");
        let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        (status, head.to_ascii_lowercase(), body.to_string())
    }

    #[tokio::test]
    async fn the_event_stream_is_each_tenants_own_and_ends_by_itself() {
        let console = Console::new();
        let bobs = Arc::new(Fake(Some("bob"), Pulse::default(), AtomicUsize::new(0)));
        let (alice, bob): (_, Arc<dyn View>) = (fake(Some("alice")), bobs.clone());
        console.show(vec![
            (Some(sha("alice-token")), Arc::downgrade(&alice)),
            (Some(sha("bob-token")), Arc::downgrade(&bob)),
        ]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { axum::serve(listener, console.router()).await });

        let (status, head, body) = ask(addr, "GET / HTTP/1.0\r\n\r\n").await;
        assert_eq!(status, 200);
        assert!(head.contains("content-security-policy: default-src 'none'"), "{head}");
        assert!(body.contains("<script src=\"/console/console.js\""), "{body}");
        let (status, _, _) = ask(addr, "GET /console/events HTTP/1.0\r\n\r\n").await;
        assert_eq!(status, 401);
        let (status, head, _) =
            ask(addr, "POST /console/login HTTP/1.0\r\nContent-Length: 15\r\n\r\ntoken=bob-token").await;
        assert_eq!(status, 303);
        let cookie = head
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        let (status, head, _) =
            ask(addr, "POST /console/login HTTP/1.0\r\nContent-Length: 11\r\n\r\ntoken=wrong").await;
        assert_eq!(status, 303);
        assert!(head.contains("location: /?refused") && !head.contains("set-cookie"), "{head}");
        // A form sent from another site's page is refused, a right token or not.
        let elsewhere =
            "POST /console/login HTTP/1.0\r\nHost: console:9181\r\nOrigin: http://evil.example\r\n\
                         Content-Length: 15\r\n\r\ntoken=bob-token";
        let (status, head, _) = ask(addr, elsewhere).await;
        assert!(status == 403 && !head.contains("set-cookie"), "{head}");
        let own = elsewhere.replace("http://evil.example", "http://console:9181");
        let (status, head, _) = ask(addr, &own).await;
        assert!(status == 303 && head.contains("location: /\r\n") && head.contains("set-cookie"), "{head}");
        // Behind a reverse proxy: the browser's origin is the proxy's name, which the proxy
        // passes on; a page of another site cannot set that header.
        let proxied =
            "POST /console/login HTTP/1.0\r\nHost: 127.0.0.1:9181\r\nOrigin: https://locks.example\r\n\
                       X-Forwarded-Host: locks.example\r\nContent-Length: 15\r\n\r\ntoken=bob-token";
        let (status, head, _) = ask(addr, proxied).await;
        assert!(status == 303 && head.contains("set-cookie"), "{head}");
        let (status, _, _) =
            ask(addr, &proxied.replace("Origin: https://locks.example", "Origin: https://evil.example"))
                .await;
        assert_eq!(status, 403);

        // Two streams of bob's at once (one under a prefix), and a bad prefix refused.
        let bad = format!("GET /console/events?prefix=relative HTTP/1.0\r\nCookie: {cookie}\r\n\r\n");
        assert_eq!(ask(addr, &bad).await.0, 400);
        let started = std::time::Instant::now();
        let request = format!("GET /console/events HTTP/1.0\r\nCookie: {cookie}\r\n\r\n");
        let under = format!("GET /console/events?prefix=%2Fjobs HTTP/1.0\r\nCookie: {cookie}\r\n\r\n");
        let ((status, head, body), (_, _, same), (_, _, jobs)) =
            tokio::join!(ask(addr, &request), ask(addr, &request), ask(addr, &under));
        assert_eq!(status, 200);
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        assert!(started.elapsed() >= STREAM_FOR - TICK, "the stream ended after {:?}", started.elapsed());
        assert!(body.contains("event: snapshot") && body.contains("retry: 250"), "{body}");
        assert!(body.contains("\"/bob-lock") && !body.contains("/alice-lock"), "{body}");
        assert!(!body.contains("bob-token"), "the token is never echoed");
        assert!(same.contains("\"/bob-lock"), "{same}");
        assert!(jobs.contains("\"/jobs/bob-lock") && jobs.contains("\"prefix\":\"/jobs\""), "{jobs}");
        // Nothing changed: one snapshot only.
        assert_eq!(body.matches("event: snapshot").count(), 1, "{body}");
        // The two streams of `/` shared their looks: about one a second for both, not two (the
        // one under `/jobs` looks on its own).
        let read = bobs.2.load(Ordering::Relaxed);
        let seconds = STREAM_FOR.as_secs() as usize;
        assert!(read <= 2 * (seconds + 2), "{read} looks in {seconds} s for two prefixes");
        assert!(read >= seconds, "{read} looks in {seconds} s");

        // Logged out: that login opens nothing more, even from a copy of its cookie.
        let out = format!("POST /console/logout HTTP/1.0\r\nCookie: {cookie}\r\n\r\n");
        let (status, head, _) = ask(addr, &out).await;
        assert!(status == 303 && head.contains("max-age=0"), "{head}");
        let whoami = format!("GET /console/whoami HTTP/1.0\r\nCookie: {cookie}\r\n\r\n");
        assert_eq!(ask(addr, &whoami).await.0, 401);
        server.abort();
    }
}
