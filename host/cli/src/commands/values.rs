//! `queue`, `config`, `counter` and `group list|watch`: values kept in ZooKeeper, read and
//! written through their recipes.

use wazoo_runtime::{Entry, Membership};

use super::{check_path, timed_out, Waited};
use crate::backend::{Backend, Failure};
use crate::cli::{ConfigCommand, CounterCommand, QueueCommand};
use crate::{exit, show};

pub(crate) async fn queue(backend: &impl Backend, command: QueueCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("queue", &path)?;
    let failed = |f: Failure| f.into_error(format!("queue {path}"));
    match command {
        QueueCommand::Put { data, priority, ephemeral, .. } => {
            if ephemeral {
                eprintln!("wazoo: note: an ephemeral item lives only as long as this command");
            }
            let put = backend.queue_put(&path, data.into_bytes(), priority, ephemeral).await;
            let shown = put.map_err(failed).map(|node| out!("{node}"));
            // An ephemeral item's handle (or session) ends here, with the command.
            backend.end().await;
            shown?;
        }
        QueueCommand::Take { timeout, .. } => match backend.queue_take(&path, timeout).await {
            Ok(data) => print_item(&data)?,
            Err(Failure::Timeout) => return Ok(timed_out(Waited::QueueItem, &path, timeout)),
            Err(f) => return Err(failed(f)),
        },
        QueueCommand::Len { json, .. } => {
            show::number(json, "len", i64::from(backend.queue_len(&path).await.map_err(failed)?))
        }
    }
    Ok(0)
}

/// A taken queue item's data, as it is, and a newline.
fn print_item(data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout();
    out.write_all(data)?;
    out.write_all(b"\n")?;
    Ok(())
}

pub(crate) async fn config(backend: &impl Backend, command: ConfigCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("config", &path)?;
    let failed = |f: Failure| f.into_error(format!("config {path}"));
    match command {
        ConfigCommand::Get { json, .. } => match backend.config_get(&path).await.map_err(failed)? {
            Some(entry) => show::value(json, entry.version, &entry.data),
            None => return Ok(no_value(&path)),
        },
        ConfigCommand::Set { value, version, .. } => {
            match backend.config_set(&path, value.into_bytes(), version).await {
                Ok(version) => out!("{version}"),
                Err(Failure::Stale(_)) => return Ok(stale_version(&path, version)),
                Err(f) => return Err(failed(f)),
            }
        }
        ConfigCommand::Watch { json, .. } => {
            let mut show = |now: Option<&Entry>| show::entry(json, now.map(|e| (e.version, &e.data[..])));
            backend.config_watch(&path, &mut show).await.map_err(failed)?;
        }
    }
    Ok(0)
}

/// `config get` found nothing: exit status 1.
fn no_value(path: &str) -> u8 {
    eprintln!("wazoo: no value at {path}");
    exit::NOTHING
}

/// `config set --version N` found another version: exit status 1.
fn stale_version(path: &str, version: Option<i32>) -> u8 {
    eprintln!("wazoo: {path} is no longer at version {}", version.unwrap_or(-1));
    exit::NOTHING
}

pub(crate) async fn counter(backend: &impl Backend, command: CounterCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("counter", &path)?;
    let failed = |f: Failure| f.into_error(format!("counter {path}"));
    match command {
        CounterCommand::Get { json, format, .. } => {
            show::number(json, "value", backend.counter_get(&path, format).await.map_err(failed)?)
        }
        CounterCommand::Add { delta, format, .. } => {
            out!("{}", backend.counter_add(&path, delta, format).await.map_err(failed)?)
        }
    }
    Ok(0)
}

/// The members as `show` lists them.
fn listed(m: &Membership) -> Vec<(&str, &[u8])> {
    m.members.iter().map(|m| (m.name.as_str(), m.data.as_slice())).collect()
}

/// `group list`: the members now (exit status 1 if none).
pub(crate) async fn group_list(backend: &impl Backend, path: &str, json: bool) -> anyhow::Result<u8> {
    check_path("group", path)?;
    let membership = backend.group_members(path).await.map_err(|f| f.into_error(format!("group {path}")))?;
    show::members(json, listed(&membership));
    if membership.members.is_empty() {
        return Ok(no_members(path));
    }
    Ok(0)
}

/// `group watch`: the members now and after every change, until the watch fails.
pub(crate) async fn group_watch(backend: &impl Backend, path: &str, json: bool) -> anyhow::Result<u8> {
    check_path("group", path)?;
    let mut show = |now: &Membership| show::membership(json, listed(now));
    backend.group_watch(path, &mut show).await.map_err(|f| f.into_error(format!("group {path}")))?;
    Ok(0)
}

/// `group list` found no members: exit status 1.
fn no_members(path: &str) -> u8 {
    eprintln!("wazoo: group {path} has no members");
    exit::NOTHING
}
