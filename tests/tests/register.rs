//! `wazoo register` (Curator's `PersistentNode`, service discovery) and `wazoo services`: the
//! registration stays present while CMD runs, made again when deleted, its data set back when
//! changed, never taking over another session's; gone when CMD ends.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// Waits, by watching it, until `path` exists holding `data`.
async fn wait_data(checker: &zookeeper_client::Client, path: &str, data: &[u8]) -> zookeeper_client::Stat {
    loop {
        match checker.get_and_watch_data(path).await {
            Ok((now, stat, watcher)) => {
                if now == data {
                    return stat;
                }
                watcher.changed().await;
            }
            Err(zookeeper_client::Error::NoNode) => {
                let (stat, watcher) = checker.check_and_watch_stat(path).await.unwrap();
                if stat.is_none() {
                    watcher.changed().await;
                }
            }
            Err(e) => panic!("watching {path}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_heals_while_its_command_runs_and_goes_when_it_ends() {
    let checker = client(&zk().address()).await;
    let dir = unique("register");
    let node = format!("{dir}/host1");
    let mut registrant = cli()
        .args(["register", &node, r#"{"port":8080}"#, "--", "sh", "-c"])
        .arg("echo \"up $WAZOO_REGISTERED_PATH\"; read line; echo done")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(registrant.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "the command starts", lines.next_line()).await.unwrap().unwrap();
    assert_eq!(line, format!("up {node}"));
    let stat = checker.check_stat(&node).await.unwrap().expect("registered");
    assert_ne!(stat.ephemeral_owner, 0, "an ephemeral node");

    // Listed by `wazoo services`.
    let (code, stdout, _) = output(cli().args(["services", &dir])).await;
    assert_eq!((code, stdout.as_str()), (0, "host1 {\"port\":8080}\n"));

    // Its data changed by someone: set back.
    checker.set_data(&node, b"tampered", None).await.unwrap();
    within(LIMIT, "the data is set back", wait_data(&checker, &node, br#"{"port":8080}"#)).await;

    // Deleted by someone: made again, by the same session.
    checker.delete(&node, None).await.unwrap();
    let again =
        within(LIMIT, "the node is made again", wait_data(&checker, &node, br#"{"port":8080}"#)).await;
    assert_eq!(again.ephemeral_owner, stat.ephemeral_owner);
    assert!(again.czxid > stat.czxid, "a new node");

    // The command ends: its status, the node gone.
    use tokio::io::AsyncWriteExt;
    registrant.stdin.take().unwrap().write_all(b"\n").await.unwrap();
    assert_eq!(within(LIMIT, "the command ends", lines.next_line()).await.unwrap().unwrap(), "done");
    let status = within(LIMIT, "wazoo ends", registrant.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "unregistered");
    let (code, _, stderr) = output(cli().args(["services", &dir])).await;
    assert_eq!(code, 1, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_registration_is_a_ttl_node_and_anothers_registration_is_never_taken() {
    let checker = client(&zk().address()).await;
    let dir = unique("register-ttl");
    let node = format!("{dir}/host1");
    let (code, stdout, stderr) = output(cli().args([
        "register",
        &node,
        "ttl",
        "--ttl",
        "600ms",
        "--",
        "sh",
        "-c",
        "sleep 1 & wait; echo $WAZOO_REGISTERED_DATA",
    ]))
    .await;
    // It lived through more than its TTL (touched by its tending), then went with the command.
    assert_eq!((code, stdout.as_str()), (0, "ttl\n"), "{stderr}");
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "unregistered");

    // Held by another session: refused (exit status 3), left alone.
    let other = client(&zk().address()).await;
    other
        .create(
            &dir,
            b"",
            &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .ok();
    other
        .create(
            &node,
            b"theirs",
            &zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let (code, _, stderr) = output(cli().args(["register", &node, "mine", "--", "true"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("another session"), "{stderr}");
    assert_eq!(checker.get_data(&node).await.unwrap().0, b"theirs");

    // Bad settings are usage errors.
    for args in [vec!["register", "no-slash", "x"], vec!["register", &node, "x", "--ttl", "soon"]] {
        let (code, _, stderr) = output(cli().args(&args)).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_is_made_again_in_a_new_session_after_its_session_expired() {
    let checker = client(&zk().address()).await;
    let node = format!("{}/host1", unique("register-expiry"));
    let proxy = wazoo_tests::proxy::Proxy::start(&zk().address()).await;
    let mut registrant = cli()
        .env("WAZOO_ZOOKEEPER", proxy.address())
        .env("WAZOO_SESSION_TIMEOUT", "2s")
        .args(["register", &node, "d", "--", "sh", "-c"])
        .arg("echo up; read line; echo done")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(registrant.stdout.take().unwrap()).lines();
    assert_eq!(within(LIMIT, "the command starts", lines.next_line()).await.unwrap().unwrap(), "up");
    let first = checker.check_stat(&node).await.unwrap().expect("registered");

    // Silenced until ZooKeeper expires its session, which deletes the ephemeral node.
    proxy.freeze();
    within(LIMIT, "the session expires", wait_gone(&checker, &node)).await;
    proxy.thaw();

    // Made again, by a new session, while the command runs on.
    let again = within(LIMIT, "the node is made again", wait_data(&checker, &node, b"d")).await;
    assert_ne!(again.ephemeral_owner, first.ephemeral_owner, "a new session's node");
    assert_ne!(again.ephemeral_owner, 0);

    use tokio::io::AsyncWriteExt;
    registrant.stdin.take().unwrap().write_all(b"\n").await.unwrap();
    assert_eq!(within(LIMIT, "the command ends", lines.next_line()).await.unwrap().unwrap(), "done");
    let out = within(LIMIT, "wazoo ends", registrant.wait_with_output()).await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("registered again"), "{stderr}");
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "unregistered");
}
