//! Fencing with a claim's token: FenceCheck (whether a node is still held with that token) and
//! FenceWrite (a value written only while it is, and only by the newest token); and what they
//! found as a `FenceCheckReply` or a `FenceWriteReply`.

use tonic::{Request, Response, Status};

use super::Service;
use crate::serve::state::State;
use crate::wire::status;
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::fence::{Fence, Holder, Written};
use wazoo_runtime::zk::Access;
use wazoo_runtime::Live;

use wazoo_proto as pb;

pub(super) async fn fence_check(
    service: &Service,
    request: Request<pb::FenceCheckRequest>,
) -> Result<Response<pb::FenceCheckReply>, Status> {
    let req = request.into_inner();
    service
        .measured("FenceCheck", "fence", async {
            let live = service.live().await?;
            let found = fence(service, &live).check(&req.node, req.token).await;
            Ok(check_reply(found.map_err(|e| status(RecipeError::Zk(e)))?))
        })
        .await
}

pub(super) async fn fence_write(
    service: &Service,
    request: Request<pb::FenceWriteRequest>,
) -> Result<Response<pb::FenceWriteReply>, Status> {
    let req = request.into_inner();
    service
        .measured("FenceWrite", "fence", async {
            let live = service.live().await?;
            let written = fence(service, &live).write(&req.node, req.token, &req.path, &req.value).await;
            Ok(write_reply(written.map_err(|e| status(RecipeError::Zk(e)))?))
        })
        .await
}

/// Fenced checks and writes on the host's ZooKeeper session (`live`); the nodes a tenant's
/// writes create are its own.
fn fence(state: &State, live: &Live) -> Fence {
    let access = match state.tenant {
        Some(_) => Access::Private,
        None => Access::Open,
    };
    Fence { zk: live.zk(), access, max_bytes: state.host.limits().max_data_bytes }
}

/// Who holds the node, as a `FenceCheckReply`.
fn check_reply(found: Holder) -> pb::FenceCheckReply {
    let (holder, holder_token) = match found {
        Holder::Holds => (pb::FenceHolder::Holds, 0),
        Holder::Gone => (pb::FenceHolder::Gone, 0),
        Holder::OtherToken(token) => (pb::FenceHolder::OtherToken, token),
    };
    pb::FenceCheckReply { holder: holder as i32, holder_token }
}

/// A fenced write, done or refused (and why), as a `FenceWriteReply`.
fn write_reply(written: Written) -> pb::FenceWriteReply {
    let refused =
        |holder: pb::FenceHolder| pb::FenceWriteReply { holder: holder as i32, ..Default::default() };
    match written {
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
    }
}
