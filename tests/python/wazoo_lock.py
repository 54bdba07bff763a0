"""Takes a lock through `wazoo serve`: a client of its gRPC API (host/proto/wazoo.proto).

    wazoo_lock.py ADDRESS LOCK_PATH [--ttl-ms N] [--hold-seconds S] [--token T]
                  [--tls-ca CA.pem [--tls-cert CERT.pem --tls-key KEY.pem]]

Prints `held <fencing_token> <node> <recipe_version>` once the lock is held, keeps it until stdin
ends (or for S seconds), then prints `released`. On a gRPC error: `error <code> <details>` on
stderr, exit status 1. The stubs come from tests/python/gen_stubs.sh, in the directory named by
$WAZOO_PY_STUBS or next to this file.
"""
import argparse
import os
import sys
import threading
import time

import grpc

sys.path.insert(0, os.environ.get("WAZOO_PY_STUBS") or os.path.dirname(os.path.abspath(__file__)))
import wazoo_pb2 as pb  # noqa: E402
import wazoo_pb2_grpc as rpc  # noqa: E402


def keep_alive(sessions, session, ttl_ms, done):
    """Sends a keepalive per TTL/3 on one stream, until the channel closes (then the daemon
    closes the session). Exits the process if the session is lost before `done` is set."""

    def beats():
        while True:
            yield pb.KeepAliveRequest(session=session)
            time.sleep(ttl_ms / 3000)

    try:
        for reply in sessions.KeepAlive(beats()):
            if reply.ttl_ms == 0 and not done.is_set():  # expired: the lock is gone
                print("error NOT_FOUND session: expired", file=sys.stderr, flush=True)
                os._exit(1)
    except grpc.RpcError as e:
        if not done.is_set():  # the daemon went away while we held the lock
            print(f"error {e.code().name} {e.details()}", file=sys.stderr, flush=True)
            os._exit(1)


class BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                  grpc.StreamStreamClientInterceptor):
    """Adds `authorization: Bearer TOKEN` to every call on a plain-text channel (gRPC's call
    credentials travel only over TLS)."""

    def __init__(self, token):
        self.metadata = ("authorization", f"Bearer {token}")

    def _with_token(self, details):
        metadata = list(details.metadata or []) + [self.metadata]
        return _Details(details.method, details.timeout, metadata, details.credentials,
                        getattr(details, "wait_for_ready", None), getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._with_token(details), requests)


class _Details(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method, self.timeout, self.metadata = method, timeout, metadata
        self.credentials, self.wait_for_ready, self.compression = credentials, wait_for_ready, compression


def main():
    parser = argparse.ArgumentParser(description="Take a lock through wazoo serve.")
    parser.add_argument("address", help="host:port of wazoo serve")
    parser.add_argument("lock_path", help="the lock's ZooKeeper path, e.g. /locks/report")
    parser.add_argument("--ttl-ms", type=int, default=2000, help="client session TTL")
    parser.add_argument("--hold-seconds", type=float, help="hold this long (default: until EOF)")
    parser.add_argument("--token", help="API token, sent as authorization: Bearer TOKEN")
    parser.add_argument("--tls-ca", help="TLS: the CA (PEM) of the daemon's certificate")
    parser.add_argument("--tls-cert", help="mutual TLS: this client's certificate (PEM)")
    parser.add_argument("--tls-key", help="mutual TLS: this client's key (PEM)")
    args = parser.parse_args()

    done = threading.Event()  # set when we let go on purpose: keepalive failures are expected
    if args.tls_ca:
        read = lambda path: open(path, "rb").read() if path else None  # noqa: E731
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(args.tls_ca),
            private_key=read(args.tls_key),
            certificate_chain=read(args.tls_cert))
        if args.token:
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.access_token_call_credentials(args.token))
        channel = grpc.secure_channel(args.address, credentials)
    elif args.token:
        # A token in plain text: only towards a daemon on loopback.
        channel = grpc.intercept_channel(grpc.insecure_channel(args.address), BearerToken(args.token))
    else:
        channel = grpc.insecure_channel(args.address)
    with channel:
        sessions, recipes = rpc.SessionsStub(channel), rpc.RecipesStub(channel)
        try:
            # 1. A client session: everything we take below lives as long as it does.
            opened = sessions.Open(pb.OpenRequest(ttl_ms=args.ttl_ms, name="wazoo_lock.py"))
            threading.Thread(target=keep_alive, daemon=True,
                             args=(sessions, opened.session, opened.ttl_ms, done)).start()

            # 2. Block until the lock is ours. Pass the fencing token to what the lock protects.
            claim = recipes.Acquire(pb.AcquireRequest(
                session=opened.session, path=args.lock_path, family=pb.LOCK))
            print(f"held {claim.fencing_token} {claim.node} {claim.recipe_version}", flush=True)

            # 3. Do the work under the lock: here, wait.
            if args.hold_seconds is not None:
                time.sleep(args.hold_seconds)
            else:
                sys.stdin.read()

            # 4. Let go, then end the session (if we crash instead, its TTL does both).
            done.set()
            recipes.Release(pb.HandleRef(session=opened.session, handle=claim.handle))
            print("released", flush=True)
            sessions.Close(pb.SessionRef(session=opened.session))
        except grpc.RpcError as e:
            done.set()
            print(f"error {e.code().name} {e.details()}", file=sys.stderr, flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
