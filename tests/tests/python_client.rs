//! The Python client package `clients/python` (`wazoo-client`, import `wazoo`): its checked-in
//! stubs match the proto; it builds with the vendored flit_core and installs offline with pip
//! (typed, its metadata whole, beside any grpcio 1.x from 1.66.1 on); and it drives a real
//! `wazoo serve` on the shared real ZooKeeper (a token, locks and their fencing tokens, timeouts
//! as typed errors, queues, configuration, counters, watches, generic invoke, claims lost while
//! held and why, a frozen daemon given up within the client's bounds, TLS, kazoo's recipe
//! objects and watch callbacks, and the asyncio client `wazoo.aio`).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use wazoo_tests::daemon::{output, Daemon};
use wazoo_tests::python::{install, package};
use wazoo_tests::tls::certificates;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// `wazoo.SILENCE`: the longest a daemon that stopped answering goes unnoticed by the client
/// (a ping every second, given up after two).
const SILENCE: f64 = 3.0;
/// What the machine may add to a bound the client keeps (threads woken late on a busy machine).
const SLACK: f64 = 2.0;

/// The generated files `clients/python/gen_stubs.sh` writes, relative to its output directory.
const STUBS: [&str; 2] = ["wazoo_pb2.py", "wazoo_pb2_grpc.py"];

/// `python3 clients/python/tests/SCRIPT ARGS…` with the installed package on its path.
fn python(installed: &Path, script: &str, args: &[&str]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(package().join("tests").join(script))
        .args(args)
        .env("PYTHONPATH", installed)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

#[test]
fn the_checked_in_stubs_match_a_fresh_generation() {
    let fresh = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("bash")
        .arg(package().join("gen_stubs.sh"))
        .arg(fresh.path())
        .status()
        .expect("running clients/python/gen_stubs.sh");
    assert!(status.success(), "clients/python/gen_stubs.sh failed");
    for stub in STUBS {
        let generated = std::fs::read(fresh.path().join(stub)).unwrap();
        let checked_in = std::fs::read(package().join("wazoo/_proto").join(stub)).unwrap();
        assert!(
            generated == checked_in,
            "clients/python/wazoo/_proto/{stub} differs from what the proto generates: \
             run clients/python/gen_stubs.sh"
        );
    }
    let grpc = std::fs::read_to_string(package().join("wazoo/_proto/wazoo_pb2_grpc.py")).unwrap();
    assert!(
        grpc.contains("\nfrom . import wazoo_pb2 as wazoo__pb2\n"),
        "the grpc stub imports its messages relatively"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_package_installs_offline_and_maps_every_error_kind() {
    let installed = install().await;
    let (code, stdout, stderr) = output(&mut python(installed.path(), "unit.py", &[])).await;
    assert_eq!(code, 0, "unit.py failed:\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(format!("installed {}", installed.path().join("wazoo/__init__.py").display()).as_str()),
        "the installed copy was imported, not the source tree"
    );
    assert_eq!(lines.last().copied(), Some("unit ok"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_package_is_typed_and_asks_for_a_range_of_grpcio() {
    let installed = install().await;
    assert!(
        installed.path().join("wazoo/py.typed").is_file(),
        "the installed package has its PEP 561 marker wazoo/py.typed"
    );
    let metadata = std::fs::read_dir(installed.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "dist-info"))
        .map(|info| std::fs::read_to_string(info.join("METADATA")).unwrap())
        .expect("the installed package's dist-info");
    // What it needs to run (not its extras').
    let requires: Vec<&str> = metadata
        .lines()
        .filter_map(|l| l.strip_prefix("Requires-Dist: "))
        .filter(|d| !d.contains("extra =="))
        .collect();
    assert_eq!(
        requires,
        ["grpcio>=1.66.1,<2", "grpcio-status>=1.66.1,<2", "protobuf>=5.27.2,<7"],
        "ranges, not pins, so that the package installs beside others"
    );
}

/// Runs `command` (a script of clients/python/tests) to its end within [`LIMIT`]: its exit
/// status, its stdout's lines, its stderr.
async fn run(command: &mut Command) -> (std::process::ExitStatus, Vec<String>, String) {
    let out = within(LIMIT, "the script runs to its end", command.output()).await.unwrap();
    let lines = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    (out.status, lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The seconds a script printed as the last word of a line.
fn seconds(words: &[&str]) -> f64 {
    words.last().and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("no seconds at the end of {words:?}"))
}

/// A daemon on the shared ZooKeeper asking for a token: the daemon, the token, and the directory
/// of its token file (to keep while the daemon runs).
async fn daemon_with_token() -> (Daemon, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let token = "a-token-for-the-python-client-0123".to_string();
    std::fs::write(dir.path().join("token"), format!("{token}\n")).unwrap();
    let token_file = dir.path().join("token").to_str().unwrap().to_string();
    let daemon = Daemon::start_with(
        &plugins(),
        &root().join("target/component-cache"),
        &["--token-file", &token_file],
    )
    .await;
    (daemon, token, dir)
}

/// The words of the line of `lines` that starts with `key`, after it.
fn line<'a>(lines: &'a [String], key: &str) -> Vec<&'a str> {
    let found = lines.iter().find(|l| l.split_whitespace().next() == Some(key));
    let found = found.unwrap_or_else(|| panic!("no line `{key} …` in:\n{}", lines.join("\n")));
    found.split_whitespace().skip(1).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_client_drives_a_real_daemon() {
    let (daemon, token, _dir) = daemon_with_token().await;
    let token = token.as_str();
    let installed = install().await;
    let checker = client(&zk().address()).await;
    let base = unique("python-client");

    let mut child = python(installed.path(), "smoke.py", &[&daemon.grpc, &base, token]).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let mut lines = Vec::new();
    within(LIMIT, "smoke.py runs to its end", async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some(node) = line.strip_prefix("lose ") {
                // The script holds this lock and waits for its loss: take the node away.
                checker.delete(node, None).await.unwrap();
            }
            lines.push(line);
        }
    })
    .await;
    let status = within(LIMIT, "smoke.py exits", child.wait()).await.unwrap();
    let stderr = errors.await.unwrap();
    assert!(status.success(), "smoke.py failed ({status}):\n{}\n{stderr}", lines.join("\n"));
    assert_eq!(lines.last().map(String::as_str), Some("done"), "{}", lines.join("\n"));

    assert_eq!(line(&lines, "unauthenticated"), ["UNAUTHENTICATED", "UNAUTHENTICATED"]);
    let sessions = line(&lines, "sessions");
    assert_ne!(sessions[0], sessions[1], "two sessions");
    assert_eq!(sessions[2], "5.0", "the TTL granted");

    // Exclusion and fencing tokens.
    let held = line(&lines, "held");
    let first: i64 = held[0].parse().unwrap();
    assert!(held[1].starts_with(&format!("{base}/lock/")), "{held:?}");
    assert_eq!(held[2].len(), 12, "the recipe version: {held:?}");
    assert_eq!(line(&lines, "timeout"), ["TIMEOUT", "DEADLINE_EXCEEDED"]);
    let second = line(&lines, "second");
    let second_token: i64 = second[0].parse().unwrap();
    assert!(second_token > first, "the next holder's token is greater: {first} then {second_token}");
    // Releases are sent without waiting for ZooKeeper's answer: each node goes a moment later.
    within(LIMIT, "the first lock node goes", wait_gone(&checker, held[1])).await;
    within(LIMIT, "the second lock node goes", wait_gone(&checker, second[1])).await;

    assert_eq!(line(&lines, "queue-len"), ["2"]);
    assert_eq!(line(&lines, "queue-take"), ["one", "two"]);
    assert_eq!(line(&lines, "queue-empty"), ["TIMEOUT"]);

    assert_eq!(line(&lines, "config-absent"), ["True"]);
    let config = line(&lines, "config");
    assert_eq!((config[0], config[2]), ("v2", "True"), "{config:?}");
    let (data, stat) = checker.get_data(&format!("{base}/config")).await.unwrap();
    assert_eq!((data.as_slice(), stat.version.to_string()), (&b"v2"[..], config[1].to_string()));
    assert_eq!(line(&lines, "config-bad-version"), ["BAD_VERSION", "FAILED_PRECONDITION"]);

    assert_eq!(line(&lines, "counter"), ["5", "3", "3", "0"]);
    assert_eq!(checker.get_data(&format!("{base}/counter")).await.unwrap().0, b"3");

    // The watch: the nodes there, INITIALIZED, then a change and a new node, in that order.
    let tree = format!("{base}/tree");
    let watch: Vec<Vec<&str>> = lines
        .iter()
        .filter(|l| l.starts_with("watch "))
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    let initialized = watch.iter().position(|w| w[0] == "INITIALIZED").expect("an INITIALIZED event");
    let mut created: Vec<&str> = watch[..initialized].iter().map(|w| w[1]).collect();
    created.sort();
    let a = format!("{tree}/a");
    assert_eq!(created, [tree.as_str(), a.as_str()], "a CREATED per node there: {watch:?}");
    assert!(watch[..initialized].iter().all(|w| w[0] == "CREATED"), "{watch:?}");
    assert!(watch[..initialized].contains(&vec!["CREATED", a.as_str(), "one"]), "{watch:?}");
    let b = format!("{tree}/b");
    assert_eq!(
        &watch[initialized + 1..],
        [vec!["CHANGED", a.as_str(), "two"], vec!["CREATED", b.as_str(), "new"]],
        "{watch:?}"
    );

    // Generic invoke: the result as JSON; its instance ended with the call.
    let call: serde_json::Value = serde_json::from_str(line(&lines, "call")[0]).unwrap();
    let node = call["ok"]["node"].as_str().unwrap_or_else(|| panic!("{call}"));
    assert!(node.starts_with(&format!("{base}/called/")), "{call}");
    assert!(call["ok"]["token"].as_i64().unwrap() > second_token, "{call}");
    assert!(checker.check_stat(node).await.unwrap().is_none(), "the lock taken by call ended with it");
    assert_eq!(line(&lines, "call-invalid"), ["INVALID_ARGUMENT"]);
    assert_eq!(line(&lines, "call-unavailable"), ["RECIPE_UNAVAILABLE"]);

    // The lock whose node was deleted while its block ran.
    assert_eq!(line(&lines, "lost"), ["True", "node-deleted"]);
    assert_eq!(line(&lines, "lock-lost"), ["node-deleted"]);
    assert!(!lines.iter().any(|l| l == "lost-unnoticed"), "{}", lines.join("\n"));

    assert_eq!(line(&lines, "closed"), ["False"]);
}

/// A daemon that freezes (SIGSTOP) under a client holding a lock in a `with` block and following
/// a watch: the client notices within `wazoo.SILENCE`, the claim is lost ("disconnected"), the
/// block is left at once (LockLost, no Release waiting on the frozen daemon), the watch ends
/// with `wazoo.Unavailable`, and calls made while it is frozen give up within the client's
/// `call_timeout` (3 s in the script), whether they wait by design or not. Once the daemon goes
/// on, the client closes at once and the lock is free for the next client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_gives_up_on_a_frozen_daemon() {
    let (daemon, token, _dir) = daemon_with_token().await;
    let installed = install().await;
    let base = unique("python-client-frozen");
    let pid = daemon.pid().to_string();
    let (status, lines, stderr) =
        run(&mut python(installed.path(), "frozen.py", &[&daemon.grpc, &base, &token, &pid])).await;
    // Whatever the script did, the daemon goes on.
    unsafe { libc::kill(daemon.pid() as i32, libc::SIGCONT) };
    let all = lines.join("\n");
    assert!(status.success(), "frozen.py failed ({status}):\n{all}\n{stderr}");
    assert_eq!(lines.last().map(String::as_str), Some("done"), "{all}");

    let lost = line(&lines, "lost");
    assert_eq!(lost[..2], ["True", "disconnected"], "{all}");
    let lost_after = seconds(&lost);
    assert!(lost_after <= SILENCE + SLACK, "the claim was lost {lost_after}s after the freeze:\n{all}");
    let left = line(&lines, "left");
    assert_eq!(left[0], "disconnected", "leaving the block raised the claim's LockLost:\n{all}");
    let left_after = seconds(&left);
    assert!(
        left_after < 10.0 && left_after <= lost_after + 1.0,
        "the with block was left {left_after}s after the freeze, the claim lost after {lost_after}s:\n{all}"
    );
    let watch = line(&lines, "watch");
    assert_eq!(watch[..2], ["Unavailable", "UNAVAILABLE"], "the watch ended with wazoo.Unavailable:\n{all}");
    assert!(
        seconds(&watch) <= SILENCE + SLACK,
        "the watch ended {}s after the freeze:\n{all}",
        seconds(&watch)
    );
    assert_eq!(line(&lines, "session")[0], "True", "the client session is lost:\n{all}");

    // Calls made while the daemon is still frozen.
    assert_eq!(line(&lines, "still-frozen"), ["True"], "{all}");
    let call_timeout = 3.0;
    for what in ["unary", "waiting", "new-watch"] {
        let words = line(&lines, what);
        assert_eq!(words[0], "Unavailable", "{what}: {all}");
        assert!(["UNAVAILABLE", "DEADLINE_EXCEEDED"].contains(&words[1]), "{what}: {all}");
        assert!(seconds(&words) <= call_timeout + SLACK, "{what} gave up after {}s:\n{all}", seconds(&words));
    }

    let closed = seconds(&line(&lines, "closed"));
    assert!(closed <= 1.0, "closing the lost client took {closed}s:\n{all}");
    assert_eq!(line(&lines, "again"), ["True"], "the next client took the lock:\n{all}");
}

/// Why a claim was lost, as the daemon says it, over what the client saw of its connection at
/// the same moment: a session closed under its client is "client-session-ended"; a daemon that
/// stops (SIGTERM) is "session-closed", not "disconnected". (Both need a daemon that sends a
/// LostEvent for them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_says_why_a_claim_was_lost() {
    let (daemon, token, _dir) = daemon_with_token().await;
    let installed = install().await;
    let checker = client(&zk().address()).await;
    let base = unique("python-client-reasons");
    let pid = daemon.pid().to_string();
    let (status, lines, stderr) =
        run(&mut python(installed.path(), "reasons.py", &[&daemon.grpc, &base, &token, &pid])).await;
    let all = lines.join("\n");
    assert!(status.success(), "reasons.py failed ({status}):\n{all}\n{stderr}");
    assert_eq!(lines.last().map(String::as_str), Some("done"), "{all}");

    // The session closed under client b: b and its claim are lost, and the claim says why.
    assert_eq!(line(&lines, "session-lost"), ["True", "True", "client-session-ended"], "{all}");
    assert_eq!(line(&lines, "after-loss"), ["UNKNOWN_SESSION"], "{all}");
    assert_eq!(line(&lines, "left"), ["client-session-ended"], "{all}");
    assert!(
        children(&checker, &format!("{base}/semaphore/leases")).await.is_empty(),
        "the lease went with b's session"
    );

    // The daemon stopped under a's lock.
    let stopped = line(&lines, "stopped");
    assert_eq!(stopped[..2], ["True", "session-closed"], "{all}");
    assert!(seconds(&stopped) <= SILENCE + SLACK, "{all}");
    assert_eq!(line(&lines, "client"), ["True"], "{all}");
    let released = line(&lines, "released");
    assert_eq!(released[0], "quietly", "a claim the daemon let go is not released again:\n{all}");
    let node = line(&lines, "held")[0].to_string();
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "the lock went with the daemon");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_takes_a_lock_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "");
    let file = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let daemon = Daemon::start_with(
        &plugins(),
        &root().join("target/component-cache"),
        &[
            "--tls-cert",
            &file("server.pem"),
            "--tls-key",
            &file("server.key"),
            "--tls-client-ca",
            &file("ca.pem"),
        ],
    )
    .await;
    let installed = install().await;
    let checker = client(&zk().address()).await;
    let path = unique("python-client-tls");
    let args = [daemon.grpc.as_str(), &path, &file("ca.pem"), &file("client.pem"), &file("client.key")];
    let (code, stdout, stderr) = output(&mut python(installed.path(), "tls.py", &args)).await;
    assert_eq!(code, 0, "tls.py failed:\n{stdout}\n{stderr}");
    let lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    let held = line(&lines, "held");
    assert!(held[1].starts_with(&format!("{path}/")), "{held:?}");
    assert!(checker.check_stat(held[1]).await.unwrap().is_none(), "released");
    // Without a client certificate the daemon does not serve it.
    assert_eq!(line(&lines, "no-certificate"), ["None", "UNAVAILABLE"]);
}

/// The package builds offline with the vendored flit_core (the released 3.12.0, every file as
/// its RECORD hashes it), its wheel's metadata has what pyproject.toml says (URLs, classifiers,
/// extras, ranges, license), its sdist builds the same wheel again, and pip installs it into a
/// fresh virtual environment with build isolation and no index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_package_builds_offline_with_a_standard_backend() {
    let work = tempfile::tempdir().unwrap();
    let (status, lines, stderr) =
        run(Command::new("python3").arg(package().join("tests/build.py")).arg(work.path())).await;
    let all = lines.join("\n");
    assert!(status.success(), "build.py failed ({status}):\n{all}\n{stderr}");
    assert_eq!(lines.last().map(String::as_str), Some("build ok"), "{all}");
    assert_eq!(line(&lines, "vendored"), ["22", "files", "as", "released"], "{all}");
    assert_eq!(line(&lines, "license"), ["Apache-2.0"]);
    assert_eq!(line(&lines, "requires-python"), [">=3.8"]);
    let requires: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("requires ")).collect();
    assert_eq!(
        requires,
        [
            "grpcio>=1.66.1,<2",
            "grpcio-status>=1.66.1,<2",
            "protobuf>=5.27.2,<7",
            "grpcio-tools==1.66.1;extra==\"stubs\"",
            "mypy>=1.0;extra==\"typing\"",
        ],
        "ranges for the runtime, the stubs' generator pinned in its extra"
    );
    let extras: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("extra ")).collect();
    assert_eq!(extras, ["stubs", "typing"], "the optional dependencies survive into the metadata");
    let urls: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("url ")).collect();
    assert_eq!(urls, ["Documentation", "Homepage", "Issues", "Source"], "[project.urls] survives");
    let classifiers: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("classifier ")).collect();
    assert!(classifiers.contains(&"Typing_::_Typed") && classifiers.len() >= 5, "{classifiers:?}");
    assert_eq!(line(&lines, "readme"), ["text/markdown", "True"]);
    for module in ["wazoo/py.typed", "wazoo/aio.py", "wazoo/recipes.py", "wazoo/_proto/wazoo_pb2_grpc.py"] {
        assert!(all.contains(&format!("has {module} True")), "the wheel has {module}:\n{all}");
    }
    assert_eq!(line(&lines, "vendor-in-wheel"), ["False"], "the backend stays out of the wheel");
    let sdist: Vec<&String> = lines.iter().filter(|l| l.starts_with("sdist-has ")).collect();
    assert!(
        sdist.len() == 6 && sdist.iter().all(|l| l.ends_with(" True")),
        "the sdist has what builds it:\n{all}"
    );
    assert_eq!(line(&lines, "sdist-builds"), ["True"]);
    assert_eq!(line(&lines, "venv-install"), ["True"], "{all}");
    assert_eq!(line(&lines, "venv-import"), ["True", "Client"], "{all}");
}

/// Runs `script` (of clients/python/tests) with the installed package, answering its questions
/// about ZooKeeper (tests/driven.py: `ask zk-create|zk-set|zk-delete|zk-exists|zk-children …`)
/// through a ZooKeeper client of the test's own; returns its lines but the questions.
async fn drive(installed: &Path, script: &str, args: &[&str]) -> Vec<String> {
    let checker = client(&zk().address()).await;
    let mut command = python(installed, script, args);
    command.env("PYTHONPATH", format!("{}:{}", installed.display(), package().join("tests").display()));
    let mut child = command.stdin(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let mode = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let mut lines = Vec::new();
    within(LIMIT, &format!("{script} runs to its end"), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            let Some(question) = line.strip_prefix("ask ") else {
                lines.push(line);
                continue;
            };
            let words: Vec<&str> = question.split(' ').collect();
            let data = words.get(2).copied().unwrap_or("").as_bytes();
            let answer = match words[0] {
                "zk-create" => {
                    checker.create(words[1], data, &mode).await.unwrap();
                    "ok".to_string()
                }
                "zk-set" => {
                    checker.set_data(words[1], data, None).await.unwrap();
                    "ok".to_string()
                }
                "zk-delete" => {
                    checker.delete(words[1], None).await.unwrap();
                    "ok".to_string()
                }
                "zk-exists" => {
                    if checker.check_stat(words[1]).await.unwrap().is_some() { "yes" } else { "no" }
                        .to_string()
                }
                // A released lock's node goes once ZooKeeper applies its delete, which the
                // daemon sends without waiting: watched until it has (within the script's time).
                "zk-gone" => {
                    wait_gone(&checker, words[1]).await;
                    "gone".to_string()
                }
                "zk-children" => {
                    let mut names = children(&checker, words[1]).await;
                    names.sort();
                    if names.is_empty() {
                        "-".to_string()
                    } else {
                        names.join(" ")
                    }
                }
                other => panic!("{script} asked {other:?}"),
            };
            stdin.write_all(format!("{answer}\n").as_bytes()).await.unwrap();
            stdin.flush().await.unwrap();
        }
    })
    .await;
    let status = within(LIMIT, &format!("{script} exits"), child.wait()).await.unwrap();
    let stderr = errors.await.unwrap();
    assert!(status.success(), "{script} failed ({status}):\n{}\n{stderr}", lines.join("\n"));
    assert_eq!(lines.last().map(String::as_str), Some("done"), "{}", lines.join("\n"));
    lines
}

/// kazoo's recipe objects: a non-blocking acquire that returns False (and leaves no node), the
/// contenders in queue order as ZooKeeper has them, a semaphore's and a read/write lock's tries,
/// an election's leader and candidates, and DataWatch / ChildrenWatch callbacks on changes made
/// in ZooKeeper directly. `config_delete` with its typed refusals (another version, no node,
/// children, an ephemeral node kept), and `cancel()` of a waiting acquire from another thread
/// (`Lock.cancel`, `Client.cancel_pending` for a lock and a candidacy): it raises
/// `wazoo.Cancelled`, and ZooKeeper has no node of it as soon as it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_client_has_kazoos_recipe_objects() {
    let (daemon, token, _dir) = daemon_with_token().await;
    let installed = install().await;
    let base = unique("python-kazoo-like");
    let lines = drive(installed.path(), "kazoo_like.py", &[&daemon.grpc, &base, &token]).await;
    let all = lines.join("\n");

    let held = line(&lines, "held");
    let holder = held[0].to_string();
    assert_eq!(held[2], "yes", "the lock node is in ZooKeeper:\n{all}");
    let tried = line(&lines, "try-taken");
    assert_eq!(tried[..3], ["False", "False", "None"], "a try on a taken lock returns False:\n{all}");
    assert!(seconds(&tried) < 5.0, "the try returned at once:\n{all}");
    let nodes = line(&lines, "nodes-after-try");
    assert_eq!(nodes.len(), 1, "the try left no node behind:\n{all}");
    assert!(holder.ends_with(nodes[0]), "{all}");
    assert_eq!(line(&lines, "blocking-timeout"), ["TIMEOUT"]);

    let contenders = line(&lines, "contenders");
    assert_eq!(contenders.len(), 2, "{all}");
    assert!(contenders[0].starts_with(&format!("True:{holder}:")), "the holder first:\n{all}");
    assert!(contenders[1].starts_with("False:"), "then the waiter:\n{all}");
    let waiter = contenders[1].split(':').nth(1).unwrap().to_string();
    assert_eq!(line(&lines, "holders"), [holder.as_str()]);
    assert_eq!(line(&lines, "lock-contenders"), ["2", "True"]);
    assert_eq!(line(&lines, "waiter"), ["True", "True", "True"], "the waiter took the lock, a greater token");
    assert_eq!(line(&lines, "holders-after"), [waiter.as_str()], "the waiter holds on its queued node");
    assert_eq!(line(&lines, "released-all"), ["-"], "no node left:\n{all}");
    assert_eq!(line(&lines, "with"), ["True", "yes"]);
    assert_eq!(line(&lines, "with-released"), ["no"]);

    assert_eq!(line(&lines, "leases"), ["True", "True", "False"], "two leases, the third try refused");
    assert_eq!(line(&lines, "lease-holders"), ["2", "2"]);
    assert_eq!(line(&lines, "rwlock"), ["True", "True", "False"], "readers share, the writer waits");
    assert_eq!(line(&lines, "rwlock-modes"), ["read", "read"]);

    assert_eq!(line(&lines, "no-leader"), ["None"]);
    assert_eq!(line(&lines, "leader"), ["alpha", "True", "True"]);
    assert_eq!(line(&lines, "election-contenders"), ["alpha", "beta"]);
    assert_eq!(line(&lines, "beta-ran-early"), ["False"], "beta did not lead while alpha did");
    assert_eq!(line(&lines, "beta-ran"), ["True", "beta"]);
    assert_eq!(line(&lines, "beta-result"), ["led", "None"], "run returned func's result and stepped down");

    assert_eq!(line(&lines, "data-first"), ["None", "None"], "the first call, before the node exists");
    assert_eq!(line(&lines, "data-created"), ["one", "0", "True"]);
    assert_eq!(line(&lines, "data-changed"), ["two", "1", "True", "True"]);
    assert_eq!(line(&lines, "data-deleted"), ["None", "None"]);
    assert_eq!(line(&lines, "data-stopped"), ["True", "None"]);
    assert_eq!(line(&lines, "three-first"), ["None", "None"]);
    assert_eq!(line(&lines, "three-event"), ["stop", "CREATED"]);
    assert_eq!(line(&lines, "decorated"), ["True"]);

    assert_eq!(line(&lines, "children-first"), ["-"]);
    assert_eq!(line(&lines, "children-x"), ["x"]);
    assert_eq!(line(&lines, "children-xy"), ["x", "y"]);
    assert_eq!(line(&lines, "children-y"), ["y"]);
    assert_eq!(line(&lines, "children-yz"), ["y", "z"], "a child's data change is no call");
    assert_eq!(line(&lines, "children-stopped"), ["True"]);

    // kazoo's Party, memberships, and registrations kept present (their checks are the
    // script's own assertions; these lines say each part ran to its end).
    assert_eq!(line(&lines, "party"), ["ok"], "{all}");
    assert_eq!(line(&lines, "registration"), ["ok"], "{all}");

    // config_delete, each refusal its typed error, and what it left in ZooKeeper.
    assert_eq!(line(&lines, "config-delete-bad-version"), ["BadVersion", "BAD_VERSION", "yes"], "{all}");
    assert_eq!(line(&lines, "config-delete"), ["True", "no"], "deleted at its version:\n{all}");
    assert_eq!(line(&lines, "config-delete-again"), ["NoNode", "NO_NODE"], "as kazoo's delete:\n{all}");
    assert_eq!(line(&lines, "config-delete-not-empty"), ["NotEmpty", "NOT_EMPTY", "yes"], "{all}");
    assert_eq!(
        line(&lines, "config-delete-ephemeral"),
        ["InvalidArgument", "INVALID_ARGUMENT", "yes", "False"],
        "a lock's node is refused, kept, and its claim not lost:\n{all}"
    );
    assert_eq!(line(&lines, "config-delete-unversioned"), ["True", "True", "no"], "{all}");
    assert!(checker_has_no(&format!("{base}/values")).await, "the deleted values are gone");

    // cancel(): the waiter's acquire raised Cancelled, and only the holder's node was left when
    // the script asked ZooKeeper right after.
    assert_eq!(line(&lines, "cancel-idle"), ["False"], "nothing waits: a no-op:\n{all}");
    assert_eq!(
        line(&lines, "cancelled"),
        ["True", "Cancelled", "CANCELLED", "False", "None"],
        "the waiting acquire raised wazoo.Cancelled:\n{all}"
    );
    let holder = line(&lines, "cancel-holder");
    assert_eq!(line(&lines, "cancel-nodes"), holder, "no waiter node left:\n{all}");
    assert_eq!(line(&lines, "cancel-again"), ["False"], "{all}");
    assert_eq!(
        line(&lines, "cancel-pending"),
        ["0", "1", "Cancelled", "CANCELLED"],
        "Client.lock cancelled by path (another path cancels nothing):\n{all}"
    );
    assert_eq!(line(&lines, "cancel-pending-nodes"), holder, "no waiter node left:\n{all}");
    assert_eq!(line(&lines, "cancel-elect"), ["1", "Cancelled", "CANCELLED"], "{all}");
    assert_eq!(
        line(&lines, "cancel-elect-nodes"),
        line(&lines, "cancel-elect-leader"),
        "no candidate node left:\n{all}"
    );
    assert_eq!(line(&lines, "after-cancel"), ["True", "False"], "the cancelled Lock takes the lock later");
    assert_eq!(line(&lines, "cancel-released"), ["-"], "{all}");
}

/// Whether ZooKeeper has no node at `path`.
async fn checker_has_no(path: &str) -> bool {
    client(&zk().address()).await.check_stat(path).await.unwrap().is_none()
}

/// The asyncio client `wazoo.aio` against a real daemon: the token, locks, typed errors (through
/// grpcio-status), a non-blocking acquire, contenders, the leader, configuration, counters,
/// queues, generic invoke, a watch, DataWatch and ChildrenWatch callbacks, `config_delete`, a
/// waiting acquire cancelled from another task, and a lock lost while its block ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_asyncio_client_drives_a_real_daemon() {
    let (daemon, token, _dir) = daemon_with_token().await;
    let installed = install().await;
    let base = unique("python-aio");
    let lines = drive(installed.path(), "aio.py", &[&daemon.grpc, &base, &token]).await;
    let all = lines.join("\n");

    assert_eq!(line(&lines, "unauthenticated"), ["UNAUTHENTICATED", "UNAUTHENTICATED"]);
    assert_eq!(line(&lines, "sessions"), ["True", "5.0"]);
    let held = line(&lines, "held");
    assert!(held[0].starts_with(&format!("{base}/lock/")) && held[2] == "yes", "{all}");
    assert_eq!(line(&lines, "timeout"), ["TIMEOUT", "DEADLINE_EXCEEDED"]);
    assert_eq!(line(&lines, "try-taken"), ["False", "False"]);
    assert_eq!(line(&lines, "contenders"), [format!("True:{}", held[0]).as_str()], "the try left no node");
    assert_eq!(line(&lines, "released"), ["gone"]);
    assert_eq!(line(&lines, "try-free"), ["True", "True", "True"], "a try on a free lock holds it");
    let holders = line(&lines, "holders");
    assert_eq!(holders.len(), 2, "{all}");
    assert_eq!(holders[0], holders[1], "the holder is the try's node");
    assert_eq!(line(&lines, "release"), ["True", "False"]);
    assert_eq!(line(&lines, "no-leader"), ["None"]);
    assert_eq!(line(&lines, "leader"), ["alpha", "True"]);
    assert_eq!(line(&lines, "config-absent"), ["None"]);
    assert_eq!(line(&lines, "bad-version"), ["BAD_VERSION", "FAILED_PRECONDITION"]);
    assert_eq!(line(&lines, "config"), ["v1", "True"]);
    assert_eq!(line(&lines, "counter"), ["5", "3"]);
    assert_eq!(line(&lines, "queue"), ["1", "one"]);
    assert_eq!(line(&lines, "call"), ["True"]);
    assert_eq!(line(&lines, "call-unavailable"), ["RECIPE_UNAVAILABLE"]);
    assert_eq!(line(&lines, "watch"), ["CHANGED", format!("{base}/tree/a").as_str(), "two"]);
    assert_eq!(line(&lines, "data-first"), ["None", "None"]);
    assert_eq!(line(&lines, "data-created"), ["one", "0"]);
    assert_eq!(line(&lines, "data-changed"), ["two", "1"]);
    assert_eq!(line(&lines, "data-deleted"), ["None", "None"]);
    assert_eq!(line(&lines, "children-first"), ["-"]);
    assert_eq!(line(&lines, "children-x"), ["x"]);
    assert_eq!(line(&lines, "children-none"), ["-"]);
    assert_eq!(line(&lines, "lost"), ["node-deleted"]);
    assert_eq!(line(&lines, "membership"), ["ok"], "join and group_members ran to their end:\n{all}");
    assert_eq!(line(&lines, "config-delete"), ["True", "no"], "deleted, then NoNode:\n{all}");
    assert_eq!(
        line(&lines, "cancel"),
        ["True", "Cancelled", "CANCELLED", "True"],
        "Lock.cancel(): the acquire raised Cancelled, only the holder's node left:\n{all}"
    );
    assert_eq!(line(&lines, "lock-lost"), ["node-deleted"]);
    assert!(!lines.iter().any(|l| l == "lost-unnoticed"), "{all}");
    assert_eq!(line(&lines, "closed"), ["False", "False"]);
}
