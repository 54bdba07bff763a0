"""The asyncio client of `wazoo serve`, on grpc.aio: the blocking `wazoo.Client`'s calls as
coroutines, in one event loop, no threads.

    import wazoo.aio

    async with wazoo.aio.Client("127.0.0.1:7181", token="…") as c:
        async with await c.lock("/locks/report", timeout=5) as claim:
            print(claim.token)

        lock = c.Lock("/locks/report")
        if await lock.acquire(blocking=False):
            try:
                ...
            finally:
                await lock.release()

It keeps the client session alive on a task (a keepalive per ttl/3), follows each claim's loss
on a task, pings the connection as the blocking client does (a daemon that stops answering is
noticed within `wazoo.SILENCE`), and raises the same exceptions. Given several addresses, the
session is opened on the first that answers; unlike the blocking client, it is not taken up by
another member of a daemon group when its daemon dies: the session and its claims are lost
then ("disconnected"), as with one daemon.
"""
from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import uuid
from typing import Any, AsyncIterator, Callable, Generic, List, Optional, Set, Tuple, TypeVar

import grpc
import grpc.aio

from ._proto import wazoo_pb2 as pb
from ._proto import wazoo_pb2_grpc as rpc
from .client import (
    _HANDLE_GONE, _SETTLE, CALL_TIMEOUT, CUT_OFF, PING_EVERY, PING_TIMEOUT, Addresses, Contender, Data,
    Member, NodeStat, Pem, WatchEvent, _addresses, _bytes, _contender, _format, _holders_request, _millis,
    _pem, _watch_event, _FAMILY_KINDS, check_settings, claim_prefix, loss_reason, ClaimInfo, SessionInfo,
    _claim_info, _session_info,
)
from .errors import Cancelled, LockLost, NoNode, Timeout, Unavailable, WazooError, from_rpc

__all__ = ["Client", "Claim", "Stream", "Lock", "DataWatch", "ChildrenWatch", "connect"]

T = TypeVar("T")
log = logging.getLogger("wazoo")
_DEFAULT: Any = object()
_KINDS = {pb.LOCK: "lock", pb.READ_LOCK: "rwlock", pb.WRITE_LOCK: "rwlock", pb.SEMAPHORE: "semaphore"}


class Stream(Generic[T]):
    """The events of a streaming call as an async iterator (`async for`), until `cancel()` (or
    the end of an `async with` block). A failed stream raises its `WazooError`; a cancelled one
    ends the iteration."""

    def __init__(self, call: Any, convert: Callable[[Any], T]):
        self._call = call
        self._convert = convert
        self._cancelled = False

    def __aiter__(self) -> "Stream[T]":
        return self

    async def __anext__(self) -> T:
        try:
            item = await self._call.read()
        except asyncio.CancelledError:
            if self._cancelled:
                raise StopAsyncIteration from None
            raise
        except grpc.aio.AioRpcError as e:
            if self._cancelled and e.code() == grpc.StatusCode.CANCELLED:
                raise StopAsyncIteration from None
            raise from_rpc(e) from e
        if item is grpc.aio.EOF:
            if self._cancelled:
                raise StopAsyncIteration
            code = await self._call.code()
            if code == grpc.StatusCode.OK:
                raise StopAsyncIteration
            raise from_rpc(_Ended(code, await self._call.details(), await self._call.trailing_metadata()))
        return self._convert(item)

    def cancel(self) -> None:
        """Ends the stream: the daemon stops following the change."""
        self._cancelled = True
        self._call.cancel()

    async def __aenter__(self) -> "Stream[T]":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.cancel()


class _Ended:
    """A stream's final status, as `from_rpc` reads a failed call."""

    def __init__(self, code: Any, details: Any, trailers: Any):
        self._code, self._details, self._trailers = code, details, trailers

    def code(self) -> Any:
        return self._code

    def details(self) -> Any:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailers


class Claim:
    """A claim the session holds (lock, read/write lock side, semaphore lease, leadership,
    group membership), as
    the blocking client's `wazoo.Claim`: `path`, `node`, `token`, `recipe_version`, `handle`;
    `lost` is an `asyncio.Event`, `reason` and `why` say why once it is set. `await release()`
    lets it go; `async with claim:` releases on leaving, and raises `LockLost` if it was lost
    while the block ran."""

    def __init__(self, client: "Client", path: str, claim: Any):
        self.path = path
        self.node: str = claim.node
        self.token: int = claim.fencing_token
        self.recipe_version: str = claim.recipe_version
        self.handle: int = claim.handle
        self.lost = asyncio.Event()
        self.reason: Optional[str] = None
        self.why: Optional[str] = None
        self._client = client
        self._released = False
        self._gone = False
        self._ref = pb.HandleRef(session=client.session_id, handle=claim.handle)
        self._stream = client.recipes.Lost(self._ref, metadata=client.metadata)
        self._follower: Optional["asyncio.Task[None]"] = None

    async def _start(self) -> None:
        # The daemon follows the claim before its answer's headers come: a loss right after is
        # told, not missed.
        await self._stream.initial_metadata()
        self._follower = asyncio.ensure_future(self._follow())

    def __repr__(self) -> str:
        state = f"lost: {self.reason}" if self.lost.is_set() else "held"
        return f"Claim(node={self.node!r}, token={self.token}, {state})"

    async def _follow(self) -> None:
        client = self._client
        try:
            async for event in self._stream:
                reason = loss_reason(event)
                self._lose(reason, f"the claim on {self.node} was lost: {reason}", reason in _HANDLE_GONE)
                if reason == "client-session-ended":
                    await client._lose(f"the daemon at {client.address} ended the client session", settle=True)
                return
            self._lose("disconnected", f"the daemon closed the claim on {self.node}", True)
        except asyncio.CancelledError:
            pass
        except grpc.aio.AioRpcError as e:
            if self._released or self.lost.is_set():
                return
            broken = isinstance(from_rpc(e), Unavailable)
            self._lose("disconnected", f"the Lost stream of {self.node} broke: {e.code().name}: {e.details()}",
                       broken)
            if broken:
                await client._lose(f"the connection to the daemon at {client.address} broke: "
                                   f"{e.code().name}: {e.details()}", settle=True)

    def _lose(self, reason: str, why: str, gone: bool = False) -> None:
        if gone:
            self._gone = True
        if self._released or self.lost.is_set():
            return
        self.reason, self.why = reason, why
        self.lost.set()

    def check(self) -> None:
        """Raises `LockLost` if the claim was lost."""
        if self.lost.is_set():
            raise LockLost(self.why or "the claim was lost", self.reason or "unknown")

    async def release(self) -> None:
        """Lets the claim go. Releasing twice does nothing, nor does releasing a claim whose
        handle the daemon no longer holds."""
        if self._released:
            return
        self._released = True
        self._stream.cancel()
        self._client._claims.discard(self)
        if not (self._gone or self._client.lost.is_set()):
            await self._client._call(self._client.recipes.Release, self._ref)

    async def __aenter__(self) -> "Claim":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        was_lost = self.lost.is_set()
        failed: Optional[WazooError] = None
        try:
            await self.release()
        except WazooError as e:
            failed = e
        if exc_type is not None:
            return False
        if was_lost:
            raise LockLost(self.why or "the claim was lost", self.reason or "unknown") from failed
        if failed is not None:
            raise failed
        return False


class Client:
    """A client session with a `wazoo serve` daemon, for asyncio: `wazoo.Client`'s arguments
    and calls, each call a coroutine. Open it with `async with Client(…) as c:` (or
    `c = await wazoo.aio.connect(…)`, then `await c.close()`); nothing is sent before.

    `lost` is an `asyncio.Event` set once the session is lost (the daemon ended it, the
    connection broke or went silent, or no keepalive was answered for 2/3 of the TTL),
    `lost_reason` then says why, and every claim is lost with it."""

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
        self.addresses: List[str] = _addresses(address)
        self.address: str = self.addresses[0]
        self.call_timeout = call_timeout
        self._ttl_asked = ttl
        self._name = name
        self._options = [
            ("grpc.keepalive_time_ms", int(PING_EVERY * 1000)),
            ("grpc.keepalive_timeout_ms", int(PING_TIMEOUT * 1000)),
            ("grpc.http2.ping_timeout_ms", int(PING_TIMEOUT * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.min_reconnect_backoff_ms", int(call_timeout * 1000)),
        ]
        self._credentials: Optional[grpc.ChannelCredentials] = None
        if any(a.startswith("https://") for a in self.addresses) or tls_ca is not None or tls_cert is not None:
            self._credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(tls_ca), private_key=_pem(tls_key), certificate_chain=_pem(tls_cert)
            )
        self.metadata: Tuple[Tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token is not None else ()
        self.session_id: int = 0
        self.ttl: float = 0.0
        self.members: List[str] = []
        self.zookeeper_timeout: float = 0.0
        self.lost = asyncio.Event()
        self.lost_reason: Optional[str] = None
        self._claims: Set[Claim] = set()
        # The claims this client's tasks wait for now.
        self._pending: Set[_Pending] = set()
        self._closing = False
        self._channel: Optional[grpc.aio.Channel] = None
        self._keeper: Optional["asyncio.Task[None]"] = None
        self._keepalive: Any = None

    def __repr__(self) -> str:
        return f"aio.Client(address={self.address!r}, session_id={self.session_id})"

    def _connect(self, address: str) -> grpc.aio.Channel:
        target = address.split("://", 1)[-1]
        if self._credentials is not None:
            return grpc.aio.secure_channel(target, self._credentials, options=self._options)
        return grpc.aio.insecure_channel(target, options=self._options)

    def _use(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel
        self.sessions = rpc.SessionsStub(channel)
        self.recipes = rpc.RecipesStub(channel)
        self.admin = rpc.AdminStub(channel)

    async def connect(self) -> "Client":
        """Opens the session on the first daemon that answers, and starts keeping it alive."""
        if self._channel is not None:
            return self
        # Made in the running loop (Python before 3.10 binds an Event to a loop when made).
        self.lost = asyncio.Event()
        failed: Optional[WazooError] = None
        for candidate in self.addresses:
            channel = self._connect(candidate)
            self._use(channel)
            try:
                opened = await self._call(self.sessions.Open,
                                          pb.OpenRequest(ttl_ms=_millis(self._ttl_asked), name=self._name))
            except Unavailable as e:
                await channel.close()
                failed = e
                continue
            except BaseException:
                await channel.close()
                raise
            self.address = candidate
            break
        else:
            self._channel = None
            assert failed is not None
            raise failed
        self.session_id = opened.session
        self.ttl = opened.ttl_ms / 1000
        self.members = list(opened.members)
        self.zookeeper_timeout = opened.zookeeper_timeout_ms / 1000
        self._keepalive = self.sessions.KeepAlive(metadata=self.metadata)
        self._keeper = asyncio.ensure_future(self._keep(self._keepalive))
        return self

    def __await__(self) -> Any:
        return self.connect().__await__()

    async def __aenter__(self) -> "Client":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the session, letting go of everything it holds, and the connection; waits for
        the daemon at most `call_timeout`, and raises nothing."""
        if self._closing or self._channel is None:
            return
        self._closing = True
        for claim in list(self._claims):
            claim._released = True
            claim._stream.cancel()
        self._claims.clear()
        try:
            if not self.lost.is_set():
                await self._call(self.sessions.Close, pb.SessionRef(session=self.session_id))
        except WazooError:
            pass
        finally:
            if self._keeper is not None:
                self._keeper.cancel()
                try:
                    await self._keeper
                except BaseException:
                    pass
            if self._keepalive is not None:
                self._keepalive.cancel()
            await self._channel.close()

    async def _keep(self, call: Any) -> None:
        """Keeps the session alive: a keepalive every ttl/3; the session is lost when the
        stream breaks or ends, the daemon says the session is unknown, or nothing sent was
        answered for 2/3 of the TTL."""
        loop = asyncio.get_running_loop()
        every, silence = self.ttl / 3, self.ttl * CUT_OFF
        sent: "collections.deque[float]" = collections.deque()
        answered = loop.time()

        async def beats() -> None:
            try:
                while True:
                    sent.append(loop.time())
                    await call.write(pb.KeepAliveRequest(session=self.session_id))
                    await asyncio.sleep(every)
            except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                pass  # the stream ended: the reader says why

        writer = asyncio.ensure_future(beats())
        why = ""
        try:
            while True:
                left = answered + silence - loop.time()
                try:
                    reply = await asyncio.wait_for(call.read(), timeout=max(left, 0.001))
                except asyncio.TimeoutError:
                    why = f"no keepalive answer from the daemon at {self.address} for {silence:.1f}s"
                    break
                if reply is grpc.aio.EOF:
                    why = f"the daemon at {self.address} ended the keepalive stream"
                    break
                if reply.ttl_ms == 0:
                    why = f"the daemon at {self.address} ended the client session"
                    break
                if sent:
                    answered = sent.popleft()
        except asyncio.CancelledError:
            writer.cancel()
            raise
        except (grpc.aio.AioRpcError, grpc.aio.UsageError) as e:
            code = e.code().name if isinstance(e, grpc.aio.AioRpcError) else "ended"
            details = e.details() if isinstance(e, grpc.aio.AioRpcError) else str(e)
            why = f"the keepalive stream to {self.address} broke: {code}: {details}"
        writer.cancel()
        call.cancel()
        if not self._closing:
            await self._lose(why, settle=True)

    async def _lose(self, why: str, settle: bool = False) -> None:
        """The session is lost: so is every claim. With `settle`, each claim's Lost stream gets
        up to `_SETTLE` seconds to say why first."""
        if self._closing or self.lost.is_set():
            return
        self.lost_reason = why
        self.lost.set()
        claims = list(self._claims)
        if self._keepalive is not None:
            self._keepalive.cancel()
        if settle:
            current = asyncio.current_task()
            followers = [c._follower for c in claims if c._follower is not None and c._follower is not current]
            if followers:
                await asyncio.wait(followers, timeout=_SETTLE)
        for claim in claims:
            claim._lose("disconnected", why, True)

    async def _call(self, method: Any, request: Any, timeout: Optional[float] = _DEFAULT) -> Any:
        if timeout is _DEFAULT:
            timeout = self.call_timeout
        try:
            return await method(request, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise from_rpc(e) from e

    def _waiting(self, timeout: Optional[float]) -> Optional[float]:
        return None if timeout is None else timeout + self.call_timeout

    async def _hold(self, path: str, answer: Any) -> Claim:
        claim = Claim(self, path, answer)
        try:
            await claim._start()
        except grpc.aio.AioRpcError as e:
            claim._lose("disconnected", f"the Lost stream of {claim.node} broke: {e.code().name}", True)
            return claim
        self._claims.add(claim)
        if self.lost.is_set():
            claim._lose("disconnected", self.lost_reason or "the client session was lost", True)
        return claim

    # Claims.

    async def _acquire(self, path: str, family: int, timeout: Optional[float], recipe: str, leases: int = 0,
                       pending: Optional["_Pending"] = None, holder_id: str = "") -> Claim:
        request = pb.AcquireRequest(
            session=self.session_id, path=path, family=family, max_leases=leases,
            timeout_ms=_millis(timeout), recipe=recipe, claim_id=uuid.uuid4().hex, holder_id=holder_id,
        )
        return await self._claim(path, "Acquire", request, timeout, pending)

    async def _claim(self, path: str, call: str, request: Any, timeout: Optional[float],
                     pending: Optional["_Pending"] = None) -> Claim:
        """Sends `request` (an Acquire or a Campaign) and holds the claim it answers; a wait
        another task cancels (`pending`, `cancel_pending`) raises `wazoo.Cancelled`, leaving no
        node (as the blocking client's)."""
        pending = pending if pending is not None else _Pending(path)
        if pending.cancelled:
            raise Cancelled(f"the wait for the claim at {path} was cancelled")
        self._pending.add(pending)
        try:
            pending.call = getattr(self.recipes, call)(request, metadata=self.metadata, timeout=self._waiting(timeout))
            try:
                answer = await pending.call
            except asyncio.CancelledError:
                if not pending.cancelled:
                    raise
                answer = None
            except grpc.aio.AioRpcError as e:
                if not (pending.cancelled and e.code() == grpc.StatusCode.CANCELLED):
                    raise from_rpc(e) from e
                answer = None
        finally:
            self._pending.discard(pending)
        if answer is None:
            await self._sweep(path, call, request)
            raise Cancelled(f"the wait for the claim at {path} was cancelled")
        held = await self._hold(path, answer)
        if pending.cancelled:
            try:
                await held.release()
            except WazooError as e:
                log.info("releasing the claim on %s, had as its wait was cancelled: %s", held.node, e)
            raise Cancelled(f"the wait for the claim at {path} was cancelled")
        return held

    async def _sweep(self, path: str, call: str, request: Any) -> None:
        """As the blocking client's: a node the cancelled call left (a claim granted as the
        cancel went out) is taken once more, with `retry` and no wait, and let go."""
        prefix = claim_prefix(self.session_id, request.claim_id)
        kind = "election" if call == "Campaign" else _FAMILY_KINDS.get(request.family, "detect")
        try:
            reply = await self._call(self.recipes.Holders, _holders_request(path, kind, None))
            if not any(c.node.rsplit("/", 1)[-1].startswith(prefix) for c in reply.contenders):
                return
            request.retry = True
            request.timeout_ms = 0
            answer = await self._call(getattr(self.recipes, call), request)
        except Timeout:
            return
        except WazooError as e:
            log.info("the node of the cancelled claim at %s was not swept (%s): it goes with the session", path, e)
            return
        try:
            await self._call(self.recipes.Release, pb.HandleRef(session=self.session_id, handle=answer.handle))
        except WazooError as e:
            log.info("releasing the node of the cancelled claim at %s: %s", path, e)

    def cancel_pending(self, path: Optional[str] = None) -> int:
        """As `wazoo.Client.cancel_pending`: cancels the claims this client's tasks wait for (at
        `path` only, when given); each raises `wazoo.Cancelled`. Returns how many."""
        return sum(1 for p in list(self._pending) if (path is None or p.path == path) and p.cancel())

    async def lock(self, path: str, timeout: Optional[float] = None, recipe: str = "", holder_id: str = "") -> Claim:
        """Takes the lock at `path`, waiting until it is held or `timeout` seconds pass
        (`wazoo.Timeout`); `holder_id` as `wazoo.Client.lock`'s."""
        return await self._acquire(path, pb.LOCK, timeout, recipe, holder_id=holder_id)

    async def rwlock(self, path: str, mode: str = "write", timeout: Optional[float] = None, recipe: str = "",
                     holder_id: str = "") -> Claim:
        """Takes the `mode` ("read" or "write") side of the read/write lock at `path`."""
        families = {"read": pb.READ_LOCK, "write": pb.WRITE_LOCK}
        if mode not in families:
            raise ValueError(f"a read/write lock's mode is 'read' or 'write', not {mode!r}")
        return await self._acquire(path, families[mode], timeout, recipe, holder_id=holder_id)

    async def semaphore(self, path: str, leases: int, timeout: Optional[float] = None, recipe: str = "",
                        holder_id: str = "") -> Claim:
        """Takes one of the `leases` leases of the semaphore at `path`."""
        if leases < 1:
            raise ValueError(f"a semaphore has at least one lease, not {leases}")
        return await self._acquire(path, pb.SEMAPHORE, timeout, recipe, leases, holder_id=holder_id)

    async def elect(self, path: str, id: str, timeout: Optional[float] = None, recipe: str = "") -> Claim:
        """Runs for leadership of the election at `path` as candidate `id`; the `Claim` is the
        leadership."""
        request = pb.CampaignRequest(session=self.session_id, path=path, id=id, timeout_ms=_millis(timeout),
                                     recipe=recipe, claim_id=uuid.uuid4().hex)
        return await self._claim(path, "Campaign", request, timeout)

    async def join(self, path: str, name: str, data: Data = b"", recipe: str = "") -> Claim:
        """Joins the group at `path` as member `name`, as `wazoo.Client.join`: the `Claim` is
        the membership (its node `<path>/<name>`, token 0); `wazoo.NodeExists` if the name is
        taken."""
        request = pb.GroupJoinRequest(session=self.session_id, path=path, name=name, data=_bytes(data), recipe=recipe)
        return await self._hold(path, await self._call(self.recipes.GroupJoin, request))

    async def group_members(self, path: str, recipe: str = "") -> List[Member]:
        """As `wazoo.Client.group_members`."""
        try:
            membership = await self._call(self.recipes.GroupMembers, pb.PathRequest(path=path, recipe=recipe))
        except NoNode:
            return []
        return [Member(m.name, m.data) for m in membership.members]

    def Lock(self, path: str, recipe: str = "", identifier: str = "") -> "Lock":
        """The lock at `path` as kazoo's `Lock`, for asyncio: `await lock.acquire(blocking=False)`
        is False at once when it is not free; `identifier` as `wazoo.Client.Lock`'s."""
        return Lock(self, path, pb.LOCK, recipe=recipe, identifier=identifier)

    def ReadLock(self, path: str, recipe: str = "", identifier: str = "") -> "Lock":
        return Lock(self, path, pb.READ_LOCK, recipe=recipe, identifier=identifier)

    def WriteLock(self, path: str, recipe: str = "", identifier: str = "") -> "Lock":
        return Lock(self, path, pb.WRITE_LOCK, recipe=recipe, identifier=identifier)

    def Semaphore(self, path: str, max_leases: int = 1, recipe: str = "", identifier: str = "") -> "Lock":
        if max_leases < 1:
            raise ValueError(f"a semaphore has at least one lease, not {max_leases}")
        return Lock(self, path, pb.SEMAPHORE, leases=max_leases, recipe=recipe, identifier=identifier)

    # Who holds, who waits.

    async def contenders(self, path: str, kind: str = "detect", leases: Optional[int] = None) -> List[Contender]:
        """As `wazoo.Client.contenders`."""
        reply = await self._call(self.recipes.Holders, _holders_request(path, kind, leases))
        return [_contender(c) for c in reply.contenders]

    async def holders(self, path: str, kind: str = "detect", leases: Optional[int] = None) -> List[Contender]:
        """As `wazoo.Client.holders`."""
        return [c for c in await self.contenders(path, kind, leases) if c.holds]

    async def leader(self, path: str) -> Optional[Contender]:
        """As `wazoo.Client.leader`."""
        return next(iter(await self.holders(path, "election")), None)

    async def list_claims(self, prefix: str = "/") -> List[ClaimInfo]:
        """As `wazoo.Client.list_claims`."""
        reply = await self._call(self.admin.ListClaims, pb.ListClaimsRequest(prefix=prefix))
        return [_claim_info(c) for c in reply.claims]

    async def list_sessions(self) -> List[SessionInfo]:
        """As `wazoo.Client.list_sessions`."""
        reply = await self._call(self.admin.ListSessions, pb.Empty())
        return [_session_info(s) for s in reply.sessions]

    # Queues, configuration, counters, watches.

    async def queue_put(self, path: str, data: Data, priority: Optional[int] = None, recipe: str = "") -> str:
        request = pb.QueuePutRequest(path=path, data=_bytes(data), priority=priority, recipe=recipe)
        return (await self._call(self.recipes.QueuePut, request)).node

    async def queue_take(self, path: str, timeout: Optional[float] = None, recipe: str = "") -> bytes:
        request = pb.WaitRequest(path=path, timeout_ms=_millis(timeout), recipe=recipe)
        return (await self._call(self.recipes.QueueTake, request, self._waiting(timeout))).data

    async def queue_len(self, path: str, recipe: str = "") -> int:
        return (await self._call(self.recipes.QueueLen, pb.PathRequest(path=path, recipe=recipe))).items

    async def config_get(self, path: str, recipe: str = "") -> Optional[Tuple[bytes, int]]:
        entry = await self._call(self.recipes.ConfigGet, pb.PathRequest(path=path, recipe=recipe))
        return (entry.data, entry.version) if entry.exists else None

    async def config_set(self, path: str, data: Data, version: Optional[int] = None, recipe: str = "") -> int:
        request = pb.ConfigSetRequest(path=path, data=_bytes(data), expected_version=version, recipe=recipe)
        return (await self._call(self.recipes.ConfigSet, request)).version

    async def config_delete(self, path: str, version: Optional[int] = None, recipe: str = "") -> bool:
        """As `wazoo.Client.config_delete`: True once deleted; `wazoo.NoNode`, `wazoo.BadVersion`,
        `wazoo.NotEmpty`, or `wazoo.InvalidArgument` for an ephemeral node (kept)."""
        del recipe  # ConfigDeleteRequest has no recipe
        await self._call(self.recipes.ConfigDelete, pb.ConfigDeleteRequest(path=path, version=version))
        return True

    def config_watch(self, path: str, recipe: str = "") -> Stream[Optional[Tuple[bytes, int]]]:
        call = self.recipes.ConfigWatch(pb.PathRequest(path=path, recipe=recipe), metadata=self.metadata)
        return Stream(call, lambda e: (e.data, e.version) if e.exists else None)

    async def counter_get(self, path: str, format: str = "kazoo", recipe: str = "") -> int:
        request = pb.CounterGetRequest(path=path, format=_format(format), recipe=recipe)
        return (await self._call(self.recipes.CounterGet, request)).value

    async def counter_add(self, path: str, delta: int, format: str = "kazoo", recipe: str = "") -> int:
        request = pb.CounterAddRequest(path=path, delta=delta, format=_format(format), recipe=recipe)
        return (await self._call(self.recipes.CounterAdd, request)).value

    def watch(self, path: str, recursive: bool = False, recipe: str = "") -> Stream[WatchEvent]:
        """As `wazoo.Client.watch`: `async for event in c.watch(path)`."""
        call = self.recipes.Watch(pb.WatchRequest(path=path, recursive=recursive, recipe=recipe),
                                  metadata=self.metadata)
        return Stream(call, _watch_event)

    def _children(self, path: str, recipe: str = "") -> Stream[Any]:
        call = self.recipes.GroupWatch(pb.PathRequest(path=path, recipe=recipe), metadata=self.metadata)
        return Stream(call, lambda m: m)

    async def DataWatch(self, path: str, func: Callable[..., Any], recipe: str = "") -> "DataWatch":
        """As `wazoo.Client.DataWatch`: `func(data, stat)` (a function or a coroutine function)
        is called with the node now, before this returns, and after every change."""
        watcher = DataWatch(self, path, func, recipe)
        await watcher._start()
        return watcher

    async def ChildrenWatch(self, path: str, func: Callable[..., Any], recipe: str = "") -> "ChildrenWatch":
        """As `wazoo.Client.ChildrenWatch`: `func(children)` (a function or a coroutine
        function) is called with the children now, before this returns, and after every child
        added or removed."""
        watcher = ChildrenWatch(self, path, func, recipe)
        await watcher._start()
        return watcher

    # Any recipe.

    async def call(self, recipe: str, function: str, args: Any = None) -> Any:
        """As `wazoo.Client.call`."""
        args_json = json.dumps(args if args is not None else [])
        request = pb.InvokeRequest(recipe=recipe, function=function, args_json=args_json)
        return json.loads((await self._call(self.recipes.Invoke, request)).result_json)


async def connect(address: Addresses, **kwargs: Any) -> Client:
    """`Client(address, **kwargs)`, connected: close it with `await client.close()`."""
    return await Client(address, **kwargs).connect()


class _Pending:
    """A claim a task waits for: `cancel()` cancels its call."""

    def __init__(self, path: str):
        self.path = path
        self.cancelled = False
        self.call: Any = None

    def cancel(self) -> bool:
        if self.cancelled:
            return False
        self.cancelled = True
        if self.call is not None:
            self.call.cancel()
        return True


class Lock:
    """`wazoo.recipes.Lock` for asyncio: `await acquire(blocking=True, timeout=None)` (False at
    once with `blocking=False` when not free), `await release()`, `await contenders()`,
    `is_acquired`, `claim`, and `async with lock:`. `cancel()` (not a coroutine), from another
    task, makes a waiting `acquire` raise `wazoo.Cancelled`, leaving no node; it does nothing
    when none waits."""

    def __init__(self, client: Client, path: str, family: int, leases: int = 0, recipe: str = "",
                 identifier: str = ""):
        self.identifier = identifier
        self.client = client
        self.path = path
        self._family = family
        self._leases = leases
        self._recipe = recipe
        self.claim: Optional[Claim] = None
        self._pending: Optional[_Pending] = None

    @property
    def is_acquired(self) -> bool:
        return self.claim is not None and not self.claim.lost.is_set()

    def cancel(self) -> bool:
        """Cancels the `acquire` waiting now: True if one was; False, and nothing done, otherwise."""
        pending = self._pending
        return pending is not None and pending.cancel()

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        if self.claim is not None:
            raise RuntimeError(f"the lock at {self.path} is held by this object already: release it first")
        self._pending = _Pending(self.path)
        try:
            claim = await self.client._acquire(self.path, self._family, timeout if blocking else 0.0,
                                               self._recipe, self._leases, self._pending,
                                               holder_id=self.identifier)
        except Timeout:
            if blocking:
                raise
            return False
        finally:
            self._pending = None
        self.claim = claim
        return True

    async def release(self) -> bool:
        claim, self.claim = self.claim, None
        if claim is None:
            return False
        await claim.release()
        return True

    async def contenders(self) -> List[Contender]:
        leases = self._leases if self._family == pb.SEMAPHORE else None
        return await self.client.contenders(self.path, _KINDS[self._family], leases)

    async def lease_holders(self) -> List[Contender]:
        return [c for c in await self.contenders() if c.holds]

    async def __aenter__(self) -> "Lock":
        await self.acquire()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        claim, self.claim = self.claim, None
        if claim is None:
            return False
        return await claim.__aexit__(exc_type, exc, tb)


async def _invoke(func: Callable[..., Any], *args: Any) -> Any:
    result = func(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class _Watcher:
    """`wazoo.recipes`' watchers for asyncio: the function (or coroutine function) is called on a
    task of the watcher's own; `stopped` is an `asyncio.Event`, `error` why the stream failed."""

    def __init__(self, client: Client, path: str, func: Callable[..., Any], recipe: str):
        self.client = client
        self.path = path
        self._func = func
        self._recipe = recipe
        self.stopped = asyncio.Event()
        self.error: Optional[WazooError] = None
        self._stream: Optional[Stream[Any]] = None
        self._first = asyncio.Event()
        self._task: Optional["asyncio.Task[None]"] = None

    async def _start(self) -> None:
        self._stream = self._open()
        self._task = asyncio.ensure_future(self._run())
        await self._first.wait()
        if self.error is not None and self.stopped.is_set():
            raise self.error

    def _open(self) -> Stream[Any]:
        raise NotImplementedError

    def _updates(self, stream: Stream[Any]) -> AsyncIterator[Tuple[Any, ...]]:
        raise NotImplementedError

    async def _run(self) -> None:
        assert self._stream is not None
        try:
            async for args in self._updates(self._stream):
                if self.stopped.is_set():
                    break
                try:
                    go_on = await _invoke(self._func, *args)
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

    def __repr__(self) -> str:
        return f"aio.{type(self).__name__}({self.path!r})"


class DataWatch(_Watcher):
    """As `wazoo.recipes.DataWatch`, for asyncio (`await client.DataWatch(path, func)`)."""

    def _open(self) -> Stream[Any]:
        return self.client.watch(self.path, recipe=self._recipe)

    def _args(self, data: Any, stat: Any, event: Optional[WatchEvent]) -> Tuple[Any, ...]:
        from .recipes import _arity
        return (data, stat, event) if _arity(self._func) >= 3 else (data, stat)

    async def _updates(self, stream: Stream[Any]) -> AsyncIterator[Tuple[Any, ...]]:  # type: ignore[override]
        current: Any = (None, None)
        async for event in stream:
            if event.kind == "INITIALIZED":
                break
            if event.path == self.path and event.kind == "CREATED":
                current = (event.data, NodeStat(event.version, event.czxid, event.mzxid))
        yield self._args(*current, None)
        async for event in stream:
            if event.path != self.path:
                continue
            if event.kind == "DELETED":
                yield self._args(None, None, event)
            elif event.kind in ("CREATED", "CHANGED"):
                yield self._args(event.data, NodeStat(event.version, event.czxid, event.mzxid), event)


class ChildrenWatch(_Watcher):
    """As `wazoo.recipes.ChildrenWatch`, for asyncio (`await client.ChildrenWatch(path, func)`)."""

    def _open(self) -> Stream[Any]:
        return self.client._children(self.path, recipe=self._recipe)

    async def _updates(self, stream: Stream[Any]) -> AsyncIterator[Tuple[Any, ...]]:  # type: ignore[override]
        async for membership in stream:
            yield ([m.name for m in membership.members],)
