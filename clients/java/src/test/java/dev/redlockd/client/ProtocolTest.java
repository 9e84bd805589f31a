package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The pure protocol layer: request lines, replies to values and exceptions, addresses, JSON. */
class ProtocolTest {
  private static final String OWNER = "9f1c2e0b7a6d4c3b2a19f8e7d6c5b4a392817065";

  @Test
  void requestLines() {
    assertEquals("LOCK orders:1 30000", Protocol.lock("orders:1", 30000, -1, false));
    assertEquals("LOCK orders:1 30000 WAIT 0 KEEP", Protocol.lock("orders:1", 30000, 0, true));
    assertEquals("UNLOCK r " + OWNER, Protocol.unlock("r", OWNER));
    assertEquals("EXTEND r " + OWNER + " 5", Protocol.extend("r", OWNER, 5));
    assertEquals("STATUS r", Protocol.status("r"));
    assertEquals("LOCK r 10 WAIT 5000",
        LockRequest.of("r", Duration.ofMillis(10)).waitUpTo(Duration.ofSeconds(5)).call().line);
  }

  @Test
  void argumentsThatWouldBreakTheFramingAreRefused() {
    for (String bad :
        new String[] {"", "a b", "a\nPING", "a\r", "tab\there", "é", "x".repeat(257)}) {
      assertThrows(IllegalArgumentException.class, () -> Protocol.token(bad, "resource"), bad);
    }
    assertEquals("x".repeat(256), Protocol.token("x".repeat(256), "resource"));
    assertThrows(
        IllegalArgumentException.class, () -> LockRequest.of("a b", Duration.ofSeconds(1)));
    assertThrows(IllegalArgumentException.class, () -> Protocol.unlock("r", "owner with space"));
  }

  @Test
  void durationsAreWholeMilliseconds() {
    assertEquals(2, Protocol.millis(Duration.ofNanos(1_500_000), "ttl", 1));
    assertEquals(1, Protocol.millis(Duration.ofNanos(1_499_999), "ttl", 1));
    assertEquals(0, Protocol.millis(Duration.ZERO, "wait", 0));
    assertThrows(
        IllegalArgumentException.class, () -> Protocol.millis(Duration.ofNanos(400_000), "ttl", 1));
    assertThrows(
        IllegalArgumentException.class, () -> Protocol.millis(Duration.ofMillis(-1), "wait", 0));
    assertThrows(IllegalArgumentException.class, () -> Protocol.millis(null, "ttl", 1));
    assertThrows(IllegalArgumentException.class,
        () -> LockRequest.of("r", Duration.ofSeconds(1)).onLost(l -> {}).call());
  }

  @Test
  void grants() {
    Protocol.Grant grant = Protocol.grant("OK " + OWNER + " 41 29696", "r");
    assertEquals(OWNER, grant.owner());
    assertEquals(41, grant.fence());
    assertEquals(29696, grant.validityMs());
    // Fences are unsigned 64-bit.
    assertEquals("18446744073709551615",
        Long.toUnsignedString(
            Protocol.grant("OK " + OWNER + " 18446744073709551615 1", "r").fence()));
    assertEquals(OWNER, Protocol.grantOwner("OK " + OWNER + " 1 1"));
    assertNull(Protocol.grantOwner("BUSY 10"));
    assertNull(Protocol.grantOwner("OK"));
    for (String bad :
        new String[] {"OK", "OK " + OWNER + " 1", "OK OWNER 1 2", "OK " + OWNER + " -1 2"}) {
      ServerException e = assertThrows(ServerException.class, () -> Protocol.grant(bad, "r"), bad);
      assertEquals("PROTOCOL", e.code());
    }
  }

  @Test
  void refusalsBecomeTheirExceptions() {
    LockBusyException busy =
        assertThrows(LockBusyException.class, () -> Protocol.grant("BUSY 29871", "r"));
    assertEquals(Duration.ofMillis(29871), busy.retryAfter());
    NoQuorumException noQuorum = (NoQuorumException) Protocol.error("NOQUORUM 2 3", "r");
    assertEquals(2, noQuorum.granted());
    assertEquals(3, noQuorum.needed());
    assertEquals("r", ((NotHeldException) Protocol.error("NOTHELD", "r")).resource());
    ServerException bad = (ServerException) Protocol.error("ERR BAD_TTL ttl out of range", "r");
    assertFalse(bad instanceof AuthException);
    assertEquals("BAD_TTL", bad.code());
    assertEquals("ttl out of range", bad.serverMessage());
    assertTrue(Protocol.error("ERR NOAUTH authentication required", null) instanceof AuthException);
    assertEquals("AUTH_FAILED",
        ((AuthException) Protocol.error("ERR AUTH_FAILED wrong secret", null)).code());
    for (String odd :
        new String[] {"", "BUSY", "BUSY x", "NOQUORUM 1", "NOTHELD now", "ERR", "WHAT"}) {
      assertEquals("PROTOCOL", ((ServerException) Protocol.error(odd, "r")).code(), odd);
    }
    assertEquals(1000, Protocol.extended("OK 1000", "r"));
    assertThrows(NotHeldException.class, () -> Protocol.extended("NOTHELD", "r"));
    Protocol.ok("OK", "r");
    assertThrows(NotHeldException.class, () -> Protocol.ok("NOTHELD", "r"));
  }

  @Test
  void statusReplies() {
    assertEquals(new Status(true, Duration.ofMillis(29412)), Protocol.status("OK HELD 29412", "r"));
    assertEquals(new Status(false, Duration.ZERO), Protocol.status("OK FREE", "r"));
    // Protocol 1.1 adds words after these; they are ignored.
    assertEquals(
        new Status(true, Duration.ofMillis(5)), Protocol.status("OK HELD 5 holders=2", "r"));
    assertThrows(NoQuorumException.class, () -> Protocol.status("NOQUORUM 2 3", "r"));
    assertThrows(ServerException.class, () -> Protocol.status("OK HELD", "r"));
  }

  @Test
  void pushesAndHello() {
    assertTrue(Protocol.isPush("LOST r " + OWNER));
    assertFalse(Protocol.isPush("OK " + OWNER + " 1 1"));
    assertArrayEquals(new String[] {"r", OWNER}, Protocol.lost("LOST r " + OWNER));
    assertNull(Protocol.lost("LOST r"));
    assertTrue(Protocol.speaksV1("OK redlockd 0.1.0 proto=1 nodes=5 quorum=3"));
    assertTrue(Protocol.speaksV1("OK redlockd 0.2.0 proto=1.1 nodes=5 quorum=3"));
    assertFalse(Protocol.speaksV1("OK redlockd 9.0.0 proto=2 nodes=5 quorum=3"));
    assertFalse(Protocol.speaksV1("OK redlockd 9.0.0 proto=10"));
  }

  @Test
  void addresses() {
    assertEquals(new Address("127.0.0.1", 7400), Address.parse(" 127.0.0.1:7400 "));
    assertEquals(new Address("::1", 7400), Address.parse("[::1]:7400"));
    assertEquals("[::1]:7400", Address.parse("[::1]:7400").toString());
    assertEquals(List.of(new Address("a", 1), new Address("b", 2)), Address.parseAll("a:1,b:2"));
    for (String bad :
        new String[] {"", "host", "host:", ":7400", "host:0", "host:65536", "::1:7400", "h:x"}) {
      assertThrows(IllegalArgumentException.class, () -> Address.parse(bad), bad);
    }
    assertThrows(IllegalArgumentException.class, () -> RedlockdClient.builder().build());
  }

  @Test
  void infoJson() {
    Map<?, ?> doc = (Map<?, ?>) Json.parse(
        "{\"clients\":1,\"counters\":{\"acquired\":3},\"nodes\":[{\"address\":\"127.0.0.1:7001\","
        + "\"evicts_keys\":false,\"rtt_us\":-1}],\"ratio\":0.5,\"none\":null,"
        + "\"big\":18446744073709551615,\"text\":\"a\\\"b\\u00e9\\n\"}");
    assertEquals(1L, doc.get("clients"));
    assertEquals(3L, ((Map<?, ?>) doc.get("counters")).get("acquired"));
    Map<?, ?> node = (Map<?, ?>) ((List<?>) doc.get("nodes")).get(0);
    assertEquals(Boolean.FALSE, node.get("evicts_keys"));
    assertEquals(-1L, node.get("rtt_us"));
    assertEquals(0.5, doc.get("ratio"));
    assertTrue(doc.containsKey("none"));
    assertEquals(new BigInteger("18446744073709551615"), doc.get("big"));
    assertEquals("a\"b\u00e9\n", doc.get("text"));
    for (String bad : new String[] {"", "{", "{\"a\":}", "[1,]", "{\"a\":1} x", "tru", "\"open"}) {
      assertThrows(ServerException.class, () -> Json.parse(bad), bad);
    }
  }
}
