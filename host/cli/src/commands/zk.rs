//! `wazoo zk ls|get|stat|tree|rm PATH`, and `config delete` on the local path: ZooKeeper browsed
//! (and a node deleted) on a session of this process's own, so that what a recipe left can be seen without
//! zkCli. The host's path rules
//! come first (a bad path is exit status 2); a missing node is exit status 1. ZooKeeper's own
//! `/zookeeper` is left out of listings, as the path rules leave it out of everything else.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Value};
use wazoo_runtime::error::describe;
use wazoo_runtime::zk::Zk;
use wazoo_runtime::{Stat, ZkError};

use crate::backend::Deleted;
use crate::cli::ZkCommand;
use crate::exit::{self, Exit};
use crate::local::Local;
use crate::show;

/// Runs `wazoo zk …` on `local`'s ZooKeeper session.
pub(crate) async fn zk(local: &Local, command: ZkCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    wazoo_runtime::paths::check(&path).map_err(|why| exit::usage(format!("invalid path: {why}")))?;
    let live = local.live().await?;
    let client = &live.zk();
    // Read what the ensemble has agreed on, not what a lagging server still holds.
    client.sync(&path).await.map_err(|e| failed(&path, e))?;
    match command {
        ZkCommand::Ls { json, .. } => {
            for name in children(client, &path).await.map_err(|e| failed(&path, e))? {
                match json {
                    false => show::emit(&name),
                    true => show::line(json!({"path": child(&path, &name), "name": name})),
                }
            }
        }
        ZkCommand::Get { json, .. } => {
            let (data, stat) = client.get_data(&path).await.map_err(|e| failed(&path, e))?;
            match json {
                false => show::emit(&show::text(&data)),
                true => show::line(node(&path, &data, &stat)),
            }
        }
        ZkCommand::Stat { json, .. } => {
            let stat = client.exists(&path).await.map_err(|e| failed(&path, e))?;
            let stat = stat.ok_or_else(|| failed(&path, ZkError::NoNode))?;
            match json {
                false => stat_lines(&stat).iter().for_each(|line| show::emit(line)),
                true => {
                    let mut fields = stat_json(&stat);
                    fields["path"] = Value::from(path.as_str());
                    show::line(fields)
                }
            }
        }
        ZkCommand::Tree { depth, json, .. } => tree(client, &path, depth, json).await?,
        ZkCommand::Rm { version, force, json, .. } => {
            if !force {
                crate::local::refuse_claim_node(client, &path).await?;
            }
            let deleted = crate::local::delete_node(client, &path, version).await?;
            return Ok(show_deleted(&path, deleted, version, json, "node"));
        }
    }
    Ok(0)
}

/// What a delete of `path` (of a `what`: node, value) says: `deleted PATH` (JSON
/// `{"path","deleted"}`) and exit status 0; absent, not at `version`, or with children: exit
/// status 1, saying which.
pub(crate) fn show_deleted(path: &str, deleted: Deleted, version: Option<i32>, json: bool, what: &str) -> u8 {
    if json {
        show::line(json!({"path": path, "deleted": deleted == Deleted::Yes}));
    }
    let why = match deleted {
        Deleted::Yes => {
            if !json {
                show::emit(&format!("deleted {path}"));
            }
            return 0;
        }
        Deleted::Absent if what == "node" => format!("{path} does not exist"),
        Deleted::Absent => format!("no {what} at {path}"),
        Deleted::OtherVersion => format!("{path} is no longer at version {}", version.unwrap_or(-1)),
        Deleted::HasChildren => format!("{path} has children: delete them first"),
    };
    eprintln!("wazoo: {why}");
    exit::NOTHING
}

/// The error of a read at `path`: a missing node is exit status 1 (`PATH does not exist`), a
/// lost connection or session 69, anything else (not authorised, …) 70.
fn failed(path: &str, e: ZkError) -> anyhow::Error {
    match e {
        ZkError::NoNode => Exit { code: exit::NOTHING, message: format!("{path} does not exist") }.into(),
        ZkError::ConnectionLoss | ZkError::SessionExpired => {
            exit::unavailable(format!("reading {path}: {}", describe(&e)))
        }
        e => anyhow::anyhow!("reading {path}: {}", describe(&e)),
    }
}

/// The children of `path` sorted by name, without `/zookeeper`.
async fn children(client: &Zk, path: &str) -> Result<Vec<String>, ZkError> {
    let mut names = client.children(path).await?;
    names.retain(|name| !(path == "/" && name == "zookeeper"));
    names.sort();
    Ok(names)
}

/// The path of child `name` of `parent`.
fn child(parent: &str, name: &str) -> String {
    match parent {
        "/" => format!("/{name}"),
        _ => format!("{parent}/{name}"),
    }
}

/// `{"path","data","stat":{…}}`: a node as `get --json` and `tree --json` print it.
fn node(path: &str, data: &[u8], stat: &Stat) -> Value {
    json!({"path": path, "data": show::text(data), "stat": stat_json(stat)})
}

/// A stat as JSON, with ZooKeeper's names; times in ms since the epoch, the ephemeral owner a
/// session id in hex (`0x0` for a persistent node).
fn stat_json(stat: &Stat) -> Value {
    json!({
        "czxid": stat.czxid,
        "mzxid": stat.mzxid,
        "pzxid": stat.pzxid,
        "ctime": stat.ctime,
        "mtime": stat.mtime,
        "version": stat.version,
        "cversion": stat.cversion,
        "aversion": stat.aversion,
        "ephemeralOwner": format!("0x{:x}", stat.ephemeral_owner),
        "dataLength": stat.data_length,
        "numChildren": stat.num_children,
    })
}

/// A stat as `zk stat` prints it: `name value` a line, the times in ms and RFC 3339.
fn stat_lines(stat: &Stat) -> Vec<String> {
    vec![
        format!("czxid {}", stat.czxid),
        format!("mzxid {}", stat.mzxid),
        format!("pzxid {}", stat.pzxid),
        format!("ctime {} {}", stat.ctime, rfc3339(stat.ctime)),
        format!("mtime {} {}", stat.mtime, rfc3339(stat.mtime)),
        format!("version {}", stat.version),
        format!("cversion {}", stat.cversion),
        format!("aversion {}", stat.aversion),
        format!("ephemeralOwner 0x{:x}", stat.ephemeral_owner),
        format!("dataLength {}", stat.data_length),
        format!("numChildren {}", stat.num_children),
    ]
}

/// A time in ms since the epoch as RFC 3339 in UTC, to the millisecond (`-` before the epoch).
fn rfc3339(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(ms) => humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string(),
        Err(_) => "-".to_string(),
    }
}

/// `zk tree`: `path` and the nodes below it, parents first and siblings by name, down to
/// `depth` levels below it. Text: `NAME [N bytes]` indented two spaces a level (PATH itself
/// named in full); JSON: a node object a line. A node deleted during the walk is left out.
async fn tree(client: &Zk, path: &str, depth: Option<u32>, json: bool) -> anyhow::Result<()> {
    // (path, the name shown, level below `path`)
    let mut stack = vec![(path.to_string(), path.to_string(), 0u32)];
    while let Some((at, name, level)) = stack.pop() {
        let top = level == 0;
        let read = read_node(client, &at, json).await;
        let (data, stat) = match read {
            Ok(found) => found,
            Err(ZkError::NoNode) if !top => continue,
            Err(e) => return Err(failed(&at, e)),
        };
        match json {
            false => show::emit(&format!(
                "{:indent$}{name} [{} bytes]",
                "",
                stat.data_length,
                indent = 2 * level as usize
            )),
            true => show::line(node(&at, &data, &stat)),
        }
        if depth.is_some_and(|d| level >= d) || stat.num_children == 0 {
            continue;
        }
        let names = match children(client, &at).await {
            Ok(names) => names,
            Err(ZkError::NoNode) if !top => continue,
            Err(e) => return Err(failed(&at, e)),
        };
        for name in names.into_iter().rev() {
            stack.push((child(&at, &name), name, level + 1));
        }
    }
    Ok(())
}

/// A node's data (only when it is shown: `with_data`) and stat.
async fn read_node(client: &Zk, path: &str, with_data: bool) -> Result<(Vec<u8>, Stat), ZkError> {
    if with_data {
        return client.get_data(path).await;
    }
    match client.exists(path).await? {
        Some(stat) => Ok((Vec::new(), stat)),
        None => Err(ZkError::NoNode),
    }
}
