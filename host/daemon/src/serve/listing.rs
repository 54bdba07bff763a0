//! Listings: the client sessions of a state (`Admin.ListSessions`) with the claims each holds,
//! and every claim under a prefix of the state's namespace, read from ZooKeeper
//! (`Admin.ListClaims`). Each state is one tenant's (or the one host's): a listing never shows
//! another's. The web console reads the same two functions.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::state::{ClientSession, Shown, State};
use crate::wire::status;
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::family::Family;
use wazoo_runtime::holders::{self, Contenders};
use wazoo_runtime::{ClaimKind, Mode};

use wazoo_proto as pb;

/// The client sessions open on `state`, oldest first, each with the claims it holds (by handle).
pub(crate) fn sessions(state: &State) -> pb::SessionList {
    let open: Vec<Arc<ClientSession>> = state.sessions.lock().unwrap().values().cloned().collect();
    let mut sessions: Vec<pb::ClientSessionInfo> =
        open.iter().filter(|s| s.alive()).map(|s| session(s)).collect();
    sessions.sort_by_key(|s| (s.opened_ms, s.session));
    pb::SessionList { sessions }
}

/// One client session as the listing shows it.
fn session(session: &ClientSession) -> pb::ClientSessionInfo {
    let entries: Vec<(u64, Arc<super::state::Entry>)> =
        session.handles.lock().unwrap().iter().map(|(id, e)| (*id, e.clone())).collect();
    let mut claims: Vec<(u64, pb::SessionClaim)> =
        entries.iter().map(|(id, e)| (*id, claim(&e.shown))).collect();
    claims.sort_by_key(|(handle, _)| *handle);
    let mut claims: Vec<pb::SessionClaim> = claims.into_iter().map(|(_, c)| c).collect();
    // Then what its calls wait for, oldest first: no handle, node or token yet.
    let mut waits: Vec<pb::SessionClaim> = session
        .waits
        .lock()
        .unwrap()
        .values()
        .map(|w| pb::SessionClaim {
            path: w.path.clone(),
            family: w.family.clone(),
            since_ms: millis(w.since),
            ..pb::SessionClaim::default()
        })
        .collect();
    waits.sort_by(|a, b| (a.since_ms, &a.path).cmp(&(b.since_ms, &b.path)));
    claims.extend(waits);
    pb::ClientSessionInfo {
        session: tag(session.id),
        name: session.name.clone(),
        peer: (*session.peer.lock().unwrap()).map(|p| p.to_string()).unwrap_or_default(),
        opened_ms: millis(session.opened),
        claims,
    }
}

/// What a listing shows of client session `id`: a tag of it, keyed by a secret drawn when the
/// daemon starts. The id itself is what calls on the session present (with a handle, a
/// Release), so no listing shows it, nor a handle.
fn tag(id: u64) -> u64 {
    use sha2::Digest as _;
    static KEY: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    let key = KEY.get_or_init(|| uuid::Uuid::new_v4().into_bytes());
    let digest = sha2::Sha256::new().chain_update(key).chain_update(id.to_be_bytes()).finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// A kept claim: held (a handle is kept once its claim is granted).
fn claim(shown: &Shown) -> pb::SessionClaim {
    pb::SessionClaim {
        handle: 0,
        path: path_of(shown.kind, &shown.node),
        family: family_of(shown.kind, &shown.node),
        holds: true,
        node: shown.node.clone(),
        fencing_token: shown.token,
        since_ms: millis(shown.since),
    }
}

/// The path a claim was taken at, told by its node: a lease's node is in the semaphore's
/// `leases/`; every other claim's is a child of its path. None for a kept instance.
fn path_of(kind: ClaimKind, node: &str) -> String {
    let parent = |p: &str| match p.rfind('/') {
        Some(0) => "/".to_string(),
        Some(i) => p[..i].to_string(),
        None => String::new(),
    };
    match kind {
        ClaimKind::Lease => parent(&parent(node)),
        ClaimKind::Instance => String::new(),
        _ => parent(node),
    }
}

/// A kept claim's family, as `SessionClaim.family` names it: as the metrics name its family
/// ([`crate::metrics::family_of`]), a described family by its name, and what is no claim a
/// client contends for by what it is.
fn family_of(kind: ClaimKind, node: &str) -> String {
    match (kind, crate::metrics::family_of(kind)) {
        (ClaimKind::Described, _) => {
            let name = node.rsplit('/').next().unwrap_or(node);
            Family::of_child(name).map_or("described", |f| f.name)
        }
        (_, Some(family)) => family,
        (ClaimKind::QueueItem, None) => "queue-item",
        (ClaimKind::Participant, None) => "double-barrier",
        (_, None) => "instance",
    }
    .to_string()
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Every claim at `prefix` or below it in `state`'s namespace, read from ZooKeeper (see
/// [`holders::under`]): INVALID_ARGUMENT for a bad path, RESOURCE_EXHAUSTED (`limit-exceeded`)
/// past [`holders::MAX_VISITED`] nodes, or past what is left of the state's operations per
/// second (each request of the walk is spent from them, as a guest's call is). An empty prefix
/// is the root.
pub(crate) async fn claims(state: &State, prefix: &str) -> Result<pb::ClaimList, tonic::Status> {
    let prefix = if prefix.is_empty() { "/" } else { prefix };
    let live = state.live().await?;
    let spend = |n| state.host.spend_ops(n);
    let found = holders::under(&live.zk(), prefix, holders::MAX_VISITED, &spend)
        .await
        .map_err(|e| status(RecipeError::Zk(e)))?;
    let claims = found.into_iter().map(|(path, found)| info(path, found)).collect();
    Ok(pb::ClaimList { claims })
}

/// The most bytes of a contender's data a listing of claims carries: an identity is a line, and
/// a client that wrote a megabyte there must not make every listing too big to answer.
pub(crate) const LISTED_DATA: usize = 1024;

/// A claim found, on the wire, each contender's data cut at [`LISTED_DATA`] bytes.
fn info(path: String, found: Contenders) -> pb::ClaimInfo {
    let kind = wazoo_proto::holders_kind(found.kind.name);
    let cut = |mut c: holders::Contender| {
        c.data.truncate(LISTED_DATA);
        c
    };
    pb::ClaimInfo {
        path,
        kind: kind as i32,
        contenders: found.contenders.into_iter().map(cut).map(contender).collect(),
    }
}

/// A contender on the wire, as `Holders` gives it.
pub(crate) fn contender(c: holders::Contender) -> pb::Contender {
    pb::Contender {
        node: c.node,
        sequence: c.sequence,
        holds: c.state == holders::State::Holds,
        mode: match c.mode {
            None => pb::ContenderMode::Unspecified,
            Some(Mode::Read) => pb::ContenderMode::Read,
            Some(Mode::Write) => pb::ContenderMode::Write,
        } as i32,
        data: c.data,
        session: c.session,
        fencing_token: c.token,
        since_ms: c.since_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_told_by_nodes() {
        assert_eq!(path_of(ClaimKind::Lock, "/a/b/_c_x-lock-0000000001"), "/a/b");
        assert_eq!(path_of(ClaimKind::Lease, "/s/leases/_c_x-lease-0000000001"), "/s");
        assert_eq!(path_of(ClaimKind::Lock, "/_c_x-lock-0000000001"), "/");
        assert_eq!(path_of(ClaimKind::Instance, ""), "");
        assert_eq!(family_of(ClaimKind::Write, "/a/x"), "write-lock");
    }
}
