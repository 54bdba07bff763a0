//! The lock family's own call: Revoke (asking a holder to let go, and with a grace, deleting
//! its node if it does not); and its outcome as a `RevokeReply`. A lock is acquired, held and
//! released as every claim is (`claims`).

use tonic::{Request, Response, Status};

use super::{millis, or, Service};
use wazoo_runtime::World;

use wazoo_proto as pb;

pub(super) async fn revoke(
    service: &Service,
    request: Request<pb::RevokeRequest>,
) -> Result<Response<pb::RevokeReply>, Status> {
    let req = request.into_inner();
    once!(
        service,
        "Revoke",
        or(&req.recipe, World::Lock.default_recipe()),
        lock,
        |h| h.revoke(&req.node, millis(req.grace_ms)),
        |released| revoke_reply(req.grace_ms.is_some(), released)
    )
}

/// What a Revoke did: with a grace (`graced`), whether the holder let go (`released`) or its
/// node was deleted; without one, it only asked.
fn revoke_reply(graced: bool, released: bool) -> pb::RevokeReply {
    // Without a grace the recipe only asks: nothing was waited for, so nothing says the holder
    // let go.
    let outcome = match (graced, released) {
        (false, _) => pb::RevokeOutcome::Asked,
        (true, true) => pb::RevokeOutcome::Released,
        (true, false) => pb::RevokeOutcome::Forced,
    };
    pb::RevokeReply { released: outcome == pb::RevokeOutcome::Released, outcome: outcome as i32 }
}
