package dev.redlockd.client;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A lock granted by redlockd. Close it (try-with-resources) or call {@link #release()} to UNLOCK.
 *
 * <pre>{@code
 * try (Lease lease = client.acquire(LockRequest.of("orders:1001", Duration.ofSeconds(10)))) {
 *   storage.write(record, lease.fence());
 * }
 * }</pre>
 *
 * <p>When the block throws, an error of the release is added to that exception as suppressed
 * (Java's try-with-resources rule): the block's own exception is the one to see.
 */
public final class Lease implements AutoCloseable {
  private final RedlockdClient client;
  private final String resource;
  private final String owner;
  private final long fence;
  private final boolean keep;
  private final Connection connection; // KEEP: the connection it lives on
  private final LostSignal lost;

  private final ReentrantLock lock = new ReentrantLock();
  private Duration validity;
  private long expiresNanos;
  private long ttlMillis; // the TTL it was last set to on the masters (LOCK or EXTEND)
  private boolean released;

  Lease(RedlockdClient client, String resource, Protocol.Grant grant, long ttlMillis,
      long receivedNanos, Connection keepConnection, LostSignal lost) {
    this.client = client;
    this.resource = resource;
    this.owner = grant.owner();
    this.fence = grant.fence();
    this.keep = keepConnection != null;
    this.connection = keepConnection;
    this.lost = lost;
    this.validity = Duration.ofMillis(grant.validityMs());
    this.expiresNanos = receivedNanos + validity.toNanos();
    this.ttlMillis = ttlMillis;
  }

  public String resource() {
    return resource;
  }

  /** The capability to unlock or extend the lock: treat it like a password. */
  public String owner() {
    return owner;
  }

  /**
   * The fencing token: pass it to the storage with each write; the storage keeps the largest token
   * it accepted and refuses smaller ones. Unsigned 64-bit: compare with {@link
   * Long#compareUnsigned} if the fleet's tokens could ever pass 2^63.
   */
  public long fence() {
    return fence;
  }

  /** Whether the lock is bound to the connection and renewed by the daemon (KEEP). */
  public boolean isKeep() {
    return keep;
  }

  /**
   * How long the lock was guaranteed when the reply was written (or by the last extend). For a KEEP
   * lease this is the grant's: the daemon renews it since, only {@link #lost()} counts.
   */
  public Duration validity() {
    lock.lock();
    try {
      return validity;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The guaranteed validity left, counted from when the reply was read (zero once lost). For a KEEP
   * lease it counts down from the grant although the daemon renews the lock: watch {@link #lost()}.
   */
  public Duration remaining() {
    if (lost.isLost()) {
      return Duration.ZERO;
    }
    lock.lock();
    try {
      long left = expiresNanos - System.nanoTime();
      return left > 0 ? Duration.ofNanos(left) : Duration.ZERO;
    } finally {
      lock.unlock();
    }
  }

  /** Whether the lock was reported lost (see {@link #lost()}). */
  public boolean isLost() {
    return lost.isLost();
  }

  /**
   * Completes with the reason when the lock is lost: for a KEEP lease, when the daemon pushes
   * {@code LOST} or the connection fails; for any lease, when a re-entry of a {@link RedlockdLock}
   * found it no longer held. A plain lease otherwise ends by its TTL without completing this. Its
   * dependents run on the client's executor.
   */
  public CompletableFuture<LockLostException> lost() {
    return lost.future();
  }

  /**
   * EXTEND: the lock's TTL becomes {@code ttl} from now on every master where this owner still
   * holds it. Returns the new validity. {@link NotHeldException} when it was no longer held.
   */
  public Duration extend(Duration ttl) {
    long ms = Protocol.millis(ttl, "ttl", 1);
    return client.call(Call.of(Protocol.extend(resource, owner, ms)), extended(ms));
  }

  public CompletableFuture<Duration> extendAsync(Duration ttl) {
    long ms = Protocol.millis(ttl, "ttl", 1);
    return client.request(Call.of(Protocol.extend(resource, owner, ms)), extended(ms));
  }

  private RedlockdClient.Parser<Duration> extended(long ttlMs) {
    return (reply, call, connection) -> {
      Duration v = Duration.ofMillis(Protocol.extended(reply, resource));
      lock.lock();
      try {
        validity = v;
        expiresNanos = call.receivedNanos + v.toNanos();
        ttlMillis = ttlMs;
      } finally {
        lock.unlock();
      }
      return v;
    };
  }

  /**
   * UNLOCK. Throws {@link NotHeldException} when the lock had run out (the work it protected may
   * have run unprotected), except when it had been reported lost already. A second call does
   * nothing.
   */
  public void release() {
    if (!markReleased()) {
      return;
    }
    try {
      client.unlock(resource, owner);
    } catch (NotHeldException | ConnectionLostException | UnavailableException e) {
      if (!lost.isLost()) {
        throw e;
      } // else already reported: nothing more to say
    } finally {
      lost.detach(); // a LOST for a released lock is no news
    }
  }

  public CompletableFuture<Void> releaseAsync() {
    if (!markReleased()) {
      return CompletableFuture.completedFuture(null);
    }
    return client.unlockAsync(resource, owner).handle((ok, error) -> {
      lost.detach();
      Throwable cause = RedlockdClient.unwrap(error);
      if (cause == null
          || (lost.isLost()
              && (cause instanceof NotHeldException || cause instanceof ConnectionLostException
                  || cause instanceof UnavailableException))) {
        return null;
      }
      throw new CompletionException(cause);
    });
  }

  private boolean markReleased() {
    lock.lock();
    try {
      if (released) {
        return false;
      }
      released = true;
    } finally {
      lock.unlock();
    }
    if (connection != null) {
      connection.forgetKeep(owner);
    }
    return true;
  }

  /** {@link #release()}, for try-with-resources. */
  @Override
  public void close() {
    release();
  }

  /** The TTL the lock was last set to (LOCK or EXTEND), in ms. */
  long ttlMillis() {
    lock.lock();
    try {
      return ttlMillis;
    } finally {
      lock.unlock();
    }
  }

  void markLost(LockLostException why) {
    if (connection != null) {
      connection.forgetKeep(owner);
    }
    lost.markLost(why);
  }

  LostSignal lostSignal() {
    return lost;
  }

  /** Never shows the owner: it is a capability. */
  @Override
  public String toString() {
    return "Lease[" + resource + ", fence " + Long.toUnsignedString(fence) + (keep ? ", KEEP" : "")
        + (isLost() ? ", lost" : "") + "]";
  }
}
