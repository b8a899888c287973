package org.crossdock.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;

/** Socket helpers. */
public final class Net {
  private Net() {}

  /**
   * TLS for every connection this process opens, or null for plain TCP. Set once from the
   * engine's configuration (an executor or driver talks to one Crossdock cluster).
   */
  private static volatile Tls tls;

  /** Opens every later connection with {@code t} (null: plain TCP). */
  public static void useTls(Tls t) {
    tls = t;
  }

  /** The TLS later connections are opened with, or null. */
  public static Tls tls() {
    return tls;
  }

  /** Parses {@code host:port} (IPv6 as {@code [addr]:port}). */
  public static InetSocketAddress parse(String addr) {
    int colon = addr.lastIndexOf(':');
    if (colon <= 0 || colon == addr.length() - 1) {
      throw new IllegalArgumentException("address '" + addr + "' is not host:port");
    }
    String host = addr.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    int port;
    try {
      port = Integer.parseInt(addr.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("address '" + addr + "' has no numeric port");
    }
    return new InetSocketAddress(host, port);
  }

  /**
   * Connects with a timeout and TCP_NODELAY, then runs the TLS handshake when {@link #useTls}
   * set one; failures are transport errors naming what was reached ({@code role}, e.g.
   * "Crossdock worker") and its address, except a TLS handshake the server's certificate
   * fails, a protocol error (retrying the same server cannot cure it).
   */
  public static Socket connect(String role, String addr, int connectTimeoutMs)
      throws CrossdockException {
    Socket s = new Socket();
    Tls t = tls;
    try {
      s.setTcpNoDelay(true);
      s.setKeepAlive(true);
      InetSocketAddress to = parse(addr);
      s.connect(to, connectTimeoutMs);
      if (t == null) {
        return s;
      }
      try {
        return t.wrap(s, to.getHostString(), to.getPort(), connectTimeoutMs);
      } catch (javax.net.ssl.SSLException e) {
        // A certificate that does not check out: not worth retrying the same server.
        s.close();
        throw CrossdockException.protocol(addr,
            "TLS handshake with " + role + " failed (" + t + "): " + e.getMessage(), e);
      }
    } catch (CrossdockException e) {
      throw e;
    } catch (IOException | IllegalArgumentException e) {
      try {
        s.close();
      } catch (IOException ignored) {
        // nothing to do
      }
      throw CrossdockException.transport(
          addr, "cannot connect to " + role + " within " + connectTimeoutMs + " ms", e);
    }
  }
}
