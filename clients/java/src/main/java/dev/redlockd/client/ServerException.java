package dev.redlockd.client;

/**
 * {@code ERR <CODE> <message>}: the daemon refused the request, which changed nothing. The code is
 * one of proto/PROTOCOL.md's ({@code BAD_TTL}, {@code TOO_MANY}, {@code SHUTTING_DOWN}...), or
 * {@code PROTOCOL} for a reply this client does not understand.
 */
public class ServerException extends RedlockdException {
  private static final long serialVersionUID = 1L;
  private final String code;
  private final String serverMessage;

  public ServerException(String code, String serverMessage) {
    super((code + " " + serverMessage).trim());
    this.code = code;
    this.serverMessage = serverMessage;
  }

  /** The error code, for programs. */
  public String code() {
    return code;
  }

  /** The daemon's message, for people. */
  public String serverMessage() {
    return serverMessage;
  }
}
