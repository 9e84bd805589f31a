package dev.redlockd.client;

import java.time.Duration;

/**
 * One hold of a {@link RedlockdLock}, for try-with-resources: closing it is one {@link
 * RedlockdLock#unlock()}, on the thread that took it.
 *
 * <pre>{@code
 * try (HeldLock held = lock.hold()) {
 *   storage.write(record, held.fence());
 * }
 * }</pre>
 */
public final class HeldLock implements AutoCloseable {
  private final RedlockdLock lock;
  private final Lease lease;
  private boolean closed;

  HeldLock(RedlockdLock lock, Lease lease) {
    this.lock = lock;
    this.lease = lease;
  }

  /** The lease behind the lock: the same for every hold of one thread's reentrant holding. */
  public Lease lease() {
    return lease;
  }

  /** The fencing token (see {@link Lease#fence()}). */
  public long fence() {
    return lease.fence();
  }

  /** See {@link Lease#validity()}. */
  public Duration validity() {
    return lease.validity();
  }

  /** Unlocks this hold (a second close does nothing). */
  @Override
  public void close() {
    if (!closed) {
      closed = true;
      lock.unlock();
    }
  }
}
