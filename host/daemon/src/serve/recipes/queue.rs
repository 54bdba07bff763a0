//! The queue family: items put (an ephemeral one kept as a claim in the client session),
//! taken, counted, and claimed then acknowledged (the claim kept until its QueueAck); and an
//! item as a `QueueItem`.

use std::time::Duration;

use tonic::{Request, Response, Status};

use super::{millis, or, Service};
use crate::serve::state::State;
use crate::wire::{self, no_handle, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::{Claim, ClaimKind, Item, World, ZkError};

use wazoo_proto as pb;

pub(super) async fn queue_put(
    service: &Service,
    request: Request<pb::QueuePutRequest>,
) -> Result<Response<pb::QueueItem>, Status> {
    let req = request.into_inner();
    let recipe = or(&req.recipe, World::Queue.default_recipe()).to_string();
    follow(service, &recipe, &req.path);
    service
        .measured("QueuePut", &recipe, async {
            let priority = match req.priority {
                Some(p) => Some(u8::try_from(p).map_err(|_| wire::invalid_argument("priority is 0 to 255"))?),
                None => None,
            };
            let session = if req.ephemeral { Some(service.session(req.session)?) } else { None };
            let _reserved = session.as_ref().map(|s| service.room_for_handle(s)).transpose()?;
            // An ephemeral item is its client session's: on that session's ZooKeeper session.
            let host = session.as_ref().map_or(&service.host, |s| &s.host);
            let mut h = host.queue(&recipe).await.map_err(no_handle)?;
            let outcome = h.put(&req.path, &req.data, priority, req.ephemeral).await;
            let node = match (outcome, session) {
                (Ok(node), Some(session)) => {
                    let handle = service.keep(&session, Claim::queue_item(h, node.clone())).await?;
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

pub(super) async fn queue_take(
    service: &Service,
    request: Request<pb::WaitRequest>,
) -> Result<Response<pb::QueueItem>, Status> {
    let req = request.into_inner();
    follow(service, or(&req.recipe, World::Queue.default_recipe()), &req.path);
    once!(
        service,
        "QueueTake",
        or(&req.recipe, World::Queue.default_recipe()),
        queue,
        |h| h.take(&req.path, millis(req.timeout_ms)),
        taken
    )
}

pub(super) async fn queue_len(
    service: &Service,
    request: Request<pb::PathRequest>,
) -> Result<Response<pb::QueueLength>, Status> {
    let req = request.into_inner();
    follow(service, or(&req.recipe, World::Queue.default_recipe()), &req.path);
    once!(
        service,
        "QueueLen",
        or(&req.recipe, World::Queue.default_recipe()),
        queue,
        |h| h.len(&req.path),
        |items| { pb::QueueLength { items } }
    )
}

pub(super) async fn queue_claim(
    service: &Service,
    request: Request<pb::QueueClaimRequest>,
) -> Result<Response<pb::QueueClaimed>, Status> {
    let req = request.into_inner();
    let recipe = or(&req.recipe, World::Queue.default_recipe()).to_string();
    follow(service, &recipe, &req.path);
    service
        .measured("QueueClaim", &recipe, async {
            let session = service.session(req.session)?;
            let _reserved = service.room_for_handle(&session)?;
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
                    let node = item.node.clone();
                    let claimed = taken(item);
                    let handle = service.keep(&session, Claim::queue_claim(h, node)).await?;
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

pub(super) async fn queue_ack(
    service: &Service,
    request: Request<pb::HandleRef>,
) -> Result<Response<pb::Empty>, Status> {
    let req = request.into_inner();
    service
        .measured("QueueAck", "", async {
            let mut held = service.take_held(req.session, req.handle, ClaimKind::QueueClaim).await?;
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

/// An item taken or claimed as a `QueueItem` (it has no handle of its own: a claimed item's is
/// the `QueueClaimed`'s).
fn taken(item: Item) -> pb::QueueItem {
    pb::QueueItem { node: item.node, data: item.data, handle: 0 }
}

/// How long a queue's depth waits after a change before it is counted again: a busy queue is
/// listed twice a second at most (the watch, then the count), however many puts and takes.
const SETTLE: Duration = Duration::from_secs(1);

/// How long a queue that is not there is followed, waiting for it to be made.
const UNMADE: Duration = Duration::from_secs(10);

/// Follows the depth of queue `path` (counted by `recipe`) in the metrics
/// (`wazoo_queue_depth`), from the first call of a client on it until its tenant or the daemon
/// stops, the queue cannot be read, or it is not there for [`UNMADE`] (a later call follows it
/// again); at most
/// [`crate::metrics::MAX_QUEUES`] queues of a tenant at once.
fn follow(service: &Service, recipe: &str, path: &str) {
    // Only a path the recipe would take, of a recipe that is there.
    if wazoo_runtime::paths::check(path).is_err() || !service.host.registry().knows(recipe) {
        return;
    }
    let Some(depth) = service.metrics.follow_queue(service.tenant.as_deref(), path) else { return };
    let (state, recipe, path) = (service.0.clone(), recipe.to_string(), path.to_string());
    tokio::spawn(async move {
        let mut stopped = state.stopped.subscribe();
        tokio::select! {
            () = depths(&state, &recipe, &path, &depth) => {}
            _ = stopped.wait_for(|s| *s) => {}
        }
    });
}

/// Counts the items of queue `path` into `depth` at every change of its children, until it
/// cannot.
async fn depths(state: &State, recipe: &str, path: &str, depth: &crate::metrics::Depth) {
    loop {
        let Ok(live) = state.host.live().await else { return };
        let zk = live.zk();
        // The watch first, then the count: no change in between is missed.
        let watch = match zk.children_watch(path).await {
            Ok((_, watch)) => watch,
            Err(ZkError::NoNode) => match zk.exists_watch(path).await {
                Ok((None, created)) => {
                    depth.set(0);
                    // Not there (yet): the call that named it may be making it. A path nobody
                    // makes within [`UNMADE`] gives its place back (a later call follows it
                    // again), so paths that are no queue do not keep the tenant's places.
                    if tokio::time::timeout(UNMADE, created.changed()).await.is_err() {
                        return;
                    }
                    continue;
                }
                Ok((Some(_), _)) => continue,
                Err(_) => return,
            },
            Err(_) => return,
        };
        let Ok(mut h) = state.host.queue(recipe).await else { return };
        let items = h.len(path).await;
        h.close().await;
        match items {
            Ok(items) => depth.set(items),
            Err(_) => return,
        }
        watch.changed().await;
        tokio::time::sleep(SETTLE).await;
    }
}
