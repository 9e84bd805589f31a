package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.Test;

/** The client's calls and leases against a real daemon and real masters. */
class ClientTest extends DaemonTest {
  private static Duration seconds(long s) {
    return Duration.ofSeconds(s);
  }

  private static Duration ms(long ms) {
    return Duration.ofMillis(ms);
  }

  @Test
  void lockUnlockAndContention() throws Exception {
    Fleet fleet = fleet();
    Daemon d = daemon(fleet);
    RedlockdClient a = client(d.address());
    RedlockdClient b = client(d.address());

    Lease lease = a.acquire("java:basic", seconds(10));
    assertTrue(lease.owner().matches("[0-9a-f]{40}"), lease.owner());
    assertTrue(lease.fence() > 0);
    assertTrue(lease.validity().compareTo(Duration.ZERO) > 0
            && lease.validity().compareTo(seconds(10)) <= 0,
        "validity " + lease.validity());
    assertFalse(lease.isKeep());
    assertFalse(lease.lost().isDone());

    LockBusyException busy =
        assertThrows(LockBusyException.class, () -> b.acquire("java:basic", seconds(10)));
    assertTrue(busy.retryAfter().toMillis() > 0, "a retry hint: " + busy.retryAfter());

    Status held = b.status("java:basic");
    assertTrue(held.held());
    assertTrue(
        held.remaining().toMillis() > 0 && held.remaining().toMillis() <= 10_000, held.toString());

    Duration extended = lease.extend(seconds(20));
    assertTrue(extended.compareTo(seconds(10)) > 0, "extended to " + extended);
    assertTrue(lease.remaining().compareTo(seconds(10)) > 0);

    lease.release();
    lease.release(); // a second release does nothing
    assertThrows(NotHeldException.class, () -> a.unlock("java:basic", lease.owner()));
    assertFalse(b.status("java:basic").held());

    Lease second = b.acquire("java:basic", seconds(10));
    assertTrue(second.fence() > lease.fence(), second.fence() + " after " + lease.fence());
    second.close();

    ServerException tooLong =
        assertThrows(ServerException.class, () -> a.acquire("java:basic", Duration.ofHours(2)));
    assertEquals("BAD_TTL", tooLong.code());
    assertThrows(IllegalArgumentException.class, () -> a.acquire("two words", seconds(1)));
    assertThrows(IllegalArgumentException.class, () -> a.acquire("line\nPING", seconds(1)));
    a.ping();
    assertTrue(a.hello().contains("proto=1"), a.hello());
    assertEquals(d.address(), a.address());
  }

  @Test
  void leaseAsTryWithResourcesReleasesAndKeepsTheBodysException() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient c = client(d.address());
    long fence;
    try (Lease lease = c.acquire("java:twr", seconds(10))) {
      fence = lease.fence();
    }
    assertFalse(c.status("java:twr").held(), "released by close()");

    // The lease runs out inside the block, which then throws: the block's exception is the one
    // seen, the NOTHELD of the release is attached to it as suppressed.
    IllegalStateException thrown = assertThrows(IllegalStateException.class, () -> {
      try (Lease lease = c.acquire("java:twr", ms(100))) {
        assertTrue(lease.fence() > fence);
        Poll.eventually(5000, () -> !c.status("java:twr").held());
        throw new IllegalStateException("the body failed");
      }
    });
    assertEquals(1, thrown.getSuppressed().length);
    assertTrue(thrown.getSuppressed()[0] instanceof NotHeldException,
        thrown.getSuppressed()[0].toString());
  }

  @Test
  void threadsShareOnePipelinedConnection() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient c = client(d.address());
    c.ping();
    long clients = d.number("clients");
    Set<Long> fences = ConcurrentHashMap.newKeySet();
    List<Background> threads = new ArrayList<>();
    for (int t = 0; t < 16; t++) {
      String prefix = "java:pipe:" + t + ":";
      threads.add(new Background(() -> {
        for (int i = 0; i < 20; i++) {
          try (Lease lease = c.acquire(prefix + (i % 3), seconds(10))) {
            fences.add(lease.fence());
          }
        }
      }));
    }
    for (Background thread : threads) {
      assertNull(thread.thrown());
    }
    assertEquals(16 * 20, fences.size(), "distinct fences");
    assertEquals(clients, d.number("clients"), "the client opened another connection");
  }

  @Test
  void waitTimesOutAndCancelledWaitsReleaseTheirLateGrant() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient holder = client(d.address());
    RedlockdClient waiter = client(d.address());
    RedlockdClient third = client(d.address());

    // A wait that gets the lock when the holder unlocks.
    Lease held = holder.acquire("java:wait", seconds(30));
    CompletableFuture<Lease> won =
        waiter.acquireAsync(LockRequest.of("java:wait", seconds(10)).waitUpTo(seconds(30)));
    assertTrue(infoReaches(d, "waiters", 1), "the waiter was never queued");
    held.release();
    won.get(10, TimeUnit.SECONDS).release();

    // A wait that runs out is BUSY.
    held = holder.acquire("java:wait", seconds(30));
    assertThrows(LockBusyException.class,
        () -> waiter.acquire(LockRequest.of("java:wait", seconds(1)).waitUpTo(ms(200))));

    // A wait whose future is cancelled: the reply still comes when the holder unlocks and grants
    // the lock to nobody; the client must release it, or the third client waits 60 s.
    CompletableFuture<Lease> cancelled =
        waiter.acquireAsync(LockRequest.of("java:wait", seconds(60)).waitUpTo(seconds(30)));
    assertTrue(infoReaches(d, "waiters", 1), "the second waiter was never queued");
    assertTrue(cancelled.cancel(true));
    long acquired = d.number("counters.acquired");
    held.release();
    assertTrue(Poll.eventually(10_000, () -> tryOnce(third, "java:wait")),
        "the lock granted to the cancelled wait was not released");
    assertTrue(d.number("counters.acquired") >= acquired + 2,
        "the cancelled WAIT was never granted: the test proved nothing");

    // The same with an interrupted thread.
    assertInterruptedWaitReleasesItsGrant(d,
        () -> waiter.acquire(LockRequest.of("java:wait", seconds(60)).waitUpTo(seconds(30))),
        holder.acquire("java:wait", seconds(30)), () -> tryOnce(third, "java:wait"));

    // The pipelined connection still works: the abandoned replies were consumed in their turn.
    waiter.ping();
  }

  private static boolean tryOnce(RedlockdClient client, String resource) {
    try {
      client.acquire(resource, seconds(1)).release();
      return true;
    } catch (LockBusyException e) {
      return false;
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void keepIsRenewedPastItsTtl() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient c = client(d.address());
    RedlockdClient other = client(d.address());
    long start = System.nanoTime();
    Lease lease = c.acquire(LockRequest.of("java:keep", seconds(1)).keep());
    assertTrue(lease.isKeep());
    long renewed = d.number("counters.renewed");
    boolean renewedPastTtl = Poll.eventually(30_000,
        () -> System.nanoTime() - start > 3_000_000_000L
            && d.number("counters.renewed") >= renewed + 4);
    assertTrue(renewedPastTtl, "not renewed");
    assertThrows(LockBusyException.class, () -> other.acquire("java:keep", seconds(1)));
    assertFalse(lease.isLost());
    lease.release();
    assertFalse(other.status("java:keep").held());
  }

  @Test
  void keepLeaseIsLostWhenThreeMastersDie() throws Exception {
    Fleet fleet = fleet();
    Daemon d = daemon(fleet);
    RedlockdClient c = client(d.address());
    CompletableFuture<Thread> callbackThread = new CompletableFuture<>();
    CompletableFuture<Lease> callbackLease = new CompletableFuture<>();
    Lease lease = c.acquire(LockRequest.of("java:lost", seconds(1)).keep().onLost(l -> {
      callbackThread.complete(Thread.currentThread());
      callbackLease.complete(l);
    }));
    // A WAIT pending on the same connection: the LOST push arrives before its reply and must not
    // be taken for it.
    RedlockdClient other = client(d.address());
    other.acquire("java:lost-held", seconds(30));
    CompletableFuture<Lease> waiting =
        c.acquireAsync(LockRequest.of("java:lost-held", seconds(1)).waitUpTo(seconds(3)));
    assertTrue(infoReaches(d, "waiters", 1), "the waiter was never queued");

    for (int i = 0; i < 3; i++) {
      fleet.nodes.get(i).kill();
    }
    LockLostException why = lease.lost().get(20, TimeUnit.SECONDS);
    assertTrue(why.getMessage().contains("LOST"), why.getMessage());
    assertTrue(lease.isLost());
    assertEquals(Duration.ZERO, lease.remaining());
    assertEquals(lease, callbackLease.get(10, TimeUnit.SECONDS));
    assertFalse(callbackThread.get().getName().startsWith("redlockd-reader"),
        "the callback ran on the reader thread");

    ExecutionException waited =
        assertThrows(ExecutionException.class, () -> waiting.get(20, TimeUnit.SECONDS));
    assertTrue(waited.getCause() instanceof LockBusyException
            || waited.getCause() instanceof NoQuorumException,
        waited.getCause().toString());
    lease.release(); // already reported lost: no NOTHELD
    NoQuorumException noQuorum =
        assertThrows(NoQuorumException.class, () -> c.acquire("java:lost2", seconds(1)));
    assertEquals(3, noQuorum.needed());
  }

  @Test
  void failsOverToTheNextDaemon() throws Exception {
    Fleet fleet = fleet();
    Daemon d1 = daemon(fleet);
    Daemon d2 = daemon(fleet);
    RedlockdClient c = client(d1.address() + "," + d2.address());
    Lease kept = c.acquire(LockRequest.of("java:fo-keep", seconds(30)).keep());
    Lease plain = c.acquire("java:fo-plain", seconds(30));
    assertEquals(d1.address(), c.address());

    d1.kill();
    assertTrue(kept.lost().get(10, TimeUnit.SECONDS).getMessage().contains("ended"),
        "the KEEP lease is lost with its connection");
    Lease next = c.acquire("java:fo-new", seconds(10));
    assertEquals(d2.address(), c.address());
    assertTrue(next.fence() > plain.fence(), "fences keep increasing across daemons");
    plain.release(); // a plain lease survives a failover: the second daemon releases it by owner

    // A client whose first daemon is down starts on the second; with none up it says so.
    RedlockdClient late = client(d1.address(), d2.address());
    late.ping();
    assertEquals(d2.address(), late.address());
    d2.kill();
    RedlockdClient none = client(
        RedlockdClient.builder().addresses(d1.address(), d2.address()).connectTimeout(seconds(2)));
    assertThrows(UnavailableException.class, none::ping);
    assertThrows(RedlockdException.class, late::ping); // lost in flight, or nothing to fail over to
  }

  @Test
  void aHungDaemonIsAConnectionFailure() throws Exception {
    Fleet fleet = fleet();
    Daemon d1 = daemon(fleet);
    Daemon d2 = daemon(fleet);
    RedlockdClient c = client(
        RedlockdClient.builder().addresses(d1.address(), d2.address()).requestTimeout(seconds(2)));

    // A reply that comes after a long WAIT's is not late: only the head of the queue is timed.
    RedlockdClient holder = client(d1.address());
    Lease held = holder.acquire("java:hol", seconds(30));
    CompletableFuture<Lease> waiting =
        c.acquireAsync(LockRequest.of("java:hol", seconds(1)).waitUpTo(seconds(4)));
    assertTrue(infoReaches(d1, "waiters", 1), "the waiter was never queued");
    c.ping(); // behind a 4 s WAIT with a 2 s request timeout
    ExecutionException busy = assertThrows(ExecutionException.class, waiting::get);
    assertTrue(busy.getCause() instanceof LockBusyException, busy.getCause().toString());
    held.release();

    // A daemon that stops answering: the call fails, KEEP leases are lost, the next call fails
    // over.
    Lease kept = c.acquire(LockRequest.of("java:hung", seconds(30)).keep());
    d1.signal("STOP");
    ConnectionLostException lost = assertThrows(ConnectionLostException.class, c::ping);
    assertTrue(lost.getMessage().contains("no reply"), lost.getMessage());
    assertTrue(
        kept.isLost(), "the KEEP lease of the hung connection is lost before the call fails");
    c.ping();
    assertEquals(d2.address(), c.address());
    d1.signal("CONT");
  }

  @Test
  void authenticatesWithTheSecret() throws Exception {
    Daemon.Options options = new Daemon.Options();
    options.secret = "c0rrect-h0rse";
    Daemon d = daemon(fleet(), options);
    RedlockdClient c =
        client(RedlockdClient.builder().addresses(d.address()).secret("c0rrect-h0rse"));
    c.acquire("java:auth", seconds(5)).release();

    RedlockdClient none = client(d.address());
    AuthException noAuth =
        assertThrows(AuthException.class, () -> none.acquire("java:auth", seconds(5)));
    assertEquals("NOAUTH", noAuth.code());

    RedlockdClient wrong = client(RedlockdClient.builder().addresses(d.address()).secret("wrong"));
    AuthException failed = assertThrows(AuthException.class, wrong::ping);
    assertEquals("AUTH_FAILED", failed.code());
    assertThrows(
        IllegalArgumentException.class, () -> RedlockdClient.builder().secret("two words"));
  }

  @Test
  void mutualTls() throws Exception {
    Pki pki = closeLater(new Pki());
    SSLContext withCertificate =
        RedlockdTls.fromPem(pki.file("ca.crt"), pki.file("client.crt"), pki.file("client.key"));
    Daemon.Options options = new Daemon.Options();
    options.tls = withCertificate;
    options.extraJson = "\"tls\": {\"cert_file\": \"" + pki.file("server.crt")
        + "\", \"key_file\": \"" + pki.file("server.key") + "\", \"client_ca_file\": \""
        + pki.file("ca.crt") + "\"}";
    Daemon d = daemon(fleet(), options);

    RedlockdClient c = client(RedlockdClient.builder().addresses(d.address()).tls(withCertificate));
    Lease lease = c.acquire(LockRequest.of("java:tls", seconds(5)).keep());
    Map<String, Object> info = c.info();
    assertEquals(1L, info.get("keep_locks"), info.toString());
    lease.release();

    // The certificate names 127.0.0.1 and localhost: another name is refused.
    RedlockdClient otherName = client(RedlockdClient.builder()
                                          .addresses(d.address())
                                          .tls(withCertificate)
                                          .serverName("redlockd.example")
                                          .connectTimeout(seconds(2)));
    assertTrue(
        assertThrows(UnavailableException.class, otherName::ping).getMessage().contains("SSL"));
    RedlockdClient localhost = client(RedlockdClient.builder()
                                          .addresses(d.address())
                                          .tls(withCertificate)
                                          .serverName("localhost"));
    localhost.ping();

    // No client certificate; plaintext; a CA that did not sign the daemon's certificate.
    RedlockdClient noCertificate = client(RedlockdClient.builder()
                                              .addresses(d.address())
                                              .tls(RedlockdTls.fromPem(pki.file("ca.crt")))
                                              .connectTimeout(seconds(2)));
    assertThrows(UnavailableException.class, noCertificate::ping);
    RedlockdClient plaintext =
        client(RedlockdClient.builder().addresses(d.address()).connectTimeout(seconds(2)));
    assertThrows(UnavailableException.class, plaintext::ping);
    RedlockdClient systemCas = client(RedlockdClient.builder()
                                          .addresses(d.address())
                                          .tls(SSLContext.getDefault())
                                          .connectTimeout(seconds(2)));
    UnavailableException untrusted = assertThrows(UnavailableException.class, systemCas::ping);
    assertTrue(untrusted.getMessage().contains("certification path"), untrusted.getMessage());
  }

  @Test
  void asyncVariants() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient c = client(d.address());
    Lease lease =
        c.acquireAsync(LockRequest.of("java:async", seconds(10))).get(10, TimeUnit.SECONDS);
    Status status = c.statusAsync("java:async").get(10, TimeUnit.SECONDS);
    assertTrue(status.held());
    assertTrue(lease.extendAsync(seconds(20)).get(10, TimeUnit.SECONDS).compareTo(seconds(10)) > 0);
    ExecutionException busy = assertThrows(ExecutionException.class,
        () -> c.acquireAsync(LockRequest.of("java:async", seconds(10))).get(10, TimeUnit.SECONDS));
    assertTrue(busy.getCause() instanceof LockBusyException, busy.getCause().toString());
    lease.releaseAsync().get(10, TimeUnit.SECONDS);
    ExecutionException notHeld = assertThrows(ExecutionException.class,
        () -> c.unlockAsync("java:async", lease.owner()).get(10, TimeUnit.SECONDS));
    assertTrue(notHeld.getCause() instanceof NotHeldException, notHeld.getCause().toString());
    c.pingAsync().get(10, TimeUnit.SECONDS);
    assertNotNull(c.infoAsync().get(10, TimeUnit.SECONDS).get("counters"));

    // A dependent stage never runs on the reader thread: one that calls the client back works.
    String nested =
        c.acquireAsync(LockRequest.of("java:async", seconds(10)))
            .thenApply(l -> {
              assertFalse(Thread.currentThread().getName().startsWith("redlockd-reader"));
              String word = c.status("java:async").held() ? "held" : "free";
              l.release();
              return word;
            })
            .get(10, TimeUnit.SECONDS);
    assertEquals("held", nested);

    // A future completed by its user before the reply (here: a timeout) abandons the call.
    Lease blocker = c.acquire("java:async-timeout", seconds(30));
    RedlockdClient waiter = client(d.address());
    CompletableFuture<Lease> timedOut =
        waiter.acquireAsync(LockRequest.of("java:async-timeout", seconds(60)).waitUpTo(seconds(30)))
            .orTimeout(200, TimeUnit.MILLISECONDS);
    ExecutionException timeout = assertThrows(ExecutionException.class, timedOut::get);
    assertTrue(timeout.getCause() instanceof TimeoutException);
    blocker.release();
    assertTrue(Poll.eventually(10_000, () -> tryOnce(c, "java:async-timeout")),
        "the grant to the timed-out future was not released");
  }
}
