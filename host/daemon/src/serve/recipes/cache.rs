//! The cache family: Watch, a stream of a node's (or a tree's) changes from a fresh cache; and
//! a change as a `WatchEvent`.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{or, Service, STREAM_POLL};
use crate::serve::Events;
use crate::wire::{no_handle, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::{CacheChange, Watching, World, ZkError};

use wazoo_proto as pb;

pub(super) async fn watch(
    service: &Service,
    request: Request<pb::WatchRequest>,
) -> Result<Response<Events<pb::WatchEvent>>, Status> {
    let req = request.into_inner();
    let mut slot = service.stream_slot()?;
    let recipe = or(&req.recipe, World::Cache.default_recipe());
    let mut watching = Watching::new(service.host.clone(), recipe, &req.path, req.recursive);
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

/// A cache's change as a `WatchEvent`.
fn watch_event(change: CacheChange) -> pb::WatchEvent {
    use CacheChange as C;
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
