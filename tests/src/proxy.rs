//! A TCP proxy between a client under test and ZooKeeper (or between two ensemble members), for
//! the faults a real network produces, on command from the test:
//!
//! - `freeze` stops every byte both ways without closing anything (a partition, or a stalled
//!   peer); `thaw` lets them flow again;
//! - `cut` closes every connection open now (the client reconnects through the proxy);
//! - `delay` holds each reply back for a while;
//! - `lose_reply` lets the Nth request of some kinds reach the server, then cuts the connection
//!   instead of passing its reply on: the request took effect, the client never hears so.
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

#[derive(Default)]
struct Faults {
    lose: Mutex<Option<LoseReply>>,
    delay_ms: AtomicU64,
    /// Replies lost so far, and a signal for each.
    lost: AtomicU64,
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
                tokio::spawn(async move {
                    // A frozen link makes no new connection either; a refused one is tried again
                    // for a while (a member about to listen), as a real network would let it.
                    if frozen.wait_for(|f| !*f).await.is_err() {
                        return;
                    }
                    let Some(server) = connect(upstream).await else { return };
                    let _ = (client.set_nodelay(true), server.set_nodelay(true));
                    let link = Link {
                        frozen,
                        cut: cut.subscribe(),
                        born: *cut.borrow(),
                        faults: shared,
                        // xids of requests whose reply is to be lost
                        doomed: Arc::new(Mutex::new(Vec::new())),
                        closed: Arc::new(watch::channel(false).0),
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
    doomed: Arc<Mutex<Vec<i32>>>,
    /// Set when either direction ends: the other follows.
    closed: Arc<watch::Sender<bool>>,
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
                            self.doomed.lock().unwrap().push(xid);
                            *lose = None;
                        } else {
                            plan.nth -= 1;
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
                let lost = {
                    let mut doomed = self.doomed.lock().unwrap();
                    let found = doomed.iter().position(|d| *d == xid);
                    found.map(|i| doomed.remove(i)).is_some()
                };
                if lost {
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
