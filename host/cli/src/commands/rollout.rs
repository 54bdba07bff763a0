//! `recipes publish|status|history|rollback|keygen`: recipes rolled out through the registry in
//! ZooKeeper (`wazoo_runtime::rollout`), on this process's host or through a daemon.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use wazoo_proto as pb;
use wazoo_runtime::signing::SigningKey;

use crate::backend::{Backend, Failure};
use crate::exit;

/// How often `--wait` reads the hosts' reports again.
const WAIT_STEP: Duration = Duration::from_millis(100);

/// What `publish` and `rollback` are told beyond the name.
pub(crate) struct Rollout {
    pub(crate) wait: Option<Duration>,
    pub(crate) json: bool,
}

/// `wazoo recipes publish NAME FILE`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn publish(
    backend: &impl Backend,
    name: &str,
    file: &Path,
    sign: &[std::path::PathBuf],
    canary: Option<(u32, Duration, u64)>,
    new_protocol: bool,
    then: Rollout,
) -> anyhow::Result<u8> {
    wazoo_runtime::rollout::check_name(name).map_err(|e| exit::usage(format!("{e:#}")))?;
    let meta = std::fs::metadata(file).map_err(|e| exit::usage(format!("{}: {e}", file.display())))?;
    if meta.len() > wazoo_runtime::registry::MAX_COMPONENT_BYTES {
        return Err(exit::usage(format!(
            "{} is {} bytes; components may have at most {}",
            file.display(),
            meta.len(),
            wazoo_runtime::registry::MAX_COMPONENT_BYTES
        )));
    }
    let component = std::fs::read(file).map_err(|e| exit::usage(format!("{}: {e}", file.display())))?;
    let sha = wazoo_runtime::rollout::digest(&component);
    let mut signatures = Vec::new();
    for key in sign {
        let key = SigningKey::load(key).map_err(|e| exit::usage(format!("--sign: {e:#}")))?;
        let s = key.sign(&sha);
        signatures.push(pb::ComponentSignature { key: s.key, ed25519: s.ed25519 });
    }
    let (canary_hosts, canary_for_ms, canary_calls) = match canary {
        Some((hosts, serve_for, calls)) => (hosts, serve_for.as_millis() as u64, calls),
        None => (0, 0, 0),
    };
    let request = pb::PublishRequest {
        name: name.to_string(),
        component,
        signatures,
        canary_hosts,
        canary_for_ms,
        canary_calls,
        new_protocol,
        by: publisher(),
    };
    let reply = backend.publish(request).await.map_err(|f| f.into_error(format!("publishing {name}")))?;
    said(name, &reply, then.json);
    match then.wait {
        Some(limit) => wait(backend, name, &reply.sha256, limit, then.json).await,
        None => Ok(0),
    }
}

/// `wazoo recipes rollback NAME [DIGEST]`.
pub(crate) async fn rollback(
    backend: &impl Backend,
    name: &str,
    digest: Option<&str>,
    new_protocol: bool,
    then: Rollout,
) -> anyhow::Result<u8> {
    wazoo_runtime::rollout::check_name(name).map_err(|e| exit::usage(format!("{e:#}")))?;
    if let Some(d) = digest {
        if d.len() < 8 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(exit::usage(format!(
                "DIGEST {d:?}: give at least 8 hex digits of a version's SHA-256 (see `wazoo recipes history {name}`)"
            )));
        }
    }
    let request = pb::RollbackRequest {
        name: name.to_string(),
        digest: digest.unwrap_or_default().to_string(),
        new_protocol,
        by: publisher(),
    };
    let reply = backend.rollback(request).await.map_err(|f| f.into_error(format!("rolling back {name}")))?;
    said(name, &reply, then.json);
    match then.wait {
        Some(limit) => wait(backend, name, &reply.sha256, limit, then.json).await,
        None => Ok(0),
    }
}

/// Who the history says published: `USER@HOSTNAME`.
fn publisher() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "someone".to_string());
    format!("{user}@{}", wazoo_runtime::rollout::host_name())
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

fn protocol(p: &str) -> &str {
    if p.is_empty() {
        "no protocol declared"
    } else {
        p
    }
}

/// What a publish or rollback did, on stdout.
fn said(name: &str, r: &pb::PublishReply, json: bool) {
    if json {
        out!(
            "{}",
            serde_json::json!({"name": name, "action": r.action, "sha256": r.sha256, "protocol": r.protocol,
                "world": r.world, "bytes": r.bytes, "stored": r.stored, "chunks": r.chunks,
                "previous": r.previous})
        );
        return;
    }
    let what = match r.action.as_str() {
        "canary" => "is the canary: the hosts that take it serve it first".to_string(),
        "rollback" => format!("is current again (was {})", short(&r.previous)),
        _ if r.previous.is_empty() => "is current".to_string(),
        _ => format!("is current (was {})", short(&r.previous)),
    };
    out!(
        "{name} {} ({}, {}, {} bytes, {} stored in {} chunks) {what}",
        short(&r.sha256),
        r.world,
        protocol(&r.protocol),
        r.bytes,
        r.stored,
        r.chunks
    );
}

/// `wazoo recipes status NAME`.
pub(crate) async fn status(
    backend: &impl Backend,
    name: &str,
    wait_for: Option<Duration>,
    json: bool,
) -> anyhow::Result<u8> {
    wazoo_runtime::rollout::check_name(name).map_err(|e| exit::usage(format!("{e:#}")))?;
    if let Some(limit) = wait_for {
        return wait(backend, name, "", limit, json).await;
    }
    let r = backend.rollout(name).await.map_err(|f| f.into_error(format!("reading {name}'s rollout")))?;
    print_status(name, &r, json);
    Ok(0)
}

fn print_status(name: &str, r: &pb::RolloutReply, json: bool) {
    if json {
        let hosts: Vec<_> = r
            .hosts
            .iter()
            .map(|h| {
                serde_json::json!({"host": h.host, "state": h.state, "sha256": h.sha256, "protocol": h.protocol,
                    "canary": h.canary, "since_ms": h.since_ms, "calls": h.calls, "traps": h.traps,
                    "limit_hits": h.limit_hits, "reason": h.reason})
            })
            .collect();
        out!(
            "{}",
            serde_json::json!({"name": name, "current": r.current, "protocol": r.current_protocol,
                "canary": r.canary, "canary_hosts": r.canary_hosts, "switched_protocol": r.switched_protocol,
                "hosts": hosts, "members": r.members})
        );
        return;
    }
    let canary = match r.canary.as_str() {
        "" => String::new(),
        c => format!(", canary {} on {} hosts", short(c), r.canary_hosts),
    };
    out!("{name}: current {} ({}){canary}", short(&r.current), protocol(&r.current_protocol));
    if r.hosts.is_empty() && r.members.is_empty() {
        out!("no host follows the registry");
        return;
    }
    out!(
        "{:<28} {:<9} {:<12} {:<24} {:>9} {:>6}  SINCE",
        "HOST",
        "STATE",
        "VERSION",
        "PROTOCOL",
        "CALLS",
        "TRAPS"
    );
    for h in &r.hosts {
        let since = match h.since_ms {
            0 => "-".to_string(),
            ms => humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
                .to_string(),
        };
        let version = if h.sha256.is_empty() { "-" } else { short(&h.sha256) };
        let canary = if h.canary { " (canary)" } else { "" };
        out!(
            "{:<28} {:<9} {:<12} {:<24} {:>9} {:>6}  {since}{canary}",
            h.host,
            h.state,
            version,
            protocol(&h.protocol),
            h.calls,
            h.traps
        );
        if !h.reason.is_empty() {
            out!("    {}", h.reason);
        }
    }
    for m in r.members.iter().filter(|m| !r.hosts.iter().any(|h| h.host == **m)) {
        out!("{m:<28} pending   (follows the registry, has not reported on {name} yet)");
    }
}

/// Waits until every following host serves `sha` (empty: the current version, the canary on a
/// canary host): 0, or 1 when a host refused it, 3 past `limit`.
async fn wait(
    backend: &impl Backend,
    name: &str,
    sha: &str,
    limit: Duration,
    json: bool,
) -> anyhow::Result<u8> {
    let started = Instant::now();
    loop {
        let r = backend.rollout(name).await.map_err(|f| f.into_error(format!("reading {name}'s rollout")))?;
        let current = if sha.is_empty() { r.current.as_str() } else { sha };
        if current != r.current && r.canary != current {
            // Replaced meanwhile (a rollback, a withdrawn canary): no host will serve it.
            return Err(exit::Exit {
                code: exit::NOTHING,
                message: format!(
                    "{name} {} is no longer current (now {})",
                    short(current),
                    short(&r.current)
                ),
            }
            .into());
        }
        // The hosts that do not serve the canary serve the current version.
        let others = if !sha.is_empty() && sha == r.canary { r.current.as_str() } else { current };
        let wanted =
            |h: &pb::HostReport| if h.canary && !r.canary.is_empty() { r.canary.as_str() } else { others };
        // A canary asked for is served once its hosts serve it (and the others the current one).
        let canary_short = !r.canary.is_empty()
            && (sha.is_empty() || sha == r.canary)
            && (r.hosts.iter().filter(|h| h.canary && h.sha256 == r.canary).count() as u32)
                < r.canary_hosts.min(r.members.len().max(r.hosts.len()) as u32);
        // A host that follows the registry but has not reported on NAME yet is behind too.
        let unreported: Vec<&str> =
            r.members.iter().filter(|m| !r.hosts.iter().any(|h| h.host == **m)).map(String::as_str).collect();
        if let Some(h) = r.hosts.iter().find(|h| h.state == "refused" && h.reason.contains(short(wanted(h))))
        {
            print_status(name, &r, json);
            return Err(exit::Exit {
                code: exit::NOTHING,
                message: format!("host {} refused {name} {}: {}", h.host, short(wanted(h)), h.reason),
            }
            .into());
        }
        let behind: Vec<&pb::HostReport> =
            r.hosts.iter().filter(|h| h.state != "serving" || h.sha256 != wanted(h)).collect();
        if behind.is_empty() && unreported.is_empty() && !canary_short {
            print_status(name, &r, json);
            return Ok(0);
        }
        if started.elapsed() >= limit {
            print_status(name, &r, json);
            let mut names: Vec<&str> = behind.iter().map(|h| h.host.as_str()).collect();
            names.extend(unreported);
            if canary_short {
                names.push("the canary's hosts");
            }
            return Err(exit::Exit {
                code: exit::CONFLICT,
                message: format!(
                    "timed out after {}: {} of {} hosts do not serve {name} {} yet ({})",
                    humantime::format_duration(limit),
                    names.len(),
                    r.members.len().max(r.hosts.len()),
                    short(current),
                    names.join(", ")
                ),
            }
            .into());
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
}

/// `wazoo recipes history NAME`.
pub(crate) async fn history(backend: &impl Backend, name: &str, json: bool) -> anyhow::Result<u8> {
    wazoo_runtime::rollout::check_name(name).map_err(|e| exit::usage(format!("{e:#}")))?;
    let r = backend
        .rollout(name)
        .await
        .map_err(|f: Failure| f.into_error(format!("reading {name}'s history")))?;
    for e in &r.history {
        if json {
            out!(
                "{}",
                serde_json::json!({"action": e.action, "sha256": e.sha256, "protocol": e.protocol, "by": e.by,
                    "at_ms": e.at_ms, "reason": e.reason})
            );
            continue;
        }
        let at = humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_millis(e.at_ms));
        let reason = if e.reason.is_empty() { String::new() } else { format!(": {}", e.reason) };
        out!(
            "{at}  {:<8}  {}  {:<24}  by {}{reason}",
            e.action,
            short(&e.sha256),
            protocol(&e.protocol),
            e.by
        );
    }
    Ok(0)
}

/// `wazoo recipes keygen ID --out FILE`.
pub(crate) fn keygen(id: &str, out: &Path) -> anyhow::Result<u8> {
    let key = SigningKey::generate(id).map_err(|e| exit::usage(format!("{e:#}")))?;
    key.save(out).map_err(|e| exit::usage(format!("--out: {e:#}")))?;
    out!("{}", key.trusted_entry().trim_end());
    Ok(0)
}
