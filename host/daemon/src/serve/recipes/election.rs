//! The election family: Campaign (a leadership, kept as a claim), Observe (who leads, as it
//! changes), Acknowledge (a leader's note); and a leader as a `LeaderEvent`.

use tonic::{Request, Response, Status};

use super::claims::{claim, claim_tag, Kept};
use super::{millis, or, Service, STREAM_POLL};
use crate::serve::Events;
use crate::wire::{self, status};
use wazoo_runtime::{Claim, ElectionHandle, LeaderInfo, Want, World};

use wazoo_proto as pb;

pub(super) async fn campaign(
    service: &Service,
    request: Request<pb::CampaignRequest>,
) -> Result<Response<pb::Claim>, Status> {
    let req = request.into_inner();
    let recipe = or(&req.recipe, World::Election.default_recipe()).to_string();
    service
        .measured("Campaign", &recipe, async {
            let session = service.session(req.session)?;
            let want = Want::Leadership { id: req.id.clone() };
            let named = claim_tag(req.session, &req.claim_id, req.retry)?;
            // A candidate's node holds its id; one with no id, who the session is.
            let holder = match req.id.is_empty() {
                true => super::claims::identity(&session, "")?,
                false => String::new(),
            };
            let timeout = millis(req.timeout_ms);
            let led =
                claim(service, &session, want, &recipe, &req.path, timeout, named, &holder, Kept::Instance)
                    .await?;
            service.metrics.leadership_changed(service.tenant.as_deref());
            Ok(led)
        })
        .await
}

pub(super) async fn observe(
    service: &Service,
    request: Request<pb::ObserveRequest>,
) -> Result<Response<Events<pb::LeaderEvent>>, Status> {
    let req = request.into_inner();
    follow!(
        service,
        h = service.host.election(or(&req.recipe, World::Election.default_recipe())),
        first: h.leader(&req.path),
        key: |info: &Option<LeaderInfo>| info.as_ref().map(ElectionHandle::seen),
        event: leader_event,
        next: |known| h.observe(&req.path, known.as_deref(), Some(STREAM_POLL))
    )
}

pub(super) async fn acknowledge(
    service: &Service,
    request: Request<pb::AcknowledgeRequest>,
) -> Result<Response<pb::Empty>, Status> {
    let req = request.into_inner();
    service
        .measured("Acknowledge", "", async {
            let (_, entry) = service.entry(req.session, req.handle)?;
            let mut slot = entry.held.lock().await;
            let Some(h) = slot.as_mut().and_then(Claim::election) else {
                return Err(wire::wrong_handle(format!("handle: {} holds no leadership", req.handle)));
            };
            h.acknowledge(&req.note).await.map(|()| pb::Empty {}).map_err(status)
        })
        .await
}

/// Who leads (none: nobody) as a `LeaderEvent`; nobody is the empty event.
fn leader_event(info: Option<LeaderInfo>) -> pb::LeaderEvent {
    match info {
        Some(i) => pb::LeaderEvent {
            leader_id: i.id,
            node: i.node,
            fencing_token: i.token,
            acknowledged: i.acknowledged,
        },
        None => pb::LeaderEvent::default(),
    }
}
