"""The asyncio client (`wazoo.aio`) against a real `wazoo serve` and ZooKeeper: the token, locks
with fencing tokens, timeouts and other typed errors (read with grpcio-status), a non-blocking
acquire, contenders and the leader, queues, configuration, counters, a watch, `DataWatch` and
`ChildrenWatch` with coroutine callbacks, a group membership (`join`, `group_members`),
`config_delete`, a waiting acquire cancelled from another task (`Lock.cancel`), and a lock lost
while its block ran.

    aio.py ADDRESS BASE TOKEN

Driven by tests/tests/python_client.rs (tests/driven.py), as kazoo_like.py; ends with `done`.
"""
import asyncio
import sys

import wazoo
import wazoo.aio
from driven import ask, say

BOUND = 30


async def asked(*words):
    """`ask`, off the event loop (the callbacks of the watches go on meanwhile)."""
    return await asyncio.get_running_loop().run_in_executor(None, ask, *words)


async def next_of(q):
    return await asyncio.wait_for(q.get(), BOUND)


async def main():
    address, base, token = sys.argv[1:4]

    try:
        await wazoo.aio.connect(address, name="aio without token")
        raise AssertionError("a session was opened without the token")
    except wazoo.Unauthenticated as e:
        say("unauthenticated", e.kind, e.code.name)

    async with wazoo.aio.Client(address, token=token, ttl=5, name="aio a") as a, \
            wazoo.aio.Client(address, token=token, name="aio b") as b:
        say("sessions", a.session_id != b.session_id, a.ttl)

        # Locks: a holder, a timeout, a non-blocking try, contenders, the next holder's token.
        path = f"{base}/lock"
        async with await a.lock(path, timeout=10) as first:
            say("held", first.node, first.token, await asked("zk-exists", first.node))
            try:
                await b.lock(path, timeout=0.3)
                raise AssertionError("a taken lock was had")
            except wazoo.Timeout as e:
                say("timeout", e.kind, e.code.name)
            lock = b.Lock(path)
            say("try-taken", await lock.acquire(blocking=False), lock.is_acquired)
            say("contenders", *[f"{c.holds}:{c.node}" for c in await b.contenders(path)])
        say("released", await asked("zk-gone", first.node))
        say("try-free", await lock.acquire(blocking=False), lock.is_acquired, lock.claim.token > first.token)
        say("holders", *[c.node for c in await a.holders(path)], lock.claim.node)
        say("release", await lock.release(), await lock.release())

        # Leadership.
        election = f"{base}/election"
        say("no-leader", await a.leader(election))
        async with await a.elect(election, "alpha") as leading:
            leader = await b.leader(election)
            say("leader", leader.id, leader.token == leading.token)

        # Errors with their kinds, read from the status details by grpcio-status.
        config = f"{base}/config"
        say("config-absent", await a.config_get(config))
        v1 = await a.config_set(config, "v1")
        try:
            await b.config_set(config, "v2", version=v1 + 5)
            raise AssertionError("a compare-and-set on a wrong version went through")
        except wazoo.BadVersion as e:
            say("bad-version", e.kind, e.code.name)
        data, version = await b.config_get(config)
        say("config", data.decode(), version == v1)
        say("counter", await a.counter_add(f"{base}/counter", 5), await b.counter_add(f"{base}/counter", -2))
        await a.queue_put(f"{base}/queue", "one")
        say("queue", await a.queue_len(f"{base}/queue"), (await b.queue_take(f"{base}/queue", timeout=5)).decode())
        result = await a.call("lock", "lock.acquire", [f"{base}/called", 5000])
        say("call", "ok" in result)
        try:
            await a.call("no-such-recipe", "lock.acquire", [])
        except wazoo.RecipeUnavailable as e:
            say("call-unavailable", e.kind)

        # A watch of a tree, as an async iterator.
        tree = f"{base}/tree"
        await a.config_set(f"{tree}/a", "one")
        async with a.watch(tree, recursive=True) as events:
            async for event in events:
                if event.kind == "INITIALIZED":
                    break
            await asked("zk-set", f"{tree}/a", "two")
            event = await asyncio.wait_for(events.__anext__(), BOUND)
            say("watch", event.kind, event.path, event.data.decode())

        # DataWatch with a coroutine function, ChildrenWatch with a plain one.
        node = f"{base}/data"
        calls = asyncio.Queue()

        async def on_data(data, stat):
            await calls.put((data, stat))

        data_watch = await a.DataWatch(node, on_data)
        say("data-first", *calls.get_nowait())
        await asked("zk-create", node, "one")
        data, stat = await next_of(calls)
        say("data-created", data.decode(), stat.version)
        await asked("zk-set", node, "two")
        data, stat = await next_of(calls)
        say("data-changed", data.decode(), stat.version)
        await asked("zk-delete", node)
        say("data-deleted", *(await next_of(calls)))
        data_watch.stop()

        directory = f"{base}/children"
        seen = asyncio.Queue()
        children_watch = await b.ChildrenWatch(directory, seen.put_nowait)
        say("children-first", " ".join(seen.get_nowait()) or "-")
        await asked("zk-create", directory, "")
        await asked("zk-create", f"{directory}/x", "1")
        found = await next_of(seen)
        while found == []:
            found = await next_of(seen)
        say("children-x", *found)
        await asked("zk-delete", f"{directory}/x")
        say("children-none", " ".join(await next_of(seen)) or "-")
        children_watch.stop()
        await asyncio.wait_for(children_watch.stopped.wait(), BOUND)

        # A group membership: a claim of token 0; a name taken is NodeExists; released, gone.
        members = f"{base}/members"
        async with await a.join(members, "m1", "one") as member:
            assert member.node == f"{members}/m1" and member.token == 0, member
            assert await b.group_members(members) == [wazoo.Member("m1", b"one")]
            try:
                await b.join(members, "m1")
                raise AssertionError("a taken member name was joined")
            except wazoo.NodeExists:
                pass
        assert await b.group_members(members) == [] and await asked("zk-exists", member.node) == "no"
        say("membership", "ok")

        # config_delete: NoNode the second time.
        value = f"{base}/value"
        await a.config_set(value, "v")
        deleted = await a.config_delete(value, version=0)
        try:
            await a.config_delete(value)
            raise AssertionError("a deleted value was deleted again")
        except wazoo.NoNode:
            pass
        say("config-delete", deleted, await asked("zk-exists", value))

        # Lock.cancel() from another task: the waiting acquire raises Cancelled, no node left.
        path = f"{base}/cancel"
        holder = await a.lock(path)
        waiting = b.Lock(path)
        assert waiting.cancel() is False
        acquiring = asyncio.ensure_future(waiting.acquire())

        async def queued():
            while len(await b.contenders(path, "lock")) < 2:
                pass  # each read yields to the acquire, until its node is queued

        await asyncio.wait_for(queued(), BOUND)
        cancelled = waiting.cancel()
        try:
            await asyncio.wait_for(acquiring, BOUND)
            raise AssertionError("a cancelled acquire took the lock")
        except wazoo.Cancelled as e:
            outcome = (type(e).__name__, e.code.name)
        left = (await asked("zk-children", path)).split(" ")
        say("cancel", cancelled, *outcome, left == [holder.node.rsplit("/", 1)[-1]])
        await holder.release()

        # A lock lost while its block runs: the test deletes its node in ZooKeeper.
        try:
            async with await a.lock(f"{base}/lost", timeout=10) as claim:
                await asked("zk-delete", claim.node)
                await asyncio.wait_for(claim.lost.wait(), BOUND)
                say("lost", claim.reason)
            say("lost-unnoticed")
        except wazoo.LockLost as e:
            say("lock-lost", e.reason)

    say("closed", a.lost.is_set(), b.lost.is_set())
    say("done")


if __name__ == "__main__":
    asyncio.run(main())
