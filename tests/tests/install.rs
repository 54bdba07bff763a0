//! The binary works on its own: `cargo install` of the CLI crate into an empty root gives a
//! `wazoo` that takes a lock with no plugins directory at all (the standard recipes are carried
//! in the binary), lists them as embedded, lets a file of the plugins directory override one, and
//! ships without symbols.

use std::path::Path;
use std::process::Command;

use wazoo_tests::daemon::output;
use wazoo_tests::*;

/// The promise of README.md and docs/src/quick-start.md for the shipped binary's size.
const MAX_BYTES: u64 = 40 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_binary_takes_a_lock_with_no_plugins_directory() {
    let root = tempfile::tempdir().unwrap();
    // The workspace's own target directory, so the install reuses what the tests were built
    // from instead of building everything again.
    let status = tokio::task::spawn_blocking({
        let root = root.path().to_path_buf();
        move || {
            Command::new(env!("CARGO"))
                .current_dir(wazoo_tests::root())
                .env("CARGO_TARGET_DIR", wazoo_tests::root().join("target"))
                .args(["install", "--offline", "--locked", "--path", "host/cli", "--root"])
                .arg(&root)
                .status()
                .expect("running cargo install")
        }
    })
    .await
    .unwrap();
    assert!(status.success(), "cargo install failed");
    let wazoo = root.path().join("bin/wazoo");
    let bytes = std::fs::metadata(&wazoo).unwrap().len();
    assert!(bytes <= MAX_BYTES, "the installed binary is {bytes} bytes, over {MAX_BYTES}");

    let elsewhere = tempfile::tempdir().unwrap();
    let no_plugins = elsewhere.path().join("no-plugins");
    let cache = elsewhere.path().join("cache");
    let run = |args: &[&str]| {
        let mut command = tokio::process::Command::new(&wazoo);
        command
            .current_dir(elsewhere.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("XDG_CACHE_HOME", &cache)
            .env("WAZOO_ZOOKEEPER", zk().address())
            .env("WAZOO_PLUGINS", &no_plugins)
            .args(args)
            .kill_on_drop(true);
        command
    };

    let path = unique("installed");
    let (code, stdout, stderr) = output(&mut run(&[
        "lock",
        &path,
        "--",
        "sh",
        "-c",
        "echo token=$WAZOO_FENCING_TOKEN; sleep 0.1; true",
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let token: i64 = stdout.trim().strip_prefix("token=").and_then(|t| t.parse().ok()).unwrap_or_else(|| {
        panic!("no token printed: {stdout:?} {stderr}");
    });
    assert!(token > 0);

    let (code, stdout, stderr) = output(&mut run(&["recipes", "list", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    let listed: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for name in
        ["lock", "rwlock", "semaphore", "election", "election-selector", "lock-kazoo", "cache", "queue"]
    {
        let row = listed
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {stdout}"));
        assert_eq!(row["embedded"], true, "{row}");
        assert!(row["world"].as_str().unwrap().starts_with("wazoo:recipes/"), "{row}");
    }

    // A file of the same name in the plugins directory overrides the embedded one.
    std::fs::create_dir_all(&no_plugins).unwrap();
    std::fs::copy(plugins().join("tree.wasm"), no_plugins.join("lock.wasm")).unwrap();
    let (code, stdout, _) = output(&mut run(&["recipes", "list", "--json"])).await;
    assert_eq!(code, 0);
    let lock: serde_json::Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["name"] == "lock")
        .unwrap();
    assert_eq!(lock["embedded"], false, "{lock}");
    assert!(
        lock["world"].as_str().unwrap().contains("custom"),
        "the plugins directory's lock.wasm serves: {lock}"
    );
    let (code, _, stderr) = output(&mut run(&["lock", &path, "--", "true"])).await;
    assert_ne!(code, 0, "a custom component cannot serve as the lock: {stderr}");
    assert!(Path::new(&cache).join("wazoo/embedded").exists());
}
