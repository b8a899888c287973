package org.crossdock.client;

import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Collection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/**
 * TLS to the Crossdock servers (docs/security.md, "TLS"), with the JDK's own TLS: servers are
 * checked against the certificate authorities of a PEM file and against the host the client
 * dialled (a DNS name or an IP address in the certificate's subject alternative names), as an
 * HTTPS client would. Who the client is stays the business of {@link Handshake}.
 */
public final class Tls {
  private final SSLSocketFactory factory;
  private final String source;

  private Tls(SSLSocketFactory factory, String source) {
    this.factory = factory;
    this.source = source;
  }

  /** Trusts the certificates of the PEM file {@code caFile} (one or more). */
  public static Tls trusting(Path caFile) {
    try (InputStream in = Files.newInputStream(caFile)) {
      Collection<? extends Certificate> certs =
          CertificateFactory.getInstance("X.509").generateCertificates(in);
      if (certs.isEmpty()) {
        throw new IllegalArgumentException(caFile + " holds no PEM certificate");
      }
      KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
      trust.load(null, null);
      int i = 0;
      for (Certificate c : certs) {
        trust.setCertificateEntry("crossdock-ca-" + i++, c);
      }
      TrustManagerFactory tmf =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(trust);
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(null, tmf.getTrustManagers(), null);
      return new Tls(ctx.getSocketFactory(), caFile.toString());
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalArgumentException("cannot read trusted certificates from " + caFile
          + ": " + e.getMessage(), e);
    }
  }

  /**
   * Runs the TLS handshake over the connected {@code tcp} to {@code host}, within {@code
   * timeoutMs}. Returns the TLS socket (closing it closes {@code tcp}).
   */
  SSLSocket wrap(Socket tcp, String host, int port, int timeoutMs) throws IOException {
    SSLSocket s = (SSLSocket) factory.createSocket(tcp, host, port, true);
    SSLParameters p = s.getSSLParameters();
    p.setEndpointIdentificationAlgorithm("HTTPS");
    s.setSSLParameters(p);
    int before = tcp.getSoTimeout();
    s.setSoTimeout(timeoutMs);
    s.startHandshake();
    s.setSoTimeout(before);
    return s;
  }

  @Override
  public String toString() {
    return "TLS trusting " + source;
  }
}
