"""The listings (`Client.list_claims`, `Client.list_sessions`, and the same in `wazoo.aio`)
against a real `wazoo serve` and ZooKeeper: a lock held by one client and waited for by
another, listed under a prefix, holder first, with the nodes' ages; the client sessions with
their names, peer addresses and claims; a malformed prefix refused as a typed error.

    listing.py ADDRESS BASE

Driven by tests/tests/listing.rs; ends with `done`.
"""
import asyncio
import sys
import threading

import wazoo
import wazoo.aio

BOUND = 30


def say(*words):
    print(*words, flush=True)


def shown(claims):
    """`path kind state:node …` per claim."""
    return [" ".join([c.path, c.kind] + [f"{'holds' if x.holds else 'waits'}:{x.node}" for x in c.contenders])
            for c in claims]


def main():
    address, base = sys.argv[1:3]
    path = f"{base}/lock"
    a = wazoo.Client(address, ttl=5, name="listing a")
    b = wazoo.Client(address, ttl=5, name="listing b")
    held = a.lock(path, timeout=10)
    got = []
    waiter = threading.Thread(target=lambda: got.append(b.lock(path, timeout=BOUND)))
    waiter.start()
    while len(a.contenders(path, "lock")) < 2:
        pass  # each read waits for the daemon, until the waiter's node is queued

    claims = a.list_claims(base)
    for line in shown(claims):
        say("claim", line)
    say("held", held.node)
    say("aged", all(x.since_ms > 0 for c in claims for x in c.contenders))
    for s in a.list_sessions():
        if s.name.startswith("listing "):
            claims_of = [f"{c.family}:{c.path}:{c.holds}" for c in s.claims]
            say("session", s.name.replace(" ", "-"), bool(s.peer), s.opened_ms > 0, *claims_of)
    try:
        a.list_claims("no-slash")
        raise AssertionError("a malformed prefix was listed")
    except wazoo.InvalidPath as e:
        say("bad-prefix", e.kind, "\n" in str(e))

    held.release()
    waiter.join(BOUND)
    got[0].release()
    asyncio.run(aio(address, base))
    a.close()
    b.close()
    say("done")


async def aio(address, base):
    async with wazoo.aio.Client(address, ttl=5, name="listing aio") as c:
        holding = await c.lock(f"{base}/aio")
        for line in shown(await c.list_claims(f"{base}/aio")):
            say("aio-claim", line)
        say("aio-held", holding.node)
        names = [s.name.replace(" ", "-") for s in await c.list_sessions() if s.name.startswith("listing ")]
        say("aio-sessions", *sorted(names))
        await holding.release()


if __name__ == "__main__":
    main()
