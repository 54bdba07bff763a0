//! The shared fixture of wazoo's integration tests: real ZooKeeper servers (Debian's package),
//! freshly built recipe components, clients for checking what is on the server, and the Curator
//! peer program.
//!
//! One standalone server is shared by a test binary (started once, on a free port); every test
//! works under its own unique path. Ensembles are started per test.

pub mod cases;
pub mod chaos;
pub mod components;
pub mod daemon;
pub mod group_soak;
pub mod matrix;
pub mod procs;
pub mod proxy;
pub mod python;
pub mod scenarios;
pub mod tls;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
use wazoo_runtime::{Host, HostConfig, KeeperConfig, SandboxLimits};
use wazoo_testkit::{ServerOptions, ZkServer};
use zookeeper_client::Client;

pub use wazoo_testkit::Ensemble;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The standalone server shared by this test binary.
pub fn zk() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        // tickTime 200 ms: sessions can be as short as 400 ms, so expiry tests run fast.
        ZkServer::start(ServerOptions { tick_ms: 200, ..ServerOptions::default() })
            .expect("starting ZooKeeper")
    })
}

/// A path no other test uses.
pub fn unique(name: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("/t/{name}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The recipe crates: every directory under `recipes/` with a `Cargo.toml`; directory
/// `X` holds crate `wazoo-X`, installed as plugin `X.wasm` (the Makefile follows the same rule).
pub fn recipes() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("recipes"))
        .expect("listing recipes/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The recipe crates also built in kazoo 2.11's wire format, as plugin `X-kazoo.wasm`: those of
/// [`recipes`] whose Cargo.toml declares a feature `kazoo` (a `kazoo = …` key in its
/// `[features]`). The one rule, which the Makefile's `KAZOO_RECIPES` and `host/cli/build.rs`
/// follow too.
pub fn kazoo_recipes() -> Vec<String> {
    recipes()
        .into_iter()
        .filter(|name| {
            let manifest = root().join("recipes").join(name).join("Cargo.toml");
            let text = std::fs::read_to_string(&manifest)
                .unwrap_or_else(|e| panic!("reading {}: {e}", manifest.display()));
            declares_feature(&text, "kazoo")
        })
        .collect()
}

/// Whether the manifest `text` declares the feature `feature` (a key of its `[features]` table).
fn declares_feature(text: &str, feature: &str) -> bool {
    let manifest: toml::Table = text.parse().unwrap_or_else(|e| panic!("a recipe's Cargo.toml: {e}"));
    manifest.get("features").and_then(toml::Value::as_table).is_some_and(|f| f.contains_key(feature))
}

/// The plugins directory, with the recipe components freshly built from this workspace, plus the
/// test-only guests of `tests/guests/` (`misbehave`: traps, spins or grows on command; `baton`:
/// the example claim family, whose description stays out of this directory), and the
/// kazoo-format builds of [`kazoo_recipes`] (`lock-kazoo`, …: the same crates with their feature
/// `kazoo`, built into a target directory of their own as the Makefile does, since the other
/// feature set writes the same output file).
pub fn plugins() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = root();
            let mut components = recipes();
            components.push("misbehave".to_string());
            // The example claim family of ARCHITECTURE.md (tests/tests/family.rs).
            components.push("baton".to_string());
            let status = Command::new(env!("CARGO"))
                .current_dir(&root)
                .args(["build", "--release", "--target", "wasm32-wasip2", "--target-dir", "target/guests"])
                .args(components.iter().flat_map(|name| ["-p".to_string(), format!("wazoo-{name}")]))
                .status()
                .expect("running cargo to build the recipes");
            assert!(status.success(), "building the recipe components failed");
            let dir = root.join("target/test-plugins");
            std::fs::create_dir_all(&dir).unwrap();
            for recipe in components {
                let built = root.join(format!("target/guests/wasm32-wasip2/release/wazoo_{recipe}.wasm"));
                std::fs::copy(&built, dir.join(format!("{recipe}.wasm"))).expect("copying a built recipe");
            }
            let kazoo = kazoo_recipes();
            assert!(!kazoo.is_empty(), "no recipe crate declares the feature `kazoo`");
            let status = Command::new(env!("CARGO"))
                .current_dir(&root)
                .args(["build", "--release", "--target", "wasm32-wasip2"])
                .args(["--target-dir", "target/guests-kazoo", "--features", "kazoo"])
                .args(kazoo.iter().flat_map(|name| ["-p".to_string(), format!("wazoo-{name}")]))
                .status()
                .expect("running cargo to build the kazoo-format recipes");
            assert!(status.success(), "building the kazoo-format recipe components failed");
            for recipe in kazoo {
                let built = root
                    .join("target/guests-kazoo/wasm32-wasip2/release")
                    .join(format!("wazoo_{recipe}.wasm"));
                std::fs::copy(&built, dir.join(format!("{recipe}-kazoo.wasm")))
                    .expect("copying a built kazoo-format recipe");
            }
            // The election in Curator LeaderSelector's format (its feature `selector`): one recipe
            // named here, as in the Makefile and host/cli/build.rs, not a rule over the crates.
            let status = Command::new(env!("CARGO"))
                .current_dir(&root)
                .args(["build", "--release", "--target", "wasm32-wasip2"])
                .args([
                    "--target-dir",
                    "target/guests-selector",
                    "--features",
                    "selector",
                    "-p",
                    "wazoo-election",
                ])
                .status()
                .expect("running cargo to build the election-selector recipe");
            assert!(status.success(), "building the election-selector recipe failed");
            std::fs::copy(
                root.join("target/guests-selector/wasm32-wasip2/release/wazoo_election.wasm"),
                dir.join("election-selector.wasm"),
            )
            .expect("copying the election-selector recipe");
            for recipe in LANGUAGE_RECIPES {
                build_language_recipe(recipe, &dir);
            }
            dir
        })
        .clone()
}

/// A recipe written in another language: its plugin name, the script that builds it (given
/// `args`, then the output path), and the sources it is built from.
pub struct LanguageRecipe {
    pub name: &'static str,
    pub script: &'static str,
    pub args: &'static [&'static str],
    pub sources: &'static [&'static str],
}

/// The recipes in Python (componentize-py), JavaScript (componentize-js) and C (clang and
/// wasi-libc, then `wazoo componentize`) under `plugins/`.
pub const LANGUAGE_RECIPES: &[LanguageRecipe] = &[
    LanguageRecipe {
        name: "semaphore-py",
        script: "guest/python/build.sh",
        args: &[],
        sources: &["guest/python/semaphore", "guest/python/wazoo_guest", "guest/python/build.sh", "wit"],
    },
    LanguageRecipe {
        name: "election-js",
        script: "guest/js/build.sh",
        args: &[],
        sources: &[
            "guest/js/election",
            "guest/js/wazoo-guest.js",
            "guest/js/build.mjs",
            "guest/js/package.json",
            "wit",
        ],
    },
    LanguageRecipe {
        name: "barrier-c",
        script: "guest/c/build.sh",
        args: &["barrier"],
        sources: &[
            "guest/c/barrier",
            "guest/c/wazoo_guest.h",
            "guest/c/wazoo_guest.c",
            "guest/c/build.sh",
            "wit",
        ],
    },
    LanguageRecipe {
        name: "lock-c",
        script: "guest/c/build.sh",
        args: &["lock"],
        sources: &[
            "guest/c/lock",
            "guest/c/wazoo_guest.h",
            "guest/c/wazoo_guest.c",
            "guest/c/build.sh",
            "wit",
        ],
    },
];

/// Builds `recipe` into `dir` unless a build newer than all of its sources is there already
/// (these builds take seconds, and every test binary shares them).
fn build_language_recipe(recipe: &LanguageRecipe, dir: &Path) {
    let root = root();
    let out = dir.join(format!("{}.wasm", recipe.name));
    let built_at = std::fs::metadata(&out).and_then(|m| m.modified()).ok();
    let newest = recipe.sources.iter().filter_map(|s| newest_mtime(&root.join(s))).max();
    if let (Some(built), Some(newest)) = (built_at, newest) {
        if built >= newest {
            return;
        }
    }
    let status = Command::new("bash")
        .current_dir(&root)
        .arg(root.join(recipe.script))
        .args(recipe.args)
        .arg(&out)
        // The C build's `wazoo componentize`: the binary under test.
        .env("WAZOO", wazoo_bin())
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", recipe.script));
    assert!(status.success(), "{} failed to build {} (run `make setup`?)", recipe.script, recipe.name);
}

/// The newest modification time of `path` or anything under it.
fn newest_mtime(path: &Path) -> Option<std::time::SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    let own = meta.modified().ok();
    if !meta.is_dir() {
        return own;
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() != "node_modules" && e.file_name() != "__pycache__")
        .filter_map(|e| newest_mtime(&e.path()))
        .chain(own)
        .max()
}

/// Test functions over implementations: `implementations!(rust: "semaphore", python:
/// "semaphore-py"; [test_a, test_b])` makes modules `rust` and `python`, each with a
/// `#[tokio::test]` per test that calls `test_a(recipe)`, so every implementation is checked by
/// the same assertions.
#[macro_export]
macro_rules! implementations {
    ($($lang:ident: $recipe:literal),+ ; $tests:tt) => {
        $( $crate::implementations!(@one $lang, $recipe, $tests); )+
    };
    (@one $lang:ident, $recipe:literal, [$($test:ident),+ $(,)?]) => {
        mod $lang {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    super::$test($recipe).await
                }
            )+
        }
    };
}

/// Host settings for `address`, with a session timeout of `session`.
pub fn config(address: &str, session: Duration) -> HostConfig {
    HostConfig {
        keeper: KeeperConfig {
            zookeeper: address.to_string(),
            session_timeout: session,
            connect_timeout: Duration::from_secs(20),
            ..KeeperConfig::default()
        },
        plugins: plugins(),
        limits: SandboxLimits::default(),
        allowed: None,
        embedded: None,
        cache: Some(root().join("target/component-cache")),
    }
}

/// A host on the shared server.
pub async fn host() -> Host {
    Host::start(config(&zk().address(), Duration::from_secs(10))).await.expect("starting a host")
}

/// A plain client for looking at the server from outside the host.
pub async fn client(address: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(address)
        .await
        .expect("connecting a checking client")
}

/// Children of `dir`, sorted; empty when `dir` does not exist.
pub async fn children(client: &Client, dir: &str) -> Vec<String> {
    match client.list_children(dir).await {
        Ok(mut c) => {
            c.sort();
            c
        }
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(e) => panic!("listing {dir}: {e}"),
    }
}

/// Waits, by watching `dir`'s children, until it has exactly `n` children.
pub async fn wait_children(client: &Client, dir: &str, n: usize) -> Vec<String> {
    loop {
        let (children, watcher) = match client.list_and_watch_children(dir).await {
            Ok((children, watcher)) => (children, Some(watcher)),
            Err(zookeeper_client::Error::NoNode) => {
                let (stat, watcher) = client.check_and_watch_stat(dir).await.unwrap();
                if stat.is_some() {
                    continue;
                }
                (Vec::new(), Some(watcher))
            }
            Err(e) => panic!("watching {dir}: {e}"),
        };
        if children.len() == n {
            let mut children = children;
            children.sort();
            return children;
        }
        if let Some(w) = watcher {
            w.changed().await;
        }
    }
}

/// Waits, by watching it, until `path` no longer exists.
pub async fn wait_gone(client: &Client, path: &str) {
    loop {
        let (stat, watcher) = client.check_and_watch_stat(path).await.unwrap();
        if stat.is_none() {
            return;
        }
        watcher.changed().await;
    }
}

/// The Python gRPC stubs of the daemon's API, generated into `target/NAME` (each test binary
/// its own directory, so that two binaries never write one at once).
pub fn python_stubs(name: &str) -> PathBuf {
    let stubs = root().join("target").join(name);
    let generated = std::process::Command::new("bash")
        .arg(root().join("tests/python/gen_stubs.sh"))
        .arg(&stubs)
        .current_dir(root())
        .status()
        .unwrap();
    assert!(generated.success(), "generating the Python stubs");
    stubs
}

/// The `wazoo` binary built for this test run.
pub fn wazoo_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/release/deps/<test> (a test) or target/release/<bin> -> target/release/wazoo
    let mut dir = exe.parent().unwrap();
    if dir.ends_with("deps") {
        dir = dir.parent().unwrap();
    }
    let bin = dir.join("wazoo");
    assert!(bin.exists(), "{} not built (cargo test builds it for integration tests)", bin.display());
    bin
}

/// The Curator peer (tests/java/CuratorPeer.java): compiled once, run with Debian's Curator jars.
pub fn curator_classpath() -> String {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = root().join("target/java");
            std::fs::create_dir_all(&out).unwrap();
            let jars = "/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar";
            let status = Command::new("javac")
                .args(["-cp", jars, "-d"])
                .arg(&out)
                .arg(root().join("tests/java/CuratorPeer.java"))
                .status()
                .expect("running javac (is a JDK installed?)");
            assert!(status.success(), "compiling the Curator peer failed");
            format!("{}:{jars}", out.display())
        })
        .clone()
}

/// Runs `f` with a timeout so a hung test fails instead of stalling CI.
pub async fn within<T>(limit: Duration, what: &str, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(limit, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: did not finish within {limit:?}"),
    }
}

/// A running Curator peer (see [`curator_classpath`]), driven over its stdin.
pub struct Curator {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Curator {
    /// Starts a peer holding a `kind` lock (`mutex`, `read`, `write`) on `path`.
    pub async fn start(address: &str, path: &str, kind: &str) -> Curator {
        let mut child = tokio::process::Command::new("java")
            .args(["-cp", &curator_classpath(), "CuratorPeer", address, path, kind])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("starting java");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut curator = Curator { _child: child, stdin, lines };
        assert_eq!(curator.line().await, "ready");
        curator
    }

    pub async fn send(&mut self, command: &str) {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    pub async fn line(&mut self) -> String {
        within(Duration::from_secs(60), "Curator answers", self.lines.next_line())
            .await
            .unwrap()
            .expect("Curator exited")
    }
}

/// A running kazoo peer (tests/python/kazoo_peer.py, kazoo 2.11 from PyPI) holding a `Barrier`
/// on one path, driven over its stdin.
pub struct Kazoo {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Kazoo {
    pub async fn start(address: &str, path: &str) -> Kazoo {
        Kazoo::run("tests/python/kazoo_peer.py", &[address, path]).await
    }

    /// Starts the kazoo peer `script` (under the workspace) with `args`, and waits for its
    /// `ready`.
    pub async fn run(script: &str, args: &[&str]) -> Kazoo {
        let mut child = tokio::process::Command::new("python3")
            .arg(root().join(script))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("starting python3");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut kazoo = Kazoo { _child: child, stdin, lines };
        assert_eq!(kazoo.line().await, "ready", "kazoo peer did not start (is kazoo installed?)");
        kazoo
    }

    pub async fn send(&mut self, command: &str) {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    pub async fn line(&mut self) -> String {
        within(Duration::from_secs(60), "kazoo answers", self.lines.next_line())
            .await
            .unwrap()
            .expect("kazoo exited")
    }

    /// Sends `command` and reads the answer.
    pub async fn ask(&mut self, command: &str) -> String {
        self.send(command).await;
        self.line().await
    }
}

/// Every ephemeral node under `path`.
pub async fn ephemerals(checker: &Client, path: &str) -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    let mut dirs = vec![path.to_string()];
    while let Some(dir) = dirs.pop() {
        let Ok(children) = checker.list_children(&dir).await else { continue };
        for child in children {
            let full = format!("{dir}/{child}");
            if let Ok(Some(stat)) = checker.check_stat(&full).await {
                if stat.ephemeral_owner != 0 {
                    found.insert(full.clone());
                }
                if stat.num_children > 0 {
                    dirs.push(full);
                }
            }
        }
    }
    found
}
