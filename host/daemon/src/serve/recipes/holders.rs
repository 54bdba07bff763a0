//! Holders: who holds or waits for a lock, a read-write lock, a semaphore or a leadership at a
//! path (the kind told or detected), read without a recipe; and the kinds and contenders on the
//! wire.

use tonic::{Request, Response, Status};

use super::Service;
use crate::wire::{self, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::holders::{self, Contenders, Kind, State};
use wazoo_runtime::Mode;

use wazoo_proto as pb;

pub(super) async fn holders(
    service: &Service,
    request: Request<pb::HoldersRequest>,
) -> Result<Response<pb::HoldersReply>, Status> {
    let req = request.into_inner();
    service
        .measured("Holders", "holders", async {
            let kind = kind_of(req.kind)?;
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
        Ok(pb::HoldersKind::Lock) => Some(Kind::Lock),
        Ok(pb::HoldersKind::ReadWrite) => Some(Kind::ReadWrite),
        Ok(pb::HoldersKind::Semaphore) => Some(Kind::Semaphore),
        Ok(pb::HoldersKind::Election) => Some(Kind::Election),
        Err(_) => return Err(wire::invalid_argument("invalid-argument: unknown holders kind")),
    })
}

/// What was found, as a `HoldersReply`.
fn reply(found: Contenders) -> pb::HoldersReply {
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
    pb::HoldersReply { kind: kind as i32, contenders }
}
