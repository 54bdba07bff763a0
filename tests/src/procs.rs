//! The `wazoo` CLI as a user runs it: a process in a group of its own whose output is read line
//! by line and which gets signals, and the processes of the command it runs (found by PID and
//! process group in `/proc`).

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::daemon::Daemon;
use crate::{wazoo_bin, within};

const LIMIT: Duration = Duration::from_secs(60);

/// The claim's node in CMD's environment, whatever the command.
pub const NODE: &str =
    "${WAZOO_LOCK_NODE:-${WAZOO_LEASE_NODE:-${WAZOO_LEADER_NODE:-$WAZOO_GROUP_PATH/$WAZOO_MEMBER}}}";

/// CMD: a shell whose foreground child prints `pids PARENT CHILD node NODE` and then becomes
/// `sleep 30`; the parent waits for it, then runs `true`.
pub fn forks() -> String {
    format!(r#"sh -c 'echo "pids $PPID $$ node {NODE}"; exec sleep 30'; true"#)
}

/// A `wazoo` process with its stdin, stdout and stderr piped.
pub struct Running {
    pub child: Child,
    pub lines: Lines<BufReader<ChildStdout>>,
}

impl Running {
    /// Starts `command` in a process group of its own (so that SIGINT is not ignored by
    /// inheritance, and a signal to it reaches it alone).
    pub fn start(command: &mut Command) -> Running {
        let mut child = command
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Running { child, lines }
    }

    pub fn pid(&self) -> i32 {
        self.child.id().expect("wazoo runs") as i32
    }

    /// The next line wazoo prints; if it ends first, fails naming its status and what it said.
    pub async fn line(&mut self, what: &str) -> String {
        if let Some(line) = within(LIMIT, what, self.lines.next_line()).await.unwrap() {
            return line;
        }
        let mut said = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = within(LIMIT, "wazoo's stderr", stderr.read_to_string(&mut said)).await;
        }
        let status = within(LIMIT, "wazoo ends", self.child.wait()).await;
        panic!("{what}: no line; wazoo ended with {status:?}, saying: {said}")
    }

    /// The `pids PARENT CHILD node NODE` line of [`forks`].
    pub async fn pids(&mut self) -> Cmd {
        let line = self.line("the command runs under the claim").await;
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!((words[0], words[3]), ("pids", "node"), "{line}");
        let (parent, child): (u32, u32) = (words[1].parse().unwrap(), words[2].parse().unwrap());
        // The shell's group, or its child's if the shell is gone already.
        let group = stat(parent).or_else(|| stat(child)).expect("the command runs").1;
        Cmd { parent, child, group, node: words[4].to_string() }
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the PID of a child this test started.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    /// Lets a command blocked in `read line` go on.
    pub async fn go_on(&mut self) {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"go\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Exit status (-1 for a signal) and stderr, once it exits.
    pub async fn exit(&mut self) -> (i32, String) {
        let status = within(LIMIT, "wazoo exits", self.child.wait()).await.unwrap();
        let mut stderr = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut stderr).await;
        }
        (status.code().unwrap_or(-1), stderr)
    }
}

/// The processes of one CMD: the shell wazoo started, its foreground child, and the process
/// group the shell is in.
#[derive(Debug)]
pub struct Cmd {
    pub parent: u32,
    pub child: u32,
    pub group: u32,
    pub node: String,
}

impl Cmd {
    /// Resolves once both processes have ended.
    pub async fn ended(&self) {
        ended(self.parent).await;
        ended(self.child).await;
    }

    /// Both processes, and every process of the group, have ended.
    pub fn gone(&self) -> bool {
        !running(self.parent) && !running(self.child) && group_members(self.group).is_empty()
    }

    /// Asserts, by PID and process group, that nothing of the command is left running.
    pub fn assert_gone(&self, what: &str) {
        assert!(!running(self.parent), "{what}: the command's shell {} still runs", self.parent);
        assert!(!running(self.child), "{what}: the command's child {} still runs", self.child);
        let left = group_members(self.group);
        assert!(
            left.is_empty(),
            "{what}: processes {left:?} of the command's group {} still run",
            self.group
        );
    }

    /// Kills what is left of it (after a failed assertion, so it does not outlive the test).
    pub fn kill(&self) {
        for pid in [self.parent, self.child] {
            // SAFETY: kill(2); at worst the PID is gone already.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// `/proc/PID/stat` as (state, process group), if the process exists.
pub fn stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMM) STATE PPID PGRP …": COMM may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
}

/// Whether `pid` runs: it exists and is not a zombie (a zombie runs no code; who reaps it is
/// up to whoever adopted it).
pub fn running(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z')
}

pub fn group_of(pid: u32) -> u32 {
    stat(pid).expect("the command runs").1
}

/// The running processes of process group `group`.
pub fn group_members(group: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(state, g)| g == group && state != 'Z'))
        .collect()
}

/// Resolves once process `pid` has ended, through a pidfd (no polling).
pub async fn ended(pid: u32) {
    // SAFETY: pidfd_open(2) takes a PID and flags and returns a new descriptor, or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        return; // ESRCH: gone and reaped already
    }
    // SAFETY: a descriptor pidfd_open just returned, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the AsyncFd owns the descriptor, open for as long as it lives.
    let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.unwrap();
    let _ready = fd.readable().await.unwrap();
}

/// The `wazoo` CLI through `daemon`, with no usable ZooKeeper of its own.
pub fn through(daemon: &Daemon) -> Command {
    let mut command = Command::new(wazoo_bin());
    command
        .env("WAZOO_SERVER", &daemon.grpc)
        .env("WAZOO_ZOOKEEPER", "127.0.0.1:1")
        .env("WAZOO_PLUGINS", "/nonexistent")
        .env_remove("WAZOO_LOG")
        .kill_on_drop(true);
    command
}
