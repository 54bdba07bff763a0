"""kazoo's recipe objects in the blocking client, against a real `wazoo serve` and ZooKeeper:
`Lock.acquire(blocking=False)`, contenders and holders, a semaphore's lease holders, `Election`
and `leader()`, `DataWatch` and `ChildrenWatch` on changes made in ZooKeeper directly; `Party`
and the group membership under it (`Client.join`, `Client.group_members`), a registration
kept present (`Client.register`) against changes made in ZooKeeper directly; `config_delete`
and its typed refusals; and `cancel()` of a waiting acquire (`Lock.cancel`,
`Client.cancel_pending`), which leaves no node behind.

    kazoo_like.py ADDRESS BASE TOKEN

Driven by tests/tests/python_client.rs (tests/driven.py): prints what it found, asks the test to
change or read ZooKeeper, and ends with `done`. No sleeps: every wait is on a callback, a watch
or a thread, with a bound.
"""
import queue
import sys
import threading
import time

import wazoo
from driven import ask, children, say

BOUND = 30  # seconds any single wait may take before the script fails


def next_of(q):
    try:
        return q.get(timeout=BOUND)
    except queue.Empty:
        raise AssertionError("no callback within the bound") from None


def until_children(watched, want):
    """Waits, on a ChildrenWatch's calls, until `want(children)`; returns them."""
    while True:
        found = next_of(watched)
        if want(found):
            return found


def until_released(client, path, name=None):
    """Waits, on a ChildrenWatch of `path`, until it has no child (none named `name`): a release
    is sent without waiting for ZooKeeper's answer, so its node goes a moment after it returns."""
    seen = queue.Queue()
    watching = client.ChildrenWatch(path, seen.put)
    until_children(seen, lambda names: name not in names if name else names == [])
    watching.stop()


def main():
    address, base, token = sys.argv[1:4]
    a = wazoo.Client(address, token=token, name="kazoo-like a")
    b = wazoo.Client(address, token=token, name="kazoo-like b")
    c = wazoo.Client(address, token=token, name="kazoo-like c")

    # A non-blocking acquire: True when free, False at once when not, leaving no node behind.
    path = f"{base}/lock"
    la, lb, lc = a.Lock(path), b.Lock(path), c.Lock(path)
    assert la.acquire(blocking=False) is True
    assert la.is_acquired and la.claim is not None
    say("held", la.claim.node, la.token, ask("zk-exists", la.claim.node))
    started = time.monotonic()
    got = lb.acquire(blocking=False)
    took = time.monotonic() - started
    say("try-taken", got, lb.is_acquired, lb.claim, f"{took:.2f}")
    say("nodes-after-try", " ".join(children(path)))
    try:
        lb.acquire(timeout=0.3)
        raise AssertionError("a taken lock was had within a timeout")
    except wazoo.Timeout as e:
        say("blocking-timeout", e.kind)

    # Contenders: a holder and a waiter, in queue order. The waiter is seen queued through a
    # ChildrenWatch on the lock's node, not a sleep.
    queued = queue.Queue()
    watching = a.ChildrenWatch(path, queued.put)
    waiter = threading.Thread(target=lc.acquire, daemon=True)
    waiter.start()
    until_children(queued, lambda names: len(names) == 2)
    watching.stop()
    found = b.contenders(path, "lock")
    say("contenders", *[f"{x.holds}:{x.node}:{x.token}" for x in found])
    say("holders", *[x.node for x in b.holders(path)])
    say("lock-contenders", len(lb.contenders()), lb.contenders()[0].node == la.claim.node)
    first_token = la.token
    assert la.release() is True and la.release() is False
    waiter.join(BOUND)
    say("waiter", not waiter.is_alive(), lc.is_acquired, lc.token > first_token)
    say("holders-after", *[x.node for x in a.holders(path)])
    lc.release()
    until_released(a, path)
    say("released-all", " ".join(children(path)) or "-")

    # `with lock:` waits and releases.
    with a.Lock(path) as held:
        say("with", held.is_acquired, ask("zk-exists", held.claim.node))
        node = held.claim.node
    until_released(a, path, node.rsplit("/", 1)[-1])
    say("with-released", ask("zk-exists", node))

    # A semaphore of two leases: two non-blocking acquires hold, the third does not.
    sem = f"{base}/semaphore"
    s1, s2, s3 = a.Semaphore(sem, 2), b.Semaphore(sem, 2), c.Semaphore(sem, 2)
    say("leases", s1.acquire(blocking=False), s2.acquire(blocking=False), s3.acquire(blocking=False))
    say("lease-holders", len(s1.lease_holders()), len(a.holders(sem, "semaphore", leases=2)))
    s1.release()
    s2.release()

    # Read/write lock sides: two readers hold together; a writer cannot meanwhile.
    rw = f"{base}/rwlock"
    r1, r2, w = a.ReadLock(rw), b.ReadLock(rw), c.WriteLock(rw)
    say("rwlock", r1.acquire(blocking=False), r2.acquire(blocking=False), w.acquire(blocking=False))
    say("rwlock-modes", *sorted(x.mode for x in a.contenders(rw, "rwlock")))
    r1.release()
    r2.release()

    # An election: leader() and Election.contenders(), the leader first; the next candidate's
    # function runs once the leader steps down.
    election = f"{base}/election"
    say("no-leader", a.leader(election))
    alpha = a.elect(election, "alpha")
    ran = threading.Event()
    proceed = threading.Event()

    def lead():
        ran.set()
        proceed.wait(BOUND)
        return "led"

    beta = b.Election(election, "beta")
    results = []
    candidate = threading.Thread(target=lambda: results.append(beta.run(lead)), daemon=True)
    candidates = queue.Queue()
    watching = a.ChildrenWatch(election, candidates.put)
    candidate.start()
    until_children(candidates, lambda names: len(names) == 2)
    watching.stop()
    leader = c.leader(election)
    say("leader", leader.id, leader.node == alpha.node, leader.token == alpha.token)
    say("election-contenders", *beta.contenders())
    say("beta-ran-early", ran.is_set())
    alpha.release()
    say("beta-ran", ran.wait(BOUND), c.leader(election).id)
    proceed.set()
    candidate.join(BOUND)
    say("beta-result", *results, c.leader(election))

    # DataWatch: the first call before the constructor returns, then every change made in
    # ZooKeeper directly, a deletion as (None, None).
    node = f"{base}/data"
    calls = queue.Queue()
    data_watch = a.DataWatch(node, lambda data, stat: calls.put((data, stat)))
    say("data-first", *calls.get_nowait())
    ask("zk-create", node, "one")
    data, stat = next_of(calls)
    say("data-created", data.decode(), stat.version, stat.czxid == stat.mzxid)
    ask("zk-set", node, "two")
    data, stat2 = next_of(calls)
    say("data-changed", data.decode(), stat2.version, stat2.czxid == stat.czxid, stat2.mzxid > stat.mzxid)
    ask("zk-delete", node)
    say("data-deleted", *next_of(calls))
    data_watch.stop()
    say("data-stopped", data_watch.stopped.wait(BOUND), data_watch.error)

    # A function of three arguments gets the event too; returning False stops the watch; the
    # decorator form.
    events = queue.Queue()

    @b.DataWatch(node)
    def once(data, stat, event):
        events.put((data, event))
        return False if data == b"stop" else None

    say("three-first", *events.get_nowait())
    ask("zk-create", node, "stop")
    data, event = next_of(events)
    say("three-event", data.decode(), event.kind)
    say("decorated", callable(once) and once.__name__ == "once")  # the function itself

    # ChildrenWatch: a node that does not exist yet has no children; children added and removed
    # in ZooKeeper are reported; a child's data change is not.
    directory = f"{base}/children"
    seen = queue.Queue()
    children_watch = c.ChildrenWatch(directory, seen.put)
    say("children-first", " ".join(seen.get_nowait()) or "-")
    ask("zk-create", directory, "")
    ask("zk-create", f"{directory}/x", "1")
    say("children-x", " ".join(until_children(seen, lambda n: n != [])))
    ask("zk-create", f"{directory}/y", "1")
    say("children-xy", " ".join(next_of(seen)))
    ask("zk-delete", f"{directory}/x")
    say("children-y", " ".join(next_of(seen)))
    ask("zk-set", f"{directory}/y", "2")
    ask("zk-create", f"{directory}/z", "1")
    say("children-yz", " ".join(next_of(seen)))
    children_watch.stop()
    say("children-stopped", children_watch.stopped.wait(BOUND))

    party(a, b, base)
    registration(a, b, base)
    config_delete(a, b, base)
    cancel(a, b, base)

    for client in (a, b, c):
        client.close()
    say("done")


def party(a, b, base):
    """`Party` as kazoo's (its members' node names and data, `len`, iteration, `leave`), and
    `join` under it: a membership is a claim of token 0, a name taken is `NodeExists`."""
    path = f"{base}/party"
    alpha, beta = a.Party(path, "alpha"), b.Party(path, "beta")
    assert len(alpha) == 0 and list(alpha) == [] and not alpha.participating
    alpha.join()
    alpha.join()  # once only
    beta.join()
    assert alpha.participating and beta.participating
    assert len(alpha) == 2 and sorted(beta) == ["alpha", "beta"], (len(alpha), list(beta))
    names = children(path)
    assert sorted(names) == sorted([alpha.node, beta.node]), names
    assert all(n.endswith("__party__") and len(n) == 32 + 9 for n in names), names
    assert alpha.claim is not None and alpha.claim.token == 0 and alpha.claim.node == alpha.create_path
    # A node not named as a party member's is no member (kazoo's rule).
    member = a.join(path, "not-a-party-member", "x")
    assert member.node == f"{path}/not-a-party-member" and member.token == 0, member
    assert len(beta) == 2
    assert [m.name for m in a.group_members(path)] == sorted(names + ["not-a-party-member"])
    try:
        b.join(path, "not-a-party-member")
        raise AssertionError("a taken member name was joined")
    except wazoo.NodeExists:
        pass
    member.release()
    assert alpha.leave() is True and alpha.leave() is False and not alpha.participating
    assert list(beta) == ["beta"], list(beta)
    assert ask("zk-exists", alpha.create_path) == "no"
    beta.leave()
    assert len(beta) == 0 and a.group_members(f"{base}/no-such-party") == []
    say("party", "ok")


def registration(a, b, base):
    """A registration kept present: its data set back after a change and the node made again
    after a delete, both made in ZooKeeper by the test; another registration of the path
    refused; binary data; a persistent node refused; a TTL registration; close deletes."""
    path = f"{base}/services/one"
    seen = queue.Queue()
    watch = a.DataWatch(path, lambda data, stat: seen.put((data, stat)))
    assert seen.get_nowait() == (None, None)

    def until(want):
        """The node's (data, stat) once `want(data, stat)` (the cache may fold quick changes)."""
        while True:
            data, stat = next_of(seen)
            if want(data, stat):
                return data, stat

    with a.register(path, "here") as registered:
        _, first = until(lambda data, stat: data == b"here")
        assert registered.node == path and not registered.lost.is_set()
        ask("zk-set", path, "changed")
        _, fixed = until(lambda data, stat: data == b"here" and stat.version > first.version)  # set back
        assert fixed.czxid == first.czxid
        ask("zk-delete", path)
        until(lambda data, stat: data == b"here" and stat.czxid > first.czxid)  # made again
        for client in (a, b):
            try:
                client.register(path, "another")
                raise AssertionError("a registered path was registered again")
            except wazoo.NodeExists:
                pass
    until(lambda data, stat: data is None)  # closed: deleted
    watch.stop()
    assert ask("zk-exists", path) == "no" and registered.reason is None

    raw = bytes([0, 255, 1])
    binary = b.register(f"{base}/services/raw", raw)
    raw_seen = queue.Queue()
    node = b.DataWatch(binary.node, lambda data, stat: raw_seen.put(data))
    assert raw_seen.get_nowait() == raw
    binary.close()
    while next_of(raw_seen) is not None:
        pass
    node.stop()

    ask("zk-create", f"{base}/services/persistent", "x")
    try:
        a.register(f"{base}/services/persistent", "mine")
        raise AssertionError("a persistent node was taken for an ephemeral registration")
    except wazoo.InvalidArgument:
        pass
    try:
        a.register(f"{base}/services/short", "x", ttl=0.5)
        raise AssertionError("a TTL under a second was taken")
    except ValueError:
        pass
    timed = a.register(f"{base}/services/ttl", "kept", ttl=3)
    assert ask("zk-exists", timed.node) == "yes"
    timed.close()
    assert ask("zk-exists", timed.node) == "no"
    say("registration", "ok")


def refused(call):
    """The class name and kind of the `WazooError` `call()` raises."""
    try:
        call()
    except wazoo.WazooError as e:
        return type(e).__name__, e.kind
    raise AssertionError("the call was not refused")


def config_delete(a, b, base):
    """`config_delete`: at a version, then whatever its version; NoNode the second time; a
    node with children and an ephemeral (lock) node refused, and kept."""
    values = f"{base}/values"
    path = f"{values}/one"
    assert a.config_set(path, "v1") == 0 and a.config_set(path, "v2") == 1
    say("config-delete-bad-version", *refused(lambda: a.config_delete(path, version=0)), ask("zk-exists", path))
    say("config-delete", a.config_delete(path, version=1), ask("zk-exists", path))
    say("config-delete-again", *refused(lambda: a.config_delete(path)))
    a.config_set(f"{values}/child", "x")
    say("config-delete-not-empty", *refused(lambda: a.config_delete(values)), ask("zk-exists", values))
    held = b.lock(f"{base}/values-lock")
    say("config-delete-ephemeral", *refused(lambda: a.config_delete(held.node)), ask("zk-exists", held.node),
        held.lost.is_set())
    held.release()
    say("config-delete-unversioned", a.config_delete(f"{values}/child"), a.config_delete(values),
        ask("zk-exists", values))


def cancel(a, b, base):
    """`cancel()` of an acquire that waits behind a holder, from another thread: the acquire
    raises `wazoo.Cancelled` and its queued node is gone once it has; with nothing waiting it
    does nothing. The same through `Client.cancel_pending` for `Client.lock` and `Client.elect`."""
    path = f"{base}/cancel"
    holder = a.Lock(path)
    assert holder.acquire()
    waiting = b.Lock(path)
    say("cancel-idle", waiting.cancel())
    outcome = queue.Queue()

    def wait(take):
        try:
            outcome.put(("acquired", take()))
        except wazoo.WazooError as e:
            outcome.put((type(e).__name__, e.code.name if e.code is not None else None))

    queued = queue.Queue()
    watching = a.ChildrenWatch(path, queued.put)
    threading.Thread(target=wait, args=(waiting.acquire,), daemon=True).start()
    until_children(queued, lambda names: len(names) == 2)  # the waiter queued
    cancelled = waiting.cancel()  # from this thread, not the waiting one
    say("cancelled", cancelled, *next_of(outcome), waiting.is_acquired, waiting.claim)
    say("cancel-holder", holder.claim.node.rsplit("/", 1)[-1])
    say("cancel-nodes", *children(path))  # at once: nothing of the waiter is left
    say("cancel-again", waiting.cancel())

    # Client.lock, cancelled through Client.cancel_pending (for another path: nothing).
    threading.Thread(target=wait, args=(lambda: b.lock(path),), daemon=True).start()
    until_children(queued, lambda names: len(names) == 2)
    watching.stop()
    other = b.cancel_pending(f"{base}/not-this-one")
    say("cancel-pending", other, b.cancel_pending(path), *next_of(outcome))
    say("cancel-pending-nodes", *children(path))

    # Client.elect, a candidate waiting behind a leader.
    election = f"{base}/cancel-election"
    leader = a.elect(election, "alpha")
    candidates = queue.Queue()
    watching = a.ChildrenWatch(election, candidates.put)
    threading.Thread(target=wait, args=(lambda: b.elect(election, "beta"),), daemon=True).start()
    until_children(candidates, lambda names: len(names) == 2)
    watching.stop()
    say("cancel-elect", b.cancel_pending(), *next_of(outcome))
    say("cancel-elect-nodes", *children(election))
    say("cancel-elect-leader", leader.node.rsplit("/", 1)[-1])
    leader.release()

    # The lock is free once its holder lets go: the cancelled Lock takes it.
    holder.release()
    say("after-cancel", waiting.acquire(blocking=False), waiting.cancel())
    waiting.release()
    until_released(a, path)
    say("cancel-released", " ".join(children(path)) or "-")


if __name__ == "__main__":
    main()
