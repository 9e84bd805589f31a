package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;

/** RedlockdLock, the java.util.concurrent.locks.Lock, against a real daemon and real masters. */
class LockTest extends DaemonTest {
  /** Whether another thread's tryLock() gets the lock (it unlocks it again). */
  private static boolean tryLockElsewhere(Lock lock) throws InterruptedException {
    AtomicReference<Boolean> got = new AtomicReference<>();
    assertNull(new Background(() -> {
      got.set(lock.tryLock());
      if (got.get()) {
        lock.unlock();
      }
    }).thrown());
    return got.get();
  }

  @Test
  void reentrantPerThreadCountingHolds() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient c = client(d.address());
    RedlockdClient other = client(d.address());
    RedlockdLock lock = c.getLock("java:reentrant");
    Lock elsewhere = other.getLock("java:reentrant");

    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    lock.lock();
    Lease lease = lock.lease();
    long acquired = d.number("counters.acquired");
    lock.lock();
    assertTrue(lock.tryLock());
    assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
    assertEquals(4, lock.getHoldCount());
    assertSame(lease, lock.lease(), "a re-entry keeps the lease and its fence");
    assertEquals(acquired, d.number("counters.acquired"), "a re-entry sent a LOCK");
    // Another RedlockdLock of the same client on the same resource is the same lock.
    RedlockdLock same = c.getLock("java:reentrant");
    same.lock();
    assertEquals(5, lock.getHoldCount());
    same.unlock();

    // Another thread of the same client, and another client, do not hold it.
    assertFalse(tryLockElsewhere(lock));
    assertFalse(tryLockElsewhere(elsewhere));
    assertTrue(new Background(lock::unlock).thrown() instanceof IllegalMonitorStateException);
    assertTrue(lock.isLocked());

    for (int i = 4; i > 1; i--) {
      lock.unlock();
      assertEquals(i - 1, lock.getHoldCount());
      assertFalse(tryLockElsewhere(elsewhere), "released before the last unlock");
    }
    lock.unlock();
    assertEquals(0, lock.getHoldCount());
    assertFalse(lock.isHeldByCurrentThread());
    assertFalse(lock.isLocked());
    assertTrue(tryLockElsewhere(elsewhere));
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertThrows(UnsupportedOperationException.class, lock::newCondition);
  }

  @Test
  void reentryNeverShortensTheLeaseAndNeverFallsBackToLock() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient c = client(d.address());
    RedlockdClient other = client(d.address());
    RedlockdLock outer = c.getLock("java:renew", LockOptions.lease(Duration.ofSeconds(3)));
    RedlockdLock shorter = c.getLock("java:renew", LockOptions.lease(Duration.ofMillis(500)));

    outer.lock();
    long extended = d.number("counters.extended");
    shorter.lock(); // more than a third of 3 s left: counted, nothing sent
    assertEquals(extended, d.number("counters.extended"));
    assertTrue(Poll.eventually(5000, () -> outer.lease().remaining().toMillis() < 900));
    shorter.lock(); // under a third left: EXTEND to the 3 s it was set to, not to 500 ms
    assertEquals(extended + 1, d.number("counters.extended"));
    assertEquals(3, outer.getHoldCount());
    Status status = other.status("java:renew");
    assertTrue(status.held() && status.remaining().toMillis() > 1500, status.toString());
    assertTrue(outer.lease().remaining().toMillis() > 1500);
    outer.unlock();
    outer.unlock();
    outer.unlock();
    assertFalse(other.status("java:renew").held());

    // A lease that ran out and was taken by someone else: a re-entry says so (LockLostException),
    // it does not take a new lock.
    outer.lock();
    Lease lease = outer.lease();
    assertTrue(Poll.eventually(10_000, () -> !other.status("java:renew").held()));
    Lease thief = other.acquire("java:renew", Duration.ofSeconds(30));
    long acquired = d.number("counters.acquired");
    LockLostException lost = assertThrows(LockLostException.class, outer::lock);
    assertTrue(lost.getCause() instanceof NotHeldException, String.valueOf(lost.getCause()));
    assertEquals(acquired, d.number("counters.acquired"), "the re-entry fell back to LOCK");
    assertTrue(lease.isLost());
    assertTrue(lease.lost().isDone() || lease.lost().get(5, TimeUnit.SECONDS) != null);
    assertThrows(LockLostException.class, outer::lock); // lost stays lost
    assertEquals(1, outer.getHoldCount());
    outer.unlock(); // the loss was reported: no NotHeldException
    assertTrue(other.status("java:renew").held(), "the thief's lock is untouched");
    thief.release();
  }

  @Test
  void tryLockWaitsInTheDaemonQueue() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient holderClient = client(d.address());
    RedlockdClient c = client(d.address());
    RedlockdLock held = holderClient.getLock("java:trylock");
    RedlockdLock lock = c.getLock("java:trylock");
    held.lock();

    assertFalse(lock.tryLock());
    long busy = d.number("counters.busy");
    assertFalse(lock.tryLock(300, TimeUnit.MILLISECONDS));
    assertEquals(busy + 1, d.number("counters.busy"), "one LOCK ... WAIT, not polling");

    Background waiter = new Background(() -> {
      assertTrue(lock.tryLock(30, TimeUnit.SECONDS));
      lock.unlock();
    });
    assertTrue(infoReaches(d, "waiters", 1), "the tryLock is not queued in the daemon");
    held.unlock();
    assertNull(waiter.thrown());
  }

  @Test
  void fencesIncrease() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient a = client(d.address());
    RedlockdClient b = client(d.address());
    long last = 0;
    for (int i = 0; i < 10; i++) {
      RedlockdLock lock = (i % 2 == 0 ? a : b).getLock("java:fence");
      try (HeldLock held = lock.hold()) {
        assertTrue(held.fence() > last, held.fence() + " after " + last);
        assertTrue(held.validity().toMillis() > 0);
        last = held.fence();
      }
      assertEquals(0, lock.getHoldCount());
    }
    RedlockdLock lock = a.getLock("java:fence");
    try (HeldLock outer = lock.hold(Duration.ofSeconds(1)); HeldLock inner = lock.hold()) {
      assertEquals(outer.fence(), inner.fence(), "a re-entry keeps the token");
      assertEquals(2, lock.getHoldCount());
    }
    assertFalse(lock.isLocked());
  }

  @Test
  void interruptedLockReleasesItsLateGrant() throws Exception {
    Daemon d = daemon(fleet());
    RedlockdClient holder = client(d.address());
    RedlockdClient c = client(d.address());
    RedlockdClient third = client(d.address());
    // A 60 s lease: if the late grant were not released, the third client would wait that long.
    RedlockdLock lock = c.getLock("java:interrupt", LockOptions.lease(Duration.ofSeconds(60)));
    RedlockdLock elsewhere = third.getLock("java:interrupt");
    assertInterruptedWaitReleasesItsGrant(d, lock::lockInterruptibly,
        holder.acquire("java:interrupt", Duration.ofSeconds(30)), () -> {
          boolean got = elsewhere.tryLock();
          if (got) {
            elsewhere.unlock();
          }
          return got;
        });

    // tryLock(time) is interruptible the same way; lock() is not.
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, () -> lock.tryLock(1, TimeUnit.SECONDS));
    Thread.currentThread().interrupt();
    lock.lock();
    assertTrue(Thread.interrupted(), "lock() cleared the interrupt flag");
    lock.unlock();
  }

  @Test
  void keepLockLostCallbackWhenTheMastersGoAway() throws Exception {
    Fleet fleet = fleet();
    Daemon d = daemon(fleet);
    RedlockdClient c = client(d.address());
    CompletableFuture<Lease> lostLease = new CompletableFuture<>();
    RedlockdLock lock = c.getLock("java:keep-lost",
        LockOptions.defaults().ttl(Duration.ofSeconds(1)).onLost(lostLease::complete));
    lock.lock();
    Lease lease = lock.lease();
    assertTrue(lease.isKeep());
    for (int i = 0; i < 3; i++) {
      fleet.nodes.get(i).kill();
    }
    assertSame(lease, lostLease.get(20, TimeUnit.SECONDS));
    assertTrue(lease.lost().get(5, TimeUnit.SECONDS).getMessage().contains("LOST"));
    assertThrows(LockLostException.class, lock::lock);
    lock.unlock(); // reported already: no NotHeldException
    assertEquals(0, lock.getHoldCount());
  }

  @Test
  void manyPlatformThreadsHoldAndWait() throws Exception {
    Daemon d = daemon(fleet());
    // Two clients (two connections), eight threads each, all on one resource; and a second
    // resource each thread holds meanwhile, so that holds and waits share the connections.
    RedlockdClient[] clients = {client(d.address()), client(d.address())};
    int threadsPerClient = 8;
    int rounds = 8;
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger overlaps = new AtomicInteger();
    List<Long> fences = Collections.synchronizedList(new ArrayList<>()); // in lock order
    List<Background> threads = new ArrayList<>();
    for (int t = 0; t < 2 * threadsPerClient; t++) {
      RedlockdClient client = clients[t % 2];
      String own = "java:many:own:" + t;
      threads.add(new Background(() -> {
        RedlockdLock shared = client.getLock("java:many");
        RedlockdLock mine = client.getLock(own, LockOptions.lease(Duration.ofSeconds(30)));
        for (int i = 0; i < rounds; i++) {
          mine.lock();
          try {
            shared.lock();
            try {
              if (inside.incrementAndGet() != 1) {
                overlaps.incrementAndGet();
              }
              fences.add(shared.lease().fence());
              Thread.sleep(2);
              inside.decrementAndGet();
            } finally {
              shared.unlock();
            }
          } finally {
            mine.unlock();
          }
        }
      }));
    }
    for (Background thread : threads) {
      assertNull(thread.thrown());
    }
    assertEquals(0, overlaps.get(), "two holders at once");
    assertEquals(2 * threadsPerClient * rounds, fences.size());
    for (int i = 1; i < fences.size(); i++) {
      assertTrue(fences.get(i) > fences.get(i - 1),
          "fence " + fences.get(i) + " after " + fences.get(i - 1));
    }
    assertFalse(clients[0].status("java:many").held());
  }
}
