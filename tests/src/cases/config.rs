//! The `config` recipe's cases: its `config` interface (`config.get`, `config.set`, `config.set`
//! at a version, `config.watch`) and its `counter` interface (`counter.value`, `counter.add`, and
//! `value-in` and `add-in` in the `curator-shared` and `curator-atomic` formats). A value set is
//! the value read, and a watch sees the change; a compare-and-set and a counter's add are applied
//! at most once, and exactly once if they answered.

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use super::{no_check, nothing, watches_path};
use crate::matrix::{Case, Ctx, Fut, Verdict, WAIT_MS};

pub(super) fn config_cases() -> Vec<Case> {
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
