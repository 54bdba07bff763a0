//! The example claim family of ARCHITECTURE.md ("Adding a claim family"), built and run as a
//! user would: the baton of `tests/guests/baton`, a claim recipe of `wazoo:recipes/claim-recipe`
//! and its description `baton.family.toml`, dropped into a plugins directory, and nothing else.
//! `wazoo claim baton`, `wazoo holders` and a daemon's Acquire serve it from the description:
//! one holder at a time, in the order they asked, told apart by their data, with the words and
//! environment the description gives, and no node left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;
use wazoo_tests::daemon::{cache, output, Daemon};
use wazoo_tests::procs::Running;
use wazoo_tests::{children, client, plugins, root, unique, wait_children, wait_gone, wazoo_bin, within, zk};

const LIMIT: Duration = Duration::from_secs(60);

/// CMD: a shell that prints what it was told, then forks `sleep 30` and waits for it.
const TOLD: [&str; 3] = [
    "sh",
    "-c",
    r#"echo "told $WAZOO_BATON_HOLDER $WAZOO_BATON_PATH $WAZOO_BATON_NODE $WAZOO_FENCING_TOKEN"; sleep 30; true"#,
];

/// The example family's files as a user installs them: its recipe built from this workspace and
/// its description, in a plugins directory of their own.
fn family_plugins() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(plugins().join("baton.wasm"), dir.path().join("baton.wasm")).unwrap();
    std::fs::copy(description(), dir.path().join("baton.family.toml")).unwrap();
    dir
}

fn description() -> PathBuf {
    root().join("tests/guests/baton/baton.family.toml")
}

/// The local CLI on the shared ZooKeeper with the plugins directory `dir`.
fn wazoo(dir: &Path) -> Command {
    let mut command = Command::new(wazoo_bin());
    command
        .env("WAZOO_ZOOKEEPER", zk().address())
        .env("WAZOO_PLUGINS", dir)
        .env_remove("WAZOO_LOG")
        .env_remove("WAZOO_SERVER")
        .kill_on_drop(true);
    command
}

/// The CLI through `daemon`, with no ZooKeeper of its own; it reads the family's description
/// from `dir`, as the daemon does from its own.
fn through(daemon: &Daemon, dir: &Path) -> Command {
    let mut command = Command::new(wazoo_bin());
    command
        .env("WAZOO_SERVER", &daemon.grpc)
        .env("WAZOO_ZOOKEEPER", "127.0.0.1:1")
        .env("WAZOO_PLUGINS", dir)
        .env_remove("WAZOO_LOG")
        .kill_on_drop(true);
    command
}

/// What the [`TOLD`] line of a holder says: holder, path, node, token.
async fn told(running: &mut Running) -> (String, String, String, i64) {
    let line = running.line("the command runs holding the baton").await;
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((words.len(), words[0]), (5, "told"), "{line}");
    (words[1].to_string(), words[2].to_string(), words[3].to_string(), words[4].parse().unwrap())
}

/// `holders PATH --json` (with `kind` none: told by the node names), as (state, data, node) rows.
async fn holders(mut command: Command, path: &str, kind: Option<&str>) -> Vec<(String, String, String)> {
    command.args(["holders", path, "--json"]);
    if let Some(kind) = kind {
        command.args(["--kind", kind]);
    }
    let (code, out, err) = output(&mut command).await;
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(row["kind"], "baton", "{line}");
            let text = |k: &str| row[k].as_str().unwrap().to_string();
            (text("state"), text("data"), text("node"))
        })
        .collect()
}

/// The whole of the family's promise on one backend: `cmd` makes a CLI command; `bare` one
/// with no description of the family on its side.
async fn one_at_a_time_in_order(cmd: impl Fn() -> Command, bare: impl Fn() -> Command, path: &str) {
    let checker = client(&zk().address()).await;
    let mut alice = Running::start(cmd().args(["claim", "baton", path, "--data", "alice", "--"]).args(TOLD));
    let (holder, told_path, alice_node, alice_token) = told(&mut alice).await;
    assert_eq!((holder.as_str(), told_path.as_str()), ("alice", path));
    assert!(alice_node.starts_with(&format!("{path}/_c_")) && alice_node.contains("-baton-"), "{alice_node}");

    let mut bob = Running::start(cmd().args(["claim", "baton", path, "--data", "bob", "--"]).args(TOLD));
    wait_children(&checker, path, 2).await;
    let rows = holders(cmd(), path, None).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[0].0.as_str(), rows[0].1.as_str(), &rows[0].2), ("holds", "alice", &alice_node));
    assert_eq!((rows[1].0.as_str(), rows[1].1.as_str()), ("waits", "bob"));
    assert_eq!(holders(cmd(), path, Some("baton")).await, rows);
    assert_eq!(holders(bare(), path, None).await, rows, "told by the side that describes it");

    // Waited for in vain: the description's words, exit status 3.
    let (code, _, err) =
        output(cmd().args(["claim", "baton", path, "--timeout", "200ms", "--", "true"])).await;
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.trim(), format!("wazoo: timed out after 200ms waiting for the baton of {path}"));

    // Taken: --no-wait says so in the description's words, exit status 3, and leaves no node.
    let (code, _, err) = output(cmd().args(["claim", "baton", path, "--no-wait", "--", "true"])).await;
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.trim(), format!("wazoo: the baton of {path} is held by another (--no-wait)"));
    assert_eq!(children(&checker, path).await.len(), 2);

    // Alice lets go: the baton passes to bob, and only then.
    alice.signal(libc::SIGTERM);
    alice.exit().await;
    let (holder, _, bob_node, bob_token) = told(&mut bob).await;
    assert_eq!(holder, "bob");
    assert!(bob_token > alice_token, "a later holder's token is greater: {bob_token} after {alice_token}");
    assert_eq!(children(&checker, path).await, vec![bob_node.rsplit('/').next().unwrap().to_string()]);
    bob.signal(libc::SIGTERM);
    bob.exit().await;
    wait_gone(&checker, &bob_node).await;
    within(LIMIT, "no node is left behind", wait_children(&checker, path, 0)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_described_family_is_held_by_one_at_a_time_in_order() {
    let dir = family_plugins();
    let bare = || {
        let mut command = wazoo(dir.path());
        command.env("WAZOO_PLUGINS", "/nonexistent");
        command
    };
    // Locally, the side that reads the nodes is the CLI: without the description, no baton.
    let (code, _, err) = output(bare().args(["holders", "/x", "--kind", "baton"])).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--kind: unknown kind \"baton\""), "{err}");
    let path = unique("family-baton");
    let plain = |p: &Path| wazoo(p);
    one_at_a_time_in_order(|| plain(dir.path()), || plain(dir.path()), &path).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_described_family_is_served_by_a_daemon_from_its_description() {
    let dir = family_plugins();
    let daemon = Daemon::start(dir.path(), &cache()).await;
    let bare = || through(&daemon, Path::new("/nonexistent"));
    one_at_a_time_in_order(|| through(&daemon, dir.path()), bare, &unique("family-baton-daemon")).await;
}

/// A description is parsed strictly; whatever is wrong is one line and exit status 2, before
/// anything is asked of ZooKeeper.
#[tokio::test(flavor = "multi_thread")]
async fn descriptions_and_family_names_are_checked() {
    let path = unique("family-checked");
    let cases: &[(&str, &str, &[&str], &str)] = &[
        (
            "baton.family.toml",
            "markers = [\"baton-\"]\ncolour = \"red\"\n",
            &["baton"],
            "unknown field `colour`",
        ),
        ("baton.family.toml", "claim = \"baton\"\n", &["baton"], "missing field `markers`"),
        ("lock.family.toml", "markers = [\"x-\"]\n", &["lock"], "lock is a standard family"),
        ("shadow.family.toml", "markers = [\"_lock-\"]\n", &["shadow"], "cannot be told from \"lock-\""),
        ("shadow.family.toml", "markers = [\"__lock__\"]\n", &["shadow"], "cannot be told from \"__lock__\""),
        (
            "baton.family.toml",
            "markers = [\"b-\"]\ndata = { key = \"k\", env = \"PATH\" }\n",
            &["baton"],
            "data.env",
        ),
        ("relay.family.toml", "markers = [\"relay-\"]\n", &["relay", "--data", "x"], "takes no --data"),
        ("relay.family.toml", "markers = [\"relay-\"]\n", &["nosuch"], "no family \"nosuch\""),
        ("relay.family.toml", "markers = [\"relay-\"]\n", &["lock"], "use `wazoo lock`"),
    ];
    for (file, text, args, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(file), text).unwrap();
        let mut command = wazoo(dir.path());
        command.arg("claim").args(*args).arg(&path).args(["--", "true"]);
        let (code, out, err) = output(&mut command).await;
        assert_eq!((code, out.as_str()), (2, ""), "{file} {args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{file} {args:?}: {err}");
    }
    let checker = client(&zk().address()).await;
    assert_eq!(checker.check_stat(&path).await.unwrap(), None, "nothing was asked of ZooKeeper");
}

/// ARCHITECTURE.md's walk-through is this family: its description is the file the tests install,
/// and every place it lists is there.
#[test]
fn architecture_walks_through_this_family() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let start = text.find("## Adding a claim family").expect("ARCHITECTURE.md has the walk-through");
    let section = &text[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    let description = std::fs::read_to_string(description()).unwrap();
    assert!(
        section.contains(&format!("```toml\n{description}```")),
        "ARCHITECTURE.md shows baton.family.toml as it is:\n{description}"
    );
    // Each bullet names its places in backticks before its first colon.
    let places: Vec<&str> = section
        .lines()
        .filter(|line| line.starts_with("- `"))
        .flat_map(|line| line.split(": ").next().unwrap().split('`').skip(1).step_by(2))
        .collect();
    assert!(places.len() >= 4, "the places it touched are listed: {places:?}");
    for place in &places {
        assert!(root().join(place).exists(), "ARCHITECTURE.md lists {place}, which is not there");
    }
    for made in [
        "tests/guests/baton/Cargo.toml",
        "tests/guests/baton/src/lib.rs",
        "tests/guests/baton/baton.family.toml",
        "tests/tests/family.rs",
    ] {
        assert!(places.contains(&made), "ARCHITECTURE.md lists {made}: {places:?}");
    }
}
