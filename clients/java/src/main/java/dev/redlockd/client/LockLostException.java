package dev.redlockd.client;

/**
 * A lock ended while its holder still counted on it: the daemon pushed {@code LOST} for a KEEP
 * lock, its connection failed, or a re-entry found it no longer held. The holder should stop its
 * work within the validity it still has.
 */
public class LockLostException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  public LockLostException(String message) {
    super(message);
  }

  public LockLostException(String message, Throwable cause) {
    super(message, cause);
  }
}
