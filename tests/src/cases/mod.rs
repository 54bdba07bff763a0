//! The fault matrix's cases: every export of every recipe world, with the state each needs and
//! the promise each keeps (see [`crate::matrix`]). Implementations in other languages run the
//! same cases as the Rust recipe they stand in for.
//!
//! Other participants use the Rust recipes: every implementation speaks the same wire format.
//! The kazoo-format builds of the lock family (`lock-kazoo`, `rwlock-kazoo`, `semaphore-kazoo`)
//! run the same cases among participants of their own format ([`Format`]).
//!
//! One file per recipe family, named for its recipe crate: `lock.rs`, `rwlock.rs`, `semaphore.rs`,
//! `election.rs`, `queue.rs`, `group.rs`, `config.rs`, `barrier.rs`, `transaction.rs`,
//! `registration.rs`, `cache.rs`. Each has the family's `…_cases` function, the list of its cases,
//! with the helpers only that family uses beside it. This file keeps what several families share
//! (the steps and checks below, the lock family's wire formats) and [`all`], the one list that puts
//! every family's cases together, in the order the matrix runs them. A new case of a family goes
//! into its `…_cases`; a helper a second family comes to need moves here; a new family needs a
//! file, its `mod` and `use` lines here, and its line in [`all`].

mod barrier;
mod cache;
mod config;
mod election;
mod group;
mod lock;
mod queue;
mod registration;
mod rwlock;
mod semaphore;
mod transaction;

use std::time::Duration;

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use crate::matrix::{ok, Case, Ctx, Fut, Verdict};
use crate::proxy::Request;

// Each family's list of its cases, which `all` puts together.
use barrier::barrier_cases;
use cache::cache_cases;
use config::config_cases;
use election::{election_cases, election_leader_check};
use group::group_cases;
use lock::lock_cases;
use queue::queue_cases;
use registration::registration_cases;
use rwlock::rwlock_cases;
use semaphore::semaphore_cases;
use transaction::transaction_cases;

pub use election::{Electorate, Latch, Selector};

/// How long another participant waits where the faulted one may never come.
const PEER_MS: u64 = 1500;

fn nothing<'a>(_: &'a Ctx, _: &'a mut DynamicHandle) -> Fut<'a, Value> {
    Box::pin(async { Value::Null })
}

fn no_check<'a>(_: &'a Ctx, _: &'a Verdict) -> Fut<'a, ()> {
    Box::pin(async {})
}

/// The faulted host armed a watch on the recipe's own path.
fn watches_path(ctx: &Ctx, r: &Request) -> bool {
    r.watch && r.path == ctx.path
}

/// The faulted host armed a watch on the recipe's path or a node under it (not on a sibling
/// whose name merely begins the same, such as an election's `PATH-leader-ack`).
fn watches_under(ctx: &Ctx, r: &Request) -> bool {
    r.watch
        && r.path.strip_prefix(ctx.path.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn node(v: &Value) -> Option<String> {
    v.get("node").and_then(Value::as_str).map(str::to_string)
}

fn token(v: &Value) -> Option<i64> {
    v.get("token").and_then(Value::as_i64)
}

/// The call's own held node (lock, lease, leadership), if it returned one.
fn held(v: &Verdict) -> Option<String> {
    v.ok().and_then(node)
}

/// Runs `first` on the faulted handle and returns its `ok` value (state the operation needs).
async fn on(handle: &mut DynamicHandle, function: &str, args: Value) -> Value {
    match tokio::time::timeout(Duration::from_secs(20), handle.call(function, &args)).await {
        Ok(Ok(v)) => v.get("ok").cloned().unwrap_or(v),
        Ok(Err(e)) => json!({ "host-error": e.to_string() }),
        Err(_) => json!({ "host-error": "timed out" }),
    }
}

/// A lock-like claim is held by the faulted handle: its node exists, is the faulted session's,
/// and nobody else can take the lock now.
async fn holds_exclusively(ctx: &Ctx, v: &Verdict, recipe: &str, try_call: (&str, Value)) {
    let Some(node) = held(v) else { return };
    let owner = ctx.owner(&node).await;
    ctx.check(owner == Some(ctx.session), || {
        format!("returned {node} as held, but its owner is {owner:?}, not session {:#x}", ctx.session)
    });
    let other = ctx.peer(recipe, &[try_call]).await;
    ctx.check(ok(&other[0]).is_some_and(Value::is_null), || {
        format!("another contender got the lock while {node} was held: {}", other[0])
    });
}

/// Once the faulted handle is closed, a fresh contender takes the lock within the bound, with a
/// higher token than the faulted holder's (nobody waits forever behind a ghost).
async fn next_holder_gets_it(ctx: &Ctx, v: &Verdict, recipe: &str, acquire: (&str, Value)) {
    let next = ctx.peer(recipe, &[acquire]).await;
    let got = ok(&next[0]).and_then(token);
    ctx.check(got.is_some(), || format!("the next contender did not get the lock: {}", next[0]));
    if let (Some(mine), Some(theirs)) = (v.ok().and_then(token), got) {
        ctx.check(theirs > mine, || format!("token went from {mine} to {theirs}"));
    }
}

/// A wire format of the lock family: the plugins that speak it (every participant of a case
/// speaks the faulted recipe's format), and where a semaphore keeps its leases.
pub trait Format: 'static {
    const LOCK: &'static str;
    const RWLOCK: &'static str;
    const SEMAPHORE: &'static str;
    /// The node whose children are the semaphore `path`'s leases.
    fn leases(path: &str) -> String;
}

/// Curator's formats: the standard builds.
pub struct Curator;

impl Format for Curator {
    const LOCK: &'static str = "lock";
    const RWLOCK: &'static str = "rwlock";
    const SEMAPHORE: &'static str = "semaphore";
    fn leases(path: &str) -> String {
        format!("{path}/leases")
    }
}

/// kazoo's formats: the `kazoo` builds of the same recipes.
pub struct Kazoo;

impl Format for Kazoo {
    const LOCK: &'static str = "lock-kazoo";
    const RWLOCK: &'static str = "rwlock-kazoo";
    const SEMAPHORE: &'static str = "semaphore-kazoo";
    fn leases(path: &str) -> String {
        path.to_string()
    }
}

/// Waits (by watches) until `dir` has a child whose name contains `part`.
async fn child_appears(ctx: &Ctx, dir: &str, part: &str) {
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let watched = ctx.checker.list_and_watch_children(dir).await;
            match watched {
                Ok((children, _)) if children.iter().any(|c| c.contains(part)) => return,
                Ok((_, watcher)) => {
                    watcher.changed().await;
                }
                Err(_) => {
                    let (stat, watcher) = ctx.checker.check_and_watch_stat(dir).await.expect("watching");
                    if stat.is_none() {
                        watcher.changed().await;
                    }
                }
            }
        }
    })
    .await;
    ctx.check(found.is_ok(), || format!("no {part} node appeared under {dir}"));
}

/// Every case, for every recipe and every language the project ships.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    // The lock in Rust and in C (`guest/c/lock`), each contending through the host's
    // `contention` (as do `semaphore-py`'s mutex and `election-js`'s campaign below).
    for recipe in [Curator::LOCK, "lock-c"] {
        cases.extend(lock_cases::<Curator>(recipe));
    }
    cases.extend(rwlock_cases::<Curator>());
    for recipe in ["semaphore", "semaphore-py"] {
        cases.extend(semaphore_cases::<Curator>(recipe));
    }
    // The kazoo-format builds, each among participants of its own format.
    cases.extend(lock_cases::<Kazoo>(Kazoo::LOCK));
    cases.extend(rwlock_cases::<Kazoo>());
    cases.extend(semaphore_cases::<Kazoo>(Kazoo::SEMAPHORE));
    for recipe in ["election", "election-js"] {
        let mut election = election_cases::<Latch>(recipe);
        election_leader_check(&mut election);
        cases.extend(election);
    }
    let mut selector = election_cases::<Selector>("election-selector");
    election_leader_check(&mut selector);
    cases.extend(selector);
    cases.extend(queue_cases());
    cases.extend(group_cases());
    cases.extend(config_cases());
    for recipe in ["barrier", "barrier-c"] {
        cases.extend(barrier_cases(recipe));
    }
    cases.extend(transaction_cases());
    cases.extend(registration_cases());
    cases.extend(cache_cases());
    cases
}
