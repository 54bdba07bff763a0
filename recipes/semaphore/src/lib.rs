//! Counting semaphore in Curator's `InterProcessSemaphoreV2` wire format: leases are ephemeral
//! sequential `<path>/leases/_c_<uuid>-lease-<seq>`; a waiter holds the mutex `<path>/locks`
//! while it waits, so only one process watches the leases and each release wakes only it.
//!
//! Built with the feature `kazoo` (plugin `semaphore-kazoo`), it speaks kazoo 2.11's `Semaphore`
//! format instead: `<path>` (persistent) holds the max-leases as decimal text, and a semaphore
//! of another count is refused; leases are ephemeral `<path>/<uuid hex>`; the mutex is a kazoo
//! `Lock` at `<path>-__lock__`, whose holder creates its lease once fewer than max-leases
//! children are under `<path>`.

wazoo_guest::recipe_world!("wazoo:recipes/semaphore-recipe@0.1.2");

use std::cell::RefCell;

use exports::wazoo::recipes::semaphore::{Guest, Lease};
use wazoo_guest::{self as zk, Created, Deadline, ZkError};

#[cfg(not(feature = "kazoo"))]
const LOCK_NAME: &str = "lock-";
#[cfg(not(feature = "kazoo"))]
const LEASE_NAME: &str = "lease-";

thread_local! {
    static LEASE: RefCell<Option<Lease>> = const { RefCell::new(None) };
}

struct Semaphore;

impl Guest for Semaphore {
    fn acquire(path: String, max_leases: u32, timeout_ms: Option<u64>) -> Result<Lease, ZkError> {
        if max_leases == 0 {
            return Err(ZkError::InvalidArgument("max-leases must be at least 1".into()));
        }
        if LEASE.with(|l| l.borrow().is_some()) {
            return Err(ZkError::InvalidArgument("this handle already holds a lease".into()));
        }
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        // 1. Take the semaphore's mutex: waiters queue here, each watching its predecessor.
        let mutex = take_mutex(&path, max_leases, deadline)?;
        let outcome = take_lease(&path, max_leases, deadline);
        // 4. Let the next waiter in, whatever happened. An expired session took the lease with
        // it: that fails the acquire, never hands the caller a lease that is gone.
        let released = match zk::retrying(|| zk::delete(&mutex.path, None)) {
            Ok(()) | Err(ZkError::NoNode) => Ok(()),
            Err(e) => Err(e),
        };
        let lease = outcome?;
        released?;
        LEASE.with(|l| *l.borrow_mut() = Some(lease.clone()));
        Ok(lease)
    }

    fn try_acquire(path: String, max_leases: u32) -> Result<Option<Lease>, ZkError> {
        zk::try_now(Self::acquire(path, max_leases, Some(0)))
    }

    fn release() -> Result<(), ZkError> {
        let lease = LEASE
            .with(|l| l.borrow_mut().take())
            .ok_or_else(|| ZkError::InvalidArgument("release: no lease is held".into()))?;
        zk::delete_retrying(&lease.node)
    }
}

/// Step 1 in Curator's layout: the mutex `<path>/locks`.
#[cfg(not(feature = "kazoo"))]
fn take_mutex(path: &str, _max_leases: u32, deadline: Deadline) -> Result<Created, ZkError> {
    let locks = zk::join(path, "locks");
    zk::contend(&locks, LOCK_NAME, &[], &[LOCK_NAME], deadline, zk::exclusive)
}

/// Step 1 in kazoo's layout: the semaphore node holds our max-leases (or is made to), then the
/// mutex, a kazoo `Lock` at `<path>-__lock__`.
#[cfg(feature = "kazoo")]
fn take_mutex(path: &str, max_leases: u32, deadline: Deadline) -> Result<Created, ZkError> {
    use zk::kazoo::{self, LOCK};
    kazoo::ensure_semaphore(path, max_leases)?;
    kazoo::contend(&format!("{path}-{LOCK}"), LOCK, &[], deadline, kazoo::behind(&[LOCK]))
}

/// Steps 2 and 3 in kazoo's layout: as the mutex holder, wait until fewer than `max_leases`
/// children are under `path`, then create our lease there.
#[cfg(feature = "kazoo")]
fn take_lease(path: &str, max_leases: u32, deadline: Deadline) -> Result<Lease, ZkError> {
    let mine = zk::kazoo::take_lease(path, max_leases, deadline)?;
    Ok(Lease { node: mine.path, token: mine.stat.czxid })
}

/// Steps 2 and 3: create our lease, protected (after a lost reply the host claims only a node
/// this session owns), and while there are more leases than allowed, wait for one to go (only
/// the mutex holder watches the leases).
#[cfg(not(feature = "kazoo"))]
fn take_lease(path: &str, max_leases: u32, deadline: Deadline) -> Result<Lease, ZkError> {
    let leases = zk::join(path, "leases");
    // The create and a first count in one round trip; a watch only when we must wait.
    let (mine, mut listed) =
        zk::create_and_list(&leases, LEASE_NAME, &[], zk::CreateMode::EphemeralSequential)?;
    let name = zk::node_name(&mine.path).to_string();
    let waited = (|| loop {
        let (children, watcher) = match listed.take() {
            Some(children) => (children, None),
            None => {
                zk::get_children_watch(&leases).map(|(children, _, watcher)| (children, Some(watcher)))?
            }
        };
        if !children.contains(&name) {
            return Err(ZkError::NoNode);
        }
        if children.len() <= max_leases as usize {
            return Ok(());
        }
        if let Some(watcher) = watcher {
            zk::wait_on(&watcher, deadline)?;
        }
    })();
    match waited {
        Ok(()) => Ok(Lease { node: mine.path, token: mine.stat.czxid }),
        Err(e) => {
            let _ = zk::delete_retrying(&mine.path);
            Err(e)
        }
    }
}

export!(Semaphore);
