"""The client of a `wazoo serve` daemon: a client session kept alive on a thread, claims with
fencing tokens that say when they are lost, and the daemon's other recipes as plain calls."""
from __future__ import annotations

import collections
import json
import os
import threading
import time
from typing import Any, Callable, Generic, Iterator, NamedTuple, Optional, Tuple, TypeVar, Union

import grpc

from ._proto import wazoo_pb2 as pb
from ._proto import wazoo_pb2_grpc as rpc
from .errors import LockLost, Unavailable, WazooError, from_rpc

T = TypeVar("T")
Data = Union[bytes, str]
Pem = Union[bytes, str, "os.PathLike[str]", None]

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


class Stream(Generic[T]):
    """The events of a streaming call, as an iterator, until `cancel()` (or the end of a `with`
    block). A failed stream raises the call's `WazooError` from `next()`; a cancelled one ends
    the iteration. A stream waits for events as long as it takes, but not on a daemon that
    stopped answering: within `SILENCE` seconds the connection is dropped, and `next()` raises
    `wazoo.Unavailable`."""

    def __init__(self, call: Any, convert: Callable[[Any], T]):
        self._call = call
        self._convert = convert
        self._cancelled = False

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            item = next(self._call)
        except grpc.RpcError as e:
            if self._cancelled and e.code() == grpc.StatusCode.CANCELLED:
                raise StopIteration from None
            raise from_rpc(e) from e
        return self._convert(item)

    def cancel(self) -> None:
        """Ends the stream: the daemon stops following the change."""
        self._cancelled = True
        self._call.cancel()

    def __enter__(self) -> "Stream[T]":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()


class Claim:
    """A claim the client's session holds: a lock, a side of a read/write lock, a semaphore
    lease, or a leadership.

    Attributes:
        path: the path it was taken at.
        node: the claim's node.
        token: the fencing token (the node's czxid): every later holder's is greater. Pass it to
            what the claim protects.
        recipe_version: the version (SHA-256, 12 hex digits) of the recipe component serving it.
        handle: the daemon's handle of the claim.
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
    """

    def __init__(self, client: "Client", path: str, claim: Any):
        self.path = path
        self.node: str = claim.node
        self.token: int = claim.fencing_token
        self.recipe_version: str = claim.recipe_version
        self.handle: int = claim.handle
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.why: Optional[str] = None
        self._client = client
        self._ref = pb.HandleRef(session=client.session_id, handle=claim.handle)
        self._state = threading.Lock()
        self._released = False
        # The daemon holds no handle of the claim any more, or cannot be reached.
        self._gone = False
        self._stream = client.recipes.Lost(self._ref, metadata=client.metadata)
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
        """Waits for the daemon's word that the claim is lost."""
        try:
            for event in self._stream:
                reason = loss_reason(event)
                self._lose(reason, f"the claim on {self.node} was lost: {reason}", reason in _HANDLE_GONE)
                if reason == "client-session-ended":
                    # The daemon's word: the session is gone, whatever the keepalives say yet.
                    self._client._lose(f"the daemon at {self._client.address} ended the client session",
                                       settle=True)
                return
            # A daemon older than CLIENT_SESSION_ENDED ends the stream quietly when the handle is
            # closed without a loss of the node: released, or its session ended.
            self._lose("disconnected", f"the daemon closed the claim on {self.node}", True)
        except grpc.RpcError as e:
            why = f"the Lost stream of {self.node} broke: {e.code().name}: {e.details()}"
            broken = isinstance(from_rpc(e), Unavailable)
            self._lose("disconnected", why, broken)
            if broken:
                # The connection broke (or went silent), and the keepalive stream on it too: the
                # session ends with it.
                self._client._lose(f"the connection to the daemon at {self._client.address} broke: "
                                   f"{e.code().name}: {e.details()}", settle=True)

    def _lose(self, reason: str, why: str, gone: bool = False) -> None:
        with self._state:
            if self._released or self.lost.is_set():
                return
            self.reason, self.why = reason, why
            self._gone = gone
            self.lost.set()

    def check(self) -> None:
        """Raises `LockLost` if the claim was lost."""
        if self.lost.is_set():
            raise LockLost(self.why or "the claim was lost", self.reason or "unknown")

    def release(self) -> None:
        """Lets the claim go (its node deleted). Releasing twice does nothing, and neither does
        releasing a claim whose handle the daemon no longer holds (lost with the connection or the
        client session, or let go by the daemon). Raises `wazoo.Unavailable` if the daemon does
        not answer within the client's `call_timeout`."""
        with self._state:
            if self._released:
                return
            self._released = True
            gone = self._gone or self._client.lost.is_set()
        self._stream.cancel()
        self._client._forget(self)
        if not gone:
            self._client._call(self._client.recipes.Release, self._ref)

    def _closed(self) -> None:
        """The session was closed on purpose: no loss to report."""
        with self._state:
            self._released = True
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


class Client:
    """A client session with a `wazoo serve` daemon.

    Connects to `address` ("host:port"; "https://host:port" or any `tls_*` argument for TLS),
    opens a session of `ttl` seconds (the daemon may clamp it: `ttl` then says what it granted)
    and keeps it alive on a daemon thread, a keepalive per ttl/3 on one stream. Everything the
    client takes lives in that session: when the session ends, its claims are let go.

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
    for 2/3 of the TTL. `lost_reason` then says why. Every claim is lost with it; a claim the
    daemon said why it lost (e.g. "session-closed" when the daemon stops) keeps that reason.

    Use it as a context manager, or call `close()`. Failed calls raise `wazoo.WazooError`
    subclasses. `sessions`, `recipes` and `admin` are the generated stubs on the same channel,
    for the calls this class does not wrap (pass `metadata=client.metadata`, and
    `timeout=client.call_timeout` to a call that does not wait by design).
    """

    def __init__(
        self,
        address: str,
        token: Optional[str] = None,
        tls_ca: Pem = None,
        tls_cert: Pem = None,
        tls_key: Pem = None,
        ttl: float = 10.0,
        name: str = "",
        call_timeout: float = CALL_TIMEOUT,
    ):
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        check_token(token)
        if not call_timeout > 0:
            raise ValueError(f"call_timeout is a number of seconds above 0, not {call_timeout}")
        self.address = address
        #: The deadline of a call that does not wait by design, in seconds.
        self.call_timeout: float = call_timeout
        target = address.split("://", 1)[-1]
        options = [
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
        if address.startswith("https://") or tls_ca is not None or tls_cert is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(tls_ca), private_key=_pem(tls_key), certificate_chain=_pem(tls_cert)
            )
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        #: Sent with every call; pass it to calls made on the stubs directly.
        self.metadata: Tuple[Tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token is not None else ()
        self.sessions = rpc.SessionsStub(self._channel)
        self.recipes = rpc.RecipesStub(self._channel)
        self.admin = rpc.AdminStub(self._channel)
        self.lost = threading.Event()
        self.lost_reason: Optional[str] = None
        self._closing = threading.Event()
        self._state = threading.Lock()
        self._claims: "set[Claim]" = set()
        self._sent: "collections.deque[float]" = collections.deque()
        self._keepalive: Any = None
        try:
            opened = self._call(self.sessions.Open, pb.OpenRequest(ttl_ms=_millis(ttl), name=name))
        except BaseException:
            self._channel.close()
            raise
        self.session_id: int = opened.session
        self.ttl: float = opened.ttl_ms / 1000
        self._answered = time.monotonic()
        self._keepalive = self.sessions.KeepAlive(self._beats(), metadata=self.metadata)
        threading.Thread(target=self._keep, name=f"wazoo-keepalive-{self.session_id}", daemon=True).start()

    def __repr__(self) -> str:
        return f"Client(address={self.address!r}, session_id={self.session_id})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the session, letting go of everything it holds, and the connection. It waits
        for the daemon at most `call_timeout` (nothing if the session is lost already), and
        raises nothing: a session the daemon was not told to close ends when it sees the
        keepalive stream end, or its TTL pass."""
        if self._closing.is_set():
            return
        self._closing.set()
        with self._state:
            claims, self._claims = self._claims, set()
        for claim in claims:
            claim._closed()
        try:
            if not self.lost.is_set():
                self._call(self.sessions.Close, pb.SessionRef(session=self.session_id))
        except WazooError:
            pass  # the session ends with the keepalive stream anyway
        finally:
            self._keepalive.cancel()
            self._channel.close()

    # The session.

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

    def _beats(self) -> Iterator[Any]:
        """The keepalive stream's requests: one per ttl/3, until the client closes or no
        keepalive was answered for the cut-off."""
        every, tick = self.ttl / 3, max(self.ttl / 12, 0.01)
        next_beat = time.monotonic()
        while not self._closing.is_set() and not self.lost.is_set():
            now = time.monotonic()
            with self._state:
                silent = now - self._answered
            if silent > self.ttl * CUT_OFF:
                self._lose(f"no keepalive answer from the daemon at {self.address} for {silent:.1f}s")
                return
            if now >= next_beat:
                with self._state:
                    self._sent.append(now)
                next_beat = now + every
                yield pb.KeepAliveRequest(session=self.session_id)
            self._closing.wait(min(tick, max(next_beat - time.monotonic(), 0)))

    def _keep(self) -> None:
        """Reads the keepalive answers: the session is lost when the daemon says it is unknown
        or the stream ends."""
        try:
            for reply in self._keepalive:
                if reply.ttl_ms == 0:
                    self._lose(f"the daemon at {self.address} ended the client session", settle=True)
                    return
                with self._state:
                    if self._sent:
                        self._answered = self._sent.popleft()
            self._lose(f"the daemon at {self.address} ended the keepalive stream", settle=True)
        except grpc.RpcError as e:
            why = f"the keepalive stream to {self.address} broke: {e.code().name}: {e.details()}"
            self._lose(why, settle=True)

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
            claims = list(self._claims)
        if self._keepalive is not None:
            self._keepalive.cancel()
        if settle:
            until = time.monotonic() + _SETTLE
            for claim in claims:
                if claim._follower is not threading.current_thread():
                    claim._follower.join(max(until - time.monotonic(), 0))
        for claim in claims:
            claim._lose("disconnected", why, True)

    def _hold(self, path: str, claim: Any) -> Claim:
        held = Claim(self, path, claim)
        with self._state:
            self._claims.add(held)
        if self.lost.is_set():
            held._follower.join(_SETTLE)
            held._lose("disconnected", self.lost_reason or "the client session was lost", True)
        return held

    def _forget(self, claim: Claim) -> None:
        with self._state:
            self._claims.discard(claim)

    # Claims.

    def _acquire(
        self, path: str, family: int, timeout: Optional[float], recipe: str, leases: int = 0
    ) -> Claim:
        request = pb.AcquireRequest(
            session=self.session_id, path=path, family=family, max_leases=leases,
            timeout_ms=_millis(timeout), recipe=recipe,
        )
        return self._hold(path, self._call(self.recipes.Acquire, request, self._waiting(timeout)))

    def lock(self, path: str, timeout: Optional[float] = None, recipe: str = "") -> Claim:
        """Takes the lock at `path`, waiting until it is held or `timeout` seconds pass
        (`wazoo.Timeout`; None waits as long as it takes, while the daemon answers its pings:
        `wazoo.Unavailable` otherwise). `recipe` names the lock recipe (the daemon's standard
        one when empty). Use the `Claim` as a context manager, or call its `release()`."""
        return self._acquire(path, pb.LOCK, timeout, recipe)

    def rwlock(
        self, path: str, mode: str = "write", timeout: Optional[float] = None, recipe: str = ""
    ) -> Claim:
        """Takes the `mode` ("read" or "write") side of the read/write lock at `path`, as
        `lock` takes a lock."""
        families = {"read": pb.READ_LOCK, "write": pb.WRITE_LOCK}
        if mode not in families:
            raise ValueError(f"a read/write lock's mode is 'read' or 'write', not {mode!r}")
        return self._acquire(path, families[mode], timeout, recipe)

    def semaphore(self, path: str, leases: int, timeout: Optional[float] = None, recipe: str = "") -> Claim:
        """Takes one of the `leases` leases of the semaphore at `path`, as `lock` takes a lock."""
        if leases < 1:
            raise ValueError(f"a semaphore has at least one lease, not {leases}")
        return self._acquire(path, pb.SEMAPHORE, timeout, recipe, leases)

    def elect(self, path: str, id: str, timeout: Optional[float] = None, recipe: str = "") -> Claim:
        """Runs for leadership of the election at `path` as candidate `id` (shown to observers),
        waiting until this client leads or `timeout` seconds pass; the `Claim` is the
        leadership."""
        request = pb.CampaignRequest(
            session=self.session_id, path=path, id=id, timeout_ms=_millis(timeout), recipe=recipe
        )
        return self._hold(path, self._call(self.recipes.Campaign, request, self._waiting(timeout)))

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
        return self._call(self.recipes.QueueTake, request, self._waiting(timeout)).data

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

    def config_watch(self, path: str, recipe: str = "") -> Stream[Optional[Tuple[bytes, int]]]:
        """The value at `path` now and after every change, as `config_get` returns it, until the
        stream is cancelled (or fails: `wazoo.Unavailable` within `SILENCE` seconds of the
        daemon's last answer to a ping)."""
        call = self.recipes.ConfigWatch(pb.PathRequest(path=path, recipe=recipe), metadata=self.metadata)
        return Stream(call, lambda e: (e.data, e.version) if e.exists else None)

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
        `wazoo.Unavailable` (within `SILENCE` seconds of the daemon's last answer to a ping)."""
        call = self.recipes.Watch(pb.WatchRequest(path=path, recursive=recursive, recipe=recipe),
                                  metadata=self.metadata)
        return Stream(call, lambda e: WatchEvent(pb.WatchKind.Name(e.kind), e.path, e.data, e.version,
                                                 e.czxid, e.mzxid))

    # Any recipe.

    def call(self, recipe: str, function: str, args: Any = None) -> Any:
        """Calls `function` ("interface.function", e.g. "lock.acquire") of `recipe` with `args`
        (a list, positional, or a dict by parameter name; JSON as README "Generic invoke" maps
        the WIT types) and returns its result decoded from JSON: None for none, {"ok": …} or
        {"err": …} for a result. The instance ends with the call, deleting its ephemeral nodes.
        An empty `function` runs a custom recipe's `run` with `args` a list of strings."""
        args_json = json.dumps(args if args is not None else [])
        request = pb.InvokeRequest(recipe=recipe, function=function, args_json=args_json)
        return json.loads(self._call(self.recipes.Invoke, request).result_json)
