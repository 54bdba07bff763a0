"""The guest side of wazoo for Python recipes (componentize-py).

The Python twin of `guest/rust/src/lib.rs`: the `wazoo:zk` primitives with typed errors,
plus the helpers every ZooKeeper recipe needs and that are easy to get subtly wrong: ordering
sequential children the way Curator does, contending for a turn by watching only the
predecessor, deadlines, and deleting through connection loss.

The subtlest steps are the host's, once for every language (`wazoo:zk@0.1.5`): the protected
create that finds its node again after a lost reply (`create_protected`), the whole contention
for a turn with its hand-over (`contend`), waiting until a node changes or the session ends
(`wait_for_change`, `watcher.changed`) or until one of several watches fires (`wait_any`), the
ownership check (`owns`), trying reads again through connection loss (every read the host
lends), several requests in one round trip (`pipeline`), and a claim's release that does not
wait for ZooKeeper's answer, its outcome settled by the host (`delete_unwaited`, `release_node`).
The helpers here are thin names for those.

Use it from a recipe module built against any world that includes `wazoo:zk/imports@0.1.5`
(with componentize-py's default `wit_world` bindings module):

    import wazoo_guest as zk

    class Semaphore(wit_world.exports.Semaphore):
        @zk.export                      # ZkError -> the WIT zk-error the caller sees
        def acquire(self, path, max_leases, timeout_ms):
            zk.check_path(path)         # raises zk.InvalidPath(...)
            ...

Every primitive below raises a `ZkError` subclass (`zk.NoNode`, `zk.ConnectionLoss`, ...)
instead of the bindings' `Err(ZkError_NoNode())`. State lives in module globals: one component
instance serves one recipe handle, and is single-threaded.

Nothing here may run at import time against the host: componentize-py imports the app while
building the component (pre-initialisation), when there is no host to call.
"""

import time

from componentize_py_types import Ok as _Ok
from wit_world.imports import contention as _contention
from wit_world.imports import session as _session
from wit_world.imports import types
from wit_world.imports import watch as _watch
from wit_world.imports import znode as _znode

from .errors import (  # noqa: F401 - re-exported
    BadVersion, ConnectionLoss, InvalidArgument, InvalidPath, LimitExceeded, NoAuth,
    NoChildrenForEphemerals, NoNode, NodeExists, NotEmpty, Other, QuotaExceeded, SessionExpired,
    Timeout, Unimplemented, ZkError, export, wrap,
)

# --- The primitives, raising ZkError ---------------------------------------------------------

create = wrap(_znode.create)
create_protected = wrap(_znode.create_protected)
delete = wrap(_znode.delete)
#: `delete_unwaited(path)`: the host's `delete-unwaited` (`wazoo:zk@0.1.5`), a claim's release
#: that does not wait for ZooKeeper's answer; see `release_node`, which a recipe wants.
#:
#: Deletes an ephemeral node this handle created (a lock's, a lease's). The delete is sent before
#: the call returns, and while the connection holds every request this session sends afterwards
#: (the next acquire, any call of any handle on this host) is applied after it; other sessions see
#: the node go when the server applies it, which may be a moment after the call returns. The host
#: settles the outcome itself: if the reply is lost, it looks at the node again once the
#: connection is back and deletes it if it is still the one this handle created (its czxid), for
#: as long as the session lasts; a session that ends first takes the node with it. So returning
#: means the delete was sent, not that it was applied yet. A node the host's ledger does not hold
#: (one this handle did not create, one already deleted, one whose create's reply was lost), or a
#: call made while the session is not connected, is deleted as `delete(path, None)` deletes it,
#: waiting for the answer and raising its errors (`NoNode` when it is gone, `ConnectionLoss` when
#: the outcome is unknown, `SessionExpired`). `InvalidPath` and `LimitExceeded` are raised before
#: anything is sent.
delete_unwaited = wrap(_znode.delete_unwaited)
exists = wrap(_znode.exists)
get_data = wrap(_znode.get_data)
get_children = wrap(_znode.get_children)
set_data = wrap(_znode.set_data)
multi = wrap(_znode.multi)
sync = wrap(_znode.sync)
list_ephemerals = wrap(_znode.list_ephemerals)
check_path = wrap(_znode.check_path)
_pipeline = wrap(_znode.pipeline)
exists_watch = wrap(_watch.exists_watch)
get_data_watch = wrap(_watch.get_data_watch)
get_children_watch = wrap(_watch.get_children_watch)
session_info = _session.info
unique_id = _session.unique_id
_owns = wrap(_session.owns)
_wait_any = wrap(_watch.wait_any)
_contend = wrap(_contention.contend)


def owns(path, data=None):
    """Whether `path` exists and is this session's ephemeral node (holding exactly `data`, when
    given: handles on one host share a session, so a recipe tells its own node by an id it wrote
    into it)."""
    return _owns(path, data)


Created = types.Created
Stat = types.Stat
EventKind = types.EventKind
CreateOp = types.CreateOp
DeleteOp = types.DeleteOp
SetDataOp = types.SetDataOp
ProtectedOp = types.ProtectedOp


class Step:
    """The requests of a `pipeline` (the WIT `step` cases), each what the function of the same
    name does: `zk.Step.CreateProtected(zk.ProtectedOp(dir, name, data, mode))`,
    `zk.Step.GetChildren(path)`, ..."""

    Create = types.Step_Create
    CreateProtected = types.Step_CreateProtected
    Delete = types.Step_Delete
    SetData = types.Step_SetData
    Exists = types.Step_Exists
    GetData = types.Step_GetData
    GetChildren = types.Step_GetChildren


class StepResult:
    """What a `pipeline` step returned (the WIT `step-result` cases; `.value` holds it, as its
    function would return it): `isinstance(r, zk.StepResult.Children)`, ..."""

    Created = types.StepResult_Created
    Deleted = types.StepResult_Deleted
    DataSet = types.StepResult_DataSet
    Exists = types.StepResult_Exists
    Data = types.StepResult_Data
    Children = types.StepResult_Children


def pipeline(steps):
    """Sends every step (`zk.Step....`) at once and returns their results in order, for the
    price of one round trip: each entry is the step's `zk.StepResult....`, or the `ZkError` it
    failed with (returned, not raised: a failed step does not stop the ones after it). Not
    atomic, unlike `multi`; each step sees what the steps before it did. Raises a `ZkError` only
    when the whole call fails (more than 64 steps: `LimitExceeded`)."""
    return [r.value if isinstance(r, _Ok) else ZkError.from_wit(r.value) for r in _pipeline(steps)]

# Create modes without payload, as values (`zk.EPHEMERAL_SEQUENTIAL`, not `...()`).
PERSISTENT = types.CreateMode_Persistent()
PERSISTENT_SEQUENTIAL = types.CreateMode_PersistentSequential()
EPHEMERAL = types.CreateMode_Ephemeral()
EPHEMERAL_SEQUENTIAL = types.CreateMode_EphemeralSequential()
CONTAINER = types.CreateMode_Container()

#: How many times a write that failed with `connection-loss` is tried again before giving up
#: (reads are tried again by the host).
CONNECTION_LOSS_RETRIES = 20


def watch_wait(watcher, timeout_ms):
    """`watcher.wait(timeout_ms)`, raising `ZkError` (`Timeout` when it runs out)."""
    return wrap(watcher.wait)(timeout_ms)


def watch_changed(watcher, timeout_ms):
    """`watcher.changed(timeout_ms)`: as `watch_wait`, but the session's end raises
    `SessionExpired`, so the event returned is always a change to the node."""
    return wrap(watcher.changed)(timeout_ms)


def wait_any(watchers, deadline):
    """Blocks until one of `watchers` fires, and returns its index in the list (the first that
    fired already, if any); raises `SessionExpired` if the session ended, `Timeout` once the
    deadline passes: the host's `wait-any`. Every watcher stays armed; the one that fired keeps
    its event."""
    index, _ = _wait_any(list(watchers), deadline.remaining_ms())
    return index


# --- Identity --------------------------------------------------------------------------------

_session_id = None
_instance_id = None


def session_id():
    """This handle's session id (the `ephemeral-owner` of its nodes). A handle keeps the session
    it started on for life, so the host is asked once."""
    global _session_id
    if _session_id is None:
        _session_id = session_info().id
    return _session_id


def new_guid():
    """A fresh version-4 UUID for a protected create (the host's `unique-id`)."""
    return unique_id()


def instance_id():
    """An id unique to this recipe instance (handles on one host share a session)."""
    global _instance_id
    if _instance_id is None:
        _instance_id = new_guid()
    return _instance_id


# --- Paths and ordering ----------------------------------------------------------------------


def join(dir, name):
    """`dir` + "/" + `name`."""
    return f"/{name}" if dir == "/" else f"{dir}/{name}"


def node_name(path):
    """The last component of `path`."""
    return path.rsplit("/", 1)[-1]


def parent(path):
    """The parent of `path` ("/" for a top-level node)."""
    i = path.rfind("/")
    return "/" if i <= 0 else path[:i]


def sort_key(name, markers):
    """Curator's ordering of sequential children: the part after the last occurrence of each
    marker in turn (e.g. `lock-`, or `__READ__` then `__WRIT__`), or the whole name."""
    key = name
    for marker in markers:
        i = key.rfind(marker)
        if i >= 0:
            key = key[i + len(marker):]
    return key


def sorted_children(children, markers):
    """`children` ordered by `sort_key`."""
    return sorted(children, key=lambda c: sort_key(c, markers))


# --- Time ------------------------------------------------------------------------------------


class Deadline:
    """A point in time a blocking step must finish by; `Deadline(None)` never expires."""

    __slots__ = ("_at",)

    def __init__(self, timeout_ms):
        self._at = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000.0

    @classmethod
    def never(cls):
        return cls(None)

    def remaining_ms(self):
        """Whole milliseconds left (None: no limit), for `watcher.wait`."""
        if self._at is None:
            return None
        return max(0, int((self._at - time.monotonic()) * 1000))

    def expired(self):
        return self.remaining_ms() == 0


# --- Connection loss -------------------------------------------------------------------------


def _backoff(attempt):
    time.sleep(0.05 * min(attempt, 10))


def retrying(op, *args):
    """`op(*args)`, again while it fails with `connection-loss`: for writes whose repeat is
    harmless (a delete, an unconditional write). Reads need none: the host tries them again."""
    attempt = 0
    while True:
        try:
            return op(*args)
        except ConnectionLoss:
            if attempt >= CONNECTION_LOSS_RETRIES:
                raise
            attempt += 1
            _backoff(attempt)


def delete_retrying(path):
    """Deletes `path` through connection loss; a node already gone (or gone with an expired
    session) counts as deleted."""
    try:
        retrying(delete, path, None)
    except (NoNode, SessionExpired):
        pass


def release_node(path):
    """Releases our claim node `path` (a lock's, a lease's) without waiting for ZooKeeper's
    answer: `delete_unwaited` through connection loss (which only a waited delete can answer). A
    node already gone (or gone with an expired session) counts as released, as in guest/rust's
    `release_node`. The host settles a lost reply; a node its ledger does not hold is deleted the
    waited way, as `delete_retrying` deletes it."""
    try:
        retrying(delete_unwaited, path)
    except (NoNode, SessionExpired):
        pass


def ensure_parents(path):
    """Creates every missing ancestor of `path` as a container node, as Curator's
    `creatingParentContainersIfNeeded` does: the server removes them once they are empty."""
    at = 0
    while True:
        i = path.find("/", at + 1)
        if i < 0:
            return
        try:
            retrying(create, path[:i], b"", CONTAINER)
        except NodeExists:
            pass
        at = i


# --- Protected (recoverable) creates ---------------------------------------------------------


def protected_create(dir, name, data, mode):
    """Creates `<dir>/_c_<uuid>-<name>` (sequential modes append the sequence), Curator's
    protected mode: the host's `create-protected`, which finds the node again after a lost reply
    (for ephemeral modes only one this session owns) and makes missing parents as containers.
    Returns a `Created`."""
    return create_protected(dir, name, data, mode)


# --- Watching --------------------------------------------------------------------------------


def wait_on(watcher, deadline):
    """Blocks until `watcher` fires (`SessionExpired` if the session ended), or the deadline
    passes (`Timeout`)."""
    if deadline.expired():
        raise Timeout()
    watch_changed(watcher, deadline.remaining_ms())


_wait_for_change = wrap(_watch.wait_for_change)


def wait_for_change(path, deadline):
    """Blocks until `path` is deleted or changes (then the caller looks again; at once if it is
    gone already), the session ends (`SessionExpired`), or the deadline passes (`Timeout`): the
    host's `wait-for-change`."""
    _wait_for_change(path, deadline.remaining_ms())


def wait_gone(path, deadline):
    """Waits until the node at `path` changes: True when it was deleted (or was already gone),
    False for any other change. The session's end raises `SessionExpired`; the deadline passing
    raises `Timeout`. A data watch, as Curator's, so an absent node leaves no watch behind."""
    if deadline.expired():
        raise Timeout()
    try:
        _, _, watcher = get_data_watch(path)
    except NoNode:
        return True
    with watcher:
        return watch_changed(watcher, deadline.remaining_ms()).kind == EventKind.NODE_DELETED


# --- Contending for a turn (locks, leases, leadership) ---------------------------------------

Rule = _contention.Rule
Pick = _contention.Pick


def exclusive(markers):
    """The exclusive lock's rule over children ordered by `markers` (Curator's `["lock-"]`): ours
    holds when it is the first, and otherwise watches the node just before it."""
    return Rule(order=list(markers), blockers=_contention.Blockers_Any(), pick=Pick.NEAREST)


def first_containing(markers, kinds):
    """Curator's reader's rule over children ordered by `markers`: ours holds when no node whose
    name contains one of `kinds` (`__WRIT__`) is ahead of it, and otherwise watches the first
    such node."""
    return Rule(order=list(markers), blockers=_contention.Blockers_Containing(list(kinds)),
                pick=Pick.FIRST)


def create_and_list(dir, name, data, mode):
    """Steps 1 and 2 of a contention in one round trip (`pipeline`): the protected create of
    `name` under `dir`, and the listing of `dir` that follows it. Returns `(created, children)`;
    `children` is None if the listing failed (the caller lists again), and always shows the
    node when given."""
    results = pipeline([
        Step.CreateProtected(ProtectedOp(dir=dir, name=name, data=data, mode=mode)),
        Step.GetChildren(dir),
    ])
    first = results[0] if results else None
    if isinstance(first, ZkError):
        raise first
    if not isinstance(first, StepResult.Created):
        raise Other(f"pipeline answered {first!r} for a create")
    second = results[1] if len(results) > 1 else None
    listed = second.value[0] if isinstance(second, StepResult.Children) else None
    return first.value, listed


def contend(dir, name, data, rule, deadline):
    """The whole contention for a turn, the host's `contend`: creates our ephemeral sequential
    node `_c_<uuid>-<name><seq>` (holding `data`) under `dir` and lists `dir` in one round trip
    (protected: after a lost reply the host claims only a node this session owns), waits while
    `rule` (`exclusive(markers)`, `first_containing(markers, kinds)`) says a node ahead keeps
    ours waiting, holding without listing again when the node it waited for was the lowest and is
    deleted (the hand-over), and deletes the node again if we give up (`Timeout`) or fail.
    Returns the `Created` node."""
    return _contend(dir, _contention.Naming_Protected(name), data, rule, deadline.remaining_ms())


def try_now(acquire):
    """Runs `acquire()` (a blocking acquire with a zero timeout) as a try: `Timeout` -> None."""
    try:
        return acquire()
    except Timeout:
        return None


def quietly(fn, *args):
    """`fn(*args)`, ignoring a `ZkError` (cleanup on a path that already failed)."""
    try:
        fn(*args)
    except ZkError:
        pass
