"""Counting semaphore in Curator's `InterProcessSemaphoreV2` wire format, in Python.

A port of `recipes/semaphore` (world `wazoo:recipes/semaphore-recipe@0.1.2`): leases are
ephemeral sequential `<path>/leases/_c_<uuid>-lease-<seq>`; a waiter holds the mutex
`<path>/locks` (`<path>/locks/_c_<uuid>-lock-<seq>`, an exclusive lock) while it waits, so only
one process watches the leases and each release wakes only it. It contends correctly with the
Rust recipe and with Curator on the same path.

Revocation (`__REVOKE__`) is the host's business: it watches the lease node the recipe returns,
as it does for the Rust recipe.
"""

import contextlib

import wit_world
from wit_world.exports.semaphore import Lease

import wazoo_guest as zk

LOCK_NAME = "lock-"
LEASE_NAME = "lease-"

# The lease this handle (component instance) holds.
_lease = None


class Semaphore(wit_world.exports.Semaphore):
    @zk.export
    def acquire(self, path, max_leases, timeout_ms):
        return _acquire(path, max_leases, timeout_ms)

    @zk.export
    def try_acquire(self, path, max_leases):
        return zk.try_now(lambda: _acquire(path, max_leases, 0))

    @zk.export
    def release(self):
        global _lease
        lease, _lease = _lease, None
        if lease is None:
            raise zk.InvalidArgument("release: no lease is held")
        # Unwaited (the host's delete-unwaited): the delete is sent now, this session's next
        # request is applied after it, and the host settles a lost reply. A lease already gone
        # (or gone with an expired session) counts as released.
        zk.release_node(lease.node)


def _acquire(path, max_leases, timeout_ms):
    global _lease
    if max_leases == 0:
        raise zk.InvalidArgument("max-leases must be at least 1")
    if _lease is not None:
        raise zk.InvalidArgument("this handle already holds a lease")
    zk.check_path(path)
    deadline = zk.Deadline(timeout_ms)
    # 1. Take the semaphore's mutex: waiters queue here, each watching its predecessor.
    locks = zk.join(path, "locks")
    mutex = zk.contend(locks, LOCK_NAME, b"", zk.exclusive([LOCK_NAME]), deadline)
    try:
        lease = _take_lease(path, max_leases, deadline)
    except BaseException:
        # 4. Let the next waiter in, whatever happened; the first failure is the one reported.
        zk.quietly(zk.delete_retrying, mutex.path)
        raise
    # 4. As above. If only this fails, the acquire fails (as the Rust recipe's does) and the
    # lease node goes when the handle ends. An expired session took the lease with it: that is
    # a failure here, never a lease handed to the caller.
    try:
        zk.retrying(zk.delete, mutex.path, None)
    except zk.NoNode:
        pass
    _lease = lease
    return lease


def _take_lease(path, max_leases, deadline):
    """2. Create our lease (protected: after a lost reply the host claims only a node this
    session owns); 3. while there are more leases than allowed, wait for one to go (only the
    mutex holder watches the leases). Deletes our lease again on any failure."""
    leases = zk.join(path, "leases")
    # The create and a first count in one round trip; a watch only when we must wait.
    mine, listed = zk.create_and_list(leases, LEASE_NAME, b"", zk.EPHEMERAL_SEQUENTIAL)
    name = zk.node_name(mine.path)
    try:
        children = listed
        while True:
            watcher = None
            if children is None:
                children, _, watcher = zk.get_children_watch(leases)
            with watcher or contextlib.nullcontext():
                if name not in children:
                    raise zk.NoNode()
                if len(children) <= max_leases:
                    break
                if watcher is not None:
                    zk.wait_on(watcher, deadline)  # Timeout past the deadline
            children = None
    except BaseException:
        zk.quietly(zk.delete_retrying, mine.path)
        raise
    return Lease(node=mine.path, token=mine.stat.czxid)
