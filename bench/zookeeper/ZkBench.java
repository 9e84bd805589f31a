// ZooKeeper peer for scripts/bench: C threads cycle acquire + release of Apache Curator's
// InterProcessMutex (ZooKeeper's lock recipe: an ephemeral sequential node, the lowest one holds
// the lock, the others watch their predecessor) over R resources, on one Curator client.
//
//   java -cp CLASSPATH ZkBench --connect 127.0.0.1:2181,... [-c 50] [-r 10000] [-d 10]
//        [--warmup 2] [--ttl 10000] [--wait 10000] [--server-pid PID,...]
//
// Prints one JSON line with the fields of bench/node/redlock-bench.mjs (cycles_per_s, acquire
// percentiles, client CPU per cycle) and, with --server-pid, the servers' CPU per cycle. Cycles
// count when their release completes inside the window; acquire latencies count for acquires that
// start inside it. An acquire waits for the holder for at most --wait ms; one that times out
// counts as failed. --ttl is the ZooKeeper session timeout (the lock lives as long as the session).
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public final class ZkBench {
  static volatile boolean measuring = false;
  static volatile boolean running = true;

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new TreeMap<>(Map.of("connect", "127.0.0.1:2181", "c", "50",
        "r", "10000", "d", "10", "warmup", "2", "ttl", "10000", "wait", "10000",
        "server-pid", "", "clients", "50"));
    for (int i = 0; i < argv.length; i += 2) {
      String key = argv[i].replaceFirst("^-+", "");
      if (!args.containsKey(key) || i + 1 >= argv.length) {
        System.err.println("zk-bench: unknown or incomplete option " + argv[i]);
        System.exit(64);
      }
      args.put(key, argv[i + 1]);
    }
    int workers = Integer.parseInt(args.get("c"));
    int resources = Integer.parseInt(args.get("r"));
    double seconds = Double.parseDouble(args.get("d"));
    double warmup = Double.parseDouble(args.get("warmup"));
    int ttl = Integer.parseInt(args.get("ttl"));
    long waitMs = Long.parseLong(args.get("wait"));
    List<Integer> pids = new ArrayList<>();
    for (String pid : args.get("server-pid").split(","))
      if (!pid.isEmpty()) pids.add(Integer.parseInt(pid));

    List<CuratorFramework> clients = new ArrayList<>();
    for (int i = 0; i < Integer.parseInt(args.get("clients")); ++i) {
      CuratorFramework client = CuratorFrameworkFactory.builder()
          .connectString(args.get("connect")).sessionTimeoutMs(ttl).connectionTimeoutMs(5000)
          .retryPolicy(new RetryNTimes(3, 100)).build();
      client.start();
      if (!client.blockUntilConnected(10, TimeUnit.SECONDS)) {
        System.err.println("zk-bench: cannot connect to " + args.get("connect"));
        System.exit(1);
      }
      clients.add(client);
    }

    AtomicLong cycles = new AtomicLong(), failed = new AtomicLong(), errors = new AtomicLong();
    List<List<Long>> latencies = new ArrayList<>(); // µs, per thread: no lock on the hot path
    List<Thread> threads = new ArrayList<>();
    for (int w = 0; w < workers; ++w) {
      List<Long> mine = new ArrayList<>();
      CuratorFramework client = clients.get(w % clients.size());
      latencies.add(mine);
      Thread thread = new Thread(() -> {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (running) {
          InterProcessMutex mutex =
              new InterProcessMutex(client, "/lock/r" + random.nextInt(resources));
          boolean counted = measuring;
          long started = System.nanoTime();
          try {
            if (!mutex.acquire(waitMs, TimeUnit.MILLISECONDS)) {
              if (measuring) failed.incrementAndGet();
              continue;
            }
          } catch (Exception e) {
            if (measuring) errors.incrementAndGet();
            continue;
          }
          if (counted && measuring) mine.add((System.nanoTime() - started) / 1000);
          try {
            mutex.release();
            if (measuring) cycles.incrementAndGet();
          } catch (Exception e) {
            if (measuring) errors.incrementAndGet();
          }
        }
      });
      thread.start();
      threads.add(thread);
    }

    Thread.sleep((long) (warmup * 1000));
    long client0 = selfCpuUs(), servers0 = serversCpuUs(pids);
    long t0 = System.nanoTime();
    measuring = true;
    Thread.sleep((long) (seconds * 1000));
    measuring = false;
    double window = (System.nanoTime() - t0) / 1e9;
    long clientUs = selfCpuUs() - client0, serverUs = serversCpuUs(pids) - servers0;
    running = false;
    for (Thread thread : threads) thread.join();
    for (CuratorFramework client : clients) client.close();

    List<Long> all = new ArrayList<>();
    for (List<Long> l : latencies) all.addAll(l);
    Collections.sort(all);
    double n = cycles.get();
    System.out.printf(java.util.Locale.ROOT,
        "{\"tool\":\"zookeeper-curator-mutex\",\"c\":%d,\"r\":%d,\"ttl\":%d,\"seconds\":%.3f,"
            + "\"cycles\":%d,\"cycles_per_s\":%.1f,\"failed_acquires\":%d,\"errors\":%d,"
            + "\"acquires\":%d,\"acquire_p50_us\":%d,\"acquire_p99_us\":%d,\"acquire_p999_us\":%d,"
            + "\"client_cpu_us_per_cycle\":%.1f,\"server_cpu_us_per_cycle\":%.1f,"
            + "\"server_cpu_pct\":%.1f}%n",
        workers, resources, ttl, window, cycles.get(), n / window, failed.get(), errors.get(),
        all.size(), pct(all, 0.5), pct(all, 0.99), pct(all, 0.999),
        n > 0 ? clientUs / n : 0.0, n > 0 ? serverUs / n : 0.0, serverUs / (window * 1e4));
    System.exit(0);
  }

  static long pct(List<Long> sorted, double p) {
    if (sorted.isEmpty()) return 0;
    return sorted.get(Math.min(sorted.size() - 1, (int) (p * sorted.size())));
  }

  // This JVM's user + system CPU in µs.
  static long selfCpuUs() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime() / 1000;
  }

  // The summed utime + stime of pids in µs, from /proc/PID/stat (USER_HZ is 100 on Linux).
  static long serversCpuUs(List<Integer> pids) throws Exception {
    long total = 0;
    for (int pid : pids) {
      String text = Files.readString(Path.of("/proc/" + pid + "/stat"));
      String[] fields = text.substring(text.lastIndexOf(')') + 2).split(" ");
      // fields[0] is field 3 (state): utime and stime are fields 14 and 15.
      total += (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) * 10_000;
    }
    return total;
  }
}
