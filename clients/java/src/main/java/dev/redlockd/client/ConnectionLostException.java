package dev.redlockd.client;

/**
 * The connection failed with the request in flight: its outcome is unknown, and it is not retried.
 * A LOCK in flight may have been granted: a plain lease then ends by its TTL, a KEEP lock is
 * released by the daemon when it sees the connection close.
 */
public class ConnectionLostException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  public ConnectionLostException(String message) {
    super(message);
  }
}
