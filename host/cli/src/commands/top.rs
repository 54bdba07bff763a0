//! `wazoo top [PREFIX] [--every DUR]`: the claims under a prefix (holders first, then waiters
//! in queue order, with their identities, tokens and ages) and, through a daemon, its client
//! sessions, on a screen refreshed in place until `q` or Ctrl-C. When stdout is not a terminal
//! it prints one snapshot of the same text and exits, so it scripts.
//!
//! The screen is plain ANSI: the alternate screen, the cursor home, each line erased to its end
//! and everything below the last one erased; the terminal's raw mode (stdin's, when it is a
//! terminal, for the keys) is rustix's termios, restored on every way out, a panic's too.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::time::{Duration, SystemTime};

use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

use wazoo_runtime::holders::{Contenders, State};

use super::listing::{age, identity, now_ms, or_dash, state};
use crate::backend::{Backend, Failure, SessionInfo};
use crate::{exit, show};

/// What one look found: the claims under the prefix, by path, and through a daemon its client
/// sessions (`None` on this process's own host, which has none; a failure to list them is said in
/// their place).
struct Snapshot {
    claims: Vec<(String, Contenders)>,
    sessions: Option<Result<Vec<SessionInfo>, String>>,
}

/// `wazoo top`: exit status 0 when quit with `q` or Ctrl-C (or, not on a terminal, once the
/// snapshot is printed); a first look that fails is said as any command's failure.
pub(crate) async fn top(backend: &impl Backend, prefix: &str, every: Duration) -> anyhow::Result<u8> {
    wazoo_runtime::paths::check(prefix).map_err(|why| exit::usage(format!("invalid prefix: {why}")))?;
    let first = look(backend, prefix)
        .await
        .map_err(|f| f.into_error(format!("listing the claims under {prefix}")))?;
    if !std::io::stdout().is_terminal() {
        for line in render(&first, prefix, every, None) {
            out!("{line}");
        }
        return Ok(0);
    }
    live(backend, prefix, every, first).await
}

/// What the screen says about the last look, besides what it found.
struct Header {
    /// When the shown snapshot was taken.
    at: SystemTime,
    /// Why the last look failed, if it did (the snapshot shown is then the one before).
    failed: Option<String>,
}

/// The screen, refreshed every `every` until `q`, Ctrl-C or a signal.
async fn live(backend: &impl Backend, prefix: &str, every: Duration, first: Snapshot) -> anyhow::Result<u8> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut resized = signal(SignalKind::window_change())?;
    let mut screen = Screen::enter().map_err(|e| anyhow::anyhow!("setting the terminal up: {e}"))?;
    let mut keys = keys();
    let mut shown = first;
    let mut header = Header { at: SystemTime::now(), failed: None };
    let mut next = Instant::now() + every;
    let mut fetch = Box::pin(look(backend, prefix));
    let mut fetching = false;
    let code = loop {
        screen.draw(&render(&shown, prefix, every, Some(&header)))?;
        tokio::select! {
            got = &mut fetch, if fetching => {
                fetching = false;
                next = Instant::now() + every;
                match got {
                    Ok(snapshot) => {
                        shown = snapshot;
                        header = Header { at: SystemTime::now(), failed: None };
                    }
                    Err(f) => header.failed = Some(f.into_error("refreshing").to_string()),
                }
            }
            () = tokio::time::sleep_until(next), if !fetching => {
                fetch = Box::pin(look(backend, prefix));
                fetching = true;
            }
            key = keys.recv() => match key {
                // q, Q, Ctrl-C (raw mode reads it as a byte), Ctrl-D.
                Some(b'q' | b'Q' | 0x03 | 0x04) => break 0,
                Some(_) => {}
                // stdin is no terminal, or closed: only signals end it.
                None => keys = never(),
            },
            _ = interrupt.recv() => break 0,
            _ = terminate.recv() => break 128 + libc::SIGTERM as u8,
            _ = hangup.recv() => break 128 + libc::SIGHUP as u8,
            _ = resized.recv() => {}
        }
    };
    screen.leave();
    Ok(code)
}

/// A look at the claims under `prefix`, and through a daemon at its client sessions, asked
/// together.
async fn look(backend: &impl Backend, prefix: &str) -> Result<Snapshot, Failure> {
    let (claims, sessions) = tokio::join!(backend.claims(prefix), backend.sessions());
    let sessions = match sessions {
        Ok(listed) => listed.map(Ok),
        Err(f) => Some(Err(f.into_error("listing the client sessions").to_string())),
    };
    Ok(Snapshot { claims: claims?, sessions })
}

/// The lines of the screen, or of the snapshot printed when stdout is no terminal
/// (`header` none: no time, no key).
fn render(snapshot: &Snapshot, prefix: &str, every: Duration, header: Option<&Header>) -> Vec<String> {
    let now = now_ms();
    let mut lines = Vec::new();
    let count = |state: State| -> usize {
        snapshot.claims.iter().map(|(_, c)| c.contenders.iter().filter(|x| x.state == state).count()).sum()
    };
    let (held, waiting) = (count(State::Holds), count(State::Waits));
    let mut title =
        format!("{} under {prefix} ({held} held, {waiting} waiting)", plural(snapshot.claims.len(), "claim"));
    if let Some(header) = header {
        title = format!(
            "wazoo top (q quits) · {title} · every {} · {}",
            crate::args::human(every),
            humantime::format_rfc3339_seconds(header.at)
        );
    }
    lines.push(title);
    if let Some(failed) = header.and_then(|h| h.failed.as_deref()) {
        lines.push(format!("! {failed} (showing the last look; trying again)"));
    }
    lines.push(String::new());
    if snapshot.claims.is_empty() {
        lines.push(format!("nobody holds or waits under {prefix}"));
    }
    for (path, claim) in &snapshot.claims {
        lines.push(format!("{path}  {}", claim.kind.name));
        for c in &claim.contenders {
            lines.push(format!(
                "  {:<8}  token {:<12} {:>6}  {}",
                state(c),
                c.token,
                age(now, c.since_ms),
                identity(&c.data)
            ));
        }
    }
    match &snapshot.sessions {
        None => {}
        Some(Err(why)) => {
            lines.push(String::new());
            lines.push(format!("client sessions: {why}"));
        }
        Some(Ok(sessions)) => {
            lines.push(String::new());
            lines.push(format!("client sessions: {}", sessions.len()));
            let name_width = sessions
                .iter()
                .map(|s| show::one_line(s.name.as_bytes()).chars().count())
                .max()
                .unwrap_or(0)
                .max(4);
            let peer_width = sessions.iter().map(|s| s.peer.chars().count()).max().unwrap_or(0).max(4);
            lines.push(format!("  {:<name_width$}  {:<peer_width$}  {:>6}  CLAIMS", "NAME", "PEER", "AGE"));
            for s in sessions {
                let claims: Vec<String> = s
                    .claims
                    .iter()
                    .map(|c| format!("{} {}", if c.holds { "holds" } else { "waits" }, c.path))
                    .collect();
                lines.push(format!(
                    "  {:<name_width$}  {:<peer_width$}  {:>6}  {}",
                    show::one_line(s.name.as_bytes()),
                    or_dash(&s.peer),
                    age(now, s.opened_ms),
                    or_dash(&claims.join(", "))
                ));
            }
        }
    }
    lines
}

/// `n` and the word, `s` added unless one: `1 claim`, `2 claims`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The keys typed on stdin, a byte at a time, read on a thread of their own (a read of a
/// terminal cannot be given up; the thread ends with the process). Closed at stdin's end.
fn keys() -> tokio::sync::mpsc::UnboundedReceiver<u8> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    if !std::io::stdin().is_terminal() {
        return rx;
    }
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin();
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if buf[..n].iter().any(|b| tx.send(*b).is_err()) {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    });
    rx
}

/// A receiver that never receives.
fn never() -> tokio::sync::mpsc::UnboundedReceiver<u8> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::mem::forget(tx);
    rx
}

/// The terminal while `top` shows: the alternate screen, the cursor hidden, stdin raw (when it is
/// a terminal). Dropping it (`leave`, an error's return, a panic) gives the terminal back as it
/// was.
struct Screen {
    /// stdin's settings before raw mode.
    saved: Option<rustix::termios::Termios>,
    left: bool,
}

/// The alternate screen and the cursor hidden; then shown, and the main screen back.
const ENTER: &str = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
const LEAVE: &str = "\x1b[?25h\x1b[?1049l";

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        use rustix::termios::{tcgetattr, tcsetattr, OptionalActions};
        let stdin = std::io::stdin();
        let saved = match stdin.is_terminal() {
            true => {
                let saved = tcgetattr(&stdin)?;
                let mut raw = saved.clone();
                raw.make_raw();
                tcsetattr(&stdin, OptionalActions::Now, &raw)?;
                Some(saved)
            }
            false => None,
        };
        let screen = Screen { saved, left: false };
        let mut out = std::io::stdout().lock();
        out.write_all(ENTER.as_bytes())?;
        out.flush()?;
        Ok(screen)
    }

    /// The terminal's rows and columns (24 by 80 when it does not say).
    fn size() -> (usize, usize) {
        match rustix::termios::tcgetwinsize(std::io::stdout()) {
            Ok(w) if w.ws_row > 0 && w.ws_col > 0 => (w.ws_row as usize, w.ws_col as usize),
            _ => (24, 80),
        }
    }

    /// Shows `lines` from the top ([`frame`]).
    fn draw(&mut self, lines: &[String]) -> std::io::Result<()> {
        let (rows, cols) = Screen::size();
        let mut out = std::io::stdout().lock();
        out.write_all(frame(lines, rows, cols).as_bytes())?;
        out.flush()
    }

    /// Gives the terminal back: the cursor, the main screen, stdin's settings.
    fn leave(&mut self) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(LEAVE.as_bytes()).and_then(|()| out.flush());
        if let Some(saved) = &self.saved {
            let _ =
                rustix::termios::tcsetattr(std::io::stdin(), rustix::termios::OptionalActions::Now, saved);
        }
    }
}

/// What draws `lines` on a terminal of `rows` by `cols` from its top left corner: each line cut
/// to the width and erased to its end, the first in bold, the rest of the screen erased below the
/// last; lines that do not fit in the height are counted on the last row instead.
fn frame(lines: &[String], rows: usize, cols: usize) -> String {
    let cut = |l: &str| -> String { l.chars().take(cols).collect() };
    let mut shown: Vec<String> = lines.iter().map(|l| cut(l)).collect();
    if shown.len() > rows {
        let more = shown.len() - (rows - 1);
        shown.truncate(rows - 1);
        shown.push(cut(&format!("… {more} more lines (a taller terminal, or a narrower PREFIX)")));
    }
    let mut frame = String::from("\x1b[H");
    for (i, line) in shown.iter().enumerate() {
        match i {
            0 => frame.push_str(&format!("\x1b[1m{line}\x1b[0m")),
            _ => frame.push_str(line),
        }
        frame.push_str("\x1b[K");
        if i + 1 < shown.len() {
            frame.push_str("\r\n");
        }
    }
    frame.push_str("\x1b[J");
    frame
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use wazoo_runtime::family::Family;
    use wazoo_runtime::holders::{Contender, Contenders, State};
    use wazoo_runtime::Mode;

    use super::*;
    use crate::backend::SessionClaim;

    fn contender(state: State, mode: Option<Mode>, data: &[u8], token: i64, since_ms: i64) -> Contender {
        Contender {
            node: format!("/app/x/_c_{token}"),
            sequence: token,
            state,
            mode,
            data: data.to_vec(),
            session: 1,
            token,
            since_ms,
        }
    }

    #[test]
    fn a_snapshot_shows_each_claim_its_holders_then_its_waiters_and_the_sessions() {
        let now = now_ms();
        let lock = Contenders {
            kind: Family::named("lock").unwrap(),
            contenders: vec![
                contender(State::Holds, None, b"ci-7:4121", 4387, now - 192_000),
                contender(State::Waits, None, b"evil\x1b[2J", 4391, now - 41_000),
            ],
        };
        let rwlock = Contenders {
            kind: Family::holders_kind("rwlock").unwrap(),
            contenders: vec![contender(State::Holds, Some(Mode::Read), b"", 4402, now - 12_000)],
        };
        let session = SessionInfo {
            id: 7,
            name: "wazoo lock at /app/locks/deploy".into(),
            peer: "10.0.0.5:51544".into(),
            opened_ms: now - 192_000,
            claims: vec![SessionClaim {
                handle: 1,
                path: "/app/locks/deploy".into(),
                family: "lock".into(),
                holds: true,
                node: "/app/locks/deploy/_c_4387".into(),
                token: 4387,
                since_ms: now - 192_000,
            }],
        };
        let snapshot = Snapshot {
            claims: vec![("/app/locks/deploy".into(), lock), ("/app/schema".into(), rwlock)],
            sessions: Some(Ok(vec![session])),
        };
        let lines = render(&snapshot, "/app", Duration::from_secs(1), None);
        let text = lines.join("\n");
        assert_eq!(lines[0], "2 claims under /app (2 held, 1 waiting)", "{text}");
        assert_eq!(lines[2], "/app/locks/deploy  lock", "{text}");
        assert_eq!(lines[3], "  holds     token 4387          3m12s  ci-7:4121", "{text}");
        // A node's data cannot send the terminal escape sequences.
        assert_eq!(lines[4], "  waits     token 4391            41s  evil\\u{1b}[2J", "{text}");
        assert_eq!(lines[5], "/app/schema  rwlock", "{text}");
        assert_eq!(lines[6], "  holds(r)  token 4402            12s  -", "{text}");
        assert_eq!(lines[8], "client sessions: 1", "{text}");
        assert!(lines[9].starts_with("  NAME") && lines[9].ends_with("AGE  CLAIMS"), "{text}");
        assert_eq!(
            lines[10], "  wazoo lock at /app/locks/deploy  10.0.0.5:51544   3m12s  holds /app/locks/deploy",
            "{text}"
        );

        let header = Header { at: SystemTime::now(), failed: Some("the daemon went away".into()) };
        let none = Snapshot { claims: Vec::new(), sessions: None };
        let lines = render(&none, "/app", Duration::from_millis(500), Some(&header));
        assert!(
            lines[0].starts_with(
                "wazoo top (q quits) · 0 claims under /app (0 held, 0 waiting) · every 500ms · "
            ),
            "how to quit comes first, where a narrow terminal shows it: {lines:?}"
        );
        assert_eq!(lines[1], "! the daemon went away (showing the last look; trying again)");
        assert_eq!(lines[3], "nobody holds or waits under /app");
        assert_eq!(lines.len(), 4, "no daemon, no sessions: {lines:?}");
    }

    #[test]
    fn a_frame_fits_the_terminal() {
        let lines: Vec<String> = (1..=10).map(|i| format!("line {i} ").repeat(3)).collect();
        let drawn = frame(&lines, 4, 8);
        assert!(drawn.starts_with("\x1b[H\x1b[1mline 1 l\x1b[0m\x1b[K\r\n"), "{drawn:?}");
        assert!(drawn.contains("\r\nline 3 l\x1b[K\r\n… 7 more\x1b[K\x1b[J"), "{drawn:?}");
        assert!(
            drawn.ends_with("\x1b[K\x1b[J") && !drawn.ends_with("\r\n\x1b[J"),
            "no newline after the last row"
        );
        let fits = frame(&lines[..2], 4, 80);
        assert_eq!(
            fits,
            "\x1b[H\x1b[1mline 1 line 1 line 1 \x1b[0m\x1b[K\r\nline 2 line 2 line 2 \x1b[K\x1b[J"
        );
    }
}
