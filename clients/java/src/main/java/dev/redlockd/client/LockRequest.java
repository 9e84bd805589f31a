package dev.redlockd.client;

import java.time.Duration;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * What to ask {@link RedlockdClient#acquire(LockRequest)} for: {@code LOCK <resource> <ttl> [WAIT
 * <ms>] [KEEP]}. Immutable: each method returns a changed copy.
 *
 * <pre>{@code
 * LockRequest.of("orders:1001", Duration.ofSeconds(10)).waitUpTo(Duration.ofSeconds(5))
 * LockRequest.of("batch:nightly", Duration.ofSeconds(30)).keep().onLost(lease -> stopWork())
 * }</pre>
 *
 * <p>The lock kinds of protocol 1.1 (shared, permits, several resources) will be further options of
 * this request; a v1 daemon knows only the exclusive lock, so only that one is offered.
 */
public final class LockRequest {
  private final String resource;
  private final Duration ttl;
  private final Duration wait; // null: no WAIT
  private final boolean keep;
  private final Consumer<Lease> onLost;

  private LockRequest(
      String resource, Duration ttl, Duration wait, boolean keep, Consumer<Lease> onLost) {
    this.resource = resource;
    this.ttl = ttl;
    this.wait = wait;
    this.keep = keep;
    this.onLost = onLost;
  }

  /**
   * A lock on {@code resource} (1 to 256 printable ASCII characters, no spaces) for {@code ttl}
   * (whole milliseconds, within the daemon's {@code min_ttl_ms} and {@code max_ttl_ms}).
   */
  public static LockRequest of(String resource, Duration ttl) {
    Protocol.token(resource, "resource");
    Protocol.millis(ttl, "ttl", 1);
    return new LockRequest(resource, ttl, null, false, null);
  }

  /**
   * Queue for the lock up to {@code wait} ({@code WAIT}): first come, first served in the daemon;
   * {@link LockBusyException} when it runs out. Zero tries once, behind nobody.
   */
  public LockRequest waitUpTo(Duration wait) {
    Protocol.millis(wait, "wait", 0);
    return new LockRequest(resource, ttl, wait, keep, onLost);
  }

  /**
   * Bind the lock to the client's connection ({@code KEEP}): the daemon renews it for as long as
   * the connection is open. It is lost when the daemon cannot renew it ({@code LOST}) or the
   * connection fails; {@link Lease#lost()} then completes.
   */
  public LockRequest keep() {
    return keep(true);
  }

  public LockRequest keep(boolean keep) {
    return new LockRequest(resource, ttl, wait, keep, onLost);
  }

  /**
   * Called (on the client's executor, never on its reader thread) when the KEEP lock is lost. Needs
   * {@link #keep()}: a plain lease ends by its TTL, watch {@link Lease#remaining()}.
   */
  public LockRequest onLost(Consumer<Lease> callback) {
    return new LockRequest(resource, ttl, wait, keep, callback);
  }

  public String resource() {
    return resource;
  }

  public Duration ttl() {
    return ttl;
  }

  public Optional<Duration> waitTime() {
    return Optional.ofNullable(wait);
  }

  public boolean isKeep() {
    return keep;
  }

  Consumer<Lease> lostCallback() {
    return onLost;
  }

  long ttlMillis() {
    return Protocol.millis(ttl, "ttl", 1);
  }

  /** The call that sends this request. */
  Call call() {
    if (onLost != null && !keep) {
      throw new IllegalArgumentException("onLost needs keep(): a plain lease ends by its TTL");
    }
    long waitMs = wait == null ? -1 : Protocol.millis(wait, "wait", 0);
    String line = Protocol.lock(resource, ttlMillis(), waitMs, keep);
    return Call.lock(line, resource, keep, Math.max(0, waitMs) * 1_000_000);
  }

  @Override
  public String toString() {
    return "LockRequest["
        + Protocol.lock(
            resource, ttlMillis(), wait == null ? -1 : Protocol.millis(wait, "wait", 0), keep)
        + "]";
  }
}
