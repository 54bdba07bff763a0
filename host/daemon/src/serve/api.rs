//! The `Sessions` and `Admin` services, and the replies the services share.

use super::state::*;
use super::{Events, MAX_NAME, MIN_TTL};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;
use tonic::{Request, Response, Status, Streaming};

use crate::wire;
use wazoo_runtime::{Claim, Outcome};

use wazoo_proto as pb;

use pb::admin_server::Admin;
use pb::sessions_server::Sessions;

/// The gRPC services, over the shared state.
#[derive(Clone)]
pub(super) struct Api(pub(super) Arc<State>);

impl std::ops::Deref for Api {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

#[tonic::async_trait]
impl Sessions for Api {
    async fn open(&self, request: Request<pb::OpenRequest>) -> Result<Response<pb::OpenReply>, Status> {
        let mut req = request.into_inner();
        let ttl = Duration::from_millis(req.ttl_ms).clamp(MIN_TTL, self.bounds.max_ttl);
        if req.name.len() > MAX_NAME {
            let mut end = MAX_NAME;
            while !req.name.is_char_boundary(end) {
                end -= 1;
            }
            req.name.truncate(end);
        }
        // A name is for logs: one line of printable text.
        req.name = req.name.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
        let Some(counted) = Counted::new(&self.open, self.bounds.sessions) else {
            return Err(wire::exhausted(format!(
                "{} client sessions are open, the most this daemon takes (serve --max-sessions)",
                self.bounds.sessions
            )));
        };
        let id = self.new_session_id();
        // In a group, the client gets a secret to take the session up elsewhere with.
        let secret: Vec<u8> = match &self.group {
            Some(_) => [uuid::Uuid::new_v4().into_bytes(), uuid::Uuid::new_v4().into_bytes()].concat(),
            None => Vec::new(),
        };
        let secret_sha256 = (!secret.is_empty()).then(|| {
            use sha2::Digest as _;
            <[u8; 32]>::from(sha2::Sha256::digest(&secret))
        });
        let session = Arc::new(ClientSession {
            host: self.host.clone(),
            secret: secret_sha256,
            adopted: None,
            counted: Mutex::new(Some(counted)),
            pending: Arc::default(),
            keepers: Mutex::new(0),
            id,
            name: req.name.clone(),
            ttl,
            deadline: Mutex::new(Instant::now() + ttl),
            handles: Mutex::default(),
            closed: watch::channel(false).0,
        });
        {
            // Counted and added under one lock, so that opens at once cannot pass the cap.
            let mut sessions = self.sessions.lock().unwrap();
            let per_tenant = self.bounds.sessions_per_tenant as usize;
            if sessions.len() >= per_tenant {
                return Err(wire::exhausted(format!(
                    "{per_tenant} client sessions are open, the most {} may have (serve --max-sessions-per-tenant)",
                    if self.tenant.is_some() { "a tenant" } else { "this daemon" }
                )));
            }
            sessions.insert(id, session.clone());
        }
        if let Some(group) = &self.group {
            // Recorded before the client hears of it, so any member can take it up.
            if let Err(e) = group.opened(&self.0, &session).await {
                self.end_session(id, "the group's state could not record it").await;
                return Err(e);
            }
        }
        tracing::info!(session = id, name = %req.name, ttl_ms = ttl.as_millis() as u64, "client session opened");
        Ok(Response::new(super::adopt::open_reply(&self.0, &session, secret).await))
    }

    async fn reattach(
        &self,
        request: Request<pb::ReattachRequest>,
    ) -> Result<Response<pb::OpenReply>, Status> {
        let req = request.into_inner();
        let Some(group) = &self.group else {
            return Err(wire::unknown_session(format!(
                "session: {} cannot be taken up: this daemon is in no group (serve --group)",
                req.session
            )));
        };
        let session = group.reattach(&self.0, req.session, &req.secret).await?;
        session.touch();
        tracing::info!(session = req.session, name = %session.name, "client session taken up");
        Ok(Response::new(super::adopt::open_reply(&self.0, &session, Vec::new()).await))
    }

    async fn members(&self, _: Request<pb::Empty>) -> Result<Response<pb::MemberList>, Status> {
        let members = match &self.group {
            Some(group) => group.members().await,
            None => Vec::new(),
        };
        Ok(Response::new(pb::MemberList { members }))
    }

    type KeepAliveStream = Events<pb::KeepAliveReply>;

    async fn keep_alive(
        &self,
        request: Request<Streaming<pb::KeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let mut slot = self.stream_slot()?;
        let state = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut kept = Vec::new();
            let stopping = loop {
                let req = tokio::select! {
                    next = incoming.next() => match next {
                        Some(Ok(req)) => req,
                        _ => break false,
                    },
                    // The daemon or the tenant stopping ends the sessions itself, as such.
                    () = slot.stopped() => break true,
                };
                let Some(state) = state.upgrade() else { break true };
                let ttl = match state.session(req.session) {
                    Ok(s) => {
                        s.touch();
                        if !kept.iter().any(|k: &Arc<ClientSession>| Arc::ptr_eq(k, &s)) {
                            s.kept_by_one_more();
                            kept.push(s.clone());
                        }
                        s.ttl.as_millis() as u64
                    }
                    Err(_) => 0,
                };
                let reply = tx.send(Ok(pb::KeepAliveReply { session: req.session, ttl_ms: ttl })).await;
                // A session that is not open is told so (TTL 0), and the stream ends.
                if reply.is_err() || ttl == 0 {
                    break false;
                }
            };
            // The stream ended: the client is gone (or says it is done), unless another of its
            // streams still keeps the session (a client that reconnects opens the new first).
            if let (Some(state), false) = (state.upgrade(), stopping) {
                for session in kept {
                    if session.kept_by_one_less() {
                        state.expire_session(session.id, "its last keepalive stream ended").await;
                    }
                }
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
impl Admin for Api {
    async fn list_recipes(&self, _: Request<pb::Empty>) -> Result<Response<pb::RecipeList>, Status> {
        let listed = self.host.recipes().map_err(|e| wire::internal(format!("{e:#}")))?;
        Ok(Response::new(recipe_list(listed)))
    }

    async fn reload(&self, _: Request<pb::Empty>) -> Result<Response<pb::RecipeList>, Status> {
        let listed = self.host.reload().await.map_err(|e| wire::internal(format!("{e:#}")))?;
        Ok(Response::new(recipe_list(listed)))
    }

    async fn health(&self, _: Request<pb::Empty>) -> Result<Response<pb::HealthReply>, Status> {
        let (status, zookeeper_session) = zookeeper_status(&self.host).await;
        let (client_sessions, handles) = self.load();
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

pub(super) fn version_of(held: &Claim) -> String {
    held.version().map(|v| v.short_hash().to_string()).unwrap_or_default()
}

pub(super) fn entry(found: Option<wazoo_runtime::Entry>) -> pb::ConfigEntry {
    match found {
        Some(e) => pb::ConfigEntry { exists: true, data: e.data, version: e.version },
        None => pb::ConfigEntry::default(),
    }
}

/// A cache's change as a `WatchEvent`.
pub(super) fn watch_event(change: wazoo_runtime::CacheChange) -> pb::WatchEvent {
    use wazoo_runtime::CacheChange as C;
    let (kind, node) = match change {
        C::Created(node) => (pb::WatchKind::Created, Some(node)),
        C::Changed(node) => (pb::WatchKind::Changed, Some(node)),
        C::Deleted(node) => (pb::WatchKind::Deleted, Some(node)),
        C::Initialized => (pb::WatchKind::Initialized, None),
    };
    match node {
        Some(n) => pb::WatchEvent {
            kind: kind as i32,
            path: n.path,
            data: n.data,
            version: n.stat.version,
            czxid: n.stat.czxid,
            mzxid: n.stat.mzxid,
        },
        None => pb::WatchEvent { kind: kind as i32, ..Default::default() },
    }
}

pub(super) fn membership(m: wazoo_runtime::Membership) -> pb::Membership {
    let members = m.members.into_iter().map(|m| pb::Member { name: m.name, data: m.data }).collect();
    pb::Membership { members, version: m.version }
}

pub(super) fn tx_outcome(outcome: Outcome) -> pb::TxOutcome {
    pb::TxOutcome { committed: matches!(outcome, Outcome::Committed) }
}

pub(super) fn recipe_list(listed: Vec<wazoo_runtime::RecipeInfo>) -> pb::RecipeList {
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
            embedded: r.embedded,
        })
        .collect();
    pb::RecipeList { recipes }
}
