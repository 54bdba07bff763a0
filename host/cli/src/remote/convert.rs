//! The daemon's messages (`wazoo_proto`) to and from the runtime's types, which the commands
//! share with the local path: every conversion of [`super::Remote`] is here.

use std::time::Duration;

use wazoo_client::Ask;
use wazoo_proto as pb;
use wazoo_runtime::family::{self, Family};
use wazoo_runtime::fence::{Holder, Written};
use wazoo_runtime::holders::{Contender, Contenders, Kind, State};
use wazoo_runtime::{
    Ballot, CacheChange, CachedNode, CounterFormat, Entry, LeaderInfo, Member, Membership, Mode, Outcome,
    TxMode, Want,
};

use crate::backend::{Ending, RecipeRow, Revocation, SessionClaim, SessionInfo};

/// A timeout as the requests carry it: whole milliseconds.
pub(super) fn millis(timeout: Option<Duration>) -> Option<u64> {
    timeout.map(|t| t.as_millis().try_into().unwrap_or(u64::MAX))
}

/// A request naming a path, for the family's default recipe.
pub(super) fn by_path(path: &str) -> pb::PathRequest {
    pb::PathRequest { path: path.to_string(), recipe: String::new() }
}

pub(super) fn entry(e: pb::ConfigEntry) -> Option<Entry> {
    e.exists.then_some(Entry { data: e.data, version: e.version })
}

pub(super) fn membership(m: pb::Membership) -> Membership {
    let members = m.members.into_iter().map(|m| Member { name: m.name, data: m.data }).collect();
    Membership { members, version: m.version }
}

/// The leader an event names; none when nobody leads (its node is empty).
pub(super) fn leader(event: pb::LeaderEvent) -> Option<LeaderInfo> {
    (!event.node.is_empty()).then_some(LeaderInfo {
        node: event.node,
        id: event.leader_id,
        token: event.fencing_token,
        acknowledged: event.acknowledged,
    })
}

pub(super) fn holders_kind(kind: Option<Kind>) -> pb::HoldersKind {
    match kind {
        None => pb::HoldersKind::Detect,
        Some(kind) => wazoo_proto::holders_kind(kind.name),
    }
}

pub(super) fn contenders(reply: pb::HoldersReply) -> Contenders {
    let kind = match reply.described.as_str() {
        "" => wazoo_proto::holders_kind_name(reply.kind()).and_then(Family::named).unwrap_or(&family::LOCK),
        // A family the daemon describes and this side does not: labelled by its name.
        described => Family::named(described).unwrap_or_else(|| family::unknown(described)),
    };
    let contenders = reply.contenders.into_iter().map(contender).collect();
    Contenders { kind, contenders }
}

fn contender(c: pb::Contender) -> Contender {
    Contender {
        state: if c.holds { State::Holds } else { State::Waits },
        mode: match c.mode() {
            pb::ContenderMode::Read => Some(Mode::Read),
            pb::ContenderMode::Write => Some(Mode::Write),
            pb::ContenderMode::Unspecified => None,
        },
        node: c.node,
        sequence: c.sequence,
        data: c.data,
        session: c.session,
        token: c.fencing_token,
        since_ms: c.since_ms,
    }
}

/// The claims `Admin.ListClaims` found, by path.
pub(super) fn claim_list(reply: pb::ClaimList) -> Vec<(String, Contenders)> {
    reply
        .claims
        .into_iter()
        .map(|c| {
            // A family the daemon describes: the wire names no kind (`ClaimInfo` has no name).
            static DESCRIBED: std::sync::OnceLock<&'static Family> = std::sync::OnceLock::new();
            let kind = wazoo_proto::holders_kind_name(c.kind())
                .and_then(Family::named)
                .unwrap_or_else(|| DESCRIBED.get_or_init(|| family::unknown("described")));
            (c.path, Contenders { kind, contenders: c.contenders.into_iter().map(contender).collect() })
        })
        .collect()
}

/// The client sessions `Admin.ListSessions` gave.
pub(super) fn sessions(reply: pb::SessionList) -> Vec<SessionInfo> {
    reply
        .sessions
        .into_iter()
        .map(|s| SessionInfo {
            id: s.session,
            name: s.name,
            peer: s.peer,
            opened_ms: s.opened_ms,
            claims: s
                .claims
                .into_iter()
                .map(|c| SessionClaim {
                    handle: c.handle,
                    path: c.path,
                    family: c.family,
                    holds: c.holds,
                    node: c.node,
                    token: c.fencing_token,
                    since_ms: c.since_ms,
                })
                .collect(),
        })
        .collect()
}

pub(super) fn holder(reply: &pb::FenceCheckReply) -> Holder {
    match reply.holder() {
        pb::FenceHolder::Holds => Holder::Holds,
        pb::FenceHolder::Gone => Holder::Gone,
        pb::FenceHolder::OtherToken => Holder::OtherToken(reply.holder_token),
    }
}

pub(super) fn written(reply: &pb::FenceWriteReply) -> Written {
    match (reply.written, reply.holder()) {
        (true, _) => Written::Accepted { version: reply.version, previous: reply.last_token },
        (false, pb::FenceHolder::Gone) => Written::Gone,
        (false, pb::FenceHolder::OtherToken) => Written::OtherToken(reply.holder_token),
        (false, pb::FenceHolder::Holds) => Written::Superseded { last: reply.last_token.unwrap_or_default() },
    }
}

pub(super) fn tx_mode(mode: TxMode) -> pb::TxMode {
    match mode {
        TxMode::Coordinated => pb::TxMode::Coordinated,
        TxMode::AllToAll => pb::TxMode::AllToAll,
    }
}

pub(super) fn counter_format(format: CounterFormat) -> pb::CounterFormat {
    match format {
        CounterFormat::Kazoo => pb::CounterFormat::Kazoo,
        CounterFormat::CuratorShared => pb::CounterFormat::CuratorShared,
        CounterFormat::CuratorAtomic => pb::CounterFormat::CuratorAtomic,
    }
}

pub(super) fn ballot(ballot: Ballot) -> pb::Ballot {
    match ballot {
        Ballot::Commit => pb::Ballot::Commit,
        Ballot::Abort => pb::Ballot::Abort,
    }
}

pub(super) fn outcome(reply: &pb::TxOutcome) -> Outcome {
    match reply.committed {
        true => Outcome::Committed,
        false => Outcome::Aborted,
    }
}

/// A component as `recipes list` shows it, and why a newer file was refused while an older
/// version serves.
pub(super) fn recipe_row(r: pb::Recipe) -> RecipeRow {
    let refused = (!r.refused.is_empty()).then(|| format!("refused: {}", r.refused));
    let serving = !r.world.is_empty();
    RecipeRow {
        name: r.name,
        world: match (serving, &refused) {
            (true, _) => r.world,
            (false, Some(refused)) => refused.clone(),
            (false, None) => "unknown".to_string(),
        },
        hash: if r.version.is_empty() { "-".to_string() } else { r.version },
        bytes: r.bytes,
        path: r.path,
        note: if serving { refused } else { None },
        embedded: r.embedded,
    }
}

/// What a Revoke came to: its `outcome`, or for a daemon older than that field its `released`
/// (which such a daemon also said when it only asked).
pub(super) fn revoked(reply: &pb::RevokeReply, graced: bool) -> Revocation {
    match pb::RevokeOutcome::try_from(reply.outcome) {
        Ok(pb::RevokeOutcome::Asked) => Revocation::Asked,
        Ok(pb::RevokeOutcome::Released) => Revocation::Released,
        Ok(pb::RevokeOutcome::Forced) => Revocation::Forced,
        Ok(pb::RevokeOutcome::Unspecified) | Err(_) => Revocation::of(reply.released, graced),
    }
}

/// Why a claim was lost, in the client's words ([`wazoo_client::Lost`]'s), which are the local
/// path's for the same loss.
pub(super) fn ending(lost: wazoo_client::Lost) -> Ending {
    Ending { why: lost.to_string(), revoked: lost == wazoo_client::Lost::Revoked }
}

/// What a contender for `want` asks the daemon for.
pub(super) fn ask(want: &Want) -> Ask {
    match want {
        Want::Lock => Ask::Acquire { family: pb::Family::Lock, leases: 0 },
        Want::ReadWrite(Mode::Read) => Ask::Acquire { family: pb::Family::ReadLock, leases: 0 },
        Want::ReadWrite(Mode::Write) => Ask::Acquire { family: pb::Family::WriteLock, leases: 0 },
        Want::Lease { max_leases } => Ask::Acquire { family: pb::Family::Semaphore, leases: *max_leases },
        Want::Leadership { id } => Ask::Campaign { id: id.clone() },
        Want::Membership { name, data } => Ask::Join { name: name.clone(), data: data.clone() },
        Want::Claim { family, data } => {
            Ask::Described { family: family.name.to_string(), data: data.clone() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_is_worded_as_the_local_path_words_it() {
        use wazoo_client::Lost as Remote;
        use wazoo_runtime::{Lost as Local, SessionEnd};
        let same = [
            (Remote::SessionExpired, Local::Session(SessionEnd::Expired)),
            (Remote::SessionClosed, Local::Session(SessionEnd::Closed)),
            (Remote::NodeDeleted, Local::NodeDeleted),
            (Remote::Revoked, Local::Revoked),
        ];
        for (remote, local) in same {
            let (remote, local) = (ending(remote), Ending::from(local));
            assert_eq!((remote.why, remote.revoked), (local.why, local.revoked));
        }
        assert!(ending(Remote::Revoked).revoked && !ending(Remote::CutOff).revoked);
    }

    #[test]
    fn nobody_leads_when_the_event_names_no_node() {
        assert!(leader(pb::LeaderEvent::default()).is_none());
        let event = pb::LeaderEvent {
            leader_id: "a".into(),
            node: "/e/n".into(),
            fencing_token: 7,
            acknowledged: Some("a running x".into()),
        };
        let l = leader(event).expect("a leader");
        assert_eq!((l.id.as_str(), l.node.as_str(), l.token), ("a", "/e/n", 7));
        assert_eq!(l.acknowledged.as_deref(), Some("a running x"));
    }

    #[test]
    fn a_refused_fenced_write_says_why() {
        let reply = |written, holder: pb::FenceHolder| pb::FenceWriteReply {
            written,
            holder: holder as i32,
            holder_token: 9,
            last_token: Some(12),
            version: 3,
        };
        let accepted = written(&reply(true, pb::FenceHolder::Holds));
        assert_eq!(accepted, Written::Accepted { version: 3, previous: Some(12) });
        assert_eq!(written(&reply(false, pb::FenceHolder::Gone)), Written::Gone);
        assert_eq!(written(&reply(false, pb::FenceHolder::OtherToken)), Written::OtherToken(9));
        assert_eq!(written(&reply(false, pb::FenceHolder::Holds)), Written::Superseded { last: 12 });
        let check = pb::FenceCheckReply { holder: pb::FenceHolder::OtherToken as i32, holder_token: 4 };
        assert_eq!(holder(&check), Holder::OtherToken(4));
    }

    #[test]
    fn contenders_keep_their_order_state_and_mode() {
        let reply = pb::HoldersReply {
            kind: pb::HoldersKind::ReadWrite as i32,
            contenders: vec![
                pb::Contender {
                    node: "/l/_c_a-__READ__0000000001".into(),
                    sequence: 1,
                    holds: true,
                    mode: pb::ContenderMode::Read as i32,
                    ..Default::default()
                },
                pb::Contender {
                    node: "/l/_c_b-__WRIT__0000000002".into(),
                    sequence: 2,
                    holds: false,
                    mode: pb::ContenderMode::Write as i32,
                    ..Default::default()
                },
            ],
            described: String::new(),
        };
        let found = contenders(reply);
        assert_eq!(found.kind, &family::RWLOCK);
        let seen: Vec<_> = found.contenders.iter().map(|c| (c.sequence, c.state, c.mode)).collect();
        assert_eq!(seen, [(1, State::Holds, Some(Mode::Read)), (2, State::Waits, Some(Mode::Write))]);
        assert_eq!(holders_kind(None), pb::HoldersKind::Detect);
    }

    #[test]
    fn a_recipe_refused_while_an_older_version_serves_is_noted() {
        let serving = pb::Recipe {
            name: "lock".into(),
            world: "wazoo:recipes/lock-recipe@0.1.0".into(),
            version: "abc".into(),
            refused: "bad world".into(),
            ..Default::default()
        };
        let row = recipe_row(serving);
        assert_eq!((row.world.as_str(), row.hash.as_str()), ("wazoo:recipes/lock-recipe@0.1.0", "abc"));
        assert_eq!(row.note.as_deref(), Some("refused: bad world"));
        let refused =
            recipe_row(pb::Recipe { name: "x".into(), refused: "bad".into(), ..Default::default() });
        assert_eq!(
            (refused.world.as_str(), refused.hash.as_str(), refused.note),
            ("refused: bad", "-", None)
        );
    }
}

/// A `WatchEvent` as the cache change it reports (of the node's stat, only what the event has).
pub(crate) fn cache_change(event: pb::WatchEvent) -> CacheChange {
    let kind = pb::WatchKind::try_from(event.kind).unwrap_or(pb::WatchKind::Changed);
    let stat = wazoo_runtime::Stat {
        czxid: event.czxid,
        mzxid: event.mzxid,
        pzxid: 0,
        ctime: 0,
        mtime: 0,
        version: event.version,
        cversion: 0,
        aversion: 0,
        ephemeral_owner: 0,
        data_length: event.data.len() as i32,
        num_children: 0,
    };
    let node = CachedNode { path: event.path, data: event.data, stat };
    match kind {
        pb::WatchKind::Created => CacheChange::Created(node),
        pb::WatchKind::Changed => CacheChange::Changed(node),
        pb::WatchKind::Deleted => CacheChange::Deleted(node),
        pb::WatchKind::Initialized => CacheChange::Initialized,
    }
}
