"""The client of a `wazoo serve` daemon: a client session kept alive on a thread, claims with
fencing tokens that say when they are lost, and the daemon's other recipes as plain calls.
Through a daemon group (several addresses), a session whose daemon dies or goes silent is taken
up by another member, its claims with it."""
from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, Generic, Iterator, List, NamedTuple, Optional, Sequence, Tuple,
    TypeVar, Union,
)

import grpc

from ._proto import wazoo_pb2 as pb
from ._proto import wazoo_pb2_grpc as rpc
from .errors import (
    KINDS, Cancelled, InvalidArgument, LockLost, NodeExists, NoNode, Timeout, UnknownHandle, UnknownSession,
    Unavailable, WazooError, from_rpc,
)

T = TypeVar("T")
Data = Union[bytes, str]
Pem = Union[bytes, str, "os.PathLike[str]", None]
#: One address ("host:port", "https://host:port"), several comma-separated ("a:7181,b:7181",
#: as `wazoo --server`), or a list of them.
Addresses = Union[str, Sequence[str]]

#: Where the client says that a session is in jeopardy ("jeopardy: …") and taken up again
#: ("safe: …"), at WARNING.
log = logging.getLogger("wazoo")

#: The part of the session's TTL after which a session none of whose keepalives was answered
#: counts as lost, before the daemon can hand its claims to anyone else.
CUT_OFF = 2 / 3

#: How often the connection to the daemon is pinged (HTTP/2 PING), in seconds, calls in flight or
#: not.
PING_EVERY = 1.0
#: How long a ping may go unanswered, in seconds, before the connection counts as dead and is
#: dropped.
PING_TIMEOUT = 2.0
#: The longest a daemon that stopped answering (frozen, cut off, a black hole) goes unnoticed, in
#: seconds: a ping goes out within `PING_EVERY` and is given up after `PING_TIMEOUT`. Then the
#: connection is dropped, and every call and stream on it raises `wazoo.Unavailable`, whether it
#: waits by design (a claim taken with no timeout, `queue_take`, a watch) or not.
SILENCE = PING_EVERY + PING_TIMEOUT
#: The default deadline, in seconds, of a call that does not wait by design (`Client`'s
#: `call_timeout`).
CALL_TIMEOUT = 10.0

#: A claim lost for one of these reasons has no handle left in the daemon (or no daemon to
#: answer): releasing it sends nothing.
_HANDLE_GONE = frozenset({"disconnected", "session-closed", "client-session-ended", "released"})
#: How long, in seconds, a client whose session ended waits for its claims' Lost streams to say
#: why (the daemon sends their events before it ends the session's streams) before it calls them
#: "disconnected".
_SETTLE = 1.0
#: `timeout=` of `Client._call` for the client's `call_timeout`.
_DEFAULT: Any = object()
#: How long, in seconds, each member of a group is given to answer (connection and health
#: check) while a session in jeopardy is taken up.
REATTACH_TRY = 0.5
#: How long, in seconds, one tend of a registration without a TTL waits for a change of its node
#: (`wazoo register`'s).
TEND = 2.0
#: The shortest TTL of a registration, in seconds (`wazoo register --ttl`'s).
MIN_TTL = 1.0
#: How long, in seconds, a registration waits before it is made again after a failure that may
#: pass (ZooKeeper out of reach, the recipe failed).
_RETRY = 1.0

_COUNTER_FORMATS = {
    "kazoo": pb.KAZOO,
    "curator-shared": pb.CURATOR_SHARED,
    "curator-atomic": pb.CURATOR_ATOMIC,
}


class WatchEvent(NamedTuple):
    """A change of a watched node (`Client.watch`).

    `kind` is "CREATED" (in the cache now: created, or there when the watch started),
    "CHANGED" (its data was set), "DELETED" (gone; the event has its last cached form) or
    "INITIALIZED" (every node there at the start has been reported; no path, no data).
    `version` is the node's data version; `czxid` and `mzxid` the zxids that created it and
    last set its data.
    """

    kind: str
    path: str
    data: bytes
    version: int
    czxid: int = 0
    mzxid: int = 0


class NodeStat(NamedTuple):
    """What `DataWatch` tells of a node besides its data (the fields of kazoo's `ZnodeStat` a
    cache keeps): `version` (its data version), `czxid` (the zxid that created it) and `mzxid`
    (the zxid that last set its data)."""

    version: int
    czxid: int
    mzxid: int


class Member(NamedTuple):
    """A member of a group (`Client.group_members`): its node's name and data."""

    name: str
    data: bytes


class Contender(NamedTuple):
    """One contender for a claim (`Client.contenders`), as the daemon reads its node.

    `node` is its node's path; `sequence` the node's sequence number; `holds` whether it holds
    the lock or lease, or leads (False: it waits); `mode` "read" or "write" for a read/write
    lock, else None; `data` the node's data (an election candidate's id, a holder's identity);
    `session` the ZooKeeper session that owns the node; `token` the node's czxid, the fencing
    token its holder was given; `since_ms` when the node was made (milliseconds since the Unix
    epoch): since when it holds or waits."""

    node: str
    sequence: int
    holds: bool
    mode: Optional[str]
    data: bytes
    session: int
    token: int
    since_ms: int = 0

    @property
    def id(self) -> str:
        """`data` as text: an election candidate's id (`Client.elect`'s `id`)."""
        return self.data.decode("utf-8", "replace")


#: `Client.contenders`' `kind`: how the claim at a path is named in ZooKeeper.
_HOLDERS_KINDS = {
    "detect": pb.HOLDERS_KIND_DETECT,
    "lock": pb.HOLDERS_KIND_LOCK,
    "rwlock": pb.HOLDERS_KIND_READ_WRITE,
    "semaphore": pb.HOLDERS_KIND_SEMAPHORE,
    "election": pb.HOLDERS_KIND_ELECTION,
}


def _holders_request(path: str, kind: str, leases: Optional[int]) -> Any:
    if kind not in _HOLDERS_KINDS:
        raise ValueError(f"unknown claim kind {kind!r}: use one of {', '.join(_HOLDERS_KINDS)}")
    if leases is not None and leases < 1:
        raise ValueError(f"a semaphore has at least one lease, not {leases}")
    return pb.HoldersRequest(path=path, kind=_HOLDERS_KINDS[kind], leases=leases)


def _contender(c: Any) -> Contender:
    mode = {pb.CONTENDER_MODE_READ: "read", pb.CONTENDER_MODE_WRITE: "write"}.get(c.mode)
    return Contender(c.node, c.sequence, c.holds, mode, c.data, c.session, c.fencing_token, c.since_ms)


class ClaimInfo(NamedTuple):
    """A claim under a prefix (`Client.list_claims`): its `path`, its `kind` ("lock", "rwlock",
    "semaphore", "election", or "described" for a family the daemon describes), and its
    `contenders`, holders first, then waiters in queue order."""

    path: str
    kind: str
    contenders: List[Contender]


class SessionClaim(NamedTuple):
    """A claim of a client session (`SessionInfo.claims`): its handle, the `path` it was taken at,
    its `family` ("lock", "read-lock", "write-lock", "semaphore", "election", …), whether it
    `holds` (else it waits), its `node`, fencing `token`, and `since_ms` (milliseconds since the
    Unix epoch)."""

    handle: int
    path: str
    family: str
    holds: bool
    node: str
    token: int
    since_ms: int


class SessionInfo(NamedTuple):
    """A client session open on the daemon (`Client.list_sessions`): its id, the `name` its
    client gave, the `peer` address it called from ("" when not known), `opened_ms`
    (milliseconds since the Unix epoch) and its `claims`."""

    session: int
    name: str
    peer: str
    opened_ms: int
    claims: List[SessionClaim]


#: `ClaimInfo.kind` by the wire's kind.
_CLAIM_KINDS = {
    pb.HOLDERS_KIND_LOCK: "lock",
    pb.HOLDERS_KIND_READ_WRITE: "rwlock",
    pb.HOLDERS_KIND_SEMAPHORE: "semaphore",
    pb.HOLDERS_KIND_ELECTION: "election",
}


def _claim_info(c: Any) -> ClaimInfo:
    return ClaimInfo(c.path, _CLAIM_KINDS.get(c.kind, "described"), [_contender(x) for x in c.contenders])


def _session_info(s: Any) -> SessionInfo:
    claims = [SessionClaim(c.handle, c.path, c.family, c.holds, c.node, c.fencing_token, c.since_ms)
              for c in s.claims]
    return SessionInfo(s.session, s.name, s.peer, s.opened_ms, claims)


#: No item handed out yet.
_NOTHING: Any = object()


def _watch_event(e: Any) -> WatchEvent:
    return WatchEvent(pb.WatchKind.Name(e.kind), e.path, e.data, e.version, e.czxid, e.mzxid)


class Stream(Generic[T]):
    """The events of a streaming call, as an iterator, until `cancel()` (or the end of a `with`
    block). A failed stream raises the call's `WazooError` from `next()`; a cancelled one ends
    the iteration. A stream waits for events as long as it takes, but not on a daemon that
    stopped answering: within `SILENCE` seconds the connection is dropped, and `next()` raises
    `wazoo.Unavailable`.

    Through a daemon group, the streams of `watch`, `config_watch` (and the watchers built on
    them) carry on: when the stream breaks because its daemon died, went silent or was left for
    another member, it is opened again on the member that takes the client session up, and
    what it reports from there on starts from what it had reported: nothing twice, nothing
    missing (see `Client.watch`). `moves` counts the times it was opened again. It ends as one
    daemon's stream does when the session is lost or closing, or when no member took it up
    within the bound of the session."""

    def __init__(self, call: Any, convert: Callable[[Any], T], link: Optional["_Link"] = None,
                 client: Optional["Client"] = None, reopen: Optional[Callable[["_Link"], Any]] = None):
        self._call = call
        self._convert = convert
        self._cancelled = False
        self._link = link
        # With both: the stream is opened again through another member of the group
        # (`reopen(link)` makes the call there) when its daemon is gone.
        self._client = client
        self._reopen = reopen
        #: How many times the stream was opened again on another member of the group.
        self.moves = 0
        # Items to hand out before reading more.
        self._ready: "collections.deque[T]" = collections.deque()
        # The last item handed out, and whether the stream was opened again since.
        self._last: Any = _NOTHING
        self._resumed = False

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        while True:
            if self._ready:
                return self._ready.popleft()
            call, link = self._call, self._link
            try:
                item = next(call)
            except grpc.RpcError as e:
                if self._cancelled and e.code() == grpc.StatusCode.CANCELLED:
                    raise StopIteration from None
                if link is not None and link.retired and e.code() == grpc.StatusCode.CANCELLED:
                    # The client left this daemon for another member of the group.
                    error: WazooError = Unavailable(
                        f"the session left the daemon at {link.address} for another member of the group",
                        None, grpc.StatusCode.UNAVAILABLE)
                else:
                    error = from_rpc(e)
                if self._resume(error, link):
                    continue
                if self._cancelled:
                    raise StopIteration from None
                raise error from e
            self._ready.extend(self._take(self._convert(item)))

    def _take(self, item: T) -> List[T]:
        """What to hand out for `item`, the stream's next: the item; but the first one after the
        stream was opened again only if it differs from the last handed out (the state now, as
        the new daemon first reports it, is news only if it changed meanwhile)."""
        if self._resumed:
            self._resumed = False
            if item == self._last:
                return []
        self._last = item
        return [item]

    def _reopened(self) -> None:
        """The stream was opened again on another member: what it says first is caught up with."""
        self._resumed = True

    def _resume(self, error: WazooError, link: Optional["_Link"]) -> bool:
        """Opens the stream again on the member of the group that keeps the client session now,
        if `error` is its daemon's being gone (or left): True once it is. False when it cannot
        be carried on: not a stream that moves, not in a group, a failure the daemon reported,
        the stream cancelled, or the session lost, closing, or not taken up in time."""
        client = self._client
        if self._reopen is None or client is None or link is None or not client.in_group:
            return False
        if error.kind is not None or not (isinstance(error, Unavailable) or link.retired):
            return False
        following = client._after(link, lambda: self._cancelled)
        if following is None or self._cancelled:
            return False
        call = self._reopen(following)
        with client._state:
            self._call, self._link = call, following
        if self._cancelled:
            call.cancel()
        self.moves += 1
        self._reopened()
        log.info("a stream broken with the daemon at %s (%s) was opened again on the daemon at %s",
                 link.address, error, following.address)
        return True

    def cancel(self) -> None:
        """Ends the stream: the daemon stops following the change."""
        self._cancelled = True
        self._call.cancel()
        client = self._client
        if client is not None:
            # A stream waiting for the session to move stops waiting.
            with client._state:
                client._changed.notify_all()

    def __enter__(self) -> "Stream[T]":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()


class _CacheStream(Stream[WatchEvent]):
    """`Client.watch`'s stream: opened again on another member of the group, it reports what
    changed since the last event it handed out, as the daemon's cache would have, from the
    nodes the new stream finds there (its CREATED events up to INITIALIZED): a node that is new
    is CREATED, one that is gone DELETED (its last form), one made again (another czxid)
    DELETED then CREATED, one whose data was set (another version, mzxid or data) CHANGED, and
    nothing for a node as it was. Its INITIALIZED is passed on only if the first stream had not
    sent one yet."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # The nodes as reported so far, by path.
        self._nodes: Dict[str, WatchEvent] = {}
        self._initialized = False
        # While a reopened stream reports the nodes it found: those nodes.
        self._found: Optional[Dict[str, WatchEvent]] = None

    def _reopened(self) -> None:
        self._found = {}

    def _take(self, item: WatchEvent) -> List[WatchEvent]:
        found = self._found
        if found is None:
            self._note(item)
            return [item]
        if item.kind in ("CREATED", "CHANGED"):
            found[item.path] = item
            return []
        if item.kind == "DELETED":
            found.pop(item.path, None)
            return []
        # INITIALIZED: every node there has been found.
        self._found = None
        changes = self._since(found)
        if not self._initialized:
            changes.append(item)
        for change in changes:
            self._note(change)
        return changes

    def _note(self, event: WatchEvent) -> None:
        if event.kind in ("CREATED", "CHANGED"):
            self._nodes[event.path] = event
        elif event.kind == "DELETED":
            self._nodes.pop(event.path, None)
        else:
            self._initialized = True

    def _since(self, found: Dict[str, WatchEvent]) -> List[WatchEvent]:
        """The events that take the nodes reported so far to `found`."""
        changes = [self._nodes[path]._replace(kind="DELETED")
                   for path in sorted(self._nodes.keys() - found.keys(), reverse=True)]
        for path in sorted(found):
            new, old = found[path], self._nodes.get(path)
            if old is None:
                changes.append(new._replace(kind="CREATED"))
            elif old.czxid != new.czxid:
                changes += [old._replace(kind="DELETED"), new._replace(kind="CREATED")]
            elif (old.version, old.mzxid, old.data) != (new.version, new.mzxid, new.data):
                changes.append(new._replace(kind="CHANGED"))
        return changes


class Claim:
    """A claim the client's session holds: a lock, a side of a read/write lock, a semaphore
    lease, a leadership, or a group membership.

    Attributes:
        path: the path it was taken at.
        node: the claim's node.
        token: the fencing token (the node's czxid): every later holder's is greater. Pass it to
            what the claim protects. A group membership's is 0: it fences nothing.
        recipe_version: the version (SHA-256, 12 hex digits) of the recipe component serving it.
        handle: the daemon's handle of the claim (a new one once the claim was taken up by
            another daemon of the group).
        lost: a `threading.Event` set once the claim is lost.
        reason: why it was lost, once it was, as the daemon says it (its `LossReason`, lower
            case, dashes for underscores): "node-deleted" (someone deleted its node), "revoked"
            (someone asked the holder to let go), "session-expired" (the daemon's ZooKeeper
            session expired), "cut-off" (ZooKeeper stopped answering the daemon for 2/3 of its
            session timeout), "session-closed" (the daemon or its tenant is stopping),
            "client-session-ended" (this client's session ended in the daemon: closed, or its
            TTL passed), "released" (another call released it); or, when the daemon could not
            say, "disconnected" (the connection to the daemon broke or went silent for
            `SILENCE` seconds, or no keepalive was answered for 2/3 of the TTL). A reason the
            daemon names that this client does not know is passed on as it is named. `why` says
            the same in words.

    As a context manager, the block runs while it is held and `__exit__` releases it; if the
    claim was lost while the block ran, `__exit__` raises `LockLost` (unless another exception
    is on its way out). Leaving the block never waits on a daemon that stopped answering: a
    claim lost with its connection or session is not released again (the daemon lets it go
    when it sees the session end), and a release otherwise has the client's `call_timeout`.

    Through a daemon group, a claim whose daemon dies or goes silent is not lost while another
    member takes the client's session up within the bound (`Client`): it is taken up there
    (`Recipes.Resume`: the same node, the same fencing token) and followed on, and whatever the
    old daemon says later is not about it any more. A release meanwhile waits for the claim to
    be taken up (or lost), and lets it go where it is held.
    """

    def __init__(self, client: "Client", path: str, claim: Any, link: "_Link"):
        self.path = path
        self.node: str = claim.node
        self.token: int = claim.fencing_token
        self.recipe_version: str = claim.recipe_version
        self.handle: int = claim.handle
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.why: Optional[str] = None
        self._client = client
        # The client's lock: the claim moves with the client's session, under the same lock.
        self._state = client._state
        self._released = False
        # The daemon holds no handle of the claim any more, or cannot be reached.
        self._gone = False
        # The daemon the claim is held through now, its handle there and its Lost stream.
        self._link = link
        self._ref = pb.HandleRef(session=client.session_id, handle=claim.handle)
        self._stream = link.recipes.Lost(self._ref, metadata=client.metadata)
        # The daemon follows the claim before it is handed out (its answer's headers come once it
        # does), so a loss right after is told, not missed; a daemon gone silent fails the call
        # within SILENCE.
        self._stream.initial_metadata()
        self._follower = threading.Thread(target=self._follow, name=f"wazoo-lost-{claim.handle}", daemon=True)
        self._follower.start()

    def __repr__(self) -> str:
        state = f"lost: {self.reason}" if self.lost.is_set() else "held"
        return f"Claim(node={self.node!r}, token={self.token}, {state})"

    def _follow(self) -> None:
        """Waits for the daemon's word that the claim is lost; in a group, follows the claim
        from daemon to daemon."""
        client = self._client
        while True:
            with self._state:
                stream, link = self._stream, self._link
            try:
                for event in stream:
                    if self._stream is not stream:
                        break  # taken up elsewhere: the old daemon's word is not about it now
                    reason = loss_reason(event)
                    self._lose(reason, f"the claim on {self.node} was lost: {reason}", reason in _HANDLE_GONE)
                    if reason == "client-session-ended":
                        # The daemon's word: the session is gone, whatever the keepalives say yet.
                        client._lose(f"the daemon at {link.address} ended the client session", settle=True)
                    return
                else:
                    if self._stream is not stream:
                        continue
                    # A daemon older than CLIENT_SESSION_ENDED ends the stream quietly when the
                    # handle is closed without a loss of the node: released, or its session
                    # ended.
                    self._lose("disconnected", f"the daemon closed the claim on {self.node}", True)
                    return
            except grpc.RpcError as e:
                with self._state:
                    if self._stream is not stream:
                        continue
                    done = self._released or self.lost.is_set()
                why = f"the Lost stream of {self.node} broke: {e.code().name}: {e.details()}"
                broken = isinstance(from_rpc(e), Unavailable) or link.retired
                if broken and client.in_group:
                    # The keepalives say whether the daemon is gone, and another member takes
                    # the session up, and this claim with it.
                    if not done and self._await_move(stream, why):
                        continue
                    return
                self._lose("disconnected", why, broken)
                if broken:
                    # The connection broke (or went silent), and the keepalive stream on it too:
                    # the session ends with it.
                    client._lose(f"the connection to the daemon at {link.address} broke: "
                                 f"{e.code().name}: {e.details()}", settle=True)
                return

    def _await_move(self, stream: Any, why: str) -> bool:
        """Waits until the claim is followed on another stream (taken up by another daemon of
        the group): True; False once it is lost or released (or its session is: the client
        loses it), or when nothing took it up within the bound of its session."""
        client = self._client
        deadline = time.monotonic() + client._limit() + client.call_timeout
        with self._state:
            while self._stream is stream and not (self._released or self.lost.is_set() or client.lost.is_set()):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                client._changed.wait(left)
            if self._stream is not stream:
                return True
            if self._released or self.lost.is_set() or client.lost.is_set():
                return False
        # Its session is kept, and nobody took the claim up: it cannot be followed.
        self._lose("disconnected", f"{why}; the claim was not taken up again", False)
        return False

    def _moved(self, link: "_Link", ref: Any, stream: Any) -> None:
        """The claim was taken up by the daemon of `link`, as handle `ref` there, its loss
        followed on `stream` (None for a claim released meanwhile)."""
        with self._state:
            old = self._stream
            self._link, self._ref, self.handle = link, ref, ref.handle
            if stream is not None:
                self._stream = stream
            self._client._changed.notify_all()
        if stream is not None:
            old.cancel()

    def _lose(self, reason: str, why: str, gone: bool = False) -> None:
        with self._state:
            if gone:
                self._gone = True
            self._client._changed.notify_all()
            if self._released or self.lost.is_set():
                return
            self.reason, self.why = reason, why
            self.lost.set()

    def check(self) -> None:
        """Raises `LockLost` if the claim was lost."""
        if self.lost.is_set():
            raise LockLost(self.why or "the claim was lost", self.reason or "unknown")

    def release(self) -> None:
        """Lets the claim go (its node deleted). Releasing twice does nothing, and neither does
        releasing a claim whose handle the daemon no longer holds (lost with the connection or the
        client session, or let go by the daemon). Raises `wazoo.Unavailable` if the daemon does
        not answer within the client's `call_timeout`. In a group, a claim being taken up by
        another member is released there once it is (within the bound of the session)."""
        with self._state:
            if self._released:
                return
            self._released = True
        where = self._settled()
        self._stream.cancel()
        self._client._forget(self)
        if where is not None:
            link, ref = where
            self._client._call(link.recipes.Release, ref)

    def _settled(self) -> Optional[Tuple["_Link", Any]]:
        """Where the claim is held now, to release it: its daemon and handle once no move is
        under way (waited for, in a group, within the bound of the session); None when no
        daemon holds a handle of it."""
        client = self._client
        deadline = time.monotonic() + client._limit() + client.call_timeout
        with self._state:
            while (client.in_group and not (self._gone or client.lost.is_set())
                   and (self._link is not client._link or client.jeopardy is not None)):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                client._changed.wait(left)
            if self._gone or client.lost.is_set() or self._link.retired:
                # No daemon holds a handle of it, or only one the session left.
                return None
            return self._link, self._ref

    def _closed(self) -> None:
        """The session was closed on purpose: no loss to report."""
        with self._state:
            self._released = True
            self._client._changed.notify_all()
        self._stream.cancel()

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        was_lost = self.lost.is_set()
        failed: Optional[WazooError] = None
        try:
            self.release()
        except WazooError as e:
            failed = e
        if exc_type is not None:
            return False
        if was_lost:
            raise LockLost(self.why or "the claim was lost", self.reason or "unknown") from failed
        if failed is not None:
            raise failed
        return False


class Registration:
    """A node the client's session keeps present (`Client.register`), as `wazoo register` does
    (Curator's `PersistentNode`; an instance in service discovery).

    Attributes:
        path: the registration's path.
        node: its node: the path itself.
        data: the data it holds (bytes).
        ttl: its TTL in seconds (a persistent node with a TTL), or None (an ephemeral node).
        handle: the daemon's handle of the recipe instance that tends it (a new one once it was
            taken up by another daemon of the group, or made again).
        lost: a `threading.Event` set once the registration is lost for good.
        reason: why it was lost, once it was: "node-exists" (another session's registration, or
            another registration of this client, took the path), "invalid-argument" (a
            persistent node took an ephemeral registration's place), "client-session-ended"
            (the daemon ended the client session), or "disconnected" (the session was lost
            otherwise, or the daemon could not be reached). `why` says the same in words.
        moves: how many times it was taken up through another daemon of the group.
        renewals: how many times it was made again on a fresh instance after a failure that
            passed (the recipe instance failed, its ZooKeeper session ended): its node may have
            gone meanwhile, and come back with a new czxid.

    A thread of its own tends it: the recipe's `tend`, over and over (each waiting up to a third
    of the TTL, or `TEND` seconds), makes the node again when someone deletes it and sets its
    data back when someone changes it (both logged at INFO on the "wazoo" logger). As a context
    manager, leaving the block closes it, and raises `LockLost` if it was lost while the block
    ran (unless another exception is on its way out). `close()` (or `release()`) deletes the
    node; closing the client does too.

    Through a daemon group, a registration outlives its daemon: the instance that tended it
    stays behind on the daemon that died, and once another member has taken the client session
    up, a fresh instance in the same session takes the very node up (`InvokeRequest.take_up`:
    the same node, the same czxid, so a watcher sees no change) and tends it on. Until then the
    node is not tended, but it stays: it belongs to the ZooKeeper session the group keeps. The
    registration is lost only with the session, or when the path is someone else's by then.
    """

    def __init__(self, client: "Client", path: str, data: Data, ttl: Optional[float], recipe: str):
        self.path = path
        self.node = path
        self.data: bytes = _bytes(data)
        self.ttl = ttl
        self.recipe = recipe
        self.handle = 0
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.why: Optional[str] = None
        self.moves = 0
        self.renewals = 0
        self._client = client
        self._state = client._state
        # The daemon the tending instance lives on.
        self._link: "_Link" = client._link
        self._closing = False
        # The tend in flight (a grpc future), for close() to end at once.
        self._tending: Any = None
        self._every = ttl / 3 if ttl is not None else TEND
        self._tender = threading.Thread(target=self._tend, name=f"wazoo-registration-{path}", daemon=True)

    def __repr__(self) -> str:
        state = f"lost: {self.reason}" if self.lost.is_set() else "held"
        return f"Registration(path={self.path!r}, {state})"

    def _args(self) -> str:
        """`registration.register`'s arguments as JSON: a `list<u8>` is a string of its UTF-8
        bytes, or an array of the bytes when they are no UTF-8."""
        data: Any
        try:
            data = self.data.decode("utf-8")
        except UnicodeDecodeError:
            data = list(self.data)
        return json.dumps([self.path, data, None if self.ttl is None else int(round(self.ttl * 1000))])

    def _start(self) -> None:
        """Registers the path (raising why not) and starts tending it."""
        client = self._client
        link = client._link
        self.handle = self._register(link, False)
        self._link = link
        with self._state:
            client._registrations.add(self)
            gone = client.lost.is_set() or client._closing.is_set()
        if gone:
            self._lose("disconnected", client.lost_reason or "the client session was lost")
        self._tender.start()

    def _invoke(self, link: "_Link", request: Any, timeout: Optional[float]) -> Tuple[Any, Any]:
        """`Invoke` through the daemon of `link`: its reply, and its result decoded."""
        with link.waiting():
            if link.retired:
                raise Unavailable(f"the session left the daemon at {link.address} for another member of the group",
                                  None, grpc.StatusCode.UNAVAILABLE)
            reply = self._client._call(link.recipes.Invoke, request, timeout)
        return reply, json.loads(reply.result_json)

    def _register(self, link: "_Link", take_up: bool) -> int:
        """Registers the path on a fresh kept instance through the daemon of `link` (with
        `take_up`, taking this session's node there up, as its own): the instance's handle.
        Raises the recipe's refusal as its `WazooError`."""
        client = self._client
        request = pb.InvokeRequest(
            recipe=self.recipe, function="registration.register", args_json=self._args(),
            session=client.session_id, keep=True, take_up=[self.path] if take_up else [],
        )
        reply, result = self._invoke(link, request, client.call_timeout)
        if isinstance(result, dict) and "ok" in result:
            return int(reply.handle)
        if reply.handle:
            self._drop(link, reply.handle)
        raise _recipe_error(result.get("err") if isinstance(result, dict) else result, f"registering {self.path}")

    def _drop(self, link: "_Link", handle: int) -> None:
        """Ends the instance of `handle` (its node deleted if still its), as best it can."""
        ref = pb.HandleRef(session=self._client.session_id, handle=handle)
        try:
            with link.waiting():
                if not link.retired:
                    self._client._call(link.recipes.Release, ref)
        except WazooError as e:
            log.debug("releasing the registration of %s (handle %d): %s", self.path, handle, e)

    def _tend(self) -> None:
        """Tends the registration until it is closed or lost; takes it up through another
        daemon of the group after a move; lets it go once closed."""
        client = self._client
        while True:
            with self._state:
                if self._closing or self.lost.is_set():
                    break
                link, handle = self._link, self.handle
                moved = client._link is not link
            if moved:
                if not self._take_up(link):
                    break
                continue
            request = pb.InvokeRequest(session=client.session_id, handle=handle, function="registration.tend",
                                       args_json=json.dumps([int(self._every * 1000)]))
            try:
                with link.waiting():
                    if link.retired:
                        raise Unavailable(f"the session left the daemon at {link.address}", None,
                                          grpc.StatusCode.UNAVAILABLE)
                    with self._state:
                        if self._closing:
                            break
                        tending = link.recipes.Invoke.future(
                            request, metadata=client.metadata, timeout=self._every + client.call_timeout)
                        self._tending = tending
                    try:
                        reply = tending.result()
                    except grpc.FutureCancelledError:
                        break
                    except grpc.RpcError as e:
                        raise from_rpc(e) from e
                    finally:
                        with self._state:
                            self._tending = None
            except WazooError as e:
                if self._closing:
                    break
                if client.in_group and e.kind is None and (isinstance(e, Unavailable) or link.retired):
                    # The daemon died or went silent: once another member takes the session up,
                    # the registration is taken up there (the loop's next turn).
                    if client._after(link) is None:
                        self._lose("disconnected", f"tending {self.path}: {e}; the session was not taken up: "
                                   f"{client.lost_reason or 'no member of the group took it up in time'}")
                        break
                    continue
                if isinstance(e, UnknownSession):
                    self._lose("client-session-ended", f"tending {self.path}: {e}")
                    break
                if e.kind is None:
                    self._lose("disconnected", f"tending {self.path}: {e}")
                    break
                # The instance failed: made again on a fresh one.
                if not self._renew(link, handle, f"{e.kind}: {e}"):
                    break
                continue
            result = json.loads(reply.result_json)
            if isinstance(result, dict) and "ok" in result:
                if result["ok"] == "recreated":
                    log.info("%s was gone: registered again", self.path)
                elif result["ok"] == "corrected":
                    log.info("the data of %s was changed: set back", self.path)
                continue
            error = _recipe_error(result.get("err") if isinstance(result, dict) else result, f"tending {self.path}")
            if isinstance(error, (NodeExists, InvalidArgument)):
                self._lose(_reason_of(error), str(error))
                break
            # The session ended in ZooKeeper, ZooKeeper is out of reach: a fresh instance.
            if not self._renew(link, handle, str(error)):
                break
        self._finish()

    def _take_up(self, old: "_Link") -> bool:
        """The session moved from the daemon of `old` (where the tending instance stayed
        behind) to another: a fresh instance there takes the node up. False once lost or
        closing."""
        client = self._client
        while True:
            link = client._after(old)
            if link is None:
                self._lose("disconnected", f"{self.path}: the session was not taken up: "
                           f"{client.lost_reason or 'no member of the group took it up in time'}")
                return False
            if self._closing:
                return False  # `_finish` takes the node up to delete it
            try:
                handle = self._register(link, True)
            except (NodeExists, InvalidArgument) as e:
                self._lose(_reason_of(e), str(e))
                return False
            except WazooError as e:
                if client.in_group and e.kind is None and (isinstance(e, Unavailable) or link.retired):
                    old = link  # moved again
                    continue
                return self._renew(None, 0, str(e))
            with self._state:
                self._link, self.handle = link, handle
                self.moves += 1
                client._changed.notify_all()
            log.info("the registration of %s was taken up by the daemon at %s (the same node)", self.path, link.address)
            return True

    def _renew(self, link: Optional["_Link"], handle: int, why: str) -> bool:
        """Tending failed (`why`) for a reason that may pass: the old instance (`handle` on
        `link`) let go, the path registered again on a fresh instance, tried every `_RETRY`
        seconds. False once lost or closing."""
        client = self._client
        log.warning("tending %s failed (%s); registering again", self.path, why)
        if link is not None and handle:
            self._drop(link, handle)
        while True:
            with self._state:
                if self._closing or self.lost.is_set():
                    self.handle = 0
                    return False
                if client.lost.is_set():
                    break
                link = client._link
            try:
                handle = self._register(link, False)
            except (NodeExists, InvalidArgument) as e:
                self._lose(_reason_of(e), str(e))
                return False
            except UnknownSession as e:
                self._lose("client-session-ended", f"registering {self.path} again: {e}")
                return False
            except WazooError as e:
                log.warning("registering %s again: %s; trying again", self.path, e)
                with self._state:
                    client._changed.wait(_RETRY)
                continue
            with self._state:
                self._link, self.handle = link, handle
                self.renewals += 1
            log.warning("%s registered again", self.path)
            return True
        self._lose("disconnected", client.lost_reason or "the client session was lost")
        return False

    def _finish(self) -> None:
        """The tending is over (closed or lost): the instance let go, the node deleted with it
        (a TTL node by `unregister`) if it is still this registration's."""
        client = self._client
        with self._state:
            closing = self._closing
            link, handle = self._link, self.handle
        if client.lost.is_set() or client._closing.is_set():
            return  # the session's end ends the instance
        if closing and handle and link is not client._link:
            # Closed while the instance stayed behind on a daemon the session left: a fresh one
            # takes the node up, to delete it.
            following = client._after(link)
            if following is None:
                return
            try:
                link, handle = following, self._register(following, True)
            except WazooError as e:
                log.debug("taking the registration of %s up to delete it: %s", self.path, e)
                return
        if not handle:
            return
        if closing and self.ttl is not None and not self.lost.is_set():
            # A TTL node outlives its instance: deleted first.
            try:
                request = pb.InvokeRequest(session=client.session_id, handle=handle,
                                           function="registration.unregister", args_json="[]")
                self._invoke(link, request, client.call_timeout)
            except WazooError as e:
                log.warning("deleting %s: %s", self.path, e)
        self._drop(link, handle)

    def _lose(self, reason: str, why: str) -> None:
        with self._state:
            self._client._changed.notify_all()
            if self._closing or self.lost.is_set():
                return
            self.reason, self.why = reason, why
            self.lost.set()
        log.warning("the registration of %s was lost: %s", self.path, why)

    def check(self) -> None:
        """Raises `LockLost` if the registration was lost."""
        if self.lost.is_set():
            raise LockLost(self.why or "the registration was lost", self.reason or "unknown")

    def close(self) -> None:
        """Ends the registration and deletes its node (if it is still this registration's).
        Closing twice does nothing. It waits for the daemon at most about the client's
        `call_timeout` (in a group, also for a move under way, within the bound of the session);
        a TTL registration also lets its last tend run out (a third of the TTL). Raises nothing:
        a node the daemon could not be told to delete goes with the session (or its TTL)."""
        client = self._client
        with self._state:
            first = not self._closing
            self._closing = True
            tending = self._tending
            client._changed.notify_all()
        if first and tending is not None and self.ttl is None:
            # The tend ends at once, and its instance with it (its node deleted by the release).
            tending.cancel()
        if self._tender.is_alive() and self._tender is not threading.current_thread():
            self._tender.join(client._limit() + 3 * client.call_timeout + self._every)
        with self._state:
            client._registrations.discard(self)

    release = close

    def _closed(self) -> None:
        """The client closed its session, which ends the instance: no loss to report, nothing
        to let go."""
        with self._state:
            self._closing = True
            tending = self._tending
            self.handle = 0
            self._client._changed.notify_all()
        if tending is not None:
            tending.cancel()

    def __enter__(self) -> "Registration":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        was_lost = self.lost.is_set()
        self.close()
        if exc_type is None and was_lost:
            raise LockLost(self.why or "the registration was lost", self.reason or "unknown")


def _reason_of(error: WazooError) -> str:
    """A recipe's refusal as a loss reason: its kind, lower case, dashes for underscores."""
    return (error.kind or "unknown").lower().replace("_", "-")


def _recipe_error(err: Any, what: str) -> WazooError:
    """A recipe's `{"err": …}` result (`"node-exists"`, `{"invalid-argument": "…"}`) as the
    exception of its kind, its message starting with `what`."""
    if isinstance(err, str):
        kind, text = err, ""
    elif isinstance(err, dict) and len(err) == 1:
        kind, value = next(iter(err.items()))
        text = value if isinstance(value, str) else json.dumps(value)
    else:
        kind, text = "", json.dumps(err)
    if kind == "unimplemented" and not text:
        text = "the ZooKeeper servers do not enable TTL nodes (extendedTypesEnabled)"
    name = kind.upper().replace("-", "_")
    details = f"{what}: {kind or 'failed'}" + (f": {text}" if text else "")
    cls = KINDS.get("ERROR_KIND_" + name)
    return cls(details) if cls is not None else WazooError(details, name or None)


def loss_reason(event: Any) -> str:
    """The reason a `LostEvent` gives, as `Claim.reason` says it: its `LossReason` without the
    prefix, lower case, dashes for underscores (LOSS_REASON_CLIENT_SESSION_ENDED is
    "client-session-ended"); for a reason newer than these stubs or none at all, the event's
    words, else "unknown"."""
    try:
        name = pb.LossReason.Name(event.loss_reason) if event.loss_reason else ""
    except ValueError:  # a value newer than these stubs
        name = ""
    return name[len("LOSS_REASON_"):].lower().replace("_", "-") or event.reason or "unknown"


def check_settings(token: Optional[str], tls_cert: Pem, tls_key: Pem, call_timeout: float) -> None:
    """Refuses a client's settings that cannot work (both clients check them alike)."""
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key go together: give both or neither")
    check_token(token)
    if not call_timeout > 0:
        raise ValueError(f"call_timeout is a number of seconds above 0, not {call_timeout}")


def check_token(token: Optional[str]) -> None:
    """Raises `ValueError` unless `token` is None (no token) or a token the daemon can be sent:
    one or more visible ASCII characters (0x21 to 0x7E), no spaces. The Rust client, the `wazoo`
    command and the daemon's tenants file hold tokens to the same rule. The message never shows
    the token."""
    if token is None:
        return
    if not isinstance(token, str):
        raise TypeError(f"a token is a str, not {type(token).__name__}")
    rule = "a token is 1 or more visible ASCII characters (0x21 to 0x7E), no spaces"
    if not token:
        raise ValueError(f"{rule}: this one is empty (give None for no token)")
    for i, c in enumerate(token):
        if not "!" <= c <= "~":
            raise ValueError(f"{rule}: character {i + 1} of this one is U+{ord(c):04X}")


def _pem(value: Pem) -> Optional[bytes]:
    """PEM bytes given as bytes, or read from a file path."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


def _millis(timeout: Optional[float]) -> Optional[int]:
    if timeout is None:
        return None
    if timeout < 0:
        raise ValueError(f"a timeout cannot be negative: {timeout}")
    return int(round(timeout * 1000))


def _bytes(data: Data) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def _format(name: str) -> int:
    key = name.lower().replace("_", "-")
    if key not in _COUNTER_FORMATS:
        raise ValueError(f"unknown counter format {name!r}: use one of {', '.join(_COUNTER_FORMATS)}")
    return _COUNTER_FORMATS[key]


def _addresses(address: Addresses) -> List[str]:
    """The daemons' addresses as given: one, several comma-separated, or a list of either; in
    order, each once."""
    items = [address] if isinstance(address, str) else list(address)
    found: List[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"an address is a str, not {type(item).__name__}")
        for one in item.split(","):
            one = one.strip()
            if one and one not in found:
                found.append(one)
    if not found:
        raise ValueError(f"no address in {address!r}: give host:port, or several comma-separated")
    return found


class _Pending:
    """A claim a thread waits for (an Acquire or a Campaign in flight): `cancel()`, from any
    thread, ends the wait (the call is cancelled, and the daemon deletes what it queued)."""

    def __init__(self, path: str):
        self.path = path
        self.cancelled = False
        self._mutex = threading.Lock()
        self._future: Any = None

    def send(self, method: Any, request: Any, metadata: Any, timeout: Optional[float]) -> Any:
        """`method.future(request)`, the call in flight; None once cancelled."""
        with self._mutex:
            if self.cancelled:
                return None
            self._future = method.future(request, metadata=metadata, timeout=timeout)
            return self._future

    def cancel(self) -> bool:
        """Cancels the wait: True, or False if it was cancelled already."""
        with self._mutex:
            if self.cancelled:
                return False
            self.cancelled = True
            future = self._future
        if future is not None:
            future.cancel()
        return True


#: `Client.contenders`' kind of each family.
_FAMILY_KINDS = {pb.LOCK: "lock", pb.READ_LOCK: "rwlock", pb.WRITE_LOCK: "rwlock", pb.SEMAPHORE: "semaphore"}


def claim_prefix(session: int, claim_id: str) -> str:
    """The start of the names of the nodes a claim named `claim_id` (an Acquire's or a
    Campaign's) makes in client session `session`: `_c_<uuid>-`, the uuid's first 8 bytes the
    session id, the rest the first 8 bytes of the name's SHA-256 (the daemon's `ClaimTag`)."""
    digest = hashlib.sha256(claim_id.encode("utf-8")).digest()[:8]
    return f"_c_{uuid.UUID(bytes=session.to_bytes(8, 'big') + digest)}-"


class _Link:
    """The connection to one daemon, and the stubs on it. `retired` once the client's session
    left it for another member of the group and the connection was closed."""

    def __init__(self, address: str, channel: grpc.Channel):
        self.address = address
        self.channel = channel
        self.sessions = rpc.SessionsStub(channel)
        self.recipes = rpc.RecipesStub(channel)
        self.admin = rpc.AdminStub(channel)
        self.retired = False
        self._lock = threading.Lock()
        self._waiting = 0  # calls that wait by design, on it now
        self._leaving = False

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Counts a call that waits by design (an acquire, a candidacy, a queue take) while it
        runs on this connection."""
        with self._lock:
            self._waiting += 1
        try:
            yield
        finally:
            with self._lock:
                self._waiting -= 1
                close = self._leaving and self._waiting == 0 and not self.retired
                if close:
                    self.retired = True
            if close:
                self.channel.close()

    def retire(self) -> None:
        """Closes the connection once no call that waits by design is on it (a daemon that
        died or froze ends them: they are sent again elsewhere; one that was only slow to answer
        keeps them, and a waiter keeps its node): every stream still on it ends then
        (CANCELLED)."""
        with self._lock:
            self._leaving = True
            close = self._waiting == 0 and not self.retired
            if close:
                self.retired = True
        if close:
            self.channel.close()


class _Keepalive:
    """One KeepAlive stream of a client session, on one daemon: a keepalive every `every`
    seconds, until it is stopped, the stream ends or breaks, the daemon ends the session, or
    nothing sent in the last `silence` seconds was answered. Then `ended` is set, and `outcome`
    says (why, quiet: nothing was answered, over: the daemon ended the session)."""

    def __init__(self, client: "Client", link: _Link, every: float, silence: float):
        self.link = link
        self._session = client.session_id
        self._every, self._silence = every, silence
        self._tick = max(min(every, silence) / 4, 0.01)
        self._changed = threading.Condition()
        #: The time the last answered keepalive was sent: the daemon heard from the client then.
        self.answered = time.monotonic()
        self._sent: "collections.deque[float]" = collections.deque()
        self.first = False  # a keepalive was answered
        self.ended = threading.Event()
        self.outcome: Tuple[str, bool, bool] = ("", False, False)
        self._stop = threading.Event()
        self._call: Any = None
        self._call = link.sessions.KeepAlive(self._beats(), metadata=client.metadata)
        threading.Thread(target=self._read, name=f"wazoo-keepalive-{self._session}", daemon=True).start()

    def _beats(self) -> Iterator[Any]:
        """The stream's requests."""
        next_beat = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            with self._changed:
                silent = now - self.answered
            if silent > self._silence:
                self._end(f"no keepalive answer from the daemon at {self.link.address} for {silent:.1f}s",
                          quiet=True)
                return
            if now >= next_beat:
                with self._changed:
                    self._sent.append(now)
                next_beat = now + self._every
                yield pb.KeepAliveRequest(session=self._session)
            self._stop.wait(min(self._tick, max(next_beat - time.monotonic(), 0)))

    def _read(self) -> None:
        """Reads the answers: the session is over when the daemon says it is unknown."""
        try:
            for reply in self._call:
                if reply.ttl_ms == 0:
                    self._end(f"the daemon at {self.link.address} ended the client session", over=True)
                    return
                with self._changed:
                    if self._sent:
                        self.answered = self._sent.popleft()
                    self.first = True
                    self._changed.notify_all()
            self._end(f"the daemon at {self.link.address} ended the keepalive stream")
        except grpc.RpcError as e:
            self._end(f"the keepalive stream to {self.link.address} broke: {e.code().name}: {e.details()}")

    def _end(self, why: str, quiet: bool = False, over: bool = False) -> None:
        with self._changed:
            if self.ended.is_set():
                return
            self.outcome = (why, quiet, over)
            self.ended.set()
            self._changed.notify_all()
        self.stop()

    def answered_by(self, deadline: float) -> bool:
        """Waits until a keepalive was answered (True), or the stream ended or `deadline` (a
        `time.monotonic()`) passed (False)."""
        with self._changed:
            while not self.first and not self.ended.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return self.first and not self.ended.is_set()

    def stop(self) -> None:
        """Ends the stream (the daemon ends the session unless another stream keeps it)."""
        self._stop.set()
        if self._call is not None:
            self._call.cancel()


class Client:
    """A client session with a `wazoo serve` daemon.

    Connects to `address` ("host:port"; "https://host:port" or any `tls_*` argument for TLS),
    opens a session of `ttl` seconds (the daemon may clamp it: `ttl` then says what it granted)
    and keeps it alive on a daemon thread, a keepalive per ttl/3 on one stream. Everything the
    client takes lives in that session: when the session ends, its claims are let go.

    `address` may name several daemons of one group (`wazoo serve --group`): comma-separated,
    "a:7181,b:7181" as `wazoo --server` takes them, or a list. The session is opened on the
    first that answers; the others, and the members the daemon names (`members`), are where it
    is taken up again when that daemon dies or goes silent. In a group the session is bounded
    by 2/3 of the smaller of its TTL and the daemons' ZooKeeper session timeout; a daemon that
    leaves a keepalive unanswered for a third of that bound (or whose connection breaks) puts the
    session in jeopardy (`jeopardy` says why, and the "wazoo" logger warns "jeopardy: …"): it is
    taken up through another member (`Sessions.Reattach`) in the two thirds that remain, each
    held claim with it (`Recipes.Resume`: same node, same fencing token), and an acquire or a
    candidacy that was waiting is sent again there as the same claim, keeping its place in the
    queue; then the logger warns "safe: …". A registration (`register`) is then taken up by a
    fresh instance in the session (its node kept). If no member takes the session up within the
    bound, the session and its claims are lost as with one daemon. The streams of `watch` and
    `config_watch`, and the `DataWatch` and `ChildrenWatch` built on them, are opened again on
    the new member and go on from what they last reported (nothing twice, nothing missed).
    Other calls are not sent again: one made while the daemon died raises `wazoo.Unavailable`
    (and may have taken effect).

    `token` is sent with every call as `authorization: Bearer TOKEN`: one or more visible ASCII
    characters (0x21 to 0x7E), no spaces (anything else, the empty string included, raises
    `ValueError`; None sends no token). `tls_ca` is the CA (PEM bytes or a file path) the
    daemon's certificate is checked against (the system's roots when None); `tls_cert` and
    `tls_key` are this client's certificate and key, for a daemon that asks for them. `name`
    names the session in the daemon's logs.

    No call waits on a daemon that stopped answering. `call_timeout` (seconds, `CALL_TIMEOUT`
    by default) is the deadline of every call that does not wait by design (opening the session,
    releasing, closing, configuration, counters, putting into a queue, `call` …), and the longest
    a call waits for a connection to be made; a claim or `queue_take` with a timeout gets that
    timeout plus `call_timeout`. Calls that wait by design (a claim or `queue_take` with no
    timeout, streams) and everything else are bounded by the connection's liveness: it is pinged
    every `PING_EVERY` seconds, and a daemon that does not answer a ping within `PING_TIMEOUT`
    (frozen, cut off, a black hole) has the connection dropped, within `SILENCE` seconds. Such
    a call, or one past its deadline, raises `wazoo.Unavailable`.

    `lost` is a `threading.Event` set once the session is lost: the daemon ended it, the
    keepalive stream broke (the connection broke or went silent), or no keepalive was answered
    for 2/3 of the TTL (in a group: and no member took it up within the bound). `lost_reason`
    then says why. Every claim is lost with it; a claim the daemon said why it lost (e.g.
    "session-closed" when the daemon stops) keeps that reason.

    Use it as a context manager, or call `close()`. Failed calls raise `wazoo.WazooError`
    subclasses. `sessions`, `recipes` and `admin` are the generated stubs on the channel to the
    daemon that keeps the session now (another member's once it was taken up elsewhere), for
    the calls this class does not wrap (pass `metadata=client.metadata`, and
    `timeout=client.call_timeout` to a call that does not wait by design).
    """

    def __init__(
        self,
        address: Addresses,
        token: Optional[str] = None,
        tls_ca: Pem = None,
        tls_cert: Pem = None,
        tls_key: Pem = None,
        ttl: float = 10.0,
        name: str = "",
        call_timeout: float = CALL_TIMEOUT,
    ):
        check_settings(token, tls_cert, tls_key, call_timeout)
        #: Every address given, in order: where the session is opened (the first that answers)
        #: and taken up again.
        self.addresses: List[str] = _addresses(address)
        #: The address of the daemon that keeps the session now.
        self.address: str = self.addresses[0]
        #: The deadline of a call that does not wait by design, in seconds.
        self.call_timeout: float = call_timeout
        self._options = [
            # Pings, calls in flight or not, as often as PING_EVERY (tonic's server, hyper's h2,
            # answers every ping and sets no minimum time between them).
            ("grpc.keepalive_time_ms", int(PING_EVERY * 1000)),
            ("grpc.keepalive_timeout_ms", int(PING_TIMEOUT * 1000)),
            # grpcio 1.66 waits for a ping's ack this long (a minute by default), whatever the
            # keepalive timeout says.
            ("grpc.http2.ping_timeout_ms", int(PING_TIMEOUT * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            # The longest one attempt to connect may take, the HTTP/2 handshake included (a
            # frozen daemon's kernel still accepts the TCP connection): 20 s by default.
            ("grpc.min_reconnect_backoff_ms", int(call_timeout * 1000)),
        ]
        self._credentials: Optional[grpc.ChannelCredentials] = None
        if any(a.startswith("https://") for a in self.addresses) or tls_ca is not None or tls_cert is not None:
            self._credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(tls_ca), private_key=_pem(tls_key), certificate_chain=_pem(tls_cert)
            )
        #: Sent with every call; pass it to calls made on the stubs directly.
        self.metadata: Tuple[Tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token is not None else ()
        self.lost = threading.Event()
        self.lost_reason: Optional[str] = None
        #: Why the session is in jeopardy (its daemon died or went silent, and no other member
        #: of the group has taken it up yet), while it is; None otherwise.
        self.jeopardy: Optional[str] = None
        #: How many times another daemon of the group took the session up.
        self.moves = 0
        self._closing = threading.Event()
        # One lock for the session and its claims, and the changes it and they go through.
        self._state = threading.RLock()
        self._changed = threading.Condition(self._state)
        self._claims: "set[Claim]" = set()
        self._registrations: "set[Registration]" = set()
        # The claims this client's threads wait for now.
        self._pending: "set[_Pending]" = set()
        self._keepalive: Optional[_Keepalive] = None
        failed: Optional[WazooError] = None
        for candidate in self.addresses:
            link = self._connect(candidate)
            try:
                opened = self._call(link.sessions.Open, pb.OpenRequest(ttl_ms=_millis(ttl), name=name))
            except Unavailable as e:
                # Not reached, or no answer in time: the next address, if any.
                link.channel.close()
                failed = e
                continue
            except BaseException:
                link.channel.close()
                raise
            break
        else:
            assert failed is not None
            raise failed
        self._use(link)
        self.session_id: int = opened.session
        self.ttl: float = opened.ttl_ms / 1000
        # What takes the session up through another daemon of the group (empty outside one).
        self._secret: bytes = opened.secret
        #: The group's members (their addresses) as the daemon names them; empty outside a group.
        self.members: List[str] = list(opened.members)
        #: The daemons' ZooKeeper session timeout, in seconds (0 when the daemon did not say).
        self.zookeeper_timeout: float = opened.zookeeper_timeout_ms / 1000
        try:
            self._keepalive = _Keepalive(self, link, *self._pace())
        except BaseException:
            link.channel.close()
            raise
        threading.Thread(target=self._keep, name=f"wazoo-keeper-{self.session_id}", daemon=True).start()

    def __repr__(self) -> str:
        return f"Client(address={self.address!r}, session_id={self.session_id})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def in_group(self) -> bool:
        """Whether the session's daemon is in a group: the session can be taken up by another
        member."""
        return bool(self._secret)

    def close(self) -> None:
        """Closes the session, letting go of everything it holds, and the connection. It waits
        for the daemon at most `call_timeout` (nothing if the session is lost already), and
        raises nothing: a session the daemon was not told to close ends when it sees the
        keepalive stream end, or its TTL pass. In a group, a session being taken up by another
        member is closed there once it is (waited for within the bound of the session)."""
        if self._closing.is_set():
            return
        if self.in_group:
            deadline = time.monotonic() + self._limit()
            with self._state:
                while self.jeopardy is not None and not self.lost.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
        for registration in list(self._registrations):
            if registration.ttl is not None and not self.lost.is_set():
                # A TTL node outlives the session: deleted first.
                registration.close()
        with self._state:
            if self._closing.is_set():
                return
            self._closing.set()
            claims, self._claims = self._claims, set()
            registrations = list(self._registrations)
            link, keepalive = self._link, self._keepalive
            self._changed.notify_all()
        for claim in claims:
            claim._closed()
        for registration in registrations:
            registration._closed()
        try:
            if not self.lost.is_set():
                self._call(link.sessions.Close, pb.SessionRef(session=self.session_id))
        except WazooError:
            pass  # the session ends with the keepalive stream anyway
        finally:
            if keepalive is not None:
                keepalive.stop()
            link.channel.close()

    # The session.

    def _connect(self, address: str) -> _Link:
        """A channel to the daemon at `address` (nothing is sent yet)."""
        target = address.split("://", 1)[-1]
        if self._credentials is not None:
            channel = grpc.secure_channel(target, self._credentials, options=self._options)
        else:
            channel = grpc.insecure_channel(target, options=self._options)
        return _Link(address, channel)

    def _use(self, link: _Link) -> None:
        """Calls go to the daemon of `link` from now on."""
        self._link = link
        self._channel = link.channel
        self.address = link.address
        self.sessions = link.sessions
        self.recipes = link.recipes
        self.admin = link.admin

    def _limit(self) -> float:
        """How long, in seconds, the session may go unanswered before its claims count as lost:
        `CUT_OFF` of its TTL; in a group, also of the daemons' ZooKeeper session timeout (a
        session no member takes up expires that long after its daemon last reached ZooKeeper,
        and another client may then hold what this one did)."""
        base = self.ttl
        if self.in_group and self.zookeeper_timeout > 0:
            base = min(base, self.zookeeper_timeout)
        return base * CUT_OFF

    def _pace(self) -> Tuple[float, float]:
        """(every, silence): a keepalive every ttl/3; alone, a daemon is waited for to the end
        of the limit; in a group, a daemon silent for a third of it is left while two thirds
        remain to take the session up elsewhere (and at least three keepalives go out per
        third)."""
        limit = self._limit()
        if not self.in_group:
            return self.ttl / 3, limit
        silence = limit / 3
        return min(self.ttl / 3, silence / 3), silence

    def _call(self, method: Any, request: Any, timeout: Optional[float] = _DEFAULT) -> Any:
        """A unary call with the token, within `timeout` seconds (`call_timeout` unless given;
        None for a call that waits by design); a failure as its typed `WazooError`."""
        if timeout is _DEFAULT:
            timeout = self.call_timeout
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc(e) from e

    def _waiting(self, timeout: Optional[float]) -> Optional[float]:
        """The deadline of a call that waits up to `timeout` seconds by design (None: as long as
        it takes): the daemon answers TIMEOUT at `timeout`; `call_timeout` more is for the
        answer to arrive."""
        return None if timeout is None else timeout + self.call_timeout

    def _keep(self) -> None:
        """Keeps the session: waits for its keepalive stream to end; then the session is lost,
        or, in a group, taken up through another member."""
        while True:
            keepalive = self._keepalive
            assert keepalive is not None
            keepalive.ended.wait()
            why, quiet, over = keepalive.outcome
            if self._closing.is_set() or self.lost.is_set():
                return  # closed on purpose, or lost otherwise (the daemon's word on a claim)
            if over or not self.in_group:
                # The daemon ended the session, or the connection broke: the claims' Lost
                # streams say why first, if the daemon sent it.
                self._lose(why, settle=not quiet)
                return
            log.warning("jeopardy: %s; taking the session %d up through another daemon of the group",
                        why, self.session_id)
            with self._state:
                self.jeopardy = why
                self._changed.notify_all()
            try:
                link, keepalive = self._reattach(keepalive.link, keepalive.answered + self._limit())
            except WazooError as e:
                if not self._closing.is_set():
                    log.warning("lost: %s; %s", why, e)
                self._lose(f"{why}; {e}")
                return
            self._moved(link, keepalive, why)

    def _reattach(self, old: _Link, deadline: float) -> Tuple[_Link, _Keepalive]:
        """Takes the session up through a member of the group (those the daemon named, then the
        addresses the client was given; the silent daemon last) before `deadline` (a
        `time.monotonic()`): the new daemon's link and keepalive stream, its first keepalive
        answered. Raises why not."""
        candidates = list(self.members) + [a for a in self.addresses if a not in self.members]
        # The daemon that stopped answering is tried last: it may be back, but most often a try
        # there only costs time the others need.
        candidates.sort(key=lambda a: a == old.address)
        last = "no member of the group answered"
        while True:
            for address in candidates:
                if self._closing.is_set() or self.lost.is_set():
                    raise WazooError("the client is closing")
                if time.monotonic() >= deadline:
                    raise Unavailable(f"no member of the group took the session up in time ({last})")
                link = self._connect(address)
                keepalive: Optional[_Keepalive] = None
                try:
                    self._call(link.admin.Health, pb.Empty(), min(REATTACH_TRY, deadline - time.monotonic()))
                    request = pb.ReattachRequest(session=self.session_id, secret=self._secret)
                    reply = self._call(link.sessions.Reattach, request, max(deadline - time.monotonic(), 0.001))
                    keepalive = _Keepalive(self, link, *self._pace())
                    if not keepalive.answered_by(deadline):
                        raise Unavailable(f"no keepalive answered: {keepalive.outcome[0] or 'in time'}")
                except UnknownSession as e:
                    link.channel.close()
                    raise WazooError(f"the group no longer keeps the session ({address}: {e})") from e
                except WazooError as e:
                    if keepalive is not None:
                        keepalive.stop()
                    link.channel.close()
                    last = f"{address}: {e}"
                    continue
                if reply.members:
                    self.members = list(reply.members)
                return link, keepalive
            self._closing.wait(0.05)

    def _moved(self, link: _Link, keepalive: _Keepalive, why: str) -> None:
        """The session was taken up by the daemon of `link`: calls go there, and so does every
        claim held through the old one."""
        with self._state:
            closing = self._closing.is_set() or self.lost.is_set()
            if not closing:
                # At once: a claim answered through the old daemon from now on is taken up by
                # `_hold`, one answered before by this move.
                old, previous = self._link, self._keepalive
                self._use(link)
                self._keepalive = keepalive
                self.moves += 1
                claims = [c for c in self._claims if c._link is not link]
                self._changed.notify_all()
        if closing:
            # Closed while the session was taken up: closed there too.
            try:
                self._call(link.sessions.Close, pb.SessionRef(session=self.session_id))
            except WazooError:
                pass
            keepalive.stop()
            link.channel.close()
            return
        if previous is not None:
            previous.stop()
        resumed = sum(self._take_up(claim, link, why) for claim in claims)
        with self._state:
            self.jeopardy = None
            self._changed.notify_all()
        # Whatever the old daemon says from now on is not about this session: the connection
        # goes once no call waits on it any more.
        old.retire()
        log.warning("safe: the session %d was taken up by the daemon at %s; %d of %d claims taken up "
                    "again (same node, same fencing token)", self.session_id, link.address, resumed,
                    len(claims))

    def _take_up(self, claim: Claim, link: _Link, why: str) -> bool:
        """Takes `claim` up through the daemon of `link` (`Recipes.Resume`: same node, same
        fencing token) and follows it there; a claim that cannot be is lost."""
        request = pb.ResumeRequest(session=self.session_id, node=claim.node, fencing_token=claim.token)
        try:
            resumed = self._call(link.recipes.Resume, request)
        except UnknownHandle as e:
            claim._lose("node-deleted", f"{why}; the claim on {claim.node} is gone: {e}", True)
            return False
        except WazooError as e:
            claim._lose("disconnected", f"{why}; taking the claim on {claim.node} up again: {e}", True)
            return False
        ref = pb.HandleRef(session=self.session_id, handle=resumed.handle)
        stream = None
        if not claim._released:
            stream = link.recipes.Lost(ref, metadata=self.metadata)
            stream.initial_metadata()
        claim._moved(link, ref, stream)
        return True

    def _lose(self, why: str, settle: bool = False) -> None:
        """The session is lost (unless it is being closed on purpose): so is every claim. With
        `settle` (the daemon ended the session, or the connection broke: the claims' Lost
        streams end at the same moment), each claim's Lost stream gets up to `_SETTLE` seconds
        to say why first: the daemon sends a claim's event (e.g. SESSION_CLOSED when it stops)
        before it ends the session's streams."""
        with self._state:
            if self._closing.is_set() or self.lost.is_set():
                return
            self.lost_reason = why
            self.lost.set()
            self.jeopardy = None
            claims = list(self._claims)
            registrations = list(self._registrations)
            keepalive = self._keepalive
            self._changed.notify_all()
        if keepalive is not None:
            keepalive.stop()
        if settle:
            until = time.monotonic() + _SETTLE
            for claim in claims:
                if claim._follower is not threading.current_thread():
                    claim._follower.join(max(until - time.monotonic(), 0))
        for claim in claims:
            claim._lose("disconnected", why, True)
        for registration in registrations:
            registration._lose("disconnected", why)

    def _hold(self, path: str, claim: Any, link: _Link) -> Claim:
        """`claim`, as the daemon of `link` answered it, held and followed."""
        held = Claim(self, path, claim, link)
        with self._state:
            self._claims.add(held)
            # The session moved while the answer came: the claim goes where the session is.
            stale = link is not self._link and not self.lost.is_set()
            current = self._link
        if self.lost.is_set():
            held._follower.join(_SETTLE)
            held._lose("disconnected", self.lost_reason or "the client session was lost", True)
        elif stale:
            self._take_up(held, current, f"the session moved to the daemon at {current.address}")
        return held

    def _forget(self, claim: Claim) -> None:
        with self._state:
            self._claims.discard(claim)

    def _after(self, link: _Link, stop: Optional[Callable[[], bool]] = None) -> Optional[_Link]:
        """Waits until the session is kept through another daemon than `link`'s (no longer in
        jeopardy): that daemon's link; None once the session is lost or closing, once `stop()`
        (checked whenever the client's state changes), or when no move came within the bound of
        the session."""
        deadline = time.monotonic() + self._limit() + self.call_timeout
        with self._state:
            while not (self.lost.is_set() or self._closing.is_set() or (stop is not None and stop())):
                if self._link is not link and self.jeopardy is None:
                    return self._link
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            return None

    # Claims.

    def _claim(self, path: str, call: str, request: Any, timeout: Optional[float] = None,
               pending: Optional["_Pending"] = None) -> Claim:
        """Sends `request` (`call` of the Recipes service: an Acquire, a Campaign or a GroupJoin)
        through the daemon that keeps the session, and holds and follows the claim it answers.
        In a group, a call the daemon broke off (it died or went silent: no answer of its own) is
        sent again once the session is taken up by another member, as the same claim: with the
        request's `claim_id` and `retry` set (an Acquire's, a Campaign's), it finds the node the
        first one made and keeps its place in the queue. A `timeout` counts from the first
        send. `pending` is the wait, which another thread may cancel (`Cancelled`)."""
        pending = pending if pending is not None else _Pending(path)
        with self._state:
            self._pending.add(pending)
        try:
            return self._claim_once_answered(path, call, request, timeout, pending)
        finally:
            with self._state:
                self._pending.discard(pending)

    def _claim_once_answered(
        self, path: str, call: str, request: Any, timeout: Optional[float], pending: "_Pending"
    ) -> Claim:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            link = self._link
            try:
                # The connection is kept until the claim is followed (a move may be retiring it).
                with link.waiting():
                    if link.retired:
                        raise Unavailable(f"the session left the daemon at {link.address} for another "
                                          "member of the group", None, grpc.StatusCode.UNAVAILABLE)
                    answer = self._answer(pending, getattr(link.recipes, call), request, self._waiting(timeout))
                    if answer is None:
                        self._sweep(link, path, call, request)
                        raise Cancelled(f"the wait for the claim at {path} was cancelled")
                    held = self._hold(path, answer, link)
            except Cancelled:
                raise
            except WazooError as e:
                # The daemon broke off (no answer of its own) in a group: once the session is
                # taken up elsewhere, the request goes again there, as the same claim (or, if the
                # wait was cancelled meanwhile, what it left is swept there).
                if not (self.in_group and e.kind is None and (isinstance(e, Unavailable) or link.retired)):
                    raise
                following = self._after(link)
                if following is None:
                    if self.lost.is_set():
                        raise Unavailable(f"{e.details}; the session was lost: {self.lost_reason}",
                                          None, e.code) from e
                    raise
                if hasattr(request, "retry"):
                    request.retry = True
                if deadline is not None:
                    timeout = max(deadline - time.monotonic(), 0.0)
                    request.timeout_ms = _millis(timeout)
                continue
            if pending.cancelled:
                # Cancelled as the answer came: the claim is let go, and the wait ends as cancelled.
                try:
                    held.release()
                except WazooError as e:
                    log.info("releasing the claim on %s, had as its wait was cancelled: %s", held.node, e)
                raise Cancelled(f"the wait for the claim at {path} was cancelled")
            return held

    def _answer(self, pending: "_Pending", method: Any, request: Any, timeout: Optional[float]) -> Any:
        """`method(request)`'s answer, within `timeout`; None once `pending` is cancelled."""
        future = pending.send(method, request, self.metadata, timeout)
        if future is None:
            return None
        try:
            return future.result()
        except grpc.FutureCancelledError:
            return None
        except grpc.RpcError as e:
            if pending.cancelled and e.code() == grpc.StatusCode.CANCELLED:
                return None
            raise from_rpc(e) from e

    def _sweep(self, link: _Link, path: str, call: str, request: Any) -> None:
        """After a cancelled Acquire or Campaign: lets go of any node it left. The daemon deletes
        the node of a call cancelled while it waits; but a cancel that crossed the daemon's
        answer leaves a claim held in the session, and one cancelled across a fail-over leaves
        the node it queued through the old daemon. Such a node (named by the request's
        `claim_id`, as `Contender.node` shows it) is taken once more by the same request with
        `retry` and no wait: a queued node is then given up (deleted), a held one released."""
        claim_id = getattr(request, "claim_id", "")
        if not claim_id:
            return
        prefix = claim_prefix(self.session_id, claim_id)
        kind = "election" if call == "Campaign" else _FAMILY_KINDS.get(request.family, "detect")
        try:
            reply = self._call(link.recipes.Holders, _holders_request(path, kind, None))
            if not any(c.node.rsplit("/", 1)[-1].startswith(prefix) for c in reply.contenders):
                return
            request.retry = True
            request.timeout_ms = 0
            answer = self._call(getattr(link.recipes, call), request)
        except Timeout:
            return  # not had at once: its node given up
        except WazooError as e:
            log.info("the node of the cancelled claim at %s was not swept (%s): it goes with the session", path, e)
            return
        try:
            self._call(link.recipes.Release, pb.HandleRef(session=self.session_id, handle=answer.handle))
        except WazooError as e:
            log.info("releasing the node of the cancelled claim at %s: %s", path, e)

    def cancel_pending(self, path: Optional[str] = None) -> int:
        """Cancels the claims this client's threads wait for now (`lock`, `rwlock`, `semaphore`,
        `elect`, and `Lock.acquire` / `Election.run`), those at `path` only when given: each
        waiting call raises `wazoo.Cancelled`, and leaves no node in ZooKeeper. Returns how many
        waits were cancelled (0, and nothing done, when none was waiting)."""
        with self._state:
            waits = [p for p in self._pending if path is None or p.path == path]
        return sum(1 for p in waits if p.cancel())

    def _acquire(
        self, path: str, family: int, timeout: Optional[float], recipe: str, leases: int = 0,
        pending: Optional["_Pending"] = None, holder_id: str = "",
    ) -> Claim:
        request = pb.AcquireRequest(
            session=self.session_id, path=path, family=family, max_leases=leases,
            timeout_ms=_millis(timeout), recipe=recipe, holder_id=holder_id,
            # The claim's name: an Acquire sent again through another daemon of the group finds
            # the node the first one made, and keeps its place in the queue.
            claim_id=uuid.uuid4().hex,
        )
        return self._claim(path, "Acquire", request, timeout, pending)

    def lock(self, path: str, timeout: Optional[float] = None, recipe: str = "", holder_id: str = "") -> Claim:
        """Takes the lock at `path`, waiting until it is held or `timeout` seconds pass
        (`wazoo.Timeout`; None waits as long as it takes, while the daemon answers its pings:
        `wazoo.Unavailable` otherwise). `recipe` names the lock recipe (the daemon's standard
        one when empty). `holder_id` says who holds it (at most 128 bytes of printable text;
        this session's name when empty): the daemon writes it into the lock's node with the
        session's name and address, where `holders`, `list_claims` and kazoo show it. Use the
        `Claim` as a context manager, or call its `release()`. Another thread may cancel the
        wait (`cancel_pending`): it then raises `wazoo.Cancelled`, and leaves no node."""
        return self._acquire(path, pb.LOCK, timeout, recipe, holder_id=holder_id)

    def rwlock(
        self, path: str, mode: str = "write", timeout: Optional[float] = None, recipe: str = "",
        holder_id: str = "",
    ) -> Claim:
        """Takes the `mode` ("read" or "write") side of the read/write lock at `path`, as
        `lock` takes a lock."""
        families = {"read": pb.READ_LOCK, "write": pb.WRITE_LOCK}
        if mode not in families:
            raise ValueError(f"a read/write lock's mode is 'read' or 'write', not {mode!r}")
        return self._acquire(path, families[mode], timeout, recipe, holder_id=holder_id)

    def semaphore(
        self, path: str, leases: int, timeout: Optional[float] = None, recipe: str = "", holder_id: str = ""
    ) -> Claim:
        """Takes one of the `leases` leases of the semaphore at `path`, as `lock` takes a lock."""
        if leases < 1:
            raise ValueError(f"a semaphore has at least one lease, not {leases}")
        return self._acquire(path, pb.SEMAPHORE, timeout, recipe, leases, holder_id=holder_id)

    def elect(self, path: str, id: str, timeout: Optional[float] = None, recipe: str = "") -> Claim:
        """Runs for leadership of the election at `path` as candidate `id` (shown to observers),
        waiting until this client leads or `timeout` seconds pass; the `Claim` is the
        leadership. In a group, a candidate waiting when its daemon dies keeps its place: the
        Campaign is sent again, as the same candidacy, through the member that takes the
        session up. Another thread may cancel the wait (`cancel_pending`)."""
        return self._elect(path, id, timeout, recipe)

    def _elect(self, path: str, id: str, timeout: Optional[float], recipe: str,
               pending: Optional["_Pending"] = None) -> Claim:
        request = pb.CampaignRequest(
            session=self.session_id, path=path, id=id, timeout_ms=_millis(timeout), recipe=recipe,
            # As an Acquire's: sent again through another daemon of the group, the Campaign finds
            # the candidate node the first one made.
            claim_id=uuid.uuid4().hex,
        )
        return self._claim(path, "Campaign", request, timeout, pending)

    def join(self, path: str, name: str, data: Data = b"", recipe: str = "") -> Claim:
        """Joins the group at `path` as member `name` (`GroupJoin`): an ephemeral node
        `<path>/<name>` holding `data`, for as long as the `Claim` is held. It does not wait:
        another member of that name is `wazoo.NodeExists`. The claim's `node` is the member's
        node and its `token` 0 (a membership fences nothing); it is followed, taken up through a
        daemon group and released (the node deleted) as a lock is. In a group, a join the daemon
        broke off is sent again through the member that takes the session up; if the first one
        had made the node, that raises `wazoo.NodeExists` (the node then goes with the
        session)."""
        request = pb.GroupJoinRequest(session=self.session_id, path=path, name=name, data=_bytes(data), recipe=recipe)
        return self._claim(path, "GroupJoin", request)

    def group_members(self, path: str, recipe: str = "") -> List[Member]:
        """The members of the group at `path` (`GroupMembers`), sorted by name; none when the
        path does not exist."""
        try:
            membership = self._call(self.recipes.GroupMembers, pb.PathRequest(path=path, recipe=recipe))
        except NoNode:
            return []
        return [Member(m.name, m.data) for m in membership.members]

    def register(self, path: str, data: Data = b"", ttl: Optional[float] = None, recipe: str = "") -> "Registration":
        """Registers `path` holding `data` and keeps it present (Curator's `PersistentNode`, an
        instance in service discovery; `wazoo register`): an ephemeral node, or with `ttl`
        (seconds, at least 1), a persistent node with that TTL (the ZooKeeper servers must
        enable TTL nodes, else `wazoo.Unimplemented`). A thread tends it as long as it is held:
        made again when someone deletes it, its data set back when someone changes it. Returns
        the `Registration` (a context manager; `close()` deletes the node). A path another
        session (or another registration) holds is `wazoo.NodeExists`; a persistent node there,
        for an ephemeral registration, `wazoo.InvalidArgument`. `recipe` names the registration
        recipe ("registration" when empty). See `Registration` for what a daemon group keeps;
        a `register` call cut short by its daemon's death is not sent again (`wazoo.Unavailable`:
        it may have taken effect, and its node then goes with the session)."""
        if ttl is not None and ttl < MIN_TTL:
            raise ValueError(f"a registration's TTL is at least {MIN_TTL:g} s, not {ttl}")
        registration = Registration(self, path, data, ttl, recipe or "registration")
        registration._start()
        return registration

    # Queues, configuration and counters.

    def queue_put(self, path: str, data: Data, priority: Optional[int] = None, recipe: str = "") -> str:
        """Puts `data` into the queue at `path` (with `priority`, 0 first to 255, a priority
        queue's item); returns the item's node."""
        request = pb.QueuePutRequest(path=path, data=_bytes(data), priority=priority, recipe=recipe)
        return self._call(self.recipes.QueuePut, request).node

    def queue_take(self, path: str, timeout: Optional[float] = None, recipe: str = "") -> bytes:
        """Takes the head item of the queue at `path`, waiting for one until `timeout` seconds
        pass (`wazoo.Timeout`; None waits as long as it takes, while the daemon answers its
        pings: `wazoo.Unavailable` otherwise); returns its data."""
        request = pb.WaitRequest(path=path, timeout_ms=_millis(timeout), recipe=recipe)
        link = self._link
        with link.waiting():
            return self._call(link.recipes.QueueTake, request, self._waiting(timeout)).data

    def queue_len(self, path: str, recipe: str = "") -> int:
        """The number of items in the queue at `path`, claimed ones included."""
        return self._call(self.recipes.QueueLen, pb.PathRequest(path=path, recipe=recipe)).items

    def config_get(self, path: str, recipe: str = "") -> Optional[Tuple[bytes, int]]:
        """The value at `path` as (data, version), or None if the node does not exist."""
        entry = self._call(self.recipes.ConfigGet, pb.PathRequest(path=path, recipe=recipe))
        return (entry.data, entry.version) if entry.exists else None

    def config_set(self, path: str, data: Data, version: Optional[int] = None, recipe: str = "") -> int:
        """Sets the value at `path` (creating it and missing parents); with `version`, only if
        the value is still at that version (`wazoo.BadVersion` otherwise). Returns the new
        version."""
        request = pb.ConfigSetRequest(path=path, data=_bytes(data), expected_version=version, recipe=recipe)
        return self._call(self.recipes.ConfigSet, request).version

    def config_delete(self, path: str, version: Optional[int] = None, recipe: str = "") -> bool:
        """Deletes the value at `path` (`ConfigDelete`); with `version`, only if it is still at
        that version. Returns True once deleted. As kazoo's `delete(path, version=-1)`, a node
        that does not exist raises `wazoo.NoNode` (deleting twice raises the second time);
        another version raises `wazoo.BadVersion`, a node with children `wazoo.NotEmpty`. An
        ephemeral node is someone's claim, registration or membership, not a value: refused with
        `wazoo.InvalidArgument`, and kept. The daemon deletes on its own ZooKeeper session with
        no recipe: `recipe` is taken for symmetry with `config_set`, and not sent."""
        del recipe  # ConfigDeleteRequest has no recipe: the delete is no recipe's
        self._call(self.recipes.ConfigDelete, pb.ConfigDeleteRequest(path=path, version=version))
        return True

    def config_watch(self, path: str, recipe: str = "") -> Stream[Optional[Tuple[bytes, int]]]:
        """The value at `path` now and after every change, as `config_get` returns it, until the
        stream is cancelled (or fails: `wazoo.Unavailable` within `SILENCE` seconds of the
        daemon's last answer to a ping). Through a daemon group it carries on through the member
        that takes the session up, as `watch` does: the value found there is reported only if it
        differs from the last one reported."""
        request = pb.PathRequest(path=path, recipe=recipe)

        def open_on(link: _Link) -> Any:
            return link.recipes.ConfigWatch(request, metadata=self.metadata)

        link = self._link
        return Stream(open_on(link), lambda e: (e.data, e.version) if e.exists else None, link, self, open_on)

    def counter_get(self, path: str, format: str = "kazoo", recipe: str = "") -> int:
        """The counter at `path` (0 when absent), stored as `format`: "kazoo" (decimal text),
        "curator-shared" (4-byte int) or "curator-atomic" (8-byte long)."""
        request = pb.CounterGetRequest(path=path, format=_format(format), recipe=recipe)
        return self._call(self.recipes.CounterGet, request).value

    def counter_add(self, path: str, delta: int, format: str = "kazoo", recipe: str = "") -> int:
        """Adds `delta` to the counter at `path` atomically; returns the new value."""
        request = pb.CounterAddRequest(path=path, delta=delta, format=_format(format), recipe=recipe)
        return self._call(self.recipes.CounterAdd, request).value

    def watch(self, path: str, recursive: bool = False, recipe: str = "") -> Stream[WatchEvent]:
        """A cache of the node at `path` (with `recursive`, of the whole tree below it): a
        CREATED event for every node there, then INITIALIZED, then every change, until the
        stream is cancelled. The daemon keeps it consistent across its broken connections to
        ZooKeeper; a broken or silent connection to the daemon ends it with
        `wazoo.Unavailable` (within `SILENCE` seconds of the daemon's last answer to a ping).

        Through a daemon group, a broken or silent daemon does not end it: once another member
        takes the session up, the stream is opened again there, and it reports what changed
        since its last event, from the nodes it finds there (a node new since is CREATED, one
        gone DELETED, one made again DELETED then CREATED, one whose data was set CHANGED, and
        an unchanged one nothing); its INITIALIZED comes once. It ends, as with one daemon, when
        the session is lost or closing."""
        request = pb.WatchRequest(path=path, recursive=recursive, recipe=recipe)

        def open_on(link: _Link) -> Any:
            return link.recipes.Watch(request, metadata=self.metadata)

        link = self._link
        return _CacheStream(open_on(link), _watch_event, link, self, open_on)

    # Any recipe.

    def call(self, recipe: str, function: str, args: Any = None) -> Any:
        """Calls `function` ("interface.function", e.g. "lock.acquire") of `recipe` with `args`
        (a list, positional, or a dict by parameter name; JSON as docs/src/reference/grpc.md maps
        the WIT types) and returns its result decoded from JSON: None for none, {"ok": …} or
        {"err": …} for a result. The instance ends with the call, deleting its ephemeral nodes.
        An empty `function` runs a custom recipe's `run` with `args` a list of strings."""
        args_json = json.dumps(args if args is not None else [])
        request = pb.InvokeRequest(recipe=recipe, function=function, args_json=args_json)
        return json.loads(self._call(self.recipes.Invoke, request).result_json)

    # Who holds, who waits.

    def contenders(self, path: str, kind: str = "detect", leases: Optional[int] = None) -> List[Contender]:
        """Who holds the claim at `path` and who waits, holders first, in queue order (as kazoo's
        `Lock.contenders()`, with each contender's node, session and fencing token), read by the
        daemon after a sync. `kind` is "lock", "rwlock", "semaphore" or "election", or "detect"
        to tell it by the nodes' names (`wazoo.InvalidArgument` if they are of several kinds).
        `leases`, for a semaphore, is its number of leases (ZooKeeper does not keep it): the
        first `leases` lease nodes hold. A path that does not exist has none."""
        reply = self._call(self.recipes.Holders, _holders_request(path, kind, leases))
        return [_contender(c) for c in reply.contenders]

    def holders(self, path: str, kind: str = "detect", leases: Optional[int] = None) -> List[Contender]:
        """Those of `contenders(path, kind, leases)` that hold (the lock, a lease, the
        leadership)."""
        return [c for c in self.contenders(path, kind, leases) if c.holds]

    def leader(self, path: str) -> Optional[Contender]:
        """The leader of the election at `path` (`elect`): its `id`, node and fencing token; None
        when nobody leads."""
        return next(iter(self.holders(path, "election")), None)

    def list_claims(self, prefix: str = "/") -> List[ClaimInfo]:
        """Every claim (lock, read/write lock, semaphore, election) at `prefix` or below it, by
        path, read by the daemon from ZooKeeper: each with its contenders, holders first, then
        waiters in queue order, with their identities (`Contender.data`), tokens and `since_ms`.
        Claims taken by any client (wazoo, Curator, kazoo) show; a tenant sees its namespace
        only. `wazoo.InvalidPath` for a malformed prefix, `wazoo.LimitExceeded` past 10000 nodes
        below it."""
        reply = self._call(self.admin.ListClaims, pb.ListClaimsRequest(prefix=prefix))
        return [_claim_info(c) for c in reply.claims]

    def list_sessions(self) -> List[SessionInfo]:
        """The client sessions open on the daemon (a tenant's own only), oldest first: name,
        peer address, when opened, and the claims each holds."""
        reply = self._call(self.admin.ListSessions, pb.Empty())
        return [_session_info(s) for s in reply.sessions]

    # kazoo's recipe objects.

    def Lock(self, path: str, recipe: str = "", identifier: str = "") -> "_recipes.Lock":
        """The lock at `path` as kazoo's `Lock`: `acquire(blocking=True, timeout=None)` returns
        True once it is held, or False at once with `blocking=False` when it is not free;
        `release()`, `contenders()`, `is_acquired`, and `with lock:`. `identifier` (a keyword:
        the second argument is the recipe) is kazoo's: who holds it, in the lock's node, with
        this session's name and address."""
        from .recipes import Lock
        return Lock(self, path, pb.LOCK, recipe=recipe, identifier=identifier)

    def ReadLock(self, path: str, recipe: str = "", identifier: str = "") -> "_recipes.Lock":
        """The read side of the read/write lock at `path`, as `Lock` (kazoo's `ReadLock`)."""
        from .recipes import Lock
        return Lock(self, path, pb.READ_LOCK, recipe=recipe, identifier=identifier)

    def WriteLock(self, path: str, recipe: str = "", identifier: str = "") -> "_recipes.Lock":
        """The write side of the read/write lock at `path`, as `Lock` (kazoo's `WriteLock`)."""
        from .recipes import Lock
        return Lock(self, path, pb.WRITE_LOCK, recipe=recipe, identifier=identifier)

    def Semaphore(self, path: str, max_leases: int = 1, recipe: str = "", identifier: str = "") -> "_recipes.Lock":
        """A lease of the semaphore at `path` with `max_leases` leases, as `Lock` (kazoo's
        `Semaphore`; `lease_holders()` as kazoo's)."""
        from .recipes import Lock
        if max_leases < 1:
            raise ValueError(f"a semaphore has at least one lease, not {max_leases}")
        return Lock(self, path, pb.SEMAPHORE, leases=max_leases, recipe=recipe, identifier=identifier)

    def Election(self, path: str, identifier: str = "", recipe: str = "") -> "_recipes.Election":
        """The election at `path` as kazoo's `Election`, this client a candidate named
        `identifier`: `run(func, *args)` waits to lead, calls `func`, then steps down;
        `contenders()` the candidates' ids, the leader first."""
        from .recipes import Election
        return Election(self, path, identifier, recipe=recipe)

    def Party(self, path: str, identifier: Optional[str] = None, recipe: str = "") -> "_recipes.Party":
        """The party at `path` as kazoo's `Party`, this client a member identified by
        `identifier`: `join()`, `leave()`, `len(party)` and iteration over the members'
        identifiers. See `wazoo.recipes.Party` for what differs from kazoo's."""
        from .recipes import Party
        return Party(self, path, identifier, recipe=recipe)

    def DataWatch(self, path: str, func: "Optional[Callable[..., Any]]" = None, recipe: str = "") -> "_recipes.DataWatch":
        """Calls `func(data, stat)` with the node at `path` now, and again after every change,
        as kazoo's `DataWatch`: `data` None (and `stat` None) while the node does not exist.
        See `wazoo.recipes.DataWatch`."""
        from .recipes import DataWatch
        return DataWatch(self, path, func, recipe=recipe)

    def ChildrenWatch(self, path: str, func: "Optional[Callable[..., Any]]" = None, recipe: str = "") -> "_recipes.ChildrenWatch":
        """Calls `func(children)` with the names of the children of `path` now (sorted; empty while
        the node does not exist), and again after every child added or removed, as kazoo's
        `ChildrenWatch`. See `wazoo.recipes.ChildrenWatch`."""
        from .recipes import ChildrenWatch
        return ChildrenWatch(self, path, func, recipe=recipe)

    def _children(self, path: str, recipe: str = "") -> "Stream[Any]":
        """The children of `path` (names and data, sorted by name) now and after every child
        added or removed (`GroupWatch`)."""
        request = pb.PathRequest(path=path, recipe=recipe)

        def open_on(link: _Link) -> Any:
            return link.recipes.GroupWatch(request, metadata=self.metadata)

        link = self._link
        return Stream(open_on(link), lambda m: m, link, self, open_on)


if TYPE_CHECKING:  # pragma: no cover
    from . import recipes as _recipes
