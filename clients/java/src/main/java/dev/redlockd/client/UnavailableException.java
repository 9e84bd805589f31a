package dev.redlockd.client;

/** No daemon of the address list could be reached, or none completed the handshake. */
public class UnavailableException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  public UnavailableException(String message) {
    super(message);
  }
}
