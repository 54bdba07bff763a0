//! What the read commands print, the same on the local path and through `--server`: a line of
//! text each, or with `--json` one JSON object per line (data as UTF-8, invalid bytes replaced).

use serde_json::{json, Value};

/// Prints one JSON object as a line.
fn line(value: Value) {
    emit(&value.to_string());
}

/// Writes `text` and a newline to stdout. A reader that went away (`| head -1`) ends the command
/// as SIGPIPE would end a shell tool: exit status 141, without a word.
pub(crate) fn emit(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("wazoo: writing to stdout: {e}");
    }
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// An election's leader as `wazoo leader` shows it.
pub(crate) struct Leader<'a> {
    pub(crate) id: &'a str,
    pub(crate) token: i64,
    pub(crate) node: &'a str,
    pub(crate) acknowledged: Option<&'a str>,
}

/// `wazoo leader`: `ID  token N  NODE  ack: NOTE`, or `no leader`; JSON
/// `{"id","token","node","acknowledged"}`, every field null when nobody leads.
pub(crate) fn leader(json: bool, leader: Option<Leader<'_>>) {
    match (json, leader) {
        (false, Some(l)) => {
            let ack = l.acknowledged.map(|a| format!("  ack: {a}")).unwrap_or_default();
            emit(&format!("{}  token {}  {}{ack}", l.id, l.token, l.node));
        }
        (false, None) => emit("no leader"),
        (true, Some(l)) => {
            line(json!({"id": l.id, "token": l.token, "node": l.node, "acknowledged": l.acknowledged}))
        }
        (true, None) => line(json!({"id": null, "token": null, "node": null, "acknowledged": null})),
    }
}

/// `group list`: a `NAME DATA` line (JSON `{"name","data"}`) per member.
pub(crate) fn members<'a>(json: bool, members: impl IntoIterator<Item = (&'a str, &'a [u8])>) {
    for (name, data) in members {
        match json {
            false => emit(&format!("{name} {}", text(data))),
            true => line(json!({"name": name, "data": text(data)})),
        }
    }
}

/// `group watch`: the members then `--` on every change; JSON one `{"members":[…]}` per change.
pub(crate) fn membership<'a>(json: bool, members: impl IntoIterator<Item = (&'a str, &'a [u8])>) {
    if json {
        let all: Vec<Value> =
            members.into_iter().map(|(name, data)| json!({"name": name, "data": text(data)})).collect();
        line(json!({ "members": all }));
    } else {
        self::members(false, members);
        emit("--");
    }
}

/// `config get`: the value; JSON `{"value","version"}`.
pub(crate) fn value(json: bool, version: i32, data: &[u8]) {
    match json {
        false => emit(&text(data)),
        true => line(json!({"value": text(data), "version": version})),
    }
}

/// `config watch`: `VERSION VALUE` or `(none)`; JSON `{"value","version"}`, both null for none.
pub(crate) fn entry(json: bool, entry: Option<(i32, &[u8])>) {
    match (json, entry) {
        (false, Some((version, data))) => emit(&format!("{version} {}", text(data))),
        (false, None) => emit("(none)"),
        (true, Some((version, data))) => line(json!({"value": text(data), "version": version})),
        (true, None) => line(json!({"value": null, "version": null})),
    }
}

/// `counter get`, `queue len`: the number; JSON `{NAME: N}`.
pub(crate) fn number(json: bool, name: &str, n: i64) {
    match json {
        false => emit(&n.to_string()),
        true => line(json!({ name: n })),
    }
}

/// One contender of `wazoo holders`, as the library or the daemon reports it.
pub(crate) struct Contender<'a> {
    pub(crate) holds: bool,
    pub(crate) node: &'a str,
    /// `read` or `write`, for a read/write lock.
    pub(crate) mode: Option<&'a str>,
    pub(crate) token: i64,
    pub(crate) session: i64,
    pub(crate) data: &'a [u8],
}

/// `wazoo holders`: `holds|waits [read|write] NODE token T session 0xS data D` per contender, in
/// queue order; JSON `{"kind","state","node","mode","token","session","data"}`.
pub(crate) fn contenders<'a>(json: bool, kind: &str, contenders: impl IntoIterator<Item = Contender<'a>>) {
    for c in contenders {
        let state = if c.holds { "holds" } else { "waits" };
        let session = format!("0x{:x}", c.session);
        match json {
            false => {
                let mode = c.mode.map(|m| format!("{m} ")).unwrap_or_default();
                emit(&format!(
                    "{state} {mode}{} token {} session {session} data {}",
                    c.node,
                    c.token,
                    text(c.data)
                ));
            }
            true => line(json!({
                "kind": kind,
                "state": state,
                "node": c.node,
                "mode": c.mode,
                "token": c.token,
                "session": session,
                "data": text(c.data),
            })),
        }
    }
}

/// What `lock`, `rwlock`, `semaphore`, `elect` and `group join` print once held without a
/// command: `held NODE token T` (a group member has no token: `held NODE`); under several locks,
/// a line each, in the order taken.
pub(crate) fn held(env: &[(String, String)]) {
    let get = |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let count = get("WAZOO_LOCK_COUNT").and_then(|c| c.parse::<usize>().ok());
    let lines: Vec<String> = match count {
        Some(count) => (1..=count)
            .map(|i| {
                let node = get(&format!("WAZOO_LOCK_NODE_{i}")).unwrap_or_default();
                let token = get(&format!("WAZOO_FENCING_TOKEN_{i}")).unwrap_or_default();
                format!("held {node} token {token}")
            })
            .collect(),
        None => vec![held_line(env)],
    };
    // A reader gone away does not end a claim held until a signal: it is released as usual.
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", lines.join("\n")).and_then(|()| out.flush());
}

/// `held NODE token T` for one claim's environment.
fn held_line(env: &[(String, String)]) -> String {
    let find = |suffix: &str| env.iter().find(|(k, _)| k.ends_with(suffix)).map(|(_, v)| v.as_str());
    let node = match find("_NODE") {
        Some(node) => node.to_string(),
        None => match (find("GROUP_PATH"), find("MEMBER")) {
            (Some(group), Some(member)) => format!("{group}/{member}"),
            _ => String::new(),
        },
    };
    match find("FENCING_TOKEN") {
        Some(token) => format!("held {node} token {token}"),
        None => format!("held {node}"),
    }
}
