//! `wazoo new recipe --lang rust|python|js|c`: each template builds with its language's toolchain
//! (C: clang, then `wazoo componentize` from the `wazoo` on PATH) and runs in the host against a
//! real ZooKeeper: it waits for a node created after it started, times out cleanly, and reports a
//! bad path as an error.

use std::path::PathBuf;
use std::time::Duration;

use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;

/// Scaffolds `lang` into a fresh directory, builds it, and returns the plugins directory
/// holding it as `wait-<lang>.wasm`.
async fn built(lang: &str) -> PathBuf {
    let work = std::env::temp_dir().join(format!("wazoo-scaffold-{lang}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let dir = work.join("wait-for");
    let (code, stdout, stderr) =
        output(cli().args(["new", "recipe", "wait-for", "--lang", lang, "--dir"]).arg(&dir)).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("wrote "), "{stdout}");
    // A second scaffold into the same directory is refused, leaving it alone.
    let (code, _, stderr) =
        output(cli().args(["new", "recipe", "wait-for", "--lang", lang, "--dir"]).arg(&dir)).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("is not empty"), "{stderr}");
    let mut build = match lang {
        "js" => {
            // The same pinned componentize-js the project's own JavaScript recipes use.
            std::os::unix::fs::symlink(root().join("guest/js/node_modules"), dir.join("node_modules"))
                .unwrap();
            let mut c = tokio::process::Command::new("node");
            c.arg(dir.join("build.mjs"));
            c
        }
        _ => {
            // As a user runs it: `./build.sh` in the recipe's directory, this `wazoo` on PATH.
            let bin = wazoo_bin().parent().unwrap().to_path_buf();
            let path = std::env::join_paths(
                std::iter::once(bin)
                    .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
            )
            .unwrap();
            let mut c = tokio::process::Command::new(dir.join("build.sh"));
            c.current_dir(&dir).env("PATH", path).env("CARGO_TARGET_DIR", root().join("target/scaffold"));
            c
        }
    };
    let (code, stdout, stderr) = output(&mut build).await;
    assert_eq!(code, 0, "building the {lang} template: {stdout}{stderr}");
    let plugins = work.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(dir.join("wait-for.wasm"), plugins.join(format!("wait-{lang}.wasm"))).unwrap();
    plugins
}

async fn template_waits_for_a_node(lang: &str) {
    let plugins = built(lang).await;
    let checker = client(&zk().address()).await;
    let run = |args: &[&str]| {
        let mut c = cli();
        c.env("WAZOO_PLUGINS", &plugins).env("WAZOO_CACHE", "none").arg("run").arg(format!("wait-{lang}"));
        c.args(args);
        c
    };
    let path = unique(&format!("scaffold-{lang}"));
    let (code, _, stderr) = output(&mut run(&[&path, "--timeout-ms", "200"])).await;
    assert_eq!(code, 1, "{stderr}");
    // A big component (Python's, JavaScript's) says first that it is being compiled, with no
    // compile cache on every run.
    let (compiling, said): (Vec<&str>, Vec<&str>) =
        stderr.lines().partition(|l| l.contains("compiling") && l.contains("this takes seconds"));
    assert_eq!(
        said,
        [format!("wazoo: wait-{lang}: {path}: still absent when the timeout passed")],
        "{stderr}"
    );
    let big = matches!(lang, "python" | "js");
    assert_eq!(compiling.len(), usize::from(big), "{stderr}");
    // Waiting while the node is created (before or after its watch is armed: either way it
    // must print the data), it returns the node's data.
    let mut waiter = run(&[&path, "--timeout-ms", "60000"]);
    let waiting = tokio::spawn(async move { output(&mut waiter).await });
    let opts = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.mkdir(&path, &opts).await.unwrap();
    checker.set_data(&path, format!("made for {lang}").as_bytes(), None).await.unwrap();
    let (code, stdout, stderr) =
        within(Duration::from_secs(60), "the waiter sees the node", waiting).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    // It may have seen the node between its creation and the data being set.
    assert!(stdout.trim().is_empty() || stdout.trim() == format!("made for {lang}"), "{stdout}");
    let (code, stdout, _) = output(&mut run(&[&path])).await;
    assert_eq!((code, stdout.trim()), (0, format!("made for {lang}").as_str()));
    let (code, _, stderr) = output(&mut run(&["relative"])).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("relative") && stderr.contains("must be absolute"), "{stderr}");
}

wazoo_tests::implementations!(rust: "rust", python: "python", javascript: "js", c: "c"; [template_waits_for_a_node]);

#[tokio::test]
async fn bad_names_and_languages_are_refused() {
    for name in ["Upper", "has space", "9lives", "trailing-", "../escape", ""] {
        let dir = std::env::temp_dir().join(format!("wazoo-scaffold-bad-{}", std::process::id()));
        let (code, _, stderr) = output(cli().args(["new", "recipe", name, "--dir"]).arg(&dir)).await;
        assert_eq!(code, 2, "{name:?}: a bad name is bad usage: {stderr}");
        assert!(stderr.contains("use lowercase letters"), "{name:?}: {stderr}");
        assert!(!dir.exists(), "{name:?} wrote nothing");
    }
    let (code, _, stderr) = output(cli().args(["new", "recipe", "x", "--lang", "cobol"])).await;
    assert_eq!(code, 2, "{stderr}");
}
