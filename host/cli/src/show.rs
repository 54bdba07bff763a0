//! What the read commands print, the same on the local path and through `--server`: a line of
//! text each, or with `--json` one JSON object per line (data as UTF-8, invalid bytes replaced).

/// `println!` that never panics: a reader that went away ends wazoo with status 141, as SIGPIPE
/// ends a shell tool ([`show::emit`]).
macro_rules! out {
    () => {
        $crate::show::emit("")
    };
    ($($arg:tt)*) => {
        $crate::show::emit(&format!($($arg)*))
    };
}

use serde_json::{json, Value};

/// Prints one JSON object as a line.
pub(crate) fn line(value: Value) {
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

/// `data` as UTF-8 text, invalid bytes replaced.
pub(crate) fn text(data: &[u8]) -> String {
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

/// `group list` and `services`: a `NAME DATA` line (JSON `{"name","data"}`) per member, the
/// data on one line ([`one_line`]: a trailing newline from `echo … | --data -` is `\n`, not a
/// blank line).
pub(crate) fn members<'a>(json: bool, members: impl IntoIterator<Item = (&'a str, &'a [u8])>) {
    for (name, data) in members {
        match json {
            false if data.is_empty() => emit(name),
            false => emit(&format!("{name} {}", one_line(data))),
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

/// `watch` and `config watch`: `created|changed PATH VERSION DATA` or `deleted PATH`, the data on
/// one line ([`one_line`]); JSON `{"event","path","version","data"}`, a deleted node's last
/// version and data (null when not known). Nothing for `initialized`.
pub(crate) fn change(json: bool, change: &wazoo_runtime::CacheChange) {
    use wazoo_runtime::CacheChange as C;
    let (event, node) = match change {
        C::Created(node) => ("created", node),
        C::Changed(node) => ("changed", node),
        C::Deleted(node) => ("deleted", node),
        C::Initialized => return,
    };
    self::event(json, event, &node.path, Some((node.stat.version, &node.data)));
}

/// One line of a watch ([`change`]): `event` at `path`, with the version and data when known.
pub(crate) fn event(json: bool, event: &str, path: &str, now: Option<(i32, &[u8])>) {
    match (json, now) {
        (true, now) => line(json!({
            "event": event,
            "path": path,
            "version": now.map(|(v, _)| v),
            "data": now.map(|(_, d)| text(d)),
        })),
        (false, _) if event == "deleted" => emit(&format!("deleted {path}")),
        (false, None) => emit(&format!("{event} {path}")),
        (false, Some((version, data))) if data.is_empty() => emit(&format!("{event} {path} {version}")),
        (false, Some((version, data))) => emit(&format!("{event} {path} {version} {}", one_line(data))),
    }
}

/// `data` as text on one line: invalid UTF-8 replaced, a backslash doubled, newline, return and
/// tab as `\n`, `\r`, `\t`, other control characters as `\u{1b}`.
pub(crate) fn one_line(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len());
    for c in String::from_utf8_lossy(data).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
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

/// A claim held without a command, as [`held`] prints it.
pub(crate) struct Held {
    /// The path asked for.
    pub(crate) path: String,
    pub(crate) node: String,
    /// None for a group member, which has no token.
    pub(crate) token: Option<i64>,
    /// What else names it in JSON: `("mode", "read")` for a side of a read/write lock, `("id",
    /// ID)` for a leader, `("member", NAME)` for a member.
    pub(crate) named: Option<(&'static str, String)>,
}

/// What `lock`, `rwlock`, `semaphore`, `elect` and `group join` print once held without a
/// command: `held NODE token T` (a group member has no token: `held NODE`); under several locks,
/// a line each, in the order taken. JSON `{"path","node","token"}` (token null for a group
/// member), with `"mode"` for a read/write lock, `"id"` for a leader, `"member"` for a member.
pub(crate) fn held(claims: &[Held], json: bool) {
    let lines: Vec<String> = claims
        .iter()
        .map(|c| match (json, c.token) {
            (false, Some(token)) => format!("held {} token {token}", c.node),
            (false, None) => format!("held {}", c.node),
            (true, token) => {
                let mut held = json!({"path": c.path, "node": c.node, "token": token});
                if let Some((name, value)) = &c.named {
                    held[*name] = Value::from(value.as_str());
                }
                held.to_string()
            }
        })
        .collect();
    // A reader gone away does not end a claim held until a signal: it is released as usual.
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", lines.join("\n")).and_then(|()| out.flush());
}
