//! A daemon group under faults: three `wazoo serve --group` members, processes of their own on
//! the lab's ZooKeeper, are killed (SIGKILL), frozen then woken (SIGSTOP, SIGCONT) or told to
//! stop (SIGTERM), one at a time at random, while `wazoo` CLI clients take locks, a semaphore
//! and an election through the group, back to back. A member that goes is replaced by a new one,
//! so the group stays three strong. Each guarded command is a shell that forks a child and marks
//! its hold in a directory (`mkdir` is atomic), so the commands themselves see two holders at
//! once. Checked during and after the run:
//!
//! - never two holders: a lock's or the election's mark taken twice, or more semaphore marks
//!   wanted than there are leases;
//! - no claim lost: no client is killed here, so every client exits 0 (its command ran to its
//!   end, its claim held throughout);
//! - every waiter served in queue order: on each lock path and on the election, the commands
//!   ran in the order of their nodes' sequence numbers;
//! - no node left behind once every client has closed: no ephemeral node under the scenario's
//!   paths, and no client record in the group's state;
//! - a member told to stop hands over and exits 0; a frozen member that exits once woken
//!   (it was adopted meanwhile) exits 75;
//! - registrations (`wazoo register`, three, kept through the whole run) never blink: no
//!   deletion of their nodes is seen, each is the node it was made as (same czxid) at the end,
//!   and it goes once its registrant ends.
//!
//! The report's figures: the faults, the client sessions that the faulted member served at each
//! fault (holding or waiting: the claims that went through a fault), the claims lost, the
//! overlaps, the registrations and their blinks. `chaos-soak` runs it on its 3-member ensemble (`make soak`); `tests/tests/chaos.rs`
//! runs a short version in CI.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::chaos::{Lab, Report, Rng, Run};
use crate::daemon::{cache, group_state, member_of, signal, wazoo_at, Daemon};
use crate::{children, plugins, wait_children, wait_gone};

/// The semaphore's leases.
const LEASES: usize = 2;
/// Registrations kept present through the whole run (`wazoo register`), one per member at first.
const REGISTRANTS: usize = 3;
/// How long a client (its wait and its command) may take before it counts as hung.
const CLIENT_LIMIT: Duration = Duration::from_secs(90);
/// How long the clean-up (nodes, client records) may take once every client has exited: the
/// records of a member that went unadopted are cleared 21 s after its node went (twice the
/// daemons' session timeout, 10 s, and 1 s), found within half that.
const CLEAN_LIMIT: Duration = Duration::from_secs(45);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Lock,
    Semaphore,
    Election,
}

impl Kind {
    /// The subcommand and its arguments before `--`, and the variable naming the claim's node.
    fn args(self, path: &str) -> (Vec<String>, &'static str) {
        let path = path.to_string();
        match self {
            Kind::Lock => (vec!["lock".into(), path], "WAZOO_LOCK_NODE"),
            Kind::Semaphore => {
                (vec!["semaphore".into(), path, "--leases".into(), LEASES.to_string()], "WAZOO_LEASE_NODE")
            }
            Kind::Election => (vec!["elect".into(), path], "WAZOO_LEADER_NODE"),
        }
    }
}

/// One path under load: its kind, the directory its commands mark their holds in, and the
/// journal they append to (`held NODE`, `overlap NODE`).
struct Target {
    kind: Kind,
    path: String,
    marks: PathBuf,
    journal: PathBuf,
}

impl Target {
    /// The guarded command: takes a mark (one of the leases' for the semaphore), journals the
    /// hold, holds for `hold` in a child process, gives the mark back; on SIGTERM (the command
    /// stopped by its client) gives the mark back at once.
    fn script(&self, node_var: &str, hold: Duration) -> String {
        let slots = match self.kind {
            Kind::Semaphore => (1..=LEASES).map(|i| format!("lease{i}")).collect::<Vec<_>>().join(" "),
            _ => "held".to_string(),
        };
        format!(
            r#"d='{marks}'; j='{journal}'; m=
for s in {slots}; do if mkdir "$d/$s" 2>/dev/null; then m="$d/$s"; break; fi; done
[ -n "$m" ] || echo "overlap ${node_var}" >> "$j"
echo "held ${node_var}" >> "$j"
trap '[ -z "$m" ] || rmdir "$m"; exit 1' TERM INT HUP
sleep {hold:.3} & wait $!
[ -z "$m" ] || rmdir "$m""#,
            marks = self.marks.display(),
            journal = self.journal.display(),
            hold = hold.as_secs_f64(),
        )
    }
}

/// What one client process came to.
struct Outcome {
    target: usize,
    status: Option<i32>,
    stderr: String,
}

/// Runs the scenario: `faults` faults on a group of three, `seed` drawing the members, the
/// faults' kinds and lengths and the commands' hold times.
pub async fn daemons_faulted(lab: &Lab, faults: usize, seed: u64) -> Report {
    let run = Run::start();
    let mut rng = Rng::new(seed);
    let name = lab.path("group").trim_start_matches('/').replace('/', "-");
    let zookeeper = lab.members.join(",");
    let args = member_of(&name);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(Daemon::start_on(&zookeeper, &plugins(), &cache(), &args).await);
    }
    let (state, root) = group_state(&zookeeper, &name).await;
    let addresses = Arc::new(Mutex::new(members.iter().map(|m| m.grpc.clone()).collect::<Vec<_>>()));

    let scratch = std::env::temp_dir().join(format!("wazoo-{name}"));
    let _ = std::fs::remove_dir_all(&scratch);
    let mut targets = Vec::new();
    for (i, (kind, contenders)) in
        [(Kind::Lock, 3), (Kind::Lock, 3), (Kind::Lock, 3), (Kind::Semaphore, 4), (Kind::Election, 3)]
            .into_iter()
            .enumerate()
    {
        let marks = scratch.join(format!("marks-{i}"));
        std::fs::create_dir_all(&marks).unwrap();
        let target = Target {
            kind,
            path: lab.path(&format!("{kind:?}").to_lowercase()),
            marks,
            journal: scratch.join(format!("journal-{i}")),
        };
        targets.push((Arc::new(target), contenders));
    }

    // The clients: each worker runs one client after another on its target until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for (index, (target, contenders)) in targets.iter().enumerate() {
        for _ in 0..*contenders {
            let (target, addresses, stop, run) =
                (target.clone(), addresses.clone(), stop.clone(), run.clone());
            let mut rng = Rng::new(rng.next());
            workers.push(tokio::spawn(async move {
                let mut outcomes = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let mut servers = addresses.lock().unwrap().clone();
                    let turn = rng.range(0, servers.len() as u64 - 1) as usize;
                    servers.rotate_left(turn);
                    let hold = rng.millis(100, 600);
                    outcomes.push(client(index, &target, &servers.join(","), hold).await);
                    run.op();
                }
                outcomes
            }));
        }
    }

    // Registrations kept present through the whole run, each watched for a blink: a deletion
    // seen, or a node with another czxid at the end.
    let checker = lab.checker().await;
    let stop_file = scratch.join("stop-registrants");
    let mut registrants = Vec::new();
    for i in 0..REGISTRANTS {
        let path = lab.path("registered");
        let mut servers = addresses.lock().unwrap().clone();
        let turn = i % servers.len();
        servers.rotate_left(turn);
        let wait = format!("while [ ! -e '{}' ]; do sleep 0.2; done", stop_file.display());
        let child = wazoo_at(&servers.join(","))
            .env("WAZOO_LOG", "wazoo=info")
            .args(["register", &path, "--data", &format!("registrant {i}"), "--", "sh", "-c", &wait])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let czxid = loop {
            let (stat, watcher) = checker.check_and_watch_stat(&path).await.unwrap();
            match stat {
                Some(stat) => break stat.czxid,
                None => watcher.changed().await,
            };
        };
        let blinks = Arc::new(AtomicU64::new(0));
        let watching = tokio::spawn({
            let (checker, path, blinks, stop) = (checker.clone(), path.clone(), blinks.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::SeqCst) {
                    let Ok((stat, watcher)) = checker.check_and_watch_stat(&path).await else { break };
                    if stat.is_none_or(|s| s.czxid != czxid) {
                        blinks.fetch_add(1, Ordering::SeqCst);
                    }
                    let event = watcher.changed().await;
                    if event.event_type == zookeeper_client::EventType::NodeDeleted {
                        blinks.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        });
        registrants.push((path, czxid, child, blinks, watching));
    }

    // The faults, one at a time; every kind comes up in any three in a row.
    let (mut killed, mut frozen, mut stopped, mut through) = (0u64, 0u64, 0u64, 0u64);
    let first_kind = rng.range(0, 2);
    for i in 0..faults {
        tokio::time::sleep(rng.millis(1000, 3000)).await;
        let serving = sessions_by_address(&state, &root).await;
        let busy: Vec<usize> =
            (0..members.len()).filter(|&m| serving.get(&members[m].grpc).copied().unwrap_or(0) > 0).collect();
        let pick = if busy.is_empty() {
            rng.range(0, members.len() as u64 - 1) as usize
        } else {
            busy[rng.range(0, busy.len() as u64 - 1) as usize]
        };
        let on_it = serving.get(&members[pick].grpc).copied().unwrap_or(0);
        through += on_it as u64;
        let (address, pid) = (members[pick].grpc.clone(), members[pick].pid());
        let gone = match (first_kind + i as u64) % 3 {
            0 => {
                killed += 1;
                run.fault(format!("member {address} (pid {pid}) SIGKILLed, serving {on_it} client sessions"));
                signal(pid, "-KILL");
                let _ = members[pick].exited().await;
                true
            }
            1 => {
                stopped += 1;
                run.fault(format!(
                    "member {address} (pid {pid}) told to stop (SIGTERM), serving {on_it} client sessions"
                ));
                signal(pid, "-TERM");
                let status = members[pick].exited().await;
                run.check(status.code() == Some(0), || {
                    format!("member {address} told to stop exited {status}")
                });
                true
            }
            _ => {
                frozen += 1;
                let length = rng.millis(1500, 4000);
                run.fault(format!(
                    "member {address} (pid {pid}) frozen (SIGSTOP) for {length:?}, serving {on_it} client sessions"
                ));
                signal(pid, "-STOP");
                tokio::time::sleep(length).await;
                signal(pid, "-CONT");
                // Adopted meanwhile, it stops before it reconnects; else it carries on.
                match members[pick].exited_within(Duration::from_secs(5)).await {
                    Some(status) => {
                        run.note(format!("member {address}, woken, exited {status}"));
                        run.check(status.code() == Some(75), || {
                            format!("member {address}, woken after its adoption, exited {status}, not 75")
                        });
                        true
                    }
                    None => {
                        run.note(format!("member {address}, woken, carries on"));
                        false
                    }
                }
            }
        };
        if gone {
            members.remove(pick);
            members.push(Daemon::start_on(&zookeeper, &plugins(), &cache(), &args).await);
            *addresses.lock().unwrap() = members.iter().map(|m| m.grpc.clone()).collect();
        }
    }

    stop.store(true, Ordering::SeqCst);
    let mut outcomes = Vec::new();
    for worker in workers {
        outcomes.extend(worker.await.unwrap());
    }

    // Every registration is still the node it was made as, then goes with its registrant.
    let mut blinked = 0;
    for (path, czxid, _, blinks, watching) in &registrants {
        let now = checker.check_stat(path).await.ok().flatten().map(|s| s.czxid);
        run.check(now == Some(*czxid), || {
            format!("registration {path}: czxid {czxid} at the start, {now:?} at the end")
        });
        watching.abort();
        let seen = blinks.load(Ordering::SeqCst);
        blinked += seen;
        run.check(seen == 0, || format!("registration {path} went and came back {seen} times"));
    }
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(&stop_file, b"").unwrap();
    for (path, _, child, _, _) in registrants {
        let out = tokio::time::timeout(CLIENT_LIMIT, child.wait_with_output()).await;
        let (status, stderr) = match out {
            Ok(Ok(out)) => (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned()),
            Ok(Err(e)) => (None, e.to_string()),
            Err(_) => (None, format!("still running after {CLIENT_LIMIT:?}")),
        };
        let took_up = stderr.matches("taken up, the same node").count();
        run.note(format!("registration {path}: taken up {took_up} times"));
        run.check(status == Some(0), || {
            format!(
                "registrant of {path} exited {status:?}: {}",
                stderr.trim_end().lines().rev().take(12).collect::<Vec<_>>().join(" / ")
            )
        });
        let gone = tokio::time::timeout(CLEAN_LIMIT, wait_gone(&checker, &path)).await.is_ok();
        run.check(gone, || format!("registration {path} left behind after its registrant ended"));
    }

    // No claim lost, no client failed.
    let lost = outcomes.iter().filter(|o| o.status == Some(4)).count();
    for outcome in &outcomes {
        let target = &targets[outcome.target].0;
        run.check(outcome.status == Some(0), || {
            format!(
                "a client of {:?} {} exited {:?}: {}",
                target.kind,
                target.path,
                outcome.status,
                outcome.stderr.trim_end().lines().rev().take(12).collect::<Vec<_>>().join(" / ")
            )
        });
    }

    // Never two holders; queue order on the locks and the election.
    let mut overlaps = 0;
    for (target, _) in &targets {
        let journal = std::fs::read_to_string(&target.journal).unwrap_or_default();
        let mut last: Option<(u64, &str)> = None;
        let mut held = 0;
        for line in journal.lines() {
            if let Some(node) = line.strip_prefix("overlap ") {
                overlaps += 1;
                run.violation(format!("two holders at once on {:?} {}: {node}", target.kind, target.path));
                continue;
            }
            let Some(node) = line.strip_prefix("held ") else { continue };
            held += 1;
            if target.kind == Kind::Semaphore {
                continue;
            }
            let sequence = sequence_of(node);
            if let (Some((before, before_node)), Some(now)) = (last, sequence) {
                run.check(now > before, || {
                    format!("{} served {node} after {before_node}: not in queue order", target.path)
                });
            }
            run.check(sequence.is_some(), || format!("{}: no sequence number in {node:?}", target.path));
            if let Some(now) = sequence {
                last = Some((now, node));
            }
        }
        run.check(held > 0, || format!("nobody held {:?} {} during the run", target.kind, target.path));
        run.note(format!("{:?} {}: {held} holds", target.kind, target.path));
    }

    // No node left behind, no client record left in the group's state.
    for (target, _) in &targets {
        for node in ephemerals(&checker, &target.path).await {
            let gone = tokio::time::timeout(CLEAN_LIMIT, wait_gone(&checker, &node)).await.is_ok();
            run.check(gone, || format!("{node} left behind once every client had closed"));
        }
    }
    let records = format!("{root}/clients");
    let cleared = tokio::time::timeout(CLEAN_LIMIT, wait_children(&state, &records, 0)).await.is_ok();
    let left = if cleared { Vec::new() } else { children(&state, &records).await };
    run.check(cleared, || format!("client records left in the group's state: {left:?}"));

    run.figure("daemon faults", faults as u64);
    run.figure("SIGKILL", killed);
    run.figure("SIGSTOP", frozen);
    run.figure("SIGTERM", stopped);
    run.figure("claims through a fault", through);
    run.figure("clients", outcomes.len() as u64);
    run.figure("claims lost", lost as u64);
    run.figure("overlaps", overlaps);
    run.figure("registrations", REGISTRANTS as u64);
    run.figure("registration blinks", blinked);
    drop(members);
    let _ = std::fs::remove_dir_all(&scratch);
    run.report("daemon group: members killed, frozen and stopped under load")
}

/// Runs one client on `target` through `servers` to its end.
async fn client(index: usize, target: &Target, servers: &str, hold: Duration) -> Outcome {
    let (args, node_var) = target.kind.args(&target.path);
    let started = std::time::Instant::now();
    let mut command = wazoo_at(servers);
    command.env("WAZOO_LOG", "wazoo=info").args(&args).args([
        "--",
        "sh",
        "-c",
        &target.script(node_var, hold),
    ]);
    match tokio::time::timeout(CLIENT_LIMIT, command.output()).await {
        Ok(Ok(out)) => Outcome {
            target: index,
            status: out.status.code(),
            stderr: format!("{} (after {:.2?})", String::from_utf8_lossy(&out.stderr), started.elapsed()),
        },
        Ok(Err(e)) => Outcome { target: index, status: None, stderr: format!("could not run wazoo: {e}") },
        Err(_) => {
            Outcome { target: index, status: None, stderr: format!("still running after {CLIENT_LIMIT:?}") }
        }
    }
}

/// The sequence number a sequential node's name ends with.
fn sequence_of(node: &str) -> Option<u64> {
    let name = node.rsplit('/').next()?;
    let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
    name[digits..].parse().ok()
}

/// How many client sessions each member serves now, by the member's address.
async fn sessions_by_address(state: &zookeeper_client::Client, root: &str) -> HashMap<String, usize> {
    let mut address_of = HashMap::new();
    for member in children(state, &format!("{root}/members")).await {
        if let Ok((data, _)) = state.get_data(&format!("{root}/members/{member}")).await {
            address_of.insert(member, String::from_utf8_lossy(&data).into_owned());
        }
    }
    let mut serving = HashMap::new();
    for client in children(state, &format!("{root}/clients")).await {
        if let Ok((data, _)) = state.get_data(&format!("{root}/clients/{client}")).await {
            let record: serde_json::Value = serde_json::from_slice(&data).unwrap_or_default();
            if let Some(address) = record["member"].as_str().and_then(|m| address_of.get(m)) {
                *serving.entry(address.clone()).or_insert(0) += 1;
            }
        }
    }
    serving
}

/// Every ephemeral node under `path`, at any depth.
async fn ephemerals(checker: &zookeeper_client::Client, path: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![path.to_string()];
    while let Some(node) = pending.pop() {
        if let Ok((_, stat)) = checker.get_data(&node).await {
            if stat.ephemeral_owner != 0 {
                found.push(node.clone());
            }
        }
        for child in children(checker, &node).await {
            pending.push(format!("{node}/{child}"));
        }
    }
    found
}
