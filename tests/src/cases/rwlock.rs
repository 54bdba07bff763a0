//! The `rwlock` recipe's cases: `rwlock.acquire` of the write lock and of the read lock,
//! `rwlock.try-acquire` of the write lock, and `rwlock.release`. [`super::all`] runs them once for
//! each wire format ([`Format`]: the standard `rwlock`, then `rwlock-kazoo`). A lock the call says
//! is held is the faulted session's and shuts the other side out (a reader after a write, a
//! writer after a read); once the faulted handle is closed, the next writer gets the lock, with a
//! higher token.

use serde_json::json;

use super::{holds_exclusively, next_holder_gets_it, node, nothing, on, Format};
use crate::matrix::{Case, WAIT_MS};

pub(super) fn rwlock_cases<F: Format>() -> Vec<Case> {
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
