"""A kazoo 2.11 Barrier (and Counter) driven line by line over stdin, so a test can make a real kazoo client and
wazoo share one barrier. Arguments: HOSTS PATH.

    create        -> "created"
    remove        -> "removed" | "absent"
    wait <secs>   -> "cleared" | "timeout"
    add <n> <k>   -> "counted <value>"  (k increments of n on the kazoo Counter at PATH)
    quit
"""
import sys

from kazoo.client import KazooClient


def main():
    hosts, path = sys.argv[1], sys.argv[2]
    client = KazooClient(hosts=hosts)
    client.start(timeout=30)
    barrier = client.Barrier(path)
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "create":
            barrier.create()
            print("created", flush=True)
        elif words[0] == "remove":
            print("removed" if barrier.remove() else "absent", flush=True)
        elif words[0] == "wait":
            print("cleared" if barrier.wait(float(words[1])) else "timeout", flush=True)
        elif words[0] == "add":
            counter = client.Counter(path)
            for _ in range(int(words[2])):
                counter += int(words[1])
            print("counted %d" % counter.value, flush=True)
        elif words[0] == "quit":
            break
        else:
            print("unknown " + line.strip(), flush=True)
    client.stop()
    client.close()


if __name__ == "__main__":
    main()
