"""kazoo's recipe objects over a `wazoo.Client`: `Lock` (also a read/write lock's side and a
semaphore lease) with `acquire(blocking=False)`, `Election`, `Party`, and the watch callbacks
`DataWatch` and `ChildrenWatch`. Make them with the client's methods of the same names
(`client.Lock(path)`, `client.DataWatch(path, func)` …)."""
from __future__ import annotations

import inspect
import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional

from ._proto import wazoo_pb2 as pb
from .client import Claim, Contender, NodeStat, Stream, WatchEvent, _Pending
from .errors import Timeout, WazooError

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

log = logging.getLogger("wazoo")

#: `Client.contenders`' kind of each family.
_KINDS = {pb.LOCK: "lock", pb.READ_LOCK: "rwlock", pb.WRITE_LOCK: "rwlock", pb.SEMAPHORE: "semaphore"}


class Lock:
    """A lock (or a read/write lock's side, or a semaphore lease) as kazoo's `Lock`.

    `acquire(blocking=True, timeout=None)` takes it and returns True; with `blocking=False` it
    returns False at once when the lock is not free (the daemon tries once: `timeout=0`). With a
    `timeout`, a lock not had in time raises `wazoo.Timeout` (kazoo's `LockTimeout`).
    `release()` lets it go (False if it was not held). As a context manager, `with lock:` waits
    for it, and leaving the block releases it (raising `wazoo.LockLost` if it was lost
    meanwhile, as a `Claim`'s block does).

    `claim` is the `Claim` while it is held (its `token`, `node`, `lost` …); `is_acquired` says
    whether it is held and not lost. `contenders()` is who holds and who waits.

    `cancel()`, from another thread, cancels an `acquire` that waits, as kazoo's: the waiting
    `acquire` raises `wazoo.Cancelled` (kazoo's `CancelledError`) and leaves no node in
    ZooKeeper (its queued node is deleted; a claim the daemon granted as the cancel went out is
    released). With nothing waiting, `cancel()` does nothing.

    One `Lock` holds at most one claim: `acquire` while it holds one raises `RuntimeError`.
    As kazoo's, the lock node carries an `identifier`: the daemon writes it there with the
    client session's name and address (`identifier (session NAME from ADDRESS)`), which is what
    `contenders()` lists."""

    def __init__(self, client: "Client", path: str, family: int, leases: int = 0, recipe: str = "",
                 identifier: str = ""):
        self.client = client
        self.path = path
        self.identifier = identifier
        self._family = family
        self._leases = leases
        self._recipe = recipe
        self._mutex = threading.Lock()
        #: The claim while it is held, else None.
        self.claim: Optional[Claim] = None
        # The acquire waiting now, if any.
        self._pending: Optional[_Pending] = None

    def __repr__(self) -> str:
        return f"Lock(path={self.path!r}, claim={self.claim!r})"

    @property
    def is_acquired(self) -> bool:
        """Whether it is held now (taken, not released, not lost)."""
        claim = self.claim
        return claim is not None and not claim.lost.is_set()

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the claim held, or None."""
        claim = self.claim
        return claim.token if claim is not None else None

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes it: True once held. `blocking=False`: False at once if it is not free.
        Otherwise it waits as long as it takes, or `timeout` seconds (then `wazoo.Timeout`), or
        until `cancel()` (then `wazoo.Cancelled`)."""
        with self._mutex:
            if self.claim is not None:
                raise RuntimeError(f"the lock at {self.path} is held by this object already: release it first")
            wait = timeout if blocking else 0.0
            self._pending = _Pending(self.path)
            try:
                claim = self.client._acquire(self.path, self._family, wait, self._recipe, self._leases,
                                             self._pending, holder_id=self.identifier)
            except Timeout:
                if blocking:
                    raise
                return False
            finally:
                self._pending = None
            self.claim = claim
            return True

    def cancel(self) -> bool:
        """Cancels the `acquire` waiting now, from another thread (kazoo's `Lock.cancel()`): it
        raises `wazoo.Cancelled`, leaving no node behind. True if one was waiting; False, and
        nothing done, otherwise."""
        pending = self._pending
        return pending is not None and pending.cancel()

    def release(self) -> bool:
        """Lets it go: True if it was held (lost or not), False if there was nothing to let go."""
        with self._mutex:
            claim, self.claim = self.claim, None
        if claim is None:
            return False
        claim.release()
        return True

    def contenders(self) -> List[Contender]:
        """Who holds it and who waits, holders first (`Client.contenders`)."""
        leases = self._leases if self._family == pb.SEMAPHORE else None
        return self.client.contenders(self.path, _KINDS[self._family], leases)

    def lease_holders(self) -> List[Contender]:
        """Those of `contenders()` that hold (kazoo's `Semaphore.lease_holders`)."""
        return [c for c in self.contenders() if c.holds]

    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        with self._mutex:
            claim, self.claim = self.claim, None
        if claim is None:
            return False
        return claim.__exit__(exc_type, exc, tb)


class Election:
    """The election at a path as kazoo's `Election`, this client a candidate named `identifier`.

    `run(func, *args, **kwargs)` waits until this candidate leads, calls `func`, and steps down
    when it returns (or raises); it returns what `func` returned. `contenders()` is the
    candidates' ids, the leader first. `leader()` is the leader now (a `Contender`), or None.
    `cancel()`, from another thread, ends a `run` that waits to lead (kazoo's `cancel()`): it
    raises `wazoo.Cancelled`, and the candidate's node is gone; while `func` runs, or with no
    `run` waiting, it does nothing."""

    def __init__(self, client: "Client", path: str, identifier: str = "", recipe: str = ""):
        self.client = client
        self.path = path
        self.identifier = identifier
        self._recipe = recipe
        #: The leadership while `run` holds it.
        self.claim: Optional[Claim] = None
        self._pending: Optional[_Pending] = None

    def run(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._pending = _Pending(self.path)
        try:
            claim = self.client._elect(self.path, self.identifier, None, self._recipe, self._pending)
        finally:
            self._pending = None
        self.claim = claim
        try:
            with claim:
                return func(*args, **kwargs)
        finally:
            self.claim = None

    def cancel(self) -> bool:
        """Cancels a `run` waiting to lead: True if one was waiting; False, and nothing done,
        otherwise."""
        pending = self._pending
        return pending is not None and pending.cancel()

    def contenders(self) -> List[str]:
        return [c.id for c in self.client.contenders(self.path, "election")]

    def leader(self) -> Optional[Contender]:
        return self.client.leader(self.path)


class Party:
    """The party at a path as kazoo's `Party`, this client a member identified by `identifier`.

    `join()` makes this member's node, `<path>/<uuid hex>__party__` holding the identifier
    (kazoo's name and data, so kazoo's `Party` objects on the same path count this member, and
    this one theirs); joining twice does nothing. `leave()` deletes it: True if it was there.
    `len(party)` is the number of members, and iterating over the party gives their identifiers
    (one `GroupMembers` call for both; members whose node is not named as a party member's are
    left out, as kazoo's do). `participating` says whether this member is in.

    What differs from kazoo's: the member is a `Claim` of the client's session (`claim`, made by
    `Client.join`), so its loss is told (`claim.lost`, `claim.reason`; `participating` turns
    False) rather than mended: after a loss, `join()` joins again. Through a daemon group the
    membership is taken up by the member that takes the session up (the same node), as a lock
    is. The path's parents are made by the daemon's group recipe; `len()` and iteration of a path
    that does not exist are empty. A `wazoo.Client` has no `ShallowParty`."""

    #: What kazoo's `Party` puts after the uuid in a member's node name, and looks for.
    _NODE_NAME = "__party__"

    def __init__(self, client: "Client", path: str, identifier: Optional[str] = None, recipe: str = ""):
        self.client = client
        self.path = path
        self.data = str(identifier or "").encode("utf-8")
        self.node = uuid.uuid4().hex + self._NODE_NAME
        self.create_path = f"{path}/{self.node}"
        self._recipe = recipe
        self._mutex = threading.Lock()
        #: The membership while this member is in, else None.
        self.claim: Optional[Claim] = None

    def __repr__(self) -> str:
        return f"Party(path={self.path!r}, claim={self.claim!r})"

    @property
    def participating(self) -> bool:
        """Whether this member is in: joined, not left, not lost."""
        claim = self.claim
        return claim is not None and not claim.lost.is_set()

    def join(self) -> None:
        """Joins the party (nothing if this member is in already)."""
        with self._mutex:
            if self.participating:
                return
            old, self.claim = self.claim, None
            if old is not None:
                old.release()
            self.claim = self.client.join(self.path, self.node, self.data, recipe=self._recipe)

    def leave(self) -> bool:
        """Leaves the party: True if this member was in (its node deleted), False otherwise."""
        with self._mutex:
            claim, self.claim = self.claim, None
        if claim is None:
            return False
        was_in = not claim.lost.is_set()
        claim.release()
        return was_in

    def _members(self) -> List[Any]:
        return [m for m in self.client.group_members(self.path, recipe=self._recipe) if self._NODE_NAME in m.name]

    def __iter__(self) -> Iterator[str]:
        """The members' identifiers."""
        for member in self._members():
            yield member.data.decode("utf-8")

    def __len__(self) -> int:
        """The number of members."""
        return len(self._members())


def _arity(func: Callable[..., Any]) -> int:
    """How many positional arguments `func` takes (kazoo passes the event to a DataWatch
    function that takes three)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return 2
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 3
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


class _Watcher:
    """A stream whose updates are handed to a function, on a thread of its own, until the
    function returns False, `stop()` is called, or the stream fails (`error` then says why).
    The first call is made before the constructor returns, as kazoo's watchers do."""

    def __init__(self, client: "Client", path: str, func: Optional[Callable[..., Any]], recipe: str):
        self.client = client
        self.path = path
        self._recipe = recipe
        self._func: Optional[Callable[..., Any]] = None
        #: Set once the watcher calls its function no more.
        self.stopped = threading.Event()
        #: Why the stream failed, if it did (`wazoo.Unavailable` for a daemon gone or silent).
        self.error: Optional[WazooError] = None
        self._stream: Optional[Stream[Any]] = None
        self._first = threading.Event()
        if func is not None:
            self(func)

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Starts the watcher with `func` (so that it can decorate the function, as kazoo's):
        returns `func`."""
        if self._func is not None:
            raise RuntimeError("this watcher has its function already")
        self._func = func
        self._stream = self._open()
        threading.Thread(target=self._run, name=f"wazoo-{type(self).__name__}-{self.path}", daemon=True).start()
        self._first.wait()
        if self.error is not None and self.stopped.is_set():
            raise self.error
        return func

    def _open(self) -> Stream[Any]:
        raise NotImplementedError

    def _updates(self, stream: Stream[Any]) -> Any:
        """The calls to make, as argument tuples, the first one first."""
        raise NotImplementedError

    def _run(self) -> None:
        assert self._stream is not None and self._func is not None
        try:
            for args in self._updates(self._stream):
                if self.stopped.is_set():
                    break
                try:
                    go_on = self._func(*args)
                except Exception:
                    log.exception("the function of %r raised", self)
                    go_on = None
                self._first.set()
                if go_on is False:
                    break
        except WazooError as e:
            self.error = e
            if not self.stopped.is_set():
                log.warning("%r ended: %s", self, e)
        finally:
            self.stopped.set()
            self._first.set()
            self._stream.cancel()

    def stop(self) -> None:
        """Calls the function no more and ends the stream."""
        self.stopped.set()
        if self._stream is not None:
            self._stream.cancel()

    cancel = stop

    @property
    def moves(self) -> int:
        """How many times the watch was opened again on another member of a daemon group."""
        return self._stream.moves if self._stream is not None else 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


class DataWatch(_Watcher):
    """Calls `func(data, stat)` with the node at `path` now and after every change of it, as
    kazoo's `DataWatch`: `data` is its bytes and `stat` a `NodeStat` (version, czxid, mzxid),
    both None while the node does not exist. A function of three arguments also gets the
    `WatchEvent` (None for the first call). Returning False stops the watch; so does `stop()`.

    The first call is made before the constructor returns; from then on every change is reported
    (the daemon's cache of the node, `Client.watch`). Calls come one at a time, on one thread of
    the watcher's own. Use as `client.DataWatch(path, func)` or as a decorator,
    `@client.DataWatch(path)`.

    Through a daemon group (a client given several addresses), the watch carries on when its
    daemon dies, goes silent or is left: it is opened again on the member that takes the
    client session up, and the function is called only if the node changed meanwhile (its data
    or stat differ from the last call's), once; nothing the old daemon reported is reported
    twice. Otherwise, when the connection to the daemon breaks (or goes silent for
    `wazoo.SILENCE`), or the session is lost or closing, the function is called no more:
    `stopped` is set and `error` says why. Start a new one."""

    def _open(self) -> Stream[Any]:
        return self.client.watch(self.path, recipe=self._recipe)

    def _call_args(self, data: Any, stat: Any, event: Optional[WatchEvent]) -> Any:
        assert self._func is not None
        return (data, stat, event) if _arity(self._func) >= 3 else (data, stat)

    def _updates(self, stream: Stream[Any]) -> Any:
        current: Any = (None, None)
        for event in stream:
            if event.kind == "INITIALIZED":
                break
            if event.path == self.path and event.kind == "CREATED":
                current = (event.data, NodeStat(event.version, event.czxid, event.mzxid))
        yield self._call_args(*current, None)
        last = current
        for event in stream:
            if event.path != self.path:
                continue
            if event.kind == "DELETED":
                now: Any = (None, None)
            elif event.kind in ("CREATED", "CHANGED"):
                now = (event.data, NodeStat(event.version, event.czxid, event.mzxid))
            else:
                continue
            if now != last:  # a real change only
                last = now
                yield self._call_args(*now, event)


class ChildrenWatch(_Watcher):
    """Calls `func(children)` with the names of the children of `path` (sorted) now and after
    every child added or removed, as kazoo's `ChildrenWatch` (a change of a child's data is no
    change here). While the node does not exist, `children` is empty. Returning False stops the
    watch; so does `stop()`. The first call is made before the constructor returns; the rest as
    `DataWatch`'s. Use as `client.ChildrenWatch(path, func)` or as a decorator.

    Through a daemon group it carries on as `DataWatch` does: opened again on the member that
    takes the client session up, it calls the function only if the children differ from the
    last call's."""

    def _open(self) -> Stream[Any]:
        return self.client._children(self.path, recipe=self._recipe)

    def _updates(self, stream: Stream[Any]) -> Any:
        last: Optional[List[str]] = None
        for membership in stream:
            names = [m.name for m in membership.members]
            if names != last:  # children added or removed, not only counted again
                last = names
                yield (names,)
