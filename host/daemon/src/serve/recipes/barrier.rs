//! The barrier family: a barrier set, removed and waited on (each on a fresh handle), and the
//! double barrier, entered (the participation kept as a claim in the client session) and left.

use tonic::{Request, Response, Status};

use super::{millis, or, Service};
use crate::wire::{self, no_handle, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::{Claim, ClaimKind, World};

use wazoo_proto as pb;

pub(super) async fn barrier_set(
    service: &Service,
    request: Request<pb::PathRequest>,
) -> Result<Response<pb::Done>, Status> {
    let req = request.into_inner();
    once!(
        service,
        "BarrierSet",
        or(&req.recipe, World::Barrier.default_recipe()),
        barrier,
        |h| h.set(&req.path),
        |changed| { pb::Done { changed } }
    )
}

pub(super) async fn barrier_remove(
    service: &Service,
    request: Request<pb::PathRequest>,
) -> Result<Response<pb::Done>, Status> {
    let req = request.into_inner();
    once!(
        service,
        "BarrierRemove",
        or(&req.recipe, World::Barrier.default_recipe()),
        barrier,
        |h| h.remove(&req.path),
        |changed| pb::Done { changed }
    )
}

pub(super) async fn barrier_wait(
    service: &Service,
    request: Request<pb::WaitRequest>,
) -> Result<Response<pb::Empty>, Status> {
    let req = request.into_inner();
    once!(
        service,
        "BarrierWait",
        or(&req.recipe, World::Barrier.default_recipe()),
        barrier,
        |h| h.wait(&req.path, millis(req.timeout_ms)),
        |()| pb::Empty {}
    )
}

pub(super) async fn double_barrier_enter(
    service: &Service,
    request: Request<pb::DoubleBarrierEnterRequest>,
) -> Result<Response<pb::Entered>, Status> {
    let req = request.into_inner();
    let recipe = or(&req.recipe, World::Barrier.default_recipe()).to_string();
    service
        .measured("DoubleBarrierEnter", &recipe, async {
            let session = service.session(req.session)?;
            let _reserved = service.room_for_handle(&session)?;
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
                    let recipe_version = wire::recipe_version(&held);
                    let handle = service.keep(&session, held).await?;
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

pub(super) async fn double_barrier_leave(
    service: &Service,
    request: Request<pb::DoubleBarrierLeaveRequest>,
) -> Result<Response<pb::Empty>, Status> {
    let req = request.into_inner();
    service
        .measured("DoubleBarrierLeave", "", async {
            let session = service.session(req.session)?;
            let mut held = service.take_held(req.session, req.handle, ClaimKind::Participant).await?;
            let outcome = match held.barrier() {
                Some(h) => session.while_open(h.leave_double(millis(req.timeout_ms))).await,
                None => Ok(Err(RecipeError::Retired)),
            };
            held.close().await;
            outcome?.map(|()| pb::Empty {}).map_err(status)
        })
        .await
}
