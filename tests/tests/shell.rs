//! Shell niceties of the `wazoo` binary, run as a user runs them: completion scripts, manual
//! pages, `wazoo zk` browsing a tree made here on the test ZooKeeper, and the `--json` output
//! of the commands that print something.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;
use zookeeper_client::{Acls, Client, CreateMode, Stat};

const LIMIT: Duration = Duration::from_secs(60);

/// Each line of `stdout` parsed as a JSON object.
fn objects(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert!(value.is_object(), "{line:?} is not an object");
            value
        })
        .collect()
}

/// The one JSON object `stdout` holds.
fn object(stdout: &str) -> Value {
    let mut all = objects(stdout);
    assert_eq!(all.len(), 1, "one JSON line: {stdout:?}");
    all.remove(0)
}

/// ms since the epoch for an RFC 3339 UTC time `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn rfc3339_ms(text: &str) -> i64 {
    let number = |range: std::ops::Range<usize>| -> i64 { text[range].parse().unwrap() };
    assert_eq!(text.len(), 24, "{text:?}");
    assert!(text.ends_with('Z') && &text[10..11] == "T", "{text:?}");
    let (y, m, d) = (number(0..4), number(5..7), number(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + number(11..13) * 3600 + number(14..16) * 60 + number(17..19);
    seconds * 1000 + number(20..23)
}

#[test]
fn rfc3339_reader_knows_the_epoch_and_a_leap_day() {
    assert_eq!(rfc3339_ms("1970-01-01T00:00:00.000Z"), 0);
    assert_eq!(rfc3339_ms("2024-02-29T12:34:56.789Z"), 1_709_210_096_789);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_for_each_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, stdout, stderr) = output(cli().args(["completions", shell])).await;
        assert_eq!(code, 0, "{shell}: {stderr}");
        for word in ["watch", "lock", "zk", "completions", "--json"] {
            assert!(stdout.contains(word), "{shell}: the script does not mention {word}");
        }
        // The same through --server: nothing is asked of the (absent) daemon.
        let (code, through, stderr) =
            output(cli().args(["--server", "127.0.0.1:1", "completions", shell])).await;
        assert_eq!(code, 0, "{shell} through --server: {stderr}");
        assert_eq!(through, stdout, "{shell}: the script is the same through --server");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_for_an_unknown_shell_are_a_usage_error() {
    for shell in ["powershell", "tcsh", "Bash", ""] {
        let (code, stdout, stderr) = output(cli().args(["completions", shell])).await;
        assert_eq!(code, 2, "{shell:?}: {stderr}");
        assert!(stdout.is_empty(), "{shell:?}: {stdout}");
        assert!(stderr.contains("bash") && stderr.contains("zsh") && stderr.contains("fish"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn man_prints_wazoo_1_and_writes_a_page_per_subcommand() {
    let (code, stdout, stderr) = output(cli().arg("man")).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with(".TH"), "{}", &stdout[..stdout.len().min(200)]);
    assert!(stdout.contains("completions") && stdout.contains("lock"));
    let scratch = tempfile::tempdir().unwrap();
    // A directory that is not there yet, two levels down.
    let dir = scratch.path().join("target/man");
    let (code, stdout, stderr) =
        output(cli().args(["--server", "127.0.0.1:1", "man", "--dir"]).arg(&dir)).await;
    assert_eq!(code, 0, "{stderr}");
    for page in ["wazoo.1", "wazoo-lock.1", "wazoo-zk.1", "wazoo-zk-tree.1", "wazoo-queue-put.1"] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.starts_with(".TH"), "{page}: {}", &text[..text.len().min(200)]);
    }
    let lock = std::fs::read_to_string(dir.join("wazoo-lock.1")).unwrap();
    assert!(lock.contains("no\\-wait"), "the lock page documents its options");
    let pages = std::fs::read_dir(&dir).unwrap().count();
    assert!(stdout.contains(&format!("wrote {pages} manual pages")), "{stdout}");
}

/// The tree `wazoo zk` is shown: `PATH` ("root") with `a` ("alpha", with a child `x` holding
/// nothing), `b` ("bee", changed once) and `e` (an ephemeral node of `owner`).
async fn make_tree(checker: &Client, owner: &Client, path: &str) {
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    checker.mkdir(path, &open).await.unwrap();
    checker.set_data(path, b"root", None).await.unwrap();
    checker.create(&format!("{path}/a"), b"alpha", &open).await.unwrap();
    checker.create(&format!("{path}/a/x"), b"", &open).await.unwrap();
    checker.create(&format!("{path}/b"), b"b", &open).await.unwrap();
    checker.set_data(&format!("{path}/b"), b"bee", Some(0)).await.unwrap();
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    owner.create(&format!("{path}/e"), b"", &ephemeral).await.unwrap();
}

async fn stat_of(checker: &Client, path: &str) -> Stat {
    checker.check_stat(path).await.unwrap().expect("the node exists")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_ls_get_and_stat_show_what_is_there() {
    let checker = client(&zk().address()).await;
    let owner = client(&zk().address()).await;
    let path = unique("zk-browse");
    make_tree(&checker, &owner, &path).await;

    let (code, stdout, stderr) = output(cli().args(["zk", "ls", &path])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "a\nb\ne\n");
    let (code, stdout, _) = output(cli().args(["zk", "ls", &path, "--json"])).await;
    assert_eq!(code, 0);
    let listed: Vec<(String, String)> = objects(&stdout)
        .iter()
        .map(|o| (o["name"].as_str().unwrap().to_string(), o["path"].as_str().unwrap().to_string()))
        .collect();
    let expected: Vec<(String, String)> =
        ["a", "b", "e"].iter().map(|n| (n.to_string(), format!("{path}/{n}"))).collect();
    assert_eq!(listed, expected);
    let (code, stdout, _) = output(cli().args(["zk", "ls", &format!("{path}/a/x")])).await;
    assert_eq!((code, stdout.as_str()), (0, ""), "a leaf has no children");

    let (code, stdout, stderr) = output(cli().args(["zk", "get", &format!("{path}/b")])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "bee\n");
    let (code, stdout, _) = output(cli().args(["zk", "get", &format!("{path}/b"), "--json"])).await;
    assert_eq!(code, 0);
    let got = object(&stdout);
    let b = stat_of(&checker, &format!("{path}/b")).await;
    assert_eq!(got["path"], format!("{path}/b").as_str());
    assert_eq!(got["data"], "bee");
    assert_eq!(got["stat"]["version"], 1);
    assert_eq!(got["stat"]["dataLength"], 3);
    assert_eq!(got["stat"]["czxid"], b.czxid);
    assert_eq!(got["stat"]["mzxid"], b.mzxid);
    assert_eq!(got["stat"]["ephemeralOwner"], "0x0");

    // The stat, a `name value` line each, against what a client reads.
    let e = stat_of(&checker, &format!("{path}/e")).await;
    let (code, stdout, stderr) = output(cli().args(["zk", "stat", &format!("{path}/e")])).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<Vec<&str>> = stdout.lines().map(|l| l.split(' ').collect()).collect();
    let names: Vec<&str> = lines.iter().map(|l| l[0]).collect();
    assert_eq!(
        names,
        [
            "czxid",
            "mzxid",
            "pzxid",
            "ctime",
            "mtime",
            "version",
            "cversion",
            "aversion",
            "ephemeralOwner",
            "dataLength",
            "numChildren"
        ]
    );
    let value = |name: &str| lines.iter().find(|l| l[0] == name).unwrap()[1..].to_vec();
    assert_eq!(value("czxid"), [e.czxid.to_string()]);
    assert_eq!(value("pzxid"), [e.pzxid.to_string()]);
    assert_eq!(value("version"), ["0"]);
    assert_eq!(value("ephemeralOwner"), [format!("0x{:x}", owner.session_id().0)]);
    assert_eq!(value("dataLength"), ["0"]);
    assert_eq!(value("numChildren"), ["0"]);
    let ctime = value("ctime");
    assert_eq!(ctime[0], e.ctime.to_string());
    assert_eq!(rfc3339_ms(&ctime[1]), e.ctime, "the RFC 3339 time is the same instant");
    assert_eq!(rfc3339_ms(&value("mtime")[1]), e.mtime);

    let top = stat_of(&checker, &path).await;
    let (code, stdout, _) = output(cli().args(["zk", "stat", &path, "--json"])).await;
    assert_eq!(code, 0);
    let stat = object(&stdout);
    assert_eq!(stat["path"], path.as_str());
    assert_eq!(stat["numChildren"], 3);
    assert_eq!(stat["cversion"], top.cversion);
    assert_eq!(stat["pzxid"], top.pzxid);
    assert_eq!(stat["ctime"], top.ctime);
    assert_eq!(stat["mtime"], top.mtime);
    assert_eq!(stat["version"], 1);
    assert_eq!(stat["aversion"], 0);
    assert_eq!(stat["dataLength"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_tree_shows_the_subtree_indented_and_as_json() {
    let checker = client(&zk().address()).await;
    let owner = client(&zk().address()).await;
    let path = unique("zk-tree");
    make_tree(&checker, &owner, &path).await;

    let (code, stdout, stderr) = output(cli().args(["zk", "tree", &path])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!("{path} [4 bytes]\n  a [5 bytes]\n    x [0 bytes]\n  b [3 bytes]\n  e [0 bytes]\n")
    );
    let (code, stdout, _) = output(cli().args(["zk", "tree", &path, "--depth", "1"])).await;
    assert_eq!(code, 0);
    assert_eq!(stdout, format!("{path} [4 bytes]\n  a [5 bytes]\n  b [3 bytes]\n  e [0 bytes]\n"));
    let (code, stdout, _) = output(cli().args(["zk", "tree", &path, "--depth", "0"])).await;
    assert_eq!((code, stdout), (0, format!("{path} [4 bytes]\n")));
    let (code, stdout, _) = output(cli().args(["zk", "tree", &format!("{path}/a")])).await;
    assert_eq!((code, stdout), (0, format!("{path}/a [5 bytes]\n  x [0 bytes]\n")));

    let (code, stdout, _) = output(cli().args(["zk", "tree", &path, "--json"])).await;
    assert_eq!(code, 0);
    let nodes = objects(&stdout);
    let paths: Vec<&str> = nodes.iter().map(|n| n["path"].as_str().unwrap()).collect();
    let expected: Vec<String> =
        ["", "/a", "/a/x", "/b", "/e"].iter().map(|suffix| format!("{path}{suffix}")).collect();
    assert_eq!(paths, expected);
    let data: Vec<&str> = nodes.iter().map(|n| n["data"].as_str().unwrap()).collect();
    assert_eq!(data, ["root", "alpha", "", "bee", ""]);
    assert_eq!(nodes[4]["stat"]["ephemeralOwner"], format!("0x{:x}", owner.session_id().0).as_str());
    assert_eq!(nodes[1]["stat"]["numChildren"], 1);
    let (code, stdout, _) = output(cli().args(["zk", "tree", &path, "--json", "--depth", "1"])).await;
    assert_eq!(code, 0);
    assert_eq!(objects(&stdout).len(), 4, "{stdout}");

    // What is deleted is gone from the tree.
    checker.delete(&format!("{path}/e"), None).await.unwrap();
    let (_, stdout, _) = output(cli().args(["zk", "tree", &path, "--depth", "1"])).await;
    assert_eq!(stdout, format!("{path} [4 bytes]\n  a [5 bytes]\n  b [3 bytes]\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_refuses_a_bad_path_and_says_a_missing_node_is_missing() {
    let path = unique("zk-missing");
    for command in ["ls", "get", "stat", "tree"] {
        for bad in ["relative/path", "/a//b", "/a/", "/a/../b", "/zookeeper/quota"] {
            let (code, stdout, stderr) = output(cli().args(["zk", command, bad])).await;
            assert_eq!(code, 2, "zk {command} {bad}: {stderr}");
            assert!(stdout.is_empty());
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
            assert!(stderr.starts_with("wazoo: invalid path: "), "{stderr}");
        }
        for json in [false, true] {
            let mut wazoo = cli();
            wazoo.args(["zk", command, &path]);
            if json {
                wazoo.arg("--json");
            }
            let (code, stdout, stderr) = output(&mut wazoo).await;
            assert_eq!(code, 1, "zk {command} of a missing node: {stderr}");
            assert!(stdout.is_empty(), "{stdout}");
            assert_eq!(stderr, format!("wazoo: {path} does not exist\n"));
        }
    }
    // Through a daemon, refused before anything is asked (none listens there).
    let (code, _, stderr) = output(cli().args(["--server", "127.0.0.1:1", "zk", "ls", "/"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr, "wazoo: zk does not go through --server\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_ls_of_the_root_leaves_out_zookeepers_own_node() {
    let checker = client(&zk().address()).await;
    let path = unique("zk-root");
    checker.mkdir(&path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let (code, stdout, stderr) = output(cli().args(["zk", "ls", "/"])).await;
    assert_eq!(code, 0, "{stderr}");
    let names: Vec<&str> = stdout.lines().collect();
    assert!(names.contains(&"t"), "{stdout}");
    assert!(!names.contains(&"zookeeper"), "{stdout}");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_commands_print_json_with_the_documented_fields() {
    let checker = client(&zk().address()).await;
    let config = unique("json-config");
    let (code, stdout, stderr) = output(cli().args(["config", "set", &config, "v1", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"version": 0}));
    let (code, stdout, _) = output(cli().args(["config", "set", &config, "v2"])).await;
    assert_eq!((code, stdout.as_str()), (0, "1\n"), "the text is unchanged");

    let counter = unique("json-counter");
    let (code, stdout, stderr) = output(cli().args(["counter", "add", &counter, "5", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"value": 5}));
    let (_, stdout, _) = output(cli().args(["counter", "add", &counter, "-2"])).await;
    assert_eq!(stdout, "3\n");

    let queue = unique("json-queue");
    let (code, stdout, stderr) = output(cli().args(["queue", "put", &queue, "item one", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    let node = object(&stdout)["node"].as_str().unwrap().to_string();
    assert!(node.starts_with(&format!("{queue}/")), "{node}");
    assert!(checker.check_stat(&node).await.unwrap().is_some(), "the item's node is {node}");
    let (code, stdout, stderr) = output(cli().args(["queue", "take", &queue, "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"data": "item one"}));

    let barrier = unique("json-barrier");
    let mut say = Vec::new();
    for step in ["set", "set", "remove", "remove", "wait"] {
        let (code, stdout, stderr) = output(cli().args(["barrier", step, &barrier, "--json"])).await;
        assert_eq!(code, 0, "barrier {step}: {stderr}");
        say.push(object(&stdout));
    }
    let at = barrier.as_str();
    assert_eq!(
        say,
        [
            serde_json::json!({"path": at, "was_set": false}),
            serde_json::json!({"path": at, "was_set": true}),
            serde_json::json!({"path": at, "was_set": true}),
            serde_json::json!({"path": at, "was_set": false}),
            serde_json::json!({"path": at, "down": true}),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_and_two_phase_commit_print_json() {
    let checker = client(&zk().address()).await;
    let node = unique("json-fence");
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    checker.mkdir(&node, &open).await.unwrap();
    let token = stat_of(&checker, &node).await.czxid;
    let (code, stdout, stderr) =
        output(cli().args(["fence", "check", &node, &token.to_string(), "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        object(&stdout),
        serde_json::json!({"node": node, "token": token, "holds": true, "reason": null, "found": null})
    );
    let (code, stdout, _) =
        output(cli().args(["fence", "check", &node, &(token - 1).to_string(), "--json"])).await;
    assert_eq!(code, 1);
    let refused = object(&stdout);
    assert_eq!((refused["holds"].as_bool(), refused["reason"].as_str()), (Some(false), Some("other-token")));
    assert_eq!(refused["found"], token);

    let fenced = format!("{node}-value");
    let (code, stdout, stderr) =
        output(cli().args(["fence", "write", &node, &token.to_string(), &fenced, "100", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    let written = object(&stdout);
    assert_eq!(written["written"], true);
    assert_eq!(written["path"], fenced.as_str());
    assert_eq!(written["token"], token);
    assert_eq!(written["version"], stat_of(&checker, &fenced).await.version);
    checker.delete(&node, None).await.unwrap();
    let (code, stdout, _) =
        output(cli().args(["fence", "write", &node, &token.to_string(), &fenced, "200", "--json"])).await;
    assert_eq!(code, 1);
    let refused = object(&stdout);
    assert_eq!((refused["written"].as_bool(), refused["reason"].as_str()), (Some(false), Some("gone")));

    let tx = unique("json-2pc");
    let mut coordinate = cli();
    coordinate.args(["2pc", "coordinate", &tx, "--sites", "a", "--timeout", "30s", "--json"]);
    let coordinating = tokio::spawn(async move { output(&mut coordinate).await });
    within(LIMIT, "the transaction starts", wait_children(&checker, &tx, 1)).await;
    let (code_v, out_v, err_v) =
        output(cli().args(["2pc", "vote", &tx, "--site", "a", "commit", "--timeout", "30s", "--json"])).await;
    let (code_c, out_c, err_c) = coordinating.await.unwrap();
    assert_eq!((code_c, code_v), (0, 0), "{err_c} {err_v}");
    assert_eq!(object(&out_c), serde_json::json!({"tx": tx, "outcome": "committed"}));
    assert_eq!(object(&out_v), serde_json::json!({"tx": tx, "outcome": "committed"}));
    let (code, stdout, stderr) = output(cli().args(["2pc", "clean", &tx, "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"tx": tx, "outcome": "committed"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_without_cmd_prints_json_and_releases_on_sigterm() {
    let checker = client(&zk().address()).await;
    let path = unique("json-held");
    let mut child = cli().args(["lock", &path, "--json"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = within(LIMIT, "the lock is held", lines.next_line()).await.unwrap().expect("a held line");
    let held = object(&line);
    let node = held["node"].as_str().unwrap();
    assert_eq!(held["path"], path.as_str());
    assert!(node.starts_with(&format!("{path}/_c_")) && node.contains("-lock-"), "{node}");
    assert_eq!(held["token"], stat_of(&checker, node).await.czxid, "the token is the node's czxid");
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let status = within(LIMIT, "wazoo releases and exits", child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(children(&checker, &path).await.is_empty(), "released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipes_functions_json_names_each_function_as_call_takes_it() {
    let (code, text, stderr) = output(cli().args(["recipes", "functions", "lock"])).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = output(cli().args(["recipes", "functions", "lock", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    let functions = objects(&stdout);
    let signatures: Vec<&str> = functions.iter().map(|f| f["signature"].as_str().unwrap()).collect();
    assert_eq!(signatures, text.lines().collect::<Vec<_>>(), "the same functions as the text");
    for f in &functions {
        let (name, signature) = (f["name"].as_str().unwrap(), f["signature"].as_str().unwrap());
        assert!(signature.starts_with(&format!("{name}(")), "{f}");
    }
    assert!(functions.iter().any(|f| f["name"] == "lock.acquire"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_is_the_same_through_a_daemon() {
    let daemon = daemon::Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    // The CLI reaches no ZooKeeper of its own: only the daemon's.
    let wazoo = || {
        let mut command = cli();
        command.env("WAZOO_ZOOKEEPER", "127.0.0.1:1").arg("--server").arg(&daemon.grpc);
        command
    };
    let config = unique("json-remote-config");
    let (code, stdout, stderr) = output(wazoo().args(["config", "set", &config, "v", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"version": 0}));
    let counter = unique("json-remote-counter");
    let (code, stdout, stderr) = output(wazoo().args(["counter", "add", &counter, "7", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"value": 7}));
    let barrier = unique("json-remote-barrier");
    let (code, stdout, stderr) = output(wazoo().args(["barrier", "set", &barrier, "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"path": barrier, "was_set": false}));
    let queue = unique("json-remote-queue");
    let (code, stdout, stderr) = output(wazoo().args(["queue", "put", &queue, "x", "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(object(&stdout)["node"].as_str().unwrap().starts_with(&format!("{queue}/")), "{stdout}");
    let (code, stdout, stderr) = output(wazoo().args(["queue", "take", &queue, "--json"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(object(&stdout), serde_json::json!({"data": "x"}));
}
