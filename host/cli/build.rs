//! Builds the standard recipe components (every crate under `recipes/` but the helper crate,
//! the kazoo-format builds of the recipes that declare a feature `kazoo`, and the election in
//! Curator LeaderSelector's format) for `wasm32-wasip2`, and writes `embedded.rs` into `OUT_DIR`:
//! the table of components the `wazoo` binary carries, so it works with no plugins directory at
//! all.
//!
//! The components build in the workspace's `target/guests*` directories (the ones `make recipes`
//! and the tests use), each with a cargo of its own. `WAZOO_EMBED_DIR=DIR` takes already built
//! `NAME.wasm` files from DIR instead (for packagers); `WAZOO_EMBED=none` carries none (`all`,
//! the default, carries them all; any other value is an error).

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    println!("cargo:rerun-if-env-changed=WAZOO_EMBED");
    println!("cargo:rerun-if-env-changed=WAZOO_EMBED_DIR");
    println!("cargo:rustc-env=WAZOO_COMMIT={}", commit());
    println!("cargo:rustc-env=WAZOO_WIT_PACKAGES={}", wit_packages().join(", "));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let table = out.join("embedded.rs");
    match std::env::var("WAZOO_EMBED").as_deref() {
        Ok("none") => {
            write(&table, &[]);
            return;
        }
        Ok("all") | Err(std::env::VarError::NotPresent) => {}
        Ok(other) => panic!("WAZOO_EMBED={other:?}: expected `none` or `all`"),
        Err(e) => panic!("WAZOO_EMBED: {e}"),
    }
    let components = match std::env::var_os("WAZOO_EMBED_DIR") {
        Some(dir) => prebuilt(Path::new(&dir)),
        None => built(&out),
    };
    write(&table, &components);
}

/// The WIT packages of `wit/` as `wazoo --version` names them (`wazoo:zk@0.1.3`), from their
/// `package` lines, sorted.
fn wit_packages() -> Vec<String> {
    let wit = root().join("wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    let mut files = vec![wit.join("recipes.wit")];
    if let Ok(deps) = std::fs::read_dir(wit.join("deps")) {
        for dep in deps.flatten() {
            if let Ok(inner) = std::fs::read_dir(dep.path()) {
                files.extend(inner.flatten().map(|f| f.path()));
            }
        }
    }
    let mut packages: Vec<String> = files
        .iter()
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|line| line.trim().strip_prefix("package "))
                .map(|name| name.trim_end_matches(';').trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    packages.sort();
    packages.dedup();
    packages
}

/// The commit `wazoo --version` names: `WAZOO_COMMIT` if set (for packagers building from a
/// tarball), else the work tree's `HEAD` as git says it (12 hex digits), else `unknown`.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=WAZOO_COMMIT");
    if let Ok(commit) = std::env::var("WAZOO_COMMIT") {
        return commit;
    }
    let root = root();
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    // Built again when HEAD moves: HEAD itself, the branch it names, and the packed refs.
    for file in ["HEAD", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            println!("cargo:rerun-if-changed={}", root.join(path).display());
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(&["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={}", root.join(path).display());
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string())
}

/// The workspace's root (this crate is `host/cli`).
fn root() -> PathBuf {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    manifest.join("../..").canonicalize().expect("the workspace root")
}

/// Every `.wasm` in `dir`, by file stem.
fn prebuilt(dir: &Path) -> Vec<(String, PathBuf)> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("WAZOO_EMBED_DIR {}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_stem()?.to_string_lossy().into_owned();
            (path.extension()? == "wasm").then_some((name, path))
        })
        .collect();
    found.sort();
    found
}

/// Builds the standard recipes and copies them into `out`.
fn built(out: &Path) -> Vec<(String, PathBuf)> {
    let root = root();
    for watched in ["recipes", "guest/rust", "wit", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let mut recipes: Vec<String> = std::fs::read_dir(root.join("recipes"))
        .expect("the recipes directory")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_string_lossy().into_owned();
            path.join("Cargo.toml").exists().then_some(name)
        })
        .collect();
    recipes.sort();
    ensure_target();

    let kazoo = kazoo_recipes(&root, &recipes);

    let all: Vec<&str> = recipes.iter().map(String::as_str).collect();
    cargo_build(&root, "target/guests", None, &all);
    let kazoo_names: Vec<&str> = kazoo.iter().map(String::as_str).collect();
    cargo_build(&root, "target/guests-kazoo", Some("kazoo"), &kazoo_names);
    // The one selector-format build is named here, as in the Makefile and the test fixture: a
    // single recipe (`election`) of a feature of its own, not a rule over the recipe crates.
    cargo_build(&root, "target/guests-selector", Some("selector"), &["election"]);

    let dir = out.join("recipes");
    std::fs::create_dir_all(&dir).expect("creating OUT_DIR/recipes");
    let built = |target_dir: &str, crate_name: &str| {
        root.join(target_dir).join(TARGET).join("release").join(format!("wazoo_{crate_name}.wasm"))
    };
    let mut components: Vec<(String, PathBuf)> =
        recipes.iter().map(|r| (r.clone(), built("target/guests", r))).collect();
    components.extend(kazoo.iter().map(|r| (format!("{r}-kazoo"), built("target/guests-kazoo", r))));
    components.push(("election-selector".into(), built("target/guests-selector", "election")));
    components
        .into_iter()
        .map(|(name, from)| {
            let to = dir.join(format!("{name}.wasm"));
            std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
            (name, to)
        })
        .collect()
}

/// The recipes (of `recipes`, the directories under `recipes/`) that also build in kazoo 2.11's
/// format, as `NAME-kazoo`: those whose Cargo.toml declares a feature `kazoo`. The one rule, which
/// the Makefile's `KAZOO_RECIPES` and the test fixture (`tests/src/lib.rs`, `kazoo_recipes`)
/// follow too.
fn kazoo_recipes(root: &Path, recipes: &[String]) -> Vec<String> {
    recipes
        .iter()
        .filter(|name| {
            let manifest = root.join("recipes").join(name.as_str()).join("Cargo.toml");
            let text = std::fs::read_to_string(&manifest)
                .unwrap_or_else(|e| panic!("reading {}: {e}", manifest.display()));
            declares_feature(&text, "kazoo")
        })
        .cloned()
        .collect()
}

/// Whether the manifest `text` declares the feature `feature` (a key of its `[features]` table).
fn declares_feature(text: &str, feature: &str) -> bool {
    let manifest: toml::Table = text.parse().unwrap_or_else(|e| panic!("a recipe's Cargo.toml: {e}"));
    manifest.get("features").and_then(toml::Value::as_table).is_some_and(|f| f.contains_key(feature))
}

/// Makes sure the `wasm32-wasip2` standard library is installed (rustup adds it if it can).
fn ensure_target() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let libdir = Command::new(&rustc).args(["--print", "target-libdir", "--target", TARGET]).output();
    if libdir
        .as_ref()
        .is_ok_and(|o| o.status.success() && Path::new(String::from_utf8_lossy(&o.stdout).trim()).exists())
    {
        return;
    }
    let added = Command::new("rustup").args(["target", "add", TARGET]).status();
    if !added.is_ok_and(|s| s.success()) {
        panic!(
            "the standard recipes the wazoo binary carries build for {TARGET}: install it \
             (`rustup target add {TARGET}`), or build with WAZOO_EMBED=none"
        );
    }
}

/// `cargo build --release --target wasm32-wasip2 --target-dir DIR [--features F] -p wazoo-R…`
/// in the workspace, with none of this build's own settings leaking in.
fn cargo_build(root: &Path, target_dir: &str, features: Option<&str>, recipes: &[&str]) {
    // With no `-p` cargo would build the whole workspace for the guest target.
    if recipes.is_empty() {
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(root).args(["build", "--release", "--target", TARGET, "--target-dir", target_dir]);
    if let Some(features) = features {
        command.args(["--features", features]);
    }
    for recipe in recipes {
        command.args(["-p", &format!("wazoo-{recipe}")]);
    }
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_") && key != "CARGO_HOME" || key == "RUSTFLAGS" || key == "RUSTC_WRAPPER" {
            command.env_remove(key.as_ref());
        }
    }
    let status = command.status().expect("running cargo to build the standard recipes");
    assert!(status.success(), "building the standard recipes ({}) failed", recipes.join(", "));
}

/// Writes the table: `pub(crate) const EMBEDDED: &[(&str, &[u8])]`.
fn write(table: &Path, components: &[(String, PathBuf)]) {
    let mut text = String::from("pub(crate) const EMBEDDED: &[(&str, &[u8])] = &[\n");
    for (name, path) in components {
        text.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", path.display().to_string()));
    }
    text.push_str("];\n");
    std::fs::write(table, text).expect("writing embedded.rs");
}
