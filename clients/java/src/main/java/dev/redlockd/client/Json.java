package dev.redlockd.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads the one JSON document of the protocol (INFO's), so that the client needs nothing beyond
 * the standard library. Objects become unmodifiable {@code Map<String, Object>} (keys in order),
 * arrays {@code List<Object>}, integers {@code Long} (or {@code BigInteger} beyond it), other
 * numbers {@code Double}, and true, false, null what they are.
 */
final class Json {
  private final String text;
  private int at;

  private Json(String text) {
    this.text = text;
  }

  static Object parse(String text) {
    Json json = new Json(text);
    Object value = json.value();
    json.space();
    if (json.at != text.length()) {
      throw json.bad("trailing characters");
    }
    return value;
  }

  private Object value() {
    space();
    if (at >= text.length()) {
      throw bad("unexpected end");
    }
    char c = text.charAt(at);
    switch (c) {
      case '{':
        return object();
      case '[':
        return array();
      case '"':
        return string();
      case 't':
        return word("true", Boolean.TRUE);
      case 'f':
        return word("false", Boolean.FALSE);
      case 'n':
        return word("null", null);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return number();
        }
        throw bad("unexpected " + c);
    }
  }

  private Map<String, Object> object() {
    Map<String, Object> map = new LinkedHashMap<>();
    at++; // {
    space();
    if (peek('}')) {
      at++;
      return Collections.unmodifiableMap(map);
    }
    while (true) {
      space();
      if (!peek('"')) {
        throw bad("a key must be a string");
      }
      String key = string();
      space();
      expect(':');
      map.put(key, value());
      space();
      if (peek(',')) {
        at++;
        continue;
      }
      expect('}');
      return Collections.unmodifiableMap(map);
    }
  }

  private List<Object> array() {
    List<Object> list = new ArrayList<>();
    at++; // [
    space();
    if (peek(']')) {
      at++;
      return Collections.unmodifiableList(list);
    }
    while (true) {
      list.add(value());
      space();
      if (peek(',')) {
        at++;
        continue;
      }
      expect(']');
      return Collections.unmodifiableList(list);
    }
  }

  private String string() {
    at++; // "
    StringBuilder out = new StringBuilder();
    while (at < text.length()) {
      char c = text.charAt(at++);
      if (c == '"') {
        return out.toString();
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (at >= text.length()) {
        break;
      }
      char e = text.charAt(at++);
      switch (e) {
        case 'n' -> out.append('\n');
        case 't' -> out.append('\t');
        case 'r' -> out.append('\r');
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'u' -> {
          if (at + 4 > text.length()) {
            throw bad("short \\u escape");
          }
          try {
            out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          } catch (NumberFormatException x) {
            throw bad("bad \\u escape");
          }
          at += 4;
        }
        default -> out.append(e); // \" \\ \/
      }
    }
    throw bad("unterminated string");
  }

  private Object number() {
    int start = at;
    while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
      at++;
    }
    String digits = text.substring(start, at);
    try {
      if (digits.indexOf('.') < 0 && digits.indexOf('e') < 0 && digits.indexOf('E') < 0) {
        BigInteger big = new BigInteger(digits);
        if (big.bitLength() < 64) {
          return big.longValue();
        }
        return big;
      }
      return Double.parseDouble(digits);
    } catch (NumberFormatException e) {
      throw bad("bad number " + digits);
    }
  }

  private Object word(String word, Object value) {
    if (!text.startsWith(word, at)) {
      throw bad("unexpected word");
    }
    at += word.length();
    return value;
  }

  private void space() {
    while (at < text.length() && " \t\r\n".indexOf(text.charAt(at)) >= 0) {
      at++;
    }
  }

  private boolean peek(char c) {
    return at < text.length() && text.charAt(at) == c;
  }

  private void expect(char c) {
    if (!peek(c)) {
      throw bad("expected " + c);
    }
    at++;
  }

  private ServerException bad(String why) {
    return new ServerException("PROTOCOL", "bad JSON at " + at + ": " + why);
  }
}
