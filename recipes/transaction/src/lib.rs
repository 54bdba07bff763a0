//! Two-phase commit, ZooKeeper "Recipes and Solutions" 1.6, in both of the seed's variants:
//! every site watching every vote, or only the coordinator watching and deciding. Sites create
//! their own ephemeral vote nodes so a failed site is detected, and the outcome is a single
//! `decision` node whose first writer decides for everyone.

wazoo_guest::recipe_world!("wazoo:recipes/transaction-recipe@0.1.0");

use std::collections::HashSet;

use exports::wazoo::recipes::two_phase_commit::{Ballot, Guest, Mode, Outcome};
use wazoo_guest::{self as zk, CreateMode, Deadline, ZkError};

const SITE: &str = "site-";

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
    match zk::retrying(|| zk::get_data(&zk::join(tx, "decision"))) {
        Ok((data, _)) if data == b"committed" => Ok(Some(Outcome::Committed)),
        Ok(_) => Ok(Some(Outcome::Aborted)),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The transaction's mode and sites, from `<tx>/meta` ("mode\nsite\nsite…").
fn meta(tx: &str) -> Result<(Mode, Vec<String>), ZkError> {
    let (data, _) = zk::retrying(|| zk::get_data(&zk::join(tx, "meta")))?;
    let text = String::from_utf8_lossy(&data);
    let mut lines = text.lines();
    let mode = match lines.next() {
        Some("all-to-all") => Mode::AllToAll,
        _ => Mode::Coordinated,
    };
    Ok((mode, lines.map(str::to_string).collect()))
}

/// Watches the votes until a verdict is clear: abort at the first abort or vanished voter,
/// commit once every site voted commit; abort at the deadline. `seen` remembers who voted.
fn tally(tx: &str, sites: &[String], deadline: Deadline) -> Result<Outcome, ZkError> {
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        if let Some(done) = decision(tx)? {
            return Ok(done);
        }
        let (children, _, watcher) = zk::retrying(|| zk::get_children_watch(tx))?;
        let present: HashSet<&str> = children.iter().filter_map(|c| c.strip_prefix(SITE)).collect();
        let mut commits = 0;
        for site in sites {
            if !present.contains(site.as_str()) {
                if seen.contains(site) {
                    return Ok(Outcome::Aborted); // voted, then failed
                }
                continue;
            }
            match zk::retrying(|| zk::get_data(&zk::join(tx, &format!("{SITE}{site}")))) {
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
        match zk::wait_on(&watcher, deadline) {
            Err(ZkError::Timeout) => return Ok(Outcome::Aborted),
            other => other?,
        }
    }
}

/// Waits for `<tx>/decision`; past the deadline, decides abort (unless someone decided first).
fn await_decision(tx: &str, deadline: Deadline) -> Result<Outcome, ZkError> {
    let node = zk::join(tx, "decision");
    loop {
        let (stat, watcher) = zk::retrying(|| zk::exists_watch(&node))?;
        if stat.is_some() {
            return decision(tx)?.ok_or(ZkError::NoNode);
        }
        match zk::wait_on(&watcher, deadline) {
            Err(ZkError::Timeout) => return decide(tx, Outcome::Aborted),
            other => other?,
        }
    }
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
        if sites.is_empty() || sites.iter().any(|s| s.is_empty() || s.contains('/') || s.contains('\n')) {
            return Err(ZkError::InvalidArgument("sites must be non-empty names without '/'".into()));
        }
        let deadline = Deadline::after_ms(timeout_ms);
        // Create the transaction and its site list (the seed's "/app/Tx").
        zk::ensure_parents(&tx)?;
        match zk::retrying(|| zk::create(&tx, &payload, CreateMode::Persistent)) {
            Ok(_) => {}
            Err(ZkError::NodeExists) => return Err(ZkError::NodeExists),
            Err(e) => return Err(e),
        }
        let mode_line = match mode {
            Mode::AllToAll => "all-to-all",
            Mode::Coordinated => "coordinated",
        };
        let meta = format!("{mode_line}\n{}", sites.join("\n"));
        zk::retrying(|| zk::create(&zk::join(&tx, "meta"), meta.as_bytes(), CreateMode::Persistent))?;
        match mode {
            // The coordinator alone watches the votes and decides.
            Mode::Coordinated => {
                let verdict = tally(&tx, &sites, deadline)?;
                decide(&tx, verdict)
            }
            // The sites decide; the coordinator only learns the outcome (and aborts a
            // transaction nobody decided in time).
            Mode::AllToAll => await_decision(&tx, deadline),
        }
    }

    fn payload(tx: String) -> Result<Vec<u8>, ZkError> {
        zk::check_path(&tx)?;
        zk::retrying(|| zk::get_data(&tx)).map(|(data, _)| data)
    }

    fn vote(tx: String, site: String, ballot: Ballot, timeout_ms: Option<u64>) -> Result<Outcome, ZkError> {
        zk::check_path(&tx)?;
        let deadline = Deadline::after_ms(timeout_ms);
        let (mode, sites) = meta(&tx)?;
        if !sites.contains(&site) {
            return Err(ZkError::InvalidArgument(format!("{site} is not a site of {tx}")));
        }
        let text: &[u8] = match ballot {
            Ballot::Commit => b"commit",
            Ballot::Abort => b"abort",
        };
        // The site creates its own ephemeral node, so its failure is seen by the others.
        match zk::create(&zk::join(&tx, &format!("{SITE}{site}")), text, CreateMode::Ephemeral) {
            Ok(_) => {}
            Err(ZkError::NodeExists) => {
                return Err(ZkError::InvalidArgument(format!("{site} already voted")))
            }
            Err(e) => return Err(e),
        }
        match mode {
            Mode::AllToAll => {
                let verdict = tally(&tx, &sites, deadline)?;
                decide(&tx, verdict)
            }
            Mode::Coordinated => await_decision(&tx, deadline),
        }
    }
}

export!(Transaction);
