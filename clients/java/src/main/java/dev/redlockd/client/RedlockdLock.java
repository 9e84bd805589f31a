package dev.redlockd.client;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A {@link Lock} on one resource of redlockd, reentrant per thread, from {@link
 * RedlockdClient#getLock}. The hold count lives in the client: a re-entry sends no LOCK. It never
 * shortens the lease either: a plain lease with less than a third of its TTL left is extended (by
 * EXTEND, never a new LOCK) to at least the TTL it was last set to; a KEEP lease is renewed by the
 * daemon anyway. A re-entry into a lock that was lost throws {@link LockLostException}.
 *
 * <pre>{@code
 * RedlockdLock lock = client.getLock("reports:daily");
 * lock.lock();
 * try {
 *   storage.write(report, lock.lease().fence());
 * } finally {
 *   lock.unlock();
 * }
 * }</pre>
 *
 * <p>Failures are unchecked exceptions: {@link NoQuorumException}, {@link ConnectionLostException},
 * {@link UnavailableException}, {@link ServerException}; {@link #lock()} and {@link
 * #tryLock(long, TimeUnit)} wait through {@code BUSY}, but not through those. Waiting is done by
 * the daemon ({@code WAIT}, first come first served), never by polling. There are no conditions.
 */
public final class RedlockdLock implements Lock {
  /** The longest single WAIT; lock() sends the next when one runs out. */
  private static final long WAIT_ROUND_MS = 60_000;

  private final RedlockdClient client;
  private final String resource;
  private final LockOptions options;
  private final String holdKey; // the same for every RedlockdLock of the client on this resource
  private volatile long waitRoundMs = WAIT_ROUND_MS;

  RedlockdLock(RedlockdClient client, String resource, LockOptions options) {
    this.client = client;
    this.resource = Protocol.token(resource, "resource");
    this.options = options;
    this.holdKey = "LOCK " + resource;
  }

  public String resource() {
    return resource;
  }

  /** Waits until the lock is held, however long; an interrupt does not stop it (it stays set). */
  @Override
  public void lock() {
    try {
      acquire(-1, false);
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible wait was interrupted", e);
    }
  }

  /**
   * Waits until the lock is held or the thread is interrupted. An interrupted wait cannot be
   * withdrawn from the daemon: its reply is still read and, if it grants the lock, the lock is
   * released at once.
   */
  @Override
  public void lockInterruptibly() throws InterruptedException {
    acquire(-1, true);
  }

  /** Takes the lock if nobody holds it or waits for it now ({@code WAIT 0}). */
  @Override
  public boolean tryLock() {
    try {
      return acquire(0, false);
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible wait was interrupted", e);
    }
  }

  /** Waits up to {@code time} in the daemon's queue ({@code WAIT}); false when it ran out. */
  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    return acquire(Math.max(0, unit.toNanos(time)), true);
  }

  /**
   * Ends one hold of the current thread; the last one sends UNLOCK. Throws {@link
   * IllegalMonitorStateException} when the thread holds none, and {@link NotHeldException} when the
   * lock had run out (the work it protected may have run unprotected), unless it had been reported
   * lost already.
   */
  @Override
  public void unlock() {
    HoldRegistry.Hold hold = client.holds.get(holdKey);
    if (hold == null) {
      throw new IllegalMonitorStateException("this thread does not hold the lock on " + resource);
    }
    if (--hold.count > 0) {
      return;
    }
    client.holds.remove(holdKey);
    hold.lease.release();
  }

  /** Not supported: a condition would need the daemon to signal waiters. */
  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("redlockd locks have no conditions");
  }

  /** {@link #lock()}, as a hold for try-with-resources that exposes the fence. */
  public HeldLock hold() {
    lock();
    return new HeldLock(this, lease());
  }

  /**
   * {@link #tryLock(long, TimeUnit)}, as a hold for try-with-resources. Throws {@link
   * LockBusyException} when the wait ran out.
   */
  public HeldLock hold(Duration wait) throws InterruptedException {
    if (!tryLock(wait.toNanos(), TimeUnit.NANOSECONDS)) {
      throw new LockBusyException(Duration.ZERO);
    }
    return new HeldLock(this, lease());
  }

  /** The current thread's lease: its fence and validity. */
  public Lease lease() {
    HoldRegistry.Hold hold = client.holds.get(holdKey);
    if (hold == null) {
      throw new IllegalMonitorStateException("this thread does not hold the lock on " + resource);
    }
    return hold.lease;
  }

  /** How many holds the current thread has (0: none). */
  public int getHoldCount() {
    HoldRegistry.Hold hold = client.holds.get(holdKey);
    return hold == null ? 0 : hold.count;
  }

  public boolean isHeldByCurrentThread() {
    return client.holds.get(holdKey) != null;
  }

  /** Whether anyone holds the lock, asked from the masters (STATUS): a snapshot. */
  public boolean isLocked() {
    return client.status(resource).held();
  }

  /**
   * Takes or re-enters the lock. timeoutNanos below 0: until held; else BUSY after that long. The
   * wait is sent to the daemon in rounds of at most WAIT_ROUND_MS.
   */
  private boolean acquire(long timeoutNanos, boolean interruptible) throws InterruptedException {
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException();
    }
    HoldRegistry.Hold hold = client.holds.get(holdKey);
    if (hold != null) {
      reenter(hold);
      return true;
    }
    long deadline = System.nanoTime() + Math.max(0, timeoutNanos);
    while (true) {
      long waitMs = waitRoundMs;
      if (timeoutNanos >= 0) {
        long left = Math.max(0, deadline - System.nanoTime());
        waitMs = Math.min(waitMs, TimeUnit.NANOSECONDS.toMillis(left + 999_999));
      }
      LockRequest request = options.request(resource).waitUpTo(Duration.ofMillis(waitMs));
      try {
        Lease lease =
            interruptible ? client.acquire(request) : client.acquireUninterruptibly(request);
        client.holds.add(holdKey, lease);
        return true;
      } catch (LockBusyException e) {
        if (timeoutNanos >= 0 && deadline - System.nanoTime() <= 0) {
          return false;
        }
      } catch (ServerException e) {
        // The TTL is checked before WAIT: a BAD_TTL for a WAIT longer than the TTL is a daemon
        // whose max_ttl_ms is below the round. The TTL itself is a valid WAIT there.
        if (!e.code().equals("BAD_TTL") || waitMs <= options.ttlMillis()) {
          throw e;
        }
        waitRoundMs = options.ttlMillis();
      }
    }
  }

  /** A re-entry: counted here; never shortens the lease, never falls back to LOCK. */
  private void reenter(HoldRegistry.Hold hold) {
    Lease lease = hold.lease;
    if (lease.isLost()) {
      throw new LockLostException("the lock on " + resource + " that this thread holds was lost",
          lease.lostSignal().cause());
    }
    if (!lease.isKeep()) {
      long ttlMs = Math.max(options.ttlMillis(), lease.ttlMillis());
      if (lease.remaining().toMillis() < ttlMs / 3) {
        try {
          lease.extend(Duration.ofMillis(ttlMs));
        } catch (NotHeldException | NoQuorumException e) {
          String why = "re-entering the lock on " + resource + ": it is no longer held";
          LockLostException lost = new LockLostException(why + " (" + e.getMessage() + ")", e);
          lease.markLost(lost);
          throw lost;
        }
      }
    }
    hold.count++;
  }

  @Override
  public String toString() {
    return "RedlockdLock[" + resource + (options.isKeep() ? ", KEEP" : ", lease") + " "
        + options.ttl().toMillis() + " ms]";
  }
}
