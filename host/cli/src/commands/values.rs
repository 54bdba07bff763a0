//! `queue`, `config`, `counter` and `group list|watch`: values kept in ZooKeeper, read and
//! written through their recipes.

use wazoo_runtime::{CacheChange, Entry, Membership};

use crate::args::{check_path, timed_out, Waited};
use crate::backend::{Backend, Failure};
use crate::cli::{ConfigCommand, CounterCommand, QueueCommand};
use crate::{exit, show};

pub(crate) async fn queue(backend: &impl Backend, command: QueueCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("queue", &path)?;
    let failed = |f: Failure| f.into_error(format!("queue {path}"));
    match command {
        QueueCommand::Put { data, priority, ephemeral, json, .. } => {
            if ephemeral {
                eprintln!("wazoo: note: an ephemeral item lives only as long as this command");
            }
            let data = crate::args::value_or_stdin(data)?;
            let put = backend.queue_put(&path, data, priority, ephemeral).await;
            let shown = put.map_err(failed).map(|node| match json {
                false => out!("{node}"),
                true => show::line(serde_json::json!({ "node": node })),
            });
            // An ephemeral item's handle (or session) ends here, with the command.
            backend.end().await;
            shown?;
        }
        QueueCommand::Take { timeout, json, .. } => match backend.queue_take(&path, timeout).await {
            Ok(data) if json => show::line(serde_json::json!({ "data": show::text(&data) })),
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
    match &command {
        // A read of every value below a prefix may start at the root.
        ConfigCommand::Get { prefix: true, .. } => wazoo_runtime::paths::check(&path)
            .map_err(|why| exit::usage(format!("invalid config path: {why}")))?,
        _ => check_path("config", &path)?,
    }
    let failed = |f: Failure| f.into_error(format!("config {path}"));
    match command {
        ConfigCommand::Get { prefix: true, json, .. } => return config_prefix(backend, &path, json).await,
        ConfigCommand::Get { json, .. } => match backend.config_get(&path).await.map_err(failed)? {
            Some(entry) => show::value(json, entry.version, &entry.data),
            None => return Ok(no_value(&path)),
        },
        ConfigCommand::Set { value, version, json, .. } => {
            let value = crate::args::value_or_stdin(value)?;
            match backend.config_set(&path, value, version).await {
                Ok(version) if json => show::line(serde_json::json!({ "version": version })),
                Ok(version) => out!("{version}"),
                Err(Failure::Stale(_)) => return Ok(stale_version(&path, version)),
                Err(f) => return Err(failed(f)),
            }
        }
        ConfigCommand::Delete { version, json, .. } => {
            let deleted = backend.config_delete(&path, version).await.map_err(failed)?;
            return Ok(super::zk::show_deleted(&path, deleted, version, json, "value"));
        }
        ConfigCommand::Watch { json, .. } => {
            // One format with `wazoo watch`: the value there now as `created`, then each change.
            let mut last: Option<Entry> = None;
            let mut first = true;
            let mut show = |now: Option<&Entry>| {
                let event = match (&last, now) {
                    (None, Some(_)) => "created",
                    (Some(_), Some(_)) => "changed",
                    (Some(_), None) => "deleted",
                    (None, None) => "",
                };
                if first {
                    first = false;
                    let there = if now.is_some() { "a value" } else { "no value" };
                    eprintln!("wazoo: watching {path} ({there} there)");
                }
                let shown = match event {
                    "deleted" => last.as_ref(),
                    _ => now,
                };
                if !event.is_empty() {
                    show::event(json, event, &path, shown.map(|e| (e.version, &e.data[..])));
                }
                last = now.cloned();
            };
            backend.config_watch(&path, &mut show).await.map_err(failed)?;
        }
    }
    Ok(0)
}

/// `config get --prefix`: every value at `path` and below it, parents first, siblings by name:
/// `PATH VALUE` lines, the value on one line as `watch` prints data (JSON `{"path","value","version"}`), read from one consistent look of the
/// tree (the cache recipe's first reading). A node with children and no data is a directory,
/// not a value, and is left out. Exit status 1 if there is none.
async fn config_prefix(backend: &impl Backend, path: &str, json: bool) -> anyhow::Result<u8> {
    let mut found: Vec<wazoo_runtime::CachedNode> = Vec::new();
    let (done, read) = tokio::sync::oneshot::channel::<()>();
    let mut done = Some(done);
    let mut each = |change: &CacheChange| match change {
        CacheChange::Created(node) if done.is_some() => found.push(node.clone()),
        CacheChange::Initialized => {
            if let Some(done) = done.take() {
                let _ = done.send(());
            }
        }
        _ => {}
    };
    let watching = backend.watch(path, true, wazoo_runtime::World::Cache.default_recipe(), &mut each);
    tokio::select! {
        ended = watching => {
            ended.map_err(|f| f.into_error(format!("config {path}")))?;
        }
        _ = read => {}
    }
    found.retain(|node| !(node.data.is_empty() && node.stat.num_children > 0));
    found.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
    for node in &found {
        match json {
            true => show::line(serde_json::json!({
                "path": node.path, "value": show::text(&node.data), "version": node.stat.version,
            })),
            false => out!("{} {}", node.path, show::one_line(&node.data)),
        }
    }
    Ok(if found.is_empty() { no_value(path) } else { 0 })
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
        CounterCommand::Add { delta, format, json, .. } => {
            show::number(json, "value", backend.counter_add(&path, delta, format).await.map_err(failed)?)
        }
    }
    Ok(0)
}

/// The members as `show` lists them.
fn listed(m: &Membership) -> Vec<(&str, &[u8])> {
    m.members.iter().map(|m| (m.name.as_str(), m.data.as_slice())).collect()
}

/// `group list` (or `services`, which lists the instances registered under `path`: `what`
/// names them in the message): the members now (exit status 1 if none).
pub(crate) async fn group_list(
    backend: &impl Backend,
    path: &str,
    json: bool,
    what: Listed,
) -> anyhow::Result<u8> {
    check_path("group", path)?;
    let membership = backend.group_members(path).await.map_err(|f| f.into_error(format!("group {path}")))?;
    show::members(json, listed(&membership));
    if membership.members.is_empty() {
        match what {
            Listed::Members => eprintln!("wazoo: group {path} has no members"),
            Listed::Services => eprintln!("wazoo: no instance is registered under {path}"),
        }
        return Ok(exit::NOTHING);
    }
    Ok(0)
}

/// What `group_list` lists.
#[derive(Clone, Copy)]
pub(crate) enum Listed {
    /// `group list`.
    Members,
    /// `services`.
    Services,
}

/// `group watch`: the members now and after every change, until the watch fails.
pub(crate) async fn group_watch(backend: &impl Backend, path: &str, json: bool) -> anyhow::Result<u8> {
    check_path("group", path)?;
    let mut show = |now: &Membership| show::membership(json, listed(now));
    backend.group_watch(path, &mut show).await.map_err(|f| f.into_error(format!("group {path}")))?;
    Ok(0)
}

/// `wazoo watch`: a line per change (with `initial`, first a `created` line per node there),
/// after a line on stderr once the cache has read what is there. Ends only on failure.
pub(crate) async fn watch(
    backend: &impl Backend,
    path: &str,
    recursive: bool,
    initial: bool,
    json: bool,
    recipe: &str,
) -> anyhow::Result<u8> {
    // The root too: with a chroot it is the whole namespace.
    wazoo_runtime::paths::check(path).map_err(|why| exit::usage(format!("invalid watch path: {why}")))?;
    let (mut ready, mut found) = (false, 0usize);
    let mut each = |change: &CacheChange| match change {
        CacheChange::Initialized => {
            ready = true;
            let below = if recursive { " and below it" } else { "" };
            eprintln!(
                "wazoo: watching {path}{below} ({found} node{} there)",
                if found == 1 { "" } else { "s" }
            );
        }
        // Before the first reading is complete, only with --initial (a first cache that ended
        // early may have reported changes to nodes whose creation was not shown).
        change if !ready => {
            if matches!(change, CacheChange::Created(_)) {
                found += 1;
            }
            if initial {
                show::change(json, change);
            }
        }
        change => show::change(json, change),
    };
    backend
        .watch(path, recursive, recipe, &mut each)
        .await
        .map_err(|f| f.into_error(format!("watch {path}")))?;
    Ok(0)
}
