"""Typed errors: one exception class per `ErrorKind` of host/proto/wazoo.proto.

Every error status the daemon's services return carries its kind as a `google.rpc.ErrorInfo`
of domain "wazoo.v1" in the status details (the `grpc-status-details-bin` trailer). `from_rpc`
reads them with grpcio-status (`grpc_status.rpc_status.from_call`) and raises the class of that
kind; branch on the class (or `.kind`), never on the message, which is for people.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Type

import grpc
from google.rpc import error_details_pb2 as _error_details
from google.rpc import status_pb2 as _status
from grpc_status import rpc_status

#: The `ErrorInfo.domain` of the daemon's errors.
DOMAIN = "wazoo.v1"
_PREFIX = "ERROR_KIND_"


class WazooError(Exception):
    """A failed call to the daemon.

    Attributes:
        kind: the `ErrorKind` without its prefix (e.g. "TIMEOUT", "NO_NODE"), or None for an
            error the daemon's services did not make (a broken connection, an unknown method,
            an older daemon). A kind newer than this client keeps its name here and raises
            this base class: go by `code` then.
        code: the `grpc.StatusCode`, or None for an error that is not a status.
        details: the status's message, for people.
    """

    kind: Optional[str] = None

    def __init__(self, details: str, kind: Optional[str] = None, code: Optional[grpc.StatusCode] = None):
        super().__init__(details)
        self.details = details
        if kind is not None:
            self.kind = kind
        self.code = code

    def __str__(self) -> str:
        return self.details

    def __repr__(self) -> str:
        code = self.code.name if self.code is not None else None
        return f"{type(self).__name__}(kind={self.kind!r}, code={code}, details={self.details!r})"


class Timeout(WazooError):
    """A blocking call ran out of time (a lock, leadership, barrier or queue item not had in time)."""

    kind = "TIMEOUT"


class NoNode(WazooError):
    """The node does not exist."""

    kind = "NO_NODE"


class NodeExists(WazooError):
    """A node already exists at that path (e.g. a group member's name is taken)."""

    kind = "NODE_EXISTS"


class BadVersion(WazooError):
    """The expected version did not match (a config compare-and-set)."""

    kind = "BAD_VERSION"


class NotEmpty(WazooError):
    """The node has children and cannot be deleted."""

    kind = "NOT_EMPTY"


class NoChildrenForEphemerals(WazooError):
    """Ephemeral nodes cannot have children."""

    kind = "NO_CHILDREN_FOR_EPHEMERALS"


class InvalidPath(WazooError):
    """The path was refused before it reached ZooKeeper (malformed, or outside the namespace)."""

    kind = "INVALID_PATH"


class InvalidArgument(WazooError):
    """An argument was refused, by a recipe or by the daemon."""

    kind = "INVALID_ARGUMENT"


class ConnectionLoss(WazooError):
    """The daemon's connection to ZooKeeper broke before the reply: the call may have taken effect."""

    kind = "CONNECTION_LOSS"


class SessionExpired(WazooError):
    """The daemon's ZooKeeper session expired while the recipe ran."""

    kind = "SESSION_EXPIRED"


class NoAuth(WazooError):
    """The daemon's ZooKeeper identity may not do this."""

    kind = "NO_AUTH"


class LimitExceeded(WazooError):
    """A host limit (rate, size, count) was hit."""

    kind = "LIMIT_EXCEEDED"


class QuotaExceeded(WazooError):
    """A ZooKeeper quota was exceeded."""

    kind = "QUOTA_EXCEEDED"


class Unimplemented(WazooError):
    """ZooKeeper does not support this."""

    kind = "UNIMPLEMENTED"


class Other(WazooError):
    """Any other ZooKeeper error; the message says what."""

    kind = "OTHER"


class Trapped(WazooError):
    """The recipe trapped or hit a sandbox limit: its handle is retired and its nodes deleted."""

    kind = "TRAPPED"


class Retired(WazooError):
    """The handle was retired by an earlier trap or cancelled call."""

    kind = "RETIRED"


class UnknownSession(WazooError):
    """The client session is not open: never opened, expired, or closed."""

    kind = "UNKNOWN_SESSION"


class UnknownHandle(WazooError):
    """The session holds no such handle (never held, or released)."""

    kind = "UNKNOWN_HANDLE"


class WrongHandle(WazooError):
    """The handle holds another kind of claim than the call needs."""

    kind = "WRONG_HANDLE"


class RecipeUnavailable(WazooError):
    """No handle of the recipe could be made (no such recipe, a refused component, not allowed)."""

    kind = "RECIPE_UNAVAILABLE"


class Unauthenticated(WazooError):
    """No tenant has the call's token."""

    kind = "UNAUTHENTICATED"


class Internal(WazooError):
    """The daemon failed itself."""

    kind = "INTERNAL"


class Unavailable(WazooError):
    """The daemon could not be reached, or stopped answering: the connection could not be made
    or broke, its pings went unanswered (a frozen daemon, a black hole: `wazoo.SILENCE`), or a
    call had no answer within its deadline (the client's `call_timeout`). `kind` is None (the
    daemon's services did not say it); `code` is UNAVAILABLE, or DEADLINE_EXCEEDED for a
    deadline. A call that failed so may have taken effect."""


class Cancelled(WazooError):
    """A wait for a claim was cancelled from another thread (`Lock.cancel()`,
    `Election.cancel()`, `Client.cancel_pending()`), as kazoo's `CancelledError`: the claim is
    not held, and no node of it is left in ZooKeeper. `kind` is None (the daemon did not say
    it); `code` is CANCELLED."""

    def __init__(self, details: str):
        super().__init__(details, None, grpc.StatusCode.CANCELLED)


class LockLost(WazooError):
    """A claim (lock, lease, leadership) was lost while it was held.

    Attributes:
        reason: why, as `Claim.reason` says it (e.g. "node-deleted", "revoked").
    """

    def __init__(self, details: str, reason: str):
        super().__init__(details)
        self.reason = reason


#: The exception class of each kind, by `ErrorInfo.reason`.
KINDS: Dict[str, Type[WazooError]] = {
    _PREFIX + cls.kind: cls
    for cls in (
        Timeout, NoNode, NodeExists, BadVersion, NotEmpty, NoChildrenForEphemerals, InvalidPath,
        InvalidArgument, ConnectionLoss, SessionExpired, NoAuth, LimitExceeded, QuotaExceeded,
        Unimplemented, Other, Trapped, Retired, UnknownSession, UnknownHandle, WrongHandle,
        RecipeUnavailable, Unauthenticated, Internal,
    )
}


def status_of(error: Any) -> Optional[_status.Status]:
    """The `google.rpc.Status` a failed call carries in its details (grpcio-status reads it from
    the `grpc-status-details-bin` trailer), for a blocking or an asyncio call alike; None if it
    carries none, or one that is malformed or says another code or message than the call's."""
    if not hasattr(error, "trailing_metadata"):
        return None
    try:
        return rpc_status.from_call(error)
    except Exception:  # a malformed trailer, or one at odds with the call's status
        return None


def kind_of(error: Any) -> Optional[str]:
    """The `ErrorKind` value name (e.g. "ERROR_KIND_TIMEOUT") a failed call carries, read from
    its status details; None if it carries none (it did not come from the daemon's services)."""
    status = status_of(error)
    if status is None:
        return None
    for detail in status.details:
        if not detail.Is(_error_details.ErrorInfo.DESCRIPTOR):
            continue
        info = _error_details.ErrorInfo()
        detail.Unpack(info)
        if info.domain == DOMAIN:
            return info.reason
    return None


#: The codes of a failed call without a kind that mean the daemon was not reached or did not
#: answer in time (`Unavailable`): the daemon's own TIMEOUT carries its kind.
_UNREACHED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def from_rpc(error: Any) -> WazooError:
    """The typed exception of a failed gRPC call, blocking or asyncio (to raise `from` it)."""
    code = error.code() if hasattr(error, "code") else None
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    reason = kind_of(error)
    if reason is None:
        return (Unavailable if code in _UNREACHED else WazooError)(details, None, code)
    cls = KINDS.get(reason)
    if cls is None:  # a kind newer than this client
        return WazooError(details, reason[len(_PREFIX):] if reason.startswith(_PREFIX) else reason, code)
    return cls(details, code=code)
