"""Holds a lock, or waits for one, through a daemon group while the test kills (SIGKILL) the
member the client is on, and prints what the client sees, for tests/tests/python_failover.rs.

    failover.py hold ADDRESSES PATH
    failover.py wait ADDRESSES PATH

ADDRESSES is "A,B": `hold` gives the client that string, `wait` the list ["A", "B"]. Lines:

- `connected ADDRESS IN_GROUP`: the member the session was opened on.
- `log LEVEL MESSAGE`: every record of the "wazoo" logger ("jeopardy: …", "safe: …").
- hold: `held NODE TOKEN` once the lock is held; then, once the client says "safe",
  `safe ADDRESS NODE TOKEN LOST` (the member the session is on now, the claim's node, token and
  lost flag); then it reads a line from stdin (the test's go-ahead) and prints
  `still-held LOST REASON` before it leaves the `with` block.
- wait: `safe ADDRESS MOVES` once the client says "safe" (from a thread: the main one is
  waiting for the lock), then `held NODE TOKEN LOST MOVES` once the lock is held.
- `left quietly` (the block was left without `LockLost`) or `left lost REASON WHY`; then
  `done`. A claim lost before "safe" prints `lost REASON WHY` and exits 1.
"""
import logging
import sys
import threading
import time

import wazoo

#: The longest the script waits for the client to say "safe".
LIMIT = 60.0


def say(*words):
    print(*words, flush=True)


class Said(logging.Handler):
    """Prints the client's log records, and tells when it said "safe"."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.safe = threading.Event()

    def emit(self, record):
        message = record.getMessage()
        say("log", record.levelname, message)
        if message.startswith("safe:"):
            self.safe.set()


def main():
    mode, addresses, path = sys.argv[1:4]
    said = Said()
    logging.getLogger("wazoo").addHandler(said)
    logging.getLogger("wazoo").setLevel(logging.DEBUG)
    given = addresses if mode == "hold" else addresses.split(",")
    c = wazoo.Client(given, ttl=10, name=f"failover.py {mode}")
    say("connected", c.address, c.in_group)
    if mode == "wait":
        def tell():
            if said.safe.wait(LIMIT):
                say("safe", c.address, c.moves)
        threading.Thread(target=tell, daemon=True).start()
    try:
        with c.lock(path) as claim:
            if mode == "hold":
                say("held", claim.node, claim.token)
                deadline = time.monotonic() + LIMIT
                while not said.safe.is_set() and not claim.lost.is_set() and time.monotonic() < deadline:
                    said.safe.wait(0.05)
                if claim.lost.is_set() or not said.safe.is_set():
                    say("lost", claim.reason, claim.why)
                    sys.exit(1)
                say("safe", c.address, claim.node, claim.token, claim.lost.is_set())
                sys.stdin.readline()
                say("still-held", claim.lost.is_set(), claim.reason)
            else:
                say("held", claim.node, claim.token, claim.lost.is_set(), c.moves)
        say("left", "quietly")
    except wazoo.LockLost as e:
        say("left", "lost", e.reason, e.details)
    c.close()
    say("done")


if __name__ == "__main__":
    main()
