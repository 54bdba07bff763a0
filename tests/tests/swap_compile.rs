//! Swaps that recompile only what changed, through the real daemon (`wazoo serve --cache none`,
//! a process of its own, its compiles in its `wazoo-compile` worker processes) on a real
//! ZooKeeper: with no compile cache at all, a component renamed in the plugins directory
//! compiles nothing (its compiled code is kept in memory by its SHA-256), a component added
//! compiles once and alone, however many recipes the daemon serves (its own embedded ones
//! included), and `Admin.ListRecipes` answers while that compile runs.
//!
//! No durations are asserted: counts (the daemon's compiles, in `Admin.Health`) and the order of
//! events (a listing answered while the compile worker process of the new component was alive).
//! The time from a rename to its listing is measured by `cargo bench -p wazoo-cli --bench swap`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::transport::Channel;
use wazoo_proto::{admin_client::AdminClient, recipes_client::RecipesClient, Empty, Recipe};
use wazoo_tests::components::{deploy, relabelled};
use wazoo_tests::daemon::Daemon;
use wazoo_tests::*;

/// The Python semaphore (18 MB) takes seconds to compile: long enough to list during it.
const BIG: &str = "semaphore-py";
const LIMIT: Duration = Duration::from_secs(180);

fn private_plugins(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wazoo-swap-compile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    for recipe in ["lock", "config"] {
        std::fs::copy(plugins().join(format!("{recipe}.wasm")), dir.join(format!("plugins/{recipe}.wasm")))
            .unwrap();
    }
    dir.join("plugins")
}

async fn compiles(admin: &mut AdminClient<Channel>) -> u64 {
    admin.health(Empty {}).await.unwrap().into_inner().compiles
}

async fn listing(admin: &mut AdminClient<Channel>) -> Vec<Recipe> {
    admin.list_recipes(Empty {}).await.unwrap().into_inner().recipes
}

/// Lists until `pred` holds of recipe `name`'s entry (or of its absence): the daemon's watcher
/// swaps on its own time, and says so only in what it lists.
async fn until_listed(
    admin: &mut AdminClient<Channel>,
    name: &str,
    what: &str,
    pred: impl Fn(Option<&Recipe>) -> bool,
) -> Vec<Recipe> {
    within(LIMIT, what, async {
        loop {
            let listed = listing(admin).await;
            if pred(listed.iter().find(|r| r.name == name)) {
                return listed;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The daemon's child processes compiling (its `wazoo-compile` workers, each handed the bytes
/// of one component on its stdin: `wazoo-compile - OUT …`), by PID, from `/proc`.
fn compile_workers(daemon: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid …`: comm may hold spaces, so read after its closing parenthesis.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid != Some(&daemon.to_string()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<String> =
            cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if args.first().is_some_and(|a| a.ends_with("wazoo-compile")) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_cache_a_swap_compiles_only_what_changed_and_listing_never_waits() {
    let plugins = private_plugins("only");
    let lock = std::fs::read(plugins.join("lock.wasm")).unwrap();
    // A recipe of its own name (no embedded recipe has it), with bytes of its own.
    deploy(&plugins.join("mine.wasm"), &relabelled(&lock, "mine"));
    let daemon = Daemon::start_with(&plugins, Path::new("none"), &[]).await;
    let channel = daemon.channel().await;
    let mut admin = AdminClient::new(channel.clone());

    // Started: every component it serves was compiled once, the embedded ones too (no cache).
    let started = compiles(&mut admin).await;
    let listed = listing(&mut admin).await;
    assert!(listed.iter().any(|r| r.embedded), "the daemon serves embedded recipes too: {listed:?}");
    // Each once at most: a component's code is compiled for it, or reused from the same bytes.
    assert!(started > 0 && started <= listed.len() as u64, "{started} compiles for {} recipes", listed.len());
    let mine = listed.iter().find(|r| r.name == "mine").expect("mine listed").clone();
    assert!(!mine.version.is_empty() && mine.refused.is_empty(), "{mine:?}");
    // Listing again compiles nothing.
    assert_eq!(listing(&mut admin).await, listed);
    assert_eq!(compiles(&mut admin).await, started, "a listing compiled");

    // Renamed: the same bytes under another name serve with no compile at all.
    std::fs::rename(plugins.join("mine.wasm"), plugins.join("yours.wasm")).unwrap();
    let after = until_listed(&mut admin, "yours", "the renamed component is listed", |r| {
        r.is_some_and(|r| !r.version.is_empty())
    })
    .await;
    let yours = after.iter().find(|r| r.name == "yours").unwrap();
    assert_eq!((&yours.version, &yours.world), (&mine.version, &mine.world));
    assert!(yours.from_cache, "its code came from memory: {yours:?}");
    assert!(!after.iter().any(|r| r.name == "mine"), "the old name is gone: {after:?}");
    assert_eq!(compiles(&mut admin).await, started, "a rename compiled");
    // And it serves: a handle of the renamed recipe takes a lock.
    let mut recipes = RecipesClient::new(channel.clone());
    let held = recipes
        .invoke(wazoo_proto::InvokeRequest {
            recipe: "yours".into(),
            function: "try-acquire".into(),
            args_json: serde_json::json!({ "path": unique("swap-compile") }).to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(held.result_json.contains("\"ok\""), "{held:?}");

    // Added: a big component with bytes of its own compiles, alone, in a worker; the listing
    // answers meanwhile, showing it not checked yet.
    let big = plugins.join("big.wasm");
    deploy(
        &big,
        &relabelled(&std::fs::read(wazoo_tests::plugins().join(format!("{BIG}.wasm"))).unwrap(), "big"),
    );
    let worker = within(LIMIT, "the new component's compile starts", async {
        loop {
            // The only component that changed: the only compile.
            if let Some(pid) = compile_workers(daemon.pid()).first() {
                return *pid;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let during = listing(&mut admin).await;
    let counted = compiles(&mut admin).await;
    // The worker still runs (a worker that ended is reaped, or a zombie with no command line):
    // the listing, and the count after it, were answered while the compile was pending.
    assert_eq!(compile_workers(daemon.pid()), [worker], "the listing answered after the compile ended");
    assert_eq!(counted, started, "a compile was counted while none ended");
    let entry = during.iter().find(|r| r.name == "big").expect("the new file is listed at once");
    assert!(entry.version.is_empty() && entry.world.is_empty() && entry.refused.is_empty(), "{entry:?}");
    for r in &listed {
        if r.name != "mine" {
            assert!(during.iter().any(|d| d == r), "{} changed in the listing: {during:?}", r.name);
        }
    }

    let done = until_listed(&mut admin, "big", "the new component is checked", |r| {
        r.is_some_and(|r| !r.version.is_empty() || !r.refused.is_empty())
    })
    .await;
    let entry = done.iter().find(|r| r.name == "big").unwrap();
    assert!(entry.refused.is_empty() && entry.world.starts_with("wazoo:recipes/semaphore"), "{entry:?}");
    assert!(!entry.from_cache, "{entry:?}");
    assert_eq!(compiles(&mut admin).await, started + 1, "only the new component compiles");
    // A listing of every recipe again, and a reload, compile nothing more.
    assert_eq!(listing(&mut admin).await, done);
    admin.reload(Empty {}).await.unwrap();
    assert_eq!(compiles(&mut admin).await, started + 1);
    let _ = std::fs::remove_dir_all(plugins.parent().unwrap());
}
