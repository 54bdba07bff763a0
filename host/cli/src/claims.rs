//! The claim commands, written once: `lock`, `rwlock`, `semaphore`, `elect` and `group join`
//! take a claim through a [`Backend`] (this process's own host, [`crate::local`], or a `wazoo
//! serve` daemon, [`crate::remote`]) and run CMD under it, supervised ([`crate::supervise`]).
//!
//! Everything a user sees is decided here, whatever the backend: the checks before anything is
//! asked, the messages, the environment CMD gets, and the exit statuses (a claim not had 3, lost
//! 4, revoked 5, a signal before the claim 128 + its number).

use std::time::Duration;

use wazoo_runtime::Want;

use crate::args::{HoldArgs, Statuses, WaitArgs};
use crate::backend::{Backend, Contender, Ending, Failure, Granted, Holding};
use crate::cli::mode_name;
use crate::commands::{check_path, not_held, Waited};
use crate::supervise::{default_grace, exit_status, Caught, Signals, Supervised};
use crate::{exit, show};

/// A claim command's arguments.
pub(crate) struct Run<'a> {
    /// None for a membership, which has no wait.
    pub(crate) wait: Option<&'a WaitArgs>,
    pub(crate) hold: &'a HoldArgs,
    pub(crate) command: &'a [String],
}

/// What a claim command asks for, in the words its messages use.
pub(crate) struct Asked<'a> {
    pub(crate) want: Want,
    pub(crate) path: &'a str,
    pub(crate) recipe: &'a str,
}

impl Asked<'_> {
    /// The path's kind, for the usage error of an invalid one.
    fn path_kind(&self) -> &'static str {
        match self.want {
            Want::Lock | Want::ReadWrite(_) => "lock",
            Want::Lease { .. } => "semaphore",
            Want::Leadership { .. } => "election",
            Want::Membership { .. } => "group",
        }
    }

    /// What is held, for messages ("lock at /x", "lease of /s").
    fn what(&self) -> String {
        let path = self.path;
        match &self.want {
            Want::Lock => format!("lock at {path}"),
            Want::ReadWrite(mode) => format!("{} lock at {path}", mode_name(*mode)),
            Want::Lease { .. } => format!("lease of {path}"),
            Want::Leadership { .. } => format!("leadership of {path}"),
            Want::Membership { name, .. } => format!("membership of {path} as {name}"),
        }
    }

    /// The context of a failure to get it.
    fn doing(&self) -> String {
        let path = self.path;
        match &self.want {
            Want::Lease { .. } => format!("cannot take a lease of {path}"),
            Want::Leadership { .. } => format!("cannot campaign in {path}"),
            Want::Membership { .. } => format!("group {path}"),
            _ => format!("cannot acquire the {}", self.what()),
        }
    }

    fn waited(&self) -> Waited {
        match self.want {
            Want::Lease { .. } => Waited::Lease,
            Want::Leadership { .. } => Waited::Leadership,
            _ => Waited::Lock,
        }
    }

    /// The environment of CMD; its `*_NODE` and `WAZOO_FENCING_TOKEN` are printed when there is
    /// no command.
    fn env(&self, granted: Granted) -> Vec<(String, String)> {
        self.env_of(granted).into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    fn env_of(&self, granted: Granted) -> Vec<(&'static str, String)> {
        let path = self.path.to_string();
        let Granted { node, token } = granted;
        match &self.want {
            Want::Lock | Want::ReadWrite(_) => {
                let mut env = vec![("WAZOO_LOCK_PATH", path)];
                if let Want::ReadWrite(mode) = self.want {
                    env.push(("WAZOO_LOCK_MODE", mode_name(mode).to_string()));
                }
                env.push(("WAZOO_FENCING_TOKEN", token.to_string()));
                env.push(("WAZOO_LOCK_NODE", node));
                env
            }
            Want::Lease { .. } => vec![
                ("WAZOO_FENCING_TOKEN", token.to_string()),
                ("WAZOO_LEASE_NODE", node),
                ("WAZOO_SEMAPHORE_PATH", path),
            ],
            Want::Leadership { id } => vec![
                ("WAZOO_FENCING_TOKEN", token.to_string()),
                ("WAZOO_LEADER_NODE", node),
                ("WAZOO_ELECTION_PATH", path),
                ("WAZOO_LEADER_ID", id.clone()),
            ],
            Want::Membership { name, .. } => vec![("WAZOO_GROUP_PATH", path), ("WAZOO_MEMBER", name.clone())],
        }
    }
}

/// `wazoo lock|rwlock|semaphore|elect|group join`: takes the claim, then runs the command under
/// it ([`hold`]). A signal before the claim is had exits 128 + the signal, having left the
/// queue; `--timeout` (or `--no-wait`) passing exits 3 or `--conflict-exit-code`.
pub(crate) async fn claim(backend: &impl Backend, asked: Asked<'_>, run: Run<'_>) -> anyhow::Result<u8> {
    let mut signals = Signals::new()?;
    // Refuse a bad path before asking anyone (the host checks it again for the recipe).
    check_path(asked.path_kind(), asked.path)?;
    let what = asked.what();
    let mut contender = match signals.interrupt(backend.contender(&asked.want, asked.recipe, &what)).await {
        Ok(contender) => contender?,
        Err(caught) => return Ok(interrupted(caught, &what)),
    };
    let timeout = run.wait.and_then(WaitArgs::wait);
    let granted = match signals.interrupt(contender.acquire(asked.path, timeout)).await {
        Ok(Ok(granted)) => granted,
        Ok(Err(failure)) => {
            contender.close().await;
            return match (failure, run.wait) {
                (Failure::Timeout, Some(wait)) => Ok(not_held(asked.waited(), asked.path, wait)),
                (failure, _) => Err(failure.into_error(asked.doing())),
            };
        }
        Err(caught) => {
            contender.close().await;
            return Ok(match run.wait {
                Some(_) => left_queue(caught, &what),
                None => interrupted(caught, &what),
            });
        }
    };
    tracing::info!(node = %granted.node, token = granted.token, "{what} held");
    if let Want::Leadership { id } = &asked.want {
        // The seed's acknowledgement: observers see that this leader has started its work.
        if let Err(e) = contender.acknowledge(&leader_note(id, run.command)).await {
            eprintln!("wazoo: could not acknowledge leadership of {}: {e}", asked.path);
        }
    }
    let under = RunUnder {
        command: run.command,
        grace: run.hold.grace.unwrap_or_else(|| default_grace(contender.session_timeout())),
        env: asked.env(granted),
        statuses: Statuses::new(run.hold, run.wait),
        what,
    };
    let held = contender.hold().await?;
    hold(held, under, &mut signals).await
}

/// `wazoo lock PATH PATH…`: every lock or none (Curator's `InterProcessMultiLock`). The locks
/// are taken one after another in path order, so two commands asking for overlapping sets never
/// wait for each other in a circle; `--timeout` bounds the whole, and a lock not had (or a
/// signal) lets go of those taken, last first. Then the command runs under all of them
/// ([`hold`]): losing any one stops it, as losing the one lock does; they are released together
/// when it ends, last first.
pub(crate) async fn claim_all(
    backend: &impl Backend,
    paths: &[String],
    recipe: &str,
    run: Run<'_>,
) -> anyhow::Result<u8> {
    if let [path] = paths {
        return claim(backend, Asked { want: Want::Lock, path, recipe }, run).await;
    }
    let mut sorted: Vec<&str> = paths.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(exit::usage(format!("the lock at {} is named twice", twice[0])));
    }
    for path in &sorted {
        check_path("lock", path)?;
    }
    let mut signals = Signals::new()?;
    let wait = run.wait.and_then(WaitArgs::wait);
    let deadline = wait.map(|w| tokio::time::Instant::now() + w);
    let mut held = Vec::new();
    let mut grace = None;
    for path in sorted {
        let what = format!("lock at {path}");
        let taken = signals
            .interrupt(async {
                let mut contender = backend.contender(&Want::Lock, recipe, &what).await?;
                // The time left of the whole wait (none left: a look, as --no-wait).
                let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
                match contender.acquire(path, left).await {
                    Ok(granted) => {
                        let timeout = contender.session_timeout();
                        Ok(Ok((granted, contender.hold().await?, timeout)))
                    }
                    Err(failure) => {
                        contender.close().await;
                        Ok::<_, anyhow::Error>(Err(failure))
                    }
                }
            })
            .await;
        let failed = match taken {
            Ok(Ok(Ok((granted, holding, timeout)))) => {
                tracing::info!(node = %granted.node, token = granted.token, "{what} held");
                grace.get_or_insert_with(|| default_grace(timeout));
                held.push((path, granted, holding));
                continue;
            }
            Ok(Ok(Err(failure))) => Err(failure),
            Ok(Err(error)) => Ok(Err(error)),
            Err(caught) => Ok(Ok(caught)),
        };
        // Not had: let go of those taken, last first, then say why.
        for (_, _, holding) in held.into_iter().rev() {
            if let Err(e) = holding.release().await {
                eprintln!("wazoo: releasing a lock taken before: {e}");
            }
        }
        return match failed {
            Err(Failure::Timeout) => Ok(match run.wait {
                Some(wait) => not_held(Waited::Lock, path, wait),
                None => exit::FAILED,
            }),
            Err(failure) => Err(failure.into_error(format!("cannot acquire the {what}"))),
            Ok(Err(error)) => Err(error),
            Ok(Ok(caught)) => Ok(left_queue(caught, &what)),
        };
    }
    let env = several_env(&held);
    let under = RunUnder {
        command: run.command,
        grace: run.hold.grace.or(grace).unwrap_or_default(),
        env,
        statuses: Statuses::new(run.hold, run.wait),
        what: format!("locks at {}", held.iter().map(|(p, _, _)| *p).collect::<Vec<_>>().join(", ")),
    };
    let all = All(held.into_iter().map(|(path, _, holding)| (path.to_string(), holding)).collect());
    hold(all, under, &mut signals).await
}

/// The environment of a command under several locks: for each lock in the order taken (path
/// order), `WAZOO_LOCK_PATH_<i>`, `WAZOO_LOCK_NODE_<i>` and `WAZOO_FENCING_TOKEN_<i>` (from 1);
/// `WAZOO_LOCK_COUNT`; and `WAZOO_LOCK_PATH` (the paths), `WAZOO_LOCK_NODE` and
/// `WAZOO_FENCING_TOKEN` (`PATH=NODE` and `PATH=TOKEN`), one a line: a path holds no newline.
fn several_env<H>(held: &[(&str, Granted, H)]) -> Vec<(String, String)> {
    let lines = |f: &dyn Fn(&str, &Granted) -> String| {
        held.iter().map(|(path, granted, _)| f(path, granted)).collect::<Vec<_>>().join("\n")
    };
    let mut env = vec![
        ("WAZOO_LOCK_COUNT".to_string(), held.len().to_string()),
        ("WAZOO_LOCK_PATH".to_string(), lines(&|path, _| path.to_string())),
        ("WAZOO_LOCK_NODE".to_string(), lines(&|path, g| format!("{path}={}", g.node))),
        ("WAZOO_FENCING_TOKEN".to_string(), lines(&|path, g| format!("{path}={}", g.token))),
    ];
    for (i, (path, granted, _)) in held.iter().enumerate() {
        let i = i + 1;
        env.push((format!("WAZOO_LOCK_PATH_{i}"), path.to_string()));
        env.push((format!("WAZOO_LOCK_NODE_{i}"), granted.node.clone()));
        env.push((format!("WAZOO_FENCING_TOKEN_{i}"), granted.token.to_string()));
    }
    env
}

/// Several claims held together, each with its path: lost when any one is.
struct All<H>(Vec<(String, H)>);

impl<H: Holding> Holding for All<H> {
    fn lost(&self) -> impl std::future::Future<Output = Ending> + Send + 'static {
        let each: Vec<_> = self
            .0
            .iter()
            .map(|(path, holding)| {
                let (path, lost) = (path.clone(), holding.lost());
                async move {
                    let ending = lost.await;
                    Ending { why: format!("the lock at {path}: {}", ending.why), revoked: ending.revoked }
                }
            })
            .collect();
        async move {
            let mut set = tokio::task::JoinSet::new();
            for lost in each {
                set.spawn(lost);
            }
            match set.join_next().await {
                Some(Ok(ending)) => ending,
                _ => std::future::pending().await,
            }
        }
    }

    async fn release(self) -> Result<(), String> {
        let mut failed = Vec::new();
        for (path, holding) in self.0.into_iter().rev() {
            if let Err(e) = holding.release().await {
                failed.push(format!("the lock at {path}: {e}"));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("; "))
        }
    }

    async fn close(self) {
        for (_, holding) in self.0.into_iter().rev() {
            holding.close().await;
        }
    }
}

/// A signal came before anything was held: exit status 128 + the signal.
pub(crate) fn interrupted(caught: Caught, what: &str) -> u8 {
    eprintln!("wazoo: {} before the {what} was held", caught.name());
    caught.status()
}

/// A signal came while waiting in the queue for `what`, and the wait was given up: cancelling
/// the recipe call retired the handle, and closing it (or the client session) deleted its
/// waiting nodes. Exit status 128 + the signal.
pub(crate) fn left_queue(caught: Caught, what: &str) -> u8 {
    eprintln!("wazoo: {} while waiting for the {what}; left the queue", caught.name());
    caught.status()
}

/// What a leader acknowledges: `ID running CMD`, or `ID holding` without a command.
fn leader_note(id: &str, command: &[String]) -> String {
    match command.first() {
        Some(cmd) => format!("{id} running {cmd}"),
        None => format!("{id} holding"),
    }
}

/// How a held claim runs its command.
pub(crate) struct RunUnder<'a> {
    /// CMD; empty: hold until a signal.
    pub(crate) command: &'a [String],
    pub(crate) grace: Duration,
    /// What is held, for messages ("the lock at /x").
    pub(crate) what: String,
    /// Exported to the command; its `*_NODE` and `WAZOO_FENCING_TOKEN` are printed when there
    /// is no command.
    pub(crate) env: Vec<(String, String)>,
    pub(crate) statuses: Statuses,
}

/// Runs the command while `claim` is held, supervised ([`crate::supervise`]): every process of
/// it gets the signals wazoo gets, and none outlives the claim. When the command ends, whatever
/// it left running is stopped (SIGTERM, SIGKILL after `grace`), the claim released, and its exit
/// status returned. When the claim is lost first, the command is stopped the same way before
/// anything else: exit status 4, or 5 if revoked (released then), or what `--lost-exit-code` and
/// `--revoked-exit-code` say. Without a command, prints `held NODE token T` and holds until
/// SIGINT, SIGTERM or SIGHUP, then releases: exit status 0.
pub(crate) async fn hold(
    claim: impl Holding,
    run: RunUnder<'_>,
    signals: &mut Signals,
) -> anyhow::Result<u8> {
    if run.command.is_empty() {
        return hold_until_signal(claim, run, signals).await;
    }
    let RunUnder { command, grace, what, env, statuses } = run;
    let lost = claim.lost();
    let mut cmd = match Supervised::spawn(command, &env) {
        Ok(cmd) => cmd,
        Err(e) => {
            let _ = claim.release().await;
            return Err(e);
        }
    };
    tokio::pin!(lost);
    let code = loop {
        tokio::select! {
            status = cmd.wait() => {
                if cmd.remains() {
                    eprintln!("wazoo: the command left processes running; stopping them before releasing the {what}");
                    cmd.stop(grace).await;
                }
                if let Err(e) = claim.release().await {
                    eprintln!("wazoo: releasing the {what}: {e}");
                }
                break match status {
                    Ok(status) => exit_status(status),
                    Err(e) => {
                        eprintln!("wazoo: waiting for the command: {e}");
                        exit::FAILED
                    }
                };
            }
            ending = &mut lost => {
                eprintln!("wazoo: {what} lost ({}); stopping the command", ending.why);
                // Stopping the command is the on-revoke step: the claim is let go after it.
                cmd.stop(grace).await;
                break lost_claim(claim, &ending, &what, statuses).await;
            }
            caught = signals.recv() => cmd.forward(caught),
        }
    };
    cmd.finish().await;
    Ok(code)
}

/// `hold` without a command: held until a signal (released, exit status 0) or lost.
async fn hold_until_signal(
    claim: impl Holding,
    run: RunUnder<'_>,
    signals: &mut Signals,
) -> anyhow::Result<u8> {
    let RunUnder { what, env, statuses, .. } = run;
    show::held(&env);
    let lost = claim.lost();
    tokio::pin!(lost);
    tokio::select! {
        caught = signals.recv() => {
            tracing::info!("{}: releasing the {what}", caught.name());
            match claim.release().await {
                Ok(()) => Ok(0),
                Err(e) => Err(anyhow::anyhow!("releasing the {what}: {e}")),
            }
        }
        ending = &mut lost => {
            eprintln!("wazoo: {what} lost ({})", ending.why);
            Ok(lost_claim(claim, &ending, &what, statuses).await)
        }
    }
}

/// After a claim's loss (its command, if any, already stopped): a revoked claim is released.
/// Closes it; the exit status.
async fn lost_claim(claim: impl Holding, ending: &Ending, what: &str, statuses: Statuses) -> u8 {
    if !ending.revoked {
        claim.close().await;
        return statuses.lost;
    }
    if let Err(e) = claim.release().await {
        eprintln!("wazoo: releasing the revoked {what}: {e}");
    }
    statuses.revoked
}
