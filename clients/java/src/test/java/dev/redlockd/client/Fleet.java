package dev.redlockd.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Real redis-server masters on free loopback ports, for the tests. REDIS_SERVER names the binary
 * (default: redis-server from PATH); a missing one fails the test and says so.
 */
final class Fleet implements AutoCloseable {
  /** One master. */
  static final class Redis {
    final int port;
    private final Process process;

    private Redis(int port, Process process) {
      this.port = port;
      this.process = process;
    }

    String address() {
      return "127.0.0.1:" + port;
    }

    void kill() {
      process.destroyForcibly();
      try {
        process.waitFor();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    private boolean pings() {
      try (Socket socket = new Socket("127.0.0.1", port)) {
        socket.setSoTimeout(500);
        OutputStream out = socket.getOutputStream();
        out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
        InputStream in = socket.getInputStream();
        byte[] reply = new byte[5];
        return in.readNBytes(reply, 0, 5) == 5
            && new String(reply, StandardCharsets.US_ASCII).equals("+PONG");
      } catch (IOException e) {
        return false;
      }
    }
  }

  final List<Redis> nodes = new ArrayList<>();
  private final Path dir = Poll.tempDir("redlockd-java-fleet-");

  Fleet(int count) {
    String bin = Poll.executable(
        "REDIS_SERVER", "redis-server", "install redis-server (scripts/setup) or set REDIS_SERVER");
    try {
      for (int i = 0; i < count; i++) {
        nodes.add(start(bin, dir.resolve("node" + i)));
      }
    } catch (RuntimeException | Error e) {
      close();
      throw e;
    }
  }

  private static Redis start(String bin, Path dir) {
    Path log = dir.resolve("redis.log");
    dir.toFile().mkdirs();
    for (int attempt = 0; attempt < 5;
         attempt++) { // someone may take the free port before redis does
      int port = Poll.freePort();
      Process process;
      try {
        process = new ProcessBuilder(bin, "--port", String.valueOf(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", dir.toString())
                      .redirectErrorStream(true)
                      .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                      .start();
      } catch (IOException e) {
        throw new AssertionError("redis-server: " + e, e);
      }
      Redis redis = new Redis(port, process);
      if (Poll.eventually(10_000, () -> !process.isAlive() || redis.pings()) && process.isAlive()) {
        return redis;
      }
      redis.kill();
    }
    throw new AssertionError("redis-server did not start:\n" + Poll.tail(log));
  }

  List<String> addresses() {
    List<String> out = new ArrayList<>();
    for (Redis redis : nodes) {
      out.add(redis.address());
    }
    return out;
  }

  @Override
  public void close() {
    for (Redis redis : nodes) {
      redis.kill();
    }
    Poll.deleteTree(dir);
  }
}
