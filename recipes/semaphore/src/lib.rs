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
#[cfg(not(feature = "kazoo"))]
wazoo_guest::protocol!("curator-semaphore-v2/1");
#[cfg(feature = "kazoo")]
wazoo_guest::protocol!("kazoo-semaphore/1");

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
        #[cfg(not(feature = "kazoo"))]
        if timeout_ms == Some(0) {
            // A try: "taken" only when every lease is held, not when another arrived first.
            return match try_lease(&path, max_leases)? {
                Some(lease) => {
                    LEASE.with(|l| *l.borrow_mut() = Some(lease.clone()));
                    Ok(lease)
                }
                None => Err(ZkError::Timeout),
            };
        }
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
        zk::release_node(&lease.node)
    }
}

/// Step 1 in Curator's layout: the mutex `<path>/locks`.
#[cfg(not(feature = "kazoo"))]
fn take_mutex(path: &str, _max_leases: u32, deadline: Deadline) -> Result<Created, ZkError> {
    let locks = zk::join(path, "locks");
    zk::contend(&locks, LOCK_NAME, &[], &zk::exclusive(&[LOCK_NAME]), deadline)
}

/// The longest a try waits for the mutex while the leases are not all held: the mutex is
/// then held only for a few requests (a try's, or a waiter's between its create and its
/// count), so a longer wait means a holder of the mutex that stopped between two steps.
#[cfg(not(feature = "kazoo"))]
const TRY_MUTEX_MS: u64 = 5_000;

/// A try (`acquire` with no time to wait, `try-acquire`): a lease if one is free, none only when
/// every lease is held.
///
/// The leases are counted under the mutex, as a waiter counts them: the mutex holder's lease is
/// the only one that may be pending, every other lease node is held. Taking the mutex at once or
/// not at all would refuse a try whenever another contender arrived a moment before, with leases
/// free. So the try queues for the mutex and waits for it, watching the semaphore's whole tree
/// meanwhile (one persistent watch: the mutex queue and the leases), and gives up only when
/// there are more lease nodes than leases: then `max_leases` are held, and the mutex holder is a
/// waiter that waits for one of them.
#[cfg(not(feature = "kazoo"))]
fn try_lease(path: &str, max_leases: u32) -> Result<Option<Lease>, ZkError> {
    let locks = zk::join(path, "locks");
    let leases = zk::join(path, "leases");
    let (mutex, mut listed) =
        zk::create_and_list(&locks, LOCK_NAME, &[], zk::CreateMode::EphemeralSequential)?;
    let name = zk::node_name(&mutex.path).to_string();
    let deadline = Deadline::after_ms(Some(TRY_MUTEX_MS));
    let mut watcher: Option<zk::PersistentWatcher> = None;
    let queued = (|| loop {
        let children = match listed.take() {
            Some(children) => children,
            None => zk::get_children(&locks)?.0,
        };
        let sorted = zk::sorted(children, &[LOCK_NAME]);
        match sorted.iter().position(|c| *c == name) {
            None => return Err(ZkError::NoNode),
            Some(0) => return Ok(true),
            Some(_) => {}
        }
        let Some(watching) = watcher.as_ref() else {
            // Armed once, then both listings made again: nothing between them is missed.
            watcher = Some(zk::add_watch(path, true)?);
            continue;
        };
        let counted = match zk::get_children(&leases) {
            Ok((children, _)) => children.len(),
            Err(ZkError::NoNode) => 0,
            Err(e) => return Err(e),
        };
        if counted > max_leases as usize {
            return Ok(false);
        }
        if deadline.expired() {
            return Ok(false);
        }
        match watching.next(deadline.remaining_ms()) {
            Ok(_) | Err(ZkError::Timeout) => {}
            Err(e) => return Err(e),
        }
    })();
    drop(watcher);
    let outcome = match queued {
        Ok(true) => {
            take_lease(path, max_leases, Deadline::after_ms(Some(0))).map(Some).or_else(|e| match e {
                ZkError::Timeout => Ok(None),
                e => Err(e),
            })
        }
        Ok(false) => Ok(None),
        Err(e) => Err(e),
    };
    let released = match zk::retrying(|| zk::delete(&mutex.path, None)) {
        Ok(()) | Err(ZkError::NoNode) => Ok(()),
        Err(e) => Err(e),
    };
    let lease = outcome?;
    released?;
    Ok(lease)
}

/// Step 1 in kazoo's layout: the semaphore node holds our max-leases (or is made to), then the
/// mutex, a kazoo `Lock` at `<path>-__lock__`.
#[cfg(feature = "kazoo")]
fn take_mutex(path: &str, max_leases: u32, deadline: Deadline) -> Result<Created, ZkError> {
    use zk::kazoo::{self, LOCK};
    kazoo::ensure_semaphore(path, max_leases)?;
    kazoo::contend(&format!("{path}-{LOCK}"), LOCK, &[], &kazoo::behind(&[LOCK]), deadline)
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
