"""Takes a lock through a `wazoo serve` that asks for client certificates (mutual TLS).

    tls.py ADDRESS PATH CA CERT KEY

Prints `held TOKEN NODE` while it holds the lock at PATH, and then `no-certificate KIND CODE`:
what a client with the CA but no certificate of its own gets.
"""
import sys

import wazoo


def main():
    address, path, ca, cert, key = sys.argv[1:6]
    with wazoo.Client(address, tls_ca=ca, tls_cert=cert, tls_key=key, name="tls.py") as c:
        with c.lock(path, timeout=10) as claim:
            print("held", claim.token, claim.node, flush=True)
    try:
        wazoo.Client(address, tls_ca=ca, name="tls.py without a certificate").close()
        print("no-certificate served", flush=True)
    except wazoo.WazooError as e:
        print("no-certificate", e.kind, e.code.name, flush=True)


if __name__ == "__main__":
    main()
