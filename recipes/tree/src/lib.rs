//! `wazoo run tree PATH [--depth N]`: prints the subtree under PATH, one node a line, with its
//! data size and, for ephemeral nodes, the owning session. A small example of the `custom` world.

wazoo_guest::recipe_world!("wazoo:recipes/custom@0.1.2");
wazoo_guest::protocol!("wazoo-tree/1");

use std::fmt::Write as _;

use wazoo_guest::{self as zk, ZkError};

/// Lines printed at most, so a huge namespace cannot flood the caller.
const MAX_LINES: usize = 10_000;

struct Tree;

impl Guest for Tree {
    fn run(args: Vec<String>) -> Result<String, String> {
        let mut path = "/".to_string();
        let mut depth = usize::MAX;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--depth" => {
                    let n = args.next().ok_or("--depth needs a number")?;
                    depth = n.parse().map_err(|_| format!("--depth: not a number: {n:?}"))?;
                }
                "-h" | "--help" => return Ok("usage: tree [PATH] [--depth N]".into()),
                _ => path = arg,
            }
        }
        let stat = zk::exists(&path)
            .map_err(|e| describe(&path, e))?
            .ok_or_else(|| format!("{path}: no such node"))?;
        let mut out = String::new();
        line(&mut out, &path, 0, &stat);
        walk(&mut out, &path, 1, depth).map_err(|e| describe(&path, e))?;
        Ok(out.trim_end().to_string())
    }
}

fn walk(out: &mut String, dir: &str, level: usize, depth: usize) -> Result<(), ZkError> {
    if level > depth {
        return Ok(());
    }
    let (mut children, _) = match zk::get_children(dir) {
        Ok(found) => found,
        // Deleted while we walked: nothing to print.
        Err(ZkError::NoNode) => return Ok(()),
        Err(e) => return Err(e),
    };
    children.sort();
    for child in children {
        if out.lines().count() >= MAX_LINES {
            out.push_str("… (truncated)\n");
            return Ok(());
        }
        let path = zk::join(dir, &child);
        if let Some(stat) = zk::exists(&path)? {
            line(out, &path, level, &stat);
            if stat.num_children > 0 {
                walk(out, &path, level + 1, depth)?;
            }
        }
    }
    Ok(())
}

fn line(out: &mut String, path: &str, level: usize, stat: &zk::Stat) {
    let name = if level == 0 { path } else { zk::node_name(path) };
    let _ = write!(out, "{}{name}  [{} bytes", "  ".repeat(level), stat.data_length);
    if stat.ephemeral_owner != 0 {
        let _ = write!(out, ", ephemeral of session {:#x}", stat.ephemeral_owner);
    }
    out.push_str("]\n");
}

fn describe(path: &str, e: ZkError) -> String {
    format!("{path}: {e:?}")
}

export!(Tree);
