package org.crossdock.client;

import java.io.Closeable;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Push connections to workers, one per address, shared by the tasks of a process (requests are
 * multiplexed by id). A closed connection is replaced on the next {@link #get}.
 */
public final class ConnectionPool implements Closeable {
  private final ConcurrentHashMap<String, RpcConnection> conns = new ConcurrentHashMap<>();
  private final int connectTimeoutMs;
  private volatile String appId;
  private volatile byte[] token;

  public ConnectionPool(int connectTimeoutMs) {
    this.connectTimeoutMs = connectTimeoutMs;
  }

  public int connectTimeoutMs() {
    return connectTimeoutMs;
  }

  /**
   * The app whose token the connections prove (an executor serves one app). Connections open
   * for another app are closed; the next {@link #get} opens one that proves this one.
   */
  public synchronized void authenticateAs(String appId, byte[] token) {
    if (appId.equals(this.appId) && java.util.Arrays.equals(token, this.token)) {
      return;
    }
    this.appId = appId;
    this.token = token;
    close();
  }

  public RpcConnection get(String addr) throws CrossdockException {
    RpcConnection c = conns.get(addr);
    if (c != null && !c.isClosed()) {
      return c;
    }
    synchronized (this) {
      c = conns.get(addr);
      if (c == null || c.isClosed()) {
        c = RpcConnection.connect("Crossdock worker", addr, connectTimeoutMs, appId, token);
        conns.put(addr, c);
      }
      return c;
    }
  }

  @Override
  public void close() {
    for (RpcConnection c : conns.values()) {
      c.close();
    }
    conns.clear();
  }
}
