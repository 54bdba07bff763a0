//! The `barrier` recipe's cases: `barrier.set`, `barrier.remove` and `barrier.wait`, and
//! `double-barrier.enter` and `double-barrier.leave` with two participants. [`super::all`] runs
//! them for `barrier` and `barrier-c`. A barrier set is up and one removed is down; nobody passes
//! a barrier that is up; if the faulted participant got through a double barrier, the other did
//! too.

use std::time::Duration;

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use super::{child_appears, no_check, nothing, on, watches_path, watches_under, PEER_MS};
use crate::matrix::{ok, Case, Ctx, Fut, WAIT_MS};

/// The barrier family's cases for `recipe` (the Rust one or the C one); the other participants
/// are the Rust recipe's, so the C one is also faulted beside it on one path.
pub(super) fn barrier_cases(recipe: &'static str) -> Vec<Case> {
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
