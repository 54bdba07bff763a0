//! What claims look like from outside, and what others can do to them: `leader`, `holders`,
//! `revoke` and `fence check|write`.

use std::time::Duration;

use serde_json::json;
use wazoo_runtime::fence::{Holder, Written};
use wazoo_runtime::holders::{Kind, State};
use wazoo_runtime::LeaderInfo;

use crate::args::check_path;
use crate::backend::{Backend, Failure};
use crate::cli::{mode_name, FenceCommand};
use crate::{exit, show};

/// `wazoo leader`: the leader now (exit status 1 if nobody leads); with `watch`, again on every
/// change until interrupted.
pub(crate) async fn leader(
    backend: &impl Backend,
    path: &str,
    watch: bool,
    recipe: &str,
    json: bool,
) -> anyhow::Result<u8> {
    check_election(path)?;
    let show = |now: Option<&LeaderInfo>| {
        let shown = now.map(|l| show::Leader {
            id: &l.id,
            token: l.token,
            node: &l.node,
            acknowledged: l.acknowledged.as_deref(),
        });
        show::leader(json, shown);
    };
    let reading = || format!("reading the leader of {path}");
    if !watch {
        let now = backend.leader(path, recipe).await.map_err(|f| f.into_error(reading()))?;
        show(now.as_ref());
        return Ok(if now.is_some() { 0 } else { no_leader(path) });
    }
    let mut shown = false;
    let watched = backend
        .leader_watch(path, recipe, &mut |now: Option<&LeaderInfo>| {
            show(now);
            shown = true;
        })
        .await;
    match watched {
        Ok(()) => Ok(0),
        // Failing to read the first leader is the same failure as without --watch.
        Err(f) if !shown => Err(f.into_error(reading())),
        Err(f) => Err(f.into_error(format!("watching the leader of {path}"))),
    }
}

/// `leader` found nobody leading: exit status 1.
fn no_leader(path: &str) -> u8 {
    eprintln!("wazoo: nobody leads {path}");
    exit::NOTHING
}

/// `wazoo leader` reads any election path, even one of a single component.
fn check_election(path: &str) -> anyhow::Result<()> {
    wazoo_runtime::paths::check(path).map_err(|why| exit::usage(format!("invalid election path: {why}")))
}

/// `wazoo holders`: the contenders in queue order (exit status 1 if none).
pub(crate) async fn holders(
    backend: &impl Backend,
    path: &str,
    kind: Option<Kind>,
    leases: Option<u32>,
    json: bool,
) -> anyhow::Result<u8> {
    check_path("claim", path)?;
    // Nothing there is an empty answer; a refusal (children of no known format, or of several
    // kinds) means the kind must be given: bad usage, never "nobody".
    let found = backend.holders(path, kind, leases).await.map_err(|f| match f {
        Failure::Error { code: exit::NOTHING, text, .. } => exit::usage(format!("holders of {path}: {text}")),
        f => f.into_error(format!("holders of {path}")),
    })?;
    let rows = found.contenders.iter().map(|c| show::Contender {
        holds: c.state == State::Holds,
        node: &c.node,
        mode: c.mode.map(mode_name),
        token: c.token,
        session: c.session,
        data: &c.data,
    });
    show::contenders(json, found.kind.name, rows);
    Ok(if found.contenders.is_empty() { no_holders(path) } else { 0 })
}

/// `holders` found nobody holding or waiting: exit status 1.
fn no_holders(path: &str) -> u8 {
    eprintln!("wazoo: nobody holds or waits at {path}");
    exit::NOTHING
}

/// `wazoo revoke`: `asked` without `--grace` (the holder was asked to let go; nothing waited
/// for), `released` if the holder let go within `grace`, `forced` if its node was deleted after
/// it (JSON `{"node","outcome"}`); a node that does not exist is exit status 1.
pub(crate) async fn revoke(
    backend: &impl Backend,
    node: &str,
    grace: Option<Duration>,
    json: bool,
) -> anyhow::Result<u8> {
    check_path("node", node)?;
    // A node that is not there was never held: a mistyped node is no revocation (exit 1).
    if let Ok(Holder::Gone) = backend.fence_check(node, 0).await {
        if json {
            show::line(json!({"node": node, "outcome": null}));
        }
        eprintln!("wazoo: {node} does not exist: nothing to revoke");
        return Ok(exit::NOTHING);
    }
    let revoked = backend.revoke(node, grace).await.map_err(|f| f.into_error(format!("revoking {node}")))?;
    let outcome = revoked.word();
    match json {
        false => out!("{outcome}"),
        true => show::line(json!({"node": node, "outcome": outcome})),
    }
    Ok(0)
}

/// `fence check|write`.
pub(crate) async fn fence(backend: &impl Backend, command: FenceCommand) -> anyhow::Result<u8> {
    for (kind, path) in command.paths() {
        check_path(kind, path)?;
    }
    match command {
        FenceCommand::Check { node, token, json } => {
            let holder =
                backend.fence_check(&node, token).await.map_err(|f| f.into_error(format!("fence {node}")))?;
            if json {
                let (holds, reason, found) = match holder {
                    Holder::Holds => (true, None, None),
                    Holder::Gone => (false, Some("gone"), None),
                    Holder::OtherToken(other) => (false, Some("other-token"), Some(other)),
                };
                show::line(
                    json!({"node": node, "token": token, "holds": holds, "reason": reason, "found": found}),
                );
            }
            Ok(fence_checked(&node, token, holder, json))
        }
        FenceCommand::Write { node, token, path, value, json } => {
            let value = crate::args::value_or_stdin(value)?;
            let written = backend
                .fence_write(&node, token, &path, &value)
                .await
                .map_err(|f| f.into_error(format!("fence {path}")))?;
            if json {
                let (done, version, previous, reason, found) = match written {
                    Written::Accepted { version, previous } => (true, Some(version), previous, None, None),
                    Written::Gone => (false, None, None, Some("gone"), None),
                    Written::OtherToken(other) => (false, None, None, Some("other-token"), Some(other)),
                    Written::Superseded { last } => (false, None, None, Some("superseded"), Some(last)),
                };
                show::line(json!({
                    "path": path,
                    "node": node,
                    "token": token,
                    "written": done,
                    "version": version,
                    "previous": previous,
                    "reason": reason,
                    "found": found,
                }));
            }
            Ok(fence_written(&node, token, &path, written, json))
        }
    }
}

/// What `fence check` says: exit status 0 if `node` still has `token`, else 1 and why (with
/// `json`, the JSON line says it on stdout and only the reason goes to stderr).
fn fence_checked(node: &str, token: i64, holder: Holder, json: bool) -> u8 {
    match holder {
        Holder::Holds => {
            if !json {
                out!("{node} holds token {token}");
            }
            0
        }
        Holder::Gone => {
            eprintln!("wazoo: {node} is gone: token {token} no longer holds");
            exit::NOTHING
        }
        Holder::OtherToken(other) => {
            eprintln!("wazoo: {node} has token {other}, not {token}");
            exit::NOTHING
        }
    }
}

/// What `fence write` says: `written PATH version V token T` (exit status 0), or why the write
/// was refused (exit status 1); with `json`, the JSON line says it on stdout and only a refusal
/// goes to stderr.
fn fence_written(node: &str, token: i64, path: &str, written: Written, json: bool) -> u8 {
    match written {
        Written::Accepted { version, previous } => {
            if !json {
                let was = previous.map(|p| format!(" (was token {p})")).unwrap_or_default();
                out!("written {path} version {version} token {token}{was}");
            }
            return 0;
        }
        Written::Gone => eprintln!("wazoo: refused: {node} is gone: token {token} no longer holds"),
        Written::OtherToken(other) => eprintln!("wazoo: refused: {node} has token {other}, not {token}"),
        Written::Superseded { last } => {
            eprintln!("wazoo: refused: {path} was written with token {last}, above {token}")
        }
    }
    exit::NOTHING
}
