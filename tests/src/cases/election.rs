//! The `election` recipe's cases: `election.campaign`, `election.acknowledge`, `election.resign`,
//! `election.leader` and `election.observe`. [`super::all`] runs them for `election` and
//! `election-js` among participants in Curator `LeaderLatch`'s format, and for `election-selector`
//! among participants in `LeaderSelector`'s ([`Electorate`]). The leader a call reports is the one
//! the other participants see; a leader that resigned or closed leads no more; the next candidate
//! is elected, with a higher token.

use serde_json::{json, Value};

use super::{held, next_holder_gets_it, no_check, node, nothing, on, watches_under};
use crate::matrix::{ok, Case, Ctx, Fut, Verdict, WAIT_MS};

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

pub(super) fn election_cases<E: Electorate>(recipe: &'static str) -> Vec<Case> {
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
pub(super) fn election_leader_check(cases: &mut [Case]) {
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
