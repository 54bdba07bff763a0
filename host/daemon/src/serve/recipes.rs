//! The `Recipes` service: every recipe family's calls, each on a fresh or a kept handle.

use super::state::{Ended, StreamSlot};
use super::{millis, or, Events, STREAM_POLL};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::wire::{self, no_handle, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::fence::{Holder, Written};
use wazoo_runtime::{Claim, ClaimKind, CounterFormat, ElectionHandle, Mode, Want, Watching, World, ZkError};

use wazoo_proto as pb;

use pb::recipes_server::Recipes;

use super::api::*;

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
    ($state:expr, $h:ident = $open:expr, first: $first:expr, key: $key:expr, event: $event:expr,
     next: |$known:ident| $next:expr) => {{
        let mut slot = $state.stream_slot()?;
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
                let next = tokio::select! {
                    next = $next => next,
                    () = slot.stopped() => break,
                };
                match next {
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

#[tonic::async_trait]
impl Recipes for Api {
    async fn acquire(&self, request: Request<pb::AcquireRequest>) -> Result<Response<pb::Claim>, Status> {
        let req = request.into_inner();
        let want = want_of(&req)?;
        let recipe = or(&req.recipe, want.world().default_recipe()).to_string();
        self.measured("Acquire", &recipe, async {
            let session = self.session(req.session)?;
            let named = claim_tag(req.session, &req.claim_id, req.retry)?;
            self.claim(&session, want, &recipe, &req.path, millis(req.timeout_ms), named).await
        })
        .await
    }

    async fn release(&self, request: Request<pb::HandleRef>) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        self.measured("Release", "", self.release_handle(req.session, req.handle)).await
    }

    type HoldStream = Events<pb::HoldEvent>;

    async fn hold(
        &self,
        request: Request<Streaming<pb::HoldRequest>>,
    ) -> Result<Response<Self::HoldStream>, Status> {
        let steps = request.into_inner();
        let slot = self.stream_slot()?;
        let (tx, rx) = mpsc::channel(2);
        tokio::spawn(Api(self.0.clone()).holding(steps, slot, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type LostStream = Events<pb::LostEvent>;

    async fn lost(&self, request: Request<pb::HandleRef>) -> Result<Response<Self::LostStream>, Status> {
        let req = request.into_inner();
        let (_, entry) = self.entry(req.session, req.handle)?;
        let lost = match entry.held.lock().await.as_ref() {
            Some(held) => held.lost(),
            None => return Err(wire::unknown_handle(format!("handle: {} was released", req.handle))),
        };
        let ended = entry.ended.subscribe();
        let ending = entry.ending();
        let mut slot = self.stream_slot()?;
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let event = tokio::select! {
                // What happened to the claim itself goes first when several are ready.
                biased;
                // A handle ended in the daemon deletes its node too: the loss is told as that
                // end, and a claim given up on purpose (a Release) is no loss at all.
                why = lost => match *ended.borrow() {
                    Some(how) => how.loss().and_then(wire::ended_event),
                    None => Some(wire::lost_event(&why)),
                },
                how = ending => how.loss().and_then(wire::ended_event),
                // The daemon or the tenant stopping closes the claim's ZooKeeper session (a
                // claim released just before is still no loss).
                () = slot.stopped() => match *ended.borrow() {
                    Some(how) => how.loss().and_then(wire::ended_event),
                    None => wire::ended_event(pb::LossReason::SessionClosed),
                },
                _ = tx.closed() => None,
            };
            if let Some(event) = event {
                let _ = tx.send(Ok(event)).await;
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
            let named = claim_tag(req.session, &req.claim_id, req.retry)?;
            self.claim(&session, want, &recipe, &req.path, millis(req.timeout_ms), named).await
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
            self,
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
            let _reserved = session.as_ref().map(|s| self.room_for_handle(s)).transpose()?;
            // An ephemeral item is its client session's: on that session's ZooKeeper session.
            let host = session.as_ref().map_or(&self.host, |s| &s.host);
            let mut h = host.queue(&recipe).await.map_err(no_handle)?;
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

    async fn config_delete(
        &self,
        request: Request<pb::ConfigDeleteRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        self.measured("ConfigDelete", "config", async {
            wazoo_runtime::paths::check_node(&req.path)
                .map_err(|why| status(RecipeError::Zk(ZkError::InvalidPath(why))))?;
            let live = self.live().await?;
            let zk = |e: zookeeper_client::Error| match e {
                zookeeper_client::Error::NoNode => status(RecipeError::Zk(ZkError::NoNode)),
                zookeeper_client::Error::BadVersion => status(RecipeError::Zk(ZkError::BadVersion)),
                zookeeper_client::Error::NotEmpty => status(RecipeError::Zk(ZkError::NotEmpty)),
                e => wire::no_zookeeper(anyhow::anyhow!("deleting {}: {e}", req.path)),
            };
            // The WIT config interface has no delete: done here, on this tenant's own session.
            let stat = live.client.check_stat(&req.path).await.map_err(zk)?;
            if let Some(owner) = stat.map(|s| s.ephemeral_owner).filter(|o| *o != 0) {
                return Err(wire::invalid_argument(format!(
                    "invalid-argument: {} is an ephemeral node of session 0x{owner:x}: someone's claim, \
                     registration or membership, not a value",
                    req.path
                )));
            }
            live.client.delete(&req.path, req.version).await.map_err(zk)?;
            Ok(pb::Empty {})
        })
        .await
    }

    type ConfigWatchStream = Events<pb::ConfigEntry>;

    async fn config_watch(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<Self::ConfigWatchStream>, Status> {
        let req = request.into_inner();
        follow!(
            self,
            h = self.host.config(or(&req.recipe, World::Config.default_recipe())),
            first: h.get(&req.path),
            key: |found: &Option<wazoo_runtime::Entry>| found.as_ref().map(|e| e.version),
            event: entry,
            next: |known| h.watch(&req.path, known, Some(STREAM_POLL))
        )
    }

    type WatchStream = Events<pb::WatchEvent>;

    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let req = request.into_inner();
        let mut slot = self.stream_slot()?;
        let recipe = or(&req.recipe, World::Cache.default_recipe());
        let mut watching = Watching::new(self.host.clone(), recipe, &req.path, req.recursive);
        if let Err(e) = watching.start().await {
            return Err(match e.downcast::<RecipeError>() {
                Ok(e) => status(e),
                Err(e) => no_handle(e),
            });
        }
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            while !tx.is_closed() {
                let next = tokio::select! {
                    next = watching.next(Some(STREAM_POLL)) => next,
                    () = slot.stopped() => break,
                };
                match next {
                    Ok(change) => {
                        if tx.send(Ok(watch_event(change))).await.is_err() {
                            break;
                        }
                    }
                    // ZooKeeper out of reach: the cache reads everything again once it is back.
                    Err(RecipeError::Zk(ZkError::Timeout | ZkError::ConnectionLoss)) => {}
                    Err(e) => {
                        let _ = tx.send(Err(status(e))).await;
                        break;
                    }
                }
            }
            watching.close().await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn revoke(&self, request: Request<pb::RevokeRequest>) -> Result<Response<pb::RevokeReply>, Status> {
        let req = request.into_inner();
        once!(
            self,
            "Revoke",
            or(&req.recipe, World::Lock.default_recipe()),
            lock,
            |h| h.revoke(&req.node, millis(req.grace_ms)),
            |released| {
                // Without a grace the recipe only asks: nothing was waited for, so nothing
                // says the holder let go.
                let outcome = match (req.grace_ms.is_some(), released) {
                    (false, _) => pb::RevokeOutcome::Asked,
                    (true, true) => pb::RevokeOutcome::Released,
                    (true, false) => pb::RevokeOutcome::Forced,
                };
                pb::RevokeReply { released: outcome == pb::RevokeOutcome::Released, outcome: outcome as i32 }
            }
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
            let _reserved = self.room_for_handle(&session)?;
            let mut h = session.host.queue(&recipe).await.map_err(no_handle)?;
            let claimed = session.while_open(h.claim(&req.path, millis(req.timeout_ms))).await;
            let claimed = match claimed {
                Ok(claimed) => claimed,
                Err(ended) => {
                    h.close().await;
                    return Err(ended);
                }
            };
            match claimed {
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
        request: Request<pb::CounterGetRequest>,
    ) -> Result<Response<pb::CounterValue>, Status> {
        let req = request.into_inner();
        let format = counter_format(req.format)?;
        once!(
            self,
            "CounterGet",
            or(&req.recipe, World::Config.default_recipe()),
            config,
            |h| h.counter_in(&req.path, format),
            |value| { pb::CounterValue { value } }
        )
    }

    async fn counter_add(
        &self,
        request: Request<pb::CounterAddRequest>,
    ) -> Result<Response<pb::CounterValue>, Status> {
        let req = request.into_inner();
        let format = counter_format(req.format)?;
        once!(
            self,
            "CounterAdd",
            or(&req.recipe, World::Config.default_recipe()),
            config,
            |h| h.add_in(&req.path, req.delta, format),
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
            self.claim(&session, want, &recipe, &req.path, None, None).await
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
            self,
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
            let _reserved = self.room_for_handle(&session)?;
            let mut h = session.host.barrier(&recipe).await.map_err(no_handle)?;
            let entered = session.while_open(h.enter(&req.path, req.count, millis(req.timeout_ms))).await;
            let entered = match entered {
                Ok(entered) => entered,
                Err(ended) => {
                    h.close().await;
                    return Err(ended);
                }
            };
            match entered {
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
            let session = self.session(req.session)?;
            let mut held = self.take_held(req.session, req.handle, ClaimKind::Participant).await?;
            let outcome = match held.barrier() {
                Some(h) => session.while_open(h.leave_double(millis(req.timeout_ms))).await,
                None => Ok(Err(RecipeError::Retired)),
            };
            held.close().await;
            outcome?.map(|()| pb::Empty {}).map_err(status)
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

    async fn resume(&self, request: Request<pb::ResumeRequest>) -> Result<Response<pb::Claim>, Status> {
        let req = request.into_inner();
        self.measured("Resume", "", async {
            let session = self.session(req.session)?;
            wazoo_runtime::paths::check_node(&req.node)
                .map_err(|why| wire::invalid_argument(format!("node: {why}")))?;
            let _reserved = self.room_for_handle(&session)?;
            let live = session.host.live().await.map_err(wire::no_zookeeper)?;
            let stat = live
                .client
                .check_stat(&req.node)
                .await
                .map_err(|e| wire::no_zookeeper(anyhow::anyhow!("{e}")))?;
            let held = stat.is_some_and(|s| {
                s.ephemeral_owner == live.session_id()
                    && (req.fencing_token == 0 || s.czxid == req.fencing_token)
            });
            if !held {
                return Err(wire::unknown_handle(format!(
                    "handle: {} is not held in this session (gone, or another's)",
                    req.node
                )));
            }
            let claim = Claim::adopted(kind_of_node(&req.node), live, req.node.clone(), req.fencing_token);
            let handle = self.keep(&session, claim).await?;
            tracing::info!(session = req.session, node = %req.node, "claim taken up");
            Ok(pb::Claim {
                handle,
                node: req.node,
                fencing_token: req.fencing_token,
                recipe_version: String::new(),
            })
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
                let (session, entry) = self.entry(req.session, req.handle)?;
                let mut slot = entry.held.lock().await;
                let Some(h) = slot.as_mut().and_then(Claim::instance_mut) else {
                    return Err(wire::wrong_handle(format!("handle: {} was not kept by Invoke", req.handle)));
                };
                // The session ending cancels the call, so its close need not wait for it.
                let result = session.while_open(h.call(&req.function, &args)).await?.map_err(status)?;
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
            if !req.take_up.is_empty() && !req.keep {
                return Err(wire::invalid_argument("take_up: only a kept instance takes nodes up"));
            }
            for path in &req.take_up {
                wazoo_runtime::paths::check_node(path)
                    .map_err(|why| wire::invalid_argument(format!("take_up: {why}")))?;
            }
            let session = if req.keep { Some(self.session(req.session)?) } else { None };
            let _reserved = session.as_ref().map(|s| self.room_for_handle(s)).transpose()?;
            // A kept instance runs on its client session's ZooKeeper session (one taken up from
            // another member, for a client that moved here).
            let host = session.as_ref().map_or(&self.host, |s| &s.host);
            let mut h = host.dynamic(&recipe).await.map_err(no_handle)?;
            h.take_up(req.take_up);
            let called = match &session {
                Some(session) => session.while_open(h.call(&req.function, &args)).await,
                None => Ok(h.call(&req.function, &args).await),
            };
            let result = match called {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => {
                    h.close().await;
                    return Err(status(e));
                }
                Err(ended) => {
                    h.close().await;
                    return Err(ended);
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

/// The claim a `Hold` stream holds.
struct Holding {
    session: u64,
    handle: u64,
    /// Resolves when the claim is lost; followed until it has been told.
    lost: std::pin::Pin<Box<dyn std::future::Future<Output = wazoo_runtime::Lost> + Send>>,
    /// Resolves, with how, once the handle ends outside this stream (a Release from another
    /// call, its client session ending): followed until it has.
    ending: std::pin::Pin<Box<dyn std::future::Future<Output = Ended> + Send>>,
    /// How the handle ended, once it has: looked at when the claim's loss comes, since ending
    /// the handle deletes its node too.
    ended: tokio::sync::watch::Receiver<Option<Ended>>,
    /// Whether the stream was told the claim is lost (once).
    told: bool,
    /// Whether the handle ended outside this stream: a `release` then has nothing to let go.
    gone: bool,
}

impl Holding {
    /// The one `lost` event of a claim that ended outside the stream `how`.
    fn ended_event(how: Ended) -> Option<pb::LostEvent> {
        match how {
            Ended::Released => wire::ended_event(pb::LossReason::Released),
            how => how.loss().and_then(wire::ended_event),
        }
    }
}

impl Api {
    /// Lets go of `handle` of `session` and ends it.
    async fn release_handle(&self, session: u64, handle: u64) -> Result<pb::Empty, Status> {
        let (session, entry) = self.entry(session, handle)?;
        session.handles.lock().unwrap().remove(&handle);
        entry.ended.send_replace(Some(Ended::Released));
        let held = entry.held.lock().await.take();
        let Some(held) = held else { return Ok(pb::Empty {}) };
        held.release().await.map(|()| pb::Empty {}).map_err(status)
    }

    /// Serves one `Hold` stream: its steps in order, the held claim's loss as it comes, and on
    /// the way out the release of a claim still held.
    async fn holding(
        self,
        mut steps: Streaming<pb::HoldRequest>,
        mut slot: StreamSlot,
        tx: mpsc::Sender<Result<pb::HoldEvent, Status>>,
    ) {
        use pb::hold_event::Event;
        use pb::hold_request::Step;
        let event = |event: Event| Ok(pb::HoldEvent { event: Some(event) });
        let mut held: Option<Holding> = None;
        let ended: Result<(), Status> = loop {
            let step = match held.as_mut() {
                None => tokio::select! {
                    step = steps.message() => step,
                    () = slot.stopped() => break Ok(()),
                },
                Some(Holding { lost, ending, ended, told, gone, .. }) => {
                    let told_now = tokio::select! {
                        // What happened to the claim goes before the next step and the stop.
                        biased;
                        // A handle ended outside the stream deletes its node too: the loss is
                        // told as that end.
                        why = lost, if !*told => {
                            let how = *ended.borrow();
                            Ok(match how {
                                Some(how) => Holding::ended_event(how),
                                None => Some(wire::lost_event(&why)),
                            })
                        }
                        how = ending, if !*gone => {
                            *gone = true;
                            Ok(if *told { None } else { Holding::ended_event(how) })
                        }
                        step = steps.message() => Err(step),
                        // The daemon or the tenant stopping closes the claim's ZooKeeper session.
                        () = slot.stopped() => {
                            if !*told {
                                let lost = match *ended.borrow() {
                                    Some(how) => Holding::ended_event(how),
                                    None => wire::ended_event(pb::LossReason::SessionClosed),
                                };
                                if let Some(lost) = lost {
                                    let _ = tx.send(event(Event::Lost(lost))).await;
                                }
                            }
                            break Ok(());
                        }
                    };
                    match told_now {
                        Err(step) => step,
                        Ok(lost) => {
                            if let (Some(lost), false) = (lost, *told) {
                                *told = true;
                                if tx.send(event(Event::Lost(lost))).await.is_err() {
                                    break Ok(());
                                }
                            }
                            continue;
                        }
                    }
                }
            };
            let step = match step {
                Ok(Some(pb::HoldRequest { step: Some(step) })) => step,
                Ok(Some(pb::HoldRequest { step: None })) => {
                    break Err(wire::invalid_argument("a HoldRequest names no step"))
                }
                // The client's side ended, or the stream broke.
                Ok(None) | Err(_) => break Ok(()),
            };
            match step {
                Step::Acquire(_) if held.is_some() => {
                    break Err(wire::invalid_argument("this stream holds a claim already: release it first"))
                }
                Step::Acquire(req) => {
                    let taken = tokio::select! {
                        taken = self.acquire_held(req) => taken,
                        // Nobody to hand the claim to: dropping the call ends its handle.
                        () = tx.closed() => break Ok(()),
                        () = slot.stopped() => break Ok(()),
                    };
                    match taken {
                        Ok((claim, holding)) => {
                            held = Some(holding);
                            if tx.send(event(Event::Claim(claim))).await.is_err() {
                                break Ok(());
                            }
                        }
                        Err(e) => break Err(e),
                    }
                }
                Step::Release(_) => {
                    let Some(holding) = held.take() else {
                        break Err(wire::invalid_argument("this stream holds no claim to release"));
                    };
                    // A handle that ended outside the stream has nothing left to let go.
                    if !holding.gone {
                        let released = self
                            .measured(
                                "Hold/release",
                                "",
                                self.release_handle(holding.session, holding.handle),
                            )
                            .await;
                        if let Err(e) = released {
                            break Err(e);
                        }
                    }
                    if tx.send(event(Event::Released(pb::Empty {}))).await.is_err() {
                        break Ok(());
                    }
                }
            }
        };
        if let Some(holding) = held.filter(|h| !h.gone) {
            let _ = self.release_handle(holding.session, holding.handle).await;
        }
        if let Err(e) = ended {
            let _ = tx.send(Err(e)).await;
        }
    }

    /// A `Hold` stream's acquire: the claim, kept in the request's session as Acquire keeps
    /// it, and what the stream follows of it.
    async fn acquire_held(&self, req: pb::AcquireRequest) -> Result<(pb::Claim, Holding), Status> {
        let want = want_of(&req)?;
        let recipe = or(&req.recipe, want.world().default_recipe()).to_string();
        self.measured("Hold/acquire", &recipe, async {
            let session = self.session(req.session)?;
            let named = claim_tag(req.session, &req.claim_id, req.retry)?;
            let claim = self.claim(&session, want, &recipe, &req.path, millis(req.timeout_ms), named).await?;
            let (_, entry) = self.entry(req.session, claim.handle)?;
            let lost = match entry.held.lock().await.as_ref() {
                Some(held) => held.lost(),
                None => return Err(wire::unknown_handle(format!("handle: {} was released", claim.handle))),
            };
            let holding = Holding {
                session: req.session,
                handle: claim.handle,
                lost: Box::pin(lost),
                ending: Box::pin(entry.ending()),
                ended: entry.ended.subscribe(),
                told: false,
                gone: false,
            };
            Ok((claim, holding))
        })
        .await
        .map(Response::into_inner)
    }
}

/// The most bytes of a claim id.
const MAX_CLAIM_ID: usize = 64;

/// The name an Acquire gives its claim, if any ([`wazoo_runtime::ClaimTag`]).
fn claim_tag(session: u64, claim_id: &str, retry: bool) -> Result<Option<wazoo_runtime::ClaimTag>, Status> {
    if claim_id.is_empty() {
        if retry {
            return Err(wire::invalid_argument("retry: a claim sent again needs its claim_id"));
        }
        return Ok(None);
    }
    if claim_id.len() > MAX_CLAIM_ID {
        return Err(wire::invalid_argument(format!("claim_id: at most {MAX_CLAIM_ID} bytes")));
    }
    Ok(Some(wazoo_runtime::ClaimTag::new(session, claim_id, retry)))
}

/// What a claim node's name says it is (for one taken up with Resume).
fn kind_of_node(node: &str) -> wazoo_runtime::ClaimKind {
    use wazoo_runtime::ClaimKind;
    let name = node.rsplit('/').next().unwrap_or(node);
    if name.contains("__READ__") || name.contains("__rlock__") {
        ClaimKind::Read
    } else if name.contains("__WRIT__") {
        ClaimKind::Write
    } else if name.contains("-lease-") || node.contains("/leases/") {
        ClaimKind::Lease
    } else if name.contains("latch-") {
        ClaimKind::Leadership
    } else if name.contains("-lock-") || name.contains("__lock__") {
        ClaimKind::Lock
    } else {
        ClaimKind::Membership
    }
}

/// What an Acquire (or a `Hold` stream's acquire) asks for.
fn want_of(req: &pb::AcquireRequest) -> Result<Want, Status> {
    let family = pb::Family::try_from(req.family).map_err(|_| wire::invalid_argument("unknown family"))?;
    Ok(match family {
        pb::Family::Lock => Want::Lock,
        pb::Family::ReadLock => Want::ReadWrite(Mode::Read),
        pb::Family::WriteLock => Want::ReadWrite(Mode::Write),
        pb::Family::Semaphore => Want::Lease { max_leases: req.max_leases },
    })
}

/// A CounterGet or CounterAdd request's format.
fn counter_format(format: i32) -> Result<CounterFormat, Status> {
    match pb::CounterFormat::try_from(format) {
        Ok(pb::CounterFormat::Kazoo) => Ok(CounterFormat::Kazoo),
        Ok(pb::CounterFormat::CuratorShared) => Ok(CounterFormat::CuratorShared),
        Ok(pb::CounterFormat::CuratorAtomic) => Ok(CounterFormat::CuratorAtomic),
        Err(_) => Err(wire::invalid_argument(format!("unknown counter format {format}"))),
    }
}
