// A Curator 5.4 lock driven line by line over stdin, so a test can make a real Curator client
// and wazoo contend on one lock path. Arguments: CONNECT PATH KIND, where KIND is `mutex`
// (InterProcessMutex), `read` or `write` (InterProcessReadWriteLock), or `latch:ID` (LeaderLatch
// with participant id ID), or `semaphore:N` (InterProcessSemaphoreV2 with N leases).
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
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
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
