//! The `Recipes` service: every recipe family's calls, each on a fresh or a kept handle.
//!
//! Each family has a file of its own with its calls and its messages' conversions to and from
//! the runtime's values: the claims every claiming family shares (`claims`: Acquire of a lock, a
//! read or write lock or a semaphore, Release, Hold, Lost, Resume), `lock` (Revoke), `election`,
//! `barrier` (and the double barrier), `queue`, `config` (and its counters), `cache` (Watch),
//! `group`, `transaction`, `fence` (FenceCheck, FenceWrite), `holders`, and `invoke` (any
//! export by name, the route of every family without typed messages). This file keeps the
//! service itself, the trait impl that sends each call to its family, and what they share.
//!
//! Below the families: `claims` is the lowest (`election` and `group` claim through it); the
//! others name no sibling.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status, Streaming};

use super::state::State;
use super::Events;

use wazoo_proto as pb;

use pb::recipes_server::Recipes;

/// The longest timeout a call takes; a longer one means no timeout.
const LONGEST_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How long a streaming call blocks in the recipe before it looks whether its client left.
const STREAM_POLL: Duration = Duration::from_secs(1);

/// One call on a fresh handle of `$recipe` (made by `Host::$make`) that ends with the call:
/// measured, with its error mapped to a gRPC status.
macro_rules! once {
    ($self:ident, $method:literal, $recipe:expr, $make:ident, |$h:ident| $call:expr, $reply:expr) => {{
        let recipe = $recipe.to_string();
        $self
            .measured($method, &recipe, async {
                let mut $h = $self.host.$make(&recipe).await.map_err($crate::wire::no_handle)?;
                let outcome = $call.await;
                $h.close().await;
                outcome.map($reply).map_err($crate::wire::status)
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
        let mut $h = $open.await.map_err($crate::wire::no_handle)?;
        let first = match $first.await {
            Ok(first) => first,
            Err(e) => {
                $h.close().await;
                return Err($crate::wire::status(e));
            }
        };
        let (tx, rx) = ::tokio::sync::mpsc::channel(16);
        ::tokio::spawn(async move {
            let (key, event) = ($key, $event);
            let mut $known = key(&first);
            let mut open = tx.send(Ok(event(first))).await.is_ok();
            while open && !tx.is_closed() {
                let next = ::tokio::select! {
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
                    Err(::wazoo_runtime::error::RecipeError::Zk(::wazoo_runtime::ZkError::Timeout)) => {}
                    Err(e) => {
                        let _ = tx.send(Err($crate::wire::status(e))).await;
                        break;
                    }
                }
            }
            $h.close().await;
        });
        Ok(::tonic::Response::new(Box::pin(::tokio_stream::wrappers::ReceiverStream::new(rx))))
    }};
}

mod barrier;
mod cache;
mod claims;
mod config;
mod election;
mod fence;
mod group;
mod holders;
mod invoke;
mod lock;
mod queue;
mod transaction;

/// The `Recipes` service, over the shared state.
#[derive(Clone)]
pub(super) struct Service(pub(super) Arc<State>);

impl std::ops::Deref for Service {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

#[tonic::async_trait]
impl Recipes for Service {
    async fn acquire(&self, request: Request<pb::AcquireRequest>) -> Result<Response<pb::Claim>, Status> {
        claims::acquire(self, request).await
    }

    async fn release(&self, request: Request<pb::HandleRef>) -> Result<Response<pb::Empty>, Status> {
        claims::release(self, request).await
    }

    type HoldStream = Events<pb::HoldEvent>;

    async fn hold(
        &self,
        request: Request<Streaming<pb::HoldRequest>>,
    ) -> Result<Response<Self::HoldStream>, Status> {
        claims::hold(self, request).await
    }

    type LostStream = Events<pb::LostEvent>;

    async fn lost(&self, request: Request<pb::HandleRef>) -> Result<Response<Self::LostStream>, Status> {
        claims::lost(self, request).await
    }

    async fn campaign(&self, request: Request<pb::CampaignRequest>) -> Result<Response<pb::Claim>, Status> {
        election::campaign(self, request).await
    }

    type ObserveStream = Events<pb::LeaderEvent>;

    async fn observe(
        &self,
        request: Request<pb::ObserveRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        election::observe(self, request).await
    }

    async fn acknowledge(
        &self,
        request: Request<pb::AcknowledgeRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        election::acknowledge(self, request).await
    }

    async fn barrier_set(&self, request: Request<pb::PathRequest>) -> Result<Response<pb::Done>, Status> {
        barrier::barrier_set(self, request).await
    }

    async fn barrier_remove(&self, request: Request<pb::PathRequest>) -> Result<Response<pb::Done>, Status> {
        barrier::barrier_remove(self, request).await
    }

    async fn barrier_wait(&self, request: Request<pb::WaitRequest>) -> Result<Response<pb::Empty>, Status> {
        barrier::barrier_wait(self, request).await
    }

    async fn queue_put(
        &self,
        request: Request<pb::QueuePutRequest>,
    ) -> Result<Response<pb::QueueItem>, Status> {
        queue::queue_put(self, request).await
    }

    async fn queue_take(&self, request: Request<pb::WaitRequest>) -> Result<Response<pb::QueueItem>, Status> {
        queue::queue_take(self, request).await
    }

    async fn config_get(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<pb::ConfigEntry>, Status> {
        config::config_get(self, request).await
    }

    async fn config_set(
        &self,
        request: Request<pb::ConfigSetRequest>,
    ) -> Result<Response<pb::ConfigEntry>, Status> {
        config::config_set(self, request).await
    }

    async fn config_delete(
        &self,
        request: Request<pb::ConfigDeleteRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        config::config_delete(self, request).await
    }

    type ConfigWatchStream = Events<pb::ConfigEntry>;

    async fn config_watch(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<Self::ConfigWatchStream>, Status> {
        config::config_watch(self, request).await
    }

    type WatchStream = Events<pb::WatchEvent>;

    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        cache::watch(self, request).await
    }

    async fn revoke(&self, request: Request<pb::RevokeRequest>) -> Result<Response<pb::RevokeReply>, Status> {
        lock::revoke(self, request).await
    }

    async fn queue_len(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<pb::QueueLength>, Status> {
        queue::queue_len(self, request).await
    }

    async fn queue_claim(
        &self,
        request: Request<pb::QueueClaimRequest>,
    ) -> Result<Response<pb::QueueClaimed>, Status> {
        queue::queue_claim(self, request).await
    }

    async fn queue_ack(&self, request: Request<pb::HandleRef>) -> Result<Response<pb::Empty>, Status> {
        queue::queue_ack(self, request).await
    }

    async fn counter_get(
        &self,
        request: Request<pb::CounterGetRequest>,
    ) -> Result<Response<pb::CounterValue>, Status> {
        config::counter_get(self, request).await
    }

    async fn counter_add(
        &self,
        request: Request<pb::CounterAddRequest>,
    ) -> Result<Response<pb::CounterValue>, Status> {
        config::counter_add(self, request).await
    }

    async fn group_join(
        &self,
        request: Request<pb::GroupJoinRequest>,
    ) -> Result<Response<pb::Claim>, Status> {
        group::group_join(self, request).await
    }

    async fn group_members(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<pb::Membership>, Status> {
        group::group_members(self, request).await
    }

    type GroupWatchStream = Events<pb::Membership>;

    async fn group_watch(
        &self,
        request: Request<pb::PathRequest>,
    ) -> Result<Response<Self::GroupWatchStream>, Status> {
        group::group_watch(self, request).await
    }

    async fn double_barrier_enter(
        &self,
        request: Request<pb::DoubleBarrierEnterRequest>,
    ) -> Result<Response<pb::Entered>, Status> {
        barrier::double_barrier_enter(self, request).await
    }

    async fn double_barrier_leave(
        &self,
        request: Request<pb::DoubleBarrierLeaveRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        barrier::double_barrier_leave(self, request).await
    }

    async fn tx_coordinate(
        &self,
        request: Request<pb::TxCoordinateRequest>,
    ) -> Result<Response<pb::TxOutcome>, Status> {
        transaction::tx_coordinate(self, request).await
    }

    async fn tx_vote(&self, request: Request<pb::TxVoteRequest>) -> Result<Response<pb::TxOutcome>, Status> {
        transaction::tx_vote(self, request).await
    }

    async fn fence_check(
        &self,
        request: Request<pb::FenceCheckRequest>,
    ) -> Result<Response<pb::FenceCheckReply>, Status> {
        fence::fence_check(self, request).await
    }

    async fn fence_write(
        &self,
        request: Request<pb::FenceWriteRequest>,
    ) -> Result<Response<pb::FenceWriteReply>, Status> {
        fence::fence_write(self, request).await
    }

    async fn holders(
        &self,
        request: Request<pb::HoldersRequest>,
    ) -> Result<Response<pb::HoldersReply>, Status> {
        holders::holders(self, request).await
    }

    async fn resume(&self, request: Request<pb::ResumeRequest>) -> Result<Response<pb::Claim>, Status> {
        claims::resume(self, request).await
    }

    async fn invoke(&self, request: Request<pb::InvokeRequest>) -> Result<Response<pb::InvokeReply>, Status> {
        invoke::invoke(self, request).await
    }
}

/// A request's timeout: none beyond [`LONGEST_WAIT`], which is waiting for good (and could not
/// be added to a clock).
fn millis(ms: Option<u64>) -> Option<Duration> {
    ms.map(Duration::from_millis).filter(|d| *d <= LONGEST_WAIT)
}

/// The recipe a request names, or the family's `default` when it names none.
fn or<'a>(recipe: &'a str, default: &'a str) -> &'a str {
    if recipe.is_empty() {
        default
    } else {
        recipe
    }
}
