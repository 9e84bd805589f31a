package dev.redlockd.client;

import java.time.Duration;

/** {@code BUSY <ms>}: someone else holds the lock (after the wait ran out, if there was one). */
public class LockBusyException extends RedlockdException {
  private static final long serialVersionUID = 1L;
  private final Duration retryAfter;

  public LockBusyException(Duration retryAfter) {
    super("lock is held by someone else (retry after " + retryAfter.toMillis() + " ms)");
    this.retryAfter = retryAfter;
  }

  /** The smallest remaining TTL the refusing masters reported (zero when unknown). */
  public Duration retryAfter() {
    return retryAfter;
  }
}
