//! The `group` recipe's cases: `group.join`, `group.leave`, `group.members` and `group.watch`. A
//! member that joined is the faulted session's node, and its name is free again once the faulted
//! handle is closed; a member that left is gone; `members` reports the group as it is, and `watch`
//! the member that joined after it.

use serde_json::{json, Value};

use super::{no_check, nothing, on, watches_path};
use crate::matrix::{ok, Case, Ctx, WAIT_MS};

async fn member_names(ctx: &Ctx) -> Vec<String> {
    ctx.children(&ctx.path).await
}

pub(super) fn group_cases() -> Vec<Case> {
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
