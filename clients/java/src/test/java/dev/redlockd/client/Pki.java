package dev.redlockd.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A throwaway CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, made
 * by the openssl CLI (as the other clients' suites do).
 */
final class Pki implements AutoCloseable {
  final Path dir = Poll.tempDir("redlockd-java-pki-");

  Pki() {
    String openssl = Poll.executable("OPENSSL", "openssl",
        "the openssl CLI is needed for the TLS test: install openssl (scripts/setup --test)");
    run(openssl, "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "ca.key", "-subj", "/CN=redlockd java test ca", "-days", "2", "-out",
        "ca.crt");
    try {
      Files.writeString(dir.resolve("ext.cnf"),
          "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
    } catch (IOException e) {
      throw new AssertionError(e);
    }
    for (String name : new String[] {"server", "client"}) {
      run(openssl, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
          "-keyout", name + ".key", "-subj", "/CN=" + name, "-out", name + ".csr");
      run(openssl, "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
          "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", name + ".crt");
    }
  }

  Path file(String name) {
    return dir.resolve(name);
  }

  private void run(String... command) {
    List<String> args = new ArrayList<>(List.of(command));
    try {
      Path output = dir.resolve("openssl.log");
      Process process = new ProcessBuilder(args)
                            .directory(dir.toFile())
                            .redirectErrorStream(true)
                            .redirectOutput(output.toFile())
                            .start();
      if (process.waitFor() != 0) {
        throw new AssertionError(String.join(" ", args) + " failed:\n"
            + Files.readString(output, StandardCharsets.UTF_8));
      }
    } catch (IOException e) {
      throw new AssertionError(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  @Override
  public void close() {
    Poll.deleteTree(dir);
  }
}
