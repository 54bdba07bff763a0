//! The read/write lock recipe against a real ZooKeeper, and against Curator's
//! InterProcessReadWriteLock on the same path.

use std::time::Duration;

use wazoo_runtime::{Host, Mode, RecipeError, RwLockHandle, ZkError};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

async fn handle(host: &Host) -> RwLockHandle {
    host.rwlock("rwlock").await.unwrap()
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
async fn readers_share_and_a_writer_excludes_everyone() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("rw-share");
    let mut readers = Vec::new();
    for _ in 0..3 {
        let mut r = handle(&host).await;
        let held = r.try_acquire(&path, Mode::Read).await.unwrap().expect("readers share the lock");
        let name = held.node.rsplit('/').next().unwrap().to_string();
        assert!(name.starts_with("_c_") && name.contains("-__READ__"), "Curator reader node: {name}");
        readers.push(r);
    }
    let mut writer = handle(&host).await;
    assert!(
        writer.try_acquire(&path, Mode::Write).await.unwrap().is_none(),
        "a writer must wait for readers"
    );
    assert_eq!(children(&checker, &path).await.len(), 3, "the refused writer left no node");
    for mut r in readers {
        r.release().await.unwrap();
    }
    let held = writer.try_acquire(&path, Mode::Write).await.unwrap().expect("free lock taken by a writer");
    assert!(held.node.contains("-__WRIT__"), "Curator writer node: {}", held.node);
    let mut reader = handle(&host).await;
    let mut other_writer = handle(&host).await;
    assert!(reader.try_acquire(&path, Mode::Read).await.unwrap().is_none(), "a writer excludes readers");
    assert!(
        other_writer.try_acquire(&path, Mode::Write).await.unwrap().is_none(),
        "a writer excludes writers"
    );
    writer.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the lock node goes", wait_children(&checker, &path, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_writer_is_not_starved_by_later_readers() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("rw-starve");
    let mut first_reader = handle(&host).await;
    first_reader.acquire(&path, Mode::Read, None).await.unwrap();
    let writer = acquire_in_background(handle(&host).await, &path, Mode::Write);
    wait_children(&checker, &path, 2).await;
    let mut late_reader = handle(&host).await;
    assert!(
        late_reader.try_acquire(&path, Mode::Read).await.unwrap().is_none(),
        "a reader arriving after a queued writer must wait for it"
    );
    first_reader.release().await.unwrap();
    let mut writer = within(LIMIT, "writer acquires after the reader", writer).await.unwrap();
    writer.release().await.unwrap();
    assert!(late_reader.try_acquire(&path, Mode::Read).await.unwrap().is_some());
    late_reader.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_wakes_only_when_its_predecessor_goes() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("rw-herd");
    let mut r1 = handle(&host).await;
    r1.acquire(&path, Mode::Read, None).await.unwrap();
    let mut r2 = handle(&host).await;
    r2.acquire(&path, Mode::Read, None).await.unwrap();
    let armed = host.stats().watches_armed();
    let writer = acquire_in_background(handle(&host).await, &path, Mode::Write);
    wait_children(&checker, &path, 3).await;
    // The writer is waiting on ZooKeeper, not only queued, before anyone releases.
    within(LIMIT, "the writer arms its watch", host.stats().armed_at_least(armed + 1)).await;
    let before = host.stats().watch_wakeups();
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let mut writer = within(LIMIT, "writer acquires", writer).await.unwrap();
    // The writer watched only r2 (its predecessor): r1 going must not have woken it.
    assert_eq!(host.stats().watch_wakeups() - before, 1, "the writer woke for a node it does not follow");
    writer.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn releasing_a_writer_lets_every_reader_behind_it_in() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("rw-readers");
    let mut writer = handle(&host).await;
    writer.acquire(&path, Mode::Write, None).await.unwrap();
    let mut waiting = Vec::new();
    for i in 0..3 {
        waiting.push(acquire_in_background(handle(&host).await, &path, Mode::Read));
        wait_children(&checker, &path, i + 2).await;
    }
    writer.release().await.unwrap();
    // All three readers hold at once: none can release before all have acquired.
    let readers = within(LIMIT, "every reader acquires", async {
        let mut readers = Vec::new();
        for w in waiting {
            readers.push(w.await.unwrap());
        }
        readers
    })
    .await;
    assert_eq!(children(&checker, &path).await.len(), 3);
    for mut r in readers {
        r.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timed_out_reader_leaves_no_node_and_modes_do_not_mix_in_one_handle() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("rw-timeout");
    let mut writer = handle(&host).await;
    writer.acquire(&path, Mode::Write, None).await.unwrap();
    let mut reader = handle(&host).await;
    let outcome = reader.acquire(&path, Mode::Read, Some(Duration::from_millis(300))).await;
    assert!(matches!(outcome, Err(RecipeError::Zk(ZkError::Timeout))), "{outcome:?}");
    assert_eq!(children(&checker, &path).await.len(), 1);
    let mixed = writer.acquire(&path, Mode::Read, None).await;
    assert!(matches!(mixed, Err(RecipeError::Zk(ZkError::InvalidArgument(_)))), "{mixed:?}");
    writer.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the lock node goes", wait_children(&checker, &path, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_read_write_lock_and_wazoo_interoperate_both_ways() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("rw-curator");
    let host = host().await;

    // Curator writer holds: wazoo can neither read nor write.
    let mut curator_writer = Curator::start(&address, &path, "write").await;
    curator_writer.send("acquire -1").await;
    assert_eq!(curator_writer.line().await, "acquired");
    let nodes = children(&checker, &path).await;
    assert!(nodes[0].starts_with("_c_") && nodes[0].contains("-__WRIT__"), "{nodes:?}");
    let mut reader = handle(&host).await;
    assert!(reader.try_acquire(&path, Mode::Read).await.unwrap().is_none());
    let mut writer = handle(&host).await;
    assert!(writer.try_acquire(&path, Mode::Write).await.unwrap().is_none());
    // A wazoo reader waits on Curator's writer and gets in when it releases.
    let waiting = acquire_in_background(reader, &path, Mode::Read);
    wait_children(&checker, &path, 2).await;
    curator_writer.send("release").await;
    assert_eq!(curator_writer.line().await, "released");
    let mut reader = within(LIMIT, "wazoo reader after Curator writer", waiting).await.unwrap();

    // A Curator reader shares with the wazoo reader.
    let mut curator_reader = Curator::start(&address, &path, "read").await;
    curator_reader.send("acquire 2000").await;
    assert_eq!(curator_reader.line().await, "acquired", "Curator and wazoo readers share");
    // A Curator writer now waits behind both readers.
    curator_writer.send("acquire 300").await;
    assert_eq!(curator_writer.line().await, "timeout");
    curator_reader.send("release").await;
    assert_eq!(curator_reader.line().await, "released");
    reader.release().await.unwrap();

    // wazoo writer holds: a Curator reader times out, then gets in after the release.
    writer.acquire(&path, Mode::Write, None).await.unwrap();
    curator_reader.send("acquire 300").await;
    assert_eq!(curator_reader.line().await, "timeout");
    curator_reader.send("acquire -1").await;
    wait_children(&checker, &path, 2).await;
    writer.release().await.unwrap();
    assert_eq!(curator_reader.line().await, "acquired");
    curator_reader.send("release").await;
    assert_eq!(curator_reader.line().await, "released");
    curator_reader.send("quit").await;
    curator_writer.send("quit").await;
}
