package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The README's example program runs as written: its java block is saved as Example.java and run
 * with the command the README gives (Java's single-file launcher, the jar on the class path).
 */
class ReadmeExampleTest extends DaemonTest {
  @Test
  void readmeExampleRunsAsWritten() throws Exception {
    String readme = Files.readString(Path.of("README.md"), StandardCharsets.UTF_8);
    String open = "```java\n";
    int start = readme.indexOf(open);
    assertTrue(start >= 0, "README.md has no java block");
    String program =
        readme.substring(start + open.length(), readme.indexOf("```", start + open.length()));
    assertTrue(program.contains("public class Example"), "the first java block is not the example");
    String command = "java -cp build-java/redlockd-client.jar Example.java 127.0.0.1:7400";
    assertTrue(readme.contains(command), "README.md no longer says how to run it: " + command);

    String jar = System.getProperty("redlockd.jar");
    assertTrue(jar != null && Files.isReadable(Path.of(jar)),
        "-Dredlockd.jar must name the client's jar (build.sh test sets it): " + jar);
    Daemon d = daemon(fleet());
    Path dir = closeLater(new TempDir()).path;
    Files.writeString(dir.resolve("Example.java"), program);

    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    Process process = new ProcessBuilder(java.toString(), "-cp", jar, "Example.java", d.address())
                          .directory(dir.toFile())
                          .redirectErrorStream(true)
                          .start();
    assertTrue(process.waitFor(120, TimeUnit.SECONDS), "the example did not finish");
    String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, process.exitValue(), output);
    assertTrue(output.matches("(?s)orders:1001: fence \\d+, valid for \\d+ ms\n"
                   + "reports:daily: fence \\d+, holds 2\n"),
        output);
  }

  /** A temporary directory, deleted with the test's other resources. */
  private static final class TempDir implements AutoCloseable {
    final Path path = Poll.tempDir("redlockd-java-example-");

    @Override
    public void close() {
      Poll.deleteTree(path);
    }
  }
}
