"""Holds a claim, or waits for one, through a daemon group while the test kills (SIGKILL) the
member the client is on, and prints what the client sees, for tests/tests/python_failover.rs.

    failover.py MODE ADDRESSES PATH

MODE is what the client holds in a `with` block, told by `held` once it holds it:

- `hold`: the lock at PATH (`Client.lock`); `rwlock`: its write side (`Client.rwlock`);
  `semaphore`: one lease of a semaphore of one (`Client.semaphore`); `elect`: the leadership of
  the election at PATH (`Client.elect`, candidate "py-leader"); `join`: membership of the group
  at PATH as "py-member" (`Client.join`, data "here"); `register`: the registration of PATH
  holding "mine" (`Client.register`; its token printed is 0, as a membership's);
- `wait`: the lock at PATH, queued behind a holder the test started; `elect-wait`: the
  leadership of the election at PATH (candidate "py-waiter") behind a leader the test started.

ADDRESSES is "A,B": the held modes give the client that string, the waiting ones the list
["A", "B"]. Lines:

- `connected ADDRESS IN_GROUP`: the member the session was opened on.
- `log LEVEL MESSAGE`: every record of the "wazoo" logger ("jeopardy: …", "safe: …").
- held modes: `held NODE TOKEN` once the claim is held; then, once the client says "safe" (and,
  for a registration, once it was taken up by the new member),
  `safe ADDRESS NODE TOKEN LOST` (the member the session is on now, the claim's node, token and
  lost flag); then it reads a line from stdin (the test's go-ahead) and prints
  `still-held LOST REASON` before it leaves the `with` block.
- waiting modes: `safe ADDRESS MOVES` once the client says "safe" (from a thread: the main one
  is waiting for the claim), then `held NODE TOKEN LOST MOVES` once the claim is held.
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

HELD = ("hold", "rwlock", "semaphore", "elect", "join", "register")
WAITING = ("wait", "elect-wait")


def say(*words):
    print(*words, flush=True)


class Said(logging.Handler):
    """Prints the client's log records, and tells when it said "safe" (and, for a registration,
    when it was taken up by another member)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.safe = threading.Event()
        self.taken_up = threading.Event()

    def emit(self, record):
        message = record.getMessage()
        say("log", record.levelname, message)
        if message.startswith("safe:"):
            self.safe.set()
        if message.startswith("the registration of") and "was taken up" in message:
            self.taken_up.set()


def take(c, mode, path):
    """The claim of `mode` at `path`, as a context manager with `node`, `token`, `lost`,
    `reason` and `why`."""
    if mode in ("hold", "wait"):
        return c.lock(path)
    if mode == "rwlock":
        return c.rwlock(path, "write")
    if mode == "semaphore":
        return c.semaphore(path, 1)
    if mode == "elect":
        return c.elect(path, "py-leader")
    if mode == "elect-wait":
        return c.elect(path, "py-waiter")
    if mode == "join":
        return c.join(path, "py-member", b"here")
    if mode == "register":
        registration = c.register(path, b"mine")
        registration.token = 0
        return registration
    raise SystemExit(f"unknown mode {mode!r}: one of {', '.join(HELD + WAITING)}")


def main():
    mode, addresses, path = sys.argv[1:4]
    said = Said()
    logging.getLogger("wazoo").addHandler(said)
    logging.getLogger("wazoo").setLevel(logging.DEBUG)
    given = addresses if mode in HELD else addresses.split(",")
    c = wazoo.Client(given, ttl=10, name=f"failover.py {mode}")
    say("connected", c.address, c.in_group)
    if mode in WAITING:
        def tell():
            if said.safe.wait(LIMIT):
                say("safe", c.address, c.moves)
        threading.Thread(target=tell, daemon=True).start()
    try:
        with take(c, mode, path) as claim:
            if mode in HELD:
                say("held", claim.node, claim.token)
                moved = said.taken_up if mode == "register" else said.safe
                deadline = time.monotonic() + LIMIT
                while not moved.is_set() and not claim.lost.is_set() and time.monotonic() < deadline:
                    moved.wait(0.05)
                if claim.lost.is_set() or not moved.is_set():
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
