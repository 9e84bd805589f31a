package dev.redlockd.client;

import java.time.Duration;
import java.util.function.Consumer;

/**
 * How a {@link RedlockdLock} takes its lock. Immutable: each method returns a changed copy.
 *
 * <ul>
 *   <li>{@link #defaults()}: KEEP with a 30 s TTL. The daemon renews the lock for as long as the
 *       client's connection is open, like Redisson's watchdog; it is lost if renewals fail or the
 *       connection does (a failover does not carry it over).
 *   <li>{@link #lease(Duration)}: a plain lease of that TTL, like Redisson's {@code leaseTime}. It
 *       survives a failover; it ends by its TTL if not unlocked before.
 * </ul>
 */
public final class LockOptions {
  private final Duration ttl;
  private final boolean keep;
  private final Consumer<Lease> onLost;

  private LockOptions(Duration ttl, boolean keep, Consumer<Lease> onLost) {
    Protocol.millis(ttl, "ttl", 1);
    if (onLost != null && !keep) {
      throw new IllegalArgumentException("onLost needs KEEP: a plain lease ends by its TTL");
    }
    this.ttl = ttl;
    this.keep = keep;
    this.onLost = onLost;
  }

  /** KEEP, 30 s TTL. */
  public static LockOptions defaults() {
    return new LockOptions(Duration.ofSeconds(30), true, null);
  }

  /** A plain lease of {@code ttl}, not renewed. */
  public static LockOptions lease(Duration ttl) {
    return new LockOptions(ttl, false, null);
  }

  public LockOptions ttl(Duration ttl) {
    return new LockOptions(ttl, keep, onLost);
  }

  public LockOptions keep(boolean keep) {
    return new LockOptions(ttl, keep, onLost);
  }

  /** Called on the client's executor when a KEEP lock is lost. */
  public LockOptions onLost(Consumer<Lease> callback) {
    return new LockOptions(ttl, keep, callback);
  }

  public Duration ttl() {
    return ttl;
  }

  public boolean isKeep() {
    return keep;
  }

  long ttlMillis() {
    return Protocol.millis(ttl, "ttl", 1);
  }

  LockRequest request(String resource) {
    LockRequest request = LockRequest.of(resource, ttl).keep(keep);
    return onLost == null ? request : request.onLost(onLost);
  }
}
