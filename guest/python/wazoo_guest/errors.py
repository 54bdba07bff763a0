"""Typed errors for wazoo's Python recipes.

The generated bindings report a failed `result<_, zk-error>` by raising
`componentize_py_types.Err(<case>)`, where `<case>` is one of the dataclasses
`wit_world.imports.types.ZkError_NoNode`, `ZkError_InvalidPath("...")`, ...  That is awkward to
catch one case at a time, so this module gives every `zk-error` case an exception class:

    try:
        zk.create(path, b"", zk.PERSISTENT)
    except zk.NodeExists:
        pass

`wrap(fn)` turns a generated import into one that raises these, and `export` turns them back
into `Err(<case>)` at the export boundary, which is what the generated glue lowers to the
caller's `result`.
"""

import functools
import traceback

from componentize_py_types import Err
from wit_world.imports import types as wit


class ZkError(Exception):
    """A `wazoo:zk/types.zk-error`. Subclasses name each case; `text` is the case's string
    payload (for `invalid-path`, `invalid-argument`, `limit-exceeded`, `other`), else None."""

    kind = "zk-error"
    _case = None
    _has_text = False

    def __init__(self, text=None):
        super().__init__(text)
        self.text = text
        #: For errors from `multi`: the index of the op that failed (None: the request failed).
        self.index = None

    def __str__(self):
        return f"{self.kind}: {self.text}" if self.text is not None else self.kind

    def __repr__(self):
        return f"{type(self).__name__}({self.text!r})" if self._has_text else f"{type(self).__name__}()"

    def to_wit(self):
        """The WIT variant case for this error."""
        return self._case(self.text or "") if self._has_text else self._case()

    @staticmethod
    def from_wit(case):
        """The exception for a WIT variant case (e.g. `ZkError_NoNode()` -> `NoNode()`)."""
        cls = _BY_CASE.get(type(case))
        if cls is None:
            return Other(f"unknown zk-error {case!r}")
        return cls(case.value) if cls._has_text else cls()


def _error_class(name, case, kind, has_text=False, doc=""):
    return type(name, (ZkError,), {"_case": case, "kind": kind, "_has_text": has_text, "__doc__": doc})


NoNode = _error_class("NoNode", wit.ZkError_NoNode, "no-node", doc="The node does not exist.")
NodeExists = _error_class("NodeExists", wit.ZkError_NodeExists, "node-exists", doc="A node already exists there.")
NotEmpty = _error_class("NotEmpty", wit.ZkError_NotEmpty, "not-empty", doc="The node has children.")
BadVersion = _error_class("BadVersion", wit.ZkError_BadVersion, "bad-version", doc="The version did not match.")
NoChildrenForEphemerals = _error_class(
    "NoChildrenForEphemerals", wit.ZkError_NoChildrenForEphemerals, "no-children-for-ephemerals"
)
ConnectionLoss = _error_class(
    "ConnectionLoss", wit.ZkError_ConnectionLoss, "connection-loss",
    doc="The reply was lost: the operation may or may not have taken effect.",
)
SessionExpired = _error_class("SessionExpired", wit.ZkError_SessionExpired, "session-expired")
NoAuth = _error_class("NoAuth", wit.ZkError_NoAuth, "no-auth")
InvalidPath = _error_class("InvalidPath", wit.ZkError_InvalidPath, "invalid-path", True)
InvalidArgument = _error_class("InvalidArgument", wit.ZkError_InvalidArgument, "invalid-argument", True)
Timeout = _error_class("Timeout", wit.ZkError_Timeout, "timeout", doc="A blocking call ran out of time.")
QuotaExceeded = _error_class("QuotaExceeded", wit.ZkError_QuotaExceeded, "quota-exceeded")
LimitExceeded = _error_class("LimitExceeded", wit.ZkError_LimitExceeded, "limit-exceeded", True)
Unimplemented = _error_class("Unimplemented", wit.ZkError_Unimplemented, "unimplemented")
Other = _error_class("Other", wit.ZkError_Other, "other", True)

_BY_CASE = {
    cls._case: cls
    for cls in (
        NoNode, NodeExists, NotEmpty, BadVersion, NoChildrenForEphemerals, ConnectionLoss,
        SessionExpired, NoAuth, InvalidPath, InvalidArgument, Timeout, QuotaExceeded,
        LimitExceeded, Unimplemented, Other,
    )
}


def wrap(fn):
    """`fn` (a generated import returning `result<T, zk-error>`), raising `ZkError`s instead of
    `Err(<case>)`. A `multi-error` becomes the `ZkError` of its `error`, with `index` set."""

    @functools.wraps(fn)
    def call(*args):
        try:
            return fn(*args)
        except Err as e:
            value = e.value
            if isinstance(value, wit.MultiError):
                err = ZkError.from_wit(value.error)
                err.index = value.index
            else:
                err = ZkError.from_wit(value)
            raise err from None

    return call


def export(method):
    """Decorates an exported function: a `ZkError` it raises becomes the WIT `zk-error` the
    caller sees. Any other exception (a bug in the recipe) becomes `other("<Type>: <message>")`
    rather than a trap, so the host reports it as a failed call."""

    @functools.wraps(method)
    def exported(*args):
        try:
            return method(*args)
        except ZkError as e:
            raise Err(e.to_wit()) from None
        except Err:
            raise
        except Exception as e:  # noqa: BLE001 - the boundary: nothing may escape untyped
            where = traceback.extract_tb(e.__traceback__)[-1:]
            at = f" at {where[0].name}:{where[0].lineno}" if where else ""
            raise Err(wit.ZkError_Other(f"{type(e).__name__}: {e}{at}")) from None

    return exported
