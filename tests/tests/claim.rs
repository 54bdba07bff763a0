//! The one claim model (`wazoo_runtime::Claim`), what the CLI and the daemon hold: for every
//! kind that contends (lock, read, write, lease, leadership, membership) a claim carries the node
//! it holds and its fencing token, says when it is lost, lets go on `release`, and leaves no node
//! behind when it is closed or merely dropped. Against a real ZooKeeper.

use std::time::Duration;

use wazoo_runtime::{ClaimKind, Lost, Mode, RecipeError, Want, ZkError};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

/// Every want, each on a path of its own, with the kind its claim must have.
fn wants() -> Vec<(Want, ClaimKind, &'static str)> {
    vec![
        (Want::Lock, ClaimKind::Lock, "lock"),
        (Want::ReadWrite(Mode::Read), ClaimKind::Read, "rwlock"),
        (Want::ReadWrite(Mode::Write), ClaimKind::Write, "rwlock"),
        (Want::Lease { max_leases: 2 }, ClaimKind::Lease, "semaphore"),
        (Want::Leadership { id: "a".into() }, ClaimKind::Leadership, "election"),
        (Want::Membership { name: "m".into(), data: b"d".to_vec() }, ClaimKind::Membership, "group"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_claim_holds_its_node_and_token_and_lets_go() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    for (want, kind, recipe) in wants() {
        let path = unique(recipe);
        let mut contender = host.contender(want.clone(), recipe).await.unwrap();
        let granted = within(LIMIT, "acquire", contender.acquire(&path, None)).await.unwrap();
        let claim = contender.claim(granted);
        assert_eq!(claim.kind(), kind, "{want:?}");
        assert!(
            claim.node().starts_with(&format!("{path}/")),
            "{want:?}: node {} not under {path}",
            claim.node()
        );
        let (_, stat) = checker.get_data(claim.node()).await.unwrap();
        assert_eq!(stat.ephemeral_owner, claim.live().session_id(), "{want:?}: not this session's node");
        if kind == ClaimKind::Membership {
            assert_eq!(claim.token(), 0, "a membership has no fencing token");
        } else {
            assert_eq!(claim.token(), stat.czxid, "{want:?}: the token is the node's czxid");
        }
        assert_eq!(
            claim.version().map(|v| v.name.as_str()),
            Some(recipe),
            "{want:?}: the recipe version that took it"
        );
        let node = claim.node().to_string();
        within(LIMIT, "release", claim.release()).await.unwrap();
        // A lock family's release does not wait for the delete's answer
        // (`znode.delete-unwaited`): another session sees the node go once the server applies it.
        within(LIMIT, &format!("{want:?}: {node} goes after release"), wait_gone(&checker, &node)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_closed_or_dropped_leaves_no_node() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    for (want, _, recipe) in wants() {
        let path = unique(recipe);
        // Closed without letting go: the ledger deletes the node before `close` returns.
        let mut contender = host.contender(want.clone(), recipe).await.unwrap();
        let granted = contender.acquire(&path, None).await.unwrap();
        let claim = contender.claim(granted);
        let node = claim.node().to_string();
        claim.close().await;
        assert!(checker.check_stat(&node).await.unwrap().is_none(), "{want:?}: {node} left after close");
        // Dropped: the ledger deletes it in the background.
        let mut contender = host.contender(want.clone(), recipe).await.unwrap();
        let granted = contender.acquire(&path, None).await.unwrap();
        let claim = contender.claim(granted);
        let node = claim.node().to_string();
        drop(claim);
        within(LIMIT, "the dropped claim's node goes", wait_gone(&checker, &node)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_says_when_it_is_lost_and_why() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    // Deleted by someone else.
    let path = unique("lost-deleted");
    let mut contender = host.contender(Want::Lock, "lock").await.unwrap();
    let granted = contender.acquire(&path, None).await.unwrap();
    let claim = contender.claim(granted);
    let lost = claim.lost();
    checker.delete(claim.node(), None).await.unwrap();
    assert_eq!(within(LIMIT, "loss by deletion", lost).await, Lost::NodeDeleted);
    claim.close().await;
    // Revoked, as Curator revokes: `__REVOKE__` written into the node.
    let path = unique("lost-revoked");
    let mut contender = host.contender(Want::ReadWrite(Mode::Write), "rwlock").await.unwrap();
    let granted = contender.acquire(&path, None).await.unwrap();
    let claim = contender.claim(granted);
    let lost = claim.lost();
    checker.set_data(claim.node(), b"__REVOKE__", None).await.unwrap();
    assert_eq!(within(LIMIT, "loss by revocation", lost).await, Lost::Revoked);
    let node = claim.node().to_string();
    claim.release().await.unwrap();
    // The release does not wait for the delete's answer (`znode.delete-unwaited`): another
    // session sees the node go once the server applies it, so it is watched for.
    within(LIMIT, "the revoked claim's node goes", wait_gone(&checker, &node)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_contender_waits_for_the_first_claim_and_times_out() {
    let host = host().await;
    let checker = client(&zk().address()).await;
    let path = unique("contended");
    let mut first = host.contender(Want::Lock, "lock").await.unwrap();
    let granted = first.acquire(&path, None).await.unwrap();
    let first = first.claim(granted);
    let mut second = host.contender(Want::Lock, "lock").await.unwrap();
    let refused = within(LIMIT, "timed out", second.acquire(&path, Some(Duration::from_millis(300)))).await;
    assert!(matches!(refused, Err(RecipeError::Zk(ZkError::Timeout))), "second holder: {refused:?}");
    second.close().await;
    assert_eq!(children(&checker, &path).await.len(), 1, "the timed-out contender left its node");
    let token = first.token();
    first.release().await.unwrap();
    let mut third = host.contender(Want::Lock, "lock").await.unwrap();
    let granted = within(LIMIT, "free again", third.acquire(&path, None)).await.unwrap();
    assert!(granted.token() > token, "fencing token {} not above {token}", granted.token());
    third.close().await;
}

/// A lock-family handle let go of cleanly serves the next contender of the same recipe (it is
/// kept warm), and never once its recipe file has been replaced: the next claim runs the new
/// version. A claim closed without letting go, or one whose acquire failed, is not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_released_handle_is_reused_only_while_its_version_is_current() {
    let dir = std::env::temp_dir().join(format!("wazoo-claim-warm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let built = std::fs::read(plugins().join("lock.wasm")).unwrap();
    std::fs::write(dir.join("lock.wasm"), &built).unwrap();
    let mut settings = config(&zk().address(), Duration::from_secs(10));
    settings.plugins = dir.clone();
    let host = wazoo_runtime::Host::start(settings).await.unwrap();
    let path = unique("warm");

    let take = |host: wazoo_runtime::Host, path: String| async move {
        let mut contender = host.contender(Want::Lock, "lock").await.unwrap();
        let granted = within(LIMIT, "acquire", contender.acquire(&path, None)).await.unwrap();
        contender.claim(granted)
    };
    let first = take(host.clone(), path.clone()).await;
    let version = first.version().unwrap().clone();
    assert_eq!(host.warm_handles(), 0);
    first.release().await.unwrap();
    assert_eq!(host.warm_handles(), 1, "a cleanly released lock handle is kept warm");
    let second = take(host.clone(), path.clone()).await;
    assert_eq!(host.warm_handles(), 0, "the next contender took the warm handle");
    assert!(std::sync::Arc::ptr_eq(second.version().unwrap(), &version));
    second.release().await.unwrap();
    assert_eq!(host.warm_handles(), 1);

    // A new version of the file: the warm handle of the old one is not used.
    std::fs::write(dir.join("lock.wasm"), components::relabelled(&built, "warm-2")).unwrap();
    let third = take(host.clone(), path.clone()).await;
    assert_ne!(third.version().unwrap().sha256, version.sha256, "the claim runs the replaced version");
    assert_eq!(host.warm_handles(), 0, "the old version's handle was dropped");

    // Closed without letting go: not kept. A failed acquire: not kept either.
    third.close().await;
    assert_eq!(host.warm_handles(), 0);
    let holder = take(host.clone(), path.clone()).await;
    let mut waiting = host.contender(Want::Lock, "lock").await.unwrap();
    let refused = waiting.acquire(&path, Some(Duration::ZERO)).await;
    assert!(matches!(refused, Err(RecipeError::Zk(ZkError::Timeout))), "{refused:?}");
    waiting.close().await;
    holder.release().await.unwrap();
    assert_eq!(host.warm_handles(), 1, "only the holder's handle is kept");
    let _ = std::fs::remove_dir_all(&dir);
}
