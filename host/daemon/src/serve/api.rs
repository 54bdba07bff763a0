//! The `Sessions` and `Admin` services: client sessions opened, kept alive, closed and taken
//! up again (`Reattach`, through the group's `adopt`), and the recipes and health of the host.

use super::adopt::Adopter;
use super::state::*;
use super::{Events, MAX_NAME, MIN_TTL};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;
use tonic::{Request, Response, Status, Streaming};

use crate::group::Group;
use crate::wire;

use wazoo_proto as pb;

use pb::admin_server::Admin;
use pb::sessions_server::Sessions;

/// The `Sessions` and `Admin` services, over the shared state.
#[derive(Clone)]
pub(super) struct Api {
    pub(super) state: Arc<State>,
    /// The daemon's adopter of other members' sessions, when it is in a group.
    pub(super) adopter: Option<Arc<Adopter>>,
}

impl std::ops::Deref for Api {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

#[tonic::async_trait]
impl Sessions for Api {
    async fn open(&self, request: Request<pb::OpenRequest>) -> Result<Response<pb::OpenReply>, Status> {
        let peer = request.remote_addr();
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
            peer: Mutex::new(peer),
            opened: std::time::SystemTime::now(),
            ttl,
            deadline: Mutex::new(Instant::now() + ttl),
            handles: Mutex::default(),
            waits: Mutex::default(),
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
        // In a group, recorded before the client hears of it, so any member can take it up.
        if let Err(e) = self.record_opened(&session).await {
            self.end_session(id, "the group's state could not record it").await;
            return Err(e);
        }
        tracing::info!(session = id, name = %req.name, ttl_ms = ttl.as_millis() as u64, "client session opened");
        Ok(Response::new(open_reply(&self.state, &session, secret).await))
    }

    async fn reattach(
        &self,
        request: Request<pb::ReattachRequest>,
    ) -> Result<Response<pb::OpenReply>, Status> {
        let peer = request.remote_addr();
        let req = request.into_inner();
        let Some(adopter) = &self.adopter else {
            return Err(wire::unknown_session(format!(
                "session: {} cannot be taken up: this daemon is in no group (serve --group)",
                req.session
            )));
        };
        let session = adopter.reattach(&self.state, req.session, &req.secret).await?;
        session.touch();
        if peer.is_some() {
            *session.peer.lock().unwrap() = peer;
        }
        tracing::info!(session = req.session, name = %session.name, "client session taken up");
        Ok(Response::new(open_reply(&self.state, &session, Vec::new()).await))
    }

    async fn members(&self, _: Request<pb::Empty>) -> Result<Response<pb::MemberList>, Status> {
        Ok(Response::new(pb::MemberList { members: members(&self.group).await }))
    }

    type KeepAliveStream = Events<pb::KeepAliveReply>;

    async fn keep_alive(
        &self,
        request: Request<Streaming<pb::KeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let mut slot = self.stream_slot()?;
        let state = Arc::downgrade(&self.state);
        tokio::spawn(async move {
            // The sessions this stream keeps (one, or all of a client connection's).
            let mut kept: HashMap<u64, Arc<ClientSession>> = HashMap::new();
            // A session let go of ends apart: ending it (its claims closed, in a group a look at
            // ZooKeeper first) holds up no other session's keepalives.
            let end = |state: &Arc<State>, session: Arc<ClientSession>, why: &'static str| {
                if session.kept_by_one_less() {
                    let state = state.clone();
                    tokio::spawn(async move { state.expire_session(session.id, why).await });
                }
            };
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
                if req.end {
                    // The client lets this one session go, as the stream's end would.
                    if let Some(session) = kept.remove(&req.session) {
                        end(&state, session, "its client let it go");
                    }
                    continue;
                }
                let ttl = match state.session(req.session) {
                    Ok(s) => {
                        s.touch();
                        // Counted once per stream; a session of the same id made anew since
                        // (ended and opened again here) is counted afresh.
                        if !kept.get(&req.session).is_some_and(|k| Arc::ptr_eq(k, &s)) {
                            s.kept_by_one_more();
                            kept.insert(req.session, s.clone());
                        }
                        s.ttl.as_millis() as u64
                    }
                    Err(_) => {
                        kept.remove(&req.session);
                        0
                    }
                };
                // A session that is not open is told so (TTL 0); the stream goes on for the
                // others, and its client ends it.
                if tx.send(Ok(pb::KeepAliveReply { session: req.session, ttl_ms: ttl })).await.is_err() {
                    break false;
                }
            };
            // The stream ended: the client is gone (or says it is done), unless another of its
            // streams still keeps the session (a client that reconnects opens the new first).
            if let (Some(state), false) = (state.upgrade(), stopping) {
                for (_, session) in kept {
                    end(&state, session, "its last keepalive stream ended");
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
        Ok(Response::new(wire::recipe_list(listed)))
    }

    async fn reload(&self, _: Request<pb::Empty>) -> Result<Response<pb::RecipeList>, Status> {
        let listed = self.host.reload().await.map_err(|e| wire::internal(format!("{e:#}")))?;
        Ok(Response::new(wire::recipe_list(listed)))
    }

    async fn publish(
        &self,
        request: Request<pb::PublishRequest>,
    ) -> Result<Response<pb::PublishReply>, Status> {
        super::published::publish(&self.state, request.into_inner()).await.map(Response::new)
    }

    async fn rollout(
        &self,
        request: Request<pb::RolloutRequest>,
    ) -> Result<Response<pb::RolloutReply>, Status> {
        super::published::rollout(&self.state, &request.into_inner().name).await.map(Response::new)
    }

    async fn rollback(
        &self,
        request: Request<pb::RollbackRequest>,
    ) -> Result<Response<pb::PublishReply>, Status> {
        super::published::rollback(&self.state, request.into_inner()).await.map(Response::new)
    }

    async fn health(&self, _: Request<pb::Empty>) -> Result<Response<pb::HealthReply>, Status> {
        let (status, zookeeper_session) = zookeeper_status(&self.host).await;
        Ok(Response::new(wire::health_reply(
            status,
            zookeeper_session,
            self.load(),
            self.host.registry().stats(),
        )))
    }

    async fn list_sessions(&self, _: Request<pb::Empty>) -> Result<Response<pb::SessionList>, Status> {
        self.state.measured("ListSessions", "", async { Ok(super::listing::sessions(&self.state)) }).await
    }

    async fn list_claims(
        &self,
        request: Request<pb::ListClaimsRequest>,
    ) -> Result<Response<pb::ClaimList>, Status> {
        let prefix = request.into_inner().prefix;
        self.state.measured("ListClaims", "", super::listing::claims(&self.state, &prefix)).await
    }
}

/// The group's members' addresses (none outside a group, or when they cannot be read).
async fn members(group: &Option<Arc<Group>>) -> Vec<String> {
    match group {
        Some(group) => {
            group.members().await.map(|m| m.into_iter().map(|(_, a)| a).collect()).unwrap_or_default()
        }
        None => Vec::new(),
    }
}

/// The reply to an Open or a Reattach of `session`.
async fn open_reply(state: &State, session: &ClientSession, secret: Vec<u8>) -> pb::OpenReply {
    let zookeeper_timeout_ms = match session.host.live().await {
        Ok(live) => live.session_timeout().as_millis() as u64,
        Err(_) => 0,
    };
    pb::OpenReply {
        session: session.id,
        ttl_ms: session.ttl.as_millis() as u64,
        secret,
        zookeeper_timeout_ms,
        members: members(&state.group).await,
        shared_keepalive: true,
    }
}
