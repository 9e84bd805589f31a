package dev.redlockd.client;

/**
 * {@code NOQUORUM <granted> <needed>}: too few masters took part; nothing of the attempt is left
 * locked.
 */
public class NoQuorumException extends RedlockdException {
  private static final long serialVersionUID = 1L;
  private final int granted;
  private final int needed;

  public NoQuorumException(int granted, int needed) {
    super("no quorum: " + granted + " master(s) granted, " + needed + " needed");
    this.granted = granted;
    this.needed = needed;
  }

  public int granted() {
    return granted;
  }

  public int needed() {
    return needed;
  }
}
