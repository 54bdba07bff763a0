//! A well-behaved tenant's locks through `wazoo serve` while another tenant's clients attack
//! the daemon: alice's acquire+release latency (p50/p99) alone, then under each flood, with the
//! ratio to alone, in one run on one daemon and one ZooKeeper.
//!
//! The attacks are mallory's, with her own valid token, plus calls with forged tokens:
//! opening sessions as fast as she can with the largest TTL and 100 KB names (past her cap
//! every open is refused), sessions that take a lock and never send a keepalive, and
//! connections that send garbage.
//!
//! Run with `make bench` or `cargo bench -p wazoo-cli --bench hostile`. `WAZOO_BENCH_OPS` sets
//! alice's operations per phase (default 1000).

mod common;

use common::{ms, percentile};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use wazoo_client::{Client, LockOptions, Options};
use wazoo_proto::sessions_client::SessionsClient;
use wazoo_proto::{AcquireRequest, OpenRequest};
use wazoo_testkit::{ServerOptions, ZkServer};

const ALICE: &str = "alice-token-0123456789";
const MALLORY: &str = "mallory-token-0123456789";

fn main() -> anyhow::Result<()> {
    let ops: usize = std::env::var("WAZOO_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let server = ZkServer::start(ServerOptions::default())?;
    let address = server.address();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = runtime.block_on(run(address, root, ops));
    drop(server);
    outcome
}

async fn run(zookeeper: String, root: PathBuf, ops: usize) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("wazoo-bench-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let tenants = serde_json::json!({"tenants": [
        {"name": "alice", "token": ALICE, "zookeeper_secret": "a", "recipes": ["lock"]},
        {"name": "mallory", "token": MALLORY, "zookeeper_secret": "m", "recipes": ["lock"],
         "limits": {"client_sessions": 200, "handles": 4}},
    ]});
    std::fs::write(dir.join("tenants.json"), tenants.to_string())?;
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .env("WAZOO_ZOOKEEPER", &zookeeper)
        .env("WAZOO_PLUGINS", root.join("plugins"))
        .env("WAZOO_CACHE", root.join("target/component-cache"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "off",
            "--watch-every",
            "1h",
            "--max-ttl",
            "5s",
        ])
        .arg("--tenants")
        .arg(dir.join("tenants.json"))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(daemon.stdout.take().unwrap()).lines();
    let ready = lines.next_line().await?.ok_or_else(|| anyhow::anyhow!("wazoo serve did not start"))?;
    let grpc = ready.split_whitespace().nth(3).unwrap_or("").trim_end_matches(',').to_string();
    let connect = |token: &str| {
        let options = Options { token: Some(token.to_string()), timeout: Duration::from_secs(5), tls: None };
        let grpc = grpc.clone();
        async move { Client::connect_with(&grpc, &options).await }
    };
    let alice = connect(ALICE).await?;

    println!(
        "alice's lock acquire+release through the daemon, {ops} operations per row, while mallory attacks"
    );
    println!();
    println!("| attack | p50 | p99 | p99 vs alone | mallory's calls | refused |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut alone_p99 = None;
    for attack in
        [Attack::None, Attack::SessionFlood, Attack::SilentLocks, Attack::Garbage, Attack::ForgedTokens]
    {
        let stop = Arc::new(AtomicBool::new(false));
        let (calls, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut attackers = Vec::new();
        for _ in 0..attack.workers() {
            let (stop, calls, refused, grpc) = (stop.clone(), calls.clone(), refused.clone(), grpc.clone());
            attackers.push(tokio::spawn(attack.run(grpc, stop, calls, refused)));
        }
        let mut samples = lock_loop(&alice, ops).await?;
        stop.store(true, Ordering::Relaxed);
        for a in attackers {
            let _ = a.await;
        }
        let (p50, p99) = (percentile(&mut samples, 50.0), percentile(&mut samples, 99.0));
        let ratio = match alone_p99 {
            None => {
                alone_p99 = Some(p99);
                "1.00×".to_string()
            }
            Some(alone) => format!("{:.2}×", p99.as_secs_f64() / Duration::as_secs_f64(&alone)),
        };
        println!(
            "| {} | {} | {} | {ratio} | {} | {} |",
            attack.name(),
            ms(p50),
            ms(p99),
            calls.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed)
        );
    }
    daemon.kill().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `n` uncontended acquire+release round trips of alice's: each one's time.
async fn lock_loop(alice: &Client, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(n);
    let options = LockOptions { ttl: Duration::from_secs(5), ..LockOptions::default() };
    for _ in 0..n {
        let started = Instant::now();
        let claim = alice.lock("/bench/alice", options.clone()).await?;
        claim.release().await?;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

#[derive(Clone, Copy)]
enum Attack {
    None,
    SessionFlood,
    SilentLocks,
    Garbage,
    ForgedTokens,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::None => "none (alice alone)",
            Attack::SessionFlood => "session flood: largest TTL, 100 KB names",
            Attack::SilentLocks => "locks in sessions without keepalives",
            Attack::Garbage => "garbage connections",
            Attack::ForgedTokens => "forged tokens",
        }
    }

    fn workers(self) -> usize {
        match self {
            Attack::None => 0,
            _ => 4,
        }
    }

    async fn run(self, grpc: String, stop: Arc<AtomicBool>, calls: Arc<AtomicU64>, refused: Arc<AtomicU64>) {
        let token = match self {
            Attack::ForgedTokens => "forged-token-0123456789",
            _ => MALLORY,
        };
        let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
        let Ok(channel) =
            tonic::transport::Endpoint::from_shared(format!("http://{grpc}")).unwrap().connect().await
        else {
            return;
        };
        let auth = move |mut request: tonic::Request<()>| {
            request.metadata_mut().insert("authorization", bearer.clone());
            Ok(request)
        };
        let mut sessions = SessionsClient::with_interceptor(channel.clone(), auth.clone());
        let mut recipes = wazoo_proto::recipes_client::RecipesClient::with_interceptor(channel, auth);
        let name = "m".repeat(100 * 1024);
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let outcome = match self {
                Attack::None => return,
                Attack::SessionFlood | Attack::ForgedTokens => {
                    sessions.open(OpenRequest { ttl_ms: u64::MAX, name: name.clone() }).await.map(drop)
                }
                Attack::SilentLocks => {
                    match sessions.open(OpenRequest { ttl_ms: u64::MAX, name: "silent".into() }).await {
                        Ok(opened) => recipes
                            .acquire(AcquireRequest {
                                session: opened.into_inner().session,
                                path: format!("/bench/mallory/{n}"),
                                timeout_ms: Some(1000),
                                ..AcquireRequest::default()
                            })
                            .await
                            .map(drop),
                        Err(status) => Err(status),
                    }
                }
                Attack::Garbage => {
                    if let Ok(mut stream) = tokio::net::TcpStream::connect(&grpc).await {
                        let _ = stream.write_all(&[0xffu8; 16 * 1024]).await;
                    }
                    Ok(())
                }
            };
            calls.fetch_add(1, Ordering::Relaxed);
            if outcome.is_err() {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
