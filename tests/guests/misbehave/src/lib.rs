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
//! Not a standard recipe: it lives outside `recipes/`, so `make recipes` never installs it.

// `recipe_world!` assumes a crate in `recipes/NAME`; this one sits a level deeper.
wit_bindgen::generate!({
    path: "../../../wit",
    world: "wazoo:recipes/custom@0.1.0",
    with: {
        "wazoo:zk/types@0.1.0": wazoo_guest::wit::types,
        "wazoo:zk/znode@0.1.0": wazoo_guest::wit::znode,
        "wazoo:zk/watch@0.1.0": wazoo_guest::wit::watch,
        "wazoo:zk/session@0.1.0": wazoo_guest::wit::session,
    },
});

use std::hint::black_box;

use wazoo_guest::{self as zk, CreateMode};

const USAGE: &str = "usage: misbehave (hold-then-trap | hold-then-spin | hold-then-grow | hold) PATH";

struct Misbehave;

impl Guest for Misbehave {
    fn run(args: Vec<String>) -> Result<String, String> {
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
