"""A client of `wazoo serve`: ZooKeeper coordination recipes (locks, elections, queues,
configuration, counters, caches) over the daemon's gRPC API.

    import wazoo

    with wazoo.Client("127.0.0.1:7181", token="…") as c:
        with c.lock("/locks/report", timeout=5) as claim:
            print(claim.token)  # pass the fencing token to what the lock protects

Failed calls raise a `WazooError` subclass per error kind of the daemon (`Timeout`, `NoNode`,
`BadVersion` …), or `Unavailable` when the daemon cannot be reached or stops answering (within
`SILENCE` seconds, or a call's deadline); a claim lost while its block ran raises `LockLost`.
Group membership (`c.join`) and registrations kept present (`c.register`) are claims of the
session too. kazoo's recipe objects are there as well: `c.Lock(path).acquire(blocking=False)`
(and `cancel()` from another thread: `Cancelled`),
`c.Election`, `c.Party`, `c.DataWatch(path, func)`, `c.ChildrenWatch(path, func)`, and
`c.contenders(path)` / `c.leader(path)`. `wazoo.aio` is the same client for asyncio. Given
several daemons of a group ("a:7181,b:7181"), a client whose daemon dies carries its session,
its claims, its registrations and its watches on through another member (see `Client`).
"""
from .client import (
    CALL_TIMEOUT, CUT_OFF, MIN_TTL, PING_EVERY, PING_TIMEOUT, REATTACH_TRY, SILENCE, TEND, Claim, Client,
    ClaimInfo, Contender, Member, NodeStat, Registration, SessionClaim, SessionInfo, Stream, WatchEvent,
)
from .errors import (
    BadVersion,
    Cancelled,
    ConnectionLoss,
    Internal,
    InvalidArgument,
    InvalidPath,
    LimitExceeded,
    LockLost,
    NoAuth,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    Other,
    QuotaExceeded,
    RecipeUnavailable,
    Retired,
    SessionExpired,
    Timeout,
    Trapped,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    UnknownHandle,
    UnknownSession,
    WazooError,
    WrongHandle,
)

from .recipes import ChildrenWatch, DataWatch, Election, Lock, Party

__version__ = "0.1.0"

__all__ = [
    "CALL_TIMEOUT", "CUT_OFF", "MIN_TTL", "PING_EVERY", "PING_TIMEOUT", "REATTACH_TRY", "SILENCE", "TEND",
    "Claim", "Client", "Registration", "Member", "Stream", "WatchEvent", "Contender", "NodeStat", "Lock",
    "ClaimInfo", "SessionInfo", "SessionClaim",
    "Election", "Party", "DataWatch", "ChildrenWatch",
    "WazooError", "Unavailable", "LockLost", "Cancelled", "Timeout", "NoNode", "NodeExists", "BadVersion",
    "NotEmpty", "NoChildrenForEphemerals", "InvalidPath", "InvalidArgument", "ConnectionLoss", "SessionExpired",
    "NoAuth", "LimitExceeded", "QuotaExceeded", "Unimplemented", "Other", "Trapped", "Retired",
    "UnknownSession", "UnknownHandle", "WrongHandle", "RecipeUnavailable", "Unauthenticated",
    "Internal",
]
