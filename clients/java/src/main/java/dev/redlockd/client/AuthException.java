package dev.redlockd.client;

/**
 * {@code ERR NOAUTH} or {@code ERR AUTH_FAILED}: no secret, or the wrong one. A configuration
 * error, not a connection failure: it is thrown at once, without trying the other addresses.
 */
public class AuthException extends ServerException {
  private static final long serialVersionUID = 1L;

  public AuthException(String code, String serverMessage) {
    super(code, serverMessage);
  }
}
