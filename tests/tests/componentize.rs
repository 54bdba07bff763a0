//! `wazoo componentize` and `wazoo new bindings`: C compiled by Debian's clang and wasi-libc into
//! a WASI core module becomes a recipe that runs against a real ZooKeeper; a module the host
//! could not run is refused with the reason, naming the import it lacks, and nothing is written.

use std::path::{Path, PathBuf};

use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;

/// A fresh directory for one test.
fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wazoo-componentize-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the C bindings of `world` into `dir/bindings`.
async fn bindings(dir: &Path, world: &str) {
    let (code, stdout, stderr) = output(
        cli().args(["new", "bindings", "--world", world, "--json", "--dir"]).arg(dir.join("bindings")),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let files: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(files["files"].as_array().unwrap().len(), 3, "{stdout}");
}

/// Compiles `source` (C) with the bindings in `dir/bindings`, if any, into `dir/core.wasm`.
async fn compile(dir: &Path, source: &str, args: &[&str]) -> PathBuf {
    std::fs::write(dir.join("recipe-src.c"), source).unwrap();
    let mut clang = tokio::process::Command::new("clang");
    clang
        .current_dir(dir)
        .args(["--target=wasm32-wasi", "-Os", "-o", "core.wasm", "recipe-src.c"])
        .args(args);
    if dir.join("bindings").exists() {
        clang.args(["-Ibindings", "bindings/recipe.c", "bindings/recipe_component_type.o"]);
    }
    let (code, stdout, stderr) = output(&mut clang).await;
    assert_eq!(code, 0, "clang: {stdout}{stderr}");
    dir.join("core.wasm")
}

/// `wazoo componentize MODULE --world WORLD -o OUT`: (status, stdout, stderr).
async fn componentize(module: &Path, world: &str, out: &Path) -> (i32, String, String) {
    output(cli().arg("componentize").arg(module).args(["--world", world, "-o"]).arg(out)).await
}

const HELLO: &str = r#"
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "recipe.h"

bool exports_recipe_run(recipe_list_string_t *args, recipe_string_t *ret, recipe_string_t *err) {
    char text[256] = "hello";
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) text[0] = 'H';  /* a WASI preview 1 import */
    for (size_t i = 0; i < args->len; i++) {
        strncat(text, " ", sizeof text - strlen(text) - 1);
        strncat(text, (const char *)args->ptr[i].ptr, args->ptr[i].len < 64 ? args->ptr[i].len : 64);
    }
    bool exists = false;
    recipe_string_t root;
    recipe_string_set(&root, "/");
    wazoo_zk_znode_option_stat_t stat;
    wazoo_zk_znode_zk_error_t e;
    if (wazoo_zk_znode_exists(&root, &stat, &e)) exists = stat.is_some;
    recipe_list_string_free(args);
    if (!exists) { recipe_string_dup(err, "no root"); return false; }
    recipe_string_dup(ret, text);
    return true;
}
"#;

#[tokio::test]
async fn a_c_module_becomes_a_recipe_that_runs() {
    let dir = workdir("hello");
    bindings(&dir, "custom").await;
    let module = compile(&dir, HELLO, &["-mexec-model=reactor"]).await;
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let out = plugins.join("hello.wasm");
    let (code, stdout, stderr) = output(
        cli()
            .arg("componentize")
            .arg(&module)
            .args(["--world", "wazoo:recipes/custom@0.1.2", "--json", "-o"])
            .arg(&out),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let made: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(made["world"], "wazoo:recipes/custom@0.1.2");
    assert_eq!(made["adapted"], true, "wasi-libc's imports were adapted: {stdout}");
    assert_eq!(made["bytes"].as_u64().unwrap(), std::fs::metadata(&out).unwrap().len());
    // It asks nothing of anyone: the same through --server, with no daemon there.
    let again = dir.join("again.wasm");
    let (code, stdout, stderr) = output(
        cli()
            .args(["--server", "127.0.0.1:1", "componentize"])
            .arg(&module)
            .args(["--world", "wazoo:recipes/custom", "-o"])
            .arg(&again),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with(&format!("wrote {}", again.display())), "{stdout}");
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap(), "the same component");

    let (code, stdout, stderr) = output(
        cli().env("WAZOO_PLUGINS", &plugins).env("WAZOO_CACHE", "none").args(["run", "hello", "a", "b"]),
    )
    .await;
    assert_eq!((code, stdout.trim()), (0, "hello a b"), "{stderr}");
    let (code, stdout, stderr) = output(
        cli().env("WAZOO_PLUGINS", &plugins).env("WAZOO_CACHE", "none").args(["recipes", "list", "--json"]),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.lines().any(|l| l.contains("\"hello\"") && l.contains("wazoo:recipes/custom@0.1.2")),
        "the registry serves it: {stdout}"
    );
}

#[tokio::test]
async fn modules_the_host_could_not_run_are_refused_with_the_reason() {
    let dir = workdir("refused");
    let out = dir.join("out.wasm");
    // What is at OUT before stays as it was through every refusal.
    std::fs::write(&out, b"before").unwrap();

    // An import the host does not offer, beside everything wasi-libc imports.
    bindings(&dir, "custom").await;
    let evil = HELLO
        .replace(
            "#include \"recipe.h\"",
            "#include \"recipe.h\"\nextern int steal(int) __attribute__((import_module(\"evil\"), import_name(\"steal\")));",
        )
        .replace("bool exists = false;", "bool exists = steal(1) > 0;");
    let module = compile(&dir, &evil, &["-mexec-model=reactor"]).await;
    let (code, _, stderr) = componentize(&module, "custom", &out).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("refused") && stderr.contains("evil::steal"), "names the import: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");

    // A function of the contract's interface that the contract does not have.
    std::fs::remove_dir_all(dir.join("bindings")).unwrap();
    let fake = r#"
        extern int drop_all(void) __attribute__((import_module("wazoo:zk/znode@0.1.3"), import_name("drop-everything")));
        __attribute__((export_name("run"))) int run(int a, int b) { return drop_all() + a + b; }
    "#;
    let module = compile(&dir, fake, &["-mexec-model=reactor", "-nostdlib", "-Wl,--no-entry"]).await;
    let (code, _, stderr) = componentize(&module, "custom", &out).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("drop-everything"), "names the import: {stderr}");

    // A WASI command runs main and ends; a recipe is called.
    let module = compile(&dir, "int main(void) { return 0; }", &[]).await;
    let (code, _, stderr) = componentize(&module, "custom", &out).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("_start") && stderr.contains("-mexec-model=reactor"), "{stderr}");

    // A module for one world given another: the world's exports are missing.
    bindings(&dir, "custom").await;
    let module = compile(&dir, HELLO, &["-mexec-model=reactor"]).await;
    let (code, _, stderr) = componentize(&module, "barrier-recipe", &out).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("wazoo:recipes/barrier"), "names the missing export: {stderr}");

    // A memory larger at start than an instance may have (the host's pool would refuse it when
    // instantiating).
    let module = compile(&dir, HELLO, &["-mexec-model=reactor", "-Wl,--initial-memory=1073741824"]).await;
    let (code, _, stderr) = componentize(&module, "custom", &out).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("memory starts at 1073741824 bytes"), "{stderr}");

    // Not a module at all, and a component (already what componentize makes).
    let (code, _, stderr) = componentize(&dir.join("recipe-src.c"), "custom", &out).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("not a WebAssembly core module"), "{stderr}");
    let (code, _, stderr) = componentize(&plugins().join("barrier.wasm"), "barrier", &out).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("already a component"), "{stderr}");

    // Bad usage: a world the contract does not have (2), a file that is not there (70).
    for world in ["nope", "wazoo:recipes/custom@0.1.0", "wazoo:zk/custom", "Custom", ""] {
        let (code, _, stderr) = componentize(&module, world, &out).await;
        assert_eq!(code, 2, "{world:?}: {stderr}");
        assert!(
            stderr.contains("no such world") && stderr.contains("barrier-recipe, "),
            "{world:?}: {stderr}"
        );
    }
    let (code, _, stderr) = componentize(&dir.join("absent.wasm"), "custom", &out).await;
    assert_eq!(code, 70, "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), b"before", "nothing written for a refusal");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".componentize"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file left behind: {leftovers:?}");
    let (code, _, stderr) = output(cli().args([
        "new",
        "bindings",
        "--world",
        "wazoo:recipes/lock-recipe@0.1.2",
        "--lang",
        "cobol",
    ]))
    .await;
    assert_eq!(code, 2, "{stderr}");
}

/// A mutex in C on `guest/c/wazoo_guest.h`: `run DIR COUNTER ROUNDS` takes the lock ROUNDS
/// times (the layer's protected create and predecessor wait), and while holding it marks itself
/// the holder (an ephemeral node that a second holder could not create) and adds one to COUNTER
/// by a read and a blind write, which loses counts unless holders take turns.
const MUTEX: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wazoo_guest.h"

static bool failed(recipe_string_t *err, int rc, const char *what) {
    char *text = wz_format("%s: %s %s", what, wz_error_name(rc), wz_message());
    recipe_string_dup(err, text);
    wz_free(text);
    return false;
}

bool exports_recipe_run(recipe_list_string_t *args, recipe_string_t *ret, recipe_string_t *err) {
    wz_names argv;
    if (wz_take_strings(args, &argv) != WZ_OK || argv.count != 3) {
        recipe_string_dup(err, "usage: DIR COUNTER ROUNDS");
        return false;
    }
    const char *dir = argv.names[0], *counter = argv.names[1];
    int rounds = atoi(argv.names[2]);
    uint64_t limit = 60000;
    int64_t last = 0;
    char *marker = wz_join(counter, "holder");
    for (int i = 0; i < rounds; i++) {
        char *node = NULL;
        int64_t token = 0;
        int rc = wz_create_protected(dir, "lock-", NULL, 0, WZ_EPHEMERAL_SEQUENTIAL, &node, &token);
        if (rc) return failed(err, rc, "create");
        if (token <= last) return failed(err, WZ_OTHER, "the token did not rise");
        last = token;
        rc = wz_wait_for_predecessor(dir, wz_node_name(node), wz_deadline_after(&limit));
        if (rc) return failed(err, rc, "wait");
        rc = wz_create(marker, NULL, 0, WZ_EPHEMERAL, NULL);
        if (rc == WZ_NODE_EXISTS) return failed(err, rc, "two holders at once");
        if (rc) return failed(err, rc, "mark");
        uint8_t *data;
        size_t len;
        rc = wz_get_data(counter, &data, &len, NULL);
        if (rc) return failed(err, rc, "read");
        char text[32] = {0};
        memcpy(text, data, len < 31 ? len : 31);
        wz_free(data);
        snprintf(text, sizeof text, "%ld", atol(text) + 1);
        if ((rc = wz_set_data(counter, text, strlen(text), WZ_ANY_VERSION, NULL))) return failed(err, rc, "write");
        if ((rc = wz_delete(marker, WZ_ANY_VERSION))) return failed(err, rc, "unmark");
        if ((rc = wz_delete_retrying(node))) return failed(err, rc, "release");
        wz_free(node);
    }
    wz_free(marker);
    wz_names_free(&argv);
    recipe_string_dup(ret, "done");
    return true;
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_c_layers_protected_create_and_predecessor_wait_make_a_mutex() {
    const PROCESSES: usize = 4;
    const ROUNDS: usize = 5;
    let dir = workdir("mutex");
    bindings(&dir, "custom").await;
    let layer = root().join("guest/c");
    let module = compile(
        &dir,
        MUTEX,
        &[
            "-mexec-model=reactor",
            "-I",
            layer.to_str().unwrap(),
            layer.join("wazoo_guest.c").to_str().unwrap(),
        ],
    )
    .await;
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let (code, _, stderr) = componentize(&module, "custom", &plugins.join("mutex.wasm")).await;
    assert_eq!(code, 0, "{stderr}");

    let checker = client(&zk().address()).await;
    let base = unique("c-mutex");
    let (locks, counter) = (format!("{base}/locks"), format!("{base}/counter"));
    let open = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.mkdir(&counter, &open).await.unwrap();
    checker.set_data(&counter, b"0", None).await.unwrap();
    let mut runs = Vec::new();
    for _ in 0..PROCESSES {
        let mut run = cli();
        run.env("WAZOO_PLUGINS", &plugins).env("WAZOO_CACHE", "none");
        run.args(["run", "mutex", &locks, &counter, &ROUNDS.to_string()]);
        runs.push(tokio::spawn(async move { output(&mut run).await }));
    }
    for run in runs {
        let (code, stdout, stderr) =
            within(std::time::Duration::from_secs(120), "a contender", run).await.unwrap();
        assert_eq!((code, stdout.trim()), (0, "done"), "{stderr}");
    }
    let (value, _) = checker.get_data(&counter).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&value), (PROCESSES * ROUNDS).to_string(), "no increment lost");
    assert!(children(&checker, &locks).await.is_empty(), "every lock node released");
}
