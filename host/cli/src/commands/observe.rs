//! What claims look like from outside, and what others can do to them: `leader`, `holders`,
//! `revoke` and `fence check|write`.

use std::time::Duration;

use wazoo_runtime::fence::{Holder, Written};
use wazoo_runtime::holders::{Kind, State};
use wazoo_runtime::LeaderInfo;

use super::check_path;
use crate::backend::Backend;
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
    let found =
        backend.holders(path, kind, leases).await.map_err(|f| f.into_error(format!("holders of {path}")))?;
    let rows = found.contenders.iter().map(|c| show::Contender {
        holds: c.state == State::Holds,
        node: &c.node,
        mode: c.mode.map(mode_name),
        token: c.token,
        session: c.session,
        data: &c.data,
    });
    show::contenders(json, found.kind.name(), rows);
    Ok(if found.contenders.is_empty() { no_holders(path) } else { 0 })
}

/// `holders` found nobody holding or waiting: exit status 1.
fn no_holders(path: &str) -> u8 {
    eprintln!("wazoo: nobody holds or waits at {path}");
    exit::NOTHING
}

/// `wazoo revoke`: `released` if the holder let go, `forced` if its node was deleted after
/// `grace`.
pub(crate) async fn revoke(
    backend: &impl Backend,
    node: &str,
    grace: Option<Duration>,
) -> anyhow::Result<u8> {
    check_path("node", node)?;
    let released = backend.revoke(node, grace).await.map_err(|f| f.into_error(format!("revoking {node}")))?;
    out!("{}", if released { "released" } else { "forced" });
    Ok(0)
}

/// `fence check|write`.
pub(crate) async fn fence(backend: &impl Backend, command: FenceCommand) -> anyhow::Result<u8> {
    for (kind, path) in command.paths() {
        check_path(kind, path)?;
    }
    match command {
        FenceCommand::Check { node, token } => {
            let holder =
                backend.fence_check(&node, token).await.map_err(|f| f.into_error(format!("fence {node}")))?;
            Ok(fence_checked(&node, token, holder))
        }
        FenceCommand::Write { node, token, path, value } => {
            let written = backend
                .fence_write(&node, token, &path, value.as_bytes())
                .await
                .map_err(|f| f.into_error(format!("fence {path}")))?;
            Ok(fence_written(&node, token, &path, written))
        }
    }
}

/// What `fence check` says: exit status 0 if `node` still has `token`, else 1 and why.
fn fence_checked(node: &str, token: i64, holder: Holder) -> u8 {
    match holder {
        Holder::Holds => {
            out!("{node} holds token {token}");
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
/// was refused (exit status 1).
fn fence_written(node: &str, token: i64, path: &str, written: Written) -> u8 {
    match written {
        Written::Accepted { version, previous } => {
            let was = previous.map(|p| format!(" (was token {p})")).unwrap_or_default();
            out!("written {path} version {version} token {token}{was}");
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
