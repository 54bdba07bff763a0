//! `wazoo serve` as a network service under attack: TLS (and mutual TLS) that a plain-text
//! client cannot get around, a refusal to serve plain text beyond loopback, a token for the one
//! host, bounded sessions, handles and TTLs under a flood, and the standard health and
//! reflection services. Every daemon here is a real process on the shared real ZooKeeper.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::Code;
use wazoo_client::{Client, Options, Tls};
use wazoo_proto::sessions_client::SessionsClient;
use wazoo_proto::{AcquireRequest, OpenRequest};
use wazoo_tests::daemon::{cli, output, Daemon};
use wazoo_tests::procs::{through, Running};
use wazoo_tests::tls::certificates;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn cache() -> PathBuf {
    root().join("target/component-cache")
}

/// A lock acquire in `session` at `path`, waiting at most 5 s.
fn lock_at(session: u64, path: String) -> AcquireRequest {
    AcquireRequest { session, path, timeout_ms: Some(5_000), ..AcquireRequest::default() }
}

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

/// A TLS daemon serves a TLS client (the CLI and the Rust client), and a plain-text client gets
/// nothing from it: out of reach (69), no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_daemon_serves_tls_clients_and_no_plain_text_one() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "");
    let (cert, key, ca) =
        (file(dir.path(), "server.pem"), file(dir.path(), "server.key"), file(dir.path(), "ca.pem"));
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--tls-cert", &cert, "--tls-key", &key]).await;
    let https = format!("https://{}", daemon.grpc);
    let path = unique("tls-lock");

    // The CLI over TLS: a lock, a command under it, its token.
    let (code, stdout, stderr) =
        output(cli().args(["--server", &https, "--tls-ca", &ca, "lock", &path, "--"]).args([
            "sh",
            "-c",
            "echo token $WAZOO_FENCING_TOKEN",
        ]))
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("token "), "{stdout}");

    // The Rust client over TLS.
    let tls = Tls::from_files(Path::new(&ca), None).unwrap();
    let options = Options { token: None, timeout: Duration::from_secs(5), tls: Some(tls) };
    let client = Client::connect_with(&https, &options).await.unwrap();
    let claim = client.lock(&path, Default::default()).await.unwrap();
    assert!(claim.token() > 0);
    claim.release().await.unwrap();

    // Plain text to the TLS port: no session opens, no lock is taken.
    let (code, _, stderr) = output(through(&daemon).args(["config", "get", &path])).await;
    assert_eq!(code, 69, "{stderr}");
    let plain = Client::connect(&daemon.grpc, None, Duration::from_secs(2)).await;
    assert!(plain.is_err(), "a plain-text client got an answer from a TLS daemon");

    // TLS with a CA that did not sign the daemon's certificate: refused too.
    certificates(dir.path(), "other-");
    let (code, _, stderr) = output(cli().args([
        "--server",
        &https,
        "--tls-ca",
        &file(dir.path(), "other-ca.pem"),
        "config",
        "get",
        &path,
    ]))
    .await;
    assert_eq!(code, 69, "{stderr}");
}

/// With `--tls-client-ca`, a client must show a certificate that CA signed; one without is
/// refused, one with is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_lets_in_only_clients_with_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "");
    let (cert, key, ca) =
        (file(dir.path(), "server.pem"), file(dir.path(), "server.key"), file(dir.path(), "ca.pem"));
    let daemon = Daemon::start_with(
        &plugins(),
        &cache(),
        &["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &ca],
    )
    .await;
    let https = format!("https://{}", daemon.grpc);
    let value = format!("{}/v", unique("mtls"));

    let (code, _, stderr) =
        output(cli().args(["--server", &https, "--tls-ca", &ca, "config", "set", &value, "x"])).await;
    assert_ne!(code, 0, "a client without a certificate was served: {stderr}");
    let checker = client(&zk().address()).await;
    assert!(checker.check_stat(&value).await.unwrap().is_none(), "nothing was written");

    let (client_cert, client_key) = (file(dir.path(), "client.pem"), file(dir.path(), "client.key"));
    let (code, _, stderr) = output(cli().args([
        "--server",
        &https,
        "--tls-ca",
        &ca,
        "--tls-cert",
        &client_cert,
        "--tls-key",
        &client_key,
        "config",
        "set",
        &value,
        "x",
    ]))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(checker.get_data(&value).await.unwrap().0, b"x");
}

/// Plain text beyond loopback is refused at start, saying why, unless `--insecure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_beyond_loopback_needs_insecure() {
    let (code, stdout, stderr) =
        output(cli().args(["serve", "--listen", "0.0.0.0:0", "--metrics", "off", "--watch-every", "1h"]))
            .await;
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("plain text") && stderr.contains("--tls-cert") && stderr.contains("--insecure"),
        "{stderr}"
    );

    let mut daemon = Running::start(cli().args([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--insecure",
        "--metrics",
        "off",
        "--watch-every",
        "1h",
    ]));
    let ready = daemon.line("wazoo serve --insecure is ready").await;
    let port = ready.split_whitespace().nth(3).unwrap().rsplit(':').next().unwrap().to_string();
    let (code, _, stderr) =
        output(cli().args(["--server", &format!("127.0.0.1:{port}"), "config", "get", &unique("insecure")]))
            .await;
    assert_eq!(code, 1, "served, and there is no value: {stderr}");
}

/// `--token-file` closes the one host: a call without the token, or with another, is refused
/// and writes nothing; with it, it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_host_takes_a_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let token = "a-token-of-the-one-host-0123456789";
    std::fs::write(dir.path().join("token"), format!("{token}\n")).unwrap();
    let daemon =
        Daemon::start_with(&plugins(), &cache(), &["--token-file", &file(dir.path(), "token")]).await;
    let value = format!("{}/v", unique("token-file"));
    let checker = client(&zk().address()).await;
    for wrong in [None, Some("a-forged-token-of-the-right-length")] {
        let mut command = through(&daemon);
        if let Some(t) = wrong {
            command.args(["--token", t]);
        }
        let (code, _, stderr) = output(command.args(["config", "set", &value, "x"])).await;
        assert_ne!(code, 0, "{wrong:?}: {stderr}");
        assert!(stderr.contains("token"), "{stderr}");
        assert!(checker.check_stat(&value).await.unwrap().is_none(), "{wrong:?}: nothing was written");
    }
    let (code, _, stderr) =
        output(through(&daemon).args(["--token", token, "config", "set", &value, "x"])).await;
    assert_eq!(code, 0, "{stderr}");

    // A token file with too short a token is a usage error at start.
    std::fs::write(dir.path().join("short"), "short\n").unwrap();
    let (code, _, stderr) =
        output(cli().args(["serve", "--metrics", "off", "--token-file", &file(dir.path(), "short")])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("at least 16"), "{stderr}");
}

/// The daemon's resident memory, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// 3000 opens with 100 KB names are refused for their size before they are read whole; 3000
/// with the largest TTL and 8 KB names get at most the per-tenant cap, each TTL cut to the
/// ceiling and each name cut, the rest refused RESOURCE_EXHAUSTED. The daemon grows by less than
/// 64 MB and still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_sessions_is_bounded() {
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--max-sessions-per-tenant", "1000"]).await;
    let before = rss_kib(daemon.pid());
    let mut sessions = SessionsClient::new(daemon.channel().await).max_encoding_message_size(1 << 20);
    let huge = "n".repeat(100 * 1024);
    for _ in 0..3000 {
        let status =
            sessions.open(OpenRequest { ttl_ms: u64::MAX, name: huge.clone() }).await.expect_err("100 KB");
        assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    }
    let name = "n".repeat(8 * 1024);
    let (mut granted, mut refused) = (0, 0);
    for _ in 0..3000 {
        match sessions.open(OpenRequest { ttl_ms: u64::MAX, name: name.clone() }).await {
            Ok(reply) => {
                assert_eq!(reply.into_inner().ttl_ms, 60_000, "the TTL is cut to the ceiling");
                granted += 1;
            }
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(status.message().contains("--max-sessions-per-tenant"), "{status:?}");
                refused += 1;
            }
        }
    }
    assert_eq!((granted, refused), (1000, 2000));
    let grown = rss_kib(daemon.pid()).saturating_sub(before);
    assert!(grown < 64 * 1024, "the daemon grew by {grown} KiB");

    // The daemon still serves: a call that needs no session goes through.
    let value = format!("{}/v", unique("flood"));
    let (code, _, stderr) = output(through(&daemon).args(["config", "set", &value, "x"])).await;
    assert_eq!(code, 0, "{stderr}");
}

/// One session can keep only so many handles: past the cap an acquire is refused before it
/// makes a node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_a_bounded_number_of_handles() {
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--max-handles", "3"]).await;
    let channel = daemon.channel().await;
    let mut sessions = SessionsClient::new(channel.clone());
    let session =
        sessions.open(OpenRequest { ttl_ms: 10_000, name: "handles".into() }).await.unwrap().into_inner();
    let mut recipes = wazoo_proto::recipes_client::RecipesClient::new(channel);
    let base = unique("handles");
    let acquire = |i: usize| lock_at(session.session, format!("{base}/{i}"));
    for i in 0..3 {
        recipes.acquire(acquire(i)).await.unwrap();
    }
    let refused = recipes.acquire(acquire(3)).await.expect_err("a fourth handle");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("--max-handles"), "{refused:?}");
    let checker = client(&zk().address()).await;
    let made = checker.check_stat(&format!("{base}/3")).await.unwrap();
    assert!(made.map_or(true, |s| s.num_children == 0), "no lock node was made for the refused acquire");
}

/// The one host's instance pool is `--max-instances`. A lock taken by Acquire is held as data
/// and keeps no instance, so more are held than the pool has; every claim being taken or
/// waited for keeps one, and past the pool a new one is refused, naming the option, and makes
/// no node; a waiter that comes to hold gives its instance back. Out of range, or beside
/// `--tenants` (where it would be ignored), the option is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_hosts_instance_pool_is_max_instances() {
    for (args, says) in [
        (vec!["--max-instances", "0"], "--max-instances"),
        (vec!["--max-instances", "100001"], "--max-instances"),
        (vec!["--max-instances", "5", "--tenants", "/nonexistent"], "--tenants"),
    ] {
        let (code, stdout, stderr) = output(cli().arg("serve").args(&args).args(["--metrics", "off"])).await;
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }

    let daemon = Daemon::start_with(&plugins(), &cache(), &["--max-instances", "4"]).await;
    let channel = daemon.channel().await;
    let mut sessions = SessionsClient::new(channel.clone());
    let session =
        sessions.open(OpenRequest { ttl_ms: 30_000, name: "instances".into() }).await.unwrap().into_inner();
    let recipes = wazoo_proto::recipes_client::RecipesClient::new(channel);
    let checker = client(&zk().address()).await;
    let base = unique("instances");

    // Twelve locks held on four instances: each gave its instance back once it held.
    let mut held = Vec::new();
    for i in 0..12 {
        let claim = recipes.clone().acquire(lock_at(session.session, format!("{base}/{i}"))).await;
        held.push(claim.unwrap_or_else(|e| panic!("held lock {i}: {e:?}")).into_inner());
    }

    // Waiters on one of them keep an instance each, until none is left.
    let path = format!("{base}/0");
    let wait = |recipes: &wazoo_proto::recipes_client::RecipesClient<_>| {
        let mut recipes = recipes.clone();
        let request = AcquireRequest { timeout_ms: None, ..lock_at(session.session, path.clone()) };
        tokio::spawn(async move { recipes.acquire(request).await })
    };
    let mut waiting = Vec::new();
    let refused = loop {
        let mut call = wait(&recipes);
        tokio::select! {
            answer = &mut call => break answer.unwrap().expect_err("nothing is let go of: no waiter holds"),
            _ = wait_children(&checker, &path, waiting.len() + 2) => waiting.push(call),
        }
        assert!(waiting.len() <= 4, "more waiters than --max-instances 4");
    };
    assert!(!waiting.is_empty(), "no waiter was served at all: {refused:?}");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("--max-instances"), "{refused:?}");
    let queued = checker.list_children(&path).await.unwrap().len();
    assert_eq!(queued, waiting.len() + 1, "a lock node was made for the refused acquire");

    // The holder lets go: the first waiter holds, gives its instance back, and one more waiter
    // is served.
    let first = held.remove(0);
    let release = wazoo_proto::HandleRef { session: session.session, handle: first.handle };
    recipes.clone().release(release).await.unwrap();
    let holder =
        within(LIMIT, "the first waiter holds", waiting.remove(0)).await.unwrap().unwrap().into_inner();
    assert!(holder.fencing_token > first.fencing_token);
    let mut more = wait(&recipes);
    tokio::select! {
        answer = &mut more => panic!("one more waiter is refused: {answer:?}"),
        _ = wait_children(&checker, &path, waiting.len() + 2) => {}
    }
    let _ = sessions.close(wazoo_proto::SessionRef { session: session.session }).await;
}

/// A session that never sends a keepalive, whatever TTL it asked for, ends within the ceiling,
/// and its lock with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_keepalives_ends_within_the_ttl_ceiling() {
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--max-ttl", "1s"]).await;
    let channel = daemon.channel().await;
    let mut sessions = SessionsClient::new(channel.clone());
    let session =
        sessions.open(OpenRequest { ttl_ms: u64::MAX, name: "silent".into() }).await.unwrap().into_inner();
    assert_eq!(session.ttl_ms, 1_000);
    let mut recipes = wazoo_proto::recipes_client::RecipesClient::new(channel);
    let path = unique("silent");
    let claim = recipes.acquire(lock_at(session.session, path.clone())).await.unwrap().into_inner();
    let checker = client(&zk().address()).await;
    within(LIMIT, "the silent session's lock node goes", wait_gone(&checker, &claim.node)).await;
}

/// `grpc.health.v1` answers SERVING for the whole daemon and for each service, with no token
/// even where calls need one; reflection lists the API's services.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_health_and_reflection() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "a-token-of-the-one-host-0123456789\n").unwrap();
    let daemon =
        Daemon::start_with(&plugins(), &cache(), &["--token-file", &file(dir.path(), "token")]).await;
    let mut health = HealthClient::new(daemon.channel().await);
    for service in ["", "wazoo.v1.Recipes", "wazoo.v1.Sessions", "wazoo.v1.Admin"] {
        let reply = health.check(HealthCheckRequest { service: service.to_string() }).await.unwrap();
        assert_eq!(reply.into_inner().status(), ServingStatus::Serving, "{service:?}");
    }
    let unknown = health.check(HealthCheckRequest { service: "nope".into() }).await.expect_err("unknown");
    assert_eq!(unknown.code(), Code::NotFound);

    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let mut reflection = ServerReflectionClient::new(daemon.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies =
        reflection.server_reflection_info(tokio_stream::iter([request])).await.unwrap().into_inner();
    let reply = replies.message().await.unwrap().expect("a reply");
    let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
        panic!("not a list of services: {reply:?}")
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    for service in ["wazoo.v1.Recipes", "wazoo.v1.Sessions", "wazoo.v1.Admin"] {
        assert!(names.contains(&service), "{names:?}");
    }
}

/// `--zookeeper-digest-file` is the host's ZooKeeper identity: what it writes, only that
/// identity reads; a malformed file is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_own_zookeeper_identity_guards_what_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("digest"), "wazoo-ops:a-secret-password\n").unwrap();
    let digest = file(dir.path(), "digest");
    let value = format!("{}/v", unique("digest"));
    let (code, _, stderr) =
        output(cli().args(["--zookeeper-digest-file", &digest, "config", "set", &value, "private"])).await;
    assert_eq!(code, 0, "{stderr}");
    let checker = client(&zk().address()).await;
    let read = checker.get_data(&value).await;
    assert!(matches!(read, Err(zookeeper_client::Error::NoAuth)), "read without the identity: {read:?}");
    let (code, stdout, stderr) =
        output(cli().args(["--zookeeper-digest-file", &digest, "config", "get", &value])).await;
    assert_eq!((code, stdout.as_str()), (0, "private\n"), "{stderr}");

    std::fs::write(dir.path().join("bad"), "no-colon\n").unwrap();
    let (code, _, stderr) =
        output(cli().args(["--zookeeper-digest-file", &file(dir.path(), "bad"), "config", "get", &value]))
            .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("USER:PASSWORD"), "{stderr}");
}

/// `--zookeeper-tls-ca` (with a client certificate for a server that asks for one): the host's
/// session is TLS to the server's secure port, for the CLI and for a daemon, and what it writes
/// is on that server. A plain-text session, a missing client certificate and a CA that did not
/// sign the server's certificate all get nothing (unreachable, 69); a file that is not PEM, and
/// ZooKeeper TLS with `--server`, are usage errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_zookeeper_session_speaks_tls() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "zk-");
    certificates(dir.path(), "other-");
    let key_and_cert = dir.path().join("zk-server.both");
    let both = std::fs::read_to_string(dir.path().join("zk-server.key")).unwrap()
        + &std::fs::read_to_string(dir.path().join("zk-server.pem")).unwrap();
    std::fs::write(&key_and_cert, both).unwrap();
    let server = tokio::task::spawn_blocking(move || {
        let tls =
            wazoo_testkit::ServerTls { key_and_cert, ca: dir.path().join("zk-ca.pem"), client_auth: "need" };
        let server = wazoo_testkit::ZkServer::start(wazoo_testkit::ServerOptions {
            tls: Some(tls),
            ..Default::default()
        })
        .expect("starting ZooKeeper with TLS");
        (server, dir)
    })
    .await
    .unwrap();
    let (server, dir) = server;
    let secure = format!("127.0.0.1:{}", server.secure_port.unwrap());
    let (ca, cert, key) =
        (file(dir.path(), "zk-ca.pem"), file(dir.path(), "zk-client.pem"), file(dir.path(), "zk-client.key"));
    let tls = ["--zookeeper", &secure, "--zookeeper-tls-ca", &ca, "--zookeeper-tls-cert", &cert];
    let value = format!("{}/v", unique("zk-tls"));

    let (code, _, stderr) =
        output(cli().args(tls).args(["--zookeeper-tls-key", &key, "config", "set", &value, "sealed"])).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = output(
        cli().args(tls).args(["--zookeeper-tls-key", &key, "lock", &format!("{value}-lock"), "--"]).args([
            "sh",
            "-c",
            "echo token $WAZOO_FENCING_TOKEN",
        ]),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("token "), "{stdout}");
    // Written on that server (read back through its plain port).
    let checker = client(&server.address()).await;
    assert_eq!(checker.get_data(&value).await.unwrap().0, b"sealed");

    // A daemon whose host speaks TLS to ZooKeeper.
    let daemon = Daemon::start_with(
        &plugins(),
        &cache(),
        &[
            "--zookeeper",
            &secure,
            "--zookeeper-tls-ca",
            &ca,
            "--zookeeper-tls-cert",
            &cert,
            "--zookeeper-tls-key",
            &key,
        ],
    )
    .await;
    let (code, stdout, stderr) = output(through(&daemon).args(["config", "get", &value])).await;
    assert_eq!((code, stdout.as_str()), (0, "sealed\n"), "{stderr}");
    drop(daemon);

    let quick = ["--connect-timeout", "3s", "config", "get", &value];
    for (args, why) in [
        (vec!["--zookeeper", &secure], "plain text to the TLS port"),
        (vec!["--zookeeper", &secure, "--zookeeper-tls-ca", &ca], "no client certificate"),
        (
            vec![
                "--zookeeper",
                &secure,
                "--zookeeper-tls-ca",
                &file(dir.path(), "other-ca.pem"),
                "--zookeeper-tls-cert",
                &file(dir.path(), "other-client.pem"),
                "--zookeeper-tls-key",
                &file(dir.path(), "other-client.key"),
            ],
            "a CA that did not sign the server's certificate",
        ),
    ] {
        let (code, stdout, stderr) = output(cli().args(&args).args(quick)).await;
        assert_eq!((code, stdout.as_str()), (69, ""), "{why}: {stderr}");
        assert!(stderr.contains(&secure), "{why}: {stderr}");
    }

    let (code, _, stderr) =
        output(cli().args(["--zookeeper", &secure, "--zookeeper-tls-ca", &key]).args(quick)).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("CA") && stderr.lines().count() == 1, "{stderr}");
    let (code, _, stderr) = output(cli().args([
        "--server",
        "http://127.0.0.1:1",
        "--zookeeper-tls-ca",
        &ca,
        "config",
        "get",
        "/x",
    ]))
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--server"), "{stderr}");
}

/// Bytes that are not gRPC, sent to the daemon's port, end that connection and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_port_harms_nobody() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let daemon = Daemon::start(&plugins(), &cache()).await;
    for garbage in [&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..], &[0u8; 4096][..], &[0xffu8; 70_000][..]] {
        let mut stream = tokio::net::TcpStream::connect(&daemon.grpc).await.unwrap();
        let _ = stream.write_all(garbage).await;
        let mut answer = Vec::new();
        let _ = within(LIMIT, "the daemon ends the connection", stream.read_to_end(&mut answer)).await;
    }
    let value = format!("{}/v", unique("garbage"));
    let (code, _, stderr) = output(through(&daemon).args(["config", "set", &value, "x"])).await;
    assert_eq!(code, 0, "{stderr}");
}

/// `--log-format json` writes every log line as one JSON object, a call's lines inside the span
/// of its method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_a_line_with_the_calls_span() {
    use tokio::io::AsyncReadExt;
    let mut daemon = Running::start(cli().env("WAZOO_LOG", "info").args([
        "--log-format",
        "json",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        "off",
        "--watch-every",
        "1h",
    ]));
    let ready = daemon.line("wazoo serve is ready").await;
    let grpc = ready.split_whitespace().nth(3).unwrap().trim_end_matches(',').to_string();
    let path = unique("json-logs");
    let (code, _, stderr) = output(cli().args(["--server", &grpc, "lock", &path, "--", "true"])).await;
    assert_eq!(code, 0, "{stderr}");
    daemon.signal(libc::SIGTERM);
    let mut logs = String::new();
    let mut stderr = daemon.child.stderr.take().unwrap();
    within(LIMIT, "the daemon's log ends", stderr.read_to_string(&mut logs)).await.unwrap();
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty(), "no log lines");
    let in_acquire = lines.iter().any(|l| {
        l["span"]["method"].as_str() == Some("/wazoo.v1.Recipes/Acquire")
            || l["span"]["method"].as_str() == Some("/wazoo.v1.Sessions/Open")
    });
    assert!(in_acquire, "no line inside a call's span:\n{logs}");
}

/// The Python client speaks TLS with a token: it takes a lock from a TLS daemon that needs one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_takes_a_lock_over_tls_with_a_token() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "");
    let token = "a-token-of-the-one-host-0123456789";
    std::fs::write(dir.path().join("token"), format!("{token}\n")).unwrap();
    let (cert, key, ca) =
        (file(dir.path(), "server.pem"), file(dir.path(), "server.key"), file(dir.path(), "ca.pem"));
    let daemon = Daemon::start_with(
        &plugins(),
        &cache(),
        &["--tls-cert", &cert, "--tls-key", &key, "--token-file", &file(dir.path(), "token")],
    )
    .await;
    let stubs = python_stubs("python-stubs-tls");
    let path = unique("python-tls");
    let python = |extra: &[&str]| {
        let mut command = tokio::process::Command::new("python3");
        command
            .arg(root().join("tests/python/wazoo_lock.py"))
            .args([daemon.grpc.as_str(), path.as_str(), "--hold-seconds", "0", "--tls-ca", ca.as_str()])
            .args(extra)
            .env("WAZOO_PY_STUBS", &stubs)
            .env("GRPC_DNS_RESOLVER", "native")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        command
    };
    let (code, stdout, stderr) = output(&mut python(&["--token", token])).await;
    assert_eq!(code, 0, "{stderr}");
    let mut lines = BufReader::new(stdout.as_bytes()).lines();
    let held = lines.next_line().await.unwrap().unwrap();
    assert!(held.starts_with("held "), "{held}");
    let (code, _, stderr) = output(&mut python(&[])).await;
    assert_eq!(code, 1, "without the token: {stderr}");
    assert!(stderr.contains("UNAUTHENTICATED"), "{stderr}");
}

/// A tenant's own caps (`limits.client_sessions`, `limits.session_ttl_ms`) hold for it while
/// another tenant keeps the daemon's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_own_session_caps_hold_for_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    // Tenant names are lowercase letters, digits, '-' and '_'.
    let name = |what: &str| unique(what).replace('/', "").to_lowercase();
    let (small, big) = (&name("capped"), &name("open"));
    let tenants = serde_json::json!({"tenants": [
        {"name": small, "token": format!("{small}-token-0123456789"), "zookeeper_secret": "s",
         "root": format!("/hostile/{small}"), "limits": {"client_sessions": 2, "session_ttl_ms": 2000}},
        {"name": big, "token": format!("{big}-token-0123456789"), "zookeeper_secret": "b",
         "root": format!("/hostile/{big}")},
    ]});
    std::fs::write(dir.path().join("tenants.json"), tenants.to_string()).unwrap();
    let daemon =
        Daemon::start_with(&plugins(), &cache(), &["--tenants", &file(dir.path(), "tenants.json")]).await;
    let channel = daemon.channel().await;
    let sessions_of = |tenant: &str| {
        let bearer: tonic::metadata::MetadataValue<_> =
            format!("Bearer {tenant}-token-0123456789").parse().unwrap();
        SessionsClient::with_interceptor(channel.clone(), move |mut request: tonic::Request<()>| {
            request.metadata_mut().insert("authorization", bearer.clone());
            Ok(request)
        })
    };
    let open = |ttl_ms| OpenRequest { ttl_ms, name: "cap".into() };
    let mut capped = sessions_of(small);
    for _ in 0..2 {
        assert_eq!(capped.open(open(u64::MAX)).await.unwrap().into_inner().ttl_ms, 2000);
    }
    let refused = capped.open(open(1000)).await.expect_err("a third session");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let mut other = sessions_of(big);
    for _ in 0..3 {
        assert_eq!(other.open(open(u64::MAX)).await.unwrap().into_inner().ttl_ms, 60_000);
    }
}

/// Recipe names no component has are counted under `recipe="other"`: a client cannot grow the
/// metrics without end by naming recipes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_recipe_names_do_not_grow_the_metrics() {
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let mut recipes = wazoo_proto::recipes_client::RecipesClient::new(daemon.channel().await);
    for i in 0..200 {
        let request = wazoo_proto::PathRequest { path: "/x".into(), recipe: format!("made-up-{i}") };
        let refused = recipes.config_get(request).await.expect_err("no such recipe");
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    }
    let value = format!("{}/v", unique("metrics-names"));
    let (code, _, stderr) = output(through(&daemon).args(["config", "set", &value, "x"])).await;
    assert_eq!(code, 0, "{stderr}");
    let metrics = daemon.metrics().await;
    assert!(!metrics.contains("made-up-"), "{metrics}");
    assert!(metrics.contains(r#"method="ConfigGet",recipe="other""#), "{metrics}");
    assert!(metrics.contains(r#"method="ConfigSet",recipe="config""#), "{metrics}");
}

/// Settings that would be ignored are refused: a client's `--token` or `--tls-ca` given to
/// `serve`, client TLS or a token without `--server`, metrics beyond loopback without
/// `--insecure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_that_would_be_ignored_are_usage_errors() {
    let serve = ["serve", "--metrics", "off", "--watch-every", "1h"];
    for (args, says) in [
        (vec!["--token", "a-token-of-sixteen-or-more"], "--token-file"),
        (vec!["--tls-ca", "/nonexistent"], "--tls-client-ca"),
    ] {
        let (code, stdout, stderr) = output(cli().args(&args).args(serve)).await;
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let (code, _, stderr) =
        output(cli().args(["--token", "a-token-of-sixteen-or-more", "config", "get", "/x"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--server"), "{stderr}");
    let (code, _, stderr) =
        output(cli().args(["serve", "--metrics", "0.0.0.0:0", "--watch-every", "1h"])).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--insecure"), "{stderr}");
}

/// `--zookeeper`, `--plugins` and `--cache` typed with `--server` would be ignored (the daemon's
/// ZooKeeper, plugins and cache are used): refused with one line naming them, exit status 2,
/// before the daemon is asked anything, typed before the subcommand or after it, and with
/// `--server` from WAZOO_SERVER too. The same settings from their environment variables are let
/// be, as a shell's profile may set them for local use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_options_typed_with_server_are_refused() {
    let daemon = Daemon::start(&plugins(), &cache()).await;
    let value = format!("{}/v", unique("typed-with-server"));
    for (typed, names) in [
        (vec!["--zookeeper", "127.0.0.1:2181"], "--zookeeper is for"),
        (vec!["--plugins", "/srv/plugins"], "--plugins is for"),
        (vec!["--cache", "none"], "--cache is for"),
        (
            vec!["--zookeeper", "127.0.0.1:2181", "--cache", "/tmp/c", "--plugins", "p"],
            "--zookeeper, --plugins and --cache are for",
        ),
    ] {
        // Before the subcommand, and after it (global options are read anywhere).
        for place in ["before", "after"] {
            let mut command = cli();
            command.args(["--server", &daemon.grpc]);
            match place {
                "before" => command.args(&typed).args(["config", "set", &value, "x"]),
                _ => command.args(["config", "set", &value, "x"]).args(&typed),
            };
            let (code, stdout, stderr) = output(&mut command).await;
            assert_eq!((code, stdout.as_str()), (2, ""), "{typed:?} {place}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.starts_with(&format!("wazoo: {names} this process's own host")), "{stderr}");
            assert!(stderr.contains("the daemon's ZooKeeper, plugins and cache are used"), "{stderr}");
        }
    }
    let checker = client(&zk().address()).await;
    assert!(checker.check_stat(&value).await.unwrap().is_none(), "nothing was written");
    // --server from the environment: the same refusal, saying where --server came from.
    let (code, _, stderr) = output(cli().env("WAZOO_SERVER", &daemon.grpc).args([
        "--plugins",
        "/srv/plugins",
        "config",
        "get",
        &value,
    ]))
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--server (set by WAZOO_SERVER)"), "{stderr}");
    // From the environment they are let be: the daemon's are used.
    let (code, stdout, stderr) =
        output(daemon.wazoo().env("WAZOO_CACHE", "/nonexistent").args(["config", "set", &value, "x"])).await;
    assert_eq!((code, stdout.trim()), (0, "0"), "{stderr}");
    assert_eq!(checker.get_data(&value).await.unwrap().0, b"x");
}

/// `serve` checks its TLS files before it says it serves: a certificate file that holds no
/// certificate, a key file that holds no key, the key of another certificate, a client CA file
/// that holds no certificate, and PEM blocks of garbage, each refused with one line naming the
/// option and the file, exit status 2, and no `serving gRPC on …` line (which a supervisor
/// waits for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tls_files_are_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "");
    certificates(dir.path(), "other-");
    let (cert, key, ca) =
        (file(dir.path(), "server.pem"), file(dir.path(), "server.key"), file(dir.path(), "ca.pem"));
    let other_key = file(dir.path(), "other-server.key");
    let garbage = file(dir.path(), "garbage.pem");
    std::fs::write(&garbage, "this is not PEM\n").unwrap();
    let bad_block = file(dir.path(), "bad-block.pem");
    std::fs::write(
        &bad_block,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let bad_key_block = file(dir.path(), "bad-key-block.pem");
    std::fs::write(&bad_key_block, "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
        .unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--tls-cert", &garbage, "--tls-key", &key],
            format!("--tls-cert {garbage}: no certificate in the file"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &garbage],
            format!("--tls-key {garbage}: no private key in the file"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &other_key],
            format!("--tls-key {other_key}: not the key of the certificate in --tls-cert {cert}"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &garbage],
            format!("--tls-client-ca {garbage}: no certificate in the file"),
        ),
        (vec!["--tls-cert", &bad_block, "--tls-key", &key], format!("--tls-cert {bad_block}: ")),
        (vec!["--tls-cert", &cert, "--tls-key", &bad_key_block], format!("--tls-key {bad_key_block}: ")),
        (
            vec!["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &bad_block],
            format!("--tls-client-ca {bad_block}: "),
        ),
    ];
    for (tls, says) in cases {
        let mut serve = cli();
        // `--tls-client-ca` is serve's own: after it.
        serve
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics", "off", "--watch-every", "1h"])
            .args(&tls);
        // A daemon that took the files would serve on: it is stopped at the limit.
        let out = within(LIMIT, "wazoo serve refuses", serve.output()).await.unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!stdout.contains("serving"), "{tls:?}: announced: {stdout}");
        assert_eq!(out.status.code(), Some(2), "{tls:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{tls:?}: {stderr}");
        assert!(stderr.starts_with(&format!("wazoo: {says}")), "{tls:?}: {stderr}");
    }
    // The good files still serve.
    let daemon = Daemon::start_with(
        &plugins(),
        &cache(),
        &["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &ca],
    )
    .await;
    assert!(!daemon.grpc.is_empty());
}

/// Streams are counted per tenant (here the one host): past `--max-streams` a watch is refused,
/// and closing one makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_bounded() {
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--max-streams", "3"]).await;
    let mut recipes = wazoo_proto::recipes_client::RecipesClient::new(daemon.channel().await);
    let path = unique("streams");
    let watch = || wazoo_proto::PathRequest { path: path.clone(), recipe: String::new() };
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(recipes.config_watch(watch()).await.unwrap().into_inner());
    }
    let refused = recipes.config_watch(watch()).await.expect_err("a fourth stream");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("--max-streams"), "{refused:?}");
    drop(open.pop());
    // The slot comes back once the daemon sees the stream go (its task ends with the stream).
    within(LIMIT, "room for a stream again", async {
        loop {
            if recipes.config_watch(watch()).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}

/// Acquires sent at once on one session cannot pass `--max-handles` together: the cap counts
/// the handles being made, and a refused acquire makes no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_at_once_do_not_pass_the_handle_cap() {
    let daemon = Daemon::start_with(&plugins(), &cache(), &["--max-handles", "3"]).await;
    let channel = daemon.channel().await;
    let mut sessions = SessionsClient::new(channel.clone());
    let session =
        sessions.open(OpenRequest { ttl_ms: 10_000, name: "at once".into() }).await.unwrap().into_inner();
    let base = unique("at-once");
    let calls = (0..10).map(|i| {
        let mut recipes = wazoo_proto::recipes_client::RecipesClient::new(channel.clone());
        let request = lock_at(session.session, format!("{base}/{i}"));
        async move { recipes.acquire(request).await }
    });
    let outcomes = futures_join_all(calls).await;
    let granted = outcomes.iter().filter(|o| o.is_ok()).count();
    for refused in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    }
    assert_eq!(granted, 3);
    let checker = client(&zk().address()).await;
    let mut nodes = 0;
    for i in 0..10 {
        nodes += children(&checker, &format!("{base}/{i}")).await.len();
    }
    assert_eq!(nodes, 3, "one lock node per granted acquire, none for the refused ones");
}

/// Runs every future at once: their outputs in order.
async fn futures_join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.unwrap());
    }
    outputs
}
