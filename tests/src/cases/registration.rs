//! The `registration` recipe's cases: `registration.register`, `registration.tend` after someone
//! deleted or changed the registration, and `registration.unregister`. A registration that
//! answered is the faulted session's node with its data, and the path is free again once the
//! faulted handle is closed; a tended registration is put right; one unregistered is gone.

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use super::{no_check, nothing, on};
use crate::matrix::{ok, Case, Ctx, Fut, WAIT_MS};

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

pub(super) fn registration_cases() -> Vec<Case> {
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
