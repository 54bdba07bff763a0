"""Checks of the `wazoo` package that need no daemon: every error kind of the proto has its
exception class, and a status's details become the right exception.

    unit.py

Prints `installed PATH` (where `wazoo` was imported from), then `unit ok`; fails with a
traceback otherwise. tests/tests/python_client.rs runs it against the installed package.
"""
import grpc

import wazoo
from wazoo import errors
from wazoo._proto import wazoo_pb2 as pb

# The google.rpc types the package reads status details with (googleapis' or its own copy).
error_details_pb2, status_pb2 = errors._error_details, errors._status


class FakeRpcError(grpc.RpcError):
    """A failed call as grpc raises it: code, details and trailing metadata."""

    def __init__(self, code, details, trailers=()):
        self._code, self._details, self._trailers = code, details, tuple(trailers)

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
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused"))
    assert type(e) is wazoo.WazooError and e.kind is None and e.code == grpc.StatusCode.UNAVAILABLE, repr(e)
    malformed = [("grpc-status-details-bin", b"\xff\xff")]
    e = errors.from_rpc(FakeRpcError(grpc.StatusCode.UNKNOWN, "x", malformed))
    assert type(e) is wazoo.WazooError and e.kind is None, repr(e)

    lost = wazoo.LockLost("the claim on /x was lost: node-deleted", "node-deleted")
    assert isinstance(lost, wazoo.WazooError) and lost.reason == "node-deleted" and lost.kind is None

    event = wazoo.WatchEvent("CREATED", "/a", b"x", 0)
    assert (event.kind, event.path, event.data, event.version, event.czxid) == ("CREATED", "/a", b"x", 0, 0)

    print("unit ok", flush=True)


if __name__ == "__main__":
    main()
