package dev.redlockd.client;

import java.util.ArrayList;
import java.util.List;

/** A daemon's address: {@code host:port} or {@code [v6]:port}. */
record Address(String host, int port) {
  /** One or more addresses, comma-separated. */
  static List<Address> parseAll(String addresses) {
    List<Address> out = new ArrayList<>();
    for (String one : addresses.split(",")) {
      out.add(parse(one));
    }
    return out;
  }

  static Address parse(String address) {
    String text = address.trim();
    String host;
    String port;
    if (text.startsWith("[")) {
      int end = text.indexOf("]:");
      host = end > 1 ? text.substring(1, end) : "";
      port = end > 1 ? text.substring(end + 2) : "";
    } else {
      int colon = text.lastIndexOf(':');
      host = colon > 0 ? text.substring(0, colon) : "";
      port = colon > 0 ? text.substring(colon + 1) : "";
      if (host.contains(":")) {
        host = ""; // a bare IPv6 address: the port is ambiguous
      }
    }
    int number = -1;
    if (!port.isEmpty() && port.length() <= 5 && port.chars().allMatch(Character::isDigit)) {
      number = Integer.parseInt(port);
    }
    if (host.isEmpty() || number < 1 || number > 65535) {
      throw new IllegalArgumentException(
          "address must be HOST:PORT or [V6]:PORT, got " + Protocol.printable(address));
    }
    return new Address(host, number);
  }

  @Override
  public String toString() {
    return host.contains(":") ? "[" + host + "]:" + port : host + ":" + port;
  }
}
