//! Holders: who holds or waits for a lock, a read-write lock, a semaphore or a leadership at a
//! path (the kind told or detected), read without a recipe; and the kinds and contenders on the
//! wire.

use tonic::{Request, Response, Status};

use super::Service;
use crate::wire::{self, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::family::Family;
use wazoo_runtime::holders::{self, Contenders, Kind};

use wazoo_proto as pb;

pub(super) async fn holders(
    service: &Service,
    request: Request<pb::HoldersRequest>,
) -> Result<Response<pb::HoldersReply>, Status> {
    let req = request.into_inner();
    service
        .measured("Holders", "holders", async {
            let kind = match req.described.as_str() {
                "" => kind_of(req.kind)?,
                name => match Family::named(name).filter(|f| f.is_described()) {
                    Some(family) => Some(family),
                    None => {
                        return Err(wire::invalid_argument(format!(
                            "described: this daemon describes no family {name:?}"
                        )))
                    }
                },
            };
            // A tenant's client is rooted in its namespace, as for FenceCheck.
            let live = service.live().await?;
            let found = holders::read(&live.zk(), &req.path, kind, req.leases)
                .await
                .map_err(|e| status(RecipeError::Zk(e)))?;
            Ok(reply(found))
        })
        .await
}

/// The kind a Holders request names (none: detect it).
fn kind_of(kind: i32) -> Result<Option<Kind>, Status> {
    Ok(match pb::HoldersKind::try_from(kind) {
        Ok(pb::HoldersKind::Detect) => None,
        Ok(kind) => match wazoo_proto::holders_kind_name(kind).and_then(Family::named) {
            Some(family) => Some(family),
            None => return Err(wire::invalid_argument("invalid-argument: unknown holders kind")),
        },
        Err(_) => return Err(wire::invalid_argument("invalid-argument: unknown holders kind")),
    })
}

/// What was found, as a `HoldersReply`.
fn reply(found: Contenders) -> pb::HoldersReply {
    let kind = wazoo_proto::holders_kind(found.kind.name);
    let contenders = found.contenders.into_iter().map(crate::serve::listing::contender).collect();
    let described = match found.kind.is_described() {
        true => found.kind.name.to_string(),
        false => String::new(),
    };
    pb::HoldersReply { kind: kind as i32, contenders, described }
}
