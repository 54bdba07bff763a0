//! What the daemon keeps: the client sessions and their claims, the ZooKeeper sessions adopted
//! from another member of the group that some of them live on (`Adopted`), their records in
//! the group, and the tasks that tend them (the reaper of expired sessions, the plugins
//! watcher); and how a host's ZooKeeper session stands (`zookeeper_status`).

use super::REAP_EVERY;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tonic::{Response, Status};

use crate::group::{hex, ClientRecord, Group, SessionRecord};
use crate::metrics::{Check, Metrics, Sample, Source};
use crate::wire;
use wazoo_runtime::{Claim, ClaimKind, ClaimTag, Host};

use wazoo_proto as pb;

pub(crate) struct State {
    pub(super) host: Host,
    /// The tenant this state serves, in a multi-tenant daemon.
    pub(super) tenant: Option<String>,
    pub(super) sessions: Mutex<HashMap<u64, Arc<ClientSession>>>,
    /// Session and handle ids (one sequence; never reused).
    pub(super) next: AtomicU64,
    pub(super) metrics: Arc<Metrics>,
    /// What a client can grow.
    pub(super) bounds: super::Bounds,
    /// Client sessions open over every tenant of the daemon.
    pub(super) open: Arc<AtomicU64>,
    /// Streams open for this state's clients (keepalives, Lost, watches).
    pub(super) streams: Arc<AtomicU64>,
    /// Set when this state stops serving (its tenant removed or replaced, the daemon stopping):
    /// every stream of its clients ends.
    pub(super) stopped: watch::Sender<bool>,
    /// The daemon's group, when it is in one: where its client sessions are recorded (taking
    /// up another member's is `adopt`'s).
    pub(super) group: Option<Arc<Group>>,
    /// The host's follower of the recipe registry in ZooKeeper, unless it follows none.
    pub(super) rollout: Option<Arc<wazoo_runtime::rollout::Follower>>,
    /// What the state's clients may publish.
    pub(super) publishing: crate::publishing::Publishing,
    /// Its acquisitions and waits over the last minutes, for the web console's chart.
    pub(super) pulse: crate::console::Pulse,
}

/// One stream counted in [`State::streams`] while it lives, told when its state stops.
pub(super) struct StreamSlot {
    _counted: Counted,
    stopped: watch::Receiver<bool>,
}

impl StreamSlot {
    /// Resolves once the state this stream serves stops serving.
    pub(super) async fn stopped(&mut self) {
        let _ = self.stopped.wait_for(|s| *s).await;
    }
}

/// One client session counted in [`State::open`] while it lives.
pub(super) struct Counted(Arc<AtomicU64>);

impl Counted {
    /// Counts one more session, unless `limit` are open already.
    pub(super) fn new(open: &Arc<AtomicU64>, limit: u32) -> Option<Counted> {
        let before = open.fetch_add(1, Ordering::Relaxed);
        if before >= u64::from(limit) {
            open.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Counted(open.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a lock, read/write lock or lease taken by Acquire keeps its recipe instance before it
/// is held as data: a claim let go of sooner gives its handle back warm, for the next acquire.
pub(super) const AS_DATA_AFTER: Duration = Duration::from_secs(1);

pub(super) struct Entry {
    /// What the client holds (`wazoo_runtime::Claim`); taken when it ends.
    pub(super) held: tokio::sync::Mutex<Option<Claim>>,
    /// Set, with how, when the handle ends here: given up on purpose by a call (a Lost stream
    /// then ends quietly), or with its client session (the streams that follow it are told).
    pub(super) ended: watch::Sender<Option<Ended>>,
    /// The claim in the metrics while it is held: ended when the entry goes, or taken by the
    /// first stream that sees the claim lost ([`Entry::lost`]).
    meter: Mutex<Option<crate::metrics::Held>>,
    /// What the claim is, for the listings (`ListSessions`): its kind, node, token, and since
    /// when it is held here.
    pub(super) shown: Shown,
    /// Set while the claim may still be held as data ([`Entry::to_data`]): a lock, read/write
    /// lock or lease taken by Acquire.
    as_data: std::sync::atomic::AtomicBool,
}

/// A kept claim as the listings show it.
pub(crate) struct Shown {
    pub(crate) kind: ClaimKind,
    pub(crate) node: String,
    pub(crate) token: i64,
    pub(crate) since: std::time::SystemTime,
}

impl Entry {
    fn new(held: Claim, meter: Option<crate::metrics::Held>) -> Entry {
        let shown = Shown {
            kind: held.kind(),
            node: held.node().to_string(),
            token: held.token(),
            since: std::time::SystemTime::now(),
        };
        let (held, meter) = (tokio::sync::Mutex::new(Some(held)), Mutex::new(meter));
        let as_data = std::sync::atomic::AtomicBool::new(false);
        Entry { held, ended: watch::channel(None).0, meter, shown, as_data }
    }

    /// Holds the claim as data from now on, its recipe instance given back
    /// ([`Claim::into_data`]), if it is one that may be and is not yet. The flag goes down only
    /// once that is done, so [`State::make_room`] waits for a conversion under way too; run on
    /// a task of its own (never cancelled half-way, the claim taken out of its slot).
    async fn to_data(self: Arc<Self>) {
        let mut slot = self.held.lock().await;
        if !self.as_data.load(Ordering::Acquire) {
            return;
        }
        if let Some(held) = slot.take() {
            *slot = Some(held.into_data().await);
        }
        self.as_data.store(false, Ordering::Release);
    }

    /// The claim was lost for `reason` (`crate::metrics::loss_reason`): counted once, however
    /// many streams follow it.
    pub(super) fn lost(&self, reason: &str) {
        if let Some(meter) = self.meter.lock().unwrap().take() {
            meter.lost(reason);
        }
    }

    /// Resolves, with how, once the handle has ended here.
    pub(super) fn ending(&self) -> impl std::future::Future<Output = Ended> + Send + 'static {
        let mut ended = self.ended.subscribe();
        async move {
            match ended.wait_for(Option::is_some).await {
                Ok(how) => how.unwrap_or(Ended::Stopping),
                // The entry is gone without a word: its state was dropped.
                Err(_) => Ended::Stopping,
            }
        }
    }
}

/// A claim that ends with its client session, or with its tenant or the daemon, counts as lost
/// for that reason, whether or not a stream followed it.
impl Drop for Entry {
    fn drop(&mut self) {
        let reason = match *self.ended.borrow() {
            Some(Ended::SessionEnded) => "client-session-ended",
            Some(Ended::Stopping) => "session-closed",
            Some(Ended::Released) | None => return,
        };
        self.lost(reason);
    }
}

/// How a kept handle ended in the daemon (not by losing its claim in ZooKeeper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// Let go by a call of its client: Release (or a Hold stream's release), QueueAck, a leave.
    Released,
    /// Its client session ended: closed by the client, or its TTL passed without a keepalive.
    SessionEnded,
    /// The daemon or the handle's tenant is stopping: its ZooKeeper session closes.
    Stopping,
}

impl Ended {
    /// The loss a stream that follows the claim reports, if this is one (a release on purpose
    /// is not).
    pub(super) fn loss(self) -> Option<pb::LossReason> {
        match self {
            Ended::Released => None,
            Ended::SessionEnded => Some(pb::LossReason::ClientSessionEnded),
            Ended::Stopping => Some(pb::LossReason::SessionClosed),
        }
    }
}

pub(super) struct ClientSession {
    pub(super) id: u64,
    pub(super) name: String,
    /// The address its client opened it from (none for a session taken up from another member
    /// of the group: its client has not called here yet).
    pub(super) peer: Mutex<Option<std::net::SocketAddr>>,
    /// When it was opened (on the member that opened it).
    pub(super) opened: std::time::SystemTime,
    pub(super) ttl: Duration,
    pub(super) deadline: Mutex<Instant>,
    pub(super) handles: Mutex<HashMap<u64, Arc<Entry>>>,
    /// The claims its calls wait for in a queue now, by a number of their own, for the listings
    /// ([`ClientSession::waiting`]).
    pub(super) waits: Mutex<HashMap<u64, Wait>>,
    pub(super) closed: watch::Sender<bool>,
    /// Its place among the daemon's open sessions, given back when the session ends.
    pub(super) counted: Mutex<Option<Counted>>,
    /// Handles being made for it (a call in flight that may keep one), counted against
    /// [`super::Bounds::handles_per_session`] with those it holds.
    pub(super) pending: Arc<AtomicU64>,
    /// The KeepAlive streams that have named it and are still open: the session ends with the
    /// last of them (or its TTL), so a client may open a new stream before it lets the old go.
    pub(super) keepers: Mutex<u32>,
    /// The host its claims are made on: its state's, or the one running the ZooKeeper session
    /// it was adopted with.
    pub(super) host: Host,
    /// SHA-256 of the secret its client presents to take it up again (in a group).
    pub(super) secret: Option<[u8; 32]>,
    /// The adopted ZooKeeper session it lives on, when another member of the group opened it.
    pub(super) adopted: Option<Arc<Adopted>>,
}

/// A ZooKeeper session adopted from another member, and how many of its client sessions live.
pub(super) struct Adopted {
    pub(super) host: Host,
    pub(super) record: SessionRecord,
    pub(super) clients: AtomicUsize,
}

impl Adopted {
    /// A client session of it ended: what that client still held under its name goes now (its
    /// claims' nodes carry the client session in their names); with the last client, the
    /// adopted ZooKeeper session is closed, which deletes whatever else is left of it.
    pub(super) async fn client_ended(&self, session: u64) {
        if let Ok(live) = self.host.live().await {
            let prefix = ClaimTag::session_prefix(session);
            let zk = live.zk();
            if let Ok(nodes) = zk.ephemerals("/").await {
                for node in nodes
                    .iter()
                    .filter(|n| n.rsplit('/').next().is_some_and(|name| name.starts_with(&prefix)))
                {
                    let _ = zk.delete(node, None).await;
                }
            }
        }
        // With the last client, the adopted ZooKeeper session closes as its host is dropped.
        if self.clients.fetch_sub(1, Ordering::AcqRel) == 1 {
            tracing::info!(
                session = format!("{:#x}", self.record.id),
                "adopted ZooKeeper session has no client left: closing it"
            );
        }
    }
}

/// A claim a client session's call waits for (`ListSessions` shows it as waiting).
pub(crate) struct Wait {
    pub(crate) path: String,
    /// As `SessionClaim.family` names it: `lock`, `read-lock`, `write-lock`, `semaphore`, …
    pub(crate) family: String,
    pub(crate) since: std::time::SystemTime,
}

/// A wait listed in its session until dropped.
pub(super) struct Waiting<'a> {
    session: &'a ClientSession,
    number: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.session.waits.lock().unwrap().remove(&self.number);
    }
}

impl ClientSession {
    /// Lists, until the returned guard is dropped, that a call of this session waits for the
    /// `family` claim at `path` (a call that acquires holds it: drop the guard once it is kept).
    pub(super) fn waiting(&self, path: &str, family: &str) -> Waiting<'_> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        let wait =
            Wait { path: path.to_string(), family: family.to_string(), since: std::time::SystemTime::now() };
        self.waits.lock().unwrap().insert(number, wait);
        Waiting { session: self, number }
    }

    pub(super) fn alive(&self) -> bool {
        !*self.closed.borrow()
    }

    pub(super) fn touch(&self) {
        *self.deadline.lock().unwrap() = Instant::now() + self.ttl;
    }

    /// Closes every handle (deleting their nodes), telling the streams that follow them `how`
    /// they ended; later calls find the session gone. Its calls still in flight (an Acquire
    /// waiting in a lock's queue, a call on a kept instance) are cancelled first, through
    /// [`ClientSession::while_open`], which deletes what they made.
    pub(super) async fn close(&self, how: Ended) {
        self.closed.send_replace(true);
        self.counted.lock().unwrap().take();
        let entries: Vec<_> = self.handles.lock().unwrap().drain().map(|(_, e)| e).collect();
        // Every stream is told how before the first wait (a handle let go on purpose just
        // before keeps that word).
        for entry in &entries {
            entry.ended.send_if_modified(|e| e.is_none() && e.insert(how) == &how);
        }
        for entry in entries {
            if let Some(held) = entry.held.lock().await.take() {
                held.close().await;
            }
        }
        if let Some(adopted) = &self.adopted {
            adopted.client_ended(self.id).await;
        }
    }

    /// [`ClientSession::close`] on a task of its own, awaited: a caller that gives up waiting
    /// (a Close whose deadline passed) does not leave the session half closed.
    pub(super) async fn end(self: Arc<Self>, how: Ended) {
        let _ = tokio::spawn(async move { self.close(how).await }).await;
    }

    /// Runs `call` while the session is open: once it ends (closed, its TTL passed, its
    /// tenant or the daemon stopping), `call` is dropped, which cancels the recipe call in it
    /// (its handle retired, what it made deleted when the handle closes), and the result is
    /// UNKNOWN_SESSION. So no call of a client session that ended waits on as a ghost.
    pub(super) async fn while_open<T>(
        &self,
        call: impl std::future::Future<Output = T>,
    ) -> Result<T, Status> {
        let mut closed = self.closed.subscribe();
        tokio::select! {
            // A call that is done counts as done, whatever happened to the session meanwhile.
            biased;
            done = call => Ok(done),
            _ = closed.wait_for(|c| *c) => {
                Err(wire::unknown_session(format!("session: {} ended while the call waited", self.id)))
            }
        }
    }

    /// Counts one more KeepAlive stream naming this session.
    pub(super) fn kept_by_one_more(&self) {
        *self.keepers.lock().unwrap() += 1;
    }

    /// Counts one KeepAlive stream naming this session less: whether it was the last.
    pub(super) fn kept_by_one_less(&self) -> bool {
        let mut keepers = self.keepers.lock().unwrap();
        *keepers = keepers.saturating_sub(1);
        *keepers == 0
    }
}

impl State {
    pub(super) fn session(&self, id: u64) -> Result<Arc<ClientSession>, Status> {
        match self.sessions.lock().unwrap().get(&id) {
            Some(s) if s.alive() => Ok(s.clone()),
            _ => Err(wire::unknown_session(format!("session: {id} is not open (expired or closed)"))),
        }
    }

    pub(super) async fn end_session(&self, id: u64, why: &str) {
        let session = self.sessions.lock().unwrap().remove(&id);
        if let Some(session) = session {
            tracing::info!(session = id, name = %session.name, "client session ended: {why}");
            session.end(Ended::SessionEnded).await;
            if let Some(group) = &self.group {
                // Forgotten in the background.
                let group = group.clone();
                tokio::spawn(async move { group.forget_client(id, &group.me).await });
            }
        }
    }

    /// Records a client session opened here in the group, if the daemon is in one, so that
    /// any member can take it up.
    pub(super) async fn record_opened(&self, session: &ClientSession) -> Result<(), Status> {
        let Some(group) = &self.group else { return Ok(()) };
        let zookeeper_session = match session.host.live().await {
            Ok(live) => live.session_parts().0,
            Err(e) => return Err(wire::no_zookeeper(e)),
        };
        let record = ClientRecord {
            zookeeper_session,
            member: group.me.clone(),
            tenant: self.tenant.clone(),
            ttl_ms: session.ttl.as_millis() as u64,
            name: session.name.clone(),
            secret: hex(&session.secret.unwrap_or_default()),
        };
        group.record_client(session.id, &record).await.map_err(wire::no_zookeeper)
    }

    /// Ends a session its client did not close (its keepalives stopped). In a group, only while
    /// this member still serves it: a member that was frozen or cut off while its clients went
    /// to another finds itself adopted here and stops, and one that hands over leaves the
    /// sessions to the members taking them up.
    pub(super) async fn expire_session(&self, id: u64, why: &str) {
        if let Some(group) = &self.group {
            if !group.may_end_sessions().await {
                return;
            }
        }
        self.end_session(id, why).await;
    }

    /// A fresh client session id: random, so that one client cannot guess (and end, or use)
    /// another's, and never 0 (which the wire reads as "no session").
    pub(super) fn new_session_id(&self) -> u64 {
        let sessions = self.sessions.lock().unwrap();
        loop {
            let id = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap());
            if id != 0 && !sessions.contains_key(&id) {
                return id;
            }
        }
    }

    /// Adds a claim to `session`: its handle id. A session that closed meanwhile gets the
    /// claim closed at once.
    pub(super) async fn keep(&self, session: &ClientSession, held: Claim) -> Result<u64, Status> {
        // A call that reserved its place before making the claim holds one of `pending`: its
        // own place is counted there, not against it.
        let held_now = session.handles.lock().unwrap().len() as u64;
        if held_now >= u64::from(self.bounds.handles_per_session) {
            held.close().await;
            return Err(wire::exhausted(format!(
                "session: {} holds {held_now} handles, the most one session may (serve --max-handles)",
                session.id
            )));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let meter = self.metrics.held(self.tenant.as_deref(), held.kind());
        let entry = Arc::new(Entry::new(held, meter));
        session.handles.lock().unwrap().insert(id, entry.clone());
        if !session.alive() {
            session.handles.lock().unwrap().remove(&id);
            if let Some(held) = entry.held.lock().await.take() {
                held.close().await;
            }
            return Err(wire::unknown_session(format!("session: {} closed while acquiring", session.id)));
        }
        Ok(id)
    }

    /// As [`State::keep`], for a claim that is held as data once it has been held for
    /// [`AS_DATA_AFTER`], or at once when a new claim finds no instance left
    /// ([`State::make_room`]).
    pub(super) async fn keep_as_data(&self, session: &ClientSession, held: Claim) -> Result<u64, Status> {
        let handle = self.keep(session, held).await?;
        if let Some(entry) = session.handles.lock().unwrap().get(&handle) {
            entry.as_data.store(true, Ordering::Release);
            let entry = Arc::downgrade(entry);
            tokio::spawn(async move {
                tokio::time::sleep(AS_DATA_AFTER).await;
                if let Some(entry) = entry.upgrade() {
                    entry.to_data().await;
                }
            });
        }
        Ok(handle)
    }

    /// Gives back the instances of every claim that may be held as data and is not yet (those
    /// being converted included), and returns once they are given back: for a new claim that
    /// found none left. Whether any was.
    pub(super) async fn make_room(&self) -> bool {
        let pending: Vec<Arc<Entry>> = {
            let sessions = self.sessions.lock().unwrap();
            sessions
                .values()
                .flat_map(|s| s.handles.lock().unwrap().values().cloned().collect::<Vec<_>>())
                .filter(|e| e.as_data.load(Ordering::Acquire))
                .collect()
        };
        let any = !pending.is_empty();
        // On tasks of their own: a caller that gives up does not stop one half-way.
        let converting: Vec<_> = pending.into_iter().map(|entry| tokio::spawn(entry.to_data())).collect();
        for conversion in converting {
            let _ = conversion.await;
        }
        any
    }

    /// A place for one more handle in `session`, held until the returned reservation is
    /// dropped (by then the handle is kept, or the call failed): RESOURCE_EXHAUSTED if the
    /// handles it holds and those being made reach [`super::Bounds::handles_per_session`].
    pub(super) fn room_for_handle(&self, session: &ClientSession) -> Result<Counted, Status> {
        self.room_for_handles(session, 0)
    }

    /// A place for the handle that replaces one of `session`'s (a `Hold` stream's requeue),
    /// taken while the old one is still kept: the old one counts as gone.
    pub(super) fn room_replacing_handle(&self, session: &ClientSession) -> Result<Counted, Status> {
        self.room_for_handles(session, 1)
    }

    fn room_for_handles(&self, session: &ClientSession, leaving: u64) -> Result<Counted, Status> {
        let held = (session.handles.lock().unwrap().len() as u64).saturating_sub(leaving);
        let limit = u64::from(self.bounds.handles_per_session);
        let room = limit.saturating_sub(held).min(u64::from(u32::MAX)) as u32;
        Counted::new(&session.pending, room).ok_or_else(|| {
            wire::exhausted(format!(
                "session: {} holds or is making {limit} handles, the most one session may (serve --max-handles)",
                session.id
            ))
        })
    }

    /// A place for one more stream of this state's clients: RESOURCE_EXHAUSTED past
    /// [`super::Bounds::streams`].
    pub(super) fn stream_slot(&self) -> Result<StreamSlot, Status> {
        let counted = Counted::new(&self.streams, self.bounds.streams).ok_or_else(|| {
            wire::exhausted(format!(
                "{} streams are open, the most {} may have (serve --max-streams)",
                self.bounds.streams,
                if self.tenant.is_some() { "a tenant" } else { "this daemon" }
            ))
        })?;
        Ok(StreamSlot { _counted: counted, stopped: self.stopped.subscribe() })
    }

    pub(super) fn entry(
        &self,
        session: u64,
        handle: u64,
    ) -> Result<(Arc<ClientSession>, Arc<Entry>), Status> {
        let s = self.session(session)?;
        let e = s.handles.lock().unwrap().get(&handle).cloned();
        match e {
            Some(e) => Ok((s, e)),
            None => Err(wire::unknown_handle(format!("handle: {handle} is not held by session {session}"))),
        }
    }

    /// Takes `handle` out of `session` if its claim is of `kind`: the claim, to be ended by the
    /// caller. A handle of another kind stays held (FAILED_PRECONDITION, message `handle:`).
    pub(super) async fn take_held(
        &self,
        session: u64,
        handle: u64,
        kind: ClaimKind,
    ) -> Result<Claim, Status> {
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
        entry.ended.send_replace(Some(Ended::Released));
        let held = slot.take();
        drop(slot);
        held.ok_or_else(|| wire::unknown_handle(format!("handle: {handle} was released")))
    }

    /// Client sessions open, and the handles they hold.
    pub(super) fn load(&self) -> (u64, u64) {
        let sessions = self.sessions.lock().unwrap();
        let handles: usize = sessions.values().map(|s| s.handles.lock().unwrap().len()).sum();
        (sessions.len() as u64, handles as u64)
    }

    /// The host's ZooKeeper session, for calls that run on it without a recipe.
    pub(super) async fn live(&self) -> Result<Arc<wazoo_runtime::Live>, Status> {
        self.host.live().await.map_err(wire::no_zookeeper)
    }

    /// Runs `f`, recording the call's outcome and latency.
    pub(super) async fn measured<T>(
        &self,
        method: &str,
        recipe: &str,
        f: impl std::future::Future<Output = Result<T, Status>>,
    ) -> Result<Response<T>, Status> {
        let started = Instant::now();
        // A claim's wait in its queue is no part of the call's service time.
        let (outcome, spent) = crate::metrics::spending(f).await;
        let code = crate::metrics::outcome(outcome.as_ref().err(), spent);
        // A recipe name is a label only once a component of that name was loaded (its file is
        // in the plugins directory); any other name a client sends is counted as `other`, so
        // no client can grow the metrics without end.
        // A call on a handle (Release, Acknowledge, …) names none: its recipe is "".
        let known = recipe.is_empty() || self.host.registry().knows(recipe);
        let recipe = if known { recipe } else { "other" };
        let service = started.elapsed().saturating_sub(spent.waited);
        self.metrics.call(self.tenant.as_deref(), method, recipe, &code, service);
        self.pulse.record(method, outcome.is_ok(), started.elapsed());
        outcome.map(Response::new)
    }
}

/// The health status while the ZooKeeper session is up.
pub(super) const SERVING: &str = "serving";

/// How the ZooKeeper session of `host` stands, for `Admin.Health` and `GET /healthz` alike:
/// [`SERVING`] or why not (one line), and the session id (0 without a session). A session that
/// ended is rebuilt first, as for any call.
pub(super) async fn zookeeper_status(host: &wazoo_runtime::Host) -> (String, i64) {
    match host.live().await {
        Ok(live) => match live.ended() {
            None => (SERVING.to_string(), live.session_id()),
            Some(state) => (format!("ZooKeeper session ended ({state:?})"), live.session_id()),
        },
        Err(e) => (format!("no ZooKeeper session: {e:#}").replace('\n', " "), 0),
    }
}

/// Ends client sessions whose TTL passed without a keepalive.
pub(super) async fn reaper(state: Arc<State>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
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
            state.expire_session(id, "no keepalive within its TTL").await;
        }
    }
}

/// Watches the plugins directory (inotify, through `notify`) and looks at it once changes have
/// settled for [`SETTLE`], so a file still being written is not taken for a broken one; it also
/// looks every `every` whatever happens, in case an event was missed (or watching failed).
/// Counts swaps and refusals per recipe.
pub(super) async fn watcher(state: Arc<State>, mut seen: HashMap<String, (String, String)>, every: Duration) {
    // The host is in the metrics while it is watched: a tenant that stops drops out.
    let _listed = state.metrics.listing(&state);
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
pub(super) const SETTLE: Duration = Duration::from_millis(50);

/// One look at the plugins directory: `seen` maps each recipe to (serving version, refusal).
pub(super) async fn watch_plugins(state: &Arc<State>, seen: &mut HashMap<String, (String, String)>) {
    state.metrics.list(state);
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
                state.metrics.swapped(state.tenant.as_deref(), &r.name);
            }
            if !refused.is_empty() && *before_refused != refused {
                state.metrics.refused(state.tenant.as_deref(), &r.name);
            }
        } else if !refused.is_empty() {
            state.metrics.refused(state.tenant.as_deref(), &r.name);
        }
        state.metrics.recipe(state.tenant.as_deref(), &r.name);
        seen.insert(r.name.clone(), (version, refused));
    }
}

/// What the metrics and `/healthz` read of a served host.
impl Source for State {
    fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    fn sample(&self) -> Sample {
        let (client_sessions, live_handles) = self.load();
        let (registry, host) = (self.host.registry().stats(), self.host.stats());
        Sample {
            client_sessions,
            live_handles,
            warm_handles: self.host.warm_handles() as u64,
            instances: self.host.instances() as u64,
            compiles: registry.compiles.load(Ordering::Relaxed),
            cache_hits: registry.cache_hits.load(Ordering::Relaxed),
            limit_hits: host.limit_hits.load(Ordering::Relaxed),
            traps: host.traps.load(Ordering::Relaxed),
        }
    }

    fn zookeeper(&self) -> Check<'_> {
        Box::pin(async {
            match zookeeper_status(&self.host).await {
                (status, _) if status == SERVING => Ok(()),
                (status, _) => Err(status),
            }
        })
    }
}
