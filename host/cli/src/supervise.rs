//! The one process-supervision layer: how `lock`, `rwlock`, `semaphore`, `elect` and `group join`
//! run CMD under a claim, `partition` under a share's locks, `register` under a registration and
//! `double-barrier` inside the barrier, on the local path and through `--server` alike, all in one
//! loop ([`run_under`]).
//!
//! - CMD runs in a process group of its own and, where the cgroup v2 hierarchy lets wazoo make
//!   a cgroup that can be killed as a whole (`cgroup.kill`), in that cgroup too
//!   (`WAZOO_CGROUP=off` keeps it to the process group). Signals, the stop on loss and the kill
//!   after the grace reach every process of it, never only the direct child. A process group
//!   cannot hold a descendant that calls `setsid`; a cgroup can.
//! - A guard process, this binary again in a hidden mode, reads a pipe whose write end only
//!   wazoo holds. CMD writes its PID (its process group's id) there itself before it execs, so
//!   the guard knows the group whenever CMD runs at all. However wazoo ends, SIGKILL included,
//!   the kernel closes that end, and unless wazoo said it was done the guard kills what is left
//!   of CMD at once. The guard is in a process group of its own and ignores SIGINT, SIGTERM,
//!   SIGHUP, SIGQUIT and SIGTSTP, so that only SIGKILL stops it.
//! - [`Signals`] catches SIGINT, SIGTERM and SIGHUP from the start of a command, so a waiter
//!   interrupted in the queue leaves it cleanly, and a holder forwards them to CMD.

use std::future::Future;
use std::io::Read as _;
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::{kill, killpg, SigHandler, Signal};
use nix::unistd::{getpid, Pid};
use tokio::signal::unix::{signal, SignalKind};

/// `argv[1]` of the guard process.
const GUARD: &str = "__wazoo-guard";
/// The signals the guard ignores: whatever is sent to CMD's process group, or to wazoo by a
/// terminal.
const GUARD_IGNORES: [Signal; 5] =
    [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGTSTP];
/// What wazoo writes to the guard once CMD's processes are gone by its own doing.
const DONE: &str = "done";
/// How often a stop looks whether CMD's processes are gone.
const POLL: Duration = Duration::from_millis(10);
/// How long a stop waits for SIGKILLed processes to be gone before it carries on regardless.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// The default `--grace`: a fifth of the session timeout. Loss is declared once ZooKeeper has
/// answered nothing for 2/3 of the timeout ([`wazoo_runtime::keeper::CUT_OFF`]), so CMD is gone within
/// 13/15 of it, before the ensemble can expire the session and hand the claim to anyone else.
pub(crate) fn default_grace(session_timeout: Duration) -> Duration {
    session_timeout / 5
}

/// A process's exit status as a shell reports it: its code, or 128 + the signal that ended it.
pub(crate) fn exit_status(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)).clamp(0, 255) as u8
}

/// SIGINT, SIGTERM and SIGHUP, caught from the moment this is made until the process ends.
pub(crate) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    /// How many have been received.
    caught: u64,
}

/// A signal [`Signals`] caught.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caught(Signal);

impl Caught {
    /// The exit status of a process that ends because of it: 128 + its number.
    pub(crate) fn status(self) -> u8 {
        128 + self.0 as u8
    }

    pub(crate) fn name(self) -> &'static str {
        self.0.as_str()
    }
}

impl Signals {
    pub(crate) fn new() -> anyhow::Result<Signals> {
        let catch = |kind| signal(kind).context("installing a signal handler");
        Ok(Signals {
            int: catch(SignalKind::interrupt())?,
            term: catch(SignalKind::terminate())?,
            hup: catch(SignalKind::hangup())?,
            caught: 0,
        })
    }

    /// The next signal.
    pub(crate) async fn recv(&mut self) -> Caught {
        let caught = tokio::select! {
            Some(()) = self.int.recv() => Caught(Signal::SIGINT),
            Some(()) = self.term.recv() => Caught(Signal::SIGTERM),
            Some(()) = self.hup.recv() => Caught(Signal::SIGHUP),
            else => std::future::pending().await,
        };
        self.caught += 1;
        caught
    }

    /// How many signals have been received so far.
    pub(crate) fn caught(&self) -> u64 {
        self.caught
    }

    /// Runs `work` unless a signal comes first (one that came earlier counts): then `work` is
    /// dropped, which cancels it, and the signal is returned.
    pub(crate) async fn interrupt<T>(&mut self, work: impl Future<Output = T>) -> Result<T, Caught> {
        tokio::select! {
            biased;
            caught = self.recv() => Err(caught),
            done = work => Ok(done),
        }
    }
}

/// Looks CMD's program up as execvp(3) will (a name with a `/` as it is, any other on `PATH`, or
/// on `/bin:/usr/bin` without one) before a claim is taken for it: not found is exit status 127,
/// found but not runnable by this user 126, each with a line that says so. A program named by
/// an absolute path that does not exist is most likely a second lock path where the old syntax
/// took several: the message says how several locks are named now. A first word that starts
/// with `-` not after `--` is an option wazoo does not know (a typo, or another tool's habit):
/// a usage error, saying that such a CMD goes after `--`; so is a `--` with nothing after it.
pub(crate) fn check_command(command: &[String]) -> anyhow::Result<()> {
    let Some(program) = command.first() else {
        // `--` with nothing after it: a CMD left out by mistake, not a hold until a signal.
        if std::env::args().last().as_deref() == Some("--") {
            return Err(crate::exit::usage(
                "nothing after `--`: give the command to run, or leave `--` out to hold until a signal",
            ));
        }
        return Ok(());
    };
    if program.is_empty() {
        return Err(crate::exit::usage("CMD: an empty program name"));
    }
    if program.starts_with('-') && program != "-" && !after_separator(command) {
        return Err(crate::exit::usage(format!(
            "unknown option {program} (a CMD that starts with `-` goes after `--`)"
        )));
    }
    // Some(true): runnable; Some(false): there, but not a runnable file; None: not there.
    let runnable = |path: &std::path::Path| {
        let meta = std::fs::metadata(path).ok()?;
        Some(meta.is_file() && nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok())
    };
    let found = if program.contains('/') {
        runnable(std::path::Path::new(program))
    } else {
        let dirs = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
        let mut found = None;
        for dir in std::env::split_paths(&dirs) {
            match runnable(&dir.join(program)) {
                Some(true) => {
                    found = Some(true);
                    break;
                }
                Some(false) => found = Some(false),
                None => {}
            }
        }
        found
    };
    match found {
        Some(true) => Ok(()),
        Some(false) => Err(crate::exit::Exit {
            code: crate::exit::CANNOT_RUN,
            message: format!("CMD {program}: not a program that can be run"),
        }
        .into()),
        None => {
            let hint = if program.starts_with('/') {
                " (every argument after the path is CMD; name more locks with --also PATH)"
            } else {
                ""
            };
            Err(crate::exit::Exit {
                code: crate::exit::NOT_FOUND,
                message: format!("CMD {program}: not found{hint}"),
            }
            .into())
        }
    }
}

/// Whether `command` came after a `--` on this process's command line (its words are the
/// line's last ones, right after a `--`).
fn after_separator(command: &[String]) -> bool {
    let line: Vec<String> = std::env::args().collect();
    line.len() > command.len()
        && line[line.len() - command.len()..] == *command
        && line[line.len() - command.len() - 1] == "--"
}

/// CMD as [`run_under`] runs it.
pub(crate) struct Cmd<'a> {
    /// The program and its arguments; empty: nothing runs, and a signal ends the run.
    pub(crate) command: &'a [String],
    /// Added to CMD's environment.
    pub(crate) env: &'a [(String, String)],
    /// How long CMD's processes have after SIGTERM before SIGKILL, when it is stopped.
    pub(crate) grace: Duration,
    /// Said on stderr (after `wazoo: `) before what CMD left running is stopped once its own
    /// process ended; `None`: stopped without a word.
    pub(crate) leftovers: Option<String>,
}

/// How a run of CMD under something ([`run_under`]) ended. CMD's processes are all gone by
/// then, and its guard told so.
pub(crate) enum Ended<E> {
    /// CMD's own process ended (what it left running was stopped since): how.
    Exited(std::io::Result<ExitStatus>),
    /// What CMD ran under ended first, saying this: CMD was stopped (SIGTERM, SIGKILL after the
    /// grace).
    By(E),
    /// No CMD ran, and a signal came.
    Signalled(Caught),
}

/// The one supervision loop: runs `cmd` until it or what it runs under ends (`ends`, a claim's
/// loss or any other end, which says on stderr why it ended before it resolves), and returns how
/// it ended, with CMD's processes all gone. CMD runs supervised ([`Supervised`]: its own process
/// group and cgroup, watched by a guard); every signal wazoo gets meanwhile goes to all of it.
/// When CMD's own process ends, what it left running is stopped (SIGTERM, SIGKILL after the
/// grace), with [`Cmd::leftovers`] said first; when `ends` resolves first, CMD is stopped the same
/// way. Without a command, a signal ends it ([`Ended::Signalled`]). An error only when CMD
/// cannot be started (`ends` is then not awaited): letting go of what it was to run under is the
/// caller's, as always once this returns.
pub(crate) async fn run_under<E>(
    cmd: Cmd<'_>,
    signals: &mut Signals,
    ends: impl Future<Output = E>,
) -> anyhow::Result<Ended<E>> {
    if cmd.command.is_empty() {
        return Ok(tokio::select! {
            caught = signals.recv() => Ended::Signalled(caught),
            end = ends => Ended::By(end),
        });
    }
    let mut child = Supervised::spawn(cmd.command, cmd.env)?;
    tokio::pin!(ends);
    let ended = loop {
        tokio::select! {
            status = child.wait() => {
                if child.remains() {
                    if let Some(leftovers) = &cmd.leftovers {
                        eprintln!("wazoo: {leftovers}");
                    }
                    child.stop(cmd.grace).await;
                }
                break Ended::Exited(status);
            }
            end = &mut ends => {
                child.stop(cmd.grace).await;
                break Ended::By(end);
            }
            caught = signals.recv() => child.forward(caught),
        }
    };
    child.finish().await;
    Ok(ended)
}

/// The exit status of a CMD that ended by itself ([`Ended::Exited`]): its own, as a shell
/// reports it; 70 if it could not be waited for, said on stderr.
pub(crate) fn exited(status: std::io::Result<ExitStatus>) -> u8 {
    match status {
        Ok(status) => exit_status(status),
        Err(e) => {
            eprintln!("wazoo: waiting for the command: {e}");
            crate::exit::FAILED
        }
    }
}

/// A running CMD: its process group, its cgroup if it has one, and its guard. Run only by
/// [`run_under`].
struct Supervised {
    child: tokio::process::Child,
    /// CMD's process group, whose id is CMD's PID.
    group: Pid,
    cgroup: Option<Cgroup>,
    /// The write end of the guard's pipe; closing it without [`DONE`] makes the guard kill.
    guard_pipe: Option<OwnedFd>,
    guard: tokio::process::Child,
}

impl Supervised {
    /// Starts `command` with `env` added, in a process group (and cgroup) of its own, watched by
    /// a guard.
    fn spawn(command: &[String], env: &[(String, String)]) -> anyhow::Result<Supervised> {
        let (guard_read, guard_pipe) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("making the guard's pipe")?;
        let mut cgroup = Cgroup::create();
        let mut guard = tokio::process::Command::new("/proc/self/exe");
        guard
            .arg(GUARD)
            .arg(cgroup.as_ref().map_or_else(|| "-".into(), |c| c.dir.clone()))
            .stdin(Stdio::from(guard_read))
            .stdout(Stdio::null())
            .process_group(0);
        // SAFETY: sigaction(2) with SIG_IGN, between fork and exec: async-signal-safe, and an
        // ignored signal stays ignored across exec, so the guard never runs unprotected.
        unsafe {
            guard.pre_exec(|| {
                for sig in GUARD_IGNORES {
                    nix::sys::signal::signal(sig, SigHandler::SigIgn)?;
                }
                Ok(())
            });
        }
        let guard = match guard.spawn() {
            Ok(guard) => guard,
            Err(e) => {
                if let Some(c) = &cgroup {
                    c.remove();
                }
                return Err(anyhow::anyhow!("cannot start the guard process: {e}"));
            }
        };
        let mut cmd = tokio::process::Command::new(&command[0]);
        cmd.args(&command[1..]).envs(env.iter().map(|(k, v)| (k, v))).process_group(0);
        // Kept open until the command has started: the child writes to it before exec.
        let procs = cgroup.as_ref().and_then(|c| c.procs_file());
        let procs_fd = procs.as_ref().map(|p| p.as_raw_fd());
        let guard_fd = guard_pipe.as_raw_fd();
        // SAFETY: the closure runs in the child between fork and exec, after setpgid, and makes
        // only getpid(2) and write(2) calls on descriptors open until spawn returns, formatting
        // on the stack: async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(fd) = procs_fd {
                    // "0" moves the writing process; if it fails, the process group still holds.
                    let _ = nix::unistd::write(BorrowedFd::borrow_raw(fd), b"0");
                }
                let mut line = [0u8; 12];
                let _ =
                    nix::unistd::write(BorrowedFd::borrow_raw(guard_fd), decimal_line(getpid(), &mut line));
                Ok(())
            });
        }
        let spawned = cmd.spawn();
        drop(procs);
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = nix::unistd::write(&guard_pipe, DONE.as_bytes());
                // As a shell says it: not found 127 (a script whose interpreter is missing
                // too), any other failure to start it 126.
                let code = match e.kind() {
                    std::io::ErrorKind::NotFound => crate::exit::NOT_FOUND,
                    _ => crate::exit::CANNOT_RUN,
                };
                let message = match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        format!("cannot run {:?}: {e} (a script's interpreter may be missing)", command[0])
                    }
                    _ => format!("cannot run {:?}: {e}", command[0]),
                };
                return Err(crate::exit::Exit { code, message }.into());
            }
        };
        let pid = child.id().expect("a command just started has a PID") as i32;
        let group = Pid::from_raw(pid);
        if let Some(c) = &cgroup {
            if !c.holds(pid) {
                tracing::warn!(cgroup = %c.dir.display(), "could not move the command into its cgroup");
                c.remove();
                cgroup = None;
            }
        }
        match &cgroup {
            Some(c) => tracing::info!(
                pid,
                "the command runs in cgroup {}, killed as a whole through cgroup.kill",
                c.dir.display()
            ),
            None => {
                tracing::info!(pid, "the command runs in process group {group} (no writable cgroup v2 here)")
            }
        }
        Ok(Supervised { child, group, cgroup, guard_pipe: Some(guard_pipe), guard })
    }

    /// Waits for CMD's own process to end (its processes may live on).
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Sends `caught` to every process of CMD.
    fn forward(&self, caught: Caught) {
        self.signal(caught.0);
    }

    /// Whether any process of CMD still runs.
    fn remains(&mut self) -> bool {
        let _ = self.child.try_wait();
        !self.members().is_empty()
    }

    /// SIGTERM to every process of CMD; once `grace` has passed, SIGKILL to whatever is left.
    /// Returns when they are all gone.
    async fn stop(&mut self, grace: Duration) {
        self.signal(Signal::SIGTERM);
        if !self.gone_by(Instant::now() + grace).await {
            tracing::info!(?grace, "the command outlived its grace; killing it");
            self.signal(Signal::SIGKILL);
            if let Some(c) = &self.cgroup {
                c.kill();
            }
            if !self.gone_by(Instant::now() + KILL_WAIT).await {
                tracing::warn!(left = ?self.members(), "processes of the command survive SIGKILL");
            }
        }
        let _ = tokio::time::timeout(KILL_WAIT, self.child.wait()).await;
    }

    /// Tells the guard that CMD is gone and waits for it to remove the cgroup.
    async fn finish(mut self) {
        if let Some(pipe) = self.guard_pipe.take() {
            let _ = nix::unistd::write(&pipe, format!("{DONE}\n").as_bytes());
        }
        let _ = tokio::time::timeout(KILL_WAIT, self.guard.wait()).await;
        if let Some(c) = &self.cgroup {
            c.remove();
        }
    }

    fn signal(&self, signal: Signal) {
        let _ = killpg(self.group, signal);
        if let Some(c) = &self.cgroup {
            for pid in c.procs() {
                let _ = kill(pid, signal);
            }
        }
    }

    /// CMD's processes that still run: its process group and its cgroup, zombies left out.
    fn members(&self) -> Vec<Pid> {
        let mut found = group_members(self.group);
        if let Some(c) = &self.cgroup {
            let more: Vec<Pid> =
                c.procs().into_iter().filter(|p| running(*p) && !found.contains(p)).collect();
            found.extend(more);
        }
        found
    }

    /// Waits until every process of CMD is gone, or `deadline`: whether they are.
    async fn gone_by(&mut self, deadline: Instant) -> bool {
        loop {
            let _ = self.child.try_wait();
            if self.members().is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }
}

/// A cgroup v2 of CMD's own, under wazoo's.
struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// Makes one if `WAZOO_CGROUP` is not `off` and the hierarchy lets this process make a
    /// cgroup with `cgroup.kill` (Linux 5.14 and later).
    fn create() -> Option<Cgroup> {
        if std::env::var("WAZOO_CGROUP").is_ok_and(|v| v == "off") {
            return None;
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("wazoo-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let base = own_cgroup()?;
        sweep(&base);
        let dir = base.join(name);
        if let Err(e) = std::fs::create_dir(&dir) {
            tracing::debug!(dir = %dir.display(), error = %e, "no cgroup of the command's own");
            return None;
        }
        let cgroup = Cgroup { dir };
        if !cgroup.dir.join("cgroup.kill").exists() {
            cgroup.remove();
            return None;
        }
        Some(cgroup)
    }

    fn procs_file(&self) -> Option<std::fs::File> {
        std::fs::OpenOptions::new().write(true).open(self.dir.join("cgroup.procs")).ok()
    }

    /// The processes in it.
    fn procs(&self) -> Vec<Pid> {
        let text = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        text.lines().filter_map(|l| l.trim().parse().ok()).map(Pid::from_raw).collect()
    }

    /// Whether process `pid` is in it.
    fn holds(&self, pid: i32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else { return false };
        let Some(path) = text.lines().find_map(|l| l.strip_prefix("0::")) else { return false };
        self.dir.ends_with(path.trim_start_matches('/'))
    }

    /// SIGKILL to every process in it, at once.
    fn kill(&self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
    }

    /// Removes it once it is empty (waiting up to [`KILL_WAIT`] for its processes to go).
    fn remove(&self) {
        remove_cgroup(&self.dir)
    }
}

fn remove_cgroup(dir: &Path) {
    let deadline = Instant::now() + KILL_WAIT;
    while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
}

/// Removes the empty cgroups under `base` that wazoo processes which no longer run left behind
/// (killed before their guard started, say). A cgroup with processes in it cannot be removed.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) =
            name.to_str().and_then(|n| n.strip_prefix("wazoo-")?.split('-').next()?.parse::<i32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Where this process's cgroup v2 is in the file system, if it is mounted.
fn own_cgroup() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // "ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS … - FSTYPE SOURCE SUPER-OPTIONS"
    let (root, point) = mounts.lines().find_map(|line| {
        let (fields, fstype) = line.split_once(" - ")?;
        if !fstype.starts_with("cgroup2 ") {
            return None;
        }
        let fields: Vec<&str> = fields.split(' ').collect();
        Some((fields.get(3)?.to_string(), PathBuf::from(fields.get(4)?)))
    })?;
    let inside = own.strip_prefix(root.trim_end_matches('/'))?;
    Some(point.join(inside.trim_start_matches('/')))
}

/// `/proc/PID/stat` as (state, process group), if the process exists.
fn stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMM) STATE PPID PGRP …": COMM may hold spaces and parentheses.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
}

/// Whether `pid` exists and is not a zombie (a zombie runs no code).
fn running(pid: Pid) -> bool {
    stat(pid.as_raw()).is_some_and(|(state, _)| state != 'Z')
}

/// The processes of `group` that are not zombies.
fn group_members(group: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(state, g)| g == group.as_raw() && state != 'Z'))
        .map(Pid::from_raw)
        .collect()
}

/// If this process was started as a guard, runs as one and returns its exit status.
pub(crate) fn guard_mode() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != GUARD {
        return None;
    }
    let cgroup = args.next().filter(|a| a != "-").map(PathBuf::from);
    Some(guard(cgroup))
}

/// `pid` in decimal and a newline, in `buf`.
fn decimal_line(pid: Pid, buf: &mut [u8; 12]) -> &[u8] {
    let mut n = pid.as_raw().unsigned_abs();
    let mut at = buf.len() - 1;
    buf[at] = b'\n';
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// The guard: waits until wazoo closes the pipe on stdin (by ending, however it ends). Unless
/// wazoo wrote [`DONE`] first, it SIGKILLs CMD's process group (whose id CMD wrote first) and
/// cgroup. It removes the cgroup.
fn guard(cgroup: Option<PathBuf>) -> ExitCode {
    let mut said = Vec::new();
    let _ = std::io::stdin().lock().read_to_end(&mut said);
    let said = String::from_utf8_lossy(&said);
    if !said.lines().any(|l| l == DONE) {
        let group = said.lines().next().and_then(|l| l.parse::<i32>().ok()).map(Pid::from_raw);
        let hit = group.is_some_and(|g| killpg(g, Signal::SIGKILL).is_ok());
        let populated =
            |c: &PathBuf| std::fs::read_to_string(c.join("cgroup.procs")).is_ok_and(|p| !p.is_empty());
        let cut = cgroup
            .as_ref()
            .is_some_and(|c| populated(c) && std::fs::write(c.join("cgroup.kill"), "1").is_ok());
        if hit || cut {
            eprintln!("wazoo: ended while its command ran; the command's processes were killed");
        }
    }
    if let Some(dir) = cgroup {
        remove_cgroup(&dir);
    }
    ExitCode::SUCCESS
}
