//! `wazoo_runtime::holders`: who holds a claim and who waits, in queue order, read on a plain session,
//! for wazoo's lock, read/write lock, semaphore and election, for Curator's on the same paths
//! (compared with Curator's own `getParticipantNodes()` / `getParticipants()`), and through the
//! daemon's `Holders` call. Every waiter really waits: the tests watch for its node before they
//! look, and its node and token are the ones the recipe returns when it acquires later.

use std::time::Duration;
use wazoo_runtime::family;

use wazoo_proto::{recipes_client::RecipesClient, ContenderMode, HoldersKind, HoldersRequest};
use wazoo_runtime::holders::{self, Contender, Contenders, Kind, State};
use wazoo_runtime::{Host, Mode, ZkError};
use wazoo_tests::daemon::Daemon;
use wazoo_tests::*;
use zookeeper_client::{Client, CreateMode};

use wazoo_runtime::zk::Zk;
use State::{Holds, Waits};

const LIMIT: Duration = Duration::from_secs(60);
/// What wazoo's lock recipe writes into its node.
/// A lock node's data when its handle was told no identity: blank (the recipe leaves it to the
/// host).
const LOCK_TAG: &[u8] = b"";

/// The contenders at `path`, or a panic.
async fn look(checker: &Client, path: &str, kind: Option<Kind>, leases: Option<u32>) -> Contenders {
    holders::read(&Zk::from_client(checker.clone()), path, kind, leases)
        .await
        .unwrap_or_else(|e| panic!("reading {path}: {e:?}"))
}

fn states(c: &Contenders) -> Vec<State> {
    c.contenders.iter().map(|c| c.state).collect()
}

fn nodes(c: &Contenders) -> Vec<String> {
    c.contenders.iter().map(|c| c.node.clone()).collect()
}

fn sessions(c: &Contenders) -> Vec<i64> {
    c.contenders.iter().map(|c| c.session).collect()
}

/// The ZooKeeper session a host's handles share.
async fn session_of(host: &Host) -> i64 {
    host.live().await.unwrap().session_id()
}

/// Node names are `_c_<uuid>-<marker><10 digits>` under `dir`, with rising sequences and tokens.
fn well_formed(c: &[Contender], dir: &str, marker: &str) {
    for pair in c.windows(2) {
        assert!(pair[0].sequence < pair[1].sequence, "{c:#?}");
        assert!(pair[0].token < pair[1].token, "{c:#?}");
    }
    for one in c {
        let name =
            one.node.strip_prefix(&format!("{dir}/")).unwrap_or_else(|| panic!("{} in {dir}", one.node));
        assert!(name.starts_with("_c_"), "{name}");
        assert!(name.ends_with(&format!("{marker}{:010}", one.sequence)), "{name} vs {}", one.sequence);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_lists_its_holder_then_its_waiters_and_the_next_one_holds_after_a_release() {
    let checker = client(&zk().address()).await;
    let path = unique("holders-lock");
    let (one, two) = (host().await, host().await);
    let (s1, s2) = (session_of(&one).await, session_of(&two).await);
    assert_ne!(s1, s2);

    let nobody = look(&checker, &path, None, None).await;
    assert_eq!(nobody, Contenders { kind: &family::LOCK, contenders: vec![] }, "no such path: nobody");

    let mut a = one.lock("lock").await.unwrap();
    let held_a = a.acquire(&path, None).await.unwrap();
    let mut waiters = Vec::new();
    for (i, host) in [&two, &one].into_iter().enumerate() {
        let mut lock = host.lock("lock").await.unwrap();
        let lock_path = path.clone();
        waiters.push(tokio::spawn(async move {
            let held = lock.acquire(&lock_path, None).await.unwrap();
            (lock, held)
        }));
        wait_children(&checker, &path, i + 2).await;
    }

    let seen = look(&checker, &path, None, None).await;
    assert_eq!(seen.kind, &family::LOCK);
    assert_eq!(states(&seen), vec![Holds, Waits, Waits]);
    assert_eq!(sessions(&seen), vec![s1, s2, s1]);
    assert_eq!(
        (seen.contenders[0].node.as_str(), seen.contenders[0].token),
        (held_a.node.as_str(), held_a.token)
    );
    for c in &seen.contenders {
        assert_eq!((c.mode, c.data.as_slice()), (None, LOCK_TAG), "{c:?}");
    }
    well_formed(&seen.contenders, &path, "-lock-");
    assert_eq!(
        look(&checker, &path, Some(&family::LOCK), Some(3)).await,
        seen,
        "the kind given, leases ignored"
    );

    // Each release hands the lock to the next in the listed order, with the listed node and token.
    a.release().await.unwrap();
    let mut expected = seen.contenders[1..].to_vec();
    let mut handles = vec![a];
    for waiter in waiters {
        let (mut lock, held) = within(LIMIT, "the next waiter acquires", waiter).await.unwrap();
        assert_eq!((held.node.as_str(), held.token), (expected[0].node.as_str(), expected[0].token));
        expected[0].state = Holds;
        assert_eq!(look(&checker, &path, None, None).await.contenders, expected);
        expected.remove(0);
        lock.release().await.unwrap();
        handles.push(lock);
    }
    // The last release is sent without waiting for ZooKeeper's answer: its node goes a moment
    // later.
    within(LIMIT, "the last node goes", wait_children(&checker, &path, 0)).await;
    assert!(look(&checker, &path, None, None).await.contenders.is_empty(), "all released");
    for h in handles {
        h.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_share_until_a_writer_queues_and_the_rest_wait_behind_it() {
    let checker = client(&zk().address()).await;
    let path = unique("holders-rw");
    let (one, two) = (host().await, host().await);
    let (s1, s2) = (session_of(&one).await, session_of(&two).await);

    // R R W R: the first two read-hold, the writer and the last reader wait.
    let mut r1 = one.rwlock("rwlock").await.unwrap();
    let mut r2 = two.rwlock("rwlock").await.unwrap();
    let held_r1 = r1.acquire(&path, Mode::Read, None).await.unwrap();
    let held_r2 = r2.acquire(&path, Mode::Read, None).await.unwrap();
    let mut waiters = Vec::new();
    for (i, (host, mode)) in [(&one, Mode::Write), (&two, Mode::Read)].into_iter().enumerate() {
        let mut lock = host.rwlock("rwlock").await.unwrap();
        let lock_path = path.clone();
        waiters.push(tokio::spawn(async move {
            let held = lock.acquire(&lock_path, mode, None).await.unwrap();
            (lock, held)
        }));
        wait_children(&checker, &path, i + 3).await;
    }

    let seen = look(&checker, &path, None, None).await;
    assert_eq!(seen.kind, &family::RWLOCK);
    assert_eq!(states(&seen), vec![Holds, Holds, Waits, Waits]);
    let modes: Vec<Option<Mode>> = seen.contenders.iter().map(|c| c.mode).collect();
    assert_eq!(modes, vec![Some(Mode::Read), Some(Mode::Read), Some(Mode::Write), Some(Mode::Read)]);
    assert_eq!(sessions(&seen), vec![s1, s2, s1, s2]);
    assert_eq!(nodes(&seen)[..2], [held_r1.node.clone(), held_r2.node.clone()]);
    assert_eq!((seen.contenders[0].token, seen.contenders[1].token), (held_r1.token, held_r2.token));
    for (c, marker) in seen.contenders.iter().zip(["__READ__", "__READ__", "__WRIT__", "__READ__"]) {
        well_formed(std::slice::from_ref(c), &path, marker);
    }
    assert_eq!(look(&checker, &path, Some(&family::RWLOCK), None).await, seen);

    // One reader gone: the writer still waits for the other.
    r1.release().await.unwrap();
    let now = look(&checker, &path, None, None).await;
    assert_eq!(now.contenders, seen.contenders[1..].to_vec());
    r2.release().await.unwrap();
    let mut waiters = waiters.into_iter();
    let (mut w, held_w) = within(LIMIT, "the writer acquires", waiters.next().unwrap()).await.unwrap();
    assert_eq!(
        (held_w.node.as_str(), held_w.token, held_w.mode),
        (seen.contenders[2].node.as_str(), seen.contenders[2].token, Mode::Write)
    );
    let now = look(&checker, &path, None, None).await;
    assert_eq!(states(&now), vec![Holds, Waits]);
    assert_eq!(nodes(&now), nodes(&seen)[2..]);
    w.release().await.unwrap();
    let (mut r3, held_r3) = within(LIMIT, "the last reader acquires", waiters.next().unwrap()).await.unwrap();
    assert_eq!(
        (held_r3.node.as_str(), held_r3.token),
        (seen.contenders[3].node.as_str(), seen.contenders[3].token)
    );
    let now = look(&checker, &path, None, None).await;
    assert_eq!((states(&now), nodes(&now)), (vec![Holds], nodes(&seen)[3..].to_vec()));
    r3.release().await.unwrap();
    for h in [r1, r2, w, r3] {
        h.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_semaphore_lists_its_lease_holders_the_waiting_lease_and_the_queue() {
    let checker = client(&zk().address()).await;
    let path = unique("holders-sem");
    let (leases, locks) = (format!("{path}/leases"), format!("{path}/locks"));
    let (one, two, three) = (host().await, host().await, host().await);
    let (s1, s2, s3) = (session_of(&one).await, session_of(&two).await, session_of(&three).await);

    // Two leases held (sessions 1 and 2); c (session 3) has made its lease node and waits for a
    // lease at the head of locks/; d (session 1, which holds a lease too) and e queue behind it.
    let mut a = one.semaphore("semaphore").await.unwrap();
    let mut b = two.semaphore("semaphore").await.unwrap();
    let lease_a = a.acquire(&path, 2, None).await.unwrap();
    let lease_b = b.acquire(&path, 2, None).await.unwrap();
    let mut waiters = Vec::new();
    for (host, (dir, n)) in [(&three, (&leases, 3)), (&one, (&locks, 2)), (&two, (&locks, 3))] {
        let mut sem = host.semaphore("semaphore").await.unwrap();
        let sem_path = path.clone();
        waiters.push(tokio::spawn(async move {
            let lease = sem.acquire(&sem_path, 2, None).await.unwrap();
            (sem, lease)
        }));
        wait_children(&checker, dir, n).await;
    }

    let seen = look(&checker, &path, Some(&family::SEMAPHORE), Some(2)).await;
    assert_eq!(seen.kind, &family::SEMAPHORE);
    assert_eq!(states(&seen), vec![Holds, Holds, Waits, Waits, Waits]);
    assert_eq!(sessions(&seen), vec![s1, s2, s3, s1, s2]);
    assert_eq!(nodes(&seen)[..2], [lease_a.node.clone(), lease_b.node.clone()]);
    assert_eq!((seen.contenders[0].token, seen.contenders[1].token), (lease_a.token, lease_b.token));
    well_formed(&seen.contenders[..3], &leases, "-lease-");
    well_formed(&seen.contenders[3..], &locks, "-lock-");
    // c's own node in locks/ (the first) is there, but c is listed once, by its lease node.
    let mut queue: Vec<String> = children(&checker, &locks).await;
    queue.sort_by_key(|name| name[name.len() - 10..].to_string());
    let queue: Vec<String> = queue.iter().map(|name| format!("{locks}/{name}")).collect();
    assert_eq!(queue.len(), 3);
    assert!(!nodes(&seen).contains(&queue[0]));
    assert_eq!(nodes(&seen)[3..], queue[1..]);
    assert!(seen.contenders.iter().all(|c| c.mode.is_none() && c.data.is_empty()));
    // Without the count: the same, the last lease node waiting because its session heads locks/.
    assert_eq!(look(&checker, &path, None, None).await, seen, "detected, leases unknown");
    assert_eq!(look(&checker, &path, None, Some(2)).await, seen);
    // With a count that is wrong, the rule still applies: the first three lease nodes hold.
    let wrong = look(&checker, &path, None, Some(3)).await;
    assert_eq!(states(&wrong), vec![Holds, Holds, Holds, Waits, Waits]);

    // a returns its lease: c holds with the node and token listed; d makes its lease node and
    // waits at the head of locks/, e behind it.
    a.release().await.unwrap();
    let mut waiters = waiters.into_iter();
    let (mut c, lease_c) = within(LIMIT, "c gets a's lease", waiters.next().unwrap()).await.unwrap();
    assert_eq!(
        (lease_c.node.as_str(), lease_c.token),
        (seen.contenders[2].node.as_str(), seen.contenders[2].token)
    );
    wait_children(&checker, &leases, 3).await;
    wait_children(&checker, &locks, 2).await;
    for leases_given in [Some(2), None] {
        let now = look(&checker, &path, None, leases_given).await;
        assert_eq!(states(&now), vec![Holds, Holds, Waits, Waits], "{leases_given:?}");
        assert_eq!(sessions(&now), vec![s2, s3, s1, s2]);
        assert_eq!(nodes(&now)[..2], nodes(&seen)[1..3]);
        assert_eq!(now.contenders[3], seen.contenders[4], "e still waits in locks/");
        well_formed(&now.contenders[..3], &leases, "-lease-");
    }
    let d_lease = look(&checker, &path, None, None).await.contenders[2].clone();

    b.release().await.unwrap();
    let (mut d, lease_d) = within(LIMIT, "d gets b's lease", waiters.next().unwrap()).await.unwrap();
    assert_eq!((lease_d.node.as_str(), lease_d.token), (d_lease.node.as_str(), d_lease.token));
    c.release().await.unwrap();
    let (mut e, lease_e) = within(LIMIT, "e gets c's lease", waiters.next().unwrap()).await.unwrap();
    wait_children(&checker, &locks, 0).await;
    let now = look(&checker, &path, None, None).await;
    assert_eq!(states(&now), vec![Holds, Holds]);
    assert_eq!(nodes(&now), vec![lease_d.node.clone(), lease_e.node.clone()]);
    d.release().await.unwrap();
    e.release().await.unwrap();
    within(LIMIT, "the last leases go", wait_children(&checker, &format!("{path}/leases"), 0)).await;
    assert!(look(&checker, &path, Some(&family::SEMAPHORE), None).await.contenders.is_empty());
    for h in [a, b, c, d, e] {
        h.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_election_lists_its_leader_and_candidates_with_their_ids() {
    let checker = client(&zk().address()).await;
    let path = unique("holders-elect");
    let (one, two) = (host().await, host().await);
    let (s1, s2) = (session_of(&one).await, session_of(&two).await);

    let mut alpha = one.election("election").await.unwrap();
    let term = alpha.campaign(&path, "alpha", None).await.unwrap();
    // The acknowledgement is a sibling of the candidates: it is no contender.
    alpha.acknowledge("running").await.unwrap();
    let mut candidates = Vec::new();
    for (i, (host, id)) in [(&two, "beta"), (&one, "gamma")].into_iter().enumerate() {
        let mut candidate = host.election("election").await.unwrap();
        let election = path.clone();
        candidates.push(tokio::spawn(async move {
            let term = candidate.campaign(&election, id, None).await.unwrap();
            (candidate, term)
        }));
        wait_children(&checker, &path, i + 2).await;
    }

    let seen = look(&checker, &path, None, None).await;
    assert_eq!(seen.kind, &family::ELECTION);
    assert_eq!(states(&seen), vec![Holds, Waits, Waits]);
    let ids: Vec<&[u8]> = seen.contenders.iter().map(|c| c.data.as_slice()).collect();
    assert_eq!(ids, vec![&b"alpha"[..], b"beta", b"gamma"]);
    assert_eq!(sessions(&seen), vec![s1, s2, s1]);
    assert_eq!(
        (seen.contenders[0].node.as_str(), seen.contenders[0].token),
        (term.node.as_str(), term.token)
    );
    well_formed(&seen.contenders, &path, "-latch-");
    assert_eq!(look(&checker, &path, Some(&family::ELECTION), None).await, seen);

    alpha.resign().await.unwrap();
    let mut candidates = candidates.into_iter();
    let (mut beta, beta_term) = within(LIMIT, "beta leads", candidates.next().unwrap()).await.unwrap();
    assert_eq!(
        (beta_term.node.as_str(), beta_term.token),
        (seen.contenders[1].node.as_str(), seen.contenders[1].token)
    );
    let now = look(&checker, &path, None, None).await;
    assert_eq!(states(&now), vec![Holds, Waits]);
    assert_eq!(nodes(&now), nodes(&seen)[1..]);
    beta.resign().await.unwrap();
    let (mut gamma, gamma_term) = within(LIMIT, "gamma leads", candidates.next().unwrap()).await.unwrap();
    assert_eq!(gamma_term.node, seen.contenders[2].node);
    gamma.resign().await.unwrap();
    assert!(look(&checker, &path, None, None).await.contenders.is_empty());
    for h in [alpha, beta, gamma] {
        h.close().await;
    }
}

/// What a Curator peer's `participants` printed, without the word.
async fn participants(curator: &mut Curator) -> Vec<String> {
    curator.send("participants").await;
    let line = curator.line().await;
    let rest = line.strip_prefix("participants").unwrap_or_else(|| panic!("Curator said {line:?}"));
    rest.split_whitespace().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_mutex_contenders_are_listed_as_curator_lists_them() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("holders-curator-mutex");
    let host = host().await;
    let wazoo_session = session_of(&host).await;
    // Curator holds; wazoo waits; a second Curator client waits behind it. A third one only
    // looks.
    let mut first = Curator::start(&address, &path, "mutex").await;
    let mut last = Curator::start(&address, &path, "mutex").await;
    let mut viewer = Curator::start(&address, &path, "mutex").await;
    first.send("acquire -1").await;
    let first_node = first.line().await.strip_prefix("acquired ").expect("Curator acquired").to_string();
    let mut lock = host.lock("lock").await.unwrap();
    let lock_path = path.clone();
    let waiting = tokio::spawn(async move {
        let held = lock.acquire(&lock_path, None).await.unwrap();
        (lock, held)
    });
    wait_children(&checker, &path, 2).await;
    last.send("acquire -1").await;
    wait_children(&checker, &path, 3).await;

    let seen = look(&checker, &path, None, None).await;
    assert_eq!(seen.kind, &family::LOCK);
    assert_eq!(nodes(&seen), participants(&mut viewer).await, "Curator's order");
    assert_eq!(seen.contenders[0].node, first_node, "Curator's holder");
    assert_eq!(states(&seen), vec![Holds, Waits, Waits]);
    let sessions = sessions(&seen);
    assert_eq!(sessions[1], wazoo_session);
    assert!(sessions[0] != wazoo_session && sessions[2] != wazoo_session && sessions[0] != sessions[2]);
    assert_eq!(seen.contenders[1].data, LOCK_TAG);
    well_formed(&seen.contenders, &path, "-lock-");

    first.send("release").await;
    assert_eq!(first.line().await, "released");
    let (mut lock, held) = within(LIMIT, "wazoo acquires after Curator", waiting).await.unwrap();
    assert_eq!(
        (held.node.as_str(), held.token),
        (seen.contenders[1].node.as_str(), seen.contenders[1].token)
    );
    let now = look(&checker, &path, None, None).await;
    assert_eq!(nodes(&now), participants(&mut viewer).await);
    assert_eq!((states(&now), nodes(&now)), (vec![Holds, Waits], nodes(&seen)[1..].to_vec()));
    lock.release().await.unwrap();
    assert_eq!(last.line().await, format!("acquired {}", seen.contenders[2].node));
    last.send("release").await;
    assert_eq!(last.line().await, "released");
    assert!(look(&checker, &path, None, None).await.contenders.is_empty());
    for mut peer in [first, last, viewer] {
        peer.send("quit").await;
    }
    lock.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_read_write_contenders_are_listed_as_curator_lists_them() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("holders-curator-rw");
    let host = host().await;
    // Curator reads, wazoo reads, Curator writes (waits), wazoo reads (waits).
    let mut reader = Curator::start(&address, &path, "read").await;
    let mut writer = Curator::start(&address, &path, "write").await;
    let mut viewer = Curator::start(&address, &path, "read").await;
    reader.send("acquire -1").await;
    assert_eq!(reader.line().await, "acquired");
    let mut ours = host.rwlock("rwlock").await.unwrap();
    let held = ours.acquire(&path, Mode::Read, None).await.unwrap();
    writer.send("acquire -1").await;
    wait_children(&checker, &path, 3).await;
    let mut late = host.rwlock("rwlock").await.unwrap();
    let lock_path = path.clone();
    let waiting = tokio::spawn(async move {
        let held = late.acquire(&lock_path, Mode::Read, None).await.unwrap();
        (late, held)
    });
    wait_children(&checker, &path, 4).await;

    let seen = look(&checker, &path, None, None).await;
    assert_eq!(states(&seen), vec![Holds, Holds, Waits, Waits]);
    assert_eq!(seen.contenders[1].node, held.node);
    // Curator lists each side apart, each in its own order; together they are ours.
    let curator = participants(&mut viewer).await;
    let side = |prefix: &str, mode: Mode| -> (Vec<String>, Vec<String>) {
        let theirs = curator.iter().filter_map(|p| p.strip_prefix(prefix)).map(str::to_string).collect();
        let listed =
            seen.contenders.iter().filter(|c| c.mode == Some(mode)).map(|c| c.node.clone()).collect();
        (theirs, listed)
    };
    let (theirs, listed) = side("read:", Mode::Read);
    assert_eq!(theirs, listed, "readers");
    let (theirs, listed) = side("write:", Mode::Write);
    assert_eq!(theirs, listed, "writers");

    reader.send("release").await;
    assert_eq!(reader.line().await, "released");
    ours.release().await.unwrap();
    assert_eq!(writer.line().await, "acquired");
    let now = look(&checker, &path, None, None).await;
    assert_eq!((states(&now), nodes(&now)), (vec![Holds, Waits], nodes(&seen)[2..].to_vec()));
    writer.send("release").await;
    assert_eq!(writer.line().await, "released");
    let (mut late, late_held) = within(LIMIT, "the last reader acquires", waiting).await.unwrap();
    assert_eq!(late_held.node, seen.contenders[3].node);
    late.release().await.unwrap();
    for mut peer in [reader, writer, viewer] {
        peer.send("quit").await;
    }
    ours.close().await;
    late.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_latch_participants_are_listed_as_curator_lists_them() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("holders-curator-latch");
    let host = host().await;
    let mut first = Curator::start(&address, &path, "latch:curator-1").await;
    let mut second = Curator::start(&address, &path, "latch:curator-2").await;
    // A latch never started: it only looks.
    let mut viewer = Curator::start(&address, &path, "latch:viewer").await;
    first.send("await 10000").await;
    assert_eq!(first.line().await, "leader");
    let mut candidate = host.election("election").await.unwrap();
    let election = path.clone();
    let campaign = tokio::spawn(async move {
        let term = candidate.campaign(&election, "wazoo-1", None).await.unwrap();
        (candidate, term)
    });
    wait_children(&checker, &path, 2).await;
    // Started, not leading: its node stays.
    second.send("await 100").await;
    assert_eq!(second.line().await, "timeout");
    wait_children(&checker, &path, 3).await;

    let as_curator = |c: &Contenders| -> Vec<String> {
        c.contenders
            .iter()
            .map(|c| {
                let role = if c.state == Holds { "leader" } else { "waits" };
                format!("{}:{role}", String::from_utf8_lossy(&c.data))
            })
            .collect()
    };
    let seen = look(&checker, &path, None, None).await;
    assert_eq!(seen.kind, &family::ELECTION);
    assert_eq!(as_curator(&seen), vec!["curator-1:leader", "wazoo-1:waits", "curator-2:waits"]);
    assert_eq!(as_curator(&seen), participants(&mut viewer).await);
    well_formed(&seen.contenders, &path, "-latch-");

    first.send("close").await;
    assert_eq!(first.line().await, "closed");
    let (mut candidate, term) = within(LIMIT, "wazoo leads after Curator", campaign).await.unwrap();
    assert_eq!(
        (term.node.as_str(), term.token),
        (seen.contenders[1].node.as_str(), seen.contenders[1].token)
    );
    let now = look(&checker, &path, None, None).await;
    assert_eq!(as_curator(&now), vec!["wazoo-1:leader", "curator-2:waits"]);
    assert_eq!(as_curator(&now), participants(&mut viewer).await);
    candidate.resign().await.unwrap();
    second.send("await 10000").await;
    assert_eq!(second.line().await, "leader");
    let now = look(&checker, &path, None, None).await;
    assert_eq!(
        (as_curator(&now), nodes(&now)),
        (vec!["curator-2:leader".to_string()], nodes(&seen)[2..].to_vec())
    );
    assert_eq!(as_curator(&now), participants(&mut viewer).await);
    for mut peer in [first, second, viewer] {
        peer.send("quit").await;
    }
    candidate.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_semaphore_lease_nodes_are_the_ones_curator_lists() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("holders-curator-sem");
    let (leases, locks) = (format!("{path}/leases"), format!("{path}/locks"));
    let host = host().await;
    let wazoo_session = session_of(&host).await;
    // Curator and wazoo hold the 2 leases; a second Curator client waits for one with its lease
    // node made; a second wazoo handle queues in locks/ behind it.
    let mut first = Curator::start(&address, &path, "semaphore:2").await;
    let mut second = Curator::start(&address, &path, "semaphore:2").await;
    let mut viewer = Curator::start(&address, &path, "semaphore:2").await;
    first.send("acquire 10000").await;
    assert_eq!(first.line().await, "leased");
    let mut ours = host.semaphore("semaphore").await.unwrap();
    let lease = ours.acquire(&path, 2, None).await.unwrap();
    second.send("acquire 60000").await;
    wait_children(&checker, &leases, 3).await;
    let mut late = host.semaphore("semaphore").await.unwrap();
    let sem_path = path.clone();
    let waiting = tokio::spawn(async move {
        let lease = late.acquire(&sem_path, 2, None).await.unwrap();
        (late, lease)
    });
    wait_children(&checker, &locks, 2).await;

    let seen = look(&checker, &path, None, Some(2)).await;
    assert_eq!(seen.kind, &family::SEMAPHORE);
    assert_eq!(states(&seen), vec![Holds, Holds, Waits, Waits]);
    assert_eq!(seen.contenders[1].node, lease.node);
    let s = sessions(&seen);
    assert_eq!((s[1], s[3]), (wazoo_session, wazoo_session));
    assert!(s[0] != wazoo_session && s[2] != wazoo_session && s[0] != s[2]);
    // Curator lists the lease nodes' names as ZooKeeper returns them: the same set, and in
    // Curator's sort order (by the suffix after `lease-`) ours.
    let mut curator = participants(&mut viewer).await;
    curator.sort_by(|a, b| a.rsplit("lease-").next().cmp(&b.rsplit("lease-").next()));
    let ours_leases: Vec<String> = nodes(&seen)[..3]
        .iter()
        .map(|n| n.strip_prefix(&format!("{leases}/")).unwrap().to_string())
        .collect();
    assert_eq!(ours_leases, curator);
    // Without the count: Curator's waiter made the last lease node after its lock node heads
    // locks/, so that lease node waits and that lock node is not listed again.
    assert_eq!(look(&checker, &path, None, None).await, seen);

    first.send("release").await;
    assert_eq!(first.line().await, "released");
    assert_eq!(second.line().await, "leased");
    wait_children(&checker, &leases, 3).await;
    wait_children(&checker, &locks, 1).await;
    for leases_given in [Some(2), None] {
        let now = look(&checker, &path, None, leases_given).await;
        assert_eq!(states(&now), vec![Holds, Holds, Waits], "{leases_given:?}");
        assert_eq!(nodes(&now)[..2], nodes(&seen)[1..3]);
        assert_eq!(now.contenders[2].session, wazoo_session);
    }
    ours.release().await.unwrap();
    let (mut late, late_lease) = within(LIMIT, "wazoo gets a lease", waiting).await.unwrap();
    let now = look(&checker, &path, None, None).await;
    assert_eq!(nodes(&now), vec![seen.contenders[2].node.clone(), late_lease.node.clone()]);
    late.release().await.unwrap();
    second.send("release").await;
    assert_eq!(second.line().await, "released");
    for mut peer in [first, second, viewer] {
        peer.send("quit").await;
    }
    ours.close().await;
    late.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_daemon_answers_as_the_library_reads() {
    let checker = client(&zk().address()).await;
    let daemon = Daemon::start(&plugins(), &root().join("target/component-cache")).await;
    let mut recipes = RecipesClient::new(daemon.channel().await);
    let host = host().await;

    // A read/write lock with a holder and a waiter of each mode, and a semaphore with a waiter.
    let rw_path = unique("holders-daemon-rw");
    let mut reader = host.rwlock("rwlock").await.unwrap();
    reader.acquire(&rw_path, Mode::Read, None).await.unwrap();
    let mut waiters = Vec::new();
    for (i, mode) in [Mode::Write, Mode::Read].into_iter().enumerate() {
        let mut lock = host.rwlock("rwlock").await.unwrap();
        let lock_path = rw_path.clone();
        waiters.push(tokio::spawn(async move {
            lock.acquire(&lock_path, mode, None).await.unwrap();
            lock
        }));
        wait_children(&checker, &rw_path, i + 2).await;
    }
    let sem_path = unique("holders-daemon-sem");
    let mut holder = host.semaphore("semaphore").await.unwrap();
    holder.acquire(&sem_path, 1, None).await.unwrap();
    let mut queued = host.semaphore("semaphore").await.unwrap();
    let queued_path = sem_path.clone();
    let sem_waiter = tokio::spawn(async move {
        queued.acquire(&queued_path, 1, None).await.unwrap();
        queued
    });
    wait_children(&checker, &format!("{sem_path}/leases"), 2).await;

    let ask = |path: &str, kind: HoldersKind, leases: Option<u32>| HoldersRequest {
        path: path.to_string(),
        kind: kind as i32,
        leases,
        ..Default::default()
    };
    let cases = [
        (ask(&rw_path, HoldersKind::Detect, None), &family::RWLOCK),
        (ask(&rw_path, HoldersKind::ReadWrite, None), &family::RWLOCK),
        (ask(&sem_path, HoldersKind::Detect, None), &family::SEMAPHORE),
        (ask(&sem_path, HoldersKind::Semaphore, Some(1)), &family::SEMAPHORE),
        (ask(&unique("holders-daemon-none"), HoldersKind::Election, None), &family::ELECTION),
    ];
    for (request, kind) in cases {
        let asked = (request.path.clone(), request.kind, request.leases);
        let reply = recipes.holders(request).await.unwrap().into_inner();
        let given = match HoldersKind::try_from(asked.1).unwrap() {
            HoldersKind::Detect => None,
            _ => Some(kind),
        };
        let read = look(&checker, &asked.0, given, asked.2).await;
        assert_eq!(read.kind, kind);
        let expected = match kind {
            &family::LOCK => HoldersKind::Lock,
            &family::RWLOCK => HoldersKind::ReadWrite,
            &family::SEMAPHORE => HoldersKind::Semaphore,
            &family::ELECTION => HoldersKind::Election,
            other => panic!("{} has no holders", other.name),
        };
        assert_eq!(reply.kind, expected as i32, "{asked:?}");
        assert_eq!(reply.contenders.len(), read.contenders.len(), "{asked:?}");
        for (theirs, ours) in reply.contenders.iter().zip(&read.contenders) {
            let mode = match ours.mode {
                None => ContenderMode::Unspecified,
                Some(Mode::Read) => ContenderMode::Read,
                Some(Mode::Write) => ContenderMode::Write,
            };
            assert_eq!(
                (
                    &theirs.node,
                    theirs.sequence,
                    theirs.holds,
                    theirs.mode,
                    &theirs.data,
                    theirs.session,
                    theirs.fencing_token
                ),
                (
                    &ours.node,
                    ours.sequence,
                    ours.state == Holds,
                    mode as i32,
                    &ours.data,
                    ours.session,
                    ours.token
                ),
                "{asked:?}"
            );
        }
    }
    let rw = recipes.holders(ask(&rw_path, HoldersKind::Detect, None)).await.unwrap().into_inner();
    let holds: Vec<bool> = rw.contenders.iter().map(|c| c.holds).collect();
    assert_eq!(holds, vec![true, false, false]);
    let sem = recipes.holders(ask(&sem_path, HoldersKind::Detect, None)).await.unwrap().into_inner();
    let holds: Vec<bool> = sem.contenders.iter().map(|c| c.holds).collect();
    assert_eq!(holds, vec![true, false], "the holder, then the waiter by its lease node");

    // Bad input is INVALID_ARGUMENT, named as the recipes' errors are.
    for (request, name) in [
        (ask("relative/path", HoldersKind::Detect, None), "invalid-path"),
        (ask("/", HoldersKind::Lock, None), "invalid-path"),
        (ask(&sem_path, HoldersKind::Semaphore, Some(0)), "invalid-argument"),
        (HoldersRequest { kind: 99, ..ask(&sem_path, HoldersKind::Detect, None) }, "invalid-argument"),
    ] {
        let refused = recipes.holders(request).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().starts_with(name), "{refused:?}");
    }

    reader.release().await.unwrap();
    holder.release().await.unwrap();
    let mut handles = Vec::new();
    for waiter in waiters {
        let mut lock = within(LIMIT, "a waiter acquires", waiter).await.unwrap();
        lock.release().await.unwrap();
        handles.push(lock);
    }
    let mut queued = within(LIMIT, "the semaphore waiter acquires", sem_waiter).await.unwrap();
    queued.release().await.unwrap();
    for h in handles {
        h.close().await;
    }
    queued.close().await;
    reader.close().await;
    holder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_and_unknown_names_are_errors_never_panics() {
    let checker = client(&zk().address()).await;
    for path in ["", "relative", "/", "/a//b", "/a/", "/a/../b", "/zookeeper/quota"] {
        match holders::read(&Zk::from_client(checker.clone()), path, None, None).await {
            Err(ZkError::InvalidPath(_)) => {}
            other => panic!("{path:?}: {other:?}"),
        }
    }
    let path = unique("holders-bad");
    match holders::read(&Zk::from_client(checker.clone()), &path, Some(&family::SEMAPHORE), Some(0)).await {
        Err(ZkError::InvalidArgument(why)) => assert!(why.contains("lease"), "{why}"),
        other => panic!("leases 0: {other:?}"),
    }

    // A path whose children are named in no claim's format: detection asks for the kind; with a
    // kind given, they are ignored.
    let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.mkdir(&format!("{path}/item-0000000001"), &persistent).await.unwrap();
    match holders::read(&Zk::from_client(checker.clone()), &path, None, None).await {
        Err(ZkError::InvalidArgument(why)) => assert!(why.contains("pass the kind"), "{why}"),
        other => panic!("unknown names: {other:?}"),
    }
    for kind in [&family::LOCK, &family::RWLOCK, &family::SEMAPHORE, &family::ELECTION] {
        let seen = look(&checker, &path, Some(kind), None).await;
        assert_eq!(seen, Contenders { kind, contenders: vec![] });
    }

    // Names of two kinds: detection asks for the kind; each kind lists its own.
    let mixed = unique("holders-mixed");
    let mut lock = host().await.lock("lock").await.unwrap();
    let held = lock.acquire(&mixed, None).await.unwrap();
    checker
        .create(
            &format!("{mixed}/_c_x-latch-"),
            b"stray",
            &CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    match holders::read(&Zk::from_client(checker.clone()), &mixed, None, None).await {
        Err(ZkError::InvalidArgument(why)) => {
            assert!(why.contains("more than one kind") && why.contains("pass the kind"), "{why}")
        }
        other => panic!("mixed names: {other:?}"),
    }
    assert_eq!(nodes(&look(&checker, &mixed, Some(&family::LOCK), None).await), vec![held.node.clone()]);
    let stray = look(&checker, &mixed, Some(&family::ELECTION), None).await;
    assert_eq!((states(&stray), stray.contenders[0].data.as_slice()), (vec![Holds], &b"stray"[..]));
    lock.release().await.unwrap();
    lock.close().await;
}
