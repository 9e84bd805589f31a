package dev.redlockd.client;

/**
 * Base of every exception for a daemon's answer or a failed connection. Unchecked, like Redisson's:
 * the {@link java.util.concurrent.locks.Lock} methods cannot declare checked ones.
 */
public class RedlockdException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public RedlockdException(String message) {
    super(message);
  }

  public RedlockdException(String message, Throwable cause) {
    super(message, cause);
  }
}
