//! A TCP proxy between a client under test and ZooKeeper (or between two ensemble members), for
//! the faults a real network produces, on command from the test:
//!
//! - `freeze` stops every byte both ways without closing anything (a partition, or a stalled
//!   peer); `thaw` lets them flow again;
//! - `cut` closes every connection open now (the client reconnects through the proxy);
//! - `delay` holds each reply back for a while;
//! - `lose_reply` lets the Nth request of some kinds reach the server, then cuts the connection
//!   instead of passing its reply on: the request took effect, the client never hears so;
//! - `tap` records every request (its type, path, watch flag, and the error code of its reply),
//!   and can lose or hold the reply to the Nth request of any kind: the exhaustive fault matrix
//!   (`crate::matrix`) records a clean run this way, then faults each request in turn, and knows
//!   whether the faulted request succeeded on the server.
//!
//! The last two read ZooKeeper's client protocol (length-prefixed frames; a request starts with
//! `xid, type`, a reply with `xid, zxid, err`); a proxy started with [`Proxy::raw`] only copies
//! bytes, for links that do not speak it (quorum and election ports).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// ZooKeeper request types ("OpCode" in the Java server).
pub mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const CREATE_TTL: i32 = 21;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const GET_EPHEMERALS: i32 = 103;
    pub const CHECK_WATCHES: i32 = 17;
    pub const CLOSE_SESSION: i32 = -11;
    pub const REMOVE_WATCHES: i32 = 18;

    /// A short name for a request type, for reports.
    pub fn name(kind: i32) -> String {
        match short(kind) {
            "other" => format!("request type {kind}"),
            known => known.to_string(),
        }
    }

    fn short(kind: i32) -> &'static str {
        match kind {
            CREATE | CREATE2 => "create",
            CREATE_CONTAINER => "create-container",
            CREATE_TTL => "create-ttl",
            DELETE => "delete",
            EXISTS => "exists",
            GET_DATA => "get-data",
            SET_DATA => "set-data",
            GET_CHILDREN | GET_CHILDREN2 => "get-children",
            SYNC => "sync",
            CHECK => "check",
            MULTI => "multi",
            GET_EPHEMERALS => "get-ephemerals",
            _ => "other",
        }
    }
    /// Every kind of create.
    pub const CREATES: &[i32] = &[CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL];
}

/// The largest frame the proxy accepts (ZooKeeper's own `jute.maxbuffer` default is 1 MiB).
const MAX_FRAME: usize = 16 << 20;

/// A reply to lose: the `nth` (from 1) next request whose type is in `kinds`.
#[derive(Clone, Debug)]
struct LoseReply {
    kinds: Vec<i32>,
    nth: u32,
}

/// What a tap does to the reply of its target request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The request reaches the server; its reply is dropped and the connection cut.
    Lose,
    /// The request reaches the server; its reply is held and the proxy freezes (no byte passes
    /// either way) until [`Proxy::thaw`], when the reply is dropped and the connection cut. The
    /// test acts meanwhile: it expires the session, or kills the participant.
    Hold,
}

/// One client request seen by a tap, in order.
#[derive(Clone, Debug)]
pub struct Request {
    /// From 1, in the order requests reached the proxy since the tap was set (watch removals,
    /// which the client library sends on its own schedule, are not counted).
    pub n: u32,
    pub kind: i32,
    /// The path it names (a multi's: its first op's path); empty if it names none.
    pub path: String,
    /// It sets a watch (exists, get-data, get-children with the watch flag).
    pub watch: bool,
    /// The error code of its reply (0: it succeeded on the server; for a multi, the code of its
    /// failing op); none while no reply has been seen.
    pub err: Option<i32>,
    /// How many replies to logged requests the client had been sent on this connection when
    /// this request reached the proxy: requests sent together (a pipeline) share the count, a request sent after the
    /// reply to the one before it has a higher one (certainly so while `delay` holds replies).
    pub answered_before: u64,
    link: u64,
    xid: i32,
}

#[derive(Default)]
struct TapState {
    on: bool,
    log: Vec<Request>,
    target: Option<(u32, Action)>,
    /// Index in `log` of the request the target fault fired on (its reply seen and lost or held).
    fired: Option<usize>,
}

#[derive(Default)]
struct Faults {
    tap: Mutex<TapState>,
    /// Signalled on every reply a tap sees.
    tapped: Notify,
    next_link: AtomicU64,
    lose: Mutex<Option<LoseReply>>,
    delay_ms: AtomicU64,
    /// Replies lost so far, and a signal for each.
    lost: AtomicU64,
    /// The error code of each lost (or held) reply, in order: 0 where the request succeeded.
    lost_errors: Mutex<Vec<i32>>,
    lost_signal: Notify,
    /// Connections closed by `cut` or by a lost reply.
    cuts: AtomicU64,
}

pub struct Proxy {
    port: u16,
    frozen: Arc<watch::Sender<bool>>,
    /// Bumped by `cut`: every connection opened under an older value closes.
    epoch: Arc<watch::Sender<u64>>,
    faults: Arc<Faults>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy for ZooKeeper's client protocol: listens on a free port of 127.0.0.1 and forwards
    /// every connection to `upstream`.
    pub async fn start(upstream: &str) -> Proxy {
        Proxy::listen(upstream, true).await
    }

    /// A proxy that only copies bytes (freeze, thaw and cut work; reply faults do not).
    pub async fn raw(upstream: &str) -> Proxy {
        Proxy::listen(upstream, false).await
    }

    async fn listen(upstream: &str, framed: bool) -> Proxy {
        let upstream: SocketAddr = upstream.parse().expect("upstream host:port");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(watch::channel(false).0);
        let epoch = Arc::new(watch::channel(0u64).0);
        let faults = Arc::new(Faults::default());
        let (gate, cut, shared) = (frozen.clone(), epoch.clone(), faults.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (mut frozen, cut, shared) = (gate.subscribe(), cut.clone(), shared.clone());
                let gate = gate.clone();
                tokio::spawn(async move {
                    // A frozen link makes no new connection either; a refused one is tried again
                    // for a while (a member about to listen), as a real network would let it.
                    if frozen.wait_for(|f| !*f).await.is_err() {
                        return;
                    }
                    let Some(server) = connect(upstream).await else { return };
                    let _ = (client.set_nodelay(true), server.set_nodelay(true));
                    let id = shared.next_link.fetch_add(1, Ordering::Relaxed);
                    let link = Link {
                        frozen,
                        freezer: gate.clone(),
                        id,
                        cut: cut.subscribe(),
                        born: *cut.borrow(),
                        faults: shared,
                        // xids of requests whose reply is to be lost
                        doomed: Arc::new(Mutex::new(Vec::new())),
                        closed: Arc::new(watch::channel(false).0),
                        forwarded: Arc::new(AtomicU64::new(0)),
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    if framed {
                        tokio::spawn(link.clone().requests(client_read, server_write));
                        tokio::spawn(link.replies(server_read, client_write));
                    } else {
                        tokio::spawn(link.clone().copy(client_read, server_write));
                        tokio::spawn(link.copy(server_read, client_write));
                    }
                });
            }
        });
        Proxy { port, frozen, epoch, faults, accept }
    }

    /// `host:port` for the client under test.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }

    /// Closes every connection open now; later ones pass.
    pub fn cut(&self) {
        self.faults.cuts.fetch_add(1, Ordering::SeqCst);
        self.epoch.send_modify(|e| *e += 1);
    }

    /// Holds every reply (server to client) back by `delay` from now on; zero ends it.
    pub fn delay(&self, delay: Duration) {
        self.faults.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Loses the reply to the `nth` (from 1) next request whose type is one of `kinds` (see
    /// [`op`]): the request reaches the server, then the connection is cut before the reply
    /// reaches the client.
    pub fn lose_reply(&self, kinds: &[i32], nth: u32) {
        *self.faults.lose.lock().unwrap() = Some(LoseReply { kinds: kinds.to_vec(), nth: nth.max(1) });
    }

    /// Replies lost so far.
    pub fn lost_replies(&self) -> u64 {
        self.faults.lost.load(Ordering::SeqCst)
    }

    /// The error code the server answered each lost reply with, in order: 0 where the request
    /// succeeded. A fault on a request that failed proves nothing; tests check this.
    pub fn lost_errors(&self) -> Vec<i32> {
        self.faults.lost_errors.lock().unwrap().clone()
    }

    /// Resolves once `n` replies have been lost in all.
    pub async fn replies_lost(&self, n: u64) {
        loop {
            let signal = self.faults.lost_signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.lost_replies() >= n {
                return;
            }
            signal.await;
        }
    }

    /// Times `cut` was called or a reply was lost.
    pub fn cuts(&self) -> u64 {
        self.faults.cuts.load(Ordering::SeqCst)
    }

    /// Starts a fresh request log, counting requests from 1 (pings, watch re-registrations and
    /// other requests with a negative xid are not counted, nor are watch removals). With a target `(n, action)`, the
    /// reply to request `n` is lost or held (see [`Action`]).
    pub fn tap(&self, target: Option<(u32, Action)>) {
        *self.faults.tap.lock().unwrap() =
            TapState { on: true, log: Vec::new(), target: target.map(|(n, a)| (n.max(1), a)), fired: None };
    }

    /// Ends the tap; returns what it recorded.
    pub fn untap(&self) -> Vec<Request> {
        let mut tap = self.faults.tap.lock().unwrap();
        tap.on = false;
        tap.target = None;
        std::mem::take(&mut tap.log)
    }

    /// The request the tap's target fault fired on, once it has.
    pub fn fired(&self) -> Option<Request> {
        let tap = self.faults.tap.lock().unwrap();
        tap.fired.map(|i| tap.log[i].clone())
    }

    /// Resolves once the tap's target fault has fired.
    pub async fn fault_fired(&self) -> Request {
        self.tapped(|tap| tap.fired.map(|i| tap.log[i].clone())).await
    }

    /// Resolves once a request matching `pred` has been answered (its reply reached the proxy),
    /// with that request.
    pub async fn answered(&self, pred: impl Fn(&Request) -> bool) -> Request {
        self.tapped(|tap| tap.log.iter().find(|r| r.err.is_some() && pred(r)).cloned()).await
    }

    async fn tapped<T>(&self, look: impl Fn(&TapState) -> Option<T>) -> T {
        loop {
            let signal = self.faults.tapped.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if let Some(found) = look(&self.faults.tap.lock().unwrap()) {
                return found;
            }
            signal.await;
        }
    }
}

/// A request frame's path and watch flag (see `op`): requests that name a node start with it,
/// reads that may watch follow it with a boolean, and a multi names its first op's path after
/// a header of type, done flag and error.
fn request_path(kind: i32, body: &[u8]) -> (String, bool) {
    let string_at = |at: usize| -> Option<(String, usize)> {
        let len = i32::from_be_bytes(body.get(at..at + 4)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        let bytes = body.get(at + 4..at + 4 + len)?;
        Some((String::from_utf8_lossy(bytes).into_owned(), at + 4 + len))
    };
    let at = if kind == op::MULTI { 9 } else { 0 };
    let named = matches!(kind, 1..=9 | 12 | 13 | op::MULTI | 15..=17 | 19..=21 | op::GET_EPHEMERALS | 106);
    let Some((path, end)) = (if named { string_at(at) } else { None }) else {
        return (String::new(), false);
    };
    let watches = matches!(kind, op::EXISTS | op::GET_DATA | op::GET_CHILDREN | op::GET_CHILDREN2);
    (path, watches && body.get(end) == Some(&1))
}

/// A reply's error code: the header's, or for a multi whose header says 0, its first result's
/// (a failed multi answers with error results only).
fn reply_error(kind: i32, frame: &[u8]) -> i32 {
    let header = frame.get(12..16).map_or(0, |b| i32::from_be_bytes(b.try_into().unwrap()));
    if header != 0 || kind != op::MULTI {
        return header;
    }
    match (frame.get(16..20), frame.get(21..25)) {
        (Some(ty), Some(err)) if i32::from_be_bytes(ty.try_into().unwrap()) == -1 => {
            i32::from_be_bytes(err.try_into().unwrap())
        }
        _ => 0,
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Close what is open too: a dropped proxy is a dead link.
        self.cut();
    }
}

/// One proxied connection's view of the faults.
#[derive(Clone)]
struct Link {
    frozen: watch::Receiver<bool>,
    cut: watch::Receiver<u64>,
    born: u64,
    faults: Arc<Faults>,
    /// Sets the whole proxy frozen (a held reply freezes it).
    freezer: Arc<watch::Sender<bool>>,
    id: u64,
    /// Requests whose reply is to be lost or held: xid, what to do, request type.
    doomed: Arc<Mutex<Vec<(i32, Action, i32)>>>,
    /// Set when either direction ends: the other follows.
    closed: Arc<watch::Sender<bool>>,
    /// Replies passed on to the client so far.
    forwarded: Arc<AtomicU64>,
}

enum Step {
    Go,
    Stop,
}

impl Link {
    /// Waits while frozen; `Stop` once this connection has been cut.
    async fn gate(&mut self) -> Step {
        loop {
            if *self.cut.borrow_and_update() != self.born || *self.closed.borrow() {
                return Step::Stop;
            }
            if !*self.frozen.borrow_and_update() {
                return Step::Go;
            }
            let mut closed = self.closed.subscribe();
            tokio::select! {
                r = self.frozen.changed() => if r.is_err() { return Step::Stop },
                r = self.cut.changed() => if r.is_err() { return Step::Stop },
                _ = closed.wait_for(|c| *c) => return Step::Stop,
            }
        }
    }

    /// Reads something from `read` unless the connection is cut first.
    async fn read<T>(&mut self, read: impl std::future::Future<Output = std::io::Result<T>>) -> Option<T> {
        let (mut cut, mut closed) = (self.cut.clone(), self.closed.subscribe());
        let born = self.born;
        tokio::select! {
            r = read => r.ok(),
            _ = cut.wait_for(|e| *e != born) => None,
            _ = closed.wait_for(|c| *c) => None,
        }
    }

    async fn copy(mut self, mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if let Step::Stop = self.gate().await {
                break;
            }
            let n = match self.read(from.read(&mut buf)).await {
                None | Some(0) => break,
                Some(n) => n,
            };
            if let Step::Stop = self.gate().await {
                break;
            }
            if to.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        self.close(to).await;
    }

    /// Ends this direction and tells the other to end too.
    async fn close(&self, mut to: impl AsyncWrite + Unpin) {
        self.closed.send_replace(true);
        let _ = to.shutdown().await;
    }

    /// Client to server: frames after the first (the connect request) are `xid, type, …`.
    async fn requests(mut self, mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
        let mut first = true;
        while let Some(frame) = self.frame(&mut from).await {
            if !first && frame.len() >= 8 {
                let xid = i32::from_be_bytes(frame[0..4].try_into().unwrap());
                let kind = i32::from_be_bytes(frame[4..8].try_into().unwrap());
                let mut lose = self.faults.lose.lock().unwrap();
                if let Some(plan) = lose.as_mut() {
                    if plan.kinds.contains(&kind) {
                        if plan.nth <= 1 {
                            self.doomed.lock().unwrap().push((xid, Action::Lose, kind));
                            *lose = None;
                        } else {
                            plan.nth -= 1;
                        }
                    }
                }
                drop(lose);
                let mut tap = self.faults.tap.lock().unwrap();
                // Watch removals are not counted: the client library sends them when a watch
                // is dropped, whenever that happens (often after the call that armed it ended),
                // and they change nothing on the server.
                // Nor is the host's own liveness probe (a sync of `/`, `wazoo_runtime::keeper`), which
                // runs on a clock of its own, not as part of any recipe's operation.
                let (path, watch) = request_path(kind, &frame[8..]);
                let probe = kind == op::SYNC && path == "/";
                if tap.on && xid > 0 && !probe && !matches!(kind, op::CHECK_WATCHES | op::REMOVE_WATCHES) {
                    let n = tap.log.len() as u32 + 1;
                    let answered_before = self.forwarded.load(Ordering::SeqCst);
                    tap.log.push(Request {
                        n,
                        kind,
                        path,
                        watch,
                        err: None,
                        answered_before,
                        link: self.id,
                        xid,
                    });
                    if let Some((target, action)) = tap.target {
                        if target == n {
                            self.doomed.lock().unwrap().push((xid, action, kind));
                        }
                    }
                }
            }
            first = false;
            if let Step::Stop = self.gate().await {
                break;
            }
            if write_frame(&mut to, &frame).await.is_err() {
                break;
            }
        }
        self.close(to).await;
    }

    /// Server to client: frames after the first (the connect reply) are `xid, zxid, err, …`.
    async fn replies(mut self, mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
        let mut first = true;
        while let Some(frame) = self.frame(&mut from).await {
            if !first && frame.len() >= 4 {
                let xid = i32::from_be_bytes(frame[0..4].try_into().unwrap());
                let doomed = {
                    let mut doomed = self.doomed.lock().unwrap();
                    let found = doomed.iter().position(|(d, _, _)| *d == xid);
                    found.map(|i| doomed.remove(i))
                };
                let action = doomed.map(|(_, action, _)| action);
                if let Some((_, _, kind)) = doomed {
                    self.faults.lost_errors.lock().unwrap().push(reply_error(kind, &frame));
                }
                if action == Some(Action::Hold) {
                    // Frozen before anyone hears the fault fired: nothing passes until the test
                    // thaws the proxy, and then the reply is lost.
                    self.freezer.send_replace(true);
                }
                let tapped = {
                    let mut tap = self.faults.tap.lock().unwrap();
                    let at =
                        tap.log.iter().position(|r| r.link == self.id && r.xid == xid && r.err.is_none());
                    if let Some(i) = at {
                        tap.log[i].err = Some(reply_error(tap.log[i].kind, &frame));
                        if action.is_some() && tap.target.is_some_and(|(n, _)| n == tap.log[i].n) {
                            tap.fired = Some(i);
                        }
                    }
                    at.is_some()
                };
                if tapped {
                    self.faults.tapped.notify_waiters();
                }
                if action == Some(Action::Hold) {
                    let _ = self.gate().await;
                }
                if action.is_some() {
                    // The request took effect; the client must not hear so. Cutting the
                    // connection is what a real network does to the reply.
                    self.faults.lost.fetch_add(1, Ordering::SeqCst);
                    self.faults.cuts.fetch_add(1, Ordering::SeqCst);
                    self.faults.lost_signal.notify_waiters();
                    break;
                }
            }
            first = false;
            let delay = self.faults.delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            if let Step::Stop = self.gate().await {
                break;
            }
            // Only replies to logged requests: not pings, watch events or the host's probe. Counted
            // before the reply is passed on, so a request the client sends once it has the reply
            // always finds it counted.
            let xid = frame.get(0..4).map_or(0, |b| i32::from_be_bytes(b.try_into().unwrap()));
            let logged =
                self.faults.tap.lock().unwrap().log.iter().any(|r| r.link == self.id && r.xid == xid);
            if logged {
                self.forwarded.fetch_add(1, Ordering::SeqCst);
            }
            if write_frame(&mut to, &frame).await.is_err() {
                break;
            }
        }
        self.close(to).await;
    }

    /// One length-prefixed frame (without its length), or `None` at the end of the stream or
    /// once the connection is cut.
    async fn frame(&mut self, from: &mut (impl AsyncRead + Unpin)) -> Option<Vec<u8>> {
        if let Step::Stop = self.gate().await {
            return None;
        }
        let mut len = [0u8; 4];
        self.read(from.read_exact(&mut len)).await?;
        let len = i32::from_be_bytes(len);
        if len < 0 || len as usize > MAX_FRAME {
            return None;
        }
        let mut body = vec![0u8; len as usize];
        self.read(from.read_exact(&mut body)).await?;
        Some(body)
    }
}

/// Connects to `upstream`, trying again for up to 5 s while it refuses.
async fn connect(upstream: SocketAddr) -> Option<TcpStream> {
    for _ in 0..100 {
        match TcpStream::connect(upstream).await {
            Ok(stream) => return Some(stream),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    None
}

async fn write_frame(to: &mut (impl AsyncWrite + Unpin), frame: &[u8]) -> std::io::Result<()> {
    to.write_all(&(frame.len() as i32).to_be_bytes()).await?;
    to.write_all(frame).await
}
