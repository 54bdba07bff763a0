//! The `semaphore` recipe's cases: `semaphore.acquire`, `semaphore.try-acquire` and
//! `semaphore.release` on a semaphore of two leases. [`super::all`] runs them for `semaphore` and
//! `semaphore-py` in Curator's format, and for `semaphore-kazoo` in kazoo's ([`Format`]). A lease
//! the call returned is the faulted session's and the only one taken; once the faulted handle is
//! closed, fresh contenders can take exactly the two leases: none leaked, none too many.

use serde_json::{json, Value};

use super::{held, nothing, on, Format};
use crate::matrix::{ok, Case, Ctx, Verdict, WAIT_MS};

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

pub(super) fn semaphore_cases<F: Format>(recipe: &'static str) -> Vec<Case> {
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
