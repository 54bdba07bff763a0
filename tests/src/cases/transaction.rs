//! The `transaction` recipe's cases: its `two-phase-commit` interface (`coordinate`, `payload`,
//! `clean`, `vote`) with one site. Every participant hears an outcome, and every outcome heard is
//! the decision on record; `clean` of a transaction nobody finished aborts it and removes it.

use std::time::Duration;

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use super::{child_appears, no_check, nothing, watches_under};
use crate::matrix::{ok, Case, Ctx, Fut, Verdict, WAIT_MS};

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

pub(super) fn transaction_cases() -> Vec<Case> {
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
