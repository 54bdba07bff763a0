//! Listings: `wazoo claims [PREFIX]`, every claim under a prefix with its holders and waiters
//! (on either backend: read from ZooKeeper, no recipe), and `wazoo sessions`, a daemon's client
//! sessions with their claims (through `--server` only).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use wazoo_runtime::holders::{Contender, Contenders, State};

use crate::backend::{Backend, Failure, SessionInfo};
use crate::cli::mode_name;
use crate::{exit, show};

/// How much of a client session's name the `sessions` table shows, in characters (`--json`
/// gives it whole).
const NAME_WIDTH: usize = 40;

/// `wazoo claims`: a row per contender, claims by path, holders first then waiters in queue
/// order: PATH KIND STATE IDENTITY TOKEN SINCE; with `--json` one JSON document. Exit status 1
/// when there is no claim under the prefix.
pub(crate) async fn claims(backend: &impl Backend, prefix: &str, json: bool) -> anyhow::Result<u8> {
    wazoo_runtime::paths::check(prefix).map_err(|why| exit::usage(format!("invalid prefix: {why}")))?;
    let found = backend.claims(prefix).await.map_err(|f| match f {
        // A refusal of the prefix (too many nodes under it) says what to do: one line.
        Failure::Error { code: exit::NOTHING, text, .. } => {
            exit::usage(format!("claims under {prefix}: {text}"))
        }
        f => f.into_error(format!("listing the claims under {prefix}")),
    })?;
    let now = now_ms();
    if json {
        let claims: Vec<_> = found.iter().map(|(path, c)| claim_json(path, c, now)).collect();
        show::line(json!({ "prefix": prefix, "claims": claims }));
    } else if !found.is_empty() {
        let mut rows =
            vec![["PATH", "KIND", "STATE", "TOKEN", "SINCE", "IDENTITY"].map(String::from).to_vec()];
        for (path, claim) in &found {
            for c in &claim.contenders {
                // The identity last, whole (through a daemon it ends with the client's address).
                rows.push(vec![
                    path.clone(),
                    claim.kind.name.to_string(),
                    state(c),
                    c.token.to_string(),
                    age(now, c.since_ms),
                    identity(&c.data),
                ]);
            }
        }
        table(&rows);
    }
    if found.is_empty() {
        eprintln!("wazoo: no claims under {prefix}");
        return Ok(exit::NOTHING);
    }
    Ok(0)
}

/// `wazoo sessions`: the daemon's client sessions (the caller's tenant's), oldest first:
/// SESSION NAME PEER OPENED AGE CLAIMS; with `--json` one JSON document. Exit status 1 when
/// none is open; on this process's own host (no `--server`) bad usage, exit status 2.
pub(crate) async fn sessions(backend: &impl Backend, json: bool) -> anyhow::Result<u8> {
    let listed = backend.sessions().await.map_err(|f| f.into_error("listing the client sessions"))?;
    let Some(sessions) = listed else {
        return Err(exit::usage("sessions: only a daemon has client sessions: pass --server ADDR"));
    };
    let now = now_ms();
    if json {
        let shown: Vec<_> = sessions.iter().map(|s| session_json(s, now)).collect();
        show::line(json!({ "sessions": shown }));
    } else if !sessions.is_empty() {
        let mut rows =
            vec![["SESSION", "NAME", "PEER", "OPENED", "AGE", "CLAIMS"].map(String::from).to_vec()];
        for s in &sessions {
            let claims: Vec<String> = s
                .claims
                .iter()
                .map(|c| format!("{} {} {}", if c.holds { "holds" } else { "waits" }, c.family, c.path))
                .collect();
            rows.push(vec![
                format!("{:x}", s.id),
                truncated(&show::one_line(s.name.as_bytes()), NAME_WIDTH),
                or_dash(&s.peer),
                opened(s.opened_ms),
                age(now, s.opened_ms),
                or_dash(&claims.join(", ")),
            ]);
        }
        table(&rows);
    }
    if sessions.is_empty() {
        eprintln!("wazoo: no client sessions are open");
        return Ok(exit::NOTHING);
    }
    Ok(0)
}

fn claim_json(path: &str, claim: &Contenders, now: i64) -> serde_json::Value {
    let contenders: Vec<_> = claim
        .contenders
        .iter()
        .map(|c| {
            json!({
                "state": if c.state == State::Holds { "holds" } else { "waits" },
                "mode": c.mode.map(mode_name),
                "identity": show::text(&c.data),
                "node": c.node,
                "token": c.token,
                "session": format!("0x{:x}", c.session),
                "since_ms": c.since_ms,
                "age_ms": (now - c.since_ms).max(0),
            })
        })
        .collect();
    json!({ "path": path, "kind": claim.kind.name, "contenders": contenders })
}

fn session_json(s: &SessionInfo, now: i64) -> serde_json::Value {
    let claims: Vec<_> = s
        .claims
        .iter()
        .map(|c| {
            json!({
                "path": c.path,
                "family": c.family,
                "state": if c.holds { "holds" } else { "waits" },
                "node": c.node,
                "token": c.token,
                "since_ms": c.since_ms,
            })
        })
        .collect();
    json!({
        "session": format!("{:x}", s.id),
        "name": s.name,
        "peer": s.peer,
        "opened_ms": s.opened_ms,
        "age_ms": (now - s.opened_ms).max(0),
        "claims": claims,
    })
}

/// `holds` or `waits`, with a read/write lock's side: `holds(r)`, `waits(w)`.
pub(super) fn state(c: &Contender) -> String {
    let word = if c.state == State::Holds { "holds" } else { "waits" };
    match c.mode {
        Some(mode) => format!("{word}({})", &mode_name(mode)[..1]),
        None => word.to_string(),
    }
}

/// A node's data as the holder's identity, on one line (control characters escaped); `-` when
/// there is none.
pub(super) fn identity(data: &[u8]) -> String {
    or_dash(&show::one_line(data))
}

pub(super) fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".to_string()
    } else {
        s.to_string()
    }
}

/// `s` cut to `width` characters, the cut marked with `…`.
fn truncated(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(width - 1).collect();
    cut.push('…');
    cut
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// How long since `since_ms` (milliseconds since the epoch), in the largest two units: `45s`,
/// `3m12s`, `2h05m`, `4d03h`; `-` when not known.
pub(super) fn age(now_ms: i64, since_ms: i64) -> String {
    if since_ms <= 0 {
        return "-".to_string();
    }
    let s = (now_ms - since_ms).max(0) / 1000;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// When a session was opened: UTC, to the second.
fn opened(ms: i64) -> String {
    if ms <= 0 {
        return "-".to_string();
    }
    let at = UNIX_EPOCH + std::time::Duration::from_millis(ms as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Prints `rows` (the first is the header) in columns two spaces apart, the last unpadded.
fn table(rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        out!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_in_two_units() {
        let now = 1_000_000_000;
        assert_eq!(age(now, now - 45_000), "45s");
        assert_eq!(age(now, now - 192_000), "3m12s");
        assert_eq!(age(now, now - (2 * 3600 + 5 * 60) * 1000), "2h05m");
        assert_eq!(age(now, now - (4 * 86_400 + 3 * 3600) * 1000), "4d03h");
        assert_eq!(age(now, 0), "-");
        assert_eq!(age(now, now + 5_000), "0s", "a clock behind the server's");
    }

    #[test]
    fn identities_are_one_line_and_cut() {
        assert_eq!(identity(b"host:1\nx\x1b"), "host:1\\nx\\u{1b}");
        assert_eq!(identity(b""), "-");
        assert_eq!(truncated("abcdef", 4), "abc…");
        assert_eq!(truncated("abc", 4), "abc");
    }
}
