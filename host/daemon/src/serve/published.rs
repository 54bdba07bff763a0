//! `Admin.Publish`, `Admin.Rollout` and `Admin.Rollback`: the recipe registry in ZooKeeper
//! ([`wazoo_runtime::rollout`]) through the daemon, each state's in its own namespace (a
//! tenant's under its root), within what the state may publish ([`crate::publishing::Publishing`]). The
//! `*_on` forms take a host and its registry, for the command line's own host too.

use std::sync::Arc;
use std::time::Duration;

use tonic::Status;
use wazoo_proto as pb;
use wazoo_runtime::rollout::{self, CanaryPlan, Publish, Published, Store};
use wazoo_runtime::signing::Signature;

use super::state::State;
use crate::publishing::Publishing;
use crate::wire;
use wazoo_runtime::Host;

/// The registry, on the state's host's session.
async fn store(state: &State) -> Result<Store, Status> {
    let live = state.host.live().await.map_err(wire::no_zookeeper)?;
    Ok(Store::new(live.zk(), rollout::ROOT, state.host.access()))
}

/// Where the publishing host keeps its copy: its follower's directory, else a private one.
fn dir(state: &State) -> std::path::PathBuf {
    match &state.rollout {
        Some(f) => f.dir().to_path_buf(),
        None => std::env::temp_dir().join(format!("wazoo-registry-{}", std::process::id())),
    }
}

fn by(publishing: &Publishing, asked: String) -> String {
    match &publishing.by {
        Some(by) => by.clone(),
        None if asked.is_empty() => "admin".to_string(),
        None => asked.chars().take(128).collect(),
    }
}

fn reply(p: Published) -> pb::PublishReply {
    pb::PublishReply {
        sha256: p.manifest.sha256,
        action: p.event.action,
        protocol: p.manifest.protocol.unwrap_or_default(),
        bytes: p.manifest.bytes,
        stored: p.manifest.stored,
        chunks: p.manifest.chunks,
        previous: p.previous.map(|v| v.sha256).unwrap_or_default(),
        world: p.manifest.world,
    }
}

pub(super) async fn publish(state: &Arc<State>, r: pb::PublishRequest) -> Result<pb::PublishReply, Status> {
    publish_on(&state.host, &store(state).await?, &dir(state), &state.publishing, r).await
}

pub(super) async fn rollback(state: &Arc<State>, r: pb::RollbackRequest) -> Result<pb::PublishReply, Status> {
    rollback_on(&state.host, &store(state).await?, &state.publishing, r).await
}

pub(super) async fn rollout(state: &Arc<State>, name: &str) -> Result<pb::RolloutReply, Status> {
    rollout_on(&state.host, &store(state).await?, name).await
}

/// Publishes `r` on `host` to `store`, keeping the host's copy in `dir`.
pub async fn publish_on(
    host: &Host,
    store: &Store,
    dir: &std::path::Path,
    publishing: &Publishing,
    r: pb::PublishRequest,
) -> Result<pb::PublishReply, Status> {
    if r.component.len() as u64 > wazoo_runtime::registry::MAX_COMPONENT_BYTES {
        return Err(wire::invalid_argument(format!(
            "the component is {} bytes; components may have at most {}",
            r.component.len(),
            wazoo_runtime::registry::MAX_COMPONENT_BYTES
        )));
    }
    let canary = match (r.canary_hosts, r.canary_for_ms, r.canary_calls) {
        (0, 0, 0) => None,
        (0, _, _) => return Err(wire::invalid_argument("canary_for_ms and canary_calls need canary_hosts")),
        (hosts, for_ms, calls) => Some(CanaryPlan { hosts, serve_for: Duration::from_millis(for_ms), calls }),
    };
    let request = Publish {
        name: r.name,
        component: r.component,
        by: by(publishing, r.by),
        signatures: r.signatures.into_iter().map(|s| Signature { key: s.key, ed25519: s.ed25519 }).collect(),
        canary,
        new_protocol: r.new_protocol,
        quota: publishing.quota,
        reserved: publishing.reserved.clone(),
    };
    let trusted = publishing.trusted.as_deref();
    let published = rollout::publish(host, store, dir, trusted, request).await.map_err(wire::refused)?;
    Ok(reply(published))
}

/// Rolls `r.name` back on `store`.
pub async fn rollback_on(
    host: &Host,
    store: &Store,
    publishing: &Publishing,
    r: pb::RollbackRequest,
) -> Result<pb::PublishReply, Status> {
    if !host.allows(&r.name) {
        return Err(wire::refused(anyhow::anyhow!("recipe {:?} is not one this tenant may publish", r.name)));
    }
    let digest = (!r.digest.is_empty()).then_some(r.digest.as_str());
    let done = rollout::rollback(store, &r.name, digest, r.new_protocol, &by(publishing, r.by))
        .await
        .map_err(wire::refused)?;
    Ok(reply(done))
}

/// `name`'s rollout on `store`.
pub async fn rollout_on(host: &Host, store: &Store, name: &str) -> Result<pb::RolloutReply, Status> {
    rollout::check_name(name).map_err(|e| wire::invalid_argument(format!("{e:#}")))?;
    if !host.allows(name) {
        return Err(wire::refused(anyhow::anyhow!("recipe {name:?} is not one this tenant may load")));
    }
    let internal = |e: anyhow::Error| wire::internal(format!("{e:#}"));
    let Some((pointer, _)) = store.pointer(name).await.map_err(internal)? else {
        return Err(wire::not_published(format!("the registry holds no recipe {name:?}")));
    };
    let hosts = store.reports(name).await.map_err(internal)?;
    let history = store.history_of(name).await.map_err(internal)?;
    let members = store.members().await.map_err(internal)?;
    Ok(pb::RolloutReply {
        current: pointer.current.as_ref().map(|c| c.sha256.clone()).unwrap_or_default(),
        current_protocol: pointer.current.as_ref().and_then(|c| c.protocol.clone()).unwrap_or_default(),
        canary: pointer.canary.as_ref().map(|c| c.version.sha256.clone()).unwrap_or_default(),
        canary_hosts: pointer.canary.as_ref().map_or(0, |c| c.hosts),
        switched_protocol: pointer.switched_protocol,
        hosts: hosts
            .into_iter()
            .map(|r| pb::HostReport {
                host: r.host,
                state: r.state,
                sha256: r.sha256,
                protocol: r.protocol.unwrap_or_default(),
                canary: r.canary,
                since_ms: r.since_ms,
                calls: r.calls,
                traps: r.traps,
                limit_hits: r.limit_hits,
                reason: r.reason.unwrap_or_default(),
            })
            .collect(),
        history: history
            .into_iter()
            .map(|e| pb::RolloutEvent {
                action: e.action,
                sha256: e.sha256,
                protocol: e.protocol.unwrap_or_default(),
                by: e.by,
                at_ms: e.at_ms,
                reason: e.reason.unwrap_or_default(),
            })
            .collect(),
        members,
    })
}
