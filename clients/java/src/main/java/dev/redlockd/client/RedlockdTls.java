package dev.redlockd.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.InvalidKeySpecException;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * An {@link SSLContext} from the PEM files a redlockd deployment has (the daemon's {@code tls}
 * block uses the same), for {@link RedlockdClient.Builder#tls}. Any other SSLContext works too (a
 * JKS or PKCS#12 key store, the JVM's default trust).
 */
public final class RedlockdTls {
  private RedlockdTls() {}

  /** Trusts the CA certificates in {@code caCertificates}; no client certificate. */
  public static SSLContext fromPem(Path caCertificates)
      throws IOException, GeneralSecurityException {
    return fromPem(caCertificates, null, null);
  }

  /**
   * Trusts the CA certificates in {@code caCertificates} and presents {@code clientCertificate}
   * (a chain, leaf first) with {@code clientKey}, an unencrypted PKCS#8 key ({@code BEGIN PRIVATE
   * KEY}: RSA, EC or Ed25519), when the daemon asks for one (its {@code client_ca_file}).
   */
  public static SSLContext fromPem(Path caCertificates, Path clientCertificate, Path clientKey)
      throws IOException, GeneralSecurityException {
    KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
    trust.load(null, null);
    List<Certificate> cas = certificates(caCertificates);
    for (int i = 0; i < cas.size(); i++) {
      trust.setCertificateEntry("ca" + i, cas.get(i));
    }
    TrustManagerFactory trustManagers =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    trustManagers.init(trust);

    KeyManager[] keyManagers = null;
    if (clientCertificate != null || clientKey != null) {
      if (clientCertificate == null || clientKey == null) {
        throw new IllegalArgumentException(
            "a client certificate needs its key, and a key its certificate");
      }
      char[] password = new char[0];
      KeyStore keys = KeyStore.getInstance(KeyStore.getDefaultType());
      keys.load(null, null);
      keys.setKeyEntry("client", privateKey(clientKey), password,
          certificates(clientCertificate).toArray(new Certificate[0]));
      KeyManagerFactory factory =
          KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      factory.init(keys, password);
      keyManagers = factory.getKeyManagers();
    }
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(keyManagers, trustManagers.getTrustManagers(), null);
    return context;
  }

  private static List<Certificate> certificates(Path file)
      throws IOException, GeneralSecurityException {
    List<Certificate> out = new ArrayList<>();
    try (InputStream in = Files.newInputStream(file)) {
      out.addAll(CertificateFactory.getInstance("X.509").generateCertificates(in));
    }
    if (out.isEmpty()) {
      throw new GeneralSecurityException(file + ": no PEM certificate in it");
    }
    return out;
  }

  private static PrivateKey privateKey(Path file) throws IOException, GeneralSecurityException {
    String pem = Files.readString(file, StandardCharsets.US_ASCII);
    String begin = "-----BEGIN PRIVATE KEY-----";
    String end = "-----END PRIVATE KEY-----";
    int from = pem.indexOf(begin);
    int to = pem.indexOf(end);
    if (from < 0 || to < from) {
      throw new GeneralSecurityException(file + ": an unencrypted PKCS#8 key (" + begin
          + ") is needed; convert one with: openssl pkcs8 -topk8 -nocrypt -in " + file);
    }
    byte[] der = Base64.getMimeDecoder().decode(pem.substring(from + begin.length(), to));
    for (String algorithm : new String[] {"RSA", "EC", "Ed25519"}) {
      try {
        return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
      } catch (InvalidKeySpecException e) {
        // try the next algorithm
      }
    }
    throw new GeneralSecurityException(file + ": not an RSA, EC or Ed25519 key");
  }
}
