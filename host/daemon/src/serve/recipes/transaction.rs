//! The transaction family: TxCoordinate (a two-phase commit over its sites, coordinated or
//! all-to-all) and TxVote (a site's ballot); and their mode, ballot and outcome on the wire.

use tonic::{Request, Response, Status};

use super::{millis, or, Service};
use crate::wire::{self, no_handle, status};
use wazoo_runtime::{Ballot, Outcome, TxMode, World};

use wazoo_proto as pb;

pub(super) async fn tx_coordinate(
    service: &Service,
    request: Request<pb::TxCoordinateRequest>,
) -> Result<Response<pb::TxOutcome>, Status> {
    let req = request.into_inner();
    let recipe = or(&req.recipe, World::Transaction.default_recipe()).to_string();
    service
        .measured("TxCoordinate", &recipe, async {
            let mode = tx_mode(req.mode)?;
            let mut h = service.host.transaction(&recipe).await.map_err(no_handle)?;
            let outcome = h.coordinate(&req.tx, &req.sites, &req.payload, mode, millis(req.timeout_ms)).await;
            h.close().await;
            outcome.map(tx_outcome).map_err(status)
        })
        .await
}

pub(super) async fn tx_vote(
    service: &Service,
    request: Request<pb::TxVoteRequest>,
) -> Result<Response<pb::TxOutcome>, Status> {
    let req = request.into_inner();
    let recipe = or(&req.recipe, World::Transaction.default_recipe()).to_string();
    service
        .measured("TxVote", &recipe, async {
            let ballot = ballot(req.ballot)?;
            // The vote node is the handle's: it lives for this call only.
            let mut h = service.host.transaction(&recipe).await.map_err(no_handle)?;
            let outcome = h.vote(&req.tx, &req.site, ballot, millis(req.timeout_ms)).await;
            h.close().await;
            outcome.map(tx_outcome).map_err(status)
        })
        .await
}

/// A TxCoordinate request's mode.
fn tx_mode(mode: i32) -> Result<TxMode, Status> {
    match pb::TxMode::try_from(mode) {
        Ok(pb::TxMode::Coordinated) => Ok(TxMode::Coordinated),
        Ok(pb::TxMode::AllToAll) => Ok(TxMode::AllToAll),
        Err(_) => Err(wire::invalid_argument("unknown transaction mode")),
    }
}

/// A TxVote request's ballot.
fn ballot(ballot: i32) -> Result<Ballot, Status> {
    match pb::Ballot::try_from(ballot) {
        Ok(pb::Ballot::Commit) => Ok(Ballot::Commit),
        Ok(pb::Ballot::Abort) => Ok(Ballot::Abort),
        Err(_) => Err(wire::invalid_argument("unknown ballot")),
    }
}

/// How a transaction ended, as a `TxOutcome`.
fn tx_outcome(outcome: Outcome) -> pb::TxOutcome {
    pb::TxOutcome { committed: matches!(outcome, Outcome::Committed) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::ErrorKind;
    use tonic::Code;

    #[test]
    fn unknown_modes_and_ballots_are_invalid_arguments() {
        assert!(matches!(tx_mode(pb::TxMode::AllToAll as i32), Ok(TxMode::AllToAll)));
        assert!(matches!(ballot(pb::Ballot::Commit as i32), Ok(Ballot::Commit)));
        for refused in [tx_mode(7).err(), ballot(7).err()] {
            let s = refused.expect("refused");
            assert_eq!(
                (ErrorKind::of(&s), s.code()),
                (Some(ErrorKind::InvalidArgument), Code::InvalidArgument)
            );
        }
    }
}
