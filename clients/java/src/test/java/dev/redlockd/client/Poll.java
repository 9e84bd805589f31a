package dev.redlockd.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

/** Small helpers of the test harness: polling with a deadline, free ports, files. */
final class Poll {
  private Poll() {}

  /** Polls the condition until it is true or the timeout passed; returns its last value. */
  static boolean eventually(long timeoutMs, BooleanSupplier condition) {
    long end = System.nanoTime() + timeoutMs * 1_000_000;
    while (true) {
      if (condition.getAsBoolean()) {
        return true;
      }
      if (System.nanoTime() - end > 0) {
        return false;
      }
      sleep(10);
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /**
   * A port the kernel just handed out on 127.0.0.1 (redis-server --port 0 cannot be discovered).
   */
  static int freePort() {
    try (ServerSocket socket = new ServerSocket()) {
      socket.bind(new InetSocketAddress("127.0.0.1", 0));
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new AssertionError("no free port", e);
    }
  }

  /** The end of a log file, for a failure message. */
  static String tail(Path file) {
    try {
      byte[] bytes = Files.readAllBytes(file);
      int from = Math.max(0, bytes.length - 8000);
      return new String(bytes, from, bytes.length - from, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  static Path tempDir(String prefix) {
    try {
      return Files.createTempDirectory(prefix);
    } catch (IOException e) {
      throw new AssertionError(e);
    }
  }

  static void deleteTree(Path dir) {
    try (Stream<Path> paths = Files.walk(dir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // a temporary directory left behind is not worth failing a test
    }
  }

  /** An executable: the environment variable's value if set, else the name found in PATH. */
  static String executable(String variable, String name, String hint) {
    String value = System.getenv(variable);
    if (value != null && !value.isEmpty()) {
      if (!Files.isExecutable(Path.of(value))) {
        throw new AssertionError(variable + "=" + value + " is not an executable");
      }
      return value;
    }
    for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, name))) {
        return Path.of(dir, name).toString();
      }
    }
    throw new AssertionError(name + " not found: " + hint);
  }
}
