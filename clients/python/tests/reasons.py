"""Ends a real `wazoo serve`'s client sessions under held claims, and prints the reasons the
claims give, for tests/tests/python_client.rs to check.

    reasons.py ADDRESS BASE TOKEN PID

First another client closes client b's session (`Sessions.Close`) while b holds a semaphore
lease; then the script stops the daemon (SIGTERM to PID) while client a holds a lock. It waits
for nothing else: the daemon is gone at the end.
"""
import os
import signal
import sys
import time

import wazoo
from wazoo._proto import wazoo_pb2 as pb


def say(*words):
    print(*words, flush=True)


def main():
    address, base, token, pid = sys.argv[1:5]
    a = wazoo.Client(address, token=token, ttl=30, name="reasons a")
    b = wazoo.Client(address, token=token, ttl=30, name="reasons b")

    # A session closed under a client: the client and its claims are lost, and the claim says so.
    held = b.semaphore(f"{base}/semaphore", 2, timeout=10)
    say("lease", held.node)
    a.sessions.Close(pb.SessionRef(session=b.session_id), metadata=a.metadata, timeout=10)
    say("session-lost", b.lost.wait(30), held.lost.wait(30), held.reason)
    try:
        b.lock(f"{base}/after", timeout=1)
        say("after-loss", "taken")
    except wazoo.WazooError as e:
        say("after-loss", e.kind)
    try:
        with held:
            pass
        say("left", "unnoticed")
    except wazoo.LockLost as e:
        say("left", e.reason)
    b.close()

    # The daemon stops under a held lock: its Lost stream says SESSION_CLOSED before the
    # connection goes.
    claim = a.lock(f"{base}/lock", timeout=10)
    say("held", claim.node)
    stopped_at = time.monotonic()
    os.kill(int(pid), signal.SIGTERM)
    lost = claim.lost.wait(30)
    say("stopped", lost, claim.reason, f"{time.monotonic() - stopped_at:.1f}")
    say("client", a.lost.wait(30))
    started = time.monotonic()
    try:
        claim.release()
        say("released", "quietly", f"{time.monotonic() - started:.1f}")
    except wazoo.WazooError as e:
        say("released", type(e).__name__, f"{time.monotonic() - started:.1f}")
    a.close()
    say("done")


if __name__ == "__main__":
    main()
