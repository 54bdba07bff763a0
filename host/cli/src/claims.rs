//! The claim commands, written once: `lock`, `rwlock`, `semaphore`, `elect` and `group join`
//! take a claim through a [`Backend`] (this process's own host, `local`, or a `wazoo serve`
//! daemon, `remote`) and run CMD under it, supervised ([`crate::supervise`]).
//!
//! Everything a user sees is decided here, whatever the backend: the checks before anything is
//! asked, the messages, the environment CMD gets, and the exit statuses (a claim not had 3, lost
//! 4, revoked 5, a signal before the claim 128 + its number).

use std::time::Duration;

use wazoo_runtime::Want;

use crate::args::{check_path, not_held, HoldArgs, Statuses, WaitArgs, Waited};
use crate::backend::{Backend, Contender, Ending, Failure, Granted, Holding};
use crate::supervise::{default_grace, exited, run_under, Caught, Cmd, Ended, Signals};
use crate::{exit, show};

/// A claim command's arguments.
pub(crate) struct Run<'a> {
    /// None for a membership, which has no wait.
    pub(crate) wait: Option<&'a WaitArgs>,
    pub(crate) hold: &'a HoldArgs,
    pub(crate) command: &'a [String],
    /// Without a command: the `held` lines as JSON.
    pub(crate) json: bool,
}

/// What a claim command asks for, in the words its messages use.
pub(crate) struct Asked<'a> {
    pub(crate) want: Want,
    pub(crate) path: &'a str,
    pub(crate) recipe: &'a str,
    /// Who the claim is for (`--id`): its node's data where the recipe leaves it blank.
    pub(crate) id: &'a str,
}

impl Asked<'_> {
    /// What is held, for messages ("lock at /x", "lease of /s").
    fn what(&self) -> String {
        self.want.family().what(self.path, self.want.param().as_ref())
    }

    /// The context of a failure to get it.
    fn doing(&self) -> String {
        let family = self.want.family();
        family.say(family.failing, self.path, self.want.param().as_ref(), "")
    }

    fn waited(&self) -> Waited {
        Waited::Claim(self.want.family())
    }

    /// What is printed of the claim when there is no command ([`show::held`]). A family whose
    /// node is the claim's own name (a member) has no token.
    fn held(&self, granted: &Granted) -> show::Held {
        let path = self.path.to_string();
        let named = self.want.param().map(|p| (p.key, p.value));
        match self.want.family().node_env {
            Some(_) => show::Held { path, node: granted.node.clone(), token: Some(granted.token), named },
            None => {
                let node = format!("{}/{}", self.path, named.as_ref().map_or("", |(_, v)| v.as_str()));
                show::Held { path, node, token: None, named }
            }
        }
    }

    /// The environment of CMD.
    fn env(&self, granted: Granted) -> Vec<(String, String)> {
        let family = self.want.family();
        let mut env = vec![(family.path_env.to_string(), self.path.to_string())];
        if let Some(param) = self.want.param() {
            env.push((param.env.to_string(), param.value));
        }
        if let Some(node_env) = family.node_env {
            env.push(("WAZOO_FENCING_TOKEN".to_string(), granted.token.to_string()));
            env.push((node_env.to_string(), granted.node));
        }
        env
    }
}

/// `wazoo lock|rwlock|semaphore|elect|group join`: takes the claim, then runs the command under
/// it ([`hold`]). A signal before the claim is had exits 128 + the signal, having left the
/// queue; `--timeout` (or `--no-wait`) passing exits 3 or `--conflict-exit-code`.
pub(crate) async fn claim(backend: &impl Backend, asked: Asked<'_>, run: Run<'_>) -> anyhow::Result<u8> {
    let mut signals = Signals::new()?;
    Ok(term(backend, &asked, &run, &mut signals, Vec::new()).await?.status())
}

/// How one claim, and the command under it, ended.
enum Term {
    /// Not had: `--timeout` passed or `--no-wait` found it taken.
    NotHad(u8),
    /// A signal came, before the claim or while the command ran.
    Interrupted(u8),
    /// The command ended, or the claim was lost: its exit status.
    Ended(u8),
}

impl Term {
    fn status(&self) -> u8 {
        match *self {
            Term::NotHad(s) | Term::Interrupted(s) | Term::Ended(s) => s,
        }
    }
}

/// Takes the claim and runs the command under it once ([`claim`]); `extra` is added to the
/// command's environment.
async fn term(
    backend: &impl Backend,
    asked: &Asked<'_>,
    run: &Run<'_>,
    signals: &mut Signals,
    extra: Vec<(String, String)>,
) -> anyhow::Result<Term> {
    // Refuse a bad path before asking anyone (the host checks it again for the recipe).
    check_path(asked.want.family().path_word, asked.path)?;
    let what = asked.what();
    let mut contender =
        match signals.interrupt(backend.contender(&asked.want, asked.recipe, &what, asked.id)).await {
            Ok(contender) => contender?,
            Err(caught) => return Ok(Term::Interrupted(interrupted(caught, &what))),
        };
    let timeout = run.wait.and_then(WaitArgs::wait);
    let acquiring = contender.acquire(asked.path, timeout);
    let noted = noting_the_wait(backend, asked.path, &asked.want, &what, run.wait, acquiring);
    let granted = match signals.interrupt(noted).await {
        Ok(Ok(granted)) => granted,
        Ok(Err(failure)) => {
            contender.close().await;
            return match (failure, run.wait) {
                (Failure::Timeout, Some(wait)) => {
                    Ok(Term::NotHad(not_held(asked.waited(), asked.path, wait)))
                }
                (failure, _) => Err(failure.into_error(asked.doing())),
            };
        }
        Err(caught) => {
            contender.close().await;
            return Ok(Term::Interrupted(match run.wait {
                Some(_) => left_queue(caught, &what),
                None => interrupted(caught, &what),
            }));
        }
    };
    tracing::info!(node = %granted.node, token = granted.token, "{what} held");
    if let Want::Leadership { id } = &asked.want {
        // The seed's acknowledgement: observers see that this leader has started its work.
        if let Err(e) = contender.acknowledge(&leader_note(id, run.command)).await {
            eprintln!("wazoo: could not acknowledge leadership of {}: {e}", asked.path);
        }
    }
    let held = vec![asked.held(&granted)];
    let mut env = asked.env(granted);
    env.extend(extra);
    if let Some(grace) = run.hold.grace.filter(|g| *g > contender.session_timeout() / 3) {
        warn_long_grace(grace, contender.session_timeout());
    }
    let under = RunUnder {
        command: run.command,
        grace: run.hold.grace.unwrap_or_else(|| default_grace(contender.session_timeout())),
        env,
        held,
        statuses: Statuses::new(run.hold, run.wait),
        what,
        json: run.json,
    };
    let held = contender.hold().await?;
    let before = signals.caught();
    let status = hold(held, under, signals).await?;
    Ok(if signals.caught() != before { Term::Interrupted(status) } else { Term::Ended(status) })
}

/// How long a claim command waits before it says on stderr who holds what it waits for.
const WAIT_NOTICE: Duration = Duration::from_secs(1);

/// `acquiring`, and once it has waited [`WAIT_NOTICE`] (unless `--quiet` or `--no-wait`), a
/// line on stderr naming who holds `what` at `path` (`wazoo holders` tells more): `waiting for
/// the lock at /x held by session 0x… (token T)`, a leader's id before it.
async fn noting_the_wait<T>(
    backend: &impl Backend,
    path: &str,
    want: &Want,
    what: &str,
    wait: Option<&WaitArgs>,
    acquiring: impl std::future::Future<Output = T>,
) -> T {
    if wait.is_none_or(|w| w.quiet || w.no_wait) {
        return acquiring.await;
    }
    tokio::pin!(acquiring);
    tokio::select! {
        done = &mut acquiring => return done,
        () = tokio::time::sleep(WAIT_NOTICE) => {}
    }
    let leases = want.leases();
    let say = async {
        let Ok(found) = backend.holders(path, None, leases).await else { return };
        let holders: Vec<String> = found
            .contenders
            .iter()
            .filter(|c| c.state == wazoo_runtime::holders::State::Holds)
            .map(|c| {
                // A leader's data is its id; a lock's, lease's, read or write lock's, its
                // holder's identity (`--id`; through a daemon, with the client session's name).
                let data = String::from_utf8_lossy(&c.data);
                let named = want.family().data_names_holder
                    && !data.is_empty()
                    && data.len() <= 200
                    && !data.chars().any(char::is_control);
                match named {
                    true => format!("{data} (session 0x{:x}, token {})", c.session, c.token),
                    false => format!("session 0x{:x} (token {})", c.session, c.token),
                }
            })
            .collect();
        match holders.is_empty() {
            true => eprintln!("wazoo: waiting for the {what}"),
            false => eprintln!("wazoo: waiting for the {what} held by {}", holders.join(", ")),
        }
    };
    tokio::select! {
        done = &mut acquiring => return done,
        () = say => {}
    }
    acquiring.await
}

/// How `wazoo elect --requeue` campaigns again.
pub(crate) struct Requeue {
    /// Stop after this many terms.
    pub(crate) max_terms: Option<u32>,
    /// The wait before campaigning again, doubled for each further failed term in a row (up to
    /// [`MAX_BACKOFF`], or itself if longer).
    pub(crate) backoff: Duration,
}

/// The longest wait between terms.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// `wazoo elect --requeue` (Curator's `LeaderSelector` with `autoRequeue`): campaigns, runs the
/// command while leading, and when it ends or leadership is lost, campaigns again after the
/// back-off: `--backoff`, doubled for each further term in a row that failed (the command's
/// status not 0, leadership lost, or ZooKeeper or the daemon out of reach so that no term could
/// begin; at most a minute, or `--backoff` if longer), back to `--backoff` after one that did
/// not. Ends after `--max-terms` terms (failed ones count) with the last one's status; at a
/// signal (while the command runs it goes to the command, and wazoo ends with the command's
/// status once it ends; else 128 + the signal); or when a wait for leadership times out (3).
/// The command learns its term in `WAZOO_TERM` (from 1).
pub(crate) async fn requeue(
    backend: &impl Backend,
    asked: Asked<'_>,
    run: Run<'_>,
    again: Requeue,
) -> anyhow::Result<u8> {
    if run.command.is_empty() {
        return Err(exit::usage(
            "--requeue campaigns again when CMD ends: give a CMD (after the path, or after --)",
        ));
    }
    let mut signals = Signals::new()?;
    let mut failed_in_a_row = 0u32;
    for number in 1u32.. {
        let extra = vec![("WAZOO_TERM".to_string(), number.to_string())];
        let status = match term(backend, &asked, &run, &mut signals, extra).await {
            Ok(Term::Ended(status)) => status,
            Ok(other) => return Ok(other.status()),
            // ZooKeeper (or the daemon) out of reach, or the session gone: the loss that ended
            // the last term often comes with it. A failed term: campaign again once it is back.
            Err(error) if exit::code_of(&error) == exit::UNAVAILABLE => {
                eprintln!("wazoo: term {number} of the {}: {error:#}", asked.what());
                exit::UNAVAILABLE
            }
            Err(error) => return Err(error),
        };
        if again.max_terms.is_some_and(|max| number >= max) {
            return Ok(status);
        }
        failed_in_a_row = if status == 0 { 0 } else { failed_in_a_row + 1 };
        let doubled = failed_in_a_row.saturating_sub(1).min(16);
        let wait = again.backoff.saturating_mul(1 << doubled).min(MAX_BACKOFF.max(again.backoff));
        tracing::info!(term = number, status, "campaigning again in {wait:?}");
        if let Err(caught) = signals.interrupt(tokio::time::sleep(wait)).await {
            eprintln!("wazoo: {} between terms of the {}", caught.name(), asked.what());
            return Ok(caught.status());
        }
    }
    unreachable!("terms are counted in u32")
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
    id: &str,
    run: Run<'_>,
) -> anyhow::Result<u8> {
    if let [path] = paths {
        return claim(backend, Asked { want: Want::Lock, path, recipe, id }, run).await;
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
    let statuses = Statuses::new(run.hold, run.wait);
    let wait = run.wait.and_then(WaitArgs::wait);
    let deadline = wait.map(|w| tokio::time::Instant::now() + w);
    // The locks held so far, each followed from the moment it is held: one lost while a later
    // one is awaited ends it all.
    let mut all = All::new();
    let mut granted = Vec::new();
    let mut grace = None;
    for path in sorted.iter().copied() {
        let what = format!("lock at {path}");
        let mut contender = match signals.interrupt(backend.contender(&Want::Lock, recipe, &what, id)).await {
            Ok(Ok(contender)) => contender,
            Ok(Err(error)) => {
                all.release_quietly().await;
                return Err(error);
            }
            Err(caught) => {
                all.release_quietly().await;
                return Ok(interrupted(caught, &what));
            }
        };
        // The time left of the whole wait (none left: a look, as --no-wait).
        let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
        let acquiring = contender.acquire(path, left);
        let noted = noting_the_wait(backend, path, &Want::Lock, &what, run.wait, acquiring);
        let taken = tokio::select! {
            taken = signals.interrupt(noted) => taken,
            ending = all.first_lost() => {
                contender.close().await;
                eprintln!("wazoo: {} ({}) while waiting for the {what}", ending.why, if ending.revoked { "revoked" } else { "lost" });
                all.release_quietly().await;
                return Ok(if ending.revoked { statuses.revoked } else { statuses.lost });
            }
        };
        let failed = match taken {
            Ok(Ok(got)) => {
                tracing::info!(node = %got.node, token = got.token, "{what} held");
                grace.get_or_insert_with(|| default_grace(contender.session_timeout()));
                match contender.hold().await {
                    Ok(holding) => {
                        all.push(path.to_string(), holding);
                        granted.push((path, got, ()));
                        continue;
                    }
                    Err(error) => Ok(Err(error)),
                }
            }
            Ok(Err(failure)) => {
                contender.close().await;
                Err(failure)
            }
            Err(caught) => {
                contender.close().await;
                Ok(Ok(caught))
            }
        };
        // Not had: let go of those taken, last first, then say why.
        all.release_quietly().await;
        return match failed {
            Err(Failure::Timeout) => Ok(match run.wait {
                Some(wait) => not_held(Waited::Claim(&wazoo_runtime::family::LOCK), path, wait),
                None => exit::FAILED,
            }),
            Err(failure) => Err(failure.into_error(format!("cannot acquire the {what}"))),
            Ok(Err(error)) => Err(error),
            Ok(Ok(caught)) => Ok(left_queue(caught, &what)),
        };
    }
    let under = RunUnder {
        command: run.command,
        grace: run.hold.grace.or(grace).unwrap_or_default(),
        env: several_env(&granted),
        held: granted
            .iter()
            .map(|(path, got, ())| show::Held {
                path: path.to_string(),
                node: got.node.clone(),
                token: Some(got.token),
                named: None,
            })
            .collect(),
        statuses,
        what: format!("locks at {}", sorted.join(", ")),
        json: run.json,
    };
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

/// Several claims held together, each with its path: lost when any one is. Each is followed
/// from the moment it is added ([`All::push`]), so a loss while later claims are awaited is
/// not missed.
pub(crate) struct All<H> {
    held: Vec<(String, H)>,
    /// Each claim's loss, named by its path; handed to [`Holding::lost`].
    watching: std::sync::Mutex<Option<tokio::task::JoinSet<Ending>>>,
}

impl<H: Holding> All<H> {
    pub(crate) fn new() -> All<H> {
        All { held: Vec::new(), watching: std::sync::Mutex::new(Some(tokio::task::JoinSet::new())) }
    }

    /// Adds a held claim and starts following its loss.
    pub(crate) fn push(&mut self, path: String, holding: H) {
        let lost = holding.lost();
        let named = path.clone();
        if let Some(set) = self.watching.get_mut().unwrap_or_else(|e| e.into_inner()).as_mut() {
            set.spawn(async move {
                let ending = lost.await;
                Ending { why: format!("the lock at {named}: {}", ending.why), revoked: ending.revoked }
            });
        }
        self.held.push((path, holding));
    }

    /// Resolves when any claim added so far is lost; never if none is (or the losses were
    /// handed to [`Holding::lost`]). Cancel-safe.
    pub(crate) async fn first_lost(&mut self) -> Ending {
        let Some(set) = self.watching.get_mut().unwrap_or_else(|e| e.into_inner()).as_mut() else {
            return std::future::pending().await;
        };
        while let Some(joined) = set.join_next().await {
            if let Ok(ending) = joined {
                return ending;
            }
        }
        std::future::pending().await
    }

    /// Lets go of every claim, last first, saying what failed.
    pub(crate) async fn release_quietly(self) {
        if let Err(e) = Holding::release(self).await {
            eprintln!("wazoo: releasing the locks taken: {e}");
        }
    }
}

impl<H: Holding> Holding for All<H> {
    fn lost(&self) -> impl std::future::Future<Output = Ending> + Send + 'static {
        let set = self.watching.lock().unwrap_or_else(|e| e.into_inner()).take();
        async move {
            let Some(mut set) = set else { return std::future::pending().await };
            while let Some(joined) = set.join_next().await {
                if let Ok(ending) = joined {
                    return ending;
                }
            }
            std::future::pending().await
        }
    }

    async fn release(self) -> Result<(), String> {
        let mut failed = Vec::new();
        for (path, holding) in self.held.into_iter().rev() {
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
        for (_, holding) in self.held.into_iter().rev() {
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
    /// Exported to the command.
    pub(crate) env: Vec<(String, String)>,
    /// What is held, a claim each in the order taken: printed when there is no command.
    pub(crate) held: Vec<show::Held>,
    pub(crate) statuses: Statuses,
    /// Without a command: the `held` lines as JSON.
    pub(crate) json: bool,
}

/// Runs the command while `claim` is held ([`run_under`]): every process of it gets the signals
/// wazoo gets, and none outlives the claim. When the command ends, whatever it left running is
/// stopped (SIGTERM, SIGKILL after `grace`), the claim released, and its exit status returned.
/// When the claim is lost first, the command is stopped the same way before anything else: exit
/// status 4, or 5 if revoked (released then), or what `--lost-exit-code` and
/// `--revoked-exit-code` say. Without a command, prints `held NODE token T` and holds until
/// SIGINT, SIGTERM or SIGHUP, then releases: exit status 0.
pub(crate) async fn hold(
    claim: impl Holding,
    run: RunUnder<'_>,
    signals: &mut Signals,
) -> anyhow::Result<u8> {
    let RunUnder { command, grace, what, env, held, statuses, json } = run;
    if command.is_empty() {
        show::held(&held, json);
    }
    let lost = claim.lost();
    let ends = async {
        let ending = lost.await;
        match command.is_empty() {
            true => eprintln!("wazoo: {what} lost ({})", ending.why),
            false => eprintln!("wazoo: {what} lost ({}); stopping the command", ending.why),
        }
        ending
    };
    let leftovers = format!("the command left processes running; stopping them before releasing the {what}");
    let cmd = Cmd { command, env: &env, grace, leftovers: Some(leftovers) };
    let ended = run_under(cmd, signals, ends).await;
    match ended {
        Err(e) => {
            let _ = claim.release().await;
            Err(e)
        }
        Ok(Ended::Exited(status)) => {
            if let Err(e) = claim.release().await {
                eprintln!("wazoo: releasing the {what}: {e}");
            }
            Ok(exited(status))
        }
        // Stopping the command is the on-revoke step: the claim is let go after it.
        Ok(Ended::By(ending)) => Ok(lost_claim(claim, &ending, &what, statuses).await),
        Ok(Ended::Signalled(caught)) => {
            tracing::info!("{}: releasing the {what}", caught.name());
            match claim.release().await {
                Ok(()) => Ok(0),
                Err(e) => Err(anyhow::anyhow!("releasing the {what}: {e}")),
            }
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

/// Says once that `--grace` is above a third of the session timeout `timeout`: a lost claim's
/// CMD is then stopped only after another may hold the claim (the bound is given up, as the
/// book's supervision page says). Not an error: a long shutdown may be worth it to the user.
fn warn_long_grace(grace: Duration, timeout: Duration) {
    eprintln!(
        "wazoo: warning: --grace {} is above a third of the session timeout ({}): if the claim is lost, CMD \
         may still run after another holder has it",
        crate::args::human(grace),
        crate::args::human(timeout / 3)
    );
}
