"""Freezes a real `wazoo serve` (SIGSTOP) under a client that holds a lock in a `with` block and
follows a watch, and prints how long each thing took to give up, for
tests/tests/python_client.rs to check against the client's bounds.

    frozen.py ADDRESS BASE TOKEN PID

PID is the daemon's process id: the script stops it and lets it go on (SIGCONT) itself, at the
latest after RESCUE seconds, so that a client that waits on it forever shows how long it waited
instead of hanging the test. Each line is `WHAT OUTCOME… SECONDS`, the seconds counted from the
freeze (or from the call's start, for the calls made while the daemon is frozen).
"""
import os
import signal
import sys
import threading
import time

import wazoo

#: The client's call_timeout here.
CALL_TIMEOUT = 3.0
#: The latest the daemon is let go on, whatever the client does.
RESCUE = 50.0


def say(*words):
    print(*words, flush=True)


def outcome(call, limit):
    """Runs `call` on a thread for at most `limit` seconds: ("returned"|exception class name,
    its code or "-", seconds), or ("hung", "-", limit)."""
    result = []
    started = time.monotonic()

    def run():
        try:
            call()
            result.append(("returned", "-"))
        except wazoo.WazooError as e:
            result.append((type(e).__name__, e.code.name if e.code is not None else "-"))
        result[-1] += (f"{time.monotonic() - started:.1f}",)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    return result[0] if result else ("hung", "-", f"{limit:.1f}")


def main():
    address, base, token, pid = sys.argv[1:5]
    pid = int(pid)
    # A TTL long enough that its cut-off (2/3 of it) is not what notices the freeze: the pings are.
    c = wazoo.Client(address, token=token, ttl=60, name="frozen.py", call_timeout=CALL_TIMEOUT)
    c.config_set(f"{base}/tree/a", "one")
    events = c.watch(f"{base}/tree", recursive=True)
    for event in events:
        if event.kind == "INITIALIZED":
            break
    watched = []

    def follow():
        try:
            for _ in events:
                pass
            watched.append(("ended", "-"))
        except wazoo.WazooError as e:
            watched.append((type(e).__name__, e.code.name if e.code is not None else "-"))
        watched[-1] += (f"{time.monotonic() - frozen_at:.1f}",)

    rescue = threading.Timer(RESCUE, os.kill, (pid, signal.SIGCONT))
    rescue.daemon = True
    try:
        with c.lock(f"{base}/lock", timeout=10) as claim:
            say("held", claim.token, claim.node)
            frozen_at = time.monotonic()
            os.kill(pid, signal.SIGSTOP)
            rescue.start()
            watcher = threading.Thread(target=follow, daemon=True)
            watcher.start()
            lost = claim.lost.wait(RESCUE + 5)
            say("lost", lost, claim.reason, f"{time.monotonic() - frozen_at:.1f}")
        say("left", "unnoticed", f"{time.monotonic() - frozen_at:.1f}")
    except wazoo.LockLost as e:
        say("left", e.reason, f"{time.monotonic() - frozen_at:.1f}")
    except wazoo.WazooError as e:
        say("left", type(e).__name__, f"{time.monotonic() - frozen_at:.1f}")
    watcher.join(max(frozen_at + RESCUE + 5 - time.monotonic(), 0))
    say("watch", *(watched[0] if watched else ("hung", "-", f"{RESCUE:.1f}")))
    say("session", c.lost.is_set())

    # Calls made while the daemon is still frozen: one that waits by design (a queue take with no
    # timeout: it waits for a connection first, the attempt bounded by call_timeout), one that
    # does not, and a new stream.
    frozen = rescue.is_alive()
    say("still-frozen", frozen)
    say("waiting", *outcome(lambda: c.queue_take(f"{base}/queue"), 30))
    say("unary", *outcome(lambda: c.config_get(f"{base}/tree/a"), 30))
    say("new-watch", *outcome(lambda: next(c.watch(f"{base}/tree")), 30))

    os.kill(pid, signal.SIGCONT)
    rescue.cancel()
    started = time.monotonic()
    c.close()
    say("closed", f"{time.monotonic() - started:.1f}")

    # The daemon goes on: the frozen client's session ended when it saw the connection go, and
    # the lock is free for the next.
    with wazoo.Client(address, token=token, name="frozen.py after") as d:
        with d.lock(f"{base}/lock", timeout=30) as again:
            say("again", again.token > claim.token)
    say("done")


if __name__ == "__main__":
    main()
