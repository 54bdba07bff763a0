"""A kazoo 2.11 Lock, ReadLock, WriteLock or Semaphore driven line by line over stdin, so a test
can make a real kazoo client and wazoo's kazoo-format builds contend on one path.
Arguments: HOSTS PATH KIND [MAX_LEASES], KIND one of lock, read, write, semaphore.

    acquire <secs>   -> "acquired <node>" (locks) | "leased <node>" (semaphore) | "timeout"
                        | "refused <why>" (a semaphore of another max_leases); secs < 0: no limit
    release          -> "released"
    contenders       -> "contenders <JSON list>": kazoo's own view, contenders() of a lock (the
                        data of each contender, in kazoo's order), lease_holders() of a semaphore
    loop <n> <log>   -> n rounds of acquire, append "K enter" and "K exit" to <log>, release;
                        then "looped"
    quit
"""
import json
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout


def main():
    hosts, path, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    client = KazooClient(hosts=hosts)
    client.start(timeout=30)
    if kind == "lock":
        recipe = client.Lock(path, "kazoo peer")
    elif kind == "read":
        recipe = client.ReadLock(path, "kazoo peer")
    elif kind == "write":
        recipe = client.WriteLock(path, "kazoo peer")
    elif kind == "semaphore":
        recipe = client.Semaphore(path, "kazoo peer", max_leases=int(sys.argv[4]))
    else:
        raise SystemExit("kind: " + kind)

    def node():
        if kind == "semaphore":
            return recipe.create_path
        return path + "/" + recipe.node

    def acquire(secs):
        try:
            ok = recipe.acquire(timeout=None if secs < 0 else secs)
        except LockTimeout:
            return "timeout"
        except ValueError as e:
            return "refused " + str(e)
        if not ok:
            return "timeout"
        return ("leased " if kind == "semaphore" else "acquired ") + node()

    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "acquire":
            print(acquire(float(words[1])), flush=True)
        elif words[0] == "release":
            recipe.release()
            print("released", flush=True)
        elif words[0] == "contenders":
            seen = recipe.lease_holders() if kind == "semaphore" else recipe.contenders()
            print("contenders " + json.dumps(seen), flush=True)
        elif words[0] == "loop":
            with open(words[2], "a") as log:
                for _ in range(int(words[1])):
                    recipe.acquire()
                    log.write("K enter\n")
                    log.flush()
                    time.sleep(0.002)
                    log.write("K exit\n")
                    log.flush()
                    recipe.release()
            print("looped", flush=True)
        elif words[0] == "quit":
            break
        else:
            print("unknown " + line.strip(), flush=True)
    client.stop()
    client.close()


if __name__ == "__main__":
    main()
