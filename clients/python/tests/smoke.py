"""Drives a real `wazoo serve` through the `wazoo` package, printing one line per finding for
tests/tests/python_client.rs to check.

    smoke.py ADDRESS BASE TOKEN

Works under the ZooKeeper path BASE. The daemon must ask for TOKEN (`--token-file`). After it
prints `lose NODE` it waits for NODE's claim to be lost: the caller deletes NODE.
"""
import json
import sys

import wazoo


def say(*words):
    print(*words, flush=True)


def expect(error, call, *args, **kwargs):
    """Calls `call`, which must raise `error`; says so with the error's kind and code."""
    try:
        call(*args, **kwargs)
    except error as e:
        return e
    raise AssertionError(f"{call.__name__}{args} did not raise {error.__name__}")


def main():
    address, base, token = sys.argv[1:4]

    # A call without the token.
    e = expect(wazoo.Unauthenticated, wazoo.Client, address, name="smoke without token")
    say("unauthenticated", e.kind, e.code.name)

    a = wazoo.Client(address, token=token, ttl=5, name="smoke a")
    b = wazoo.Client(address, token=token, ttl=5, name="smoke b")
    say("sessions", a.session_id, b.session_id, a.ttl)

    # Exclusion and fencing tokens.
    lock = f"{base}/lock"
    with a.lock(lock, timeout=10) as first:
        say("held", first.token, first.node, first.recipe_version)
        e = expect(wazoo.Timeout, b.lock, lock, timeout=0.5)
        say("timeout", e.kind, e.code.name)
    with b.lock(lock, timeout=10) as second:
        say("second", second.token, second.node)

    # Queue.
    queue = f"{base}/queue"
    a.queue_put(queue, b"one")
    a.queue_put(queue, "two")
    say("queue-len", a.queue_len(queue))
    say("queue-take", a.queue_take(queue, timeout=5).decode(), b.queue_take(queue, timeout=5).decode())
    e = expect(wazoo.Timeout, a.queue_take, queue, timeout=0.3)
    say("queue-empty", e.kind)

    # Configuration, with compare-and-set.
    config = f"{base}/config"
    say("config-absent", a.config_get(config) is None)
    v1 = a.config_set(config, "v1")
    v2 = a.config_set(config, b"v2", version=v1)
    data, version = b.config_get(config)
    say("config", data.decode(), version, version == v2 and v2 > v1)
    e = expect(wazoo.BadVersion, a.config_set, config, "v3", version=v1)
    say("config-bad-version", e.kind, e.code.name)

    # Counter.
    counter = f"{base}/counter"
    say("counter", a.counter_add(counter, 5), b.counter_add(counter, -2), a.counter_get(counter),
        a.counter_get(f"{base}/counter-curator", format="curator-atomic"))

    # Watch: the nodes there, INITIALIZED, then the changes.
    tree = f"{base}/tree"
    a.config_set(f"{tree}/a", "one")
    with a.watch(tree, recursive=True) as events:
        for event in events:
            say("watch", event.kind, event.path or "-", event.data.decode() or "-")
            if event.kind == "INITIALIZED":
                break
        a.config_set(f"{tree}/a", "two")
        event = next(events)
        say("watch", event.kind, event.path, event.data.decode())
        b.config_set(f"{tree}/b", "new")
        event = next(events)
        say("watch", event.kind, event.path, event.data.decode())

    # Any recipe's function.
    result = a.call("lock", "lock.acquire", [f"{base}/called", 5000])
    say("call", json.dumps(result, separators=(",", ":")))
    e = expect(wazoo.InvalidArgument, a.call, "lock", "lock.acquire", [17])
    say("call-invalid", e.kind)
    e = expect(wazoo.RecipeUnavailable, a.call, "no-such-recipe", "lock.acquire", [])
    say("call-unavailable", e.kind)

    # A lock lost while its block runs: the caller deletes its node.
    try:
        with a.lock(f"{base}/lost", timeout=10) as claim:
            say("lose", claim.node)
            say("lost", claim.lost.wait(30), claim.reason)
            expect(wazoo.LockLost, claim.check)
        say("lost-unnoticed")
    except wazoo.LockLost as e:
        say("lock-lost", e.reason)

    # (A session closed under a client, and a daemon that stops: tests/reasons.py.)
    b.close()

    a.close()
    say("closed", a.lost.is_set())
    say("done")


if __name__ == "__main__":
    main()
