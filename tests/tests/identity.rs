//! Who holds a claim: `--id` (default `HOSTNAME:PID`) is the data of the claim's node, through
//! this process's own session and through a daemon (which adds the client session's name and
//! address, so clients on its one ZooKeeper session are told apart). `wazoo holders` shows it,
//! kazoo's `contenders()` reads it from wazoo's nodes, and wazoo reads kazoo's identifier and
//! Curator's client address from theirs.

use std::net::IpAddr;

use serde_json::Value;
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::procs::{forks, through, Running};
use wazoo_tests::{client, plugins, root, unique, wait_children, zk, Curator, Kazoo};

/// The node data of `node`, as text.
async fn data_of(checker: &zookeeper_client::Client, node: &str) -> String {
    String::from_utf8(checker.get_data(node).await.unwrap().0).unwrap()
}

/// `wazoo holders PATH --json` run by `command`: each contender's data, in queue order.
async fn holders(mut command: tokio::process::Command, path: &str) -> Vec<(String, String)> {
    let (code, out, err) = output(command.args(["holders", path, "--json"])).await;
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            (v["state"].as_str().unwrap().to_string(), v["data"].as_str().unwrap().to_string())
        })
        .collect()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_id_is_the_claims_node_data_and_holders_shows_it() {
    let checker = client(&zk().address()).await;

    // --id, on each claim command.
    for (args, env_node) in [
        (vec!["lock", "--id", "deploy-7"], "lock"),
        (vec!["rwlock", "read", "--id", "deploy-7"], "rwlock"),
        (vec!["semaphore", "--leases", "2", "--id", "deploy-7"], "semaphore"),
    ] {
        let path = unique(&format!("identity-{env_node}"));
        let mut command = cli();
        command.args(&args).arg(&path).args(["sh", "-c", &forks()]);
        let mut running = Running::start(&mut command);
        let cmd = running.pids().await;
        assert_eq!(data_of(&checker, &cmd.node).await, "deploy-7", "{args:?}");
        let seen = holders(cli(), &path).await;
        assert_eq!(seen[0], ("holds".to_string(), "deploy-7".to_string()), "{args:?}: {seen:?}");
        running.signal(libc::SIGTERM);
        running.exit().await;
    }

    // No --id: HOSTNAME:PID of the wazoo process.
    let path = unique("identity-default");
    let mut command = cli();
    command.args(["lock", &path, "sh", "-c", &forks()]);
    let mut running = Running::start(&mut command);
    let cmd = running.pids().await;
    assert_eq!(data_of(&checker, &cmd.node).await, format!("{}:{}", hostname(), running.pid()));
    running.signal(libc::SIGTERM);
    running.exit().await;

    // An id that is not one line of printable text is refused before anything is made.
    let path = unique("identity-bad");
    let (code, _, err) = output(cli().args(["lock", "--id", "two\nlines", &path, "true"])).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("error: invalid value") && err.contains("'--id <ID>'"), "{err}");
    assert!(checker.check_stat(&path).await.unwrap().is_none(), "nothing made at {path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_daemon_clients_on_its_one_session_are_told_apart() {
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    let checker = client(&zk().address()).await;
    let path = unique("identity-daemon");

    let mut alice = through(&daemon);
    alice.args(["lock", "--id", "alice", &path, "sh", "-c", &forks()]);
    let mut alice = Running::start(&mut alice);
    let held = alice.pids().await;
    let mut bob = through(&daemon);
    bob.args(["lock", "--id", "bob", &path, "true"]);
    let mut bob = Running::start(&mut bob);
    let nodes = wait_children(&checker, &path, 2).await;

    let mut data = Vec::new();
    let mut owners = Vec::new();
    for node in &nodes {
        let (bytes, stat) = checker.get_data(&format!("{path}/{node}")).await.unwrap();
        data.push(String::from_utf8(bytes).unwrap());
        owners.push(stat.ephemeral_owner);
    }
    assert_eq!(owners[0], owners[1], "both claims live on the daemon's one ZooKeeper session");
    data.sort();
    let session = format!("(session wazoo lock at {path} from 127.0.0.1:");
    assert!(data[0].starts_with(&format!("alice {session}")), "{data:?}");
    assert!(data[1].starts_with(&format!("bob {session}")), "{data:?}");
    assert_eq!(data_of(&checker, &held.node).await, data[0], "alice holds");

    // `holders` through the daemon tells them apart: alice holds, bob waits.
    let seen = holders(daemon.wazoo(), &path).await;
    assert_eq!(seen, [("holds".to_string(), data[0].clone()), ("waits".to_string(), data[1].clone())]);

    alice.signal(libc::SIGTERM);
    alice.exit().await;
    assert_eq!(bob.exit().await.0, 0, "bob took the lock after alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_reads_the_id_and_wazoo_reads_kazoos_and_curators() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("identity-kazoo");

    // wazoo holds with --id: kazoo's contenders() is that id.
    let mut command = cli();
    command.args(["lock", "--recipe", "lock-kazoo", "--id", "wz-1", &path, "sh", "-c", &forks()]);
    let mut running = Running::start(&mut command);
    running.pids().await;
    let mut kazoo = Kazoo::run("tests/python/kazoo_lock_peer.py", &[&address, &path, "lock"]).await;
    assert_eq!(kazoo.ask("contenders").await, r#"contenders ["wz-1"]"#);

    // kazoo holds: wazoo's holders shows kazoo's identifier.
    kazoo.send("acquire -1").await;
    wait_children(&checker, &path, 2).await;
    running.signal(libc::SIGTERM);
    running.exit().await;
    assert!(kazoo.line().await.starts_with("acquired "));
    // (`holders` reads Curator's formats; `claims` lists kazoo's too.)
    let (code, out, err) = output(cli().args(["claims", &path, "--json"])).await;
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let contenders = &listed["claims"][0]["contenders"];
    assert_eq!(contenders.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(
        (contenders[0]["state"].as_str(), contenders[0]["identity"].as_str()),
        (Some("holds"), Some("kazoo peer"))
    );
    assert_eq!(kazoo.ask("release").await, "released");

    // Curator holds a mutex: its node's data is its client's address, which holders shows; and a
    // wazoo lock with an id is refused while Curator holds.
    let path = unique("identity-curator");
    let mut curator = Curator::start(&address, &path, "mutex").await;
    curator.send("acquire -1").await;
    assert!(curator.line().await.starts_with("acquired "));
    let seen = holders(cli(), &path).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, "holds");
    assert!(seen[0].1.parse::<IpAddr>().is_ok(), "Curator's data is its client's address: {seen:?}");
    let (code, _, err) = output(cli().args(["lock", "-n", "--id", "wz-2", &path, "true"])).await;
    assert_eq!(code, 3, "{err}");
    curator.send("release").await;
    assert_eq!(curator.line().await, "released");
}

/// The Python client names who holds: `lock(holder_id=…)` and kazoo's `Lock(identifier=…)`,
/// through the daemon, with the session's name and address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_gives_its_holder_id() {
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    let installed = wazoo_tests::python::install().await;
    let base = unique("identity-python");
    let script = r#"
import sys, wazoo
address, base = sys.argv[1:3]
c = wazoo.Client(address, ttl=5, name="py-session")
held = c.lock(base + "/a", timeout=10, holder_id="py-1")
print("lock", c.contenders(base + "/a", "lock")[0].data.decode(), flush=True)
lock = c.Lock(base + "/b", identifier="py-2")
assert lock.acquire(timeout=10)
print("Lock", lock.contenders()[0].data.decode(), flush=True)
"#;
    let mut command = tokio::process::Command::new("python3");
    command
        .args(["-c", script, &daemon.grpc, &base])
        .env("PYTHONPATH", installed.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true);
    let (code, stdout, stderr) = output(&mut command).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let said = |key: &str| lines.iter().find_map(|l| l.strip_prefix(&format!("{key} "))).unwrap().to_string();
    for (key, id) in [("lock", "py-1"), ("Lock", "py-2")] {
        let data = said(key);
        assert!(data.starts_with(&format!("{id} (session py-session from 127.0.0.1:")), "{key}: {data}");
    }
}
