//! The commands that take no claim, written once against a [`Backend`]: `queue`, `config`,
//! `counter` and `group list|watch`. The path is checked before anyone is asked; what is printed
//! and the exit status are decided here.

use wazoo_runtime::Membership;

use crate::backend::{Backend, Failure};
use crate::{
    check_path, no_members, no_value, print_item, show, stale_version, timed_out, ConfigCommand,
    CounterCommand, GroupCommand, QueueCommand, Waited,
};

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
            let mut show =
                |now: Option<&wazoo_runtime::Entry>| show::entry(json, now.map(|e| (e.version, &e.data[..])));
            backend.config_watch(&path, &mut show).await.map_err(failed)?;
        }
    }
    Ok(0)
}

pub(crate) async fn counter(backend: &impl Backend, command: CounterCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("counter", &path)?;
    let failed = |f: Failure| f.into_error(format!("counter {path}"));
    match command {
        CounterCommand::Get { json, .. } => {
            show::number(json, "value", backend.counter_get(&path).await.map_err(failed)?)
        }
        CounterCommand::Add { delta, .. } => {
            out!("{}", backend.counter_add(&path, delta).await.map_err(failed)?)
        }
    }
    Ok(0)
}

pub(crate) async fn group(backend: &impl Backend, command: GroupCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("group", &path)?;
    let failed = |f: Failure| f.into_error(format!("group {path}"));
    fn listed(m: &Membership) -> Vec<(&str, &[u8])> {
        m.members.iter().map(|m| (m.name.as_str(), m.data.as_slice())).collect()
    }
    match command {
        GroupCommand::List { json, .. } => {
            let membership = backend.group_members(&path).await.map_err(failed)?;
            show::members(json, listed(&membership));
            if membership.members.is_empty() {
                return Ok(no_members(&path));
            }
        }
        GroupCommand::Watch { json, .. } => {
            let mut show = |now: &Membership| show::membership(json, listed(now));
            backend.group_watch(&path, &mut show).await.map_err(failed)?;
        }
        GroupCommand::Join { .. } => unreachable!("a claim command: see claims::claim"),
    }
    Ok(0)
}
