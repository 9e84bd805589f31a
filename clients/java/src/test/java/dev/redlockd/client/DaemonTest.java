package dev.redlockd.client;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.function.BooleanSupplier;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.AfterTestExecutionCallback;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Base of the tests against a real daemon: each test starts its own masters and daemons, and
 * everything it started is closed after it (clients first). A failed test prints the daemons' logs.
 */
abstract class DaemonTest {
  private final Deque<AutoCloseable> resources = new ArrayDeque<>();
  private final List<Daemon> daemons = new ArrayList<>();

  @RegisterExtension
  final AfterTestExecutionCallback printLogsOnFailure = context -> {
    if (context.getExecutionException().isPresent()) {
      for (Daemon daemon : daemons) {
        System.err.println(
            "---- redlockd log (port " + daemon.port + "):\n" + Poll.tail(daemon.log));
      }
    }
  };

  @AfterEach
  final void closeEverything() throws Exception {
    while (!resources.isEmpty()) {
      resources.pop().close();
    }
  }

  final <T extends AutoCloseable> T closeLater(T resource) {
    resources.push(resource);
    return resource;
  }

  final Fleet fleet() {
    return closeLater(new Fleet(5));
  }

  final Daemon daemon(Fleet fleet) {
    return daemon(fleet, new Daemon.Options());
  }

  final Daemon daemon(Fleet fleet, Daemon.Options options) {
    Daemon daemon = closeLater(new Daemon(fleet.addresses(), options));
    daemons.add(daemon);
    return daemon;
  }

  final RedlockdClient client(String... addresses) {
    return client(RedlockdClient.builder().addresses(addresses));
  }

  final RedlockdClient client(RedlockdClient.Builder builder) {
    return closeLater(builder.build());
  }

  /**
   * A wait that is interrupted while it is queued in the daemon throws InterruptedException; when the
   * holder then releases, the daemon grants the lock to the abandoned wait, and the client must
   * release that grant at once: {@code tryOnce} (another client's attempt) succeeds soon, not after
   * the grant's TTL.
   */
  static void assertInterruptedWaitReleasesItsGrant(
      Daemon daemon, Background.Body wait, Lease held, BooleanSupplier tryOnce) throws Exception {
    Background waiting = new Background(wait);
    assertTrue(infoReaches(daemon, "waiters", 1), "the wait is not queued in the daemon");
    waiting.thread.interrupt();
    Throwable thrown = waiting.thrown();
    assertTrue(thrown instanceof InterruptedException, String.valueOf(thrown));
    long acquired = daemon.number("counters.acquired");
    held.release(); // the daemon grants the lock to the wait nobody waits for any more
    assertTrue(Poll.eventually(10_000, tryOnce), "the late grant was not released");
    assertTrue(daemon.number("counters.acquired") >= acquired + 2,
        "the abandoned wait was never granted: the test proved nothing");
  }

  /** Waits until the daemon's INFO says {@code path} is {@code value}. */
  static boolean infoReaches(Daemon daemon, String path, long value) {
    return Poll.eventually(10_000, () -> daemon.number(path) == value);
  }
}
