//! The `queue` recipe's cases: `queue.put` (plain and with a priority), `queue.take`,
//! `queue.claim`, `queue.ack` and `queue.len`. A put that answered leaves exactly one item, one
//! that failed at most one; a take or an ack that answered leaves none, and a take whose reply was
//! lost leaves the item queued; a claimed item is nobody else's, and goes back to one claimer if
//! it is never acked.

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use super::{no_check, node, nothing, on};
use crate::matrix::{ok, Case, Ctx, Fut, Verdict, WAIT_MS};

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

fn queue_put(priority: Option<u8>) -> (&'static str, fn(&Ctx, &Value) -> (&'static str, Value)) {
    match priority {
        None => ("queue.put", |ctx, _| ("queue.put", json!([ctx.path, "x", null, false]))),
        Some(_) => ("queue.put priority", |ctx, _| ("queue.put", json!([ctx.path, "x", 7, false]))),
    }
}

pub(super) fn queue_cases() -> Vec<Case> {
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
