//! The `lock` recipe's cases: `lock.acquire` (free, and behind a holder who then releases: the
//! host's contention with its hand-over), `lock.try-acquire`, `lock.release` and `lock.revoke`
//! (asking the holder to let go, and forced). [`super::all`] runs them once for each wire format
//! ([`Format`]: the standard `lock` and the same in C, `lock-c`, then `lock-kazoo`), the other
//! participants running the format's Rust build. A lock the call says is held is the faulted
//! session's, and nobody else can take it; once the faulted handle is closed, the next contender
//! gets the lock, with a higher token.

use serde_json::json;

use super::{holds_exclusively, next_holder_gets_it, no_check, node, nothing, on, Format};
use crate::matrix::{ok, Case, Ctx, WAIT_MS};
use crate::proxy::Request;

/// The faulted host armed a watch on the run's first lock node (its sequence is 0: every run has
/// a directory of its own), the holder's, so it now waits for it.
fn watches_the_holder(ctx: &Ctx, r: &Request) -> bool {
    r.watch && r.path.starts_with(&format!("{}/", ctx.path)) && r.path.ends_with("0000000000")
}

/// `recipe` is the faulted participant's plugin (`F::LOCK`, or the same format in another
/// language); the other participants run `F::LOCK`.
pub(super) fn lock_cases<F: Format>(recipe: &'static str) -> Vec<Case> {
    vec![
        Case {
            name: "lock.acquire",
            recipe,
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
            name: "lock.acquire behind a holder",
            recipe,
            before: |ctx, _| {
                Box::pin(async move {
                    ok(&ctx.hold(F::LOCK, &[("lock.acquire", json!([ctx.path, WAIT_MS]))]).await[0])
                        .cloned()
                        .unwrap_or_default()
                })
            },
            call: |ctx, _| ("lock.acquire", json!([ctx.path, WAIT_MS])),
            // The holder releases once the faulted contender watches its node: the hand-over.
            trigger: Some((watches_the_holder, |ctx| {
                Box::pin(async move {
                    if let Some(mut holder) = ctx.take_kept().await {
                        let _ = holder.call("lock.release", &json!([])).await;
                        holder.close().await;
                    }
                })
            })),
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
            recipe,
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
            recipe,
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
            recipe,
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
            recipe,
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
