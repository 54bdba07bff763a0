//! Leader election against a real ZooKeeper, under repeated session loss, and against Curator's
//! LeaderLatch on the same path: every test runs on the Rust recipe and on the JavaScript one
//! (`guest/js/election`), and the two contend in one election. Observers are checked through
//! the library, the `wazoo leader --watch` command and the daemon's Observe stream.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use wazoo_proto::{
    recipes_client::RecipesClient, sessions_client::SessionsClient, AcknowledgeRequest, CampaignRequest,
    ObserveRequest, OpenRequest,
};
use wazoo_runtime::{ElectionHandle, Host, LeaderInfo, Lost, RecipeError, ZkError};
use wazoo_tests::chaos::Cluster;
use wazoo_tests::daemon::{cli, Daemon};
use wazoo_tests::proxy::{op, Proxy};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);
/// How long an observer may take to report an acknowledgement once it is written.
const ACK_LIMIT: Duration = Duration::from_secs(10);

wazoo_tests::implementations!(rust: "election", javascript: "election-js"; [
    one_leader_at_a_time_and_resign_hands_over_in_order,
    observers_see_the_leader_and_its_acknowledgement_without_contending,
    an_acknowledgement_is_shown_only_with_the_leader_node_it_names,
    observers_are_told_of_an_acknowledgement_written_after_the_leader,
    leader_watch_prints_the_acknowledgement_when_it_is_written,
    the_daemon_streams_each_leader_with_its_own_acknowledgement,
    lost_replies_to_acknowledge_and_resign_leave_one_acknowledgement_then_none,
    never_two_leaders_across_twenty_session_kills,
    curator_leader_latch_and_wazoo_elect_one_leader_both_ways,
    a_candidate_whose_node_was_deleted_does_not_take_the_hand_over,
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
/// A candidate whose proposal is deleted while it waits (an operator, a revocation) does not
/// lead when the proposal ahead of it goes, though that was the lowest: its campaign fails with
/// `no-node`, and the candidate that came after it leads alone.
async fn a_candidate_whose_node_was_deleted_does_not_take_the_hand_over(recipe: &str) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("elect-deleted");
    let mut first = handle(&host, recipe).await;
    let term = first.campaign(&path, "c0", None).await.unwrap();
    let armed = host.stats().watches_armed();
    let mut waiter = handle(&host, recipe).await;
    let waiting = tokio::spawn({
        let path = path.clone();
        async move {
            let led = waiter.campaign(&path, "c1", None).await;
            (waiter, led)
        }
    });
    let nodes = wait_children(&checker, &path, 2).await;
    // It waits: a watch on its own proposal and one on the leader's.
    within(LIMIT, "the candidate waits", host.stats().armed_at_least(armed + 2)).await;
    let mine = nodes.iter().find(|n| !term.node.ends_with(n.as_str())).unwrap();
    checker.delete(&format!("{path}/{mine}"), None).await.unwrap();
    let mut third = handle(&host, recipe).await;
    let later = tokio::spawn({
        let path = path.clone();
        async move {
            let led = third.campaign(&path, "c2", None).await;
            (third, led)
        }
    });
    wait_children(&checker, &path, 2).await;
    first.resign().await.unwrap();
    let (waiter, refused) = within(LIMIT, "the candidate without a proposal", waiting).await.unwrap();
    assert!(
        matches!(refused, Err(RecipeError::Zk(ZkError::NoNode))),
        "{recipe}: a candidate without a proposal led: {refused:?}"
    );
    let (mut third, led) = within(LIMIT, "the later candidate", later).await.unwrap();
    assert!(led.unwrap().token > term.token);
    third.resign().await.unwrap();
    for h in [first, waiter, third] {
        h.close().await;
    }
}

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
    let known = ElectionHandle::seen(&now);
    alpha.resign().await.unwrap();
    let next = observer.observe(&path, Some(&known), Some(LIMIT)).await.unwrap().expect("a new leader");
    assert_eq!(next.id, "beta");
    assert_eq!(next.acknowledged, None, "alpha's acknowledgement went with alpha");
    let mut beta = within(LIMIT, "beta leads", beta_campaign).await.unwrap();
    assert_eq!(children(&checker, &path).await.len(), 1, "observing created no node");
    assert!(matches!(
        observer.observe(&path, Some(&ElectionHandle::seen(&next)), Some(Duration::from_millis(200))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    beta.resign().await.unwrap();
}

/// Handles on one host share a session. A leader deposed while its handle lives on (its node
/// deleted from outside) keeps neither its acknowledgement on show nor the right to write one:
/// the next leader of the same session is shown without alpha's note, then with its own.
async fn an_acknowledgement_is_shown_only_with_the_leader_node_it_names(recipe: &str) {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("elect-ack-owner");
    let mut observer = handle(&host, recipe).await;
    let mut alpha = handle(&host, recipe).await;
    let alpha_term = alpha.campaign(&path, "alpha", None).await.unwrap();
    alpha.acknowledge("alpha is serving").await.unwrap();
    let shown = observer.leader(&path).await.unwrap().expect("a leader");
    assert_eq!((shown.id.as_str(), shown.acknowledged.as_deref()), ("alpha", Some("alpha is serving")));

    let mut beta = handle(&host, recipe).await;
    let beta_path = path.clone();
    let beta_campaign = tokio::spawn(async move {
        let term = beta.campaign(&beta_path, "beta", None).await.unwrap();
        (beta, term)
    });
    wait_children(&checker, &path, 2).await;
    checker.delete(&alpha_term.node, None).await.unwrap();
    let (mut beta, beta_term) =
        within(LIMIT, "beta leads once alpha's node is gone", beta_campaign).await.unwrap();
    let shown = observer.leader(&path).await.unwrap().expect("a leader");
    assert_eq!((shown.id.as_str(), shown.token), ("beta", beta_term.token));
    assert_eq!(shown.acknowledged, None, "alpha's note is shown with beta, its session's next leader");

    let late = alpha.acknowledge("alpha is still serving").await;
    assert!(late.is_err(), "a deposed leader acknowledged: {late:?}");
    assert_eq!(observer.leader(&path).await.unwrap().unwrap().acknowledged, None);

    beta.acknowledge("beta is serving").await.unwrap();
    let shown = observer.leader(&path).await.unwrap().expect("a leader");
    assert_eq!((shown.id.as_str(), shown.acknowledged.as_deref()), ("beta", Some("beta is serving")));
    alpha.close().await;
    let shown = observer.leader(&path).await.unwrap().expect("a leader");
    assert_eq!(shown.acknowledged.as_deref(), Some("beta is serving"), "closing alpha took beta's note");

    beta.resign().await.unwrap();
    assert!(observer.leader(&path).await.unwrap().is_none());
    let ack = format!("{path}-leader-ack");
    assert_eq!(checker.check_stat(&ack).await.unwrap(), None, "beta's resignation left its acknowledgement");
}

/// What `wazoo leader --watch` does, through the library: each `observe` is told what the last
/// one returned, and reports the leader, then its acknowledgement once written. An
/// acknowledgement written between two calls is reported by the next one.
async fn observers_are_told_of_an_acknowledgement_written_after_the_leader(recipe: &str) {
    let host = host().await;
    let path = unique("elect-ack-later");
    let mut observer = handle(&host, recipe).await;
    let (tx, mut reports) = mpsc::unbounded_channel::<Option<LeaderInfo>>();
    let watching = {
        let path = path.clone();
        tokio::spawn(async move {
            let mut known = None;
            loop {
                let seen = known.as_ref().map(ElectionHandle::seen);
                let now = observer.observe(&path, seen.as_deref(), None).await.unwrap();
                if tx.send(now.clone()).is_err() {
                    return observer;
                }
                known = now;
            }
        })
    };
    let mut alpha = handle(&host, recipe).await;
    let term = alpha.campaign(&path, "alpha", None).await.unwrap();
    let first = within(LIMIT, "the observer sees alpha", reports.recv()).await.unwrap().expect("a leader");
    assert_eq!((first.id.as_str(), first.token, first.acknowledged.as_deref()), ("alpha", term.token, None));
    alpha.acknowledge("alpha is serving").await.unwrap();
    let acked = within(ACK_LIMIT, "the observer sees alpha's acknowledgement", reports.recv()).await.unwrap();
    let acked = acked.expect("a leader");
    assert_eq!(
        (acked.node.as_str(), acked.acknowledged.as_deref()),
        (first.node.as_str(), Some("alpha is serving"))
    );
    alpha.acknowledge("alpha serves v2").await.unwrap();
    let again = within(ACK_LIMIT, "the observer sees the new note", reports.recv()).await.unwrap();
    assert_eq!(again.expect("a leader").acknowledged.as_deref(), Some("alpha serves v2"));
    alpha.resign().await.unwrap();
    let gone = within(LIMIT, "the observer sees alpha resign", reports.recv()).await.unwrap();
    assert!(gone.is_none(), "alpha and its note go together: {gone:?}");
    watching.abort();

    let mut observer = handle(&host, recipe).await;
    let mut beta = handle(&host, recipe).await;
    beta.campaign(&path, "beta", None).await.unwrap();
    let before = observer.leader(&path).await.unwrap().expect("a leader");
    assert_eq!(before.acknowledged, None);
    beta.acknowledge("beta is serving").await.unwrap();
    let seen = ElectionHandle::seen(&before);
    let next = observer.observe(&path, Some(&seen), Some(ACK_LIMIT)).await;
    let next = next.expect("the acknowledgement written before this call is reported").expect("a leader");
    assert_eq!((next.id.as_str(), next.acknowledged.as_deref()), ("beta", Some("beta is serving")));
    beta.resign().await.unwrap();
}

/// `wazoo leader --watch` prints a line for the leader, then another when it acknowledges.
async fn leader_watch_prints_the_acknowledgement_when_it_is_written(recipe: &str) {
    let host = host().await;
    let path = unique("elect-cli-watch");
    let mut alpha = handle(&host, recipe).await;
    let term = alpha.campaign(&path, "alpha", None).await.unwrap();
    let mut watch = cli()
        .args(["leader", &path, "--watch", "--recipe", recipe])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting wazoo leader --watch");
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = within(LIMIT, "wazoo leader prints alpha", lines.next_line()).await.unwrap().unwrap();
    assert_eq!(first, format!("alpha  token {}  {}", term.token, term.node));
    alpha.acknowledge("alpha is serving").await.unwrap();
    let second = within(ACK_LIMIT, "wazoo leader prints the acknowledgement", lines.next_line()).await;
    assert_eq!(second.unwrap().unwrap(), format!("{first}  ack: alpha is serving"));
    alpha.resign().await.unwrap();
    let third = within(LIMIT, "wazoo leader prints the resignation", lines.next_line()).await.unwrap();
    assert_eq!(third.unwrap(), "no leader");
    watch.kill().await.unwrap();
}

/// Through the daemon every client's leadership runs on the daemon's one session: its Observe
/// stream shows a leader deposed from outside replaced without its note, then the new leader's
/// own acknowledgement as soon as it is written.
async fn the_daemon_streams_each_leader_with_its_own_acknowledgement(recipe: &str) {
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    let checker = client(&zk().address()).await;
    let path = unique("elect-daemon-ack");
    let channel = daemon.channel().await;
    let mut sessions = SessionsClient::new(channel.clone());
    let open = OpenRequest { ttl_ms: 120_000, name: "election test".into() };
    let session = sessions.open(open).await.unwrap().into_inner().session;
    let mut recipes = RecipesClient::new(channel.clone());
    let campaign = |id: &str| CampaignRequest {
        session,
        path: path.clone(),
        id: id.into(),
        timeout_ms: None,
        recipe: recipe.into(),
        ..CampaignRequest::default()
    };
    let ack = |handle: u64, note: &str| AcknowledgeRequest { session, handle, note: note.into() };
    let alpha = recipes.campaign(campaign("alpha")).await.unwrap().into_inner();
    recipes.acknowledge(ack(alpha.handle, "alpha is serving")).await.unwrap();
    let observe = ObserveRequest { path: path.clone(), recipe: recipe.into() };
    let mut events = recipes.observe(observe).await.unwrap().into_inner();
    let first = within(LIMIT, "the stream shows alpha", events.message()).await.unwrap().unwrap();
    assert_eq!(
        (first.leader_id.as_str(), first.acknowledged.as_deref()),
        ("alpha", Some("alpha is serving"))
    );

    let beta_campaign = {
        let mut recipes = recipes.clone();
        let request = campaign("beta");
        tokio::spawn(async move { recipes.campaign(request).await.unwrap().into_inner() })
    };
    wait_children(&checker, &path, 2).await;
    checker.delete(&alpha.node, None).await.unwrap();
    let beta = within(LIMIT, "beta leads", beta_campaign).await.unwrap();
    let next = within(LIMIT, "the stream shows beta", events.message()).await.unwrap().unwrap();
    assert_eq!((next.node.as_str(), next.fencing_token), (beta.node.as_str(), beta.fencing_token));
    assert_eq!(next.acknowledged, None, "alpha's note is shown with beta");
    recipes.acknowledge(ack(beta.handle, "beta is serving")).await.unwrap();
    let acked = within(ACK_LIMIT, "the stream shows beta's acknowledgement", events.message()).await.unwrap();
    let acked = acked.unwrap();
    assert_eq!(
        (acked.node.as_str(), acked.acknowledged.as_deref()),
        (beta.node.as_str(), Some("beta is serving"))
    );
}

/// The acknowledgement and the resignation are each one `multi`; when its reply is lost (after
/// the server applied it), the recipe looks and finds it done.
async fn lost_replies_to_acknowledge_and_resign_leave_one_acknowledgement_then_none(recipe: &str) {
    let address = zk().address();
    let checker = client(&address).await;
    let proxy = Proxy::start(&address).await;
    let host = Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let path = unique("elect-ack-lost");
    let ack = format!("{path}-leader-ack");
    let mut alpha = handle(&host, recipe).await;
    let term = alpha.campaign(&path, "alpha", None).await.unwrap();

    proxy.lose_reply(&[op::MULTI], 1);
    alpha.acknowledge("alpha is serving").await.unwrap();
    assert_eq!(
        (proxy.lost_replies(), proxy.lost_errors()),
        (1, vec![0]),
        "the multi applied, its reply lost"
    );
    let (data, _) = checker.get_data(&ack).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&data), format!("{}\nalpha is serving", term.node));
    let shown = alpha.leader(&path).await.unwrap().expect("a leader");
    assert_eq!(shown.acknowledged.as_deref(), Some("alpha is serving"));

    proxy.lose_reply(&[op::MULTI], 1);
    alpha.resign().await.unwrap();
    assert_eq!(
        (proxy.lost_replies(), proxy.lost_errors()),
        (2, vec![0, 0]),
        "the multi applied, its reply lost"
    );
    assert_eq!(checker.check_stat(&ack).await.unwrap(), None);
    assert!(children(&checker, &path).await.is_empty());
    alpha.close().await;
}

/// `leader` has its server catch up with the ensemble before it answers: a member cut off from
/// the quorum since the leader resigned does not vouch for it. Both implementations, on one
/// 3-member ensemble.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_has_a_lagging_member_catch_up_before_it_answers() {
    /// How long the cut-off member is left to answer alone: well under its sync limit (10 ticks),
    /// after which it would leave the ensemble and drop its clients.
    const ALONE: Duration = Duration::from_secs(1);
    let started = std::thread::spawn(|| Cluster::start(500).expect("starting an ensemble"));
    let cluster = Arc::new(started.join().unwrap());
    let lead = cluster.leader().await.expect("a ZooKeeper leader");
    let lagging = (lead + 1) % cluster.members.len();
    let near = Host::start(config(&cluster.members[lead], Duration::from_secs(10))).await.unwrap();
    let far = Host::start(config(&cluster.members[lagging], Duration::from_secs(10))).await.unwrap();
    for recipe in ["election", "election-js"] {
        let path = unique("elect-sync");
        let mut alpha = handle(&near, recipe).await;
        alpha.campaign(&path, "alpha", None).await.unwrap();
        let mut observer = handle(&far, recipe).await;
        assert_eq!(observer.leader(&path).await.unwrap().expect("a leader").id, "alpha");

        cluster.isolate(lagging);
        alpha.resign().await.unwrap();
        let mut asking = {
            let path = path.clone();
            tokio::spawn(async move { observer.leader(&path).await })
        };
        let alone = tokio::time::timeout(ALONE, &mut asking).await;
        cluster.heal();
        let shown = match alone {
            Ok(answer) => answer.unwrap(),
            Err(_) => within(LIMIT, "the lagging member answers once healed", asking).await.unwrap(),
        };
        let shown = shown.unwrap();
        assert!(shown.is_none(), "{recipe}: a lagging member vouched for a leader that resigned: {shown:?}");
        alpha.close().await;
    }
    // The ensemble's proxies run on a runtime of their own, which may not be dropped here.
    std::thread::spawn(move || drop(cluster)).join().unwrap();
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
    let mut successors = Vec::new();
    for i in 0..3 {
        let proxy = Proxy::start(&address).await;
        let host = Host::start(config(&proxy.address(), Duration::from_secs(1))).await.unwrap();
        proxies.push(proxy);
        let (path, register, elected_tx) = (path.clone(), register.clone(), elected_tx.clone());
        let (zombie_tx, zombie_rx) = mpsc::unbounded_channel::<bool>();
        let (successor_tx, mut successor) = mpsc::unbounded_channel::<()>();
        let recipe = recipe.to_string();
        refused_zombies.push(zombie_rx);
        successors.push(successor_tx);
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
                assert!(matches!(reason, Lost::Session(_) | Lost::CutOff(_)), "{reason}");
                // A deposed leader that still tries to act once its successor has is fenced off.
                if successor.recv().await.is_none() {
                    return;
                }
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
        successors[leader].send(()).unwrap();
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
