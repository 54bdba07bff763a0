//! Interop: kazoo 2.11's `Lock`, `ReadLock`/`WriteLock` and `Semaphore` (the real library, run
//! by `tests/python/kazoo_lock_peer.py`) against wazoo's kazoo-format builds `lock-kazoo`,
//! `rwlock-kazoo` and `semaphore-kazoo` on the same paths, both ways: never two lock holders,
//! readers share, a writer excludes, leases are counted together, and a semaphore of another
//! max-leases is refused by either side.

use std::sync::Arc;
use std::time::Duration;

use wazoo_runtime::{Lost, Mode, RecipeError, RwLockHandle, ZkError};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// A running kazoo peer holding one `Lock`, `ReadLock`, `WriteLock` or `Semaphore`.
struct Peer(Kazoo);

impl std::ops::Deref for Peer {
    type Target = Kazoo;
    fn deref(&self) -> &Kazoo {
        &self.0
    }
}

impl std::ops::DerefMut for Peer {
    fn deref_mut(&mut self) -> &mut Kazoo {
        &mut self.0
    }
}

impl Peer {
    /// Starts a peer of `kind` (`lock`, `read`, `write`, `semaphore:N`) on `path`.
    async fn start(address: &str, path: &str, kind: &str) -> Peer {
        let mut args = vec![address, path];
        args.extend(kind.split(':'));
        Peer(Kazoo::run("tests/python/kazoo_lock_peer.py", &args).await)
    }

    /// kazoo's own list of the contenders (lock) or lease holders (semaphore).
    async fn contenders(&mut self) -> Vec<String> {
        let answer = self.ask("contenders").await;
        let json = answer.strip_prefix("contenders ").unwrap_or_else(|| panic!("kazoo answered {answer}"));
        serde_json::from_str(json).unwrap()
    }
}

/// Whether `name` is a kazoo contender's name: `<32 hex digits><marker><10 digits>`.
fn is_kazoo_name(name: &str, marker: &str) -> bool {
    let Some((id, sequence)) = name.split_once(marker) else { return false };
    id.len() == 32
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && sequence.len() == 10
        && sequence.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `name` is a kazoo semaphore lease's name: 32 hex digits.
fn is_lease_name(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

fn name(node: &str) -> &str {
    node.rsplit('/').next().unwrap()
}

fn append(path: &std::path::Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

/// The most holders inside at once in an `X enter`/`X exit` log, and who entered.
fn most_inside(history: &str) -> (usize, Vec<char>) {
    let (mut inside, mut most, mut who) = (0usize, 0, Vec::new());
    for line in history.lines() {
        if line.ends_with(" enter") {
            inside += 1;
            most = most.max(inside);
            who.push(line.chars().next().unwrap());
        } else {
            assert!(line.ends_with(" exit"), "{history}");
            inside -= 1;
        }
    }
    (most, who)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_lock_and_wazoo_lock_kazoo_exclude_each_other_both_ways() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("kazoo-lock");
    let host = host().await;
    let mut kazoo = Peer::start(&address, &path, "lock").await;
    let mut lock = host.lock("lock-kazoo").await.unwrap();

    // wazoo holds: kazoo sees it as the contender, and cannot take the lock.
    let held = lock.acquire(&path, None).await.unwrap();
    assert!(is_kazoo_name(name(&held.node), "__lock__"), "wazoo's node {}", held.node);
    // A handle told no identity leaves its node's data blank (tests/tests/identity.rs: kazoo
    // reading the identity a claim is given).
    assert_eq!(kazoo.contenders().await, [""]);
    assert_eq!(kazoo.ask("acquire 0.3").await, "timeout");
    // kazoo's WriteLock uses `__lock__` nodes too: it cannot take it either.
    let mut kazoo_writer = Peer::start(&address, &path, "write").await;
    assert_eq!(kazoo_writer.ask("acquire 0.3").await, "timeout");
    assert_eq!(children(&checker, &path).await, [name(&held.node)], "kazoo's timed-out nodes are gone");

    // kazoo waits on wazoo's node; wazoo's release wakes it.
    kazoo.send("acquire -1").await;
    wait_children(&checker, &path, 2).await;
    lock.release().await.unwrap();
    let acquired = kazoo.line().await;
    let kazoo_node = acquired.strip_prefix("acquired ").expect("kazoo acquired").to_string();
    assert!(is_kazoo_name(name(&kazoo_node), "__lock__"), "kazoo's node {kazoo_node}");

    // kazoo holds: wazoo cannot take it, then waits on kazoo's node.
    assert!(lock.try_acquire(&path).await.unwrap().is_none());
    assert!(matches!(
        lock.acquire(&path, Some(Duration::from_millis(300))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    assert_eq!(
        children(&checker, &path).await,
        [name(&kazoo_node)],
        "the refused wazoo attempts left nothing"
    );
    let path2 = path.clone();
    let waiting = tokio::spawn(async move {
        let held = lock.acquire(&path2, None).await.unwrap();
        (lock, held)
    });
    wait_children(&checker, &path, 2).await;
    assert_eq!(kazoo.ask("release").await, "released");
    let (mut lock, taken) = within(LIMIT, "wazoo acquires after kazoo releases", waiting).await.unwrap();
    assert!(taken.token > held.token, "the fencing token rose");
    lock.release().await.unwrap();

    // Both contend at full speed, with a second wazoo contender; an append-only log shows
    // whether two ever held at once.
    let log = std::env::temp_dir().join(format!("wazoo-kazoo-lock-{}.log", std::process::id()));
    std::fs::write(&log, "").unwrap();
    kazoo.send(&format!("loop 25 {}", log.display())).await;
    let mut workers = Vec::new();
    for _ in 0..2 {
        let (host, path, log) = (host.clone(), path.clone(), log.clone());
        workers.push(tokio::spawn(async move {
            let mut lock = host.lock("lock-kazoo").await.unwrap();
            for _ in 0..15 {
                lock.acquire(&path, None).await.unwrap();
                append(&log, "W enter\n");
                tokio::time::sleep(Duration::from_millis(2)).await;
                append(&log, "W exit\n");
                lock.release().await.unwrap();
            }
            lock.close().await;
        }));
    }
    for w in workers {
        within(LIMIT, "wazoo contenders", w).await.unwrap();
    }
    assert_eq!(kazoo.line().await, "looped");
    let history = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 2 * (25 + 30), "{history}");
    for pair in lines.chunks(2) {
        let who = pair[0].strip_suffix(" enter").unwrap_or_else(|| panic!("overlap:\n{history}"));
        assert_eq!(pair[1], format!("{who} exit"), "two holders at once:\n{history}");
    }
    assert!(lines.iter().any(|l| l.starts_with('K')) && lines.iter().any(|l| l.starts_with('W')));
    assert!(children(&checker, &path).await.is_empty(), "no lock node left behind");

    // A kazoo WriteLock holds: lock-kazoo cannot take it.
    assert!(kazoo_writer.ask("acquire 5").await.starts_with("acquired "));
    assert!(lock.try_acquire(&path).await.unwrap().is_none(), "kazoo's WriteLock excludes lock-kazoo");
    assert_eq!(kazoo_writer.ask("release").await, "released");
    kazoo.send("quit").await;
    kazoo_writer.send("quit").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revocation_reaches_wazoo_holders_and_forces_out_a_kazoo_holder_after_the_grace() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host().await;
    let path = unique("kazoo-revoke");

    // A wazoo holder of a kazoo-format node is told, as with Curator's format.
    let mut holder = host.lock("lock-kazoo").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    let lost = tokio::spawn(holder.lost());
    let mut revoker = host.lock("lock-kazoo").await.unwrap();
    assert!(revoker.revoke(&held.node, None).await.unwrap());
    assert_eq!(within(LIMIT, "the holder learns of the revocation", lost).await.unwrap(), Lost::Revoked);
    holder.release().await.unwrap();
    // The Curator-format build does not take a kazoo name for a claim node.
    let mut standard = host.lock("lock").await.unwrap();
    let refused = standard.revoke(&held.node, None).await;
    assert!(matches!(refused, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))), "{refused:?}");

    // kazoo has no revocation: its holder ignores `__REVOKE__`, so after the grace its node is
    // deleted, and the lock is free.
    let mut kazoo = Peer::start(&address, &path, "lock").await;
    let acquired = kazoo.ask("acquire -1").await;
    let node = acquired.strip_prefix("acquired ").expect("kazoo acquired").to_string();
    let released = revoker.revoke(&node, Some(Duration::from_millis(300))).await.unwrap();
    assert!(!released, "the revocation had to be forced");
    assert!(checker.check_stat(&node).await.unwrap().is_none(), "the kazoo holder's node was deleted");
    let mut next = host.lock("lock-kazoo").await.unwrap();
    assert!(next.try_acquire(&path).await.unwrap().is_some(), "the revoked lock is free");
    next.release().await.unwrap();
    assert_eq!(kazoo.ask("release").await, "released");
    kazoo.send("quit").await;
}

/// The kazoo-format lock keeps the lock family's costs: an uncontended acquire is a create and a
/// listing sent together, and when the kazoo holder it waits behind releases, it holds without
/// asking ZooKeeper anything more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_kazoo_acquires_in_one_round_trip_and_takes_over_from_kazoo_without_a_listing() {
    use wazoo_tests::proxy::{op, Proxy};
    let address = zk().address();
    let proxy = Proxy::start(&address).await;
    let waiter_host =
        wazoo_runtime::Host::start(config(&proxy.address(), Duration::from_secs(10))).await.unwrap();
    let path = unique("kazoo-round-trips");
    let checker = client(&address).await;
    let open = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    checker.mkdir(&path, &open).await.unwrap();

    let mut waiter = waiter_host.lock("lock-kazoo").await.unwrap();
    proxy.delay(Duration::from_millis(40));
    proxy.tap(None);
    let held = within(LIMIT, "uncontended acquire", waiter.acquire(&path, None)).await.unwrap();
    let log = proxy.untap();
    proxy.delay(Duration::ZERO);
    let sent: Vec<_> = log.iter().filter(|r| r.path.starts_with(&path)).collect();
    assert_eq!(
        sent.iter().map(|r| r.kind).collect::<Vec<_>>(),
        vec![op::CREATE2, op::GET_CHILDREN2],
        "an uncontended acquire is a create and a listing: {log:?}"
    );
    assert_eq!(
        sent[0].answered_before, sent[1].answered_before,
        "the listing waited for the create: {log:?}"
    );
    waiter.release().await.unwrap();

    // kazoo holds; the waiter queues behind it.
    let mut kazoo = Peer::start(&address, &path, "lock").await;
    let acquired = kazoo.ask("acquire -1").await;
    let kazoo_node = acquired.strip_prefix("acquired ").expect("kazoo acquired").to_string();
    proxy.tap(None);
    let waiting = tokio::spawn({
        let path = path.clone();
        async move {
            let held = waiter.acquire(&path, None).await;
            (waiter, held)
        }
    });
    within(LIMIT, "the waiter watches kazoo's node", proxy.answered(|r| r.watch && r.path == kazoo_node))
        .await;
    proxy.tap(None);
    assert_eq!(kazoo.ask("release").await, "released");
    let (mut waiter, second) = within(LIMIT, "the hand-over", waiting).await.unwrap();
    let second = second.unwrap();
    let after = proxy.untap();
    assert!(second.token > held.token);
    assert!(
        after.iter().all(|r| !r.path.starts_with(&path)),
        "the waiter asked ZooKeeper again after the notification: {after:?}"
    );
    waiter.release().await.unwrap();
    waiter.close().await;
    kazoo.send("quit").await;
}

async fn rw_handle(host: &wazoo_runtime::Host) -> RwLockHandle {
    host.rwlock("rwlock-kazoo").await.unwrap()
}

/// Starts a blocking acquire in the background; resolves to the handle once held.
fn acquire_in_background(
    mut lock: RwLockHandle,
    path: &str,
    mode: Mode,
) -> tokio::task::JoinHandle<RwLockHandle> {
    let path = path.to_string();
    tokio::spawn(async move {
        lock.acquire(&path, mode, None).await.unwrap();
        lock
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_read_write_lock_and_wazoo_rwlock_kazoo_interoperate_both_ways() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("kazoo-rw");
    let host = host().await;

    // A kazoo writer holds: wazoo can neither read nor write.
    let mut kazoo_writer = Peer::start(&address, &path, "write").await;
    let acquired = kazoo_writer.ask("acquire -1").await;
    assert!(acquired.starts_with("acquired "), "{acquired}");
    let mut reader = rw_handle(&host).await;
    assert!(reader.try_acquire(&path, Mode::Read).await.unwrap().is_none());
    let mut writer = rw_handle(&host).await;
    assert!(writer.try_acquire(&path, Mode::Write).await.unwrap().is_none());
    assert_eq!(children(&checker, &path).await.len(), 1, "the refused attempts left nothing");
    // A wazoo reader waits on kazoo's writer and gets in when it releases.
    let waiting = acquire_in_background(reader, &path, Mode::Read);
    wait_children(&checker, &path, 2).await;
    assert_eq!(kazoo_writer.ask("release").await, "released");
    let mut reader = within(LIMIT, "wazoo reader after kazoo writer", waiting).await.unwrap();
    let nodes = children(&checker, &path).await;
    assert!(nodes.len() == 1 && is_kazoo_name(&nodes[0], "__rlock__"), "wazoo's reader node: {nodes:?}");

    // A kazoo reader shares with the wazoo reader; a kazoo writer waits behind both.
    let mut kazoo_reader = Peer::start(&address, &path, "read").await;
    let shared = kazoo_reader.ask("acquire 2").await;
    assert!(shared.starts_with("acquired "), "kazoo and wazoo readers share: {shared}");
    assert_eq!(kazoo_writer.ask("acquire 0.3").await, "timeout");
    kazoo_writer.send("acquire -1").await;
    wait_children(&checker, &path, 3).await;
    // While that writer is queued, a new wazoo reader waits behind it (writers are not starved).
    let mut late_reader = rw_handle(&host).await;
    assert!(late_reader.try_acquire(&path, Mode::Read).await.unwrap().is_none());
    assert_eq!(kazoo_reader.ask("release").await, "released");
    reader.release().await.unwrap();
    let acquired = kazoo_writer.line().await;
    assert!(acquired.starts_with("acquired "), "kazoo's writer after both readers: {acquired}");
    assert!(is_kazoo_name(name(&acquired), "__lock__"), "{acquired}");
    // Held by kazoo's writer: wazoo's writer times out, then gets it after the release.
    assert!(matches!(
        writer.acquire(&path, Mode::Write, Some(Duration::from_millis(300))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    let waiting = acquire_in_background(writer, &path, Mode::Write);
    wait_children(&checker, &path, 2).await;
    assert_eq!(kazoo_writer.ask("release").await, "released");
    let mut writer = within(LIMIT, "wazoo writer after kazoo writer", waiting).await.unwrap();

    // The wazoo writer holds: kazoo's reader and writer time out, then the reader gets in after
    // the release; so does a kazoo `Lock` on the same path, which also uses `__lock__` nodes.
    let nodes = children(&checker, &path).await;
    assert!(nodes.len() == 1 && is_kazoo_name(&nodes[0], "__lock__"), "wazoo's writer node: {nodes:?}");
    assert_eq!(kazoo_reader.ask("acquire 0.3").await, "timeout");
    assert_eq!(kazoo_writer.ask("acquire 0.3").await, "timeout");
    let mut kazoo_lock = Peer::start(&address, &path, "lock").await;
    assert_eq!(kazoo_lock.ask("acquire 0.3").await, "timeout");
    kazoo_reader.send("acquire -1").await;
    wait_children(&checker, &path, 2).await;
    writer.release().await.unwrap();
    let acquired = kazoo_reader.line().await;
    assert!(acquired.starts_with("acquired "), "{acquired}");
    // kazoo's reader holds: a wazoo reader shares, a wazoo writer waits.
    assert!(late_reader.try_acquire(&path, Mode::Read).await.unwrap().is_some());
    assert!(writer.try_acquire(&path, Mode::Write).await.unwrap().is_none());
    late_reader.release().await.unwrap();
    assert_eq!(kazoo_reader.ask("release").await, "released");
    let acquired = kazoo_lock.ask("acquire 5").await;
    assert!(acquired.starts_with("acquired "), "{acquired}");
    assert!(
        writer.try_acquire(&path, Mode::Write).await.unwrap().is_none(),
        "kazoo's Lock excludes a writer"
    );
    assert_eq!(kazoo_lock.ask("release").await, "released");
    assert!(children(&checker, &path).await.is_empty(), "no node left behind");
    for peer in [&mut kazoo_reader, &mut kazoo_writer, &mut kazoo_lock] {
        peer.send("quit").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_semaphore_and_wazoo_semaphore_kazoo_share_the_leases_both_ways() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("kazoo-sem");
    let mutex = format!("{path}-__lock__");
    let host = host().await;
    let mut kazoo = Peer::start(&address, &path, "semaphore:2").await;
    let leased = kazoo.ask("acquire 5").await;
    assert!(leased.starts_with("leased "), "{leased}");
    assert_eq!(checker.get_data(&path).await.unwrap().0, b"2", "kazoo stores max_leases in the node");

    let mut first = host.semaphore("semaphore-kazoo").await.unwrap();
    let lease = first.acquire(&path, 2, Some(LIMIT)).await.unwrap();
    assert_eq!(lease.node, format!("{path}/{}", name(&lease.node)));
    assert!(is_lease_name(name(&lease.node)), "wazoo's lease {}", lease.node);
    assert_eq!(kazoo.contenders().await.len(), 2, "kazoo counts wazoo's lease");
    assert!(children(&checker, &mutex).await.is_empty(), "the mutex was let go");

    // Both leases taken, one each: a wazoo waiter (holding the mutex) waits until kazoo returns
    // its lease.
    let mut second = host.semaphore("semaphore-kazoo").await.unwrap();
    assert!(second.try_acquire(&path, 2).await.unwrap().is_none());
    assert_eq!(children(&checker, &path).await.len(), 2, "the refused attempt took no lease");
    let sem_path = path.clone();
    let waiting = tokio::spawn(async move {
        let lease = second.acquire(&sem_path, 2, None).await.unwrap();
        (second, lease)
    });
    wait_children(&checker, &mutex, 1).await;
    assert_eq!(kazoo.ask("release").await, "released");
    let (mut second, taken) = within(LIMIT, "wazoo gets kazoo's returned lease", waiting).await.unwrap();
    assert!(taken.token > lease.token);

    // Now wazoo holds both: kazoo waits until wazoo returns one.
    assert_eq!(kazoo.ask("acquire 0.3").await, "timeout");
    assert_eq!(children(&checker, &path).await.len(), 2);
    kazoo.send("acquire 30").await;
    wait_children(&checker, &mutex, 1).await;
    second.release().await.unwrap();
    let leased = kazoo.line().await;
    assert!(leased.starts_with("leased "), "{leased}");
    assert_eq!(kazoo.ask("release").await, "released");
    first.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "no lease left behind", wait_children(&checker, &path, 0)).await;
    assert!(children(&checker, &mutex).await.is_empty(), "no mutex node left behind");
    kazoo.send("quit").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_semaphore_of_another_max_leases_is_refused_both_ways() {
    let address = zk().address();
    let checker = client(&address).await;
    let host = host().await;

    // wazoo made it with 2: kazoo with 3 is refused.
    let path = unique("kazoo-sem-wazoo-made");
    let mut ours = host.semaphore("semaphore-kazoo").await.unwrap();
    ours.acquire(&path, 2, Some(LIMIT)).await.unwrap();
    assert_eq!(checker.get_data(&path).await.unwrap().0, b"2");
    let mut kazoo = Peer::start(&address, &path, "semaphore:3").await;
    let refused = kazoo.ask("acquire 5").await;
    assert_eq!(refused, "refused Inconsistent max leases: 2, expected: 3");
    assert_eq!(children(&checker, &path).await.len(), 1, "kazoo took no lease");
    ours.release().await.unwrap();
    kazoo.send("quit").await;

    // kazoo made it with 2: wazoo with 3 is refused, and leaves nothing behind.
    let path = unique("kazoo-sem-kazoo-made");
    let mut kazoo = Peer::start(&address, &path, "semaphore:2").await;
    assert!(kazoo.ask("acquire 5").await.starts_with("leased "));
    let mut other = host.semaphore("semaphore-kazoo").await.unwrap();
    match other.acquire(&path, 3, Some(LIMIT)).await {
        Err(RecipeError::Zk(ZkError::InvalidArgument(why))) => {
            assert!(why.contains("max-leases 2, not 3"), "{why}")
        }
        other => panic!("a semaphore of 2 taken as one of 3: {other:?}"),
    }
    assert!(matches!(other.try_acquire(&path, 1).await, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))));
    assert_eq!(children(&checker, &path).await.len(), 1, "the refused wazoo calls took no lease");
    assert!(children(&checker, &format!("{path}-__lock__")).await.is_empty(), "nor the mutex");
    // With the count it was made with, wazoo takes the second lease.
    assert!(other.try_acquire(&path, 2).await.unwrap().is_some());
    other.release().await.unwrap();
    assert_eq!(kazoo.ask("release").await, "released");
    kazoo.send("quit").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kazoo_and_wazoo_together_never_hold_more_leases_than_the_semaphore_has() {
    let address = zk().address();
    let path = unique("kazoo-sem-mixed");
    let host = host().await;
    let log = std::env::temp_dir().join(format!("wazoo-kazoo-sem-{}.log", std::process::id()));
    std::fs::write(&log, "").unwrap();
    let mut kazoo = Peer::start(&address, &path, "semaphore:2").await;
    kazoo.send(&format!("loop 20 {}", log.display())).await;
    let log = Arc::new(log);
    let mut workers = Vec::new();
    for _ in 0..3 {
        let (host, path, log) = (host.clone(), path.clone(), log.clone());
        workers.push(tokio::spawn(async move {
            let mut sem = host.semaphore("semaphore-kazoo").await.unwrap();
            for _ in 0..10 {
                sem.acquire(&path, 2, None).await.unwrap();
                append(&log, "W enter\n");
                // Inside long enough that a third holder, if one were let in, would overlap.
                tokio::time::sleep(Duration::from_millis(20)).await;
                append(&log, "W exit\n");
                sem.release().await.unwrap();
            }
            sem.close().await;
        }));
    }
    for w in workers {
        within(LIMIT, "wazoo lease holders", w).await.unwrap();
    }
    assert_eq!(kazoo.line().await, "looped");
    let history = std::fs::read_to_string(&*log).unwrap();
    let _ = std::fs::remove_file(&*log);
    let (most, who) = most_inside(&history);
    assert_eq!(who.len(), 20 + 30, "{history}");
    assert!(most <= 2, "{most} holders of 2 leases:\n{history}");
    assert!(who.contains(&'K') && who.contains(&'W'));
    kazoo.send("quit").await;
}
