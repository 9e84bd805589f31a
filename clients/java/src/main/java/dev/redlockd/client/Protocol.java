package dev.redlockd.client;

import java.time.Duration;

/**
 * The wire format of protocol v1 (proto/PROTOCOL.md), free of I/O: request lines out, reply lines
 * in. Everything that turns a reply into a value or an exception lives here, so it is tested
 * without a daemon.
 */
final class Protocol {
  private Protocol() {}

  /** What a v1 grant says: {@code OK <owner> <fence> <validity_ms>}. */
  record Grant(String owner, long fence, long validityMs) {}

  // ---------------------------------------------------------------------------------------------
  // Arguments

  /**
   * A protocol argument: 1 to 256 bytes of printable ASCII (0x21-0x7E). Checked before a line is
   * formatted: a resource holding "\n" would inject a second request and shift every later reply
   * onto the wrong caller.
   */
  static String token(String value, String what) {
    if (value == null || value.isEmpty() || value.length() > 256) {
      throw new IllegalArgumentException(what + " must be 1 to 256 characters");
    }
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (c < 0x21 || c > 0x7e) {
        throw new IllegalArgumentException(
            what + " must be printable ASCII without spaces: " + printable(value));
      }
    }
    return value;
  }

  /** A duration in whole milliseconds, rounded to the nearest, at least {@code minimum}. */
  static long millis(Duration duration, String what, long minimum) {
    if (duration == null || duration.isNegative()) {
      throw new IllegalArgumentException(
          what + " must be a duration of at least " + minimum + " ms");
    }
    long ms;
    try {
      ms = duration.toMillis() + (duration.toNanosPart() % 1_000_000 >= 500_000 ? 1 : 0);
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException(what + " is too long: " + duration, e);
    }
    if (ms < minimum) {
      throw new IllegalArgumentException(
          what + " must be at least " + minimum + " ms, got " + duration);
    }
    return ms;
  }

  // ---------------------------------------------------------------------------------------------
  // Requests

  /** {@code LOCK <resource> <ttl> [WAIT <ms>] [KEEP]}; waitMs below 0 means no WAIT. */
  static String lock(String resource, long ttlMs, long waitMs, boolean keep) {
    StringBuilder line = new StringBuilder("LOCK ").append(token(resource, "resource"));
    line.append(' ').append(ttlMs);
    if (waitMs >= 0) {
      line.append(" WAIT ").append(waitMs);
    }
    if (keep) {
      line.append(" KEEP");
    }
    return line.toString();
  }

  static String unlock(String resource, String owner) {
    return unlockPrefix(resource) + token(owner, "owner");
  }

  /** {@code UNLOCK <resource> }, the owner to be appended. */
  static String unlockPrefix(String resource) {
    return "UNLOCK " + token(resource, "resource") + " ";
  }

  static String extend(String resource, String owner, long ttlMs) {
    return "EXTEND " + token(resource, "resource") + " " + token(owner, "owner") + " " + ttlMs;
  }

  static String status(String resource) {
    return "STATUS " + token(resource, "resource");
  }

  static String auth(String secret) {
    return "AUTH " + token(secret, "secret");
  }

  // ---------------------------------------------------------------------------------------------
  // Replies

  /** The grant of a LOCK reply; anything but {@code OK} is thrown as its exception. */
  static Grant grant(String reply, String resource) {
    String[] parts = reply.split(" ", -1);
    if (parts.length == 4 && parts[0].equals("OK") && isOwner(parts[1])) {
      try {
        return new Grant(parts[1], Long.parseUnsignedLong(parts[2]), Long.parseLong(parts[3]));
      } catch (NumberFormatException e) {
        // falls through to the protocol error
      }
    }
    throw error(reply, resource);
  }

  /** The validity in ms of an EXTEND reply ({@code OK <validity_ms>}). */
  static long extended(String reply, String resource) {
    String[] parts = reply.split(" ", -1);
    if (parts.length == 2 && parts[0].equals("OK")) {
      try {
        return Long.parseLong(parts[1]);
      } catch (NumberFormatException e) {
        // falls through to the protocol error
      }
    }
    throw error(reply, resource);
  }

  /** A reply that must be exactly {@code OK} (UNLOCK). */
  static void ok(String reply, String resource) {
    if (!reply.equals("OK")) {
      throw error(reply, resource);
    }
  }

  /**
   * A STATUS reply: {@code OK HELD <pttl_ms>} or {@code OK FREE}. Words after those are ignored:
   * protocol 1.1 adds holder counts and labels there.
   */
  static Status status(String reply, String resource) {
    String[] parts = reply.split(" ", -1);
    if (parts.length >= 2 && parts[0].equals("OK")) {
      if (parts[1].equals("FREE")) {
        return new Status(false, Duration.ZERO);
      }
      if (parts[1].equals("HELD") && parts.length >= 3) {
        try {
          return new Status(true, Duration.ofMillis(Long.parseLong(parts[2])));
        } catch (NumberFormatException e) {
          // falls through to the protocol error
        }
      }
    }
    throw error(reply, resource);
  }

  /** The payload of a reply {@code OK <text>} (HELLO, INFO). */
  static String okText(String reply) {
    if (!reply.startsWith("OK ")) {
      throw error(reply, null);
    }
    return reply.substring(3);
  }

  /** Whether a HELLO reply comes from a redlockd speaking protocol 1 (1.x is a superset of it). */
  static boolean speaksV1(String reply) {
    for (String word : reply.split(" ")) {
      if (word.equals("proto=1") || word.startsWith("proto=1.")) {
        return reply.startsWith("OK ");
      }
    }
    return false;
  }

  /** The exception a refusal stands for: BUSY, NOQUORUM, NOTHELD, ERR, or a protocol error. */
  static RedlockdException error(String reply, String resource) {
    String[] parts = reply.split(" ", -1);
    try {
      switch (parts[0]) {
        case "BUSY":
          if (parts.length == 2) {
            return new LockBusyException(Duration.ofMillis(Long.parseLong(parts[1])));
          }
          break;
        case "NOQUORUM":
          if (parts.length == 3) {
            return new NoQuorumException(Integer.parseInt(parts[1]), Integer.parseInt(parts[2]));
          }
          break;
        case "NOTHELD":
          if (parts.length == 1) {
            return new NotHeldException(resource == null ? "" : resource);
          }
          break;
        case "ERR":
          if (parts.length >= 2 && !parts[1].isEmpty()) {
            String message = String.join(" ", java.util.Arrays.copyOfRange(parts, 2, parts.length));
            if (parts[1].equals("NOAUTH") || parts[1].equals("AUTH_FAILED")) {
              return new AuthException(parts[1], message);
            }
            return new ServerException(parts[1], message);
          }
          break;
        default:
          break;
      }
    } catch (NumberFormatException e) {
      // falls through to the protocol error
    }
    return new ServerException("PROTOCOL", "unexpected reply " + printable(reply));
  }

  // ---------------------------------------------------------------------------------------------
  // Pushes

  /** Whether a line is a push ({@code LOST ...}) rather than a reply: no reply starts that way. */
  static boolean isPush(String line) {
    return line.startsWith("LOST ");
  }

  /** {@code [resource, owner]} of a {@code LOST <resource> <owner>} push; null if malformed. */
  static String[] lost(String line) {
    String[] parts = line.split(" ", -1);
    return parts.length == 3 && parts[0].equals("LOST") ? new String[] {parts[1], parts[2]} : null;
  }

  /** The owner of a grant line, or null when the line is not a grant. */
  static String grantOwner(String reply) {
    if (!reply.startsWith("OK ")) {
      return null;
    }
    String[] parts = reply.split(" ", -1);
    return parts.length == 4 && isOwner(parts[1]) ? parts[1] : null;
  }

  private static boolean isOwner(String owner) {
    if (owner.length() != 40) {
      return false;
    }
    for (int i = 0; i < owner.length(); i++) {
      char c = owner.charAt(i);
      if (!(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f')) {
        return false;
      }
    }
    return true;
  }

  /** A value quoted for an error message, control bytes escaped, cut at 80 characters. */
  static String printable(String value) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < value.length() && i < 80; i++) {
      char c = value.charAt(i);
      if (c < 0x20 || c > 0x7e) {
        out.append(String.format("\\x%02x", (int) c & 0xff));
      } else {
        out.append(c);
      }
    }
    return out.append(value.length() > 80 ? "...\"" : "\"").toString();
  }
}
