//! The group family: GroupJoin (a membership, kept as a claim), GroupMembers, GroupWatch (the
//! members as they change); and the members as a `Membership`.

use tonic::{Request, Response, Status};

use super::claims::{claim, Kept};
use super::{or, Service, STREAM_POLL};
use crate::serve::Events;
use wazoo_runtime::{Membership, Want, World};

use wazoo_proto as pb;

pub(super) async fn group_join(
    service: &Service,
    request: Request<pb::GroupJoinRequest>,
) -> Result<Response<pb::Claim>, Status> {
    let req = request.into_inner();
    let recipe = or(&req.recipe, World::Group.default_recipe()).to_string();
    service
        .measured("GroupJoin", &recipe, async {
            let session = service.session(req.session)?;
            let want = Want::Membership { name: req.name.clone(), data: req.data.clone() };
            let holder = super::claims::identity(&session, "")?;
            claim(service, &session, want, &recipe, &req.path, None, None, &holder, Kept::Instance).await
        })
        .await
}

pub(super) async fn group_members(
    service: &Service,
    request: Request<pb::PathRequest>,
) -> Result<Response<pb::Membership>, Status> {
    let req = request.into_inner();
    once!(
        service,
        "GroupMembers",
        or(&req.recipe, World::Group.default_recipe()),
        group,
        |h| h.members(&req.path),
        membership
    )
}

pub(super) async fn group_watch(
    service: &Service,
    request: Request<pb::PathRequest>,
) -> Result<Response<Events<pb::Membership>>, Status> {
    let req = request.into_inner();
    follow!(
        service,
        h = service.host.group(or(&req.recipe, World::Group.default_recipe())),
        first: h.members(&req.path),
        key: |m: &Membership| m.version,
        event: membership,
        next: |known| h.watch(&req.path, known, Some(STREAM_POLL))
    )
}

/// A group's members as a `Membership`.
fn membership(m: Membership) -> pb::Membership {
    let members = m.members.into_iter().map(|m| pb::Member { name: m.name, data: m.data }).collect();
    pb::Membership { members, version: m.version }
}
