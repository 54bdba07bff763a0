//! `barrier set|remove|wait` and `double-barrier -- CMD`.

use std::time::Duration;

use serde_json::json;

use crate::args::{check_path, timed_out, Waited};
use crate::backend::{Backend, Failure, Participant};
use crate::claims::interrupted;
use crate::cli::BarrierCommand;
use crate::supervise::{exit_status, run_under, Cmd, Ended, Signals};
use crate::{args, exit, show};

/// How long what a double barrier's command left running has after SIGTERM.
const BETWEEN_GRACE: Duration = Duration::from_secs(2);

pub(crate) async fn barrier(
    backend: &impl Backend,
    command: BarrierCommand,
    recipe: &str,
) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("barrier", &path)?;
    let failed = |f: Failure| f.into_error(format!("barrier {path}"));
    match command {
        BarrierCommand::Set { json, .. } => {
            let set = backend.barrier_set(&path, recipe).await.map_err(failed)?;
            match json {
                false => out!("{}", if set { "set" } else { "already set" }),
                true => show::line(json!({"path": path, "was_set": !set})),
            }
        }
        BarrierCommand::Remove { json, .. } => {
            let removed = backend.barrier_remove(&path, recipe).await.map_err(failed)?;
            match json {
                false => out!("{}", if removed { "removed" } else { "was not set" }),
                true => show::line(json!({"path": path, "was_set": removed})),
            }
        }
        BarrierCommand::Wait { timeout, json, .. } => {
            match backend.barrier_wait(&path, timeout, recipe).await {
                Ok(()) if json => show::line(json!({"path": path, "down": true})),
                Ok(()) => out!("down"),
                Err(Failure::Timeout) => return Ok(timed_out(Waited::BarrierDown, &path, timeout)),
                Err(f) => return Err(failed(f)),
            }
        }
    }
    Ok(0)
}

/// `double-barrier PATH --count N -- CMD`: enters, runs CMD once `count` are in, leaves once it
/// ended; CMD's exit status. The participant is made first, so that a signal while entering or
/// leaving ends it and its node (exit status 128 + the signal); entering or leaving timing out
/// is exit status 3.
pub(crate) async fn double_barrier(
    backend: &impl Backend,
    path: &str,
    count: u32,
    timeout: Option<Duration>,
    recipe: &str,
    command: &[String],
) -> anyhow::Result<u8> {
    let mut signals = Signals::new()?;
    check_path("barrier", path)?;
    let what = format!("double barrier {path}");
    let mut participant = match signals.interrupt(backend.participant(path, recipe)).await {
        Ok(participant) => participant?,
        Err(caught) => return Ok(interrupted(caught, &what)),
    };
    let ended = match signals.interrupt(participant.enter(path, count, timeout)).await {
        Ok(Ok(())) => None,
        Ok(Err(Failure::Timeout)) => Some(Ok(few_entered(path, count, timeout))),
        Ok(Err(f)) => Some(Err(f.into_error(format!("entering the {what}")))),
        Err(caught) => {
            eprintln!("wazoo: {} while entering the {what}; left it", caught.name());
            Some(Ok(caught.status()))
        }
    };
    if let Some(ended) = ended {
        participant.close().await;
        return ended;
    }
    let status = match run_between(path, command, &mut signals).await {
        Ok(status) => status,
        Err(e) => {
            participant.close().await;
            return Err(e);
        }
    };
    let left = signals.interrupt(participant.leave(timeout)).await;
    participant.close().await;
    match left {
        Ok(Ok(())) => Ok(status),
        Ok(Err(Failure::Timeout)) => Ok(few_left(path, timeout)),
        Ok(Err(f)) => Err(f.into_error(format!("leaving the {what}"))),
        Err(caught) => {
            eprintln!("wazoo: {} while leaving the {what}; left it", caught.name());
            Ok(caught.status())
        }
    }
}

/// Runs a double barrier's command once inside, supervised as a claim's command is
/// ([`run_under`]: its own process group or cgroup, gone with wazoo, signals forwarded to all of
/// it); what it leaves running is stopped before the participant leaves. Its exit status.
async fn run_between(path: &str, command: &[String], signals: &mut Signals) -> anyhow::Result<u8> {
    let env = [("WAZOO_BARRIER_PATH".to_string(), path.to_string())];
    let leftovers = format!("the command left processes running; stopping them before leaving {path}");
    let cmd = Cmd { command, env: &env, grace: BETWEEN_GRACE, leftovers: Some(leftovers) };
    // Nothing ends it but the command (CMD is required).
    match run_under(cmd, signals, std::future::pending::<std::convert::Infallible>()).await? {
        Ended::Exited(status) => {
            let status = status.map_err(|e| anyhow::anyhow!("waiting for the command: {e}"))?;
            Ok(exit_status(status))
        }
        Ended::By(never) => match never {},
        Ended::Signalled(caught) => Ok(caught.status()),
    }
}

/// Entering a double barrier timed out: exit status 3.
fn few_entered(path: &str, count: u32, timeout: Option<Duration>) -> u8 {
    eprintln!("wazoo: fewer than {count} entered {path} within {}", args::human(timeout.unwrap_or_default()));
    exit::CONFLICT
}

/// Leaving a double barrier timed out: exit status 3.
fn few_left(path: &str, timeout: Option<Duration>) -> u8 {
    eprintln!("wazoo: not everyone left {path} within {}", args::human(timeout.unwrap_or_default()));
    exit::CONFLICT
}
