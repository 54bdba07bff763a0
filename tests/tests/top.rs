//! `wazoo top`: the real binary in a pseudo-terminal, against a real daemon and ZooKeeper. A lock
//! taken through the daemon shows with its holder's identity and token, and the client session
//! that holds it; released, it goes; `q` (or Ctrl-C, read raw) quits with status 0 and gives the
//! terminal back (the main screen, the cursor, the line discipline's settings). Not on a
//! terminal it prints one snapshot; a bad `--every` is a usage error.
//!
//! What the program draws is read through a small screen model ([`Screen`]): the cursor moves,
//! line and screen erasures and the alternate screen, as a terminal would show them; every wait
//! for the screen has a deadline, and says what the screen showed when it passes.

use std::ffi::CStr;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use wazoo_tests::daemon::{cache, cli, output, signal, Daemon};
use wazoo_tests::*;

/// How long anything may take to show.
const LIMIT: Duration = Duration::from_secs(30);
const ROWS: u16 = 40;
const COLS: u16 = 200;

/// A pseudo-terminal: the master end the test reads and types on, the terminal end the
/// program's stdin, stdout and stderr.
struct Pty {
    master: File,
    terminal: OwnedFd,
}

impl Pty {
    /// A new pseudo-terminal of [`ROWS`] by [`COLS`], in its default (cooked) mode.
    fn open() -> Pty {
        // SAFETY: plain libc calls on descriptors this function owns; every result is checked.
        unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(master >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            let master_file = File::from_raw_fd(master);
            assert_eq!(libc::grantpt(master), 0, "grantpt");
            assert_eq!(libc::unlockpt(master), 0, "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0, "ptsname_r");
            let terminal = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(
                terminal >= 0,
                "opening {:?}: {}",
                CStr::from_ptr(name.as_ptr()),
                std::io::Error::last_os_error()
            );
            let size = libc::winsize { ws_row: ROWS, ws_col: COLS, ws_xpixel: 0, ws_ypixel: 0 };
            assert_eq!(libc::ioctl(master, libc::TIOCSWINSZ, &size as *const libc::winsize), 0, "TIOCSWINSZ");
            Pty { master: master_file, terminal: OwnedFd::from_raw_fd(terminal) }
        }
    }

    /// Runs `command` on the terminal end, as a shell runs a program in a terminal: in a
    /// session of its own whose controlling terminal this is. Its output is read from
    /// [`Pty::output`].
    fn spawn(&self, command: &mut Command) -> Child {
        let stdio = || Stdio::from(self.terminal.try_clone().unwrap());
        command.stdin(stdio()).stdout(stdio()).stderr(stdio()).env("TERM", "xterm").kill_on_drop(true);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command.spawn().expect("starting wazoo top")
    }

    /// What the program writes, as it comes, read on a thread of its own.
    fn output(&self) -> UnboundedReceiver<Vec<u8>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut master = self.master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        rx
    }

    /// Types `keys`.
    fn type_keys(&self, keys: &[u8]) {
        (&self.master).write_all(keys).unwrap();
    }

    /// The terminal's local modes now (`c_lflag`): ICANON and ECHO are on in its default mode.
    fn local_modes(&self) -> libc::tcflag_t {
        // SAFETY: tcgetattr fills the struct it is given; the result is checked.
        unsafe {
            let mut termios: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(self.terminal.as_raw_fd(), &mut termios), 0, "tcgetattr");
            termios.c_lflag
        }
    }
}

/// What a terminal of [`ROWS`] by [`COLS`] shows after the bytes written to it: the escape
/// sequences `wazoo top` uses (cursor position, erase in line and in display, the alternate
/// screen, the cursor shown or hidden), every other one ignored. Lines are not wrapped.
struct Screen {
    written: Vec<u8>,
    rx: UnboundedReceiver<Vec<u8>>,
}

/// The state of the terminal after all that was written.
#[derive(Debug)]
struct Shown {
    /// The screen shown (the alternate one while it is on), its rows' trailing blanks cut.
    text: String,
    alternate: bool,
    cursor_visible: bool,
}

impl Screen {
    fn new(rx: UnboundedReceiver<Vec<u8>>) -> Screen {
        Screen { written: Vec::new(), rx }
    }

    /// The terminal's state after everything written so far.
    fn shown(&self) -> Shown {
        let (rows, cols) = (ROWS as usize, COLS as usize);
        let blank = || vec![vec![' '; cols]; rows];
        let (mut main, mut alt) = (blank(), blank());
        let (mut alternate, mut cursor_visible) = (false, true);
        let (mut row, mut col) = (0usize, 0usize);
        let text = String::from_utf8_lossy(&self.written);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let grid = if alternate { &mut alt } else { &mut main };
            match c {
                '\x1b' => {
                    if chars.peek() != Some(&'[') {
                        chars.next();
                        continue;
                    }
                    chars.next();
                    let mut params = String::new();
                    let mut fin = None;
                    for p in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&p) {
                            fin = Some(p);
                            break;
                        }
                        params.push(p);
                    }
                    let numbers: Vec<usize> =
                        params.trim_start_matches('?').split(';').map(|n| n.parse().unwrap_or(0)).collect();
                    let first = numbers.first().copied().unwrap_or(0);
                    match fin {
                        Some('H') => {
                            row = first.max(1) - 1;
                            col = numbers.get(1).copied().unwrap_or(1).max(1) - 1;
                        }
                        Some('K') if first == 0 => grid[row.min(rows - 1)][col.min(cols)..].fill(' '),
                        Some('K') => grid[row.min(rows - 1)].fill(' '),
                        Some('J') if first == 0 => {
                            grid[row.min(rows - 1)][col.min(cols)..].fill(' ');
                            grid[(row + 1).min(rows)..].iter_mut().for_each(|r| r.fill(' '));
                        }
                        Some('J') => grid.iter_mut().for_each(|r| r.fill(' ')),
                        Some(h @ ('h' | 'l')) if params.starts_with('?') => match first {
                            1049 => {
                                alternate = h == 'h';
                                if alternate {
                                    alt = blank();
                                }
                            }
                            25 => cursor_visible = h == 'h',
                            _ => {}
                        },
                        _ => {}
                    }
                }
                '\r' => col = 0,
                '\n' => {
                    if row + 1 == rows {
                        grid.remove(0);
                        grid.push(vec![' '; cols]);
                    } else {
                        row += 1;
                    }
                }
                '\x08' => col = col.saturating_sub(1),
                c if c.is_control() => {}
                c => {
                    if col < cols {
                        grid[row.min(rows - 1)][col] = c;
                        col += 1;
                    }
                }
            }
        }
        let grid = if alternate { &alt } else { &main };
        let lines: Vec<String> =
            grid.iter().map(|r| r.iter().collect::<String>().trim_end().to_string()).collect();
        Shown { text: lines.join("\n").trim_end().to_string(), alternate, cursor_visible }
    }

    /// Reads until the screen satisfies `ok`, or panics after [`LIMIT`] showing what it shows.
    async fn until(&mut self, what: &str, ok: impl Fn(&Shown) -> bool) -> Shown {
        let deadline = Instant::now() + LIMIT;
        loop {
            let shown = self.shown();
            if ok(&shown) {
                return shown;
            }
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(bytes)) => self.written.extend(bytes),
                Ok(None) => panic!("{what}: the terminal closed; it showed:\n{}", shown.text),
                Err(_) => panic!("{what}: not within {LIMIT:?}; the screen shows:\n{}", shown.text),
            }
        }
    }
}

/// The line of the screen that contains all of `words`, if one does.
fn line_with<'a>(text: &'a str, words: &[&str]) -> Option<&'a str> {
    text.lines().find(|l| words.iter().all(|w| l.contains(w)))
}

/// Whether `text` has the line of a lock at `path`: its path, then its kind.
fn claim_line(text: &str, path: &str) -> bool {
    text.lines().any(|l| l.strip_prefix(path).is_some_and(|rest| rest.trim() == "lock"))
}

/// The contender node under `path` (there is one) with its data as text and its token.
async fn contender(checker: &zookeeper_client::Client, path: &str) -> (String, String, i64) {
    let children = within(LIMIT, "the lock's node appears", wait_children(checker, path, 1)).await;
    let node = format!("{path}/{}", children[0]);
    let (data, stat) = checker.get_data(&node).await.unwrap();
    (node, String::from_utf8_lossy(&data).into_owned(), stat.czxid)
}

/// Waits for `child` to exit: its status code.
async fn exit_code(child: &mut Child, what: &str) -> i32 {
    let status = within(LIMIT, what, child.wait()).await.unwrap();
    status.code().unwrap_or_else(|| panic!("{what}: ended by a signal: {status:?}"))
}

/// Takes the lock at `path` through `daemon` as `id`, holding it with a command that sleeps.
fn take(daemon: &Daemon, path: &str, id: &str) -> Child {
    daemon
        .wazoo()
        .args(["lock", "--id", id, path, "--", "sh", "-c", "sleep 30; true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Stops a lock command with SIGTERM, as a user would, and waits until its node is gone.
async fn release(checker: &zookeeper_client::Client, mut holder: Child, node: &str) {
    signal(holder.id().unwrap(), "-TERM");
    let code = exit_code(&mut holder, "the lock command ends on SIGTERM").await;
    assert_ne!(code, 0, "the lock command was stopped, not finished");
    within(LIMIT, "the lock's node goes", wait_gone(checker, node)).await;
}

/// Locks taken through the daemon show in `wazoo top` (through the same daemon): the lock's path
/// and kind, its holder then its waiter with their identities and tokens, and the client session
/// that holds it; released, each goes. A daemon gone keeps the last screen and says why; `q`
/// quits with exit status 0 and leaves the terminal as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_shows_a_lock_taken_through_the_daemon_and_its_release_then_q_quits() {
    let checker = client(&zk().address()).await;
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let prefix = unique("top");
    let lock = format!("{prefix}/deploy");

    let pty = Pty::open();
    let cooked = pty.local_modes();
    assert_ne!(cooked & libc::ICANON, 0, "a new terminal is in canonical mode");
    let mut screen = Screen::new(pty.output());
    let mut top = pty.spawn(daemon.wazoo().args(["top", &prefix, "--every", "200ms"]));

    let shown = screen
        .until("the first screen", |s| s.alternate && s.text.contains(&format!("0 claims under {prefix}")))
        .await;
    assert!(!shown.cursor_visible, "the cursor is hidden while top shows:\n{}", shown.text);
    assert!(
        shown.text.contains("client sessions: 0"),
        "through a daemon, its sessions show:\n{}",
        shown.text
    );
    assert_eq!(pty.local_modes() & (libc::ICANON | libc::ECHO), 0, "the terminal is raw while top shows");

    // A holder, then a waiter behind it.
    let first = take(&daemon, &lock, "top-holder");
    let (first_node, first_id, first_token) = contender(&checker, &lock).await;
    assert!(first_id.starts_with("top-holder"), "the lock's node names its holder: {first_id:?}");
    let second = take(&daemon, &lock, "top-waiter");
    let nodes = within(LIMIT, "the waiter's node appears", wait_children(&checker, &lock, 2)).await;
    let second_node = nodes.iter().map(|n| format!("{lock}/{n}")).find(|n| *n != first_node).unwrap();
    let (second_data, second_stat) = checker.get_data(&second_node).await.unwrap();
    let second_id = String::from_utf8_lossy(&second_data).into_owned();
    assert!(second_id.starts_with("top-waiter"), "{second_id:?}");
    let (first_token, second_token) = (first_token.to_string(), second_stat.czxid.to_string());

    let shown = screen
        .until("the lock, its holder and its waiter", |s| {
            claim_line(&s.text, &lock)
                && line_with(&s.text, &["holds", &first_token, &first_id]).is_some()
                && line_with(&s.text, &["waits", &second_token, &second_id]).is_some()
        })
        .await;
    let at = |words: &[&str]| shown.text.lines().position(|l| words.iter().all(|w| l.contains(w))).unwrap();
    let (claim_at, holder_at, waiter_at) =
        (at(&[&format!("{lock}  lock")]), at(&["holds", &first_token]), at(&["waits", &second_token]));
    assert!(
        claim_at < holder_at && holder_at < waiter_at,
        "the claim, its holder, then its waiter:\n{}",
        shown.text
    );
    assert!(shown.text.contains(&format!("1 claim under {prefix} (1 held, 1 waiting)")), "{}", shown.text);
    // Its client session holds it.
    let held = format!("holds {lock}");
    let shown = screen.until("the session holding it", |s| line_with(&s.text, &[&held]).is_some()).await;
    let session_line = line_with(&shown.text, &[&held]).unwrap();
    assert!(session_line.contains("127.0.0.1:"), "the session's peer address shows: {session_line:?}");

    // The holder lets go: the waiter holds.
    release(&checker, first, &first_node).await;
    screen
        .until("the waiter holding", |s| {
            !s.text.contains("top-holder")
                && line_with(&s.text, &["holds", &second_token, &second_id]).is_some()
                && s.text.contains("(1 held, 0 waiting)")
        })
        .await;
    // And lets go too: nothing left.
    release(&checker, second, &second_node).await;
    let shown = screen
        .until("the released lock gone", |s| {
            !s.text.contains(&lock) && s.text.contains(&format!("0 claims under {prefix}"))
        })
        .await;
    assert!(shown.alternate, "still showing");

    // The daemon gone: the last screen stays, with why the look failed, until q.
    signal(daemon.pid(), "-KILL");
    let shown = screen
        .until("the failed look said", |s| s.text.lines().nth(1).is_some_and(|l| l.starts_with("! ")))
        .await;
    assert!(shown.text.contains(&format!("0 claims under {prefix}")), "the last look stays:\n{}", shown.text);

    pty.type_keys(b"q");
    assert_eq!(exit_code(&mut top, "top quits on q").await, 0);
    // What it wrote last may still be on its way from the terminal: read until it shows.
    screen.until("the main screen and the cursor back", |s| !s.alternate && s.cursor_visible).await;
    assert_eq!(pty.local_modes(), cooked, "top gave the terminal's settings back");
}

/// On this process's own host (no daemon), a lock shows with no session section, and Ctrl-C,
/// which raw mode reads as a key, quits with status 0 and gives the terminal back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_on_its_own_session_quits_on_ctrl_c() {
    let checker = client(&zk().address()).await;
    let prefix = unique("top-local");
    let lock = format!("{prefix}/job");
    let mut holder = cli()
        .args(["lock", &lock, "--", "sh", "-c", "sleep 30; true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (_, identity, token) = contender(&checker, &lock).await;

    let pty = Pty::open();
    let cooked = pty.local_modes();
    let mut screen = Screen::new(pty.output());
    let mut top = pty.spawn(cli().args(["top", &prefix]));
    let shown = screen
        .until("the lock held locally", |s| {
            s.alternate && line_with(&s.text, &["holds", &token.to_string(), &identity]).is_some()
        })
        .await;
    assert!(!shown.text.contains("client sessions"), "no daemon, no sessions:\n{}", shown.text);

    pty.type_keys(b"\x03");
    assert_eq!(exit_code(&mut top, "top quits on Ctrl-C").await, 0);
    screen.until("the main screen and the cursor back", |s| !s.alternate && s.cursor_visible).await;
    assert_eq!(pty.local_modes(), cooked, "top gave the terminal's settings back");
    signal(holder.id().unwrap(), "-TERM");
    exit_code(&mut holder, "the lock command ends").await;
}

/// With stdout not a terminal, `top` prints one snapshot, with no escape sequence, and exits 0:
/// through a daemon and on its own session alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_not_on_a_terminal_prints_one_snapshot() {
    let checker = client(&zk().address()).await;
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let prefix = unique("top-snapshot");
    let lock = format!("{prefix}/a");
    let mut holder = daemon
        .wazoo()
        .args(["lock", &lock, "--", "sh", "-c", "sleep 30; true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (_, identity, token) = contender(&checker, &lock).await;
    let token = token.to_string();

    for through_daemon in [true, false] {
        let mut command = if through_daemon { daemon.wazoo() } else { cli() };
        command.args(["top", &prefix]).stdin(Stdio::null());
        let (code, stdout, stderr) = output(&mut command).await;
        assert_eq!(code, 0, "daemon {through_daemon}: {stderr}");
        assert!(!stdout.contains('\x1b'), "no escape sequences when not on a terminal: {stdout:?}");
        assert!(stdout.starts_with(&format!("1 claim under {prefix} (1 held, 0 waiting)\n")), "{stdout}");
        assert!(claim_line(&stdout, &lock), "{stdout}");
        assert!(line_with(&stdout, &["holds", &token, &identity]).is_some(), "{stdout}");
        assert_eq!(stdout.contains("client sessions"), through_daemon, "{stdout}");
        if through_daemon {
            assert!(line_with(&stdout, &[&format!("holds {lock}")]).is_some(), "its session: {stdout}");
        }
    }
    signal(holder.id().unwrap(), "-TERM");
    exit_code(&mut holder, "the lock command ends").await;

    // Nothing there: still a snapshot, still 0.
    let (code, stdout, stderr) = output(cli().args(["top", &unique("top-empty")])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nobody holds or waits under"), "{stdout}");
}

/// A bad `--every` or prefix is a usage error (exit status 2) said in one line, before anything
/// is asked of anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_refuses_a_bad_every_or_prefix() {
    for (args, says) in [
        (vec!["top", "--every", "soon"], "--every"),
        (vec!["top", "--every", "0"], "--every"),
        (vec!["top", "--every", "10ms"], "at least 100ms"),
        (vec!["top", "--every=-1s"], "--every"),
        (vec!["top", "relative/path"], "invalid prefix"),
    ] {
        // A daemon that is never reached: usage is checked first.
        let (code, stdout, stderr) = output(cli().args(["--server", "127.0.0.1:1"]).args(&args)).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        let said: Vec<&str> =
            stderr.lines().filter(|l| !l.is_empty() && !l.starts_with("For more information")).collect();
        assert_eq!(said.len(), 1, "{args:?}: one line: {stderr:?}");
        assert!(said[0].contains(says), "{args:?}: {stderr:?} does not say {says:?}");
    }
}
