//! What a recipe instance's store holds, and how a host call reaches it.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::StoreLimits;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use crate::faults::Faults;
use crate::keeper::Live;
use crate::ledger::Ledger;
use crate::sandbox::{CallClock, SandboxLimits, Sandboxed};
use crate::stats::Stats;

/// State shared by every handle of one host.
#[derive(Debug, Default)]
pub struct Shared {
    pub faults: Faults,
    pub stats: Stats,
    pub limits: SandboxLimits,
    pub usage: Usage,
    /// Nodes are created readable and writable only by the session's own (digest) identity.
    pub private_acls: bool,
}

/// What the host's handles use now, against [`SandboxLimits`].
#[derive(Debug, Default)]
pub struct Usage {
    /// Watches armed and not dropped.
    pub watches: Arc<std::sync::atomic::AtomicUsize>,
    /// Notices of persistent watchers not read yet.
    pub queued: Arc<std::sync::atomic::AtomicUsize>,
    /// Nodes created minus nodes deleted through this host.
    pub znodes: std::sync::atomic::AtomicI64,
    /// The operations-per-second bucket: tokens left and when it was last filled.
    bucket: std::sync::Mutex<Option<(f64, Instant)>>,
    /// The bytes-written-per-second bucket.
    bytes: std::sync::Mutex<Option<(f64, Instant)>>,
    /// Unwaited deletes (`znode.delete-unwaited`) sent and not settled yet, and the signal that
    /// one was settled.
    pub(crate) unsettled: std::sync::atomic::AtomicUsize,
    pub(crate) settled: tokio::sync::Notify,
    /// Unwaited deletes given up on (their node back in its handle's ledger).
    pub(crate) given_up: std::sync::atomic::AtomicUsize,
    /// Recipe instances alive in handles (held, waiting, kept warm, or in a call): shared by
    /// the hosts of one engine's pool (a host and those it adopted).
    pub(crate) instances: Arc<std::sync::atomic::AtomicUsize>,
}

impl Usage {
    /// A fresh usage that counts its instances with `other`'s: one pool of instances (a host
    /// and the hosts it adopted).
    pub(crate) fn sharing_instances(other: &Usage) -> Usage {
        Usage { instances: other.instances.clone(), ..Usage::default() }
    }

    /// Takes one operation from a bucket that refills at `per_sec` (holding at most one second's
    /// worth); false when it is empty.
    pub(crate) fn take_op(&self, per_sec: u32) -> bool {
        self.take_ops(per_sec, 1)
    }

    /// Takes `n` operations at once from the same bucket; false when it has fewer.
    pub(crate) fn take_ops(&self, per_sec: u32, n: usize) -> bool {
        take(&self.bucket, f64::from(per_sec), n as f64)
    }

    /// Takes `n` bytes written from their bucket, refilled at `per_sec`.
    pub(crate) fn take_bytes(&self, per_sec: u64, n: usize) -> bool {
        take(&self.bytes, per_sec as f64, n as f64)
    }
}

/// A token bucket that refills at `rate` per second and holds at most one second's worth:
/// takes `n` if it has them. A rate of 0 is no limit.
fn take(bucket: &std::sync::Mutex<Option<(f64, Instant)>>, rate: f64, n: f64) -> bool {
    if rate == 0.0 {
        return true;
    }
    let now = Instant::now();
    let mut bucket = bucket.lock().unwrap();
    let (tokens, at) = bucket.get_or_insert((rate, now));
    *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(rate);
    *at = now;
    if *tokens >= n {
        *tokens -= n;
        true
    } else {
        false
    }
}

/// The store data of one recipe instance.
pub struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) store_limits: StoreLimits,
    /// The session this handle runs on for its whole life.
    pub(crate) live: Arc<Live>,
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) clock: CallClock,
    /// The claim the handle's current acquire makes, when its client named it.
    pub(crate) claim: Option<ClaimTag>,
    /// Paths whose ephemeral node of this session the handle takes as its own when its create
    /// finds it there ([`crate::DynamicHandle::take_up`]): the node an instance of the same
    /// client made through a daemon that is gone. Each is taken up once.
    pub(crate) take_up: Vec<String>,
    /// The record of the component version this handle runs, once it is known.
    pub(crate) version_usage: Option<Arc<crate::stats::Usage>>,
    /// Who the handle's claims are for ([`crate::Contender::identify`]): written as the data of
    /// every ephemeral sequential node it creates with no data of its own (a contender's node).
    pub(crate) identity: Option<Arc<str>>,
    /// While a claim is taken again ([`crate::Claim::requeue`]): its release
    /// (`znode.delete-unwaited`) is held back, to go in one `multi` with the next contention's
    /// create. Cleared once one release is held, or once the claim's release is over.
    pub(crate) folding: bool,
    /// The release held back (its node, and the czxid it was created with): taken by the next
    /// contention's create, else sent before any other request of the handle's
    /// ([`HostState::flush_held_back`], called as each call is counted).
    pub(crate) held_back: std::sync::Mutex<Option<(String, Option<i64>)>>,
}

/// A claim named by its client ([`crate::Contender::name_claim`]): every protected node the
/// acquire makes is `_c_<uuid>-…` with this uuid, the same each time the acquire is sent. With
/// `retry`, a protected create first looks for the node an earlier try made (its session's,
/// under the same prefix) and takes it, so a retried acquire keeps its place in the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimTag {
    pub uuid: uuid::Uuid,
    pub retry: bool,
}

impl ClaimTag {
    /// The tag of claim `name` in client session `session`: the uuid's first 8 bytes are the
    /// session id (so a client session's nodes can be told by name), the rest the first 8
    /// bytes of the name's SHA-256.
    pub fn new(session: u64, name: &str, retry: bool) -> ClaimTag {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(name.as_bytes());
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&session.to_be_bytes());
        bytes[8..].copy_from_slice(&digest[..8]);
        ClaimTag { uuid: uuid::Uuid::from_bytes(bytes), retry }
    }

    /// The start of the protected node names of every claim of client session `session`.
    pub fn session_prefix(session: u64) -> String {
        let hex = format!("{session:016x}");
        format!("_c_{}-{}-{}-", &hex[..8], &hex[8..12], &hex[12..])
    }
}

impl HostState {
    pub(crate) fn new(
        live: Arc<Live>,
        ledger: Arc<Ledger>,
        shared: Arc<Shared>,
        output: crate::output::GuestOutput,
    ) -> HostState {
        let store_limits = shared.limits.store_limits();
        let clock = CallClock::new(shared.limits.cpu_per_call);
        // No preopens, no environment, no stdin: the guest reaches nothing but the clock,
        // randomness and wazoo:zk. What it writes to stdout and stderr goes to the host's log.
        let mut wasi = WasiCtx::builder();
        wasi.stdout(output.stream("stdout")).stderr(output.stream("stderr"));
        HostState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            store_limits,
            live,
            ledger,
            shared,
            clock,
            claim: None,
            take_up: Vec::new(),
            version_usage: None,
            identity: None,
            folding: false,
            held_back: std::sync::Mutex::new(None),
        }
    }

    /// Sends the delete of `path`, a node the ledger set aside as releasing (created with
    /// `czxid`), without waiting for it: zookeeper-client sends a request when its method is
    /// called, so every later request of the session comes after it. A task of the host settles
    /// the reply ([`Ledger::settle`]).
    pub(crate) fn send_unwaited(&self, path: String, czxid: Option<i64>) {
        send_unwaited(self.live.clone(), self.ledger.clone(), self.shared.clone(), path, czxid);
    }

    /// Sends the release held back, if there is one: before any other request of the handle.
    pub(crate) fn flush_held_back(&self) {
        let held = self.held_back.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((path, czxid)) = held {
            self.send_unwaited(path, czxid);
        }
    }

    /// Starts or stops holding releases back ([`HostState::folding`]).
    pub(crate) fn fold(&mut self, fold: Fold) {
        self.folding = fold == Fold::Hold;
        if fold == Fold::Send {
            self.flush_held_back();
        }
    }
}

/// What a handle does with its recipe's unwaited releases while a claim is taken again
/// ([`crate::Claim::requeue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// The next one is held back (the claim's release).
    Hold,
    /// No other is held (the acquire's own releases go at once); the one held stays, for the
    /// contention's create.
    HoldNoMore,
    /// The one held, if the contention did not take it, is sent.
    Send,
}

impl Drop for HostState {
    /// A store dropped with a release held back (its call cancelled) still sends it.
    fn drop(&mut self) {
        let held = self.held_back.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        let Some((path, czxid)) = held else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(_) => self.send_unwaited(path, czxid),
            // No runtime to settle it on: sent all the same; the session's end removes it if
            // the delete is lost.
            Err(_) => drop(self.live.client.delete(&path, None)),
        }
    }
}

/// Sends the delete of `path` on `live`'s session without waiting for it, `ledger` having set it
/// aside as releasing (created with `czxid`), and settles the reply in a task of the host
/// ([`Ledger::settle`]): a lost reply has the node looked at again and deleted if still ours.
pub(crate) fn send_unwaited(
    live: Arc<Live>,
    ledger: Arc<Ledger>,
    shared: Arc<Shared>,
    path: String,
    czxid: Option<i64>,
) {
    let reply = match shared.faults.take_dropped_unwaited_delete() {
        false => Some(live.client.delete(&path, None)),
        true => None,
    };
    let pending = Unsettled::count(shared.clone());
    tokio::spawn(async move {
        let _pending = pending;
        use crate::ledger::Settled;
        use zookeeper_client::Error;
        let result = match reply {
            Some(reply) => reply.await,
            None => Err(Error::ConnectionLoss),
        };
        let lost = matches!(result, Err(Error::ConnectionLoss | Error::Timeout | Error::Custom(_)));
        let settled = ledger.settle(&live.client, &path, czxid, result).await;
        if matches!(settled, Settled::Deleted | Settled::DeletedAgain) {
            shared.usage.znodes.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        if lost && settled != Settled::Unsettled {
            shared.faults.settled_lost(settled == Settled::DeletedAgain);
        }
        if settled == Settled::Unsettled {
            shared.usage.given_up.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        tracing::debug!(%path, ?settled, "unwaited delete settled");
    });
}

/// An unwaited delete not settled yet, counted in the host's usage until dropped (however its
/// task ends), when [`crate::Host::settle_releases`] is told.
struct Unsettled(Arc<Shared>);

impl Unsettled {
    fn count(shared: Arc<Shared>) -> Unsettled {
        shared.usage.unsettled.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Unsettled(shared)
    }
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        self.0.usage.unsettled.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        self.0.usage.settled.notify_waiters();
    }
}

impl Sandboxed for HostState {
    fn store_limits(&mut self) -> &mut StoreLimits {
        &mut self.store_limits
    }

    fn clock(&mut self) -> &mut CallClock {
        &mut self.clock
    }

    fn clock_ref(&self) -> &CallClock {
        &self.clock
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}
