package org.crossdock.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy to a real worker whose answers crawl: every read of up to {@code chunk} bytes from
 * the worker is held for {@code delayMs} before it goes on to the client (a worker behind a slow
 * link, for readers that should move away from it). {@link #cut} breaks the connections open
 * now, as a network fault would; {@link #freeze} makes them silently drop what they carry (a
 * peer gone without a word); new ones are still accepted and carry data.
 */
public final class SlowProxy implements AutoCloseable {
  private final ServerSocket server;
  /** The worker's address; connections accepted before it is known wait for it. */
  private final java.util.concurrent.CompletableFuture<String> target =
      new java.util.concurrent.CompletableFuture<>();
  private final long delayMs;
  private final int chunk;
  private final List<Socket> open = new CopyOnWriteArrayList<>();
  private final AtomicInteger accepted = new AtomicInteger();
  /** Connections numbered below this drop what they carry. */
  private volatile int frozenBelow;

  public SlowProxy(String target, long delayMs, int chunk) throws IOException {
    this(delayMs, chunk);
    this.target.complete(target);
  }

  /**
   * A proxy whose worker is named later ({@link #target}): for a worker that must be told the
   * proxy's address when it starts (it advertises it).
   */
  public SlowProxy(long delayMs, int chunk) throws IOException {
    this.server = new ServerSocket(0);
    this.delayMs = delayMs;
    this.chunk = chunk;
    Thread t = new Thread(this::accept, "slow-proxy");
    t.setDaemon(true);
    t.start();
  }

  /** Where clients connect. */
  public String addr() {
    return "127.0.0.1:" + server.getLocalPort();
  }

  private void accept() {
    while (!server.isClosed()) {
      try {
        Socket client = server.accept();
        int n = accepted.getAndIncrement();
        Socket worker = Net.connect("worker", awaitTarget(), 3000);
        open.add(client);
        open.add(worker);
        pipe(n, client.getInputStream(), worker.getOutputStream(), 0, client, worker);
        pipe(n, worker.getInputStream(), client.getOutputStream(), delayMs, client, worker);
      } catch (IOException e) {
        return;
      }
    }
  }

  private void pipe(int conn, InputStream in, OutputStream out, long delay, Socket a, Socket b) {
    Thread t = new Thread(() -> {
      byte[] buf = new byte[chunk];
      try {
        int n;
        while ((n = in.read(buf)) > 0) {
          if (delay > 0) {
            Thread.sleep(delay);
          }
          if (conn < frozenBelow) {
            continue;
          }
          out.write(buf, 0, n);
          out.flush();
        }
      } catch (IOException | InterruptedException e) {
        // the other side is gone
      } finally {
        try {
          a.close();
          b.close();
        } catch (IOException ignored) {
          // nothing to do
        }
      }
    }, "slow-proxy-pipe");
    t.setDaemon(true);
    t.start();
  }

  /** Names the worker of a proxy made without one. */
  public void target(String addr) {
    target.complete(addr);
  }

  private String awaitTarget() throws IOException {
    try {
      return target.get(30, java.util.concurrent.TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IOException("the proxy's worker was never named", e);
    }
  }

  /** Connections accepted so far. */
  public int connections() {
    return accepted.get();
  }

  /** Breaks every connection open now. */
  public void cut() throws IOException {
    for (Socket s : open) {
      s.close();
    }
    open.clear();
  }

  /** Makes every connection accepted so far drop what it carries, both ways, and stay open. */
  public void freeze() {
    frozenBelow = accepted.get();
  }

  @Override
  public void close() throws IOException {
    server.close();
  }
}
