//! Two-phase commit, ZooKeeper "Recipes and Solutions" 1.6, in both of the seed's variants:
//! every site watching every vote, or only the coordinator watching and deciding. Sites create
//! their own ephemeral vote nodes so a failed site is detected, and the outcome is a single
//! `decision` node whose first writer decides for everyone.
//!
//! Nodes: `TX` (the payload), `TX/meta` (mode and sites), `TX/site-<name>` (a site's vote,
//! ephemeral), `TX/decision`, and beside `TX` the coordinator's liveness, `TX-coordinator`
//! (ephemeral, holding the coordinator's instance id). `TX`, `TX/meta` and `TX-coordinator` are
//! created in one multi, so no transaction exists without its site list and its coordinator; the
//! coordinator deletes its node once it has the outcome (or gives up). The node sits beside `TX`
//! so that `TX`'s children stay the seed's: the site list and the votes.
//!
//! The rule, the same in both modes: the first writer of `TX/decision` decides for everyone, and
//! every participant reports the decision that stands. A participant writes `aborted` at the
//! first abort vote, when a site that voted vanishes, when its own timeout passes, and when it
//! finds `TX-coordinator` gone with no decision made (the coordinator's handle ended, its process
//! died, its session expired). `committed` is written once every site voted commit: by the
//! coordinator (coordinated), or by a site that still sees the coordinator (all-to-all).
//!
//! So everyone gets one outcome, and within a bound: a participant waits at most its own
//! timeout; without one, at most as long as the coordinator lives and waits (its timeout), plus,
//! once the coordinator is gone, the time ZooKeeper takes to delete its node (at once when its
//! handle ends, the session timeout when its process dies): a participant waits on the votes (or
//! the decision) and on the coordinator's node at once (`wait-any`), so it sees the node go.
//! Only a coordinator without a timeout, alive, waiting for a site that never votes, waits on.

wazoo_guest::recipe_world!("wazoo:recipes/transaction-recipe@0.1.2");
wazoo_guest::protocol!("wazoo-transaction/1");

use std::collections::HashSet;
use std::time::Duration;

use exports::wazoo::recipes::two_phase_commit::{Ballot, Guest, Mode, Outcome};
use wazoo_guest::{self as zk, CreateMode, CreateOp, Deadline, DeleteOp, MultiError, Op, Watcher, ZkError};

const SITE: &str = "site-";
/// How many times a multi whose reply was lost is looked into and sent again.
const RETRIES: u32 = 20;

/// `TX-coordinator`: the coordinator's node, there while it runs.
fn coordinator_node(tx: &str) -> String {
    format!("{tx}-coordinator")
}

fn outcome_text(o: Outcome) -> &'static [u8] {
    match o {
        Outcome::Committed => b"committed",
        Outcome::Aborted => b"aborted",
    }
}

/// Records `verdict` as the decision unless one exists; returns the decision that stands.
fn decide(tx: &str, verdict: Outcome) -> Result<Outcome, ZkError> {
    let node = zk::join(tx, "decision");
    match zk::retrying(|| zk::create(&node, outcome_text(verdict), CreateMode::Persistent)) {
        Ok(_) => Ok(verdict),
        Err(ZkError::NodeExists) => decision(tx)?.ok_or(ZkError::NoNode),
        Err(e) => Err(e),
    }
}

fn decision(tx: &str) -> Result<Option<Outcome>, ZkError> {
    match zk::get_data(&zk::join(tx, "decision")) {
        Ok((data, _)) if data == b"committed" => Ok(Some(Outcome::Committed)),
        Ok(_) => Ok(Some(Outcome::Aborted)),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The transaction's mode and sites, from `<tx>/meta` ("mode\nsite\nsite…").
fn meta(tx: &str) -> Result<(Mode, Vec<String>), ZkError> {
    let (data, _) = zk::get_data(&zk::join(tx, "meta"))?;
    let text = String::from_utf8_lossy(&data);
    let mut lines = text.lines();
    let mode = match lines.next() {
        Some("all-to-all") => Mode::AllToAll,
        _ => Mode::Coordinated,
    };
    Ok((mode, lines.map(str::to_string).collect()))
}

/// A watch for the coordinator's node going, or none if it is gone already.
fn coordinator_watch(tx: &str) -> Result<Option<Watcher>, ZkError> {
    let (stat, watcher) = zk::exists_watch(&coordinator_node(tx))?;
    Ok(stat.map(|_| watcher))
}

/// Blocks until `first` or `second` fires (`session-expired` if the session ended), or the
/// deadline passes (`timeout`): one wait on both (the host's `wait-any`).
fn wait_either(first: &Watcher, second: &Watcher, deadline: Deadline) -> Result<(), ZkError> {
    if deadline.expired() {
        return Err(ZkError::Timeout);
    }
    zk::wait_any(&[first, second], deadline).map(|_| ())
}

/// Blocks on `first`, and on the coordinator's going too when a site waits (`coordinator`).
fn wait(first: &Watcher, coordinator: Option<&Watcher>, deadline: Deadline) -> Result<(), ZkError> {
    match coordinator {
        Some(coordinator) => wait_either(first, coordinator, deadline),
        None => zk::wait_on(first, deadline),
    }
}

/// Watches the votes until a verdict is clear: abort at the first abort or vanished voter,
/// commit once every site voted commit; abort at the deadline. A site (`as_site`) also aborts
/// once the coordinator is gone. `seen` remembers who voted.
fn tally(tx: &str, sites: &[String], deadline: Deadline, as_site: bool) -> Result<Outcome, ZkError> {
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        if let Some(done) = decision(tx)? {
            return Ok(done);
        }
        let (children, _, watcher) = zk::get_children_watch(tx)?;
        let coordinator = if as_site {
            match coordinator_watch(tx)? {
                Some(alive) => Some(alive),
                None => return Ok(Outcome::Aborted),
            }
        } else {
            None
        };
        let present: HashSet<&str> = children.iter().filter_map(|c| c.strip_prefix(SITE)).collect();
        let mut commits = 0;
        for site in sites {
            if !present.contains(site.as_str()) {
                if seen.contains(site) {
                    return Ok(Outcome::Aborted); // voted, then failed
                }
                continue;
            }
            match zk::get_data(&zk::join(tx, &format!("{SITE}{site}"))) {
                Ok((vote, _)) if vote == b"abort" => return Ok(Outcome::Aborted),
                Ok(_) => {
                    seen.insert(site.clone());
                    commits += 1;
                }
                Err(ZkError::NoNode) => return Ok(Outcome::Aborted), // failed while we read
                Err(e) => return Err(e),
            }
        }
        if commits == sites.len() {
            return Ok(Outcome::Committed);
        }
        match wait(&watcher, coordinator.as_ref(), deadline) {
            Err(ZkError::Timeout) => return Ok(Outcome::Aborted),
            other => other?,
        }
    }
}

/// Waits for `<tx>/decision`; past the deadline, or (for a site, `as_site`) once the coordinator
/// is gone, decides abort (unless someone decided first).
fn await_decision(tx: &str, deadline: Deadline, as_site: bool) -> Result<Outcome, ZkError> {
    let node = zk::join(tx, "decision");
    loop {
        let (stat, watcher) = zk::exists_watch(&node)?;
        if stat.is_some() {
            return decision(tx)?.ok_or(ZkError::NoNode);
        }
        let coordinator = if as_site {
            match coordinator_watch(tx)? {
                Some(alive) => Some(alive),
                None => return decide(tx, Outcome::Aborted),
            }
        } else {
            None
        };
        match wait(&watcher, coordinator.as_ref(), deadline) {
            Err(ZkError::Timeout) => return decide(tx, Outcome::Aborted),
            other => other?,
        }
    }
}

/// Creates `tx` (holding `payload`), `tx/meta` and the coordinator's node in one multi. A multi
/// whose reply is lost is resolved by looking: it is all or nothing, so the coordinator's node
/// there, owned by this session and holding this instance's id, means it took effect; `tx`
/// there without it means another transaction has the path (`node-exists`).
fn open(tx: &str, payload: &[u8], meta: &[u8]) -> Result<(), ZkError> {
    let coordinator = coordinator_node(tx);
    let me = zk::instance_id();
    let create =
        |path: &str, data: &[u8], mode| Op::Create(CreateOp { path: path.into(), data: data.into(), mode });
    let ops = [
        create(tx, payload, CreateMode::Persistent),
        create(&zk::join(tx, "meta"), meta, CreateMode::Persistent),
        create(&coordinator, me.as_bytes(), CreateMode::Ephemeral),
    ];
    for attempt in 1..=RETRIES {
        match zk::multi(&ops) {
            Ok(_) => return Ok(()),
            // A parent container reaped since it was made.
            Err(MultiError { index: Some(_), error: ZkError::NoNode }) if attempt <= 2 => {
                zk::ensure_parents(tx)?
            }
            Err(MultiError { index: None, error: ZkError::ConnectionLoss }) => {
                if zk::owns(&coordinator, Some(me.as_bytes()))? {
                    return Ok(());
                }
                if zk::exists(tx)?.is_some() {
                    return Err(ZkError::NodeExists);
                }
                std::thread::sleep(Duration::from_millis(50 * u64::from(attempt.min(10))));
            }
            Err(MultiError { error, .. }) => return Err(error),
        }
    }
    Err(ZkError::ConnectionLoss)
}

/// Deletes a finished transaction in one multi (its children, `tx`, and the coordinator's node
/// if it is still there) and returns its outcome. See [`Guest::clean`].
fn clean(tx: &str) -> Result<Outcome, ZkError> {
    let coordinator = coordinator_node(tx);
    // The outcome of a delete whose reply was lost: if `tx` is gone after it, it took effect.
    let mut sent = None;
    for attempt in 1..=RETRIES {
        if zk::exists(tx)?.is_none() {
            return sent.ok_or(ZkError::NoNode);
        }
        let alive = zk::exists(&coordinator)?.is_some();
        let outcome = match decision(tx)? {
            Some(outcome) => outcome,
            None if alive => {
                return Err(ZkError::InvalidArgument(
                    "still in progress: no decision yet, and its coordinator is alive".into(),
                ))
            }
            None => decide(tx, Outcome::Aborted)?,
        };
        let (children, _) = zk::get_children(tx)?;
        let delete = |path: String| Op::Delete(DeleteOp { path, version: None });
        let mut ops: Vec<Op> = children.iter().map(|c| delete(zk::join(tx, c))).collect();
        ops.push(delete(tx.to_string()));
        if alive {
            ops.push(delete(coordinator.clone()));
        }
        match zk::multi(&ops) {
            Ok(_) => return Ok(outcome),
            // A vote came or went, or the coordinator finished, since we looked.
            Err(MultiError { index: Some(_), error: ZkError::NoNode | ZkError::NotEmpty }) => {}
            Err(MultiError { index: None, error: ZkError::ConnectionLoss }) => {
                sent = Some(outcome);
                std::thread::sleep(Duration::from_millis(50 * u64::from(attempt.min(10))));
            }
            Err(MultiError { error, .. }) => return Err(error),
        }
    }
    Err(ZkError::Other(format!("{tx} kept changing while it was cleaned; try again")))
}

struct Transaction;

impl Guest for Transaction {
    fn coordinate(
        tx: String,
        sites: Vec<String>,
        payload: Vec<u8>,
        mode: Mode,
        timeout_ms: Option<u64>,
    ) -> Result<Outcome, ZkError> {
        zk::check_path(&tx)?;
        zk::check_path(&coordinator_node(&tx))?;
        if sites.is_empty() || sites.iter().any(|s| s.is_empty() || s.contains('/') || s.contains('\n')) {
            return Err(ZkError::InvalidArgument("sites must be non-empty names without '/'".into()));
        }
        let deadline = Deadline::after_ms(timeout_ms);
        zk::ensure_parents(&tx)?;
        let mode_line = match mode {
            Mode::AllToAll => "all-to-all",
            Mode::Coordinated => "coordinated",
        };
        let meta = format!("{mode_line}\n{}", sites.join("\n"));
        open(&tx, &payload, meta.as_bytes())?;
        let outcome = match mode {
            // The coordinator alone watches the votes and decides.
            Mode::Coordinated => tally(&tx, &sites, deadline, false).and_then(|v| decide(&tx, v)),
            // The sites decide; the coordinator only learns the outcome (and aborts a
            // transaction nobody decided in time).
            Mode::AllToAll => await_decision(&tx, deadline, false),
        };
        // Done, or giving up: a site still waiting without a decision now aborts.
        let _ = zk::delete_retrying(&coordinator_node(&tx));
        outcome
    }

    fn payload(tx: String) -> Result<Vec<u8>, ZkError> {
        zk::check_path(&tx)?;
        zk::get_data(&tx).map(|(data, _)| data)
    }

    fn vote(tx: String, site: String, ballot: Ballot, timeout_ms: Option<u64>) -> Result<Outcome, ZkError> {
        zk::check_path(&tx)?;
        zk::check_path(&coordinator_node(&tx))?;
        let deadline = Deadline::after_ms(timeout_ms);
        let (mode, sites) = meta(&tx)?;
        if !sites.contains(&site) {
            return Err(ZkError::InvalidArgument(format!("{site} is not a site of {tx}")));
        }
        let text: &[u8] = match ballot {
            Ballot::Commit => b"commit",
            Ballot::Abort => b"abort",
        };
        // The site creates its own ephemeral node, so its failure is seen by the others. A
        // create whose reply was lost is tried again; finding the node then, ours (this
        // session's, holding this ballot), means the first one applied.
        let vote = zk::join(&tx, &format!("{SITE}{site}"));
        let mut lost_replies = 0;
        loop {
            let lost_reply = lost_replies > 0;
            match zk::create(&vote, text, CreateMode::Ephemeral) {
                Ok(_) => break,
                Err(ZkError::ConnectionLoss) if lost_replies < 20 => {
                    lost_replies += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50 * lost_replies));
                }
                // Ours (this session's, holding this ballot): the first create applied.
                Err(ZkError::NodeExists) if lost_reply && zk::owns(&vote, Some(text))? => break,
                Err(ZkError::NodeExists) => {
                    return Err(ZkError::InvalidArgument(format!("{site} already voted")))
                }
                Err(e) => return Err(e),
            }
        }
        match mode {
            Mode::AllToAll => {
                let verdict = tally(&tx, &sites, deadline, true)?;
                decide(&tx, verdict)
            }
            Mode::Coordinated => await_decision(&tx, deadline, true),
        }
    }

    fn clean(tx: String) -> Result<Outcome, ZkError> {
        zk::check_path(&tx)?;
        zk::check_path(&coordinator_node(&tx))?;
        clean(&tx)
    }
}

export!(Transaction);
