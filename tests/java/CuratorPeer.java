// A Curator 5.4 lock driven line by line over stdin, so a test can make a real Curator client
// and wazoo contend on one lock path. Arguments: CONNECT PATH KIND, where KIND is `mutex`
// (InterProcessMutex), `read` or `write` (InterProcessReadWriteLock), or `latch:ID` (LeaderLatch
// with participant id ID), or `semaphore:N` (InterProcessSemaphoreV2 with N leases).
//
//   acquire <ms>   -> "acquired <node>" (mutex) or "acquired" | "timeout"   (ms < 0: no limit)
//   release        -> "released"
//   loop <n> <log> -> n rounds of acquire/append "C enter"+"C exit" to <log>/release, then "looped"
//   latch only: await <ms> -> "leader" | "timeout" (starts the latch first), leader -> "leader-id <id>",
//               close -> "closed"
//   semaphore only: acquire <ms> -> "leased" | "timeout", release -> "released"
//   quit
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorPeer {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(100, 10));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        String kind = args.length > 2 ? args[2] : "mutex";
        if (kind.startsWith("latch:")) {
            latch(client, new LeaderLatch(client, path, kind.substring("latch:".length())));
            return;
        }
        if (kind.startsWith("semaphore:")) {
            semaphore(new InterProcessSemaphoreV2(client, path, Integer.parseInt(kind.substring("semaphore:".length()))));
            client.close();
            return;
        }
        InterProcessMutex mutex;
        switch (kind) {
            case "mutex": mutex = new InterProcessMutex(client, path); break;
            case "read": mutex = new InterProcessReadWriteLock(client, path).readLock(); break;
            case "write": mutex = new InterProcessReadWriteLock(client, path).writeLock(); break;
            default: throw new IllegalArgumentException("kind: " + kind);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ready");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            switch (words[0]) {
                case "acquire": {
                    long ms = Long.parseLong(words[1]);
                    boolean ok;
                    if (ms < 0) {
                        mutex.acquire();
                        ok = true;
                    } else {
                        ok = mutex.acquire(ms, TimeUnit.MILLISECONDS);
                    }
                    String node = kind.equals("mutex") ? " " + currentNode(client, path) : "";
                    System.out.println(ok ? "acquired" + node : "timeout");
                    break;
                }
                case "release":
                    mutex.release();
                    System.out.println("released");
                    break;
                case "loop": {
                    int rounds = Integer.parseInt(words[1]);
                    try (FileOutputStream log = new FileOutputStream(words[2], true)) {
                        for (int i = 0; i < rounds; i++) {
                            mutex.acquire();
                            log.write("C enter\n".getBytes(StandardCharsets.UTF_8));
                            Thread.sleep(2);
                            log.write("C exit\n".getBytes(StandardCharsets.UTF_8));
                            mutex.release();
                        }
                    }
                    System.out.println("looped");
                    break;
                }
                case "quit":
                    client.close();
                    System.out.println("bye");
                    System.out.flush();
                    return;
                default:
                    System.out.println("unknown " + line);
            }
            System.out.flush();
        }
        client.close();
    }

    private static void semaphore(InterProcessSemaphoreV2 semaphore) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ready");
        System.out.flush();
        Lease lease = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            if (words[0].equals("acquire")) {
                lease = semaphore.acquire(Long.parseLong(words[1]), TimeUnit.MILLISECONDS);
                System.out.println(lease != null ? "leased" : "timeout");
            } else if (words[0].equals("release")) {
                semaphore.returnLease(lease);
                lease = null;
                System.out.println("released");
            } else if (words[0].equals("quit")) {
                System.out.println("bye");
                System.out.flush();
                return;
            } else {
                System.out.println("unknown " + line);
            }
            System.out.flush();
        }
    }

    private static void latch(CuratorFramework client, LeaderLatch latch) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ready");
        System.out.flush();
        boolean started = false;
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            switch (words[0]) {
                case "await":
                    if (!started) {
                        latch.start();
                        started = true;
                    }
                    boolean leads = latch.await(Long.parseLong(words[1]), TimeUnit.MILLISECONDS);
                    System.out.println(leads ? "leader" : "timeout");
                    break;
                case "leader":
                    System.out.println("leader-id " + latch.getLeader().getId());
                    break;
                case "close":
                    latch.close();
                    started = false;
                    System.out.println("closed");
                    break;
                case "quit":
                    client.close();
                    System.out.println("bye");
                    System.out.flush();
                    return;
                default:
                    System.out.println("unknown " + line);
            }
            System.out.flush();
        }
    }

    // The lowest child is the holder's node; used to check the wire format from the other side.
    private static String currentNode(CuratorFramework client, String path) throws Exception {
        java.util.List<String> children = client.getChildren().forPath(path);
        children.sort((a, b) -> a.substring(a.lastIndexOf("lock-")).compareTo(b.substring(b.lastIndexOf("lock-"))));
        return path + "/" + children.get(0);
    }
}
