package dev.redlockd.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import javax.net.ssl.SSLContext;

/**
 * The real redlockd on a free loopback port in front of some masters, for the tests. REDLOCKD_BIN
 * names the binary (default: build/redlockd of the repository); a missing one fails the test.
 */
final class Daemon implements AutoCloseable {
  /** How to start one: a secret (given to it by REDLOCKD_CLIENT_SECRET), TLS, more config. */
  static final class Options {
    String secret;
    SSLContext tls; // what the harness's own INFO connection uses
    String extraJson = ""; // more members of the JSON config, e.g. "\"tls\": {...}"
  }

  final Path dir = Poll.tempDir("redlockd-java-daemon-");
  final Path log = dir.resolve("redlockd.log");
  private final Options options;
  private final int nodes;
  private Process process;
  int port;

  Daemon(List<String> masters, Options options) {
    this.options = options;
    this.nodes = masters.size();
    StringBuilder list = new StringBuilder();
    for (String master : masters) {
      list.append(list.length() == 0 ? "" : ", ").append('"').append(master).append('"');
    }
    for (int attempt = 0; attempt < 5; attempt++) {
      port = Poll.freePort();
      String config = "{\"listen\": \"127.0.0.1:" + port + "\", \"nodes\": [" + list
          + "], \"node_timeout_ms\": 250"
          + (options.extraJson.isEmpty() ? "" : ", " + options.extraJson) + "}\n";
      Path file = dir.resolve("redlockd.json");
      try {
        Files.writeString(file, config);
        ProcessBuilder builder =
            new ProcessBuilder(bin(), "--config", file.toString())
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        if (options.secret != null) {
          builder.environment().put("REDLOCKD_CLIENT_SECRET", options.secret);
        }
        process = builder.start();
      } catch (IOException e) {
        throw new AssertionError("redlockd: " + e, e);
      }
      if (Poll.eventually(15_000, () -> !process.isAlive() || ready()) && process.isAlive()) {
        return;
      }
      kill();
    }
    String tail = Poll.tail(log);
    Poll.deleteTree(dir);
    throw new AssertionError("redlockd did not become ready; log:\n" + tail);
  }

  Daemon(List<String> masters) {
    this(masters, new Options());
  }

  private static String bin() {
    String path = System.getenv("REDLOCKD_BIN");
    if (path == null || path.isEmpty()) {
      // The tests run in clients/java (build.sh cds there): the repository is two levels up.
      path = Path.of("..", "..", "build", "redlockd").toAbsolutePath().normalize().toString();
    }
    if (!Files.isExecutable(Path.of(path))) {
      throw new AssertionError("redlockd binary not found at " + path
          + ": build it (scripts/build) or set REDLOCKD_BIN");
    }
    return path;
  }

  String address() {
    return "127.0.0.1:" + port;
  }

  long pid() {
    return process.pid();
  }

  private boolean ready() {
    try {
      Object nodesInfo = info().get("nodes");
      long ok = ((List<?>) nodesInfo)
                    .stream()
                    .filter(n -> "ok".equals(((Map<?, ?>) n).get("state")))
                    .count();
      return ok == nodes;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  /** INFO over a connection of its own, not through the client under test. */
  Map<?, ?> info() throws IOException {
    try (Socket socket = options.tls != null
            ? options.tls.getSocketFactory().createSocket("127.0.0.1", port)
            : new Socket("127.0.0.1", port)) {
      socket.setSoTimeout(2000);
      OutputStream out = socket.getOutputStream();
      String request = (options.secret != null ? "AUTH " + options.secret + "\n" : "") + "INFO\n";
      out.write(request.getBytes(StandardCharsets.US_ASCII));
      out.flush();
      BufferedReader in = new BufferedReader(
          new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII));
      String line = null;
      for (int i = 0; i < (options.secret != null ? 2 : 1); i++) {
        line = in.readLine();
      }
      if (line == null || !line.startsWith("OK ")) {
        throw new IOException("INFO: " + line);
      }
      return (Map<?, ?>) Json.parse(line.substring(3));
    }
  }

  /** A number of INFO, "counters.renewed" style; -1 when it cannot be read. */
  long number(String path) {
    try {
      Object value = info();
      for (String key : path.split("\\.")) {
        value = ((Map<?, ?>) value).get(key);
      }
      return ((Number) value).longValue();
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  void kill() {
    if (process != null && process.isAlive()) {
      signal("CONT");
      process.destroyForcibly();
      try {
        process.waitFor();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** kill -STOP / -CONT: Java's Process has no signals but TERM and KILL. */
  void signal(String name) {
    try {
      new ProcessBuilder("kill", "-" + name, String.valueOf(process.pid()))
          .inheritIO()
          .start()
          .waitFor();
    } catch (IOException e) {
      throw new AssertionError("kill -" + name + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    kill();
    Poll.deleteTree(dir);
  }
}
