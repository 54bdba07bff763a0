// A Curator 5.4 lock driven line by line over stdin, so a test can make a real Curator client
// and wazoo contend on one lock path. Arguments: CONNECT PATH KIND, where KIND is `mutex`
// (InterProcessMutex), `read` or `write` (InterProcessReadWriteLock), or `latch:ID` (LeaderLatch
// with participant id ID), `selector:ID:LOG` (LeaderSelector, autoRequeue, id ID, terms logged
// to LOG), or `semaphore:N` (InterProcessSemaphoreV2 with N leases).
//
//   acquire <ms>   -> "acquired <node>" (mutex) or "acquired" | "timeout"   (ms < 0: no limit)
//   release        -> "released"
//   loop <n> <log> -> n rounds of acquire/append "C enter"+"C exit" to <log>/release, then "looped"
//   participants   -> Curator's own view of the contenders, on one line: "participants" then
//                     mutex: getParticipantNodes() (full paths, Curator's order);
//                     read/write: the read lock's getParticipantNodes() as read:<path>, then the
//                     write lock's as write:<path>; semaphore: getParticipantNodes() (lease node
//                     names, as listed); latch: getParticipants() as <id>:leader or <id>:waits
//   latch only: await <ms> -> "leader" | "timeout" (starts the latch first), leader -> "leader-id <id>",
//               close -> "closed"
//   semaphore only: acquire <ms> -> "leased" | "timeout", release -> "released"
//   quit
//
// KIND `shared-count` (SharedCount) or `atomic-long` (DistributedAtomicLong) drives a counter at
// PATH instead, each command with a counter of its own (so nothing is created before the first):
//   get           -> "value <n>", read from the server ("error <message>" if Curator fails)
//   add <n> <k>   -> k increments of n, each retried until it applies, then "counted <last value
//                    this peer set>" ("error <message>" if Curator fails)
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public class CuratorPeer {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(100, 10));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        String kind = args.length > 2 ? args[2] : "mutex";
        if (kind.startsWith("selector:")) {
            String[] parts = kind.split(":", 3);
            selector(client, path, parts[1], parts[2]);
            return;
        }
        if (kind.startsWith("latch:")) {
            latch(client, new LeaderLatch(client, path, kind.substring("latch:".length())));
            return;
        }
        if (kind.equals("shared-count") || kind.equals("atomic-long")) {
            counter(client, path, kind.equals("shared-count"));
            client.close();
            return;
        }
        if (kind.startsWith("semaphore:")) {
            semaphore(new InterProcessSemaphoreV2(client, path, Integer.parseInt(kind.substring("semaphore:".length()))));
            client.close();
            return;
        }
        InterProcessMutex mutex;
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        switch (kind) {
            case "mutex": mutex = new InterProcessMutex(client, path); break;
            case "read": mutex = rw.readLock(); break;
            case "write": mutex = rw.writeLock(); break;
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
                case "participants":
                    if (kind.equals("mutex")) {
                        System.out.println(participants(mutex.getParticipantNodes(), ""));
                    } else {
                        String readers = participants(rw.readLock().getParticipantNodes(), "read:");
                        String writers = participants(rw.writeLock().getParticipantNodes(), "write:");
                        System.out.println(readers + writers.substring("participants".length()));
                    }
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
            } else if (words[0].equals("participants")) {
                System.out.println(participants(semaphore.getParticipantNodes(), ""));
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

    private static void counter(CuratorFramework client, String path, boolean shared) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ready");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            try {
                if (words[0].equals("get")) {
                    System.out.println("value " + (shared ? sharedGet(client, path) : atomicGet(client, path)));
                } else if (words[0].equals("add")) {
                    long delta = Long.parseLong(words[1]);
                    int times = Integer.parseInt(words[2]);
                    long last = 0;
                    for (int i = 0; i < times; i++) {
                        last = shared ? sharedAdd(client, path, (int) delta) : atomicAdd(client, path, delta);
                    }
                    System.out.println("counted " + last);
                } else if (words[0].equals("quit")) {
                    System.out.println("bye");
                    System.out.flush();
                    return;
                } else {
                    System.out.println("unknown " + line);
                }
            } catch (Exception e) {
                System.out.println("error " + e);
            }
            System.out.flush();
        }
    }

    // SharedCount's value, read when it starts (its later views come from watches).
    private static int sharedGet(CuratorFramework client, String path) throws Exception {
        try (SharedCount count = new SharedCount(client, path, 0)) {
            count.start();
            return count.getCount();
        }
    }

    // The documented SharedCount increment: trySetCount on the version read, until it applies.
    private static int sharedAdd(CuratorFramework client, String path, int delta) throws Exception {
        try (SharedCount count = new SharedCount(client, path, 0)) {
            count.start();
            while (true) {
                VersionedValue<Integer> now = count.getVersionedValue();
                int next = now.getValue() + delta;
                if (count.trySetCount(now, next)) {
                    return next;
                }
                Thread.yield();
            }
        }
    }

    private static long atomicGet(CuratorFramework client, String path) throws Exception {
        AtomicValue<Long> now = new DistributedAtomicLong(client, path, new RetryNTimes(10, 1)).get();
        if (!now.succeeded()) {
            throw new IllegalStateException("get did not succeed");
        }
        return now.postValue();
    }

    // DistributedAtomicLong.add, tried again until it succeeds (its retry policy may give up).
    private static long atomicAdd(CuratorFramework client, String path, long delta) throws Exception {
        DistributedAtomicLong counter = new DistributedAtomicLong(client, path, new RetryNTimes(10, 1));
        while (true) {
            AtomicValue<Long> added = counter.add(delta);
            if (added.succeeded()) {
                return added.postValue();
            }
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
                case "participants": {
                    StringBuilder seen = new StringBuilder("participants");
                    for (Participant p : latch.getParticipants()) {
                        seen.append(' ').append(p.getId()).append(p.isLeader() ? ":leader" : ":waits");
                    }
                    System.out.println(seen);
                    break;
                }
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

    // A LeaderSelector with autoRequeue as participant ID: each term appends "C enter" to LOG,
    // prints "leading", waits for "yield", appends "C exit" and ends (the selector campaigns
    // again). Also "participants" (getParticipants() as <id>:leader or <id>:waits) and "quit".
    private static void selector(CuratorFramework client, String path, String id, String log) throws Exception {
        java.util.concurrent.SynchronousQueue<String> yields = new java.util.concurrent.SynchronousQueue<>();
        org.apache.curator.framework.recipes.leader.LeaderSelector selector =
            new org.apache.curator.framework.recipes.leader.LeaderSelector(client, path,
                new org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter() {
                    @Override
                    public void takeLeadership(CuratorFramework c) throws Exception {
                        append(log, "C enter\n");
                        System.out.println("leading");
                        System.out.flush();
                        yields.take();
                        append(log, "C exit\n");
                    }
                });
        selector.setId(id);
        selector.autoRequeue();
        selector.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ready");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "yield":
                    yields.put("yield");
                    System.out.println("yielded");
                    break;
                case "participants": {
                    StringBuilder seen = new StringBuilder("participants");
                    for (Participant p : selector.getParticipants()) {
                        seen.append(' ').append(p.getId()).append(p.isLeader() ? ":leader" : ":waits");
                    }
                    System.out.println(seen);
                    break;
                }
                case "quit":
                    selector.close();
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

    private static void append(String path, String text) throws Exception {
        try (FileOutputStream out = new FileOutputStream(path, true)) {
            out.write(text.getBytes(StandardCharsets.UTF_8));
        }
    }

    // "participants" and each of `nodes`, prefixed with `prefix`, separated by spaces.
    private static String participants(Collection<String> nodes, String prefix) {
        StringBuilder line = new StringBuilder("participants");
        for (String node : nodes) {
            line.append(' ').append(prefix).append(node);
        }
        return line.toString();
    }

    // The lowest child is the holder's node; used to check the wire format from the other side.
    private static String currentNode(CuratorFramework client, String path) throws Exception {
        java.util.List<String> children = client.getChildren().forPath(path);
        children.sort((a, b) -> a.substring(a.lastIndexOf("lock-")).compareTo(b.substring(b.lastIndexOf("lock-"))));
        return path + "/" + children.get(0);
    }
}
