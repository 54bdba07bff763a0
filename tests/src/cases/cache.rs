//! The `cache` recipe's cases: `cache.start` of a recursive cache, and `cache.next` after a
//! change, a deletion made again at once, and a creation. A report is of the change made; the
//! cache, once it has reported everything, equals the tree ZooKeeper holds and keeps up with later
//! changes; after an expiry it says `session-expired`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use wazoo_runtime::DynamicHandle;

use super::{no_check, on};
use crate::matrix::{Case, Ctx, Fut, Kind, Verdict, WAIT_MS};

/// Makes the run's tree: `r` ("r"), `r/a` ("1"), `r/a/c` ("3"), `r/b` ("2").
async fn cache_tree(ctx: &Ctx) {
    let mode = persistent();
    match ctx.checker.create(&ctx.root, b"", &mode).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(e) => panic!("making the run's directory: {e}"),
    }
    for (path, data) in [("", "r"), ("/a", "1"), ("/a/c", "3"), ("/b", "2")] {
        ctx.checker
            .create(&format!("{}{path}", ctx.path), data.as_bytes(), &mode)
            .await
            .expect("making the tree");
    }
}

/// The tree under the run's path as ZooKeeper holds it: path → data.
async fn real_tree(ctx: &Ctx) -> BTreeMap<String, String> {
    let mut tree = BTreeMap::new();
    let mut todo = vec![ctx.path.clone()];
    while let Some(path) = todo.pop() {
        let Ok((data, _)) = ctx.checker.get_data(&path).await else { continue };
        tree.insert(path.clone(), String::from_utf8_lossy(&data).into_owned());
        todo.extend(ctx.children(&path).await.into_iter().map(|c| format!("{path}/{c}")));
    }
    tree
}

/// A cached node's path and data, from its JSON.
fn cached(node: &Value) -> Option<(String, String)> {
    Some((node.get("path")?.as_str()?.to_string(), node.get("data")?.as_str()?.to_string()))
}

/// Calls `cache.next` on the faulted handle until it reports nothing for a while: the reports.
async fn drained(h: &mut DynamicHandle) -> Vec<Value> {
    let mut reports = Vec::new();
    loop {
        let next =
            match tokio::time::timeout(Duration::from_secs(20), h.call("cache.next", &json!([300]))).await {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => json!({ "host-error": e.to_string() }),
                Err(_) => json!({ "host-error": "timed out" }),
            };
        match next.get("ok") {
            Some(report) => reports.push(report.clone()),
            None if next.get("err") == Some(&json!("timeout")) => return reports,
            None => {
                reports.push(next);
                return reports;
            }
        }
    }
}

/// The faulted handle's cache, once it has reported everything, equals the tree ZooKeeper
/// holds; and it reports a change made now, and a creation.
/// After an expiry it says `session-expired` instead (start again in a new session); after a
/// crash the handle is gone.
async fn cache_keeps_up(ctx: &Ctx, v: &Verdict, what: &str) {
    let mut faulted = ctx.faulted.lock().await;
    let h = faulted.as_mut().expect("the faulted handle");
    let reports = drained(h).await;
    match v.fault {
        Some(Kind::Crash) => return,
        Some(Kind::Expiry) => {
            ctx.check(reports.last() == Some(&json!({"err": "session-expired"})), || {
                format!("{what}: after the session expired the cache reported {reports:?}")
            });
            return;
        }
        _ => {}
    }
    let nodes = on(h, "cache.nodes", json!([])).await;
    let cache: BTreeMap<String, String> =
        nodes.as_array().map(|all| all.iter().filter_map(cached).collect()).unwrap_or_default();
    let real = real_tree(ctx).await;
    ctx.check(cache == real, || {
        format!("{what}: the cache holds {cache:?}, ZooKeeper {real:?} (reports {reports:?})")
    });
    ctx.checker.set_data(&format!("{}/b", ctx.path), b"changed", None).await.expect("changing b");
    ctx.checker.create(&format!("{}/d", ctx.path), b"new", &persistent()).await.expect("creating d");
    let later = drained(h).await;
    let seen = |kind: &str, path: &str, data: &str| {
        later
            .iter()
            .any(|r| r.get(kind).and_then(cached) == Some((format!("{}{path}", ctx.path), data.to_string())))
    };
    ctx.check(seen("changed", "/b", "changed") && seen("created", "/d", "new"), || {
        format!("{what}: a change and a creation made afterwards were reported as {later:?}")
    });
}

/// Starts a recursive cache of the run's tree on `h` and reads its first reports.
async fn cache_started(ctx: &Ctx, h: &mut DynamicHandle) -> Value {
    cache_tree(ctx).await;
    let started = on(h, "cache.start", json!([ctx.path, true])).await;
    drained(h).await;
    started
}

pub(super) fn cache_cases() -> Vec<Case> {
    vec![
        Case {
            name: "cache.start",
            recipe: "cache",
            before: |ctx, _| {
                Box::pin(async move {
                    cache_tree(ctx).await;
                    Value::Null
                })
            },
            call: |ctx, _| ("cache.start", json!([ctx.path, true])),
            trigger: None,
            survives_lost_reply: true,
            check: |ctx, v| {
                Box::pin(async move {
                    if v.ok().is_some() {
                        cache_keeps_up(ctx, v, "started").await;
                    }
                })
            },
            after: no_check,
        },
        cache_next::<Changed>(),
        cache_next::<Remade>(),
        cache_next::<Created>(),
    ]
}

/// A change the run makes to a started cache's tree, and what the cache's next report must be.
trait CacheStep {
    const NAME: &'static str;
    /// What the report must say (`changed`, `deleted`, `created`), of which node (under the
    /// run's path) with which data.
    const REPORT: (&'static str, &'static str, &'static str);
    fn make(ctx: &Ctx) -> Fut<'_, ()>;
}

/// The run's path's node `a` set to `x`.
struct Changed;

impl CacheStep for Changed {
    const NAME: &'static str = "cache.next (a change)";
    const REPORT: (&'static str, &'static str, &'static str) = ("changed", "/a", "x");
    fn make(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker.set_data(&format!("{}/a", ctx.path), b"x", None).await.expect("changing a");
        })
    }
}

/// `b` deleted and made again at once: the cache must tell the new node from the old one.
struct Remade;

impl CacheStep for Remade {
    const NAME: &'static str = "cache.next (a deletion, made again)";
    const REPORT: (&'static str, &'static str, &'static str) = ("deleted", "/b", "2");
    fn make(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker.delete(&format!("{}/b", ctx.path), None).await.expect("deleting b");
            ctx.checker
                .create(&format!("{}/b", ctx.path), b"again", &persistent())
                .await
                .expect("making b again");
        })
    }
}

/// `a/e` created.
struct Created;

impl CacheStep for Created {
    const NAME: &'static str = "cache.next (a creation)";
    const REPORT: (&'static str, &'static str, &'static str) = ("created", "/a/e", "5");
    fn make(ctx: &Ctx) -> Fut<'_, ()> {
        Box::pin(async move {
            ctx.checker
                .create(&format!("{}/a/e", ctx.path), b"5", &persistent())
                .await
                .expect("creating a/e");
        })
    }
}

/// `cache.next` right after `S`'s change to a started cache's tree: its report, then the cache
/// keeping up ([`cache_keeps_up`]).
fn cache_next<S: CacheStep>() -> Case {
    Case {
        name: S::NAME,
        recipe: "cache",
        before: |ctx, h| {
            Box::pin(async move {
                let started = cache_started(ctx, h).await;
                S::make(ctx).await;
                started
            })
        },
        call: |_, _| ("cache.next", json!([WAIT_MS])),
        trigger: None,
        survives_lost_reply: true,
        check: |ctx, v| {
            Box::pin(async move {
                let (kind, node, data) = S::REPORT;
                if let Some(report) = v.ok() {
                    let want = Some((format!("{}{node}", ctx.path), data.to_string()));
                    ctx.check(report.get(kind).and_then(cached) == want, || {
                        format!("{}: reported {report}, not {kind} {node} {data}", S::NAME)
                    });
                }
                cache_keeps_up(ctx, v, S::NAME).await;
            })
        },
        after: no_check,
    }
}

/// Persistent, open to anyone: the run's own nodes.
fn persistent() -> zookeeper_client::CreateOptions<'static> {
    zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all())
}
