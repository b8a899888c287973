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

  public ConnectionPool(int connectTimeoutMs) {
    this.connectTimeoutMs = connectTimeoutMs;
  }

  public int connectTimeoutMs() {
    return connectTimeoutMs;
  }

  public RpcConnection get(String addr) throws CrossdockException {
    RpcConnection c = conns.get(addr);
    if (c != null && !c.isClosed()) {
      return c;
    }
    synchronized (this) {
      c = conns.get(addr);
      if (c == null || c.isClosed()) {
        c = RpcConnection.connect("Crossdock worker", addr, connectTimeoutMs);
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
