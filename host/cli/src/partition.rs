//! `wazoo partition PATH --member ID --items a,b,… -- CMD`: members of a group share out a set of
//! items (kazoo's `SetPartitioner`), each running CMD on its share, and share again whenever the
//! membership changes.
//!
//! Every member joins the group `PATH/members` as ID (the group recipe: an ephemeral node). Each
//! takes the members' names in order and the items in order, and its share is every item whose
//! index, modulo the number of members, is its own index: every member computes the same
//! partition from the same membership. A member owns an item only while it holds the item's lock,
//! `PATH/items/<item>` (the lock recipe), so no item is ever owned by two members, even while
//! members see a change at different moments. When the membership changes, each member stops CMD,
//! releases every item lock, shares again and runs CMD on its new share once it holds every lock
//! of it (taken in item order, so members never wait for each other in a circle).

use std::collections::BTreeSet;
use std::time::Duration;

use wazoo_runtime::{Membership, Want, World};

use crate::args::{check_path, HoldArgs};
use crate::backend::{Backend, Contender, Failure, Holding};
use crate::claims::All;
use crate::exit;
use crate::supervise::{default_grace, exited, run_under, Cmd, Ended, Signals};

/// What `wazoo partition` was asked.
pub(crate) struct Asked<'a> {
    pub(crate) path: &'a str,
    pub(crate) member: &'a str,
    /// The items, in order, each once.
    pub(crate) items: Vec<String>,
    pub(crate) hold: &'a HoldArgs,
    pub(crate) command: &'a [String],
}

/// The items named by `--items` (comma-separated) and `--items-file` (one a line, blank lines
/// skipped): each once, in order; a usage error if one is named twice, is not a node name, or
/// none is named.
pub(crate) fn items(listed: Option<&str>, file: Option<&std::path::Path>) -> anyhow::Result<Vec<String>> {
    let mut named: Vec<String> =
        listed.map(|l| l.split(',').map(str::to_string).collect()).unwrap_or_default();
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| exit::usage(format!("--items-file {}: {e}", file.display())))?;
        named.extend(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string));
    }
    let mut seen = BTreeSet::new();
    for item in &named {
        if item.is_empty() || item.contains('/') || item == "." || item == ".." {
            return Err(exit::usage(format!("invalid item {item:?}: an item is a node name (no '/')")));
        }
        if !seen.insert(item.as_str()) {
            return Err(exit::usage(format!("the item {item} is named twice")));
        }
    }
    if named.is_empty() {
        return Err(exit::usage("no items: give --items a,b,… or --items-file FILE"));
    }
    named.sort();
    Ok(named)
}

/// `member`'s share of `items` (in order) among `members` (names in order): none if it is not
/// among them.
pub(crate) fn share(items: &[String], members: &[String], member: &str) -> Option<Vec<String>> {
    let index = members.iter().position(|m| m == member)?;
    Some(
        items
            .iter()
            .enumerate()
            .filter(|(i, _)| i % members.len() == index)
            .map(|(_, x)| x.clone())
            .collect(),
    )
}

/// How a round ended.
enum Round {
    /// The membership's names changed to these: share again.
    Changed(Vec<String>),
    /// wazoo is done: its exit status.
    Done(u8),
}

pub(crate) async fn partition(backend: &impl Backend, asked: Asked<'_>) -> anyhow::Result<u8> {
    if asked.command.is_empty() {
        return Err(exit::usage(
            "partition runs CMD on this member's share: give a CMD (after the arguments, or after --)",
        ));
    }
    check_path("partition", asked.path)?;
    let members_dir = format!("{}/members", asked.path.trim_end_matches('/'));
    let items_dir = format!("{}/items", asked.path.trim_end_matches('/'));
    let member = asked.member;
    if member.is_empty() || member.contains('/') || member == "." || member == ".." {
        return Err(exit::usage(format!("invalid member {member:?}: a member is a node name (no '/')")));
    }
    check_path("group", &format!("{members_dir}/{member}"))?;
    for item in &asked.items {
        check_path("lock", &format!("{items_dir}/{item}"))?;
    }
    let mut signals = Signals::new()?;

    // Join the group.
    let what = format!("membership of {members_dir} as {}", asked.member);
    let want = Want::Membership { name: asked.member.to_string(), data: Vec::new() };
    let mut contender = backend.contender(&want, World::Group.default_recipe(), &what, asked.member).await?;
    let joined = match signals.interrupt(contender.acquire(&members_dir, None)).await {
        Ok(Ok(_)) => contender,
        Ok(Err(failure)) => {
            contender.close().await;
            return Err(failure.into_error(format!("cannot join {members_dir} as {}", asked.member)));
        }
        Err(caught) => {
            contender.close().await;
            eprintln!("wazoo: {} before joining {members_dir}", caught.name());
            return Ok(caught.status());
        }
    };
    let grace = asked.hold.grace.unwrap_or_else(|| default_grace(joined.session_timeout()));
    let membership = joined.hold().await?;

    // The membership now and after every change, as the names in order.
    let (tx, changes) = tokio::sync::mpsc::unbounded_channel::<Vec<String>>();
    let mut each = |m: &Membership| {
        let _ = tx.send(m.members.iter().map(|m| m.name.clone()).collect());
    };
    let watch = backend.group_watch(&members_dir, &mut each);
    let mut rounds = Rounds {
        signals,
        changes,
        watch: Box::pin(watch),
        left: Box::pin(membership.lost()),
        members: Vec::new(),
        lost_code: asked.hold.lost_exit_code,
    };
    let status = rounds.share_out(backend, &asked, &items_dir, grace).await;
    drop(rounds);
    if let Err(e) = membership.release().await {
        eprintln!("wazoo: leaving the group: {e}");
    }
    status
}

/// What every round of a member follows: signals, the membership's changes (and the watch that
/// brings them), its own membership's loss.
struct Rounds<W, L> {
    signals: Signals,
    changes: tokio::sync::mpsc::UnboundedReceiver<Vec<String>>,
    watch: std::pin::Pin<Box<W>>,
    left: std::pin::Pin<Box<L>>,
    /// The names at the last look.
    members: Vec<String>,
    /// The exit status when the membership is lost.
    lost_code: u8,
}

/// Why a wait in a round ended other than by what it waited for.
enum Stop {
    /// The names changed (now in `Rounds::members`).
    Changed,
    /// wazoo is done: its exit status (or error).
    Done(anyhow::Result<u8>),
}

impl<W, L> Rounds<W, L>
where
    W: std::future::Future<Output = Result<(), Failure>>,
    L: std::future::Future<Output = crate::backend::Ending>,
{
    /// Runs rounds until CMD ends, the membership is lost, a signal comes or the watch fails.
    async fn share_out(
        &mut self,
        backend: &impl Backend,
        asked: &Asked<'_>,
        items_dir: &str,
        grace: Duration,
    ) -> anyhow::Result<u8> {
        let mut round = 0u32;
        loop {
            // The latest names that include this member (its own join may not be seen yet).
            while let Ok(now) = self.changes.try_recv() {
                self.members = now;
            }
            let Some(mine) = share(&asked.items, &self.members, asked.member) else {
                if let Stop::Done(status) = self.until(std::future::pending::<()>()).await.unwrap_err() {
                    return status;
                }
                continue;
            };
            // Take every lock of the share, in item order, each followed from the moment it is
            // held; a change on the way: share again.
            let mut held = All::new();
            let mut stop = None;
            for item in &mine {
                let node = format!("{items_dir}/{item}");
                let label = format!("partition item {node}");
                let mut lock = match backend
                    .contender(&Want::Lock, World::Lock.default_recipe(), &label, &crate::args::default_id())
                    .await
                {
                    Ok(lock) => lock,
                    Err(error) => {
                        stop = Some(Stop::Done(Err(error)));
                        break;
                    }
                };
                let taken = tokio::select! {
                    taken = self.until(lock.acquire(&node, None)) => taken,
                    ending = held.first_lost() => {
                        eprintln!("wazoo: {}", ending.why);
                        Err(Stop::Done(Ok(asked.hold.lost_exit_code)))
                    }
                };
                match taken {
                    Ok(Ok(_)) => match lock.hold().await {
                        Ok(holding) => held.push(node, holding),
                        Err(error) => {
                            stop = Some(Stop::Done(Err(error)));
                            break;
                        }
                    },
                    Ok(Err(failure)) => {
                        lock.close().await;
                        let error = failure.into_error(format!("cannot take the lock of item {item}"));
                        stop = Some(Stop::Done(Err(error)));
                        break;
                    }
                    Err(why) => {
                        lock.close().await;
                        stop = Some(why);
                        break;
                    }
                }
            }
            match stop {
                Some(Stop::Changed) => {
                    release(held).await;
                    continue;
                }
                Some(Stop::Done(status)) => {
                    release(held).await;
                    return status;
                }
                None => {}
            }
            round += 1;
            match self.run(asked, &mine, round, grace, held).await? {
                Round::Changed(now) => self.members = now,
                Round::Done(status) => return Ok(status),
            }
        }
    }

    /// Waits for `work`, unless the names change first (`Stop::Changed`; a change that leaves
    /// the names as they were is waited through), the membership is lost, a signal comes or the
    /// watch fails (`Stop::Done`).
    async fn until<T>(&mut self, work: impl std::future::Future<Output = T>) -> Result<T, Stop> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                now = self.changes.recv() => {
                    let Some(now) = now else { continue };
                    if now != self.members {
                        self.members = now;
                        return Err(Stop::Changed);
                    }
                }
                failed = &mut self.watch => return Err(Stop::Done(Err(watch_failed(failed)))),
                ending = &mut self.left => {
                    eprintln!("wazoo: the membership was lost ({})", ending.why);
                    return Err(Stop::Done(Ok(self.lost_code)));
                }
                caught = self.signals.recv() => {
                    eprintln!("wazoo: {} while taking a share", caught.name());
                    return Err(Stop::Done(Ok(caught.status())));
                }
            }
        }
    }

    /// Runs CMD on `mine` while `held` (its items' locks) is held ([`run_under`]), until CMD ends
    /// (its status), the membership or a lock is lost (`--lost-exit-code`), the watch fails (69),
    /// or the names change (CMD stopped, the locks released: share again).
    async fn run<H: Holding>(
        &mut self,
        asked: &Asked<'_>,
        mine: &[String],
        round: u32,
        grace: Duration,
        held: All<H>,
    ) -> anyhow::Result<Round> {
        let share_file = tempfile::Builder::new().prefix("wazoo-partition-").tempfile()?;
        let mut listed = mine.join("\n");
        if !listed.is_empty() {
            listed.push('\n');
        }
        std::fs::write(share_file.path(), listed)?;
        let env = vec![
            ("WAZOO_PARTITION".to_string(), share_file.path().display().to_string()),
            ("WAZOO_PARTITION_SIZE".to_string(), mine.len().to_string()),
            ("WAZOO_PARTITION_PATH".to_string(), asked.path.to_string()),
            ("WAZOO_PARTITION_ROUND".to_string(), round.to_string()),
            ("WAZOO_MEMBER".to_string(), asked.member.to_string()),
            ("WAZOO_MEMBERS".to_string(), self.members.len().to_string()),
        ];
        tracing::info!(round, items = mine.len(), members = self.members.len(), "running the command");
        let lost = held.lost();
        let Rounds { signals, changes, watch, left, members, .. } = self;
        // What ends the round before CMD does, said on stderr before CMD is stopped.
        let ends = async {
            tokio::pin!(lost);
            loop {
                tokio::select! {
                    ending = &mut lost => {
                        eprintln!("wazoo: {} ({}); stopping the command", asked.path, ending.why);
                        return Cut::Lost;
                    }
                    ending = left.as_mut() => {
                        eprintln!("wazoo: the membership was lost ({}); stopping the command", ending.why);
                        return Cut::Lost;
                    }
                    failed = watch.as_mut() => {
                        eprintln!("wazoo: {:#}; stopping the command", watch_failed(failed));
                        return Cut::WatchFailed;
                    }
                    next = changes.recv() => {
                        let Some(next) = next else { continue };
                        if next == *members {
                            continue;
                        }
                        tracing::info!(members = next.len(), "the membership changed: stopping the command to share again");
                        return Cut::Changed(next);
                    }
                }
            }
        };
        let cmd = Cmd { command: asked.command, env: &env, grace, leftovers: None };
        let ended = run_under(cmd, signals, ends).await;
        Ok(match ended {
            Err(e) => {
                release(held).await;
                return Err(e);
            }
            Ok(Ended::Exited(status)) => {
                release(held).await;
                Round::Done(exited(status))
            }
            Ok(Ended::By(Cut::Lost)) => {
                held.close().await;
                Round::Done(asked.hold.lost_exit_code)
            }
            Ok(Ended::By(Cut::WatchFailed)) => {
                release(held).await;
                Round::Done(exit::UNAVAILABLE)
            }
            Ok(Ended::By(Cut::Changed(next))) => {
                release(held).await;
                Round::Changed(next)
            }
            // Not without CMD (partition asks for one).
            Ok(Ended::Signalled(caught)) => {
                release(held).await;
                Round::Done(caught.status())
            }
        })
    }
}

/// What ended a round while CMD ran.
enum Cut {
    /// The membership, or a lock of the share, was lost.
    Lost,
    /// The watch of the members failed.
    WatchFailed,
    /// The membership's names changed to these: share again.
    Changed(Vec<String>),
}

async fn release(held: impl Holding) {
    if let Err(e) = held.release().await {
        eprintln!("wazoo: releasing item locks: {e}");
    }
}

fn watch_failed(failed: Result<(), Failure>) -> anyhow::Error {
    match failed {
        Ok(()) => anyhow::anyhow!("the watch of the members ended"),
        Err(failure) => failure.into_error("watching the members".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_has_exactly_one_member() {
        let items: Vec<String> = (0..30).map(|i| format!("i{i:02}")).collect();
        for n in 1..=7 {
            let members: Vec<String> = (0..n).map(|m| format!("m{m}")).collect();
            let mut owned = Vec::new();
            for m in &members {
                owned.extend(share(&items, &members, m).unwrap());
            }
            owned.sort();
            assert_eq!(owned, items, "{n} members");
        }
        assert_eq!(share(&items, &["a".to_string()], "b"), None);
    }

    #[test]
    fn items_are_checked() {
        assert_eq!(items(Some("b,a"), None).unwrap(), ["a", "b"]);
        assert!(items(Some("a,a"), None).is_err());
        assert!(items(Some("a/b"), None).is_err());
        assert!(items(Some(""), None).is_err());
        assert!(items(None, None).is_err());
    }
}
