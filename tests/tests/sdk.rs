//! The host calls `wazoo:zk@0.1.1` and `0.1.2` added so that every guest SDK is thinner and
//! faster, each against real ZooKeeper, through the test-only guest `misbehave`
//! (tests/guests/misbehave), which makes one call per command: `znode.create-protected` (a lost
//! reply returns the node the server made, once, recorded in the handle's ledger),
//! `watch.wait-for-change` and `watcher.changed` (a change, a deletion, a timeout, the session's
//! end), `session.owns`, and `znode.pipeline` (steps sent together, answered in order, a lost
//! reply recovered). And components built against `wazoo:zk@0.1.0`, `0.1.1`, `0.1.2` and `0.1.3`
//! still link and run.

use std::time::{Duration, Instant};

use wazoo_runtime::{CustomHandle, Host};
use wazoo_tests::proxy::{op, Proxy};
use wazoo_tests::*;
use zookeeper_client::{Acls, Client, CreateMode};

const LIMIT: Duration = Duration::from_secs(60);

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// A fresh persistent directory, so the next create under it is the guest's node itself.
async fn prepared(checker: &Client, name: &str) -> String {
    let path = unique(name);
    checker.mkdir(&path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    path
}

/// Runs one `misbehave` command: its ok text, or its error text.
async fn run(handle: &mut CustomHandle, words: &[&str]) -> Result<String, String> {
    within(LIMIT, &words.join(" "), handle.run(&args(words))).await.expect("the call reaches the guest")
}

/// What `create-protected` returned: the node's path, czxid and ephemeral owner.
fn created(text: &str) -> (String, i64, i64) {
    let mut parts = text.split(' ');
    let path = parts.next().unwrap().to_string();
    let czxid = parts.next().unwrap().parse().unwrap();
    let owner = parts.next().unwrap().parse().unwrap();
    (path, czxid, owner)
}

/// Whether `name` is Curator's protected name for `name_part`: `_c_<uuid>-<name_part>`, then
/// (`sequential`) a 10-digit sequence.
fn protected_name(name: &str, name_part: &str, sequential: bool) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    let (uuid, tail) = rest.split_at(36.min(rest.len()));
    let uuid_ok = uuid.len() == 36
        && uuid.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    let Some(tail) = tail.strip_prefix('-').and_then(|t| t.strip_prefix(name_part)) else { return false };
    uuid_ok
        && if sequential {
            tail.len() == 10 && tail.bytes().all(|b| b.is_ascii_digit())
        } else {
            tail.is_empty()
        }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_protected_create_whose_reply_is_lost_on_the_wire_returns_the_one_node_the_server_made() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let dir = prepared(&checker, "sdk-protected-wire").await;
    let mut handle = host.custom("misbehave").await.unwrap();

    // The create reaches the server; the connection is cut before its reply gets back.
    proxy.lose_reply(op::CREATES, 1);
    let text = run(&mut handle, &["create-protected", &dir, "lock-", "ephemeral-sequential"]).await.unwrap();
    assert_eq!(proxy.lost_replies(), 1, "the reply was not lost");
    assert_eq!(proxy.lost_errors(), vec![0], "the lost create did not succeed on the server");

    let (path, czxid, owner) = created(&text);
    let nodes = children(&checker, &dir).await;
    assert_eq!(nodes.len(), 1, "exactly one node after a lost reply: {nodes:?}");
    assert_eq!(format!("{dir}/{}", nodes[0]), path, "the node returned is the one the server made");
    assert!(protected_name(&nodes[0], "lock-", true), "Curator's protected name: {}", nodes[0]);
    let stat = checker.check_stat(&path).await.unwrap().unwrap();
    assert_eq!((stat.czxid, stat.ephemeral_owner), (czxid, owner), "the stat returned is the node's");
    assert_eq!(owner, handle.live().session_id());
    assert_eq!(handle.ledger(), vec![path.clone()], "the node found again is recorded as the handle's");

    handle.close().await;
    assert!(children(&checker, &dir).await.is_empty(), "closing the handle deleted the node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_protected_create_answered_with_connection_loss_finds_its_node_in_every_mode() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    for (mode, sequential, ephemeral) in [
        ("ephemeral-sequential", true, true),
        ("ephemeral", false, true),
        ("persistent-sequential", true, false),
        ("persistent", false, false),
    ] {
        let dir = prepared(&checker, &format!("sdk-protected-{mode}")).await;
        let mut handle = host.custom("misbehave").await.unwrap();
        host.faults().lose_create_replies(1);
        let text = run(&mut handle, &["create-protected", &dir, "item-", mode]).await.unwrap();
        assert_eq!(host.faults().pending_lost_create_replies(), 0, "{mode}: the fault was not injected");
        let (path, czxid, owner) = created(&text);
        let nodes = children(&checker, &dir).await;
        assert_eq!(nodes.len(), 1, "{mode}: exactly one node: {nodes:?}");
        assert_eq!(format!("{dir}/{}", nodes[0]), path, "{mode}");
        assert!(protected_name(&nodes[0], "item-", sequential), "{mode}: {}", nodes[0]);
        let (data, stat) = checker.get_data(&path).await.unwrap();
        assert_eq!(
            (data.as_slice(), stat.czxid, stat.ephemeral_owner),
            (&b"sdk"[..], czxid, owner),
            "{mode}"
        );
        if ephemeral {
            assert_eq!(owner, handle.live().session_id(), "{mode}");
            assert_eq!(handle.ledger(), vec![path.clone()], "{mode}: recorded in the ledger");
        } else {
            assert_eq!(owner, 0, "{mode}");
            assert!(!handle.tracks_nodes(), "{mode}: persistent nodes are not the handle's to delete");
        }
        handle.close().await;
        let left = children(&checker, &dir).await.len();
        assert_eq!(
            left,
            usize::from(!ephemeral),
            "{mode}: an ephemeral node goes with the handle, a persistent one stays"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_protected_create_makes_missing_parents_and_checks_its_arguments() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let top = unique("sdk-parents");
    let dir = format!("{top}/a/b");
    let mut handle = host.custom("misbehave").await.unwrap();
    let (path, _, _) = created(
        &run(&mut handle, &["create-protected", &dir, "lease-", "ephemeral-sequential"]).await.unwrap(),
    );
    assert_eq!(path.rsplit_once('/').unwrap().0, dir);
    for parent in [top.as_str(), &format!("{top}/a"), &dir] {
        // (Made as containers; ZooKeeper shows a container's owner as 0, like a persistent node's.)
        let stat = checker.check_stat(parent).await.unwrap().expect("the parent was made");
        assert_eq!(stat.ephemeral_owner, 0, "{parent} belongs to no session");
    }
    let refused = run(&mut handle, &["create-protected", &dir, "a/b", "ephemeral"]).await.unwrap_err();
    assert!(refused.contains("InvalidArgument"), "{refused}");
    let refused = run(&mut handle, &["create-protected", "relative", "x-", "ephemeral"]).await.unwrap_err();
    assert!(refused.contains("InvalidPath"), "{refused}");
    handle.close().await;
    assert!(children(&checker, &dir).await.is_empty());
}

/// Starts `words` on `handle` in a task of its own; returns it once the host has armed one more
/// watch than `armed` (the guest is waiting on ZooKeeper now).
async fn waiting(
    host: &Host,
    mut handle: CustomHandle,
    words: &[&str],
) -> tokio::task::JoinHandle<(CustomHandle, Result<String, String>, Duration)> {
    let armed = host.stats().watches_armed();
    let what = words.join(" ");
    let words = args(words);
    let task = tokio::spawn(async move {
        let started = Instant::now();
        let result = handle.run(&words).await.expect("the call reaches the guest");
        (handle, result, started.elapsed())
    });
    within(LIMIT, "the guest arms its watch", host.stats().armed_at_least(armed + 1)).await;
    // Still waiting a moment later: it waits for the change, not merely arms a watch.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!task.is_finished(), "{what}: returned before anything changed");
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wait_for_change_returns_on_delete_on_data_change_and_at_once_for_an_absent_node() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = prepared(&checker, "sdk-wait").await;

    let wakeups = host.stats().watch_wakeups();
    let task =
        waiting(&host, host.custom("misbehave").await.unwrap(), &["wait-for-change", &path, "30000"]).await;
    checker.set_data(&path, b"changed", None).await.unwrap();
    let (handle, result, _) = within(LIMIT, "the waiter wakes on a data change", task).await.unwrap();
    assert_eq!(result.as_deref(), Ok("changed"));
    assert!(checker.check_stat(&path).await.unwrap().is_some());
    assert_eq!(host.stats().watch_wakeups(), wakeups + 1, "one guest woken by ZooKeeper");

    let task = waiting(&host, handle, &["wait-for-change", &path, "none"]).await;
    checker.delete(&path, None).await.unwrap();
    let (mut handle, result, _) = within(LIMIT, "the waiter wakes on a delete", task).await.unwrap();
    assert_eq!(result.as_deref(), Ok("changed"));

    // Gone already: at once, and no watch left behind.
    let armed = host.stats().watches_armed();
    let started = Instant::now();
    assert_eq!(run(&mut handle, &["wait-for-change", &path, "none"]).await.as_deref(), Ok("changed"));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(host.stats().watches_armed(), armed, "no watch armed on an absent node");
    handle.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wait_for_change_and_watcher_changed_time_out_when_nothing_happens() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = prepared(&checker, "sdk-timeout").await;
    let mut handle = host.custom("misbehave").await.unwrap();
    for command in ["wait-for-change", "changed"] {
        let started = Instant::now();
        let result = run(&mut handle, &[command, &path, "300"]).await;
        let took = started.elapsed();
        assert!(matches!(&result, Err(text) if text.contains("Timeout")), "{command}: {result:?}");
        assert!(took >= Duration::from_millis(300), "{command}: returned after {took:?}");
        assert!(took < Duration::from_secs(10), "{command}: returned after {took:?}");
    }
    // `changed` returns the node event itself.
    let task = waiting(&host, handle, &["changed", &path, "30000"]).await;
    checker.delete(&path, None).await.unwrap();
    let (handle, result, _) = within(LIMIT, "changed wakes on a delete", task).await.unwrap();
    assert_eq!(result.as_deref(), Ok("EventKind::NodeDeleted"));
    handle.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wait_for_change_and_watcher_changed_report_the_sessions_end_as_session_expired() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = prepared(&checker, "sdk-expiry").await;
    // The waiting host reaches ZooKeeper through a proxy that can silence it.
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
    let waiter =
        waiting(&host, host.custom("misbehave").await.unwrap(), &["wait-for-change", &path, "none"]).await;
    let watcher = waiting(&host, host.custom("misbehave").await.unwrap(), &["changed", &path, "none"]).await;
    let live = host.live().await.unwrap();

    // Silenced past its timeout, the session ends; neither call returns anything but that.
    proxy.freeze();
    for (what, task) in [("wait-for-change", waiter), ("changed", watcher)] {
        let (handle, result, _) = within(LIMIT, what, task).await.unwrap();
        assert!(matches!(&result, Err(text) if text.contains("SessionExpired")), "{what}: {result:?}");
        handle.close().await;
    }
    proxy.thaw();
    assert!(live.ended().is_some(), "the session ended");
    assert!(checker.check_stat(&path).await.unwrap().is_some(), "the node never changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn owns_is_true_only_for_this_sessions_node_holding_the_data_asked_for() {
    let host = host().await;
    let address = zk().address();
    let checker = client(&address).await;
    let dir = prepared(&checker, "sdk-owns").await;
    let mut handle = host.custom("misbehave").await.unwrap();
    let (mine, _, _) =
        created(&run(&mut handle, &["create-protected", &dir, "m-", "ephemeral"]).await.unwrap());

    let h = &mut handle;
    assert_eq!(run(h, &["owns", &mine]).await.as_deref(), Ok("true"));
    assert_eq!(run(h, &["owns", &mine, "sdk"]).await.as_deref(), Ok("true"), "the data it was made with");
    assert_eq!(run(h, &["owns", &mine, "other"]).await.as_deref(), Ok("false"), "other data");

    // Another session's ephemeral node, a persistent node, and no node are not ours.
    let other_session = client(&address).await;
    let theirs = format!("{dir}/theirs");
    other_session
        .create(&theirs, b"sdk", &CreateMode::Ephemeral.with_acls(Acls::anyone_all()))
        .await
        .unwrap();
    let none = format!("{dir}/none");
    assert_eq!(run(h, &["owns", &theirs]).await.as_deref(), Ok("false"), "another session's node");
    assert_eq!(run(h, &["owns", &theirs, "sdk"]).await.as_deref(), Ok("false"));
    assert_eq!(run(h, &["owns", &dir]).await.as_deref(), Ok("false"), "a persistent node");
    assert_eq!(run(h, &["owns", &none]).await.as_deref(), Ok("false"), "no node");
    assert_eq!(run(h, &["owns", &none, "sdk"]).await.as_deref(), Ok("false"));
    assert!(run(h, &["owns", "relative"]).await.is_err_and(|e| e.contains("InvalidPath")));
    handle.close().await;
}

/// `bytes` with every `wazoo:zk/…@0.1.5` import renamed `…@{version}` (same length, so the
/// component stays valid): what a component built against that version imports.
fn as_built_against(bytes: &[u8], version: &str) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let (from, to) = (b"wazoo:zk/", (b"@0.1.5", format!("@{version}")));
    assert_eq!(to.1.len(), to.0.len());
    let mut i = 0;
    while let Some(at) = out[i..].windows(from.len()).position(|w| w == from) {
        let start = i + at;
        let end = (start..out.len().min(start + 64)).find(|&j| out[j] == b'@').unwrap_or(start);
        if out[end..].starts_with(to.0) {
            out[end..end + to.0.len()].copy_from_slice(to.1.as_bytes());
        }
        i = start + from.len();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn components_built_against_wazoo_zk_0_1_0_to_0_1_2_still_link_and_run() {
    // The `tree` recipe imports only calls 0.1.0 had; renamed, it is a 0.1.0 (0.1.1, 0.1.2) component.
    let built = std::fs::read(plugins().join("tree.wasm")).unwrap();
    let dir = std::env::temp_dir().join(format!("wazoo-sdk-old-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for version in ["0.1.0", "0.1.1", "0.1.2"] {
        let old = as_built_against(&built, version);
        let text = String::from_utf8_lossy(&old);
        assert!(
            text.contains(&format!("wazoo:zk/znode@{version}")) && !text.contains("wazoo:zk/znode@0.1.3")
        );
        std::fs::write(dir.join(format!("tree-{}.wasm", version.replace('.', "-"))), &old).unwrap();
    }
    // And as built against 0.1.3 and 0.1.4, the versions before this host's 0.1.5.
    for version in ["0.1.3", "0.1.4"] {
        let old = as_built_against(&built, version);
        let text = String::from_utf8_lossy(&old);
        assert!(
            text.contains(&format!("wazoo:zk/znode@{version}")) && !text.contains("wazoo:zk/znode@0.1.5")
        );
        std::fs::write(dir.join(format!("tree-{}.wasm", version.replace('.', "-"))), &old).unwrap();
    }

    let checker = client(&zk().address()).await;
    let path = prepared(&checker, "sdk-old").await;
    checker
        .create(&format!("{path}/leaf"), b"12345", &CreateMode::Persistent.with_acls(Acls::anyone_all()))
        .await
        .unwrap();
    let mut settings = config(&zk().address(), Duration::from_secs(10));
    settings.plugins = dir.clone();
    let host = Host::start(settings).await.unwrap();
    for name in ["tree-0-1-0", "tree-0-1-1", "tree-0-1-2", "tree-0-1-3", "tree-0-1-4"] {
        let mut handle = host.custom(name).await.expect("an older component links on a 0.1.5 host");
        let out = within(LIMIT, "tree", handle.run(&args(&[&path]))).await.unwrap().unwrap();
        assert!(out.contains("leaf  [5 bytes]"), "{name}: {out}");
        handle.close().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `znode.pipeline`: every step goes out before the first reply is back (one round trip), the
/// results come in step order, each step sees what the ones before it did, and a step the host
/// refuses or the server fails fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pipeline_sends_its_steps_together_and_answers_each_in_order() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let dir = prepared(&checker, "sdk-pipeline").await;
    let mut handle = host.custom("misbehave").await.unwrap();
    // Replies held back a while: a request sent only after the reply to the one before it
    // cannot reach the proxy before that reply has been passed on.
    proxy.delay(Duration::from_millis(40));
    proxy.tap(None);
    let text = run(&mut handle, &["pipeline", &dir]).await.unwrap();
    let log = proxy.untap();
    proxy.delay(Duration::ZERO);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "{text}");
    let (created, czxid) = lines[0].strip_prefix("created ").unwrap().split_once(' ').unwrap();
    let name = created.strip_prefix(&format!("{dir}/")).unwrap();
    assert!(protected_name(name, "p-", true), "{name}");
    assert_eq!(checker.check_stat(created).await.unwrap().unwrap().czxid.to_string(), czxid);
    assert_eq!(lines[1], format!("children {name}"), "the listing after the create shows it");
    assert_eq!(lines[2], "data-set 1");
    assert_eq!(lines[3], "data two 1", "the read after the write sees it");
    assert_eq!(lines[4], "exists false");
    assert!(lines[5].starts_with("error ZkError::InvalidPath"), "a refused step fails alone: {}", lines[5]);
    assert_eq!(lines[6], "error ZkError::NoNode", "a step the server fails fails alone");
    assert_eq!(lines[7], "exists true");

    // Seven requests (the refused step never left), sent before any reply was back.
    let sent: Vec<_> = log.iter().filter(|r| r.path.starts_with(&dir)).collect();
    let kinds: Vec<i32> = sent.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        vec![op::CREATE2, op::GET_CHILDREN2, op::SET_DATA, op::GET_DATA, op::EXISTS, op::DELETE, op::EXISTS],
        "{log:?}"
    );
    assert!(
        sent.iter().all(|r| r.answered_before == sent[0].answered_before),
        "a step waited for the reply to the one before it: {sent:?}"
    );
    handle.close().await;
    assert!(checker.check_stat(created).await.unwrap().is_none(), "the ephemeral node went with the handle");

    let refused = run(&mut handle_for(&host).await, &["pipeline-many", &dir, "65"]).await.unwrap_err();
    assert!(refused.contains("LimitExceeded") && refused.contains("64"), "{refused}");
    assert_eq!(run(&mut handle_for(&host).await, &["pipeline-many", &dir, "64"]).await.unwrap(), "ok 64");
}

async fn handle_for(host: &Host) -> CustomHandle {
    host.custom("misbehave").await.unwrap()
}

/// A protected create in a pipeline whose reply is lost on the wire: the host finds the one node
/// the server made, and the listing after it (lost with it) is sent again and shows that node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pipelined_protected_create_whose_reply_is_lost_is_found_and_listed() {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let dir = prepared(&checker, "sdk-pipeline-lost").await;
    let mut handle = host.custom("misbehave").await.unwrap();
    proxy.lose_reply(op::CREATES, 1);
    let text = run(&mut handle, &["pipeline", &dir]).await.unwrap();
    assert_eq!(proxy.lost_replies(), 1, "the reply was not lost");
    assert_eq!(proxy.lost_errors(), vec![0], "the lost create did not succeed on the server");
    let lines: Vec<&str> = text.lines().collect();
    let nodes = children(&checker, &dir).await;
    assert_eq!(nodes.len(), 1, "exactly one node after a lost reply: {nodes:?}");
    let created = format!("{dir}/{}", nodes[0]);
    assert!(lines[0].starts_with(&format!("created {created} ")), "{text}");
    assert_eq!(lines[1], format!("children {}", nodes[0]), "the listing after the create shows it");
    assert_eq!(handle.ledger(), vec![created.clone()], "the node found again is the handle's");
    handle.close().await;
    assert!(children(&checker, &dir).await.is_empty());
}

/// `watch.wait-any` (0.1.4): one wait on several watchers answers with the position of the one
/// that fired and its event (at once when it fired already, the first such in the list); a
/// wait that runs out leaves every watcher armed; no watcher at all is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wait_any_answers_with_the_watcher_that_fired() {
    let checker = client(&zk().address()).await;
    let dir = prepared(&checker, "sdk-wait-any").await;
    let (a, b) = (format!("{dir}/a"), format!("{dir}/b"));
    for node in [&a, &b] {
        checker.create(node, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    }
    let host = Host::start(config(&zk().address(), Duration::from_secs(10))).await.unwrap();
    let mut handle = host.custom("misbehave").await.unwrap();
    let text = run(&mut handle, &["wait-any", &a, &b]).await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].contains("Timeout"), "nothing fired within 50 ms: {text}");
    assert_eq!(lines[1], "1 EventKind::NodeDataChanged", "B's data was set: {text}");
    assert_eq!(lines[2], "1 EventKind::NodeDataChanged", "B fired already: {text}");
    assert_eq!(lines[3], "0 EventKind::NodeDeleted", "A, armed all along, saw its deletion: {text}");
    assert!(lines[4].contains("InvalidArgument"), "no watcher to wait on: {text}");
    handle.close().await;
}

/// `contention` (0.1.4) step by step: `enter` makes the node and answers where it stands from
/// the listing made with it; a second contender waits for the first's node, a wait that runs out
/// leaves its node in place, and once the first withdraws it holds; a contender dropped leaves
/// its node to the handle, whose ledger deletes it when the handle ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_contender_enters_waits_holds_and_withdraws() {
    let checker = client(&zk().address()).await;
    let dir = prepared(&checker, "sdk-contender").await;
    let host = Host::start(config(&zk().address(), Duration::from_secs(10))).await.unwrap();
    let mut first = host.custom("misbehave").await.unwrap();
    let mut second = host.custom("misbehave").await.unwrap();

    let entered = run(&mut first, &["enter", &dir]).await.unwrap();
    let (mine, standing) = entered.split_once(' ').unwrap();
    assert_eq!(standing, "held", "{entered}");
    let name = mine.strip_prefix(&format!("{dir}/")).unwrap();
    assert!(protected_name(name, "lock-", true), "{name}");
    assert_eq!(checker.get_data(mine).await.unwrap().0, b"sdk");

    let entered = run(&mut second, &["enter", &dir]).await.unwrap();
    let (theirs, standing) = entered.split_once(' ').unwrap();
    assert_eq!(standing, format!("waiting {mine}"), "{entered}");
    let waited = run(&mut second, &["contender-wait", "50"]).await.unwrap_err();
    assert!(waited.contains("Timeout"), "{waited}");
    assert_eq!(children(&checker, &dir).await.len(), 2, "a wait that ran out leaves the node");

    assert_eq!(run(&mut first, &["contender-withdraw"]).await.unwrap(), "withdrawn");
    assert!(checker.check_stat(mine).await.unwrap().is_none(), "withdrawn, the node is gone");
    assert_eq!(run(&mut first, &["contender-withdraw"]).await.unwrap(), "withdrawn", "twice is fine");
    assert_eq!(run(&mut second, &["contender-wait", "none"]).await.unwrap(), "held");
    assert_eq!(run(&mut second, &["contender-standing"]).await.unwrap(), "held");

    assert_eq!(run(&mut second, &["contender-drop"]).await.unwrap(), "dropped");
    assert!(checker.check_stat(theirs).await.unwrap().is_some(), "a dropped contender leaves its node");
    second.close().await;
    assert!(checker.check_stat(theirs).await.unwrap().is_none(), "the handle's ledger deleted it");
    first.close().await;
}
