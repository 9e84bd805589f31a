package dev.redlockd.client;

/**
 * {@code NOTHELD}: UNLOCK or EXTEND by an owner that no longer holds the lock on a majority of the
 * masters (it ran out, someone else holds it, or too few masters answered).
 */
public class NotHeldException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  private final String resource;

  public NotHeldException(String resource) {
    super("lock \"" + resource + "\" is not held by this owner");
    this.resource = resource;
  }

  /** The resource of the request. */
  public String resource() {
    return resource;
  }
}
