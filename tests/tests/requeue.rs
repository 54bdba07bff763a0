//! `wazoo elect --requeue` (Curator's `LeaderSelector` with `autoRequeue`): the leader campaigns
//! again when its command ends, for `--max-terms` terms, taking turns with other requeueing
//! leaders, Curator's `LeaderSelector` among them (`--format selector`, both directions).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// A term's command: logs `<who> enter <term>`, works in a forked child, logs `<who> exit`.
fn term_command(who: &str, log: &std::path::Path) -> String {
    let log = log.display();
    format!("echo \"{who} enter $WAZOO_TERM\" >> {log}; sleep 0.2 & wait; echo \"{who} exit\" >> {log}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeueing_leader_and_curators_leader_selector_take_turns_on_one_path() {
    let checker = client(&zk().address()).await;
    let path = unique("requeue-curator");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");

    // Curator leads first.
    let kind = format!("selector:curator:{}", log.display());
    let mut curator = Curator::start(&zk().address(), &path, &kind).await;
    assert_eq!(curator.line().await, "leading");

    let mut wazoo = cli()
        .args(["elect", &path, "--format", "selector", "--id", "wazoo", "--requeue", "--max-terms", "2"])
        .args(["--backoff", "100ms", "--", "sh", "-c", &term_command("W", &log)])
        .spawn()
        .unwrap();
    // wazoo waits in Curator's queue, as a participant Curator sees with its id.
    wait_children(&checker, &path, 2).await;
    curator.send("participants").await;
    assert_eq!(curator.line().await, "participants curator:leader wazoo:waits");

    // Curator yields: wazoo leads its first term; when it ends, Curator (requeued meanwhile)
    // leads again; Curator yields again: wazoo's second and last term.
    curator.send("yield").await;
    assert_eq!(curator.line().await, "yielded");
    assert_eq!(curator.line().await, "leading");
    // wazoo campaigns again after its back-off: it is queued behind Curator before Curator yields.
    wait_children(&checker, &path, 2).await;
    curator.send("yield").await;
    assert_eq!(curator.line().await, "yielded");
    let status = within(LIMIT, "wazoo ends after two terms", wazoo.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(curator.line().await, "leading", "Curator leads once wazoo is done");

    let terms = std::fs::read_to_string(&log).unwrap();
    let expected = "C enter\nC exit\nW enter 1\nW exit\nC enter\nC exit\nW enter 2\nW exit\nC enter\n";
    assert_eq!(terms, expected, "never two leaders, turns in queue order");
    curator.send("quit").await;
    assert_eq!(curator.line().await, "bye");
    wait_children(&checker, &path, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeueing_leaders_take_turns_for_their_terms_and_a_signal_ends_the_terms() {
    let checker = client(&zk().address()).await;
    let path = unique("requeue");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let start = |who: &str| {
        cli()
            .args(["elect", &path, "--id", who, "--requeue", "--max-terms", "3", "--backoff", "50ms"])
            .args(["--", "sh", "-c", &term_command(who, &log)])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (start("A"), start("B"));
    let (sa, sb) =
        within(LIMIT, "both end after three terms", async { (a.wait().await, b.wait().await) }).await;
    assert_eq!((sa.unwrap().code(), sb.unwrap().code()), (Some(0), Some(0)));
    let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 12, "{lines:?}");
    let mut terms = std::collections::HashMap::<String, Vec<String>>::new();
    for pair in lines.chunks(2) {
        let (who, term) = pair[0].split_once(" enter ").expect("an enter line first");
        assert_eq!(pair[1], format!("{who} exit"), "a term ends before the next begins: {lines:?}");
        terms.entry(who.to_string()).or_default().push(term.to_string());
    }
    for who in ["A", "B"] {
        assert_eq!(terms[who], ["1", "2", "3"], "{who}'s terms, numbered: {lines:?}");
    }
    wait_children(&checker, &path, 0).await;

    // Without --max-terms it campaigns on; SIGTERM during a term stops the command and ends the
    // terms (128 + 15), leaving nothing behind.
    let mut leader = cli()
        .args(["elect", &path, "--requeue", "--backoff", "50ms", "--"])
        .args(["sh", "-c", "echo \"term $WAZOO_TERM\"; sleep 30 & wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(leader.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "the first term starts", lines.next_line()).await.unwrap().unwrap();
    assert_eq!(line, "term 1");
    assert_eq!(unsafe { libc::kill(leader.id().unwrap() as i32, libc::SIGTERM) }, 0);
    let status = within(LIMIT, "a signal ends the terms", leader.wait()).await.unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(within(LIMIT, "no second term", lines.next_line()).await.unwrap().is_none());
    wait_children(&checker, &path, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_settings_are_checked() {
    let path = unique("requeue-usage");
    for args in [
        vec!["elect", &path, "--requeue"],
        vec!["elect", &path, "--max-terms", "2", "--", "true"],
        vec!["elect", &path, "--backoff", "1s", "--", "true"],
        vec!["elect", &path, "--requeue", "--max-terms", "0", "--", "true"],
        vec!["elect", &path, "--requeue", "--backoff", "soon", "--", "true"],
        vec!["elect", &path, "--format", "leaderlatch", "--", "true"],
    ] {
        let (code, _, stderr) = output(cli().args(&args)).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") || stderr.starts_with("wazoo: "), "{args:?}: {stderr}");
    }
}
