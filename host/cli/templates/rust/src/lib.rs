//! {{name}}: a custom wazoo recipe. `wazoo run {{name}} PATH [--timeout-ms N]` waits until the
//! znode PATH exists and prints its data.
//!
//! Every `wazoo:zk` call blocks this guest while the host awaits ZooKeeper, so a recipe reads as
//! straight-line code. Change `run` (or the world, in `wit/recipes.wit`) to build your own.

wit_bindgen::generate!({ path: "wit", world: "wazoo:recipes/custom@0.1.2", generate_all });

use wazoo::zk::types::{EventKind, ZkError};
use wazoo::zk::{watch, znode};

struct Recipe;

impl Guest for Recipe {
    fn run(args: Vec<String>) -> Result<String, String> {
        let (path, timeout_ms) = parse(args)?;
        znode::check_path(&path).map_err(|e| describe(&path, e))?;
        loop {
            // Read and arm a watch in one call: a creation between the two cannot be missed.
            let (stat, watcher) = watch::exists_watch(&path).map_err(|e| describe(&path, e))?;
            if stat.is_some() {
                match znode::get_data(&path) {
                    Ok((data, _)) => return Ok(String::from_utf8_lossy(&data).into_owned()),
                    // Deleted again in between: wait for the next creation.
                    Err(ZkError::NoNode) => continue,
                    Err(e) => return Err(describe(&path, e)),
                }
            }
            let event = watcher.wait(timeout_ms).map_err(|e| describe(&path, e))?;
            if matches!(event.kind, EventKind::SessionExpired | EventKind::SessionClosed) {
                return Err(describe(&path, ZkError::SessionExpired));
            }
        }
    }
}

/// `PATH [--timeout-ms N]`.
fn parse(args: Vec<String>) -> Result<(String, Option<u64>), String> {
    let mut path = None;
    let mut timeout_ms = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--timeout-ms" => {
                let n = args.next().ok_or("--timeout-ms needs a number")?;
                timeout_ms = Some(n.parse().map_err(|_| format!("--timeout-ms: not a number: {n:?}"))?);
            }
            _ if path.is_none() => path = Some(arg),
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    Ok((path.ok_or("usage: {{name}} PATH [--timeout-ms N]")?, timeout_ms))
}

fn describe(path: &str, e: ZkError) -> String {
    match e {
        ZkError::Timeout => format!("{path}: still absent when the timeout passed"),
        ZkError::InvalidPath(why) => format!("{path}: invalid path: {why}"),
        other => format!("{path}: {other:?}"),
    }
}

export!(Recipe);
