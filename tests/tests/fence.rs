//! Fencing tokens checked where the protected resource lives: `wazoo fence check|write`, run as
//! a user runs them, against a real ZooKeeper, locally and through a `wazoo serve` daemon.

use std::time::Duration;

use tokio::process::Command;
use wazoo_runtime::{Held, LockHandle};
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// Takes the lock at `path` on a handle of its own.
async fn hold(host: &wazoo_runtime::Host, path: &str) -> (LockHandle, Held) {
    let mut handle = host.lock("lock").await.unwrap();
    let held = within(LIMIT, "the lock is taken", handle.acquire(path, None)).await.unwrap();
    (handle, held)
}

/// The token and value a fenced write left at `path`.
async fn fenced(checker: &zookeeper_client::Client, path: &str) -> (i64, String) {
    let (data, _) = checker.get_data(path).await.unwrap();
    let text = String::from_utf8(data).unwrap();
    let (token, value) = text.split_once('\n').expect("TOKEN newline VALUE");
    (token.parse().unwrap(), value.to_string())
}

/// `wazoo` for one fence call: the local CLI, or the CLI through a daemon (with no ZooKeeper
/// of its own to reach).
#[derive(Clone, Copy)]
enum Via<'a> {
    Local,
    Daemon(&'a Daemon),
}

impl Via<'_> {
    fn wazoo(self) -> Command {
        let mut command = cli();
        if let Via::Daemon(daemon) = self {
            command.env("WAZOO_ZOOKEEPER", "127.0.0.1:1").arg("--server").arg(&daemon.grpc);
        }
        command
    }

    async fn check(self, node: &str, token: i64) -> (i32, String, String) {
        output(self.wazoo().args(["fence", "check", node, &token.to_string()])).await
    }

    async fn write(self, node: &str, token: i64, path: &str, value: &str) -> (i32, String, String) {
        output(self.wazoo().args(["fence", "write", node, &token.to_string(), path, value])).await
    }
}

/// The holder's write is accepted; once the lock passes on, the old holder's token is refused by
/// `check` and `write` alike, and the new holder's is accepted.
async fn the_lock_passing_on_fences_off_the_old_holder(via: Via<'_>) {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let lock = unique("fence-lock");
    // The protected value's parent does not exist yet: the first write creates it.
    let register = format!("{}/accounts/balance", unique("fence-data"));
    let (mut first, a) = hold(&host, &lock).await;
    let (code, stdout, stderr) = via.check(&a.node, a.token).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = via.write(&a.node, a.token, &register, "100").await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains(&format!("token {}", a.token)), "{stdout}");
    assert_eq!(fenced(&checker, &register).await, (a.token, "100".to_string()));

    let (mut second, b) = {
        let mut handle = host.lock("lock").await.unwrap();
        let path = lock.clone();
        let waiting = tokio::spawn(async move {
            let held = handle.acquire(&path, None).await.unwrap();
            (handle, held)
        });
        wait_children(&checker, &lock, 2).await;
        first.release().await.unwrap();
        within(LIMIT, "the lock passes on", waiting).await.unwrap()
    };
    assert!(b.token > a.token);
    let (code, stdout, stderr) = via.check(&a.node, a.token).await;
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("gone"), "{stderr}");
    let (code, _, stderr) = via.write(&a.node, a.token, &register, "0").await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("gone"), "{stderr}");
    assert_eq!(
        fenced(&checker, &register).await,
        (a.token, "100".to_string()),
        "the refused write left nothing"
    );
    // The new holder's node with the old token: another token.
    let (code, _, stderr) = via.check(&b.node, a.token).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(&format!("token {}", b.token)), "{stderr}");
    let (code, stdout, stderr) = via.check(&b.node, b.token).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = via.write(&b.node, b.token, &register, "250").await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(fenced(&checker, &register).await, (b.token, "250".to_string()));
    second.release().await.unwrap();
}

/// Two holders of different locks write one path: once the higher token wrote, the lower one is
/// refused even though its holder still holds its lock.
async fn a_lower_token_is_refused_after_a_higher_one_wrote(via: Via<'_>) {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let register = unique("fence-shared");
    let (mut older, low) = hold(&host, &unique("fence-lock-one")).await;
    let (mut newer, high) = hold(&host, &unique("fence-lock-two")).await;
    assert!(high.token > low.token);
    let (code, stdout, stderr) = via.write(&low.node, low.token, &register, "first").await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = via.write(&high.node, high.token, &register, "second").await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = via.write(&low.node, low.token, &register, "third").await;
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("token {}", high.token)), "{stderr}");
    assert_eq!(fenced(&checker, &register).await, (high.token, "second".to_string()));
    // The same token again is accepted: a write that is tried again after a lost reply.
    let (code, stdout, stderr) = via.write(&high.node, high.token, &register, "second").await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    older.release().await.unwrap();
    newer.release().await.unwrap();
}

/// A token that is not an integer is a usage error; a node that never existed is `gone`.
async fn bad_input_gets_one_line_and_its_exit_status(via: Via<'_>) {
    let (code, _, stderr) = output(via.wazoo().args(["fence", "check", "/some/node", "12ab"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.lines().next().unwrap_or_default().contains("12ab"), "{stderr}");
    let (code, _, stderr) = output(via.wazoo().args(["fence", "write", "/some/node", "x", "/p", "v"])).await;
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = via.check(&unique("fence-never"), 7).await;
    assert_eq!((code, stderr.lines().count()), (1, 1), "{stderr}");
    assert!(stderr.contains("gone"), "{stderr}");
    let (code, _, stderr) = via.write("relative", 7, "/p", "v").await;
    assert_eq!((code, stderr.lines().count()), (2, 1), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_the_lock_passing_on_fences_off_the_old_holder() {
    the_lock_passing_on_fences_off_the_old_holder(Via::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_a_lower_token_is_refused_after_a_higher_one_wrote() {
    a_lower_token_is_refused_after_a_higher_one_wrote(Via::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_bad_input_gets_one_line_and_its_exit_status() {
    bad_input_gets_one_line_and_its_exit_status(Via::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemon_the_lock_passing_on_fences_off_the_old_holder() {
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    the_lock_passing_on_fences_off_the_old_holder(Via::Daemon(&daemon)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemon_a_lower_token_is_refused_after_a_higher_one_wrote() {
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    a_lower_token_is_refused_after_a_higher_one_wrote(Via::Daemon(&daemon)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemon_bad_input_gets_one_line_and_its_exit_status() {
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    bad_input_gets_one_line_and_its_exit_status(Via::Daemon(&daemon)).await;
}

/// Writers racing on one path with the same token all get through: a write that finds the path
/// changed under it reads it again and tries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_writes_are_tried_again_not_refused() {
    let checker = client(&zk().address()).await;
    let host = host().await;
    let register = unique("fence-race");
    let (mut handle, held) = hold(&host, &unique("fence-lock-race")).await;
    let writers: Vec<_> = (0..6)
        .map(|i| {
            let (node, register) = (held.node.clone(), register.clone());
            tokio::spawn(
                async move { Via::Local.write(&node, held.token, &register, &format!("w{i}")).await },
            )
        })
        .collect();
    for w in writers {
        let (code, stdout, stderr) = w.await.unwrap();
        assert_eq!(code, 0, "{stdout}{stderr}");
    }
    let (_, stat) = checker.get_data(&register).await.unwrap();
    assert_eq!(stat.version, 5, "six writes: a create and five updates");
    handle.release().await.unwrap();
}
