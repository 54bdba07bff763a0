"""kazoo 2.11 Lock acquire+release, timed for the peers bench (host/cli/benches/peers.rs).

Arguments: HOSTS PATH WARMUP OPS CONTENDERS SECONDS.

Uncontended: one Lock on PATH/uncontended, WARMUP untimed operations, then OPS timed ones.
Contended: CONTENDERS threads, each with its own Lock on PATH/contended and all on one
KazooClient, loop for SECONDS (after an untimed run of the same length); every operation started
before the deadline is counted, over the time until the last thread is done. Prints two lines:

    uncontended <p50_us> <p99_us> <ops_per_s>
    contended <ops> <ops_per_s>
"""
import sys
import threading
import time

from kazoo.client import KazooClient


def percentile(ordered, p):
    """The same rule as the Rust side: the sorted sample at round(p/100 * (n-1))."""
    return ordered[int(round(p / 100.0 * (len(ordered) - 1)))]


def contend(client, path, contenders, seconds):
    """CONTENDERS threads loop acquire+release until SECONDS have passed: (operations, seconds)."""
    start = threading.Barrier(contenders + 1)
    counts = [0] * contenders
    failures = []
    deadline = [0.0]

    def loop(i):
        lock = client.Lock(path)
        start.wait()
        try:
            while time.perf_counter() < deadline[0]:
                lock.acquire()
                lock.release()
                counts[i] += 1
        except Exception as e:  # reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(contenders)]
    for t in threads:
        t.start()
    started = time.perf_counter()
    deadline[0] = started + seconds
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return sum(counts), elapsed


def main():
    hosts, path = sys.argv[1], sys.argv[2]
    warmup, ops, contenders = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    seconds = float(sys.argv[6])
    client = KazooClient(hosts=hosts)
    client.start(timeout=30)

    lock = client.Lock(path + "/uncontended")
    for _ in range(warmup):
        lock.acquire()
        lock.release()
    times = []
    started = time.perf_counter()
    for _ in range(ops):
        t = time.perf_counter_ns()
        lock.acquire()
        lock.release()
        times.append(time.perf_counter_ns() - t)
    elapsed = time.perf_counter() - started
    times.sort()
    print("uncontended %.1f %.1f %.1f" % (percentile(times, 50) / 1e3, percentile(times, 99) / 1e3, ops / elapsed),
          flush=True)

    contend(client, path + "/contended", contenders, seconds)
    done, elapsed = contend(client, path + "/contended", contenders, seconds)
    print("contended %d %.1f" % (done, done / elapsed), flush=True)
    client.stop()
    client.close()


if __name__ == "__main__":
    main()
