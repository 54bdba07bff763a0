//! The fault matrix's cases: every export of every recipe world, with the state each needs and
//! the promise each keeps (see [`crate::matrix`]). Implementations in other languages run the
//! same cases as the Rust recipe they stand in for.
//!
//! Other participants use the Rust recipes: every implementation speaks the same wire format.
//! The kazoo-format builds of the lock family (`lock-kazoo`, `rwlock-kazoo`, `semaphore-kazoo`)
//! run the same cases among participants of their own format ([`Format`]).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use crate::matrix::{ok, Case, Ctx, Fut, Kind, Verdict, WAIT_MS};
use crate::proxy::Request;

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

/// Items under the queue `path` whose data is `data`.
async fn items(ctx: &Ctx, data: &[u8]) -> usize {
    let mut n = 0;
    for child in ctx.children(&ctx.path).await {
        if ctx.data(&format!("{}/{child}", ctx.path)).await.as_deref() == Some(data) {
            n += 1;
        }
    }
    n
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

fn lock_cases<F: Format>() -> Vec<Case> {
    vec![
        Case {
            name: "lock.acquire",
            recipe: F::LOCK,
            before: nothing,
            call: |ctx, _| ("lock.acquire", json!([ctx.path, WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(holds_exclusively(ctx, v, F::LOCK, ("lock.try-acquire", json!([ctx.path]))))
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(ctx, v, F::LOCK, ("lock.acquire", json!([ctx.path, WAIT_MS]))))
            },
        },
        Case {
            name: "lock.try-acquire",
            recipe: F::LOCK,
            before: nothing,
            call: |ctx, _| ("lock.try-acquire", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(holds_exclusively(ctx, v, F::LOCK, ("lock.try-acquire", json!([ctx.path]))))
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(ctx, v, F::LOCK, ("lock.acquire", json!([ctx.path, WAIT_MS]))))
            },
        },
        Case {
            name: "lock.release",
            recipe: F::LOCK,
            before: |ctx, h| Box::pin(on(h, "lock.acquire", json!([ctx.path, WAIT_MS]))),
            call: |_, _| ("lock.release", json!([])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let node = node(&v.before).unwrap_or_default();
                        let owner = ctx.owner(&node).await;
                        ctx.check(owner.is_none(), || format!("released, but {node} is still there"));
                    }
                })
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(ctx, v, F::LOCK, ("lock.acquire", json!([ctx.path, WAIT_MS]))))
            },
        },
        Case {
            name: "lock.revoke",
            recipe: F::LOCK,
            before: |ctx, _| {
                Box::pin(async move {
                    ok(&ctx.hold(F::LOCK, &[("lock.acquire", json!([ctx.path, WAIT_MS]))]).await[0])
                        .cloned()
                        .unwrap_or_default()
                })
            },
            call: |_, before| ("lock.revoke", json!([node(before), null])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let node = node(&v.before).unwrap_or_default();
                        let data = ctx.data(&node).await;
                        ctx.check(data.as_deref() == Some(b"__REVOKE__".as_slice()), || {
                            format!("revoked, but the holder's node holds {data:?}")
                        });
                    }
                })
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(ctx, v, F::LOCK, ("lock.acquire", json!([ctx.path, WAIT_MS]))))
            },
        },
        Case {
            name: "lock.revoke forced",
            recipe: F::LOCK,
            before: |ctx, _| {
                Box::pin(async move {
                    ok(&ctx.hold(F::LOCK, &[("lock.acquire", json!([ctx.path, WAIT_MS]))]).await[0])
                        .cloned()
                        .unwrap_or_default()
                })
            },
            call: |_, before| ("lock.revoke", json!([node(before), 50])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let node = node(&v.before).unwrap_or_default();
                        ctx.check(ctx.owner(&node).await.is_none(), || {
                            format!("forced, but {node} is still there")
                        });
                    }
                })
            },
            after: no_check,
        },
    ]
}

fn rwlock_cases<F: Format>() -> Vec<Case> {
    vec![
        Case {
            name: "rwlock.acquire write",
            recipe: F::RWLOCK,
            before: nothing,
            call: |ctx, _| ("rwlock.acquire", json!([ctx.path, "write", WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(holds_exclusively(
                    ctx,
                    v,
                    F::RWLOCK,
                    ("rwlock.try-acquire", json!([ctx.path, "read"])),
                ))
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(
                    ctx,
                    v,
                    F::RWLOCK,
                    ("rwlock.acquire", json!([ctx.path, "write", WAIT_MS])),
                ))
            },
        },
        Case {
            name: "rwlock.acquire read",
            recipe: F::RWLOCK,
            before: nothing,
            call: |ctx, _| ("rwlock.acquire", json!([ctx.path, "read", WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(holds_exclusively(
                    ctx,
                    v,
                    F::RWLOCK,
                    ("rwlock.try-acquire", json!([ctx.path, "write"])),
                ))
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(
                    ctx,
                    v,
                    F::RWLOCK,
                    ("rwlock.acquire", json!([ctx.path, "write", WAIT_MS])),
                ))
            },
        },
        Case {
            name: "rwlock.try-acquire write",
            recipe: F::RWLOCK,
            before: nothing,
            call: |ctx, _| ("rwlock.try-acquire", json!([ctx.path, "write"])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(holds_exclusively(
                    ctx,
                    v,
                    F::RWLOCK,
                    ("rwlock.try-acquire", json!([ctx.path, "read"])),
                ))
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(
                    ctx,
                    v,
                    F::RWLOCK,
                    ("rwlock.acquire", json!([ctx.path, "write", WAIT_MS])),
                ))
            },
        },
        Case {
            name: "rwlock.release",
            recipe: F::RWLOCK,
            before: |ctx, h| Box::pin(on(h, "rwlock.acquire", json!([ctx.path, "write", WAIT_MS]))),
            call: |_, _| ("rwlock.release", json!([])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let node = node(&v.before).unwrap_or_default();
                        ctx.check(ctx.owner(&node).await.is_none(), || {
                            format!("released, but {node} is still there")
                        });
                    }
                })
            },
            after: |ctx, v| {
                Box::pin(next_holder_gets_it(
                    ctx,
                    v,
                    F::RWLOCK,
                    ("rwlock.acquire", json!([ctx.path, "write", WAIT_MS])),
                ))
            },
        },
    ]
}

/// Once the faulted handle is closed, exactly the semaphore's two leases can be taken: none
/// leaked, none too many.
async fn leases_all_free<F: Format>(ctx: &Ctx) {
    let first = ctx.hold(F::SEMAPHORE, &[("semaphore.acquire", json!([ctx.path, 2, WAIT_MS]))]).await;
    let second = ctx.hold(F::SEMAPHORE, &[("semaphore.acquire", json!([ctx.path, 2, WAIT_MS]))]).await;
    ctx.check(ok(&first[0]).is_some() && ok(&second[0]).is_some(), || {
        format!("two fresh contenders could not take the two leases: {} / {}", first[0], second[0])
    });
    let third = ctx.peer(F::SEMAPHORE, &[("semaphore.try-acquire", json!([ctx.path, 2]))]).await;
    ctx.check(ok(&third[0]).is_some_and(Value::is_null), || {
        format!("a third lease was granted: {}", third[0])
    });
}

async fn one_lease<F: Format>(ctx: &Ctx, v: &Verdict) {
    let Some(node) = held(v) else { return };
    let owner = ctx.owner(&node).await;
    ctx.check(owner == Some(ctx.session), || format!("lease {node} returned, but its owner is {owner:?}"));
    let leases = ctx.children(&F::leases(&ctx.path)).await;
    ctx.check(leases.len() == 1, || format!("{} leases after one acquire: {leases:?}", leases.len()));
}

fn semaphore_cases<F: Format>(recipe: &'static str) -> Vec<Case> {
    vec![
        Case {
            name: "semaphore.acquire",
            recipe,
            before: nothing,
            call: |ctx, _| ("semaphore.acquire", json!([ctx.path, 2, WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| Box::pin(one_lease::<F>(ctx, v)),
            after: |ctx, _| Box::pin(leases_all_free::<F>(ctx)),
        },
        Case {
            name: "semaphore.try-acquire",
            recipe,
            before: nothing,
            call: |ctx, _| ("semaphore.try-acquire", json!([ctx.path, 2])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| Box::pin(one_lease::<F>(ctx, v)),
            after: |ctx, _| Box::pin(leases_all_free::<F>(ctx)),
        },
        Case {
            name: "semaphore.release",
            recipe,
            before: |ctx, h| Box::pin(on(h, "semaphore.acquire", json!([ctx.path, 2, WAIT_MS]))),
            call: |_, _| ("semaphore.release", json!([])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let leases = ctx.children(&F::leases(&ctx.path)).await;
                        ctx.check(leases.is_empty(), || format!("released, but leases remain: {leases:?}"));
                    }
                })
            },
            after: |ctx, _| Box::pin(leases_all_free::<F>(ctx)),
        },
    ]
}

/// The node format of an election's participants: the peers a case's other participants use.
pub trait Electorate {
    /// The plugin the other participants run.
    const PEER: &'static str;
}

/// Curator's `LeaderLatch` format (`election`, `election-js`).
pub struct Latch;

impl Electorate for Latch {
    const PEER: &'static str = "election";
}

/// Curator's `LeaderSelector` format (`election-selector`).
pub struct Selector;

impl Electorate for Selector {
    const PEER: &'static str = "election-selector";
}

/// The leader other participants see.
async fn leader<E: Electorate>(ctx: &Ctx) -> Value {
    let seen = ctx.peer(E::PEER, &[("election.leader", json!([ctx.path]))]).await;
    ok(&seen[0]).cloned().unwrap_or_else(|| seen[0].clone())
}

fn election_cases<E: Electorate>(recipe: &'static str) -> Vec<Case> {
    let next_leader: for<'a> fn(&'a Ctx, &'a Verdict) -> Fut<'a, ()> = |ctx, v| {
        Box::pin(next_holder_gets_it(ctx, v, E::PEER, ("election.campaign", json!([ctx.path, "b", WAIT_MS]))))
    };
    vec![
        Case {
            name: "election.campaign",
            recipe,
            before: nothing,
            call: |ctx, _| ("election.campaign", json!([ctx.path, "a", WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    let Some(mine) = held(v) else { return };
                    let seen = leader::<E>(ctx).await;
                    ctx.check(node(&seen).as_deref() == Some(mine.as_str()), || {
                        format!("{mine} was told it leads; observers see {seen}")
                    });
                })
            },
            after: next_leader,
        },
        Case {
            name: "election.acknowledge",
            recipe,
            before: |ctx, h| Box::pin(on(h, "election.campaign", json!([ctx.path, "a", WAIT_MS]))),
            call: |_, _| ("election.acknowledge", json!(["note-a"])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    // A leader whose session is gone leads no more: its note goes with it.
                    let leader_node = node(&v.before).unwrap_or_default();
                    if v.ok().is_none() || ctx.owner(&leader_node).await.is_none() {
                        return;
                    }
                    let seen = leader::<E>(ctx).await;
                    ctx.check(
                        seen.get("acknowledged").and_then(Value::as_str) == Some("note-a")
                            && node(&seen) == node(&v.before),
                        || format!("acknowledged, but observers see {seen}"),
                    );
                })
            },
            after: |ctx, _| {
                Box::pin(async move {
                    let seen = leader::<E>(ctx).await;
                    ctx.check(seen.is_null(), || {
                        format!("the leader closed, but observers still see {seen}")
                    });
                })
            },
        },
        Case {
            name: "election.resign",
            recipe,
            before: |ctx, h| Box::pin(on(h, "election.campaign", json!([ctx.path, "a", WAIT_MS]))),
            call: |_, _| ("election.resign", json!([])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let seen = leader::<E>(ctx).await;
                        ctx.check(seen.is_null(), || format!("resigned, but observers see {seen}"));
                    }
                })
            },
            after: next_leader,
        },
        Case {
            name: "election.leader",
            recipe,
            before: |ctx, _| {
                Box::pin(async move {
                    ok(&ctx.hold(E::PEER, &[("election.campaign", json!([ctx.path, "b", WAIT_MS]))]).await[0])
                        .cloned()
                        .unwrap_or_default()
                })
            },
            call: |ctx, _| ("election.leader", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |_ctx, _v| Box::pin(async {}),
            after: no_check,
        },
        Case {
            name: "election.observe",
            recipe,
            before: nothing,
            call: |ctx, _| ("election.observe", json!([ctx.path, null, WAIT_MS])),
            trigger: Some((watches_under, |ctx| {
                Box::pin(async move {
                    ctx.hold(E::PEER, &[("election.campaign", json!([ctx.path, "b", WAIT_MS]))]).await;
                })
            })),
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(seen) = v.ok() {
                        ctx.check(seen.get("id").and_then(Value::as_str) == Some("b"), || {
                            format!("the observer saw {seen}, not the new leader b")
                        });
                    }
                })
            },
            after: no_check,
        },
    ]
}

/// Every leader/observe check that needs the faulted handle's answer against the truth.
fn election_leader_check(cases: &mut [Case]) {
    for case in cases.iter_mut().filter(|c| c.name == "election.leader") {
        case.check = |ctx, v| {
            Box::pin(async move {
                if let Some(seen) = v.ok() {
                    ctx.check(
                        seen.get("id").and_then(Value::as_str) == Some("b") && node(seen) == node(&v.before),
                        || format!("leader answered {seen}; b leads with {}", v.before),
                    );
                }
            })
        };
    }
}

fn queue_put(priority: Option<u8>) -> (&'static str, fn(&Ctx, &Value) -> (&'static str, Value)) {
    match priority {
        None => ("queue.put", |ctx, _| ("queue.put", json!([ctx.path, "x", null, false]))),
        Some(_) => ("queue.put priority", |ctx, _| ("queue.put", json!([ctx.path, "x", 7, false]))),
    }
}

fn queue_cases() -> Vec<Case> {
    let put_check: for<'a> fn(&'a Ctx, &'a Verdict) -> Fut<'a, ()> = |ctx, v| {
        Box::pin(async move {
            let n = items(ctx, b"x").await;
            if v.ok().is_some() {
                ctx.check(n == 1, || format!("one acknowledged put left {n} items"));
            } else {
                ctx.check(n <= 1, || format!("one failed put left {n} items"));
            }
        })
    };
    let mut cases = Vec::new();
    for priority in [None, Some(7)] {
        let (name, call) = queue_put(priority);
        cases.push(Case {
            name,
            recipe: "queue",
            before: nothing,
            call,
            trigger: None,
            survives_lost_reply: true,
            check: put_check,
            after: no_check,
        });
    }
    let put_x: for<'a> fn(&'a Ctx, &'a mut DynamicHandle) -> Fut<'a, Value> = |ctx, _| {
        Box::pin(async move {
            ctx.peer("queue", &[("queue.put", json!([ctx.path, "x", null, false]))]).await;
            Value::Null
        })
    };
    cases.extend([
        Case {
            name: "queue.take",
            recipe: "queue",
            before: put_x,
            call: |ctx, _| ("queue.take", json!([ctx.path, WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    let left = items(ctx, b"x").await;
                    match v.ok() {
                        Some(item) => {
                            ctx.check(item.get("data").and_then(Value::as_str) == Some("x"), || {
                                format!("took {item}")
                            });
                            ctx.check(left == 0, || format!("taken, yet {left} copies are still queued"));
                        }
                        None if v.fault == Some(crate::matrix::Kind::LostReply) => ctx
                            .check(left == 1, || format!("a take failed and the item is gone ({left} left)")),
                        // A consumer that died may have taken it with it: never more than one.
                        None => ctx.check(left <= 1, || format!("{left} copies after one put")),
                    }
                })
            },
            after: |ctx, v| {
                Box::pin(async move {
                    // What is still queued goes to the next taker, once.
                    let left = items(ctx, b"x").await;
                    if left == 1 {
                        let next = ctx.peer("queue", &[("queue.take", json!([ctx.path, WAIT_MS]))]).await;
                        ctx.check(ok(&next[0]).is_some(), || {
                            format!("the item left could not be taken: {}", next[0])
                        });
                    }
                    let _ = v;
                })
            },
        },
        Case {
            name: "queue.claim",
            recipe: "queue",
            before: put_x,
            call: |ctx, _| ("queue.claim", json!([ctx.path, WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(item) = v.ok() {
                        ctx.check(item.get("data").and_then(Value::as_str) == Some("x"), || {
                            format!("claimed {item}")
                        });
                        let other = ctx.peer("queue", &[("queue.claim", json!([ctx.path, 0]))]).await;
                        ctx.check(ok(&other[0]).is_none(), || {
                            format!("a claimed item was claimed again: {}", other[0])
                        });
                    }
                })
            },
            after: |ctx, _| {
                Box::pin(async move {
                    // Never acked: the item goes back to the queue, to one claimer.
                    let next = ctx.peer("queue", &[("queue.claim", json!([ctx.path, WAIT_MS]))]).await;
                    let item = ok(&next[0]).cloned();
                    ctx.check(item.is_some(), || format!("an unacked item was not given back: {}", next[0]));
                    let left = items(ctx, b"x").await;
                    ctx.check(left == 1, || format!("{left} copies after one put"));
                })
            },
        },
        Case {
            name: "queue.ack",
            recipe: "queue",
            before: |ctx, h| {
                Box::pin(async move {
                    ctx.peer("queue", &[("queue.put", json!([ctx.path, "x", null, false]))]).await;
                    on(h, "queue.claim", json!([ctx.path, WAIT_MS])).await
                })
            },
            call: |_, before| ("queue.ack", json!([node(before)])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    let left = items(ctx, b"x").await;
                    if v.ok().is_some() {
                        ctx.check(left == 0, || format!("acked, yet {left} copies are queued"));
                    } else {
                        ctx.check(left <= 1, || format!("{left} copies after one put"));
                    }
                })
            },
            after: |ctx, _| {
                Box::pin(async move {
                    if items(ctx, b"x").await == 1 {
                        let next = ctx.peer("queue", &[("queue.claim", json!([ctx.path, WAIT_MS]))]).await;
                        ctx.check(ok(&next[0]).is_some(), || {
                            format!("an unacked item was not given back: {}", next[0])
                        });
                    }
                })
            },
        },
        Case {
            name: "queue.len",
            recipe: "queue",
            before: put_x,
            call: |ctx, _| ("queue.len", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(n) = v.ok() {
                        ctx.check(n.as_u64() == Some(1), || format!("len says {n}, one item is queued"));
                    }
                })
            },
            after: no_check,
        },
    ]);
    cases
}

async fn member_names(ctx: &Ctx) -> Vec<String> {
    ctx.children(&ctx.path).await
}

fn group_cases() -> Vec<Case> {
    vec![
        Case {
            name: "group.join",
            recipe: "group",
            before: nothing,
            call: |ctx, _| ("group.join", json!([ctx.path, "m", "d"])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let member = format!("{}/m", ctx.path);
                        let owner = ctx.owner(&member).await;
                        ctx.check(owner == Some(ctx.session), || {
                            format!("joined, but {member} is owned by {owner:?}")
                        });
                    }
                })
            },
            after: |ctx, _| {
                Box::pin(async move {
                    let again = ctx.peer("group", &[("group.join", json!([ctx.path, "m", "d2"]))]).await;
                    ctx.check(ok(&again[0]).is_some(), || {
                        format!("the name stayed taken after the member ended: {}", again[0])
                    });
                })
            },
        },
        Case {
            name: "group.leave",
            recipe: "group",
            before: |ctx, h| Box::pin(on(h, "group.join", json!([ctx.path, "m", "d"]))),
            call: |_, _| ("group.leave", json!([])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let names = member_names(ctx).await;
                        ctx.check(names.is_empty(), || format!("left, but members remain: {names:?}"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "group.members",
            recipe: "group",
            before: |ctx, _| {
                Box::pin(async move {
                    ctx.hold("group", &[("group.join", json!([ctx.path, "p", "d"]))]).await;
                    Value::Null
                })
            },
            call: |ctx, _| ("group.members", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(m) = v.ok() {
                        let names: Vec<&str> = m["members"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|x| x["name"].as_str())
                            .collect();
                        ctx.check(names == ["p"], || format!("members {names:?}, p is the only one"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "group.watch",
            recipe: "group",
            before: |ctx, _| {
                Box::pin(async move {
                    let got = ctx
                        .hold(
                            "group",
                            &[
                                ("group.join", json!([ctx.path, "p", "d"])),
                                ("group.members", json!([ctx.path])),
                            ],
                        )
                        .await;
                    ok(&got[1]).map(|m| m["version"].clone()).unwrap_or_default()
                })
            },
            call: |ctx, version| ("group.watch", json!([ctx.path, version, WAIT_MS])),
            trigger: Some((watches_path, |ctx| {
                Box::pin(async move {
                    ctx.hold("group", &[("group.join", json!([ctx.path, "q", "d"]))]).await;
                })
            })),
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(m) = v.ok() {
                        let names: Vec<&str> = m["members"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|x| x["name"].as_str())
                            .collect();
                        ctx.check(names.contains(&"q"), || {
                            format!("the watcher saw {names:?}, not q's arrival")
                        });
                    }
                })
            },
            after: no_check,
        },
    ]
}

fn config_cases() -> Vec<Case> {
    let set_v: for<'a> fn(&'a Ctx, &'a mut DynamicHandle) -> Fut<'a, Value> = |ctx, _| {
        Box::pin(async move {
            ctx.peer("config", &[("config.set", json!([ctx.path, "v", null]))]).await;
            Value::Null
        })
    };
    let add_5: for<'a> fn(&'a Ctx, &'a mut DynamicHandle) -> Fut<'a, Value> = |ctx, _| {
        Box::pin(async move {
            ctx.peer("config", &[("counter.add", json!([ctx.path, 5]))]).await;
            Value::Null
        })
    };
    vec![
        Case {
            name: "config.get",
            recipe: "config",
            before: set_v,
            call: |ctx, _| ("config.get", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(e) = v.ok() {
                        ctx.check(e["data"] == "v", || format!("get answered {e}"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "config.set",
            recipe: "config",
            before: nothing,
            call: |ctx, _| ("config.set", json!([ctx.path, "v", null])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let data = ctx.data(&ctx.path).await;
                        ctx.check(data.as_deref() == Some(b"v".as_slice()), || {
                            format!("set, but the value is {data:?}")
                        });
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "config.set at a version",
            recipe: "config",
            before: set_v,
            call: |ctx, _| ("config.set", json!([ctx.path, "w", 0])),
            trigger: None,
            survives_lost_reply: false,
            check: |ctx, v| {
                Box::pin(async move {
                    let stat = ctx.checker.get_data(&ctx.path).await.ok();
                    let (data, version) = stat.map(|(d, s)| (d, s.version)).unwrap_or_default();
                    ctx.check(version <= 1, || format!("a compare-and-set applied {version} times"));
                    if v.ok().is_some() {
                        ctx.check(data == b"w", || format!("set w, but the value is {data:?}"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "config.watch",
            recipe: "config",
            before: set_v,
            call: |ctx, _| ("config.watch", json!([ctx.path, 0, WAIT_MS])),
            trigger: Some((watches_path, |ctx| {
                Box::pin(async move {
                    ctx.peer("config", &[("config.set", json!([ctx.path, "w", null]))]).await;
                })
            })),
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(e) = v.ok() {
                        ctx.check(e["data"] == "w", || format!("the watcher saw {e}, not the change to w"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "counter.value",
            recipe: "config",
            before: add_5,
            call: |ctx, _| ("counter.value", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(n) = v.ok() {
                        ctx.check(n.as_i64() == Some(5), || format!("value {n}, 5 was added"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "counter.add",
            recipe: "config",
            before: add_5,
            call: |ctx, _| ("counter.add", json!([ctx.path, 3])),
            trigger: None,
            survives_lost_reply: false,
            check: |ctx, v| {
                Box::pin(async move {
                    let now = ctx.data(&ctx.path).await.map(|d| String::from_utf8_lossy(&d).into_owned());
                    ctx.check(matches!(now.as_deref(), Some("5") | Some("8")), || {
                        format!("5 + 3 at most once gave {now:?}")
                    });
                    if let Some(n) = v.ok() {
                        ctx.check(n.as_i64() == Some(8) && now.as_deref() == Some("8"), || {
                            format!("add answered {n}; the counter holds {now:?}")
                        });
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "counter.value-in curator-shared",
            recipe: "config",
            before: add_5_shared,
            call: |ctx, _| ("counter.value-in", json!([ctx.path, "curator-shared"])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(n) = v.ok() {
                        ctx.check(n.as_i64() == Some(5), || format!("value {n}, 5 was added"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "counter.add-in curator-shared",
            recipe: "config",
            before: add_5_shared,
            call: |ctx, _| ("counter.add-in", json!([ctx.path, 3, "curator-shared"])),
            trigger: None,
            survives_lost_reply: false,
            check: |ctx, v| {
                Box::pin(added_3_to_5_at_most_once(ctx, v, |n| (n as i32).to_be_bytes().to_vec()))
            },
            after: no_check,
        },
        Case {
            name: "counter.value-in curator-atomic",
            recipe: "config",
            before: add_5_atomic,
            call: |ctx, _| ("counter.value-in", json!([ctx.path, "curator-atomic"])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(n) = v.ok() {
                        ctx.check(n.as_i64() == Some(5), || format!("value {n}, 5 was added"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "counter.add-in curator-atomic",
            recipe: "config",
            before: add_5_atomic,
            call: |ctx, _| ("counter.add-in", json!([ctx.path, 3, "curator-atomic"])),
            trigger: None,
            survives_lost_reply: false,
            check: |ctx, v| Box::pin(added_3_to_5_at_most_once(ctx, v, |n| n.to_be_bytes().to_vec())),
            after: no_check,
        },
    ]
}

/// Another participant adds 5 to the counter at the case's path, stored in `format`.
async fn add_5_in(ctx: &Ctx, format: &str) -> Value {
    ctx.peer("config", &[("counter.add-in", json!([ctx.path, 5, format]))]).await;
    Value::Null
}

fn add_5_shared<'a>(ctx: &'a Ctx, _: &'a mut DynamicHandle) -> Fut<'a, Value> {
    Box::pin(add_5_in(ctx, "curator-shared"))
}

fn add_5_atomic<'a>(ctx: &'a Ctx, _: &'a mut DynamicHandle) -> Fut<'a, Value> {
    Box::pin(add_5_in(ctx, "curator-atomic"))
}

/// An add of 3 to a counter at 5 applied at most once, and (if it answered) exactly once:
/// `stored` is how the counter's format writes a value.
async fn added_3_to_5_at_most_once(ctx: &Ctx, v: &Verdict, stored: fn(i64) -> Vec<u8>) {
    let now = ctx.data(&ctx.path).await;
    ctx.check(now == Some(stored(5)) || now == Some(stored(8)), || {
        format!("5 + 3 at most once gave {now:?}")
    });
    if let Some(n) = v.ok() {
        ctx.check(n.as_i64() == Some(8) && now == Some(stored(8)), || {
            format!("add answered {n}; the counter holds {now:?}")
        });
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

/// The barrier family's cases for `recipe` (the Rust one or the C one); the other participants
/// are the Rust recipe's, so the C one is also faulted beside it on one path.
fn barrier_cases(recipe: &'static str) -> Vec<Case> {
    let set_up: for<'a> fn(&'a Ctx, &'a mut DynamicHandle) -> Fut<'a, Value> = |ctx, _| {
        Box::pin(async move {
            ctx.peer("barrier", &[("barrier.set", json!([ctx.path]))]).await;
            Value::Null
        })
    };
    vec![
        Case {
            name: "barrier.set",
            recipe,
            before: nothing,
            call: |ctx, _| ("barrier.set", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        ctx.check(ctx.owner(&ctx.path).await.is_some(), || {
                            "set, but the barrier is down".into()
                        });
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "barrier.remove",
            recipe,
            before: set_up,
            call: |ctx, _| ("barrier.remove", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        ctx.check(ctx.owner(&ctx.path).await.is_none(), || {
                            "removed, but the barrier is up".into()
                        });
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "barrier.wait",
            recipe,
            before: set_up,
            call: |ctx, _| ("barrier.wait", json!([ctx.path, WAIT_MS])),
            trigger: Some((watches_path, |ctx| {
                Box::pin(async move {
                    ctx.peer("barrier", &[("barrier.remove", json!([ctx.path]))]).await;
                })
            })),
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        ctx.check(ctx.owner(&ctx.path).await.is_none(), || {
                            "passed while the barrier was up".into()
                        });
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "double-barrier.enter",
            recipe,
            // The other participant comes once the faulted one waits (it has counted, then armed
            // its watch on the barrier node), so it is the other that opens the round: the
            // faulted participant's requests are the same in every run.
            before: nothing,
            call: |ctx, _| ("double-barrier.enter", json!([ctx.path, 2, WAIT_MS])),
            trigger: Some((watches_path, |ctx| {
                Box::pin(async move {
                    ctx.spawn(
                        "barrier",
                        vec![
                            ("double-barrier.enter", json!([ctx.path, 2, PEER_MS])),
                            ("double-barrier.leave", json!([PEER_MS])),
                        ],
                    );
                })
            })),
            survives_lost_reply: true,
            check: no_check,
            after: |ctx, v| {
                Box::pin(async move {
                    let peer = ctx.joined(Duration::from_secs(20)).await;
                    let entered = peer.first().and_then(|r| r.first()).cloned();
                    if v.ok().is_some() {
                        ctx.check(
                            entered.as_ref().is_some_and(|r| r.as_ref().is_ok_and(|x| ok(x).is_some())),
                            || format!("the faulted participant passed, the other did not: {entered:?}"),
                        );
                    }
                })
            },
        },
        Case {
            name: "double-barrier.leave",
            recipe,
            before: |ctx, h| {
                Box::pin(async move {
                    let mut other = ctx.peer.dynamic("barrier").await.expect("a peer handle");
                    let enter = json!([ctx.path, 2, WAIT_MS]);
                    let theirs = other.call("double-barrier.enter", &enter);
                    let mine = async {
                        child_appears(ctx, &ctx.path, "proc").await;
                        on(h, "double-barrier.enter", json!([ctx.path, 2, WAIT_MS])).await
                    };
                    let (theirs, mine) = tokio::join!(theirs, mine);
                    ctx.check(
                        theirs.as_ref().is_ok_and(|t| ok(t).is_some()) && mine.get("host-error").is_none(),
                        || format!("entering before the leave failed: {theirs:?} / {mine}"),
                    );
                    ctx.keep(other).await;
                    Value::Null
                })
            },
            call: |_, _| ("double-barrier.leave", json!([WAIT_MS])),
            trigger: Some((watches_under, |ctx| {
                Box::pin(async move {
                    if let Some(other) = ctx.take_kept().await {
                        ctx.spawn_on(other, vec![("double-barrier.leave", json!([WAIT_MS]))]);
                    }
                })
            })),
            survives_lost_reply: true,
            check: no_check,
            after: |ctx, v| {
                Box::pin(async move {
                    let peer = ctx.joined(Duration::from_secs(20)).await;
                    let left = peer.first().and_then(|r| r.first()).cloned();
                    if v.ok().is_some() {
                        ctx.check(
                            left.as_ref().is_some_and(|r| r.as_ref().is_ok_and(|x| ok(x).is_some())),
                            || format!("the faulted participant left, the other could not: {left:?}"),
                        );
                    }
                })
            },
        },
    ]
}

/// Everyone who heard an outcome heard the same one, and it is the decision on record.
async fn one_outcome(ctx: &Ctx, v: &Verdict) {
    let others = ctx.joined(Duration::from_secs(20)).await;
    let decision =
        ctx.data(&format!("{}/decision", ctx.path)).await.map(|d| String::from_utf8_lossy(&d).into_owned());
    let mut heard: Vec<String> = others
        .iter()
        .flatten()
        .filter_map(|r| r.as_ref().ok().and_then(|x| ok(x)).and_then(Value::as_str).map(str::to_string))
        .collect();
    if let Some(mine) = v.ok().and_then(Value::as_str) {
        heard.push(mine.to_string());
    }
    for outcome in &heard {
        ctx.check(decision.as_deref() == Some(outcome.as_str()), || {
            format!("a participant heard {outcome}; the decision on record is {decision:?}")
        });
    }
    // A site told `no-node` heard a definite answer when the transaction never came to be.
    let never_began = ctx.checker.check_stat(&format!("{}/meta", ctx.path)).await.ok().flatten().is_none();
    let answered = others
        .iter()
        .flatten()
        .filter(|r| {
            r.as_ref().is_ok_and(|x| {
                ok(x).is_some() || (never_began && x.get("err").is_some_and(|e| e == "no-node"))
            })
        })
        .count();
    ctx.check(answered == others.iter().map(Vec::len).sum::<usize>(), || {
        format!("a participant got no outcome: {others:?}")
    });
}

fn transaction_cases() -> Vec<Case> {
    let coordinator: for<'a> fn(&'a Ctx, &'a mut DynamicHandle) -> Fut<'a, Value> = |ctx, _| {
        Box::pin(async move {
            ctx.spawn(
                "transaction",
                vec![(
                    "two-phase-commit.coordinate",
                    json!([ctx.path, ["a"], "pay", "coordinated", WAIT_MS]),
                )],
            );
            child_appears(ctx, &ctx.path, "meta").await;
            Value::Null
        })
    };
    vec![
        Case {
            name: "two-phase-commit.coordinate",
            recipe: "transaction",
            before: nothing,
            call: |ctx, _| {
                ("two-phase-commit.coordinate", json!([ctx.path, ["a"], "pay", "coordinated", WAIT_MS]))
            },
            trigger: Some((watches_under, |ctx| {
                Box::pin(async move {
                    // A site with no timeout of its own: it must still learn an outcome.
                    ctx.spawn(
                        "transaction",
                        vec![("two-phase-commit.vote", json!([ctx.path, "a", "commit", null]))],
                    );
                })
            })),
            survives_lost_reply: true,
            check: no_check,
            after: |ctx, v| Box::pin(one_outcome(ctx, v)),
        },
        Case {
            name: "two-phase-commit.payload",
            recipe: "transaction",
            before: |ctx, _| {
                Box::pin(async move {
                    ctx.peer(
                        "transaction",
                        &[("two-phase-commit.coordinate", json!([ctx.path, ["a"], "pay", "coordinated", 1]))],
                    )
                    .await;
                    Value::Null
                })
            },
            call: |ctx, _| ("two-phase-commit.payload", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if let Some(p) = v.ok() {
                        ctx.check(p == "pay", || format!("payload {p}"));
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "two-phase-commit.clean",
            recipe: "transaction",
            before: |ctx, _| {
                Box::pin(async move {
                    ctx.peer(
                        "transaction",
                        &[("two-phase-commit.coordinate", json!([ctx.path, ["a"], "pay", "coordinated", 1]))],
                    )
                    .await;
                    Value::Null
                })
            },
            call: |ctx, _| ("two-phase-commit.clean", json!([ctx.path])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    let left = ctx.checker.check_stat(&ctx.path).await.ok().flatten();
                    if let Some(outcome) = v.ok() {
                        ctx.check(outcome == "aborted", || {
                            format!("clean answered {outcome}; the transaction aborted")
                        });
                        ctx.check(left.is_none(), || "cleaned, but the transaction is still there".into());
                    }
                })
            },
            after: no_check,
        },
        Case {
            name: "two-phase-commit.vote",
            recipe: "transaction",
            before: coordinator,
            call: |ctx, _| ("two-phase-commit.vote", json!([ctx.path, "a", "commit", WAIT_MS])),
            trigger: None,
            survives_lost_reply: true,
            check: no_check,
            after: |ctx, v| Box::pin(one_outcome(ctx, v)),
        },
    ]
}

/// Registers `d` at the run's path on `h`.
async fn registered(ctx: &Ctx, h: &mut DynamicHandle) -> Value {
    on(h, "registration.register", json!([ctx.path, "d", null])).await
}

/// Whether the run's path holds `d` in a node of the faulted host's session.
async fn registration_intact(ctx: &Ctx, what: &str) {
    let owner = ctx.owner(&ctx.path).await;
    let data = ctx.data(&ctx.path).await;
    ctx.check(owner == Some(ctx.session) && data.as_deref() == Some(b"d".as_slice()), || {
        format!("{what}, but {} is owned by {owner:?} holding {data:?}", ctx.path)
    });
}

/// What someone does to a registration that `tend` must put right.
trait Upset {
    const NAME: &'static str;
    fn upset(ctx: &Ctx) -> Fut<'_, ()>;
}

/// The registration deleted by someone.
struct Deleted;

impl Upset for Deleted {
    const NAME: &'static str = "registration.tend (deleted)";
    fn upset(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker.delete(&ctx.path, None).await.expect("deleting the registration");
        })
    }
}

/// The registration's data changed by someone.
struct Tampered;

impl Upset for Tampered {
    const NAME: &'static str = "registration.tend (changed)";
    fn upset(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker.set_data(&ctx.path, b"x", None).await.expect("changing the registration");
        })
    }
}

/// `tend` after `U`: the registration is put right.
fn registration_tend<U: Upset>() -> Case {
    Case {
        name: U::NAME,
        recipe: "registration",
        before: |ctx, h| {
            Box::pin(async move {
                registered(ctx, h).await;
                U::upset(ctx).await;
                Value::Null
            })
        },
        call: |_, _| ("registration.tend", json!([WAIT_MS])),
        trigger: None,
        survives_lost_reply: true,
        check: |ctx, v| {
            Box::pin(async move {
                if v.ok().is_some() {
                    registration_intact(ctx, "tended").await;
                }
            })
        },
        after: no_check,
    }
}

fn registration_cases() -> Vec<Case> {
    vec![
        Case {
            name: "registration.register",
            recipe: "registration",
            before: nothing,
            call: |ctx, _| ("registration.register", json!([ctx.path, "d", null])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        registration_intact(ctx, "registered").await;
                    }
                })
            },
            after: |ctx, _| {
                Box::pin(async move {
                    // The faulted handle has ended: its registration with it, nothing orphaned.
                    let again = ctx
                        .peer("registration", &[("registration.register", json!([ctx.path, "p", null]))])
                        .await;
                    ctx.check(ok(&again[0]).is_some(), || {
                        format!("the path stayed taken after the registrant ended: {}", again[0])
                    });
                })
            },
        },
        registration_tend::<Deleted>(),
        registration_tend::<Tampered>(),
        Case {
            name: "registration.unregister",
            recipe: "registration",
            before: |ctx, h| Box::pin(registered(ctx, h)),
            call: |_, _| ("registration.unregister", json!([])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        let left = ctx.data(&ctx.path).await;
                        ctx.check(left.is_none(), || {
                            format!("unregistered, but {} holds {left:?}", ctx.path)
                        });
                    }
                })
            },
            after: no_check,
        },
    ]
}

/// Makes the run's tree: `r` ("r"), `r/a` ("1"), `r/a/c` ("3"), `r/b` ("2").
async fn cache_tree(ctx: &Ctx) {
    let mode = persistent();
    match ctx.checker.create(&ctx.root, b"", &mode).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(e) => panic!("making the run's directory: {e}"),
    }
    for (path, data) in [("", "r"), ("/a", "1"), ("/a/c", "3"), ("/b", "2")] {
        ctx.checker
            .create(&format!("{}{path}", ctx.path), data.as_bytes(), &mode)
            .await
            .expect("making the tree");
    }
}

/// The tree under the run's path as ZooKeeper holds it: path → data.
async fn real_tree(ctx: &Ctx) -> BTreeMap<String, String> {
    let mut tree = BTreeMap::new();
    let mut todo = vec![ctx.path.clone()];
    while let Some(path) = todo.pop() {
        let Ok((data, _)) = ctx.checker.get_data(&path).await else { continue };
        tree.insert(path.clone(), String::from_utf8_lossy(&data).into_owned());
        todo.extend(ctx.children(&path).await.into_iter().map(|c| format!("{path}/{c}")));
    }
    tree
}

/// A cached node's path and data, from its JSON.
fn cached(node: &Value) -> Option<(String, String)> {
    Some((node.get("path")?.as_str()?.to_string(), node.get("data")?.as_str()?.to_string()))
}

/// Calls `cache.next` on the faulted handle until it reports nothing for a while: the reports.
async fn drained(h: &mut DynamicHandle) -> Vec<Value> {
    let mut reports = Vec::new();
    loop {
        let next =
            match tokio::time::timeout(Duration::from_secs(20), h.call("cache.next", &json!([300]))).await {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => json!({ "host-error": e.to_string() }),
                Err(_) => json!({ "host-error": "timed out" }),
            };
        match next.get("ok") {
            Some(report) => reports.push(report.clone()),
            None if next.get("err") == Some(&json!("timeout")) => return reports,
            None => {
                reports.push(next);
                return reports;
            }
        }
    }
}

/// The faulted handle's cache, once it has reported everything, equals the tree ZooKeeper
/// holds; and it reports a change made now, and a creation.
/// After an expiry it says `session-expired` instead (start again in a new session); after a
/// crash the handle is gone.
async fn cache_keeps_up(ctx: &Ctx, v: &Verdict, what: &str) {
    let mut faulted = ctx.faulted.lock().await;
    let h = faulted.as_mut().expect("the faulted handle");
    let reports = drained(h).await;
    match v.fault {
        Some(Kind::Crash) => return,
        Some(Kind::Expiry) => {
            ctx.check(reports.last() == Some(&json!({"err": "session-expired"})), || {
                format!("{what}: after the session expired the cache reported {reports:?}")
            });
            return;
        }
        _ => {}
    }
    let nodes = on(h, "cache.nodes", json!([])).await;
    let cache: BTreeMap<String, String> =
        nodes.as_array().map(|all| all.iter().filter_map(cached).collect()).unwrap_or_default();
    let real = real_tree(ctx).await;
    ctx.check(cache == real, || {
        format!("{what}: the cache holds {cache:?}, ZooKeeper {real:?} (reports {reports:?})")
    });
    ctx.checker.set_data(&format!("{}/b", ctx.path), b"changed", None).await.expect("changing b");
    ctx.checker.create(&format!("{}/d", ctx.path), b"new", &persistent()).await.expect("creating d");
    let later = drained(h).await;
    let seen = |kind: &str, path: &str, data: &str| {
        later
            .iter()
            .any(|r| r.get(kind).and_then(cached) == Some((format!("{}{path}", ctx.path), data.to_string())))
    };
    ctx.check(seen("changed", "/b", "changed") && seen("created", "/d", "new"), || {
        format!("{what}: a change and a creation made afterwards were reported as {later:?}")
    });
}

/// Starts a recursive cache of the run's tree on `h` and reads its first reports.
async fn cache_started(ctx: &Ctx, h: &mut DynamicHandle) -> Value {
    cache_tree(ctx).await;
    let started = on(h, "cache.start", json!([ctx.path, true])).await;
    drained(h).await;
    started
}

fn cache_cases() -> Vec<Case> {
    vec![
        Case {
            name: "cache.start",
            recipe: "cache",
            before: |ctx, _| {
                Box::pin(async move {
                    cache_tree(ctx).await;
                    Value::Null
                })
            },
            call: |ctx, _| ("cache.start", json!([ctx.path, true])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        cache_keeps_up(ctx, v, "started").await;
                    }
                })
            },
            after: no_check,
        },
        cache_next::<Changed>(),
        cache_next::<Remade>(),
        cache_next::<Created>(),
    ]
}

/// A change the run makes to a started cache's tree, and what the cache's next report must be.
trait CacheStep {
    const NAME: &'static str;
    /// What the report must say (`changed`, `deleted`, `created`), of which node (under the
    /// run's path) with which data.
    const REPORT: (&'static str, &'static str, &'static str);
    fn make(ctx: &Ctx) -> Fut<'_, ()>;
}

/// The run's path's node `a` set to `x`.
struct Changed;

impl CacheStep for Changed {
    const NAME: &'static str = "cache.next (a change)";
    const REPORT: (&'static str, &'static str, &'static str) = ("changed", "/a", "x");
    fn make(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker.set_data(&format!("{}/a", ctx.path), b"x", None).await.expect("changing a");
        })
    }
}

/// `b` deleted and made again at once: the cache must tell the new node from the old one.
struct Remade;

impl CacheStep for Remade {
    const NAME: &'static str = "cache.next (a deletion, made again)";
    const REPORT: (&'static str, &'static str, &'static str) = ("deleted", "/b", "2");
    fn make(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker.delete(&format!("{}/b", ctx.path), None).await.expect("deleting b");
            ctx.checker
                .create(&format!("{}/b", ctx.path), b"again", &persistent())
                .await
                .expect("making b again");
        })
    }
}

/// `a/e` created.
struct Created;

impl CacheStep for Created {
    const NAME: &'static str = "cache.next (a creation)";
    const REPORT: (&'static str, &'static str, &'static str) = ("created", "/a/e", "5");
    fn make(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker
                .create(&format!("{}/a/e", ctx.path), b"5", &persistent())
                .await
                .expect("creating a/e");
        })
    }
}

/// `cache.next` right after `S`'s change to a started cache's tree: its report, then the cache
/// keeping up ([`cache_keeps_up`]).
fn cache_next<S: CacheStep>() -> Case {
    Case {
        name: S::NAME,
        recipe: "cache",
        before: |ctx, h| {
            Box::pin(async move {
                let started = cache_started(ctx, h).await;
                S::make(ctx).await;
                started
            })
        },
        call: |_, _| ("cache.next", json!([WAIT_MS])),
        trigger: None,
        survives_lost_reply: true,
        check: |ctx, v| {
            Box::pin(async move {
                let (kind, node, data) = S::REPORT;
                if let Some(report) = v.ok() {
                    let want = Some((format!("{}{node}", ctx.path), data.to_string()));
                    ctx.check(report.get(kind).and_then(cached) == want, || {
                        format!("{}: reported {report}, not {kind} {node} {data}", S::NAME)
                    });
                }
                cache_keeps_up(ctx, v, S::NAME).await;
            })
        },
        after: no_check,
    }
}

/// Persistent, open to anyone: the run's own nodes.
fn persistent() -> zookeeper_client::CreateOptions<'static> {
    zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all())
}

/// Every case, for every recipe and every language the project ships.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(lock_cases::<Curator>());
    cases.extend(rwlock_cases::<Curator>());
    for recipe in ["semaphore", "semaphore-py"] {
        cases.extend(semaphore_cases::<Curator>(recipe));
    }
    // The kazoo-format builds, each among participants of its own format.
    cases.extend(lock_cases::<Kazoo>());
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
