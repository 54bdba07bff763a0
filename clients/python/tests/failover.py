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
  leadership of the election at PATH (candidate "py-waiter") behind a leader the test started;
- `watch`: no claim: it sets PATH to "one" (`config_set`) and follows it through the move with
  a `DataWatch`, a `ChildrenWatch`, and the streams under them, `Client.watch` and
  `Client.config_watch`, read on threads of their own.

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
- `watch`: every call of the DataWatch's function as `data DATA VERSION` (`data None None`
  while the node does not exist) and of the ChildrenWatch's as `children NAME…` (`children -`
  for none), every event of the watch stream as `event KIND DATA VERSION` and every value of
  the config stream as `config DATA VERSION`, the first ones before `watching`; `safe ADDRESS`
  once the client says "safe"; then it reads a line from stdin (the test's go-ahead, once it
  has seen the changes it made) and prints `state DATA_STOPPED DATA_ERROR CHILDREN_STOPPED
  CHILDREN_ERROR DATA_MOVES CHILDREN_MOVES WATCH_MOVES CONFIG_MOVES` (a stream's error, if it
  failed, as `failed CLASS MESSAGE` first) before it stops them all, then `done`.
"""
import logging
import sys
import threading
import time

import wazoo

#: The longest the script waits for the client to say "safe".
LIMIT = 60.0

HELD = ("hold", "rwlock", "semaphore", "elect", "join", "register", "watch")
WAITING = ("wait", "elect-wait")


_SAYING = threading.Lock()


def say(*words):
    # One line at a time: the watchers' functions say theirs on threads of their own.
    with _SAYING:
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


def watch(c, path, said):
    """A DataWatch and a ChildrenWatch of `path` followed through the move; every call said."""
    c.config_set(path, "one")

    def data(value, stat):
        say("data", value.decode() if value is not None else None, stat.version if stat is not None else None)

    def children(names):
        say("children", " ".join(names) or "-")

    data_watch = c.DataWatch(path, data)
    children_watch = c.ChildrenWatch(path, children)
    events = c.watch(path)
    values = c.config_watch(path)
    started = threading.Barrier(3)

    def read(stream, show):
        seen = 0
        try:
            for item in stream:
                say(*show(item))
                seen += 1
                if seen == (1 if stream is values else 2):
                    started.wait(LIMIT)  # the first ones said, before `watching`
        except wazoo.WazooError as e:
            say("failed", type(e).__name__, e)

    threading.Thread(target=read, daemon=True,
                     args=(events, lambda e: ("event", e.kind, e.data.decode() or "-", e.version))).start()
    threading.Thread(target=read, daemon=True,
                     args=(values, lambda v: ("config", v[0].decode(), v[1]) if v else ("config", None))).start()
    started.wait(LIMIT)
    say("watching")
    if not said.safe.wait(LIMIT):
        say("lost", "no-move", c.lost_reason)
        sys.exit(1)
    say("safe", c.address)
    sys.stdin.readline()
    say("state", data_watch.stopped.is_set(), data_watch.error, children_watch.stopped.is_set(),
        children_watch.error, data_watch.moves, children_watch.moves, events.moves, values.moves)
    data_watch.stop()
    children_watch.stop()
    events.cancel()
    values.cancel()


def main():
    mode, addresses, path = sys.argv[1:4]
    said = Said()
    logging.getLogger("wazoo").addHandler(said)
    logging.getLogger("wazoo").setLevel(logging.DEBUG)
    given = addresses if mode in HELD else addresses.split(",")
    c = wazoo.Client(given, ttl=10, name=f"failover.py {mode}")
    say("connected", c.address, c.in_group)
    if mode == "watch":
        watch(c, path, said)
        c.close()
        say("done")
        return
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
