"""Checks of the `wazoo` package that need no daemon: every error kind of the proto has its
exception class, and a status's details become the right exception; the token rule; the names of
the reasons a claim is lost; a daemon that cannot be reached or never answers raises
`wazoo.Unavailable` within the call's deadline; several addresses (the first that answers is
used); and a claim the daemon says it lost as it ends the session keeps the daemon's reason
(against a stand-in daemon on grpcio's server).

    unit.py

Prints `installed PATH` (where `wazoo` was imported from), one line per check that measures
something, then `unit ok`; fails with a traceback otherwise. tests/tests/python_client.rs runs it
against the installed package.
"""
import socket
import threading
import time
from concurrent import futures

import grpc

import wazoo
from wazoo import client, errors
from wazoo._proto import wazoo_pb2 as pb
from wazoo._proto import wazoo_pb2_grpc as rpc

# The google.rpc types grpcio-status reads status details with (googleapis-common-protos).
from google.rpc import error_details_pb2, status_pb2


class FakeRpcError(grpc.RpcError):
    """A failed call as grpc raises it: code, details and trailing metadata. A status trailer
    made by `status_trailer` gets the call's code and message, as the daemon sends them (unless
    `matching` is False)."""

    def __init__(self, code, details, trailers=(), matching=True):
        self._code, self._details = code, details
        fixed = []
        for key, value in trailers:
            if key == "grpc-status-details-bin" and matching:
                status = status_pb2.Status()
                try:
                    status.ParseFromString(value)
                    status.code, status.message = code.value[0], details
                    value = status.SerializeToString()
                except Exception:
                    pass
            fixed.append((key, value))
        self._trailers = tuple(fixed)

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailers


def status_trailer(reason, domain="wazoo.v1"):
    info = error_details_pb2.ErrorInfo(reason=reason, domain=domain)
    status = status_pb2.Status(code=4, message="m")
    detail = status.details.add()
    detail.Pack(info)
    return ("grpc-status-details-bin", status.SerializeToString())


def main():
    print("installed", wazoo.__file__, flush=True)

    kinds = {name for name in pb.ErrorKind.keys() if name != "ERROR_KIND_UNSPECIFIED"}
    assert set(errors.KINDS) == kinds, f"kinds without a class: {kinds - set(errors.KINDS)}"
    for reason, cls in errors.KINDS.items():
        assert issubclass(cls, wazoo.WazooError) and reason == "ERROR_KIND_" + cls.kind, cls
        assert getattr(wazoo, cls.__name__) is cls, f"wazoo.{cls.__name__} is not exported"

    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "timeout: no lock",
                                     [("other", "x"), status_trailer("ERROR_KIND_TIMEOUT")]))
    assert type(e) is wazoo.Timeout and e.kind == "TIMEOUT", repr(e)
    assert e.code == grpc.StatusCode.DEADLINE_EXCEEDED and e.details == "timeout: no lock", repr(e)
    assert str(e) == "timeout: no lock"

    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "bad-version: 3",
                                     [status_trailer("ERROR_KIND_BAD_VERSION")]))
    assert type(e) is wazoo.BadVersion, repr(e)

    # A kind newer than this client: the base class, its name kept.
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.UNKNOWN, "new", [status_trailer("ERROR_KIND_NEWER")]))
    assert type(e) is wazoo.WazooError and e.kind == "NEWER", repr(e)

    # Not the daemon's: another domain, or no details at all.
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.NOT_FOUND, "x",
                                     [status_trailer("ERROR_KIND_NO_NODE", domain="other.v1")]))
    assert type(e) is wazoo.WazooError and e.kind is None, repr(e)
    # A status whose details say another code than the call's: grpcio-status refuses it, and
    # the error has no kind.
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.NOT_FOUND, "x", [status_trailer("ERROR_KIND_NO_NODE")],
                                     matching=False))
    assert type(e) is wazoo.WazooError and e.kind is None, repr(e)
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.NOT_FOUND, "x", [status_trailer("ERROR_KIND_NO_NODE")]))
    assert type(e) is wazoo.NoNode, repr(e)
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.UNIMPLEMENTED, "unknown method"))
    assert type(e) is wazoo.WazooError and e.kind is None and e.code == grpc.StatusCode.UNIMPLEMENTED, repr(e)
    malformed = [("grpc-status-details-bin", b"\xff\xff")]
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.UNKNOWN, "x", malformed))
    assert type(e) is wazoo.WazooError and e.kind is None, repr(e)

    # Not reached, or no answer in time: Unavailable, still without a kind.
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        e = errors.from_rpc(FakeRpcError(code, "no answer"))
        assert type(e) is wazoo.Unavailable and e.kind is None and e.code == code, repr(e)
        assert isinstance(e, wazoo.WazooError)
    # The daemon's own TIMEOUT is not.
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "t", [status_trailer("ERROR_KIND_TIMEOUT")]))
    assert type(e) is wazoo.Timeout, repr(e)

    lost = wazoo.LockLost("the claim on /x was lost: node-deleted", "node-deleted")
    assert isinstance(lost, wazoo.WazooError) and lost.reason == "node-deleted" and lost.kind is None

    event = wazoo.WatchEvent("CREATED", "/a", b"x", 0)
    assert (event.kind, event.path, event.data, event.version, event.czxid) == ("CREATED", "/a", b"x", 0, 0)

    tokens()
    reasons()
    unreachable()
    addresses()
    daemon_says_why()
    print("unit ok", flush=True)


def tokens():
    """A token is 1+ visible ASCII characters (0x21-0x7E), no spaces; the empty string is
    refused (None is no token), before anything is sent, and the message states the rule."""
    rule = "1 or more visible ASCII characters (0x21 to 0x7E), no spaces"
    for bad in ["", " ", "a b", "tab\there", "caf\u00e9", "new\nline", "\x7f"]:
        try:
            wazoo.Client("127.0.0.1:1", token=bad)
        except ValueError as e:
            assert rule in str(e), f"{bad!r}: {e}"
            assert not bad.strip() or bad not in str(e), f"the message shows the token: {e}"
        else:
            raise AssertionError(f"the token {bad!r} was taken")
    try:
        wazoo.Client("127.0.0.1:1", token=b"bytes")
    except TypeError:
        pass
    else:
        raise AssertionError("a bytes token was taken")
    # Every visible ASCII character is allowed: the call goes out (and finds nobody).
    for good in ["x", "".join(chr(c) for c in range(0x21, 0x7F))]:
        try:
            wazoo.Client("127.0.0.1:1", token=good, call_timeout=5)
        except wazoo.Unavailable:
            pass
    print("tokens ok", flush=True)


class Event:
    def __init__(self, loss_reason, reason=""):
        self.loss_reason, self.reason = loss_reason, reason


def reasons():
    """Every LossReason has its name as Claim.reason says it; a newer one does not crash."""
    names = {pb.LossReason.Value(n): n for n in pb.LossReason.keys()}
    assert client.loss_reason(Event(pb.LOSS_REASON_SESSION_CLOSED)) == "session-closed"
    assert client.loss_reason(Event(pb.LOSS_REASON_RELEASED)) == "released"
    assert client.loss_reason(Event(pb.LOSS_REASON_CLIENT_SESSION_ENDED)) == "client-session-ended"
    for value, name in names.items():
        if value:
            expected = name[len("LOSS_REASON_"):].lower().replace("_", "-")
            assert client.loss_reason(Event(value)) == expected, name
    assert client.loss_reason(Event(0, "session-expired")) == "session-expired"
    assert client.loss_reason(Event(max(names) + 1, "newer")) == "newer"
    assert client.loss_reason(Event(max(names) + 1)) == "unknown"
    print("reasons", " ".join(client.loss_reason(Event(v)) for v in sorted(names) if v), flush=True)


def unreachable():
    """Nobody listening, and a listener that never answers (a frozen daemon's kernel still
    accepts the connection): Unavailable, within the call's deadline."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = time.monotonic()
    try:
        wazoo.Client(f"127.0.0.1:{port}", call_timeout=2)
        raise AssertionError("a client connected to nobody")
    except wazoo.Unavailable as e:
        assert e.kind is None and e.code == grpc.StatusCode.UNAVAILABLE, repr(e)
    print("refused", f"{time.monotonic() - started:.1f}", flush=True)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        try:
            wazoo.Client(f"127.0.0.1:{silent.getsockname()[1]}", call_timeout=2)
            raise AssertionError("a client connected to a listener that never answers")
        except wazoo.Unavailable as e:
            assert e.kind is None, repr(e)
            took = time.monotonic() - started
            assert took < 2 + 1.5, f"Open waited {took:.1f}s on a silent listener with call_timeout=2"
    print("silent", f"{time.monotonic() - started:.1f}", flush=True)


def addresses():
    """Several daemons, comma-separated or as a list: the session opens on the first that
    answers; a daemon outside a group is no group."""
    assert client._addresses("a:1, b:2,,a:1") == ["a:1", "b:2"]
    assert client._addresses(["a:1,b:2", "c:3"]) == ["a:1", "b:2", "c:3"]
    for bad in ["", " , ", []]:
        try:
            client._addresses(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{bad!r} was taken as addresses")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"127.0.0.1:{closed.getsockname()[1]}"
    server = grpc.server(futures.ThreadPoolExecutor(8))
    stand_in = StandIn()
    rpc.add_SessionsServicer_to_server(stand_in, server)
    rpc.add_RecipesServicer_to_server(stand_in, server)
    answering = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        for given in (f"{refused},{answering}", [refused, answering]):
            c = wazoo.Client(given, call_timeout=5)
            assert c.address == answering and c.addresses == [refused, answering], (c.address, c.addresses)
            assert not c.in_group and c.members == [] and c.jeopardy is None, c.members
            stand_in.said.set()  # the keepalive stream ends: the session is lost, as with one daemon
            assert c.lost.wait(10), "a client outside a group lost nothing when its stream ended"
            c.close()
            stand_in.said.clear()
    finally:
        server.stop(0)
    print("addresses ok", flush=True)


class StandIn(rpc.SessionsServicer, rpc.RecipesServicer):
    """A daemon that ends the session as `wazoo serve` does when it stops: each claim's Lost
    stream gets SESSION_CLOSED, and the keepalive stream ends, at the same moment."""

    def __init__(self):
        self.stop = threading.Event()
        self.said = threading.Event()

    def Open(self, request, context):
        return pb.OpenReply(session=(1 << 64) - 3, ttl_ms=60000)

    def KeepAlive(self, request_iterator, context):
        replies = []
        reader = threading.Thread(target=lambda: [replies.append(r) for r in request_iterator], daemon=True)
        reader.start()
        yield pb.KeepAliveReply(session=(1 << 64) - 3, ttl_ms=60000)
        self.said.wait()

    def Acquire(self, request, context):
        return pb.Claim(node="/stand-in/lock-0000000001", fencing_token=7, handle=1, recipe_version="0" * 12)

    def Lost(self, request, context):
        # As the daemon does: the headers go out once it follows the claim.
        context.send_initial_metadata(())
        self.stop.wait()
        # The keepalive stream ends first here, its end a little ahead of the event: the client
        # must not take the first news for the last.
        self.said.set()
        time.sleep(0.05)
        yield pb.LostEvent(reason="session-expired", loss_reason=pb.LOSS_REASON_SESSION_CLOSED)

    def Release(self, request, context):
        return pb.Empty()


def daemon_says_why():
    """The daemon's word on a claim wins over the keepalive stream that ends with it: the reason
    is "session-closed", never "disconnected", every time."""
    for attempt in range(10):
        stand_in = StandIn()
        server = grpc.server(futures.ThreadPoolExecutor(8))
        rpc.add_SessionsServicer_to_server(stand_in, server)
        rpc.add_RecipesServicer_to_server(stand_in, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            c = wazoo.Client(f"127.0.0.1:{port}", call_timeout=5)
            assert c.session_id == (1 << 64) - 3, c.session_id  # a random u64 session id
            claim = c.lock("/stand-in")
            stand_in.stop.set()
            assert claim.lost.wait(10), "the claim was not lost"
            assert c.lost.wait(10), "the session was not lost"
            assert claim.reason == "session-closed", f"attempt {attempt}: {claim.reason}: {claim.why}"
            try:
                with claim:
                    pass
            except wazoo.LockLost as e:
                assert e.reason == "session-closed", e.reason
            c.close()
        finally:
            server.stop(0)
    print("daemon-says-why ok", flush=True)


if __name__ == "__main__":
    main()
