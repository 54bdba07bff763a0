//! A test-only custom recipe that misbehaves on command while it owns an ephemeral node, for
//! the host's sandbox tests (tests/tests/sandbox.rs). Every command first creates the parents of
//! `PATH` (containers, as the helper crate does) and an ephemeral sequential node `PATH/lock-…`
//! (protected, named as the lock recipe names its nodes, so a node left behind would block a
//! lock on `PATH`); then:
//!
//! - `hold-then-trap PATH`: traps (`unreachable`);
//! - `hold-then-spin PATH`: loops forever without calling the host (the CPU limit must stop it);
//! - `hold-then-grow PATH`: allocates memory without bound (the memory limit must stop it);
//! - `hold PATH`: returns the node's path; the handle owns the node until it ends.
//!
//! And the hostile tenant's attacks (tests/tests/tenants.rs), which return what they got:
//!
//! - `flood PATH N`: creates N persistent nodes `PATH/n-<i>`, stopping at the first error;
//! - `watch-flood PATH N`: arms N watches on PATH and keeps them (until the handle ends);
//! - `write PATH BYTES`: writes BYTES bytes to PATH (creating it);
//! - `list PATH`: lists PATH's children (how many);
//! - `probe PATH`: `exists` and `get-data` on PATH;
//! - `spam PATH N`: N `exists` calls on PATH, stopping at the first error;
//! - `recurse`: recurses without bound (the stack limit must stop it);
//! - `hoard MIB`: keeps MIB more MiB each call, across calls (the memory limit must stop it).
//!
//! And the host's `wazoo:zk@0.1.1` calls one at a time, for tests/tests/sdk.rs (errors as
//! `describe` writes them):
//!
//! - `create-protected DIR NAME MODE`: `znode.create-protected` with data `sdk` (MODE:
//!   `persistent`, `persistent-sequential`, `ephemeral`, `ephemeral-sequential`); returns
//!   `PATH CZXID EPHEMERAL-OWNER`;
//! - `wait-for-change PATH MS`: `watch.wait-for-change` (MS `none`: no limit); returns `changed`;
//! - `changed PATH MS`: `watch.exists-watch` on PATH, then `watcher.changed`; returns the event;
//! - `owns PATH [DATA]`: `session.owns`; returns `true` or `false`.
//!
//! And the calls `wazoo:zk@0.1.4` added (tests/tests/sdk.rs):
//!
//! - `wait-any A B`: `watch.exists-watch` on A and on B, then `watch.wait-any` on both: within
//!   50 ms (nothing fired: `timeout`), after setting B's data (B fires), at once again (B has
//!   fired), and on A alone after deleting A; then on no watcher at all. A line per wait:
//!   `INDEX KIND`, or the error;
//! - `enter DIR`: `contention.enter` of `DIR/_c_<uuid>-lock-<seq>` under the exclusive lock's
//!   rule, the contender kept by the handle; returns `NODE STANDING` (`held`, or `waiting PATH`);
//! - `contender-standing`, `contender-wait MS`, `contender-withdraw`, `contender-drop`: the kept
//!   contender's `standing` (as `enter` writes it), `wait` (`held`), `withdraw` (`withdrawn`),
//!   and dropping it (`dropped`).
//!
//! And for the host's log of a recipe's output (tests/tests/sandbox.rs):
//!
//! - `print N`: writes `to stderr` to stderr, then `line 1` to `line N` to stdout; returns
//!   `printed N`.
//!
//! Not a standard recipe: it lives outside `recipes/`, so `make recipes` never installs it.

// This crate sits a level deeper than `recipes/NAME`.
wazoo_guest::recipe_world!("../../../wit", "wazoo:recipes/custom@0.1.2");

use std::hint::black_box;

use wazoo_guest::{self as zk, CreateMode};

const USAGE: &str = "usage: misbehave (hold-then-trap | hold-then-spin | hold-then-grow | hold) PATH";

struct Misbehave;

impl Guest for Misbehave {
    fn run(args: Vec<String>) -> Result<String, String> {
        match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["flood", path, n] => return flood(path, n.parse().map_err(|_| USAGE)?),
            ["watch-flood", path, n] => return watch_flood(path, n.parse().map_err(|_| USAGE)?),
            ["write", path, bytes] => return write(path, bytes.parse().map_err(|_| USAGE)?),
            ["list", path] => {
                return zk::get_children(path).map(|(c, _)| c.len().to_string()).map_err(describe)
            }
            ["probe", path] => return probe(path),
            ["spam", path, n] => return spam(path, n.parse().map_err(|_| USAGE)?),
            ["recurse"] => return Ok(recurse(black_box(1)).to_string()),
            ["hoard", mib] => return hoard(mib.parse().map_err(|_| USAGE)?),
            ["create-protected", dir, name, mode] => return create_protected(dir, name, mode),
            ["wait-for-change", path, ms] => {
                return zk::wit::watch::wait_for_change(path, millis(ms)?)
                    .map(|()| "changed".to_string())
                    .map_err(describe)
            }
            ["changed", path, ms] => return changed(path, millis(ms)?),
            ["pipeline", dir] => return pipeline(dir),
            ["pipeline-many", dir, n] => {
                let steps = vec![zk::Step::Exists(dir.to_string()); n.parse().map_err(|_| USAGE)?];
                return zk::pipeline(&steps).map(|r| format!("ok {}", r.len())).map_err(describe);
            }
            ["wait-any", a, b] => return wait_any(a, b),
            ["enter", dir] => return enter(dir),
            ["contender-standing"] => return with_contender(|c| c.standing().map(standing)),
            ["contender-wait", ms] => {
                let ms = millis(ms)?;
                return with_contender(|c| c.wait(ms).map(|()| "held".to_string()));
            }
            ["contender-withdraw"] => return with_contender(|c| c.withdraw().map(|()| "withdrawn".into())),
            ["contender-drop"] => {
                return CONTENDER
                    .with(|c| c.borrow_mut().take())
                    .map(|_| "dropped".to_string())
                    .ok_or_else(|| "no contender".to_string())
            }
            ["owns", path] => return zk::owns(path, None).map(|o| o.to_string()).map_err(describe),
            ["owns", path, data] => {
                return zk::owns(path, Some(data.as_bytes())).map(|o| o.to_string()).map_err(describe)
            }
            ["print", n] => {
                let n: u32 = n.parse().map_err(|_| USAGE)?;
                eprintln!("to stderr");
                for i in 1..=n {
                    println!("line {i}");
                }
                return Ok(format!("printed {n}"));
            }
            _ => {}
        }
        let [command, path] = args.as_slice() else { return Err(USAGE.into()) };
        let misbehave: fn() -> ! = match command.as_str() {
            "hold" => return hold(path),
            "hold-then-trap" => trap,
            "hold-then-spin" => spin,
            "hold-then-grow" => grow,
            _ => return Err(USAGE.into()),
        };
        hold(path)?;
        misbehave()
    }
}

/// Creates `path`'s parents and this handle's ephemeral sequential node under it.
fn hold(path: &str) -> Result<String, String> {
    let node = zk::join(path, "lock-");
    zk::check_path(path).map_err(|e| format!("{path}: {e:?}"))?;
    zk::ensure_parents(&node).map_err(|e| format!("{path}: creating parents: {e:?}"))?;
    let created = zk::protected_create(path, "lock-", &[], CreateMode::EphemeralSequential)
        .map_err(|e| format!("{path}: creating the node: {e:?}"))?;
    Ok(created.path)
}

/// A `zk-error` as text: its WIT name first (`limit-exceeded: …`).
fn describe(e: zk::ZkError) -> String {
    format!("{e:?}")
}

fn flood(path: &str, n: usize) -> Result<String, String> {
    match zk::create(path, &[], CreateMode::Persistent) {
        Ok(_) | Err(zk::ZkError::NodeExists) => {}
        Err(e) => return Err(describe(e)),
    }
    for i in 0..n {
        if let Err(e) = zk::create(&zk::join(path, &format!("n-{i}")), &[], CreateMode::Persistent) {
            return Err(format!("after {i} nodes: {}", describe(e)));
        }
    }
    Ok(format!("{n} nodes"))
}

thread_local! {
    static KEPT: std::cell::RefCell<Vec<wazoo_guest::wit::watch::Watcher>> = const { std::cell::RefCell::new(Vec::new()) };
    static HOARD: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn watch_flood(path: &str, n: usize) -> Result<String, String> {
    for i in 0..n {
        match zk::exists_watch(path) {
            Ok((_, watcher)) => KEPT.with(|k| k.borrow_mut().push(watcher)),
            Err(e) => return Err(format!("after {i} watches: {}", describe(e))),
        }
    }
    Ok(format!("{n} watches"))
}

fn write(path: &str, bytes: usize) -> Result<String, String> {
    let data = vec![b'm'; bytes];
    match zk::create(path, &data, CreateMode::Persistent) {
        Ok(_) => Ok(format!("wrote {bytes} bytes")),
        Err(zk::ZkError::NodeExists) => {
            zk::set_data(path, &data, None).map(|_| format!("wrote {bytes} bytes")).map_err(describe)
        }
        Err(e) => Err(describe(e)),
    }
}

fn spam(path: &str, n: usize) -> Result<String, String> {
    for i in 0..n {
        if let Err(e) = zk::exists(path) {
            return Err(format!("after {i} calls: {}", describe(e)));
        }
    }
    Ok(format!("{n} calls"))
}

fn probe(path: &str) -> Result<String, String> {
    let exists = zk::exists(path).map_err(describe)?;
    let data = match zk::get_data(path) {
        Ok((data, _)) => format!("data {:?}", String::from_utf8_lossy(&data)),
        Err(e) => describe(e),
    };
    Ok(format!("exists {}; {data}", exists.is_some()))
}

/// `none` (no limit) or a number of milliseconds.
fn millis(ms: &str) -> Result<Option<u64>, String> {
    match ms {
        "none" => Ok(None),
        ms => ms.parse().map(Some).map_err(|_| format!("not a number of milliseconds: {ms:?}")),
    }
}

fn create_protected(dir: &str, name: &str, mode: &str) -> Result<String, String> {
    let mode = match mode {
        "persistent" => CreateMode::Persistent,
        "persistent-sequential" => CreateMode::PersistentSequential,
        "ephemeral" => CreateMode::Ephemeral,
        "ephemeral-sequential" => CreateMode::EphemeralSequential,
        other => return Err(format!("unknown mode {other:?}")),
    };
    let created = zk::create_protected(dir, name, b"sdk", mode).map_err(describe)?;
    Ok(format!("{} {} {}", created.path, created.stat.czxid, created.stat.ephemeral_owner))
}

/// One `znode.pipeline` of every kind of step under `dir` (one refused, one failing on the
/// server), a line per result.
fn pipeline(dir: &str) -> Result<String, String> {
    use zk::{DeleteOp, ProtectedOp, SetDataOp, Step, StepResult};
    let absent = zk::join(dir, "absent");
    let steps = [
        Step::CreateProtected(ProtectedOp {
            dir: dir.to_string(),
            name: "p-".into(),
            data: b"one".to_vec(),
            mode: CreateMode::EphemeralSequential,
        }),
        Step::GetChildren(dir.to_string()),
        Step::SetData(SetDataOp { path: dir.to_string(), data: b"two".to_vec(), version: None }),
        Step::GetData(dir.to_string()),
        Step::Exists(absent.clone()),
        Step::GetData("bad//path".into()),
        Step::Delete(DeleteOp { path: absent, version: None }),
        Step::Exists(dir.to_string()),
    ];
    let results = zk::pipeline(&steps).map_err(describe)?;
    let lines: Vec<String> = results
        .into_iter()
        .map(|result| match result {
            Ok(StepResult::Created(c)) => format!("created {} {}", c.path, c.stat.czxid),
            Ok(StepResult::Children((mut children, _))) => {
                children.sort();
                format!("children {}", children.join(","))
            }
            Ok(StepResult::DataSet(stat)) => format!("data-set {}", stat.version),
            Ok(StepResult::Data((data, stat))) => {
                format!("data {} {}", String::from_utf8_lossy(&data), stat.version)
            }
            Ok(StepResult::Exists(stat)) => format!("exists {}", stat.is_some()),
            Ok(StepResult::Deleted) => "deleted".into(),
            Err(e) => format!("error {}", describe(e)),
        })
        .collect();
    Ok(lines.join("\n"))
}

thread_local! {
    static CONTENDER: std::cell::RefCell<Option<zk::Contender>> = const { std::cell::RefCell::new(None) };
}

fn standing(s: zk::Standing) -> String {
    match s {
        zk::Standing::Held => "held".into(),
        zk::Standing::Waiting(path) => format!("waiting {path}"),
    }
}

fn enter(dir: &str) -> Result<String, String> {
    let naming = zk::Naming::Protected("lock-".into());
    let contender = zk::enter(dir, &naming, b"sdk", &zk::exclusive(&["lock-"])).map_err(describe)?;
    let node = contender.node().path;
    let now = contender.standing().map(standing).map_err(describe)?;
    CONTENDER.with(|c| *c.borrow_mut() = Some(contender));
    Ok(format!("{node} {now}"))
}

fn with_contender(f: impl FnOnce(&zk::Contender) -> zk::Result<String>) -> Result<String, String> {
    CONTENDER.with(|c| match c.borrow().as_ref() {
        Some(contender) => f(contender).map_err(describe),
        None => Err("no contender".into()),
    })
}

fn wait_any(a: &str, b: &str) -> Result<String, String> {
    let (_, on_a) = zk::exists_watch(a).map_err(describe)?;
    let (_, on_b) = zk::exists_watch(b).map_err(describe)?;
    let answer = |r: zk::Result<(u32, zk::WatchEvent)>| match r {
        Ok((at, event)) => format!("{at} {:?}", event.kind),
        Err(e) => describe(e),
    };
    let any = |watchers: &[&zk::Watcher], ms| answer(zk::wit::watch::wait_any(watchers, ms));
    let mut lines = vec![any(&[&on_a, &on_b], Some(50))];
    zk::set_data(b, b"changed", None).map_err(describe)?;
    lines.push(any(&[&on_a, &on_b], Some(5000)));
    lines.push(any(&[&on_a, &on_b], Some(0)));
    zk::delete(a, None).map_err(describe)?;
    lines.push(any(&[&on_a], None));
    lines.push(any(&[], Some(0)));
    Ok(lines.join("\n"))
}

fn changed(path: &str, ms: Option<u64>) -> Result<String, String> {
    let (_, watcher) = zk::exists_watch(path).map_err(describe)?;
    watcher.changed(ms).map(|event| format!("{:?}", event.kind)).map_err(describe)
}

#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    let frame = black_box([n; 64]);
    recurse(black_box(frame[7] + 1)) + frame[3]
}

fn hoard(mib: usize) -> Result<String, String> {
    HOARD.with(|h| {
        let mut h = h.borrow_mut();
        h.push(black_box(vec![0x5a; mib << 20]));
        Ok(format!("{} MiB kept", h.iter().map(Vec::len).sum::<usize>() >> 20))
    })
}

fn trap() -> ! {
    core::arch::wasm32::unreachable()
}

fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn grow() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        // Touched, so neither the allocation nor the memory it needs can be optimised away.
        hoard.push(black_box(vec![0xa5; 1 << 20]));
        black_box(&hoard);
    }
}

export!(Misbehave);
