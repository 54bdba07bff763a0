//! Leader election against a real ZooKeeper, under repeated session loss, and against Curator's
//! LeaderLatch on the same path: every test runs on the Rust recipe and on the JavaScript one
//! (`plugins/js/election`), and the two contend in one election.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use wazoo::{ElectionHandle, Host, Lost, RecipeError, ZkError};
use wazoo_tests::proxy::Proxy;
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

wazoo_tests::implementations!(rust: "election", javascript: "election-js"; [
    one_leader_at_a_time_and_resign_hands_over_in_order,
    observers_see_the_leader_and_its_acknowledgement_without_contending,
    never_two_leaders_across_twenty_session_kills,
    curator_leader_latch_and_wazoo_elect_one_leader_both_ways,
]);

async fn handle(host: &Host, recipe: &str) -> ElectionHandle {
    host.election(recipe).await.unwrap()
}

/// A register that accepts a write only with a token at least as high as the last one: what a
/// fenced resource does with a leader's token.
#[derive(Default)]
struct Register {
    last: i64,
}

impl Register {
    fn write(&mut self, token: i64) -> bool {
        if token < self.last {
            return false;
        }
        self.last = token;
        true
    }
}

async fn one_leader_at_a_time_and_resign_hands_over_in_order(recipe: &str) {
    hand_over_in_order(&[recipe; 4]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_and_javascript_candidates_hand_over_in_one_election() {
    hand_over_in_order(&["election-js", "election", "election-js", "election"]).await;
}

/// Candidate i runs `recipes[i]`; the first leads, the others queue and lead in turn.
async fn hand_over_in_order(recipes: &[&str]) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("elect-order");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut first = handle(&host, recipes[0]).await;
    let first_term = first.campaign(&path, "c0", None).await.unwrap();
    let armed = host.stats().watches_armed();
    for i in 1..4 {
        let mut candidate = handle(&host, recipes[i]).await;
        let (election, tx) = (path.clone(), tx.clone());
        tokio::spawn(async move {
            let term = candidate.campaign(&election, &format!("c{i}"), None).await.unwrap();
            tx.send((i, term.token)).unwrap();
            candidate.resign().await.unwrap();
        });
        wait_children(&checker, &path, i + 1).await;
    }
    within(LIMIT, "candidates arm their watches", host.stats().armed_at_least(armed + 3)).await;
    let before = host.stats().watch_wakeups();
    first.resign().await.unwrap();
    let mut order = Vec::new();
    let mut last_token = first_term.token;
    within(LIMIT, "every candidate leads in turn", async {
        while order.len() < 3 {
            let (i, token) = rx.recv().await.unwrap();
            assert!(token > last_token, "leader tokens must rise");
            last_token = token;
            order.push(i);
        }
    })
    .await;
    assert_eq!(order, vec![1, 2, 3], "candidates lead in the order they joined");
    assert_eq!(host.stats().watch_wakeups() - before, 3, "each resignation wakes exactly one candidate");
}

async fn observers_see_the_leader_and_its_acknowledgement_without_contending(recipe: &str) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("elect-observe");
    let mut observer = handle(&host, recipe).await;
    assert!(observer.leader(&path).await.unwrap().is_none(), "no leader before any candidate");

    let mut alpha = handle(&host, recipe).await;
    let watching = {
        let path = path.clone();
        tokio::spawn(async move {
            let seen = observer.observe(&path, None, None).await.unwrap();
            (observer, seen)
        })
    };
    let term = alpha.campaign(&path, "alpha", None).await.unwrap();
    let (mut observer, seen) = within(LIMIT, "observer sees the first leader", watching).await.unwrap();
    let seen = seen.expect("a leader");
    assert_eq!((seen.id.as_str(), seen.token, seen.acknowledged.as_deref()), ("alpha", term.token, None));

    alpha.acknowledge("alpha is serving").await.unwrap();
    let now = observer.leader(&path).await.unwrap().unwrap();
    assert_eq!(now.acknowledged.as_deref(), Some("alpha is serving"));

    let mut beta = handle(&host, recipe).await;
    let beta_path = path.clone();
    let beta_campaign = tokio::spawn(async move {
        beta.campaign(&beta_path, "beta", None).await.unwrap();
        beta
    });
    wait_children(&checker, &path, 2).await;
    let known = now.node.clone();
    alpha.resign().await.unwrap();
    let next = observer.observe(&path, Some(&known), Some(LIMIT)).await.unwrap().expect("a new leader");
    assert_eq!(next.id, "beta");
    assert_eq!(next.acknowledged, None, "alpha's acknowledgement went with alpha");
    let mut beta = within(LIMIT, "beta leads", beta_campaign).await.unwrap();
    assert_eq!(children(&checker, &path).await.len(), 1, "observing created no node");
    assert!(matches!(
        observer.observe(&path, Some(&next.node), Some(Duration::from_millis(200))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    beta.resign().await.unwrap();
}

async fn never_two_leaders_across_twenty_session_kills(recipe: &str) {
    const KILLS: usize = 20;
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("elect-kills");
    let register = Arc::new(Mutex::new(Register::default()));
    let (elected_tx, mut elected) = mpsc::unbounded_channel::<(usize, String, i64)>();
    let mut proxies = Vec::new();
    let mut refused_zombies = Vec::new();
    for i in 0..3 {
        let proxy = Proxy::start(&address).await;
        let host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
        proxies.push(proxy);
        let (path, register, elected_tx) = (path.clone(), register.clone(), elected_tx.clone());
        let (zombie_tx, zombie_rx) = mpsc::unbounded_channel::<bool>();
        let recipe = recipe.to_string();
        refused_zombies.push(zombie_rx);
        tokio::spawn(async move {
            loop {
                let Ok(mut candidate) = host.election(&recipe).await else { continue };
                let term = match candidate.campaign(&path, &format!("p{i}"), None).await {
                    Ok(term) => term,
                    Err(_) => continue, // the session went while campaigning: join again
                };
                let lost = candidate.lost();
                // First act as leader: write to the fenced register. It must be accepted.
                let accepted = register.lock().unwrap().write(term.token);
                assert!(accepted, "a newly elected leader's token {} was refused: two leaders", term.token);
                if elected_tx.send((i, term.node.clone(), term.token)).is_err() {
                    return;
                }
                let reason = lost.await;
                assert!(matches!(reason, Lost::Session(_)), "{reason}");
                // A deposed leader that still tries to act is fenced off.
                let zombie_accepted = register.lock().unwrap().write(term.token);
                let _ = zombie_tx.send(!zombie_accepted);
                candidate.close().await;
            }
        });
    }
    let (mut leader, mut node, first) = within(LIMIT, "a first leader", elected.recv()).await.unwrap();
    let mut tokens = vec![first];
    for kill in 0..KILLS {
        // Kill the leader's session: silence it until the server expires it.
        proxies[leader].freeze();
        within(LIMIT, "server expires the leader's session", wait_gone(&checker, &node)).await;
        // A successor is elected (and has written) while the old leader is still cut off.
        let (next, next_node, token) = within(LIMIT, "a successor is elected", elected.recv()).await.unwrap();
        assert_ne!(next, leader, "kill {kill}: a silenced participant cannot lead");
        tokens.push(token);
        proxies[leader].thaw();
        let refused =
            within(LIMIT, "the deposed leader notices", refused_zombies[leader].recv()).await.unwrap();
        assert!(refused, "kill {kill}: the deposed leader's late write was accepted");
        (leader, node) = (next, next_node);
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "leader tokens must rise: {tokens:?}");
    assert_eq!(tokens.len(), KILLS + 1);
    // Every participant rejoins with exactly one node: no orphan candidacies were left behind.
    within(LIMIT, "three candidates, no orphans", wait_children(&checker, &path, 3)).await;
}

async fn curator_leader_latch_and_wazoo_elect_one_leader_both_ways(recipe: &str) {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("elect-curator");
    let host = host().await;

    // Curator leads; a wazoo candidate waits and sees Curator's id as the leader.
    let mut curator = Curator::start(&address, &path, "latch:curator-1").await;
    curator.send("await 10000").await;
    assert_eq!(curator.line().await, "leader");
    let mut observer = handle(&host, recipe).await;
    assert_eq!(observer.leader(&path).await.unwrap().unwrap().id, "curator-1");
    let mut candidate = handle(&host, recipe).await;
    let lock_path = path.clone();
    let campaign = tokio::spawn(async move {
        let term = candidate.campaign(&lock_path, "wazoo", None).await.unwrap();
        (candidate, term)
    });
    wait_children(&checker, &path, 2).await;
    curator.send("close").await;
    assert_eq!(curator.line().await, "closed");
    let (mut candidate, term) = within(LIMIT, "wazoo leads after Curator closes", campaign).await.unwrap();
    let name = term.node.rsplit('/').next().unwrap();
    assert!(name.starts_with("_c_") && name.contains("-latch-"), "Curator latch node: {name}");

    // wazoo leads; a Curator latch waits, sees wazoo's id, and leads once wazoo resigns.
    let mut second = Curator::start(&address, &path, "latch:curator-2").await;
    second.send("await 300").await;
    assert_eq!(second.line().await, "timeout");
    second.send("leader").await;
    assert_eq!(second.line().await, "leader-id wazoo", "Curator reads wazoo's participant id");
    candidate.resign().await.unwrap();
    second.send("await 10000").await;
    assert_eq!(second.line().await, "leader");
    second.send("quit").await;
    curator.send("quit").await;
}
