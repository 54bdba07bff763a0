//! The chaos scenarios. Each one builds its own sites on a [`Lab`], injects its faults, checks
//! the invariants as it goes and at the end, and returns a [`Report`]:
//!
//! - fencing: a [`Register`] never accepts a lower token, and refuses a write for its token
//!   only from a writer that no longer holds the lock (else two held it at once);
//! - at most one holder or leader at any instant (the register's check, and tokens rising);
//! - every acknowledged queue item consumed exactly once;
//! - no ephemeral node left by a recipe once the scenario has closed its handles;
//! - convergence: a new holder within session timeout + ZooKeeper's election time + 1 s;
//! - every host still serves at the end.
//!
//! The same functions run in CI (`tests/tests/chaos.rs`, fixed parameters) and in the soak run
//! (`chaos-soak`, seeded random parameters).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wazoo_runtime::SessionEnd;
use wazoo_runtime::{Ballot, ElectionHandle, Host, LockHandle, Lost, Outcome, RecipeError, TxMode, ZkError};

use crate::chaos::{is_fault, Lab, Register, Report, Rng, Run, Site, Write};
use crate::proxy::op;

/// How long any single step may take before the scenario counts it as hung.
const HANG: Duration = Duration::from_secs(30);

/// Awaits `f` within `limit`; past it, records `what` as a violation and gives `None`.
async fn within<T>(run: &Run, limit: Duration, what: &str, f: impl Future<Output = T>) -> Option<T> {
    let started = Instant::now();
    match tokio::time::timeout(limit, f).await {
        Ok(v) => {
            run.check(true, String::new);
            Some(v)
        }
        Err(_) => {
            run.violation(format!("{what}: not within {limit:?} (waited {:?})", started.elapsed()));
            None
        }
    }
}

/// Checks that nothing ephemeral is left under `path` and that every site still serves.
async fn epilogue(run: &Run, lab: &Lab, path: &str, sites: &[&Site]) {
    let left = lab.orphans(path).await;
    run.check(left.is_empty(), || format!("orphan nodes under {path}: {left:?}"));
    for site in sites {
        let serves = site.serves(lab).await;
        run.check(serves.is_ok(), || format!("host no longer serves: {}", serves.unwrap_err()));
    }
}

/// Starts an acquire on a task, so the test can act while it waits.
fn acquire_on_task(
    mut lock: LockHandle,
    path: &str,
) -> tokio::task::JoinHandle<(LockHandle, Result<wazoo_runtime::Held, RecipeError>)> {
    let path = path.to_string();
    tokio::spawn(async move {
        let outcome = lock.acquire(&path, None).await;
        (lock, outcome)
    })
}

/// Waits, by watching, until `dir` has `n` children.
async fn queued(lab: &Lab, dir: &str, n: usize) {
    crate::wait_children(&lab.checker().await, dir, n).await;
}

/// The holder's session is ended on the server (by a second client taking it over and closing
/// it): a waiter on another host takes over within the session timeout + 1 s, the old holder
/// is told, and its late write is fenced off.
pub async fn holder_session_killed(lab: &Lab) -> Report {
    let run = Run::start();
    let path = lab.path("session-killed");
    let register = Register::new(lab, &format!("{path}-register")).await;
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    let mut holder = a.host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    run.op();
    let write = register.write(&run, "a", &held.node, held.token).await;
    run.check(write == Write::Accepted, || format!("the holder's write was {write:?}"));
    let lost = tokio::spawn(holder.lost());
    let waiting = acquire_on_task(b.host.lock("lock").await.unwrap(), &path);
    queued(lab, &path, 2).await;

    run.fault("a's session expired on the server (taken over and closed by a second client)");
    let killed = Instant::now();
    a.expire(lab).await;
    if let Some(joined) = within(&run, lab.convergence(Duration::ZERO), "b takes the lock", waiting).await {
        let (mut waiter, outcome) = joined.unwrap();
        let next = outcome.expect("b acquires");
        run.op();
        run.note(format!("b holds the lock {:.1?} after the kill", killed.elapsed()));
        run.check(next.token > held.token, || {
            format!("token did not rise: {} after {}", next.token, held.token)
        });
        let write = register.write(&run, "b", &next.node, next.token).await;
        run.check(write == Write::Accepted, || format!("the new holder's write was {write:?}"));
        let stale = register.write(&run, "a", &held.node, held.token).await;
        run.check(stale == Write::Fenced, || format!("the old holder's late write was {stale:?}"));
        waiter.release().await.unwrap();
        waiter.close().await;
    }
    if let Some(lost) = within(&run, HANG, "a is told it lost the lock", lost).await {
        let lost = lost.unwrap();
        run.check(lost == Lost::Session(SessionEnd::Expired), || format!("a was told {lost:?}"));
    }
    holder.close().await;
    epilogue(&run, lab, &path, &[&a, &b]).await;
    run.report("holder's session killed")
}

/// The holder's host stops for twice the session timeout (every byte to and from it held):
/// a waiter elsewhere takes over in time, the frozen holder's writes are fenced, and it is told
/// it lost the lock once ZooKeeper has answered nothing for 2/3 of the session timeout.
pub async fn host_frozen(lab: &Lab, factor: u32) -> Report {
    let run = Run::start();
    let path = lab.path("frozen");
    let register = Register::new(lab, &format!("{path}-register")).await;
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    let mut holder = a.host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    run.op();
    let lost = tokio::spawn(holder.lost());
    let waiting = acquire_on_task(b.host.lock("lock").await.unwrap(), &path);
    queued(lab, &path, 2).await;

    let frozen_for = lab.session * factor;
    run.fault(format!("a frozen for {frozen_for:?} ({factor}× the session timeout)"));
    let frozen = Instant::now();
    a.freeze();
    if let Some(joined) = within(&run, lab.convergence(Duration::ZERO), "b takes the lock", waiting).await {
        let (mut waiter, outcome) = joined.unwrap();
        let next = outcome.expect("b acquires");
        run.op();
        run.note(format!("b holds the lock {:.1?} after the freeze", frozen.elapsed()));
        run.check(next.token > held.token, || "token did not rise".into());
        run.check(register.write(&run, "b", &next.node, next.token).await == Write::Accepted, || {
            "the new holder's write was refused".into()
        });
        // The frozen holder still believes it holds the lock; its write must not land.
        let stale = register.write(&run, "a", &held.node, held.token).await;
        run.check(stale == Write::Fenced, || format!("the frozen holder's write was {stale:?}"));
        if let Some(rest) = frozen_for.checked_sub(frozen.elapsed()) {
            tokio::time::sleep(rest).await;
        }
        a.thaw();
        run.fault("a thawed");
        waiter.release().await.unwrap();
        waiter.close().await;
    } else {
        a.thaw();
    }
    if let Some(lost) = within(&run, HANG, "a is told it was cut off", lost).await {
        let lost = lost.unwrap();
        run.check(matches!(lost, Lost::CutOff(_)), || format!("a was told {lost:?}"));
    }
    holder.close().await;
    epilogue(&run, lab, &path, &[&a, &b]).await;
    run.report("host frozen for 2× the session timeout")
}

/// The holder's connection drops and stays down for a third of the session timeout: it keeps
/// the lock, with the same node and token, and is not told it lost anything.
pub async fn brief_disconnect(lab: &Lab, down: Duration) -> Report {
    let run = Run::start();
    let path = lab.path("brief");
    let register = Register::new(lab, &format!("{path}-register")).await;
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    let mut holder = a.host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    run.op();
    let session = holder.live().session_id();
    let mut lost = Box::pin(holder.lost());

    run.fault(format!("a's connection cut and held down for {down:?}"));
    a.freeze();
    a.cut();
    tokio::time::sleep(down).await;
    a.thaw();
    run.fault("a's network back");

    let stat = lab.checker().await.check_stat(&held.node).await.unwrap();
    run.check(stat.is_some_and(|s| s.czxid == held.token && s.ephemeral_owner == session), || {
        format!("a's lock node changed or vanished: {stat:?}")
    });
    let write = register.write(&run, "a", &held.node, held.token).await;
    run.check(write == Write::Accepted, || format!("a's write after the blip was {write:?}"));
    let mut other = b.host.lock("lock").await.unwrap();
    let taken = other.try_acquire(&path).await.unwrap();
    run.op();
    run.check(taken.is_none(), || "b took a lock a still holds".into());
    run.check(futures_now(&mut lost).is_none(), || "a was told it lost a lock it kept".into());
    // a's session works again: it releases, and b can take the lock.
    let released = within(&run, HANG, "a releases after the blip", holder.release()).await;
    run.check(matches!(released, Some(Ok(()))), || format!("a's release: {released:?}"));
    run.op();
    // The release is sent without waiting for ZooKeeper's answer: b takes the lock once the
    // server has applied it, by waiting, not by a try that may come first.
    let next = within(&run, HANG, "b takes the released lock", other.acquire(&path, Some(HANG))).await;
    run.check(matches!(&next, Some(Ok(n)) if n.token > held.token), || {
        format!("b could not take the released lock: {next:?}")
    });
    other.close().await;
    holder.close().await;
    epilogue(&run, lab, &path, &[&a, &b]).await;
    run.report("brief disconnect shorter than the session timeout")
}

/// Polls a future once, without waiting.
fn futures_now<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match std::pin::Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// The reply to a sequential create is lost on the network (the node was made; the client saw
/// the connection drop): for every sequential recipe, exactly one node results, it is found
/// and used, and nothing is left once released.
pub async fn lost_create_reply(lab: &Lab) -> Report {
    let run = Run::start();
    let root = lab.path("lost-create");
    // Every parent exists first, so each lost reply belongs to a create the server applied
    // (under a missing parent the first create fails with no-node, and losing its reply proves
    // nothing).
    let checker = lab.checker().await;
    for dir in ["lock", "election", "semaphore/locks", "semaphore/leases", "queue"] {
        let options =
            zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        checker.mkdir(&format!("{root}/{dir}"), &options).await.expect("creating a scenario directory");
    }
    let a = lab.site("a").await;
    let proxy = &a.proxies[0];
    let session = a.host.live().await.unwrap().session_id();

    // Lock.
    let path = format!("{root}/lock");
    let mut lock = a.host.lock("lock").await.unwrap();
    run.fault("reply to the lock's create lost");
    proxy.lose_reply(op::CREATES, 1);
    let held = within(&run, HANG, "lock acquires through a lost reply", lock.acquire(&path, None)).await;
    run.op();
    let nodes = crate::children(&lab.checker().await, &path).await;
    run.check(nodes.len() == 1, || format!("lock: {} nodes after one acquire: {nodes:?}", nodes.len()));
    if let Some(Ok(held)) = &held {
        let owner = lab.checker().await.check_stat(&held.node).await.unwrap().map(|s| s.ephemeral_owner);
        run.check(owner == Some(session), || format!("lock node owned by {owner:?}, not our session"));
    } else {
        run.violation(format!("lock acquire: {held:?}"));
    }
    lock.release().await.unwrap();
    lock.close().await;

    // Leader election.
    let path = format!("{root}/election");
    let mut candidate = a.host.election("election").await.unwrap();
    run.fault("reply to the election's create lost");
    proxy.lose_reply(op::CREATES, 1);
    let led = within(&run, HANG, "campaign through a lost reply", candidate.campaign(&path, "a", None)).await;
    run.op();
    run.check(matches!(led, Some(Ok(_))), || format!("campaign: {led:?}"));
    let nodes = crate::children(&lab.checker().await, &path).await;
    run.check(nodes.len() == 1, || {
        format!("election: {} proposals after one campaign: {nodes:?}", nodes.len())
    });
    candidate.resign().await.unwrap();
    candidate.close().await;

    // Semaphore.
    let path = format!("{root}/semaphore");
    let mut semaphore = a.host.semaphore("semaphore").await.unwrap();
    proxy.lose_reply(op::CREATES, 1);
    run.fault("reply to the semaphore's first create lost");
    let lease = within(&run, HANG, "lease through a lost reply", semaphore.acquire(&path, 2, None)).await;
    run.op();
    run.check(matches!(lease, Some(Ok(_))), || format!("semaphore: {lease:?}"));
    let leases = crate::children(&lab.checker().await, &format!("{path}/leases")).await;
    run.check(leases.len() == 1, || {
        format!("semaphore: {} leases after one acquire: {leases:?}", leases.len())
    });
    semaphore.release().await.unwrap();
    semaphore.close().await;

    // Queue (persistent sequential items: a duplicate would be delivered twice).
    let path = format!("{root}/queue");
    let mut queue = a.host.queue("queue").await.unwrap();
    run.fault("reply to a queue put lost");
    // A put creates its item (and a marker) with one multi.
    proxy.lose_reply(&[op::MULTI], 1);
    let put = within(&run, HANG, "put through a lost reply", queue.put(&path, b"once", None, false)).await;
    run.op();
    run.check(matches!(put, Some(Ok(_))), || format!("put: {put:?}"));
    let items = queue.len(&path).await.unwrap();
    run.check(items == 1, || format!("queue: {items} items after one put"));
    let item = queue.take(&path, Some(Duration::from_secs(5))).await.unwrap();
    run.op();
    run.check(item.data == b"once", || "queue: wrong item".into());
    queue.close().await;

    run.check(proxy.lost_replies() == 4, || format!("{} replies lost, 4 planned", proxy.lost_replies()));
    let errors = proxy.lost_errors();
    run.check(errors == [0, 0, 0, 0], || {
        format!("lost replies answered {errors:?}: a fault on a failed create proves nothing")
    });
    epilogue(&run, lab, &root, &[&a]).await;
    run.report("reply lost after a sequential create")
}

/// The reply to a set-data is lost: an unconditional config write still succeeds once; a
/// counter's compare-and-set is never applied twice, and the caller is told the truth.
pub async fn lost_set_data_reply(lab: &Lab) -> Report {
    let run = Run::start();
    let root = lab.path("lost-set");
    let a = lab.site("a").await;
    let proxy = &a.proxies[0];
    let mut config = a.host.config("config").await.unwrap();

    let path = format!("{root}/setting");
    config.set(&path, b"one", None).await.unwrap();
    run.fault("reply to a config set lost");
    proxy.lose_reply(&[op::SET_DATA], 1);
    let set = within(&run, HANG, "config set through a lost reply", config.set(&path, b"two", None)).await;
    run.op();
    run.check(matches!(set, Some(Ok(_))), || format!("config set: {set:?}"));
    let (data, _) = lab.checker().await.get_data(&path).await.unwrap();
    run.check(data == b"two", || format!("config holds {:?}", String::from_utf8_lossy(&data)));

    let path = format!("{root}/counter");
    config.add(&path, 10).await.unwrap();
    run.fault("reply to a counter's compare-and-set lost");
    proxy.lose_reply(&[op::SET_DATA], 1);
    let added = within(&run, HANG, "counter add through a lost reply", config.add(&path, 5)).await;
    run.op();
    let (data, _) = lab.checker().await.get_data(&path).await.unwrap();
    let value: i64 = String::from_utf8_lossy(&data).parse().unwrap();
    run.check(value == 15, || format!("counter is {value} after 10 + 5 with a lost reply"));
    match added {
        Some(Ok(v)) => {
            run.check(v == 15, || format!("add returned {v}"));
        }
        Some(Err(RecipeError::Zk(ZkError::ConnectionLoss))) => {
            // Outcome unknown, said so: the caller reads the counter, as the error asks.
            run.check(true, String::new);
        }
        other => run.violation(format!("counter add: {other:?}")),
    }
    run.check(proxy.lost_replies() == 2, || format!("{} replies lost, 2 planned", proxy.lost_replies()));
    let errors = proxy.lost_errors();
    run.check(errors == [0, 0], || {
        format!("lost replies answered {errors:?}: a fault on a failed write proves nothing")
    });
    config.close().await;
    epilogue(&run, lab, &root, &[&a]).await;
    run.report("reply lost after set-data")
}

/// The holder releases while its network is down: the delete goes through once the network is
/// back (within the session), and the waiter takes the lock.
pub async fn unlock_while_disconnected(lab: &Lab, down: Duration) -> Report {
    let run = Run::start();
    let path = lab.path("unlock-offline");
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    let mut holder = a.host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    run.op();
    let waiting = acquire_on_task(b.host.lock("lock").await.unwrap(), &path);
    queued(lab, &path, 2).await;

    run.fault(format!("a's network down for {down:?} while it releases"));
    a.freeze();
    a.cut();
    let releasing = tokio::spawn(async move {
        let outcome = holder.release().await;
        (holder, outcome)
    });
    tokio::time::sleep(down).await;
    a.thaw();
    run.fault("a's network back");
    if let Some(done) = within(&run, HANG, "the release completes", releasing).await {
        let (holder, outcome) = done.unwrap();
        run.op();
        run.check(outcome.is_ok(), || format!("release while disconnected: {outcome:?}"));
        run.check(!holder.tracks_nodes(), || format!("a still tracks {:?}", holder.ledger()));
        holder.close().await;
    }
    if let Some(joined) = within(&run, lab.convergence(Duration::ZERO), "b takes the lock", waiting).await {
        let (mut waiter, outcome) = joined.unwrap();
        let next = outcome.expect("b acquires");
        run.op();
        run.check(next.token > held.token, || "token did not rise".into());
        waiter.release().await.unwrap();
        waiter.close().await;
    }
    epilogue(&run, lab, &path, &[&a, &b]).await;
    run.report("unlock while disconnected")
}

/// While a host is disconnected, the node its lock waiter watches is deleted, and a queue item
/// is created and taken under its blocked consumer: neither waiter hangs once it reconnects.
pub async fn watched_nodes_change_while_disconnected(lab: &Lab, down: Duration) -> Report {
    let run = Run::start();
    let root = lab.path("watch-gap");
    let (lock_path, queue_path) = (format!("{root}/lock"), format!("{root}/queue"));
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    let mut holder = b.host.lock("lock").await.unwrap();
    let held = holder.acquire(&lock_path, None).await.unwrap();
    run.op();
    let armed = a.host.stats().watches_armed();
    let waiting = acquire_on_task(a.host.lock("lock").await.unwrap(), &lock_path);
    queued(lab, &lock_path, 2).await;
    let mut producer = b.host.queue("queue").await.unwrap();
    producer.put(&queue_path, b"warm-up", None, false).await.unwrap();
    producer.take(&queue_path, None).await.unwrap();
    let mut consumer = a.host.queue("queue").await.unwrap();
    let taking = tokio::spawn(async move {
        let outcome = consumer.take(&queue_path, None).await;
        (consumer, outcome)
    });
    // Both of a's waiters are parked on ZooKeeper watches.
    within(&run, HANG, "a's waiters arm their watches", a.host.stats().armed_at_least(armed + 2)).await;

    run.fault(format!("a disconnected for {down:?}"));
    a.freeze();
    a.cut();
    holder.release().await.unwrap();
    run.fault("a's predecessor released while a is away");
    let queue_path = format!("{root}/queue");
    producer.put(&queue_path, b"gone", None, false).await.unwrap();
    let gone = producer.take(&queue_path, None).await.unwrap();
    run.check(gone.data == b"gone", || "the item taken during the gap was not the one put".into());
    run.fault("an item put and taken while a is away");
    tokio::time::sleep(down).await;
    a.thaw();
    run.fault("a reconnected");

    if let Some(joined) = within(&run, HANG, "a's lock waiter acquires", waiting).await {
        let (mut waiter, outcome) = joined.unwrap();
        run.op();
        match outcome {
            Ok(next) => {
                run.check(next.token > held.token, || "token did not rise".into());
                waiter.release().await.unwrap();
            }
            Err(e) => run.violation(format!("a's acquire: {e}")),
        }
        waiter.close().await;
    }
    producer.put(&queue_path, b"after", None, false).await.unwrap();
    run.op();
    if let Some(joined) = within(&run, HANG, "a's blocked consumer takes the next item", taking).await {
        let (consumer, outcome) = joined.unwrap();
        run.op();
        match outcome {
            Ok(item) => run.check(item.data == b"after", || format!("a took {:?}", item.data)),
            Err(e) => run.check(false, || format!("a's take: {e}")),
        };
        consumer.close().await;
    }
    holder.close().await;
    producer.close().await;
    epilogue(&run, lab, &root, &[&a, &b]).await;
    run.report("watched node changed during a disconnect")
}

/// A consumer claims an item and its session dies before it acknowledges: the item goes back
/// to the queue, and every item is acknowledged exactly once.
pub async fn queue_consumer_killed(lab: &Lab, items: usize) -> Report {
    let run = Run::start();
    let path = lab.path("queue-kill");
    let (a, b) = (lab.site("producer").await, lab.site("victim").await);
    let mut producer = a.host.queue("queue").await.unwrap();
    for i in 0..items {
        producer.put(&path, format!("item-{i}").as_bytes(), None, false).await.unwrap();
        run.op();
    }
    let mut victim = b.host.queue("queue").await.unwrap();
    let claimed = victim.claim(&path, Some(Duration::from_secs(5))).await.unwrap();
    run.op();
    run.fault(format!("consumer's session killed holding {}", claimed.node));
    b.expire(lab).await;
    let late = victim.ack(&claimed.node).await;
    run.check(late.is_err(), || "a consumer whose session died acknowledged its claim".into());
    victim.close().await;

    let mut acked: BTreeMap<String, u32> = BTreeMap::new();
    let mut consumers = Vec::new();
    for _ in 0..3 {
        consumers.push(a.host.queue("queue").await.unwrap());
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for mut consumer in consumers {
        let (path, tx) = (path.clone(), tx.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                match consumer.claim(&path, Some(Duration::from_millis(500))).await {
                    Ok(item) => {
                        let acked = consumer.ack(&item.node).await.is_ok();
                        let _ = tx.send((String::from_utf8_lossy(&item.data).into_owned(), acked));
                    }
                    Err(RecipeError::Zk(ZkError::Timeout)) => break,
                    Err(e) => {
                        let _ = tx.send((format!("error: {e}"), false));
                        break;
                    }
                }
            }
            consumer.close().await;
        }));
    }
    drop(tx);
    while let Some((item, ok)) = rx.recv().await {
        run.op();
        if ok {
            *acked.entry(item).or_default() += 1;
        } else {
            run.violation(format!("consumer failed: {item}"));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..items {
        let name = format!("item-{i}");
        let n = acked.get(&name).copied().unwrap_or(0);
        run.check(n == 1, || format!("{name} acknowledged {n} times"));
    }
    run.check(acked.len() == items, || format!("unexpected items: {acked:?}"));
    let left = producer.len(&path).await.unwrap();
    run.check(left == 0, || format!("{left} items left"));
    producer.close().await;
    epilogue(&run, lab, &path, &[&a, &b]).await;
    run.report("queue consumer killed after taking an item")
}

/// The coordinator of a two-phase commit stalls before it sees the votes, and its session is
/// killed before it decides: the sites decide abort on their own, all alike, and the
/// coordinator never records a different outcome.
pub async fn coordinator_killed(lab: &Lab) -> Report {
    let run = Run::start();
    let tx = lab.path("tx");
    let (k, p) = (lab.site("coordinator").await, lab.site("sites").await);
    let sites = vec!["s1".to_string(), "s2".to_string()];
    let mut coordinator = k.host.transaction("transaction").await.unwrap();
    let (tx_path, names) = (tx.clone(), sites.clone());
    let coordinating = tokio::spawn(async move {
        let outcome = coordinator
            .coordinate(&tx_path, &names, b"payload", TxMode::Coordinated, Some(Duration::from_secs(60)))
            .await;
        (coordinator, outcome)
    });
    // The transaction is open once its site list exists.
    let meta = format!("{tx}/meta");
    loop {
        let (stat, watcher) = lab.checker().await.check_and_watch_stat(&meta).await.unwrap();
        if stat.is_some() {
            break;
        }
        watcher.changed().await;
    }
    let session = k.session().await;
    run.fault("coordinator frozen before the votes");
    k.freeze();
    let vote_timeout = lab.session * 2;
    let mut voters = Vec::new();
    for site in &sites {
        let mut voter = p.host.transaction("transaction").await.unwrap();
        let (tx, site) = (tx.clone(), site.clone());
        voters.push(tokio::spawn(async move {
            let outcome = voter.vote(&tx, &site, Ballot::Commit, Some(vote_timeout)).await;
            (voter, outcome)
        }));
    }
    // meta and one vote per site
    queued(lab, &tx, 1 + sites.len()).await;
    run.fault("coordinator's session killed between the votes and the decision");
    k.expire_session(lab, session).await;
    let mut outcomes = Vec::new();
    for v in voters {
        if let Some(joined) = within(&run, vote_timeout + HANG, "a site decides", v).await {
            let (voter, outcome) = joined.unwrap();
            run.op();
            match outcome {
                Ok(o) => outcomes.push(o),
                Err(e) => run.violation(format!("a site's vote failed: {e}")),
            }
            voter.close().await;
        }
    }
    let (data, _) = lab.checker().await.get_data(&format!("{tx}/decision")).await.unwrap();
    let recorded = if data == b"committed" { Outcome::Committed } else { Outcome::Aborted };
    run.check(outcomes.iter().all(|o| *o == recorded), || {
        format!("sites decided {outcomes:?}, the record says {recorded:?}")
    });
    run.check(recorded == Outcome::Aborted, || "committed without the coordinator's decision".into());
    if let Some(joined) = within(&run, HANG, "the coordinator returns", coordinating).await {
        let (coordinator, outcome) = joined.unwrap();
        run.check(outcome.as_ref().map_or(true, |o| *o == recorded), || {
            format!("the coordinator says {outcome:?}, the record says {recorded:?}")
        });
        coordinator.close().await;
    }
    epilogue(&run, lab, &tx, &[&k, &p]).await;
    run.report("2PC coordinator killed between votes and decision")
}

/// A double-barrier participant's session expires after it entered: the others still leave.
pub async fn barrier_participant_expires(lab: &Lab) -> Report {
    let run = Run::start();
    let path = lab.path("double-barrier");
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    let mut entering = Vec::new();
    for (i, host) in [&a.host, &a.host, &b.host].into_iter().enumerate() {
        let mut handle = host.barrier("barrier").await.unwrap();
        let path = path.clone();
        entering.push(tokio::spawn(async move {
            let outcome = handle.enter(&path, 3, Some(HANG)).await;
            (i, handle, outcome)
        }));
    }
    let mut inside = Vec::new();
    for e in entering {
        let (i, handle, outcome) = e.await.unwrap();
        run.op();
        run.check(outcome.is_ok(), || format!("participant {i} could not enter: {outcome:?}"));
        inside.push(handle);
    }
    let dead = inside.pop().unwrap();
    run.fault("participant on b: session expired after entering");
    b.expire(lab).await;
    let mut leaving = Vec::new();
    for mut handle in inside {
        leaving.push(tokio::spawn(async move {
            let outcome = handle.leave_double(Some(HANG)).await;
            (handle, outcome)
        }));
    }
    for l in leaving {
        if let Some(joined) = within(&run, HANG, "a live participant leaves", l).await {
            let (handle, outcome) = joined.unwrap();
            run.op();
            run.check(outcome.is_ok(), || format!("leaving failed: {outcome:?}"));
            handle.close().await;
        }
    }
    dead.close().await;
    epilogue(&run, lab, &path, &[&a, &b]).await;
    run.report("barrier participant's session expires")
}

/// What a workload contends for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lock,
    Election,
}

/// One contender's handle: a lock or an election candidate.
enum Contender {
    Lock(LockHandle),
    Election(ElectionHandle),
}

impl Contender {
    async fn open(host: &Host, kind: Kind) -> anyhow::Result<Contender> {
        Ok(match kind {
            Kind::Lock => Contender::Lock(host.lock("lock").await?),
            Kind::Election => Contender::Election(host.election("election").await?),
        })
    }

    /// Takes the lock or leadership: its node and fencing token.
    async fn take(&mut self, path: &str, name: &str) -> Result<(String, i64), RecipeError> {
        let limit = Some(Duration::from_secs(2));
        match self {
            Contender::Lock(h) => h.acquire(path, limit).await.map(|held| (held.node, held.token)),
            Contender::Election(h) => h.campaign(path, name, limit).await.map(|led| (led.node, led.token)),
        }
    }

    async fn give_back(&mut self) -> Result<(), RecipeError> {
        match self {
            Contender::Lock(h) => h.release().await,
            Contender::Election(h) => h.resign().await,
        }
    }

    fn is_retired(&self) -> bool {
        match self {
            Contender::Lock(h) => h.is_retired(),
            Contender::Election(h) => h.is_retired(),
        }
    }

    async fn close(self) {
        match self {
            Contender::Lock(h) => h.close().await,
            Contender::Election(h) => h.close().await,
        }
    }
}

/// Contenders on several hosts take a lock (or lead an election) in turn for as long as the
/// workload runs, each writing the fenced register when it gets it and again before it lets
/// go: at most one holder (leader) at any instant, or the register says so.
pub struct Workload {
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub path: String,
    pub register: Arc<Register>,
}

impl Workload {
    pub async fn start(
        lab: &Lab,
        run: &Arc<Run>,
        kind: Kind,
        sites: &[&Site],
        per_site: usize,
        seed: u64,
    ) -> Workload {
        let path = lab.path(match kind {
            Kind::Lock => "lock-workload",
            Kind::Election => "election-workload",
        });
        let register = Arc::new(Register::new(lab, &format!("{path}-register")).await);
        let (stop, _) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut rng = Rng::new(seed);
        for site in sites {
            for i in 0..per_site {
                let name = format!("{}#{i}", site.name);
                let (host, path, register, run) =
                    (site.host.clone(), path.clone(), register.clone(), run.clone());
                let (stop, rng) = (stop.subscribe(), Rng::new(rng.next()));
                tasks.push(tokio::spawn(contend(kind, name, host, path, register, run, stop, rng)));
            }
        }
        Workload { stop, tasks, path, register }
    }

    /// Stops every contender (each closes its handle) and waits for them.
    pub async fn stop(self, run: &Run) {
        self.stop.send_replace(true);
        for t in self.tasks {
            if within(run, HANG * 2, "a contender stops", t).await.is_none() {
                run.violation("a contender hung");
            }
        }
        let tokens = self.register.accepted();
        run.check(tokens.windows(2).all(|w| w[0] <= w[1]), || format!("register history fell: {tokens:?}"));
    }
}

#[allow(clippy::too_many_arguments)]
async fn contend(
    kind: Kind,
    name: String,
    host: Host,
    path: String,
    register: Arc<Register>,
    run: Arc<Run>,
    stop: watch::Receiver<bool>,
    mut rng: Rng,
) {
    let mut handle: Option<Contender> = None;
    while !*stop.borrow() {
        let mut contender = match handle.take() {
            Some(c) if !c.is_retired() => c,
            other => {
                if let Some(old) = other {
                    old.close().await;
                }
                match Contender::open(&host, kind).await {
                    Ok(c) => c,
                    Err(_) => {
                        // No session to be had right now (ZooKeeper down): try again shortly.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                }
            }
        };
        match contender.take(&path, &name).await {
            Ok((node, token)) => {
                run.op();
                register.write(&run, &name, &node, token).await;
                tokio::time::sleep(rng.millis(0, 20)).await;
                register.write(&run, &name, &node, token).await;
                match contender.give_back().await {
                    Ok(()) => handle = Some(contender),
                    Err(e) if is_fault(&e) => contender.close().await,
                    Err(e) => {
                        run.violation(format!("{name}: letting go failed: {e}"));
                        contender.close().await;
                    }
                }
            }
            Err(RecipeError::Zk(ZkError::Timeout)) => handle = Some(contender),
            Err(e) if is_fault(&e) => contender.close().await,
            Err(e) => {
                run.violation(format!("{name}: taking failed: {e}"));
                contender.close().await;
            }
        }
    }
    if let Some(c) = handle {
        c.close().await;
    }
}

/// What happens to the ensemble in an [`ensemble_fault`] scenario.
#[derive(Clone, Copy, Debug)]
pub enum EnsembleFault {
    /// SIGKILL the leader; restart it later.
    LeaderKilled,
    /// SIGSTOP the leader for this long.
    LeaderFrozen(Duration),
    /// Cut the leader off from its peers and from every client for this long.
    LeaderIsolated(Duration),
    /// One host reaches only a follower, which is then cut off from the others for this long.
    MinorityMember(Duration),
    /// Kill and restart whoever leads, every `every`, for `total`.
    LeaderRestarts { every: Duration, total: Duration },
    /// Every member down for this long.
    AllDown(Duration),
}

impl EnsembleFault {
    pub fn name(&self) -> String {
        match self {
            EnsembleFault::LeaderKilled => "ZooKeeper leader killed".into(),
            EnsembleFault::LeaderFrozen(d) => format!("ZooKeeper leader frozen for {d:?}"),
            EnsembleFault::LeaderIsolated(d) => format!("ZooKeeper leader isolated for {d:?}"),
            EnsembleFault::MinorityMember(d) => format!("host on a minority member for {d:?}"),
            EnsembleFault::LeaderRestarts { every, total } => {
                format!("leader restarted every {every:?} for {total:?}")
            }
            EnsembleFault::AllDown(d) => format!("whole ensemble down for {d:?}"),
        }
    }
}

/// Lock contenders and election candidates on three hosts run through an ensemble fault: the
/// registers never see two holders or two leaders, the lock or leadership changes hands again
/// within session timeout + election + 1 s of the fault, nothing is left behind, and every
/// host serves at the end.
pub async fn ensemble_fault(
    lab: &Lab,
    cluster: &Arc<crate::chaos::Cluster>,
    fault: EnsembleFault,
    seed: u64,
) -> Report {
    let run = Run::start();
    let name = fault.name();
    if let Err(e) = cluster.restore().await {
        run.violation(format!("the ensemble did not come back before the scenario: {e}"));
        return run.report(&name);
    }
    let leader = cluster.leader().await.expect("a leader");
    let follower = (leader + 1) % lab.members.len();
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    // The third host: on every member, or only on the follower to be cut off.
    let c = match fault {
        EnsembleFault::MinorityMember(_) => lab.site_on("c", &[lab.members[follower].clone()]).await,
        _ => lab.site("c").await,
    };
    // Locks and an election at once, one contender of each per host.
    let locks = Workload::start(lab, &run, Kind::Lock, &[&a, &b, &c], 1, seed).await;
    let leaders = Workload::start(lab, &run, Kind::Election, &[&a, &b, &c], 1, seed ^ 1).await;
    // Under way before the fault.
    let warm = run.progress_after(5, HANG).await;
    run.check(warm, || "no progress before the fault".into());

    let before = run.ops();
    let injected = Instant::now();
    let mut election = Duration::ZERO;
    match fault {
        EnsembleFault::LeaderKilled => {
            run.fault(format!("SIGKILL leader (member {leader})"));
            cluster.kill(leader).await;
            election = measure_election(&run, cluster, Some(leader)).await;
        }
        EnsembleFault::LeaderFrozen(d) => {
            run.fault(format!("SIGSTOP leader (member {leader})"));
            cluster.freeze(leader).await;
            election = measure_election(&run, cluster, Some(leader)).await;
            sleep_until(injected + d).await;
            cluster.thaw(leader).await;
            run.fault("SIGCONT old leader");
        }
        EnsembleFault::LeaderIsolated(d) => {
            run.fault(format!("leader (member {leader}) cut off from its peers and clients"));
            cluster.isolate(leader);
            for site in [&a, &b, &c] {
                site.proxies[leader].freeze();
            }
            election = measure_election(&run, cluster, Some(leader)).await;
            sleep_until(injected + d).await;
            cluster.heal();
            for site in [&a, &b, &c] {
                site.proxies[leader].thaw();
            }
            run.fault("partition healed");
        }
        EnsembleFault::MinorityMember(d) => {
            run.fault(format!("member {follower}, c's only server, cut off from its peers"));
            cluster.isolate(follower);
            sleep_until(injected + d).await;
            cluster.heal();
            run.fault("partition healed");
        }
        EnsembleFault::LeaderRestarts { every, total } => {
            let mut round = 0;
            while injected.elapsed() < total {
                round += 1;
                let tick = injected + every * round;
                if let Some(leader) = cluster.leader().await {
                    run.fault(format!("restart leader (member {leader})"));
                    cluster.kill(leader).await;
                    if let Err(e) = cluster.restart(leader).await {
                        run.violation(format!("member {leader} did not restart: {e}"));
                    }
                }
                sleep_until(tick).await;
            }
            election = measure_election(&run, cluster, None).await;
        }
        EnsembleFault::AllDown(d) => {
            run.fault("every member stopped");
            cluster.stop_all().await;
            sleep_until(injected + d).await;
            if let Err(e) = cluster.start_all().await {
                run.violation(format!("the ensemble did not restart: {e}"));
            }
            run.fault("every member restarted");
            election = measure_election(&run, cluster, None).await;
        }
    }
    // Convergence: the lock changes hands again soon after the fault (or after it ended, for
    // the faults that take the ensemble away for a while).
    let (from, mark) = match fault {
        EnsembleFault::LeaderKilled | EnsembleFault::LeaderIsolated(_) | EnsembleFault::LeaderFrozen(_) => {
            (injected, before)
        }
        _ => (Instant::now(), run.ops()),
    };
    let bound = lab.convergence(election);
    let remaining = (from + bound).saturating_duration_since(Instant::now());
    let moved = run.progress_after(mark, remaining).await;
    run.check(moved, || format!("no new holder within {bound:?} (election took {election:?})"));

    if let Err(e) = cluster.restore().await {
        run.violation(format!("the ensemble did not recover: {e}"));
    }
    let mark = run.ops();
    let resumed = run.progress_after(mark, HANG).await;
    run.check(resumed, || "no progress after the ensemble recovered".into());
    let paths = [locks.path.clone(), leaders.path.clone()];
    locks.stop(&run).await;
    leaders.stop(&run).await;
    epilogue(&run, lab, &paths[1], &[]).await;
    epilogue(&run, lab, &paths[0], &[&a, &b, &c]).await;
    run.report(&name)
}

/// How long until a quorum serves again, under a leader other than `old` if given (recorded
/// as a check: it must come back).
async fn measure_election(run: &Run, cluster: &Arc<crate::chaos::Cluster>, old: Option<usize>) -> Duration {
    let waited = match old {
        Some(old) => cluster.wait_new_leader(old, HANG).await,
        None => cluster.wait_quorum(HANG).await,
    };
    match waited {
        Ok(took) => {
            run.check(true, String::new);
            run.note(format!("quorum again after {took:.1?}"));
            took
        }
        Err(e) => {
            run.violation(format!("no quorum: {e}"));
            HANG
        }
    }
}

async fn sleep_until(when: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(when)).await;
}

/// A guest spins while it holds a lock node (the test guest `misbehave`, whose node is named as
/// the lock recipe names its own) until its CPU limit stops it: the host deletes the node at
/// once, on the session it keeps, and the contender queued behind it takes the lock well before
/// any session could have expired.
pub async fn guest_traps_holding_a_lock(lab: &Lab) -> Report {
    let run = Run::start();
    let path = lab.path("trap");
    let limits = wazoo_runtime::SandboxLimits { cpu_per_call: Duration::from_secs(2), ..Default::default() };
    let a = lab.site_with("a", &lab.members, limits).await;
    let b = lab.site("b").await;
    let session = a.host.live().await.unwrap().session_id();
    let mut guest = a.host.custom("misbehave").await.unwrap();
    let spin = vec!["hold-then-spin".to_string(), path.clone()];
    let spinning = tokio::spawn(async move {
        let outcome = guest.run(&spin).await;
        (guest, outcome)
    });
    queued(lab, &path, 1).await;
    let waiting = acquire_on_task(b.host.lock("lock").await.unwrap(), &path);
    queued(lab, &path, 2).await;
    run.fault("a guest holding the lock spins past its CPU limit");
    if let Some(joined) = within(&run, HANG, "the spinning guest is stopped", spinning).await {
        let (guest, outcome) = joined.unwrap();
        let stopped = Instant::now();
        run.op();
        run.check(matches!(outcome, Err(RecipeError::Trapped(_))), || {
            format!("the guest returned {outcome:?}")
        });
        run.check(guest.is_retired() && !guest.tracks_nodes(), || "the trapped handle keeps nodes".into());
        if let Some(joined) =
            within(&run, lab.session, "b takes the lock before any session expiry", waiting).await
        {
            let (mut waiter, outcome) = joined.unwrap();
            run.op();
            run.note(format!("b holds the lock {:.1?} after the trap", stopped.elapsed()));
            run.check(outcome.is_ok(), || format!("b's acquire: {outcome:?}"));
            let _ = waiter.release().await;
            waiter.close().await;
        }
        let now = a.host.live().await.unwrap().session_id();
        run.check(now == session, || "the trap cost the host its session".into());
    }
    epilogue(&run, lab, &path, &[&a, &b]).await;
    run.report("a guest traps while holding a lock")
}

/// One host's replies come back slowly (each held for `delay`) while contenders on it and on
/// a healthy host take a lock and lead an election: slowness is not a fault the recipes may
/// turn into two holders, and both hosts keep making progress.
pub async fn slow_replies(lab: &Lab, delay: Duration, length: Duration) -> Report {
    let run = Run::start();
    let (a, b) = (lab.site("a").await, lab.site("b").await);
    let locks = Workload::start(lab, &run, Kind::Lock, &[&a, &b], 2, delay.as_millis() as u64).await;
    let leaders = Workload::start(lab, &run, Kind::Election, &[&a, &b], 1, length.as_millis() as u64).await;
    let warm = run.progress_after(3, HANG).await;
    run.check(warm, || "no progress before the fault".into());
    run.fault(format!("every reply to a delayed by {delay:?} for {length:?}"));
    a.proxies.iter().for_each(|p| p.delay(delay));
    let mark = run.ops();
    tokio::time::sleep(length).await;
    a.proxies.iter().for_each(|p| p.delay(Duration::ZERO));
    run.fault("delay over");
    run.check(run.ops() > mark, || "no progress while a was slow".into());
    let paths = [locks.path.clone(), leaders.path.clone()];
    locks.stop(&run).await;
    leaders.stop(&run).await;
    epilogue(&run, lab, &paths[1], &[]).await;
    epilogue(&run, lab, &paths[0], &[&a, &b]).await;
    run.report("slow replies")
}

/// The `wazoo lock` process itself is stopped (SIGSTOP) for twice the session timeout while
/// it runs a command under the lock: a contender takes over in time, the stopped holder's
/// write is fenced, and once resumed `wazoo` notices the loss, stops its command and exits 4.
pub async fn host_process_frozen(lab: &Lab, factor: u32) -> Report {
    use tokio::io::AsyncBufReadExt;
    let run = Run::start();
    let path = lab.path("process-frozen");
    let register = Register::new(lab, &format!("{path}-register")).await;
    let b = lab.site("b").await;
    let session_ms = lab.session.as_millis().to_string();
    let mut child = tokio::process::Command::new(crate::wazoo_bin())
        .env("WAZOO_ZOOKEEPER", lab.members.join(","))
        .env("WAZOO_PLUGINS", crate::plugins())
        .env("WAZOO_SESSION_TIMEOUT", format!("{session_ms}ms"))
        .env_remove("WAZOO_LOG")
        .args([
            "lock",
            &path,
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            "echo $WAZOO_FENCING_TOKEN $WAZOO_LOCK_NODE; exec sleep 600",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting wazoo lock");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = within(&run, HANG, "wazoo lock runs its command", lines.next_line()).await;
    let Some(Ok(Some(line))) = first else {
        run.violation(format!("wazoo lock printed no token: {first:?}"));
        return run.report("wazoo process frozen for 2× the session timeout");
    };
    let mut words = line.split_whitespace();
    let token: i64 = words.next().and_then(|t| t.parse().ok()).unwrap_or(0);
    let node = words.next().unwrap_or_default().to_string();
    run.op();
    let write = register.write(&run, "wazoo", &node, token).await;
    run.check(write == Write::Accepted, || format!("the holder's write was {write:?}"));
    let waiting = acquire_on_task(b.host.lock("lock").await.unwrap(), &path);
    queued(lab, &path, 2).await;

    let pid = child.id().unwrap() as i32;
    let frozen_for = lab.session * factor;
    run.fault(format!("wazoo (pid {pid}) stopped with SIGSTOP for {frozen_for:?}"));
    let stopped = Instant::now();
    // SAFETY: kill(2) on the child we started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    if let Some(joined) = within(&run, lab.convergence(Duration::ZERO), "b takes the lock", waiting).await {
        let (mut waiter, outcome) = joined.unwrap();
        let next = outcome.expect("b acquires");
        run.op();
        run.note(format!("b holds the lock {:.1?} after the stop", stopped.elapsed()));
        run.check(next.token > token, || "token did not rise".into());
        let stale = register.write(&run, "wazoo", &node, token).await;
        run.check(stale == Write::Fenced, || format!("the stopped holder's write was {stale:?}"));
        let write = register.write(&run, "b", &next.node, next.token).await;
        run.check(write == Write::Accepted, || format!("the new holder's write was {write:?}"));
        sleep_until(stopped + frozen_for).await;
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        run.fault("wazoo resumed with SIGCONT");
        if let Some(status) = within(&run, HANG, "wazoo notices the loss and exits", child.wait()).await {
            let code = status.ok().and_then(|s| s.code());
            run.check(code == Some(4), || format!("wazoo exited with {code:?}, not 4 (lock lost)"));
        }
        waiter.release().await.unwrap();
        waiter.close().await;
    } else {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
    let _ = child.kill().await;
    epilogue(&run, lab, &path, &[&b]).await;
    run.report("wazoo process frozen for 2× the session timeout")
}

/// A daemon of the lab's own: `wazoo serve` on the lab's ZooKeeper with its session timeout,
/// the shared plugins and compile cache, and a Rust client connected to it.
async fn lab_daemon(lab: &Lab) -> (crate::daemon::Daemon, wazoo_client::Client) {
    let session = format!("{}ms", lab.session.as_millis());
    let cache = crate::root().join("target/component-cache");
    let extra = ["--session-timeout", session.as_str()];
    let daemon =
        crate::daemon::Daemon::start_on(&lab.members.join(","), &crate::plugins(), &cache, &extra).await;
    let client = wazoo_client::Client::connect(&daemon.grpc, None, Duration::from_secs(10)).await.unwrap();
    (daemon, client)
}

/// A client session of `ttl` kept alive over a KeepAlive stream of its own until `quiet` is set;
/// then the stream stays open, silent, and the TTL runs out. The stream ends with the returned
/// sender.
async fn quieting_session(
    client: &wazoo_client::Client,
    ttl: Duration,
    name: String,
    quiet: Arc<std::sync::atomic::AtomicBool>,
) -> (u64, tokio::sync::mpsc::Sender<wazoo_proto::KeepAliveRequest>) {
    use tokio_stream::wrappers::ReceiverStream;
    let mut sessions = client.sessions();
    let request = wazoo_proto::OpenRequest { ttl_ms: ttl.as_millis() as u64, name };
    let id = sessions.open(request).await.unwrap().into_inner().session;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut replies = sessions.keep_alive(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let keeper = tx.downgrade();
    tokio::spawn(async move {
        while !quiet.load(std::sync::atomic::Ordering::SeqCst) {
            let Some(keeper) = keeper.upgrade() else { break };
            if keeper.send(wazoo_proto::KeepAliveRequest { session: id, end: false }).await.is_err() {
                break;
            }
            drop(keeper);
            if !matches!(replies.message().await, Ok(Some(_))) {
                break;
            }
            tokio::time::sleep(ttl / 4).await;
        }
        // The stream stays open, silent, until the sender goes.
        while let Ok(Some(_)) = replies.message().await {}
    });
    (id, tx)
}

fn lock_request(session: u64, path: &str) -> wazoo_proto::AcquireRequest {
    wazoo_proto::AcquireRequest {
        session,
        path: path.to_string(),
        family: wazoo_proto::Family::Lock as i32,
        ..Default::default()
    }
}

/// Clients of a `wazoo serve` daemon wait for a lock through it while a host holds the lock,
/// and their client sessions end with the calls in flight: half closed by their clients, half
/// by their TTL passing with no keepalive. Each waiter's node leaves the queue as its session
/// ends (within its TTL and a second), its call is told UNKNOWN_SESSION, and when the holder
/// lets go a waiter whose session lives takes the lock at once: nobody queues behind a ghost.
pub async fn daemon_sessions_end_with_calls_waiting(lab: &Lab, waiters: usize) -> Report {
    let run = Run::start();
    let path = lab.path("daemon-ghosts");
    let a = lab.site("a").await;
    let mut holder = a.host.lock("lock").await.unwrap();
    let held = holder.acquire(&path, None).await.unwrap();
    run.op();
    let (daemon, client) = lab_daemon(lab).await;
    let ttl = Duration::from_millis(1000);
    let mut closing = Vec::new();
    let mut calls = Vec::new();
    // The silent sessions are kept alive until every waiter queued, then left to expire.
    let quiet = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut silent = Vec::new();
    for i in 0..waiters {
        let id = if i % 2 == 0 {
            let session = client.session(Duration::from_secs(10), format!("closed {i}")).await.unwrap();
            let id = session.id();
            closing.push(session);
            id
        } else {
            let (id, stream) = quieting_session(&client, ttl, format!("silent {i}"), quiet.clone()).await;
            silent.push(stream);
            id
        };
        let mut recipes = client.recipes();
        let request = lock_request(id, &path);
        calls.push(tokio::spawn(async move { recipes.acquire(request).await }));
    }
    if within(&run, HANG, "the waiters queue", queued(lab, &path, 1 + waiters)).await.is_none() {
        return run.report("daemon client sessions end with calls waiting");
    }
    run.fault(format!(
        "{} client sessions closed and {} left to expire (TTL {ttl:?}) with their Acquire waiting",
        closing.len(),
        waiters - closing.len()
    ));
    let ended = Instant::now();
    quiet.store(true, std::sync::atomic::Ordering::SeqCst);
    for session in closing {
        session.close().await;
    }
    if within(&run, ttl + Duration::from_secs(2), "the ghosts leave the queue", queued(lab, &path, 1))
        .await
        .is_some()
    {
        run.note(format!("the queue was the holder alone {:.1?} after the sessions ended", ended.elapsed()));
    }
    for call in calls {
        if let Some(joined) = within(&run, Duration::from_secs(3), "a waiting call is told", call).await {
            let kind = joined.unwrap().err().and_then(|s| wazoo_proto::ErrorKind::of(&s));
            run.check(kind == Some(wazoo_proto::ErrorKind::UnknownSession), || {
                format!("a waiter whose session ended was answered {kind:?}")
            });
        }
    }
    // A live waiter through the daemon takes the lock as soon as the holder lets go.
    let live = client.session(Duration::from_secs(10), "live".into()).await.unwrap();
    let mut recipes = client.recipes();
    let request = lock_request(live.id(), &path);
    let taking = tokio::spawn(async move { recipes.acquire(request).await });
    // Behind the holder alone: no ghost is left in the queue.
    within(
        &run,
        Duration::from_secs(5),
        "the live waiter queues behind the holder alone",
        queued(lab, &path, 2),
    )
    .await;
    holder.release().await.unwrap();
    holder.close().await;
    run.op();
    if let Some(joined) = within(&run, Duration::from_secs(3), "the live waiter takes the lock", taking).await
    {
        match joined.unwrap() {
            Ok(claim) => {
                run.op();
                let claim = claim.into_inner();
                run.check(claim.fencing_token > held.token, || "the token did not rise".into());
            }
            Err(status) => run.violation(format!("the live waiter failed: {status:?}")),
        }
    }
    live.close().await;
    drop(silent);
    drop(daemon);
    epilogue(&run, lab, &path, &[&a]).await;
    run.report("daemon client sessions end with calls waiting")
}

/// A `wazoo serve` daemon is stopped (SIGSTOP) for `factor` × the session timeout while a client
/// holds a lock through it and another waits through it, and a host elsewhere waits too. The
/// holding client is told its claim is lost before that host can take it (its keepalives go
/// unanswered for 2/3 of its TTL, the daemon's ZooKeeper session takes its whole timeout to
/// expire); the waiting client's call fails within `wazoo_client::SILENCE` and a margin; the
/// host takes over with a higher token and the stale holder's write is fenced; once resumed,
/// the daemon serves again and leaves nothing behind.
pub async fn daemon_frozen(lab: &Lab, factor: u32) -> Report {
    let run = Run::start();
    let path = lab.path("daemon-frozen");
    let register = Register::new(lab, &format!("{path}-register")).await;
    let (daemon, client) = lab_daemon(lab).await;
    let options = wazoo_client::LockOptions { ttl: lab.session, ..Default::default() };
    let claim = client.lock(&path, options.clone()).await.unwrap();
    let (node, token) = (claim.node().to_string(), claim.token());
    run.op();
    let write = register.write(&run, "client", &node, token).await;
    run.check(write == Write::Accepted, || format!("the holder's write was {write:?}"));
    let lost = tokio::spawn(claim.lost());
    let waiting = tokio::spawn({
        let (client, path, options) = (client.clone(), path.clone(), options.clone());
        async move { client.lock(&path, options).await }
    });
    queued(lab, &path, 2).await;
    let b = lab.site("b").await;
    let b_waits = acquire_on_task(b.host.lock("lock").await.unwrap(), &path);
    queued(lab, &path, 3).await;

    let pid = daemon.pid() as i32;
    let frozen_for = lab.session * factor;
    run.fault(format!("wazoo serve (pid {pid}) stopped with SIGSTOP for {frozen_for:?}"));
    let stopped = Instant::now();
    // SAFETY: kill(2) on the daemon this scenario started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let lost_at = match within(&run, lab.session + Duration::from_secs(2), "the client is told", lost).await {
        Some(lost) => {
            run.note(format!(
                "the holding client was told {:?} after {:.1?}",
                lost.unwrap(),
                stopped.elapsed()
            ));
            Some(stopped.elapsed())
        }
        None => None,
    };
    let silence = wazoo_client::SILENCE + Duration::from_secs(2);
    if let Some(joined) = within(&run, silence, "the waiting client's call fails", waiting).await {
        let failed = joined.unwrap();
        run.check(failed.is_err(), || "the waiting client took a lock from a frozen daemon".into());
    }
    if let Some(joined) = within(&run, lab.convergence(Duration::ZERO), "b takes the lock", b_waits).await {
        let (mut waiter, outcome) = joined.unwrap();
        let next = outcome.expect("b acquires");
        let b_at = stopped.elapsed();
        run.op();
        run.note(format!("b holds the lock {b_at:.1?} after the stop"));
        run.check(lost_at.is_some_and(|at| at < b_at), || {
            format!("the client was told at {lost_at:?}, after b held the lock at {b_at:?}")
        });
        run.check(next.token > token, || "the token did not rise".into());
        let write = register.write(&run, "b", &next.node, next.token).await;
        run.check(write == Write::Accepted, || format!("the new holder's write was {write:?}"));
        let stale = register.write(&run, "client", &node, token).await;
        run.check(stale == Write::Fenced, || format!("the frozen holder's late write was {stale:?}"));
        sleep_until(stopped + frozen_for).await;
        waiter.release().await.unwrap();
        waiter.close().await;
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    run.fault("wazoo serve resumed with SIGCONT");
    // The daemon serves again: a fresh client takes and lets go a lock through it.
    let served = async {
        loop {
            let options =
                wazoo_client::LockOptions { timeout: Some(Duration::from_secs(5)), ..Default::default() };
            match client.lock(&lab.path("daemon-alive"), options).await {
                Ok(claim) => return claim.release().await,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    };
    if let Some(served) = within(&run, HANG, "the resumed daemon serves", served).await {
        run.check(served.is_ok(), || format!("the resumed daemon's release failed: {served:?}"));
        run.op();
    }
    drop(claim);
    drop(daemon);
    epilogue(&run, lab, &path, &[&b]).await;
    run.report("wazoo serve frozen with claims held and calls waiting")
}
