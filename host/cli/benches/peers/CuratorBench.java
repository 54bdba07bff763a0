// Curator 5.4 InterProcessMutex acquire+release, timed for the peers bench
// (host/cli/benches/peers.rs). Arguments: CONNECT PATH WARMUP OPS CONTENDERS SECONDS.
//
// Uncontended: one mutex on PATH/uncontended, WARMUP untimed operations (the JIT compiles the
// hot paths), then OPS timed ones. Contended: CONTENDERS threads, each with its own mutex on
// PATH/contended and all on one CuratorFramework, loop for SECONDS (after an untimed run of the
// same length); every operation started before the deadline is counted, over the time until the
// last thread is done. Prints two lines:
//
//   uncontended <p50_us> <p99_us> <ops_per_s>
//   contended <ops> <ops_per_s>
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        int warmup = Integer.parseInt(args[2]);
        int ops = Integer.parseInt(args[3]);
        int contenders = Integer.parseInt(args[4]);
        double seconds = Double.parseDouble(args[5]);

        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no ZooKeeper connection to " + connect + " within 30 s");
        }

        InterProcessMutex mutex = new InterProcessMutex(client, path + "/uncontended");
        for (int i = 0; i < warmup; i++) {
            mutex.acquire();
            mutex.release();
        }
        long[] times = new long[ops];
        long started = System.nanoTime();
        for (int i = 0; i < ops; i++) {
            long t = System.nanoTime();
            mutex.acquire();
            mutex.release();
            times[i] = System.nanoTime() - t;
        }
        double elapsed = (System.nanoTime() - started) / 1e9;
        Arrays.sort(times);
        System.out.printf("uncontended %.1f %.1f %.1f%n",
                percentile(times, 50) / 1e3, percentile(times, 99) / 1e3, ops / elapsed);
        System.out.flush();

        contend(client, path + "/contended", contenders, seconds);
        long[] result = contend(client, path + "/contended", contenders, seconds);
        System.out.printf("contended %d %.1f%n", result[0], result[0] / (result[1] / 1e9));
        System.out.flush();
        client.close();
    }

    // CONTENDERS threads loop acquire+release until `seconds` have passed: {operations, nanos}.
    private static long[] contend(CuratorFramework client, String path, int contenders, double seconds)
            throws Exception {
        CountDownLatch start = new CountDownLatch(1);
        AtomicLong done = new AtomicLong();
        AtomicReference<Exception> failed = new AtomicReference<>();
        long length = (long) (seconds * 1e9);
        long[] deadline = new long[1];
        Thread[] threads = new Thread[contenders];
        for (int i = 0; i < contenders; i++) {
            InterProcessMutex mutex = new InterProcessMutex(client, path);
            threads[i] = new Thread(() -> {
                try {
                    start.await();
                    while (System.nanoTime() < deadline[0]) {
                        mutex.acquire();
                        mutex.release();
                        done.incrementAndGet();
                    }
                } catch (Exception e) {
                    failed.compareAndSet(null, e);
                }
            });
            threads[i].start();
        }
        long started = System.nanoTime();
        deadline[0] = started + length;
        start.countDown();
        for (Thread t : threads) {
            t.join();
        }
        long elapsed = System.nanoTime() - started;
        if (failed.get() != null) {
            throw failed.get();
        }
        return new long[] {done.get(), elapsed};
    }

    // The same rule as the Rust side: the sorted sample at round(p/100 * (n-1)).
    private static long percentile(long[] sorted, double p) {
        return sorted[(int) Math.round(p / 100.0 * (sorted.length - 1))];
    }
}
