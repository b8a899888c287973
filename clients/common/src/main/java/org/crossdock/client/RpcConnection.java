package org.crossdock.client;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.crossdock.protocol.Codec;
import org.crossdock.protocol.FrameHeader;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.ProtocolException;

/**
 * One TCP connection on which many requests may be outstanding (pipelining). Responses are
 * matched to requests by request id on a reader thread. An {@code Error} response completes the
 * request's future exceptionally with a REMOTE {@link CrossdockException}. When the connection
 * fails every outstanding request fails with a TRANSPORT error and the connection reports itself
 * closed; callers open a new one. That includes this client failing on its own while reading an
 * answer (its heap exhausted by a body, a defect): the connection is shared by every task of the
 * executor, so its calls fail as for a broken connection (and are asked again on a new one where
 * their callers retry) rather than all taking one task's error as theirs.
 */
public final class RpcConnection implements Closeable {
  private final String addr;
  private final Socket socket;
  private final OutputStream out;
  private final Object writeLock = new Object();
  private final Map<Long, CompletableFuture<Message>> pending = new ConcurrentHashMap<>();
  private final AtomicLong nextId = new AtomicLong(Handshake.NEXT_ID);
  private volatile boolean closed;
  private volatile IOException failure;
  private String lastWord;

  private RpcConnection(String addr, Socket socket) throws IOException {
    this.addr = addr;
    this.socket = socket;
    this.out = new BufferedOutputStream(socket.getOutputStream(), 64 << 10);
    Thread t = new Thread(this::readLoop, "crossdock-rpc-" + addr);
    t.setDaemon(true);
    t.start();
  }

  /** Connects to {@code addr} ({@code host:port}) of a {@code role} named in errors. */
  public static RpcConnection connect(String role, String addr, int connectTimeoutMs)
      throws CrossdockException {
    return connect(role, addr, connectTimeoutMs, null, null);
  }

  /**
   * Connects and proves {@code appId}'s {@code token} on the new connection ({@link
   * Handshake}); a null or empty token sends no handshake.
   */
  public static RpcConnection connect(String role, String addr, int connectTimeoutMs,
      String appId, byte[] token) throws CrossdockException {
    Socket s = Net.connect(role, addr, connectTimeoutMs);
    try {
      Handshake.prove(s, addr, appId, token, connectTimeoutMs);
      return new RpcConnection(addr, s);
    } catch (CrossdockException e) {
      try {
        s.close();
      } catch (IOException ignored) {
        // nothing to do
      }
      throw e;
    } catch (IOException e) {
      closeQuietly(s);
      throw CrossdockException.transport(addr, "cannot open streams", e);
    } catch (RuntimeException | Error t) {
      closeQuietly(s); // e.g. no thread could be started for it
      throw t;
    }
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // nothing to do
    }
  }

  public String addr() {
    return addr;
  }

  public boolean isClosed() {
    return closed;
  }

  /** Requests sent and not answered yet. */
  public int outstanding() {
    return pending.size();
  }

  private CompletableFuture<Message> register(long id) throws CrossdockException {
    CompletableFuture<Message> f = new CompletableFuture<>();
    pending.put(id, f);
    if (closed) {
      pending.remove(id);
      throw CrossdockException.transport(addr, "connection is closed", failure);
    }
    return f;
  }

  /** Sends {@code m}; the future completes with the response. */
  public CompletableFuture<Message> call(Message m) throws CrossdockException {
    long id = nextId.getAndIncrement();
    byte[] frame = Codec.encodeFrame(m, id);
    CompletableFuture<Message> f = register(id);
    write(id, frame, null, 0, 0);
    return f;
  }

  /**
   * Sends a pushed batch: the frame is written when this returns (it blocks while the worker
   * applies back-pressure by not reading); the future completes with the acknowledgement.
   */
  public CompletableFuture<Message> push(Message.PushHeader h, byte[] payload, int off, int len)
      throws CrossdockException {
    long id = nextId.getAndIncrement();
    byte[] prefix = Codec.encodePushPrefix(id, h, len);
    CompletableFuture<Message> f = register(id);
    write(id, prefix, payload, off, len);
    return f;
  }

  private void write(long id, byte[] a, byte[] b, int off, int len) throws CrossdockException {
    try {
      synchronized (writeLock) {
        out.write(a);
        if (b != null) {
          out.write(b, off, len);
        }
        out.flush();
      }
    } catch (IOException e) {
      pending.remove(id);
      fail(e);
      throw CrossdockException.transport(addr, "write failed", e);
    } catch (RuntimeException | Error t) {
      // The caller's own failure, thrown to it as it is; a frame may be half written, so the
      // connection is of no use to anyone any more.
      pending.remove(id);
      fail(new IOException("a write on this connection failed half-way: " + t, t));
      throw t;
    }
  }

  private void readLoop() {
    IOException why = null;
    Error fatal = null;
    try (DataInputStream in =
        new DataInputStream(new BufferedInputStream(socket.getInputStream(), 64 << 10))) {
      byte[] raw = new byte[FrameHeader.LEN];
      while (true) {
        try {
          in.readFully(raw);
        } catch (EOFException eof) {
          why = new EOFException(lastWord == null
              ? "connection closed by the server"
              : "connection closed by the server: " + lastWord);
          break;
        }
        FrameHeader h = FrameHeader.decode(raw, 0);
        Codec.checkHeader(h);
        if (h.bodyLen() > Codec.MAX_CONTROL_FRAME) {
          throw new ProtocolException(
              org.crossdock.protocol.ErrorCode.FRAME_TOO_LARGE,
              "response of " + h.bodyLen() + " bytes exceeds the limit");
        }
        byte[] body = new byte[h.bodyLen()];
        in.readFully(body);
        Message m = Codec.decodeBody(h.kind(), ByteBuffer.wrap(body));
        CompletableFuture<Message> f = pending.remove(h.requestId());
        if (f == null) {
          if (h.requestId() == 0 && m instanceof Message.Error e) {
            // About the connection itself (a limit reached, a frame the server could not
            // parse), sent before the server closes it: the reason to report.
            Object code = e.errorCode() != null ? e.errorCode() : e.code();
            lastWord = code + ": " + e.message();
          }
          continue; // otherwise an answer to a request nobody waits for any more
        }
        if (m instanceof Message.Error e) {
          f.completeExceptionally(CrossdockException.remote(addr, e.code(), e.message()));
        } else {
          f.complete(m);
        }
      }
    } catch (IOException e) {
      why = e;
    } catch (RuntimeException | Error t) {
      // The heap exhausted by an answer's body, a defect: the calls fail now, as for a broken
      // connection, instead of waiting for their timeouts while the thread is gone.
      why = new IOException("the connection's reading thread failed: " + t, t);
      fatal = t instanceof Error e ? e : null;
    }
    fail(why);
    if (fatal != null) {
      throw fatal; // and the JVM's own policy for it applies (Spark ends an executor on one)
    }
  }

  private void fail(IOException why) {
    if (failure == null) {
      failure = why;
    }
    closed = true;
    try {
      socket.close();
    } catch (IOException ignored) {
      // nothing to do
    }
    List<Long> ids = new ArrayList<>(pending.keySet());
    for (Long id : ids) {
      CompletableFuture<Message> f = pending.remove(id);
      if (f != null) {
        f.completeExceptionally(
            CrossdockException.transport(addr, "connection lost before the response arrived", why));
      }
    }
  }

  @Override
  public void close() {
    fail(new IOException("connection closed by the client"));
  }
}
