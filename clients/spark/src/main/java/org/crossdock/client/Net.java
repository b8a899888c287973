package org.crossdock.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;

/** Socket helpers. */
public final class Net {
  private Net() {}

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
   * Connects with a timeout and TCP_NODELAY; failures are transport errors naming what was
   * reached ({@code role}, e.g. "Crossdock worker") and its address.
   */
  public static Socket connect(String role, String addr, int connectTimeoutMs)
      throws CrossdockException {
    Socket s = new Socket();
    try {
      s.setTcpNoDelay(true);
      s.setKeepAlive(true);
      s.connect(parse(addr), connectTimeoutMs);
      return s;
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
