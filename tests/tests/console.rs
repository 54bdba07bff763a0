//! The web console of `wazoo serve` in a real browser: headless Chromium driven through
//! chromedriver (WebDriver), against a daemon with two tenants on the real test ZooKeeper.
//!
//! A tenant logs in (a wrong token is refused), sees a lock appear on the page while a client
//! takes it through the daemon, with the waiter queued behind it, sees the lock pass to the
//! waiter and disappear when both have let go, all without reloading the page (the page follows
//! the daemon's event stream); another tenant's browser never sees any of it, and the first
//! never sees the second's. The page is kept as a screenshot, `target/artifacts/console.png`
//! (and, with `WAZOO_DOCS_SCREENSHOTS=1`, copied to `docs/src/images/console.png`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use wazoo_client::{proto, Ask, Client};
use wazoo_tests::daemon::Daemon;
use wazoo_tests::*;

/// How long the page may take to show a change.
const PAGE: Duration = Duration::from_secs(30);
const LIMIT: Duration = Duration::from_secs(120);

const ALICE: &str = "alice-console-token-0123456789";
const BOB: &str = "bob-console-token-0123456789";

/// chromedriver on a free port, killed when dropped.
struct Driver {
    _child: Child,
    url: String,
}

impl Driver {
    async fn start() -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting chromedriver (the chromium-driver package: .ci/setup installs it)");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(tokio::time::Instant::now() < deadline, "chromedriver does not listen on {port}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Driver { _child: child, url: format!("http://127.0.0.1:{port}") }
    }

    /// A new headless Chromium window (`--no-sandbox`: the tests run as root).
    async fn browser(&self) -> Browser {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_string(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,1000", "--hide-scrollbars"],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        within(
            LIMIT,
            "a browser session",
            ClientBuilder::new(connector).capabilities(caps).connect(&self.url),
        )
        .await
        .expect("a Chromium session through chromedriver")
    }
}

/// Runs `script` in the page until `done` holds of what it returns, or [`PAGE`] passes: what it
/// returned last.
async fn until(browser: &Browser, what: &str, script: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + PAGE;
    loop {
        let seen = browser.execute(script, Vec::new()).await.unwrap_or_else(|e| json!(format!("error: {e}")));
        if done(&seen) {
            return seen;
        }
        if tokio::time::Instant::now() >= deadline {
            let page = "return (document.body.dataset.error || '') + '\\n' + document.body.innerText";
            let text = browser.execute(page, Vec::new()).await.unwrap_or_default();
            panic!(
                "{what}: not seen within {PAGE:?}; last seen {seen}\npage:\n{}",
                text.as_str().unwrap_or("")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The claims a page shows: path, kind, and each contender's role and identity, in order.
const CLAIMS: &str = "return [...document.querySelectorAll('#claims .claim')].map(c => ({
    path: c.dataset.path, kind: c.dataset.kind,
    rows: [...c.querySelectorAll('tbody tr[data-holds]')].map(r => ({
        holds: r.dataset.holds === 'true', identity: r.querySelector('.identity').textContent }))}))";

/// The client sessions a page shows: name, and what each holds or waits for.
const SESSIONS: &str = "return [...document.querySelectorAll('#sessions tr[data-session]')].map(r => ({
    name: r.dataset.name, claims: r.lastElementChild.textContent }))";

fn claim<'a>(claims: &'a Value, path: &str) -> Option<&'a Value> {
    claims.as_array()?.iter().find(|c| c["path"] == path)
}

/// The roles of a claim's contenders, in order (`true`: holds).
fn roles(claims: &Value, path: &str) -> Option<Vec<bool>> {
    let rows = claim(claims, path)?["rows"].as_array()?;
    Some(rows.iter().map(|r| r["holds"] == true).collect())
}

/// The page's state: `login`, `live`, `reconnecting` (set by console.js).
const STATE: &str = "return document.body.dataset.state";

/// A plain HTTP/1.1 GET of the console: status, head (lower case), body.
async fn get(address: &str, target: &str, cookie: Option<&str>) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let cookie = cookie.map(|c| format!("Cookie: {c}\r\n")).unwrap_or_default();
    let request = format!("GET {target} HTTP/1.1\r\nHost: {address}\r\n{cookie}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    within(Duration::from_secs(15), "the console answers", stream.read_to_end(&mut raw)).await.unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// Takes the lock at `path` through the daemon, in a client session named `who`, as holder
/// `who`: waits until it is held.
async fn take(client: &Client, path: &str, who: &str) -> wazoo_client::Claim {
    claim_as(client, Ask::Acquire { family: proto::Family::Lock, leases: 0 }, path, who).await
}

/// Leadership of the election at `path`, as candidate `who` in a client session of that name:
/// waits until it leads.
async fn lead(client: &Client, path: &str, who: &str) -> wazoo_client::Claim {
    claim_as(client, Ask::Campaign { id: who.to_string() }, path, who).await
}

async fn claim_as(client: &Client, ask: Ask, path: &str, who: &str) -> wazoo_client::Claim {
    let session = client.session(Duration::from_secs(10), who.to_string()).await.unwrap();
    let mut contender = session.contender(ask, "").holder_id(who);
    contender.acquire(path, None).await.unwrap();
    contender.hold().await.unwrap()
}

fn artifacts() -> PathBuf {
    root().join("target/artifacts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_shows_each_tenant_its_claims_live() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("wazoo-console-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tenants.json");
    let tenants = json!({"tenants": [
        {"name": "alice", "token": ALICE, "zookeeper_secret": "alice-zk", "root": format!("/tenants/console-alice-{pid}")},
        {"name": "bob", "token": BOB, "zookeeper_secret": "bob-zk", "root": format!("/tenants/console-bob-{pid}")},
    ]});
    std::fs::write(&file, tenants.to_string()).unwrap();
    let daemon =
        Daemon::start_with(&plugins(), &daemon::cache(), &["--tenants", file.to_str().unwrap()]).await;
    let web = daemon.metrics_address().to_string();

    // Over plain HTTP first: the page is served to anyone (it holds no data), and strictly
    // confined; the data is not, without a token of this daemon.
    let (status, head, body) = get(&web, "/", None).await;
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-security-policy: default-src 'none'"), "{head}");
    assert!(body.contains("/console/console.js") && !body.contains("http"), "vendored, no CDN: {body}");
    for target in ["/console/events", "/console/whoami", "/console/events?token=not-a-token"] {
        assert_eq!(get(&web, target, None).await.0, 401, "{target}");
    }
    // A token given in the address is swapped for a cookie that is not the token, and the
    // browser is sent back to `/`.
    let (status, head, _) = get(&web, &format!("/?token={BOB}"), None).await;
    assert_eq!(status, 303, "{head}");
    assert!(head.contains("\r\nlocation: /\r\n"), "{head}");
    let cookie = head.lines().find_map(|l| l.strip_prefix("set-cookie: ")).expect("a cookie").to_string();
    assert!(cookie.contains("httponly") && !cookie.contains(&BOB.to_ascii_lowercase()), "{cookie}");
    let cookie = cookie.split(';').next().unwrap().to_string();
    let (status, _, whoami) = get(&web, "/console/whoami", Some(&cookie)).await;
    assert_eq!(status, 200, "{whoami}");
    assert_eq!(serde_json::from_str::<Value>(&whoami).unwrap(), json!({"guarded": true, "tenant": "bob"}));
    assert_eq!(get(&web, "/console/whoami", Some("wazoo_console=0123abcd")).await.0, 401);

    let driver = Driver::start().await;
    let alice_page = driver.browser().await;
    alice_page.goto(&format!("http://{web}/")).await.unwrap();
    until(&alice_page, "the login form", STATE, |s| s == "login").await;
    // A wrong token is refused; alice's shows alice's host.
    alice_page.find(Locator::Css("#token")).await.unwrap().send_keys("not-a-token").await.unwrap();
    alice_page.find(Locator::Css("#login button")).await.unwrap().click().await.unwrap();
    let refused = "return document.body.dataset.state + ' ' + document.getElementById('refused').hidden";
    until(&alice_page, "the token refused", refused, |s| s == "login false").await;
    alice_page.find(Locator::Css("#token")).await.unwrap().send_keys(ALICE).await.unwrap();
    alice_page.find(Locator::Css("#login button")).await.unwrap().click().await.unwrap();
    until(&alice_page, "alice's console, live", STATE, |s| s == "live").await;
    // A mark on this page: gone if it were ever loaded again.
    alice_page.execute("window.stillTheSamePage = true", vec![]).await.unwrap();
    let tenant =
        alice_page.execute("return document.getElementById('tenant').textContent", vec![]).await.unwrap();
    assert_eq!(tenant, "tenant alice");
    let url = alice_page.current_url().await.unwrap();
    assert!(!url.as_str().contains("token"), "{url}");
    // Bob follows his own, from a link with his token in it.
    let bob_page = driver.browser().await;
    bob_page.goto(&format!("http://{web}/?token={BOB}")).await.unwrap();
    until(&bob_page, "bob's console, live", STATE, |s| s == "live").await;
    assert_eq!(bob_page.current_url().await.unwrap().as_str(), format!("http://{web}/"), "the token is gone");

    // Alice takes a lock through the daemon, and a second client of hers queues behind it.
    let alice = Client::connect(&daemon.grpc, Some(ALICE), Duration::from_secs(5)).await.unwrap();
    let bob = Client::connect(&daemon.grpc, Some(BOB), Duration::from_secs(5)).await.unwrap();
    let (path, bobs, leader) = ("/console/deploy", "/console/bob-only", "/console/leader");
    // A few quick acquisitions first, for the chart.
    for _ in 0..4 {
        take(&alice, "/console/jobs", "worker").await.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let held = within(LIMIT, "alice's lock", take(&alice, path, "deployer-1")).await;
    let waiter = tokio::spawn({
        let alice = alice.clone();
        async move { take(&alice, path, "deployer-2").await }
    });
    let bob_held = within(LIMIT, "bob's lock", take(&bob, bobs, "bob-1")).await;
    // And an election: one leads, one waits to.
    let leads = within(LIMIT, "leadership", lead(&alice, leader, "web-1")).await;
    let follower = tokio::spawn({
        let alice = alice.clone();
        async move { lead(&alice, leader, "web-2").await }
    });

    let seen = until(&alice_page, "alice's lock and election, held and waited for", CLAIMS, |c| {
        roles(c, path) == Some(vec![true, false]) && roles(c, leader) == Some(vec![true, false])
    })
    .await;
    assert_eq!(claim(&seen, leader).unwrap()["kind"], "election", "{seen}");
    assert!(claim(&seen, "/console/jobs").is_none(), "let go: {seen}");
    let deploy = claim(&seen, path).unwrap();
    assert_eq!(deploy["kind"], "lock", "{seen}");
    let identities: Vec<&str> =
        deploy["rows"].as_array().unwrap().iter().map(|r| r["identity"].as_str().unwrap()).collect();
    assert!(identities[0].contains("deployer-1") && identities[1].contains("deployer-2"), "{identities:?}");
    assert!(claim(&seen, bobs).is_none(), "alice sees bob's claim: {seen}");
    // Her four client sessions, by name: of the lock's two, one holds it, the other waits.
    let doing = |sessions: &Value, name: &str| {
        let session = sessions.as_array()?.iter().find(|s| s["name"] == name)?;
        Some(session["claims"].as_str()?.to_string())
    };
    until(&alice_page, "alice's four client sessions", SESSIONS, |s| {
        s.as_array().is_some_and(|s| s.len() == 4)
            && doing(s, "deployer-1").is_some_and(|c| c.starts_with(&format!("holds {path} (lock)")))
            && doing(s, "deployer-2").is_some_and(|c| c.starts_with(&format!("waits for {path} (lock)")))
    })
    .await;
    let bob_seen = until(&bob_page, "bob's lock", CLAIMS, |c| roles(c, bobs) == Some(vec![true])).await;
    assert!(claim(&bob_seen, path).is_none(), "bob sees alice's claim: {bob_seen}");
    let bob_sessions =
        until(&bob_page, "bob's one session", SESSIONS, |s| s.as_array().is_some_and(|s| s.len() == 1)).await;
    assert!(!bob_sessions.to_string().contains(path), "{bob_sessions}");
    // The chart counted alice's acquisition, not bob's page.
    let bars = "return document.querySelectorAll('#chart-acquired rect').length";
    until(&alice_page, "alice's acquisitions in her chart", bars, |n| n.as_u64().is_some_and(|n| n >= 2))
        .await;
    let bob_bars = bob_page.execute(bars, vec![]).await.unwrap();
    assert!(bob_bars.as_u64().is_some_and(|n| n <= 1), "bob took one lock: {bob_bars}");

    // Alice's queue, with its items now.
    let queue = "/console/work-queue";
    for item in ["a", "b", "c"] {
        let put = proto::QueuePutRequest { path: queue.into(), data: item.into(), ..Default::default() };
        alice.recipes().queue_put(put).await.unwrap();
    }
    let depth = "return [...document.querySelectorAll('#queues tr[data-queue]')]
        .map(r => r.dataset.queue + ' ' + r.lastElementChild.textContent)";
    until(&alice_page, "alice's queue and its depth", depth, |q| q == &json!([format!("{queue} 3")])).await;
    let bob_queues = bob_page.execute(depth, vec![]).await.unwrap();
    assert_eq!(bob_queues, json!([]), "bob sees alice's queue");

    // The picture, kept.
    let height = alice_page.execute("return document.documentElement.scrollHeight", vec![]).await.unwrap();
    let height = height.as_u64().unwrap_or(1000).clamp(600, 2400) as u32;
    alice_page.set_window_size(1280, height + 120).await.unwrap();
    until(&alice_page, "the page, live", STATE, |s| s == "live").await;
    let png = alice_page.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a screenshot of {} bytes", png.len());
    std::fs::create_dir_all(artifacts()).unwrap();
    std::fs::write(artifacts().join("console.png"), &png).unwrap();
    if std::env::var_os("WAZOO_DOCS_SCREENSHOTS").is_some() {
        std::fs::write(root().join("docs/src/images/console.png"), &png).unwrap();
    }

    // Narrowed to one path, the page follows only the claims under it; widened, all again.
    let narrow = |to: &'static str| {
        let page = alice_page.clone();
        async move {
            let field = page.find(Locator::Css("#prefix")).await.unwrap();
            field.clear().await.unwrap();
            field.send_keys(to).await.unwrap();
            page.find(Locator::Css("#under button")).await.unwrap().click().await.unwrap();
        }
    };
    narrow(leader).await;
    until(&alice_page, "only the election, under its path", CLAIMS, |c| {
        claim(c, leader).is_some() && claim(c, path).is_none()
    })
    .await;
    narrow("/").await;
    until(&alice_page, "every claim again", CLAIMS, |c| {
        claim(c, leader).is_some() && claim(c, path).is_some()
    })
    .await;

    // The holder lets go: the waiter holds, alone; then it lets go too, and the lock is gone.
    held.release().await.unwrap();
    let second = within(LIMIT, "the waiter's lock", waiter).await.unwrap();
    until(&alice_page, "the lock passed to the waiter", CLAIMS, |c| roles(c, path) == Some(vec![true])).await;
    second.release().await.unwrap();
    until(&alice_page, "alice's lock gone", CLAIMS, |c| claim(c, path).is_none()).await;
    leads.release().await.unwrap();
    let next = within(LIMIT, "the next leader", follower).await.unwrap();
    until(&alice_page, "the next leader", CLAIMS, |c| roles(c, leader) == Some(vec![true])).await;
    next.release().await.unwrap();
    until(&alice_page, "the election gone", CLAIMS, |c| claim(c, leader).is_none()).await;
    until(&alice_page, "alice's sessions gone", SESSIONS, |s| s.as_array().is_some_and(Vec::is_empty)).await;
    // Bob's is still there, and goes when he lets go.
    assert_eq!(roles(&bob_page.execute(CLAIMS, vec![]).await.unwrap(), bobs), Some(vec![true]));
    bob_held.release().await.unwrap();
    until(&bob_page, "bob's lock gone", CLAIMS, |c| claim(c, bobs).is_none()).await;
    // The page followed every change on its own stream: it was never loaded again.
    let mark = "return window.stillTheSamePage === true";
    assert_eq!(alice_page.execute(mark, vec![]).await.unwrap(), true);

    alice_page.close().await.unwrap();
    bob_page.close().await.unwrap();
}
