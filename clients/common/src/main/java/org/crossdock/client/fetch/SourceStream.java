package org.crossdock.client.fetch;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.Handshake;
import org.crossdock.client.Net;
import org.crossdock.protocol.Codec;
import org.crossdock.protocol.FrameHeader;
import org.crossdock.protocol.Kinds;
import org.crossdock.protocol.Message;

/**
 * A connection to one worker, carrying many fetches of one reduce task at once. Requests are
 * written as they are issued, without waiting for the previous ones to end; the worker streams
 * their answers back to back, in request order, so a task reading several small pieces from a
 * worker pays no round trip between them (the paper's request aggregation, done by pipelining).
 *
 * <p>A thread of its own connects (so an unreachable worker never blocks the task), writes the
 * requests queued meanwhile, and reads: every batch is checked (order, CRC32C; {@link
 * Segment#accept}) and handed to the {@link Events} under the scheduler's lock. When the
 * connection breaks, every request still unanswered is handed back ({@link Events#broken}) with
 * its resume point, to be asked again.
 *
 * <p>The connection outlives its task: when the task ends with nothing unanswered on it, it goes
 * to the executor's {@link IdleStreams} ({@link #release}) and the next task reading the same
 * worker for the same app takes it, with its thread: the thread hands frames to whichever read
 * the connection is bound to ({@link Binding}). A connection taken from there that fails before
 * its first answer was most likely closed by the worker while idle: its requests are asked
 * again without using up a retry.
 */
final class SourceStream implements Closeable {
  /** What the stream tells its scheduler; called with the scheduler's lock held. */
  interface Events {
    /** Checked batches of {@code s} were queued ({@code bytes} of payload). */
    void received(SourceStream src, Segment s, long bytes);

    /** {@code s} was read to its end. */
    void ended(SourceStream src, Segment s);

    /** The worker refused {@code s} (an Error frame); the connection goes on. */
    void refused(SourceStream src, Segment s, CrossdockException e);

    /** The connection failed; {@code unanswered} were not (wholly) read. */
    void broken(SourceStream src, List<Segment> unanswered, CrossdockException e);

    /**
     * The read is to end with {@code e}, this client's own failure ({@link
     * CrossdockException.Kind#LOCAL}): told when handing a broken connection's requests back
     * ({@link #broken}) failed part-way. A LOCAL {@link #broken} means the same.
     */
    void failedLocally(CrossdockException e);

    /**
     * Whether the read has room now for a frame body of {@code bytes} on {@code src}; if so the
     * bytes count as arriving until {@link #arrived}. If not, the connection waits on the
     * read's lock until the task has consumed some of what it holds.
     */
    boolean admit(SourceStream src, long bytes);

    /** Admitted bytes that were handed over (or will never be): no longer arriving. */
    void arrived(long bytes);
  }

  /**
   * The read a connection serves: the lock its frames are handed over under, what it tells,
   * and the shuffle its requests name.
   */
  record Binding(Object lock, Events events, int shuffleId) {}

  private record Request(long id, Segment segment) {}

  /**
   * An idle connection is closed by the client after this long (the worker's own idle timeout
   * is 600 s by default): it is checked at each read timeout, so it may live up to one more.
   */
  static final long IDLE_LIMIT_NANOS = 300_000_000_000L;

  final String addr;
  /** Its key among the idle connections: worker, app and token. */
  final Object poolKey;
  private final String appId;
  private final byte[] appToken;
  private final IdleStreams idle;
  private final int connectTimeoutMs;
  private final int readTimeoutMs;
  /**
   * The read served now; null while idle. It changes only with nothing unanswered: set by
   * {@link IdleStreams#take} under the idle list's lock and the new read's, cleared by {@link
   * #release} under the old read's and the idle list's. The fields below are the bound read's,
   * used under its lock.
   */
  private volatile Binding binding;
  /** Taken from the idle list and nothing answered since: a failure now costs no retry. */
  private boolean stale;
  /**
   * When the connection last made progress ({@link System#nanoTime}): a frame arrived, or a
   * request was written while none was unanswered.
   */
  private long lastActivityNanos;
  /** When it went idle ({@link System#nanoTime}); read by its own thread only while idle. */
  private volatile long idleSinceNanos;

  /** Requests written (or to write once connected) and not yet answered, in order. */
  private final ArrayDeque<Request> pending = new ArrayDeque<>();
  /** Requests issued before the connection was up. */
  private final List<Request> unsent = new ArrayList<>();
  private long nextId = 1;
  private Socket socket;
  private OutputStream out;
  private volatile boolean closed;
  /** The body being read was admitted for this many bytes ({@link #admit}); 0 between frames. */
  private long admitted;
  /**
   * The frame being read waited for room ({@link #admit}): if the connection breaks now, most
   * likely the worker gave up on a reader that took nothing for its timeout, which is the
   * read's doing, not the copy's: its requests are asked again without using up a retry.
   */
  private boolean heldBack;
  private boolean connected;
  private boolean everConnected;

  /**
   * Opens a connection to {@code addr} for the read {@code b}, on a thread of its own; it goes
   * back to {@code idle} (null: nowhere) when released.
   */
  SourceStream(String addr, String appId, byte[] appToken, Binding b, IdleStreams idle,
      int connectTimeoutMs, int readTimeoutMs) {
    this.addr = addr;
    this.poolKey = IdleStreams.key(addr, appId, appToken);
    this.appId = appId;
    this.appToken = appToken;
    this.binding = b;
    this.idle = idle;
    this.connectTimeoutMs = connectTimeoutMs;
    this.readTimeoutMs = readTimeoutMs;
    this.lastActivityNanos = System.nanoTime();
    Thread t = new Thread(this::run, "crossdock-fetch-" + addr);
    t.setDaemon(true);
    t.start();
  }

  /** Requests the rest of {@code s}. Call with the scheduler's lock held. */
  void send(Segment s) {
    Request r = new Request(nextId++, s);
    if (pending.isEmpty()) {
      lastActivityNanos = System.nanoTime(); // the clock runs from the oldest unanswered one
    }
    pending.add(r);
    if (!connected) {
      unsent.add(r);
      return;
    }
    try {
      write(List.of(r));
    } catch (IOException e) {
      // The reader thread sees the broken connection and hands every request back.
      closeSocket();
    }
  }

  /** Requests not yet answered. Call with the scheduler's lock held. */
  int outstanding() {
    return pending.size();
  }

  private void write(List<Request> requests) throws IOException {
    int shuffleId = binding.shuffleId();
    for (Request r : requests) {
      out.write(Codec.encodeFrame(r.segment().request(appId, shuffleId), r.id()));
    }
    out.flush();
  }

  /**
   * The connection's thread. Anything but an {@link IOException} (the heap exhausted by a frame
   * body, a defect in a read's bookkeeping) met while it answered a read is handed to that read
   * as a {@link CrossdockException.Kind#LOCAL} failure that the task throws: left to the thread's
   * uncaught handler, it would leave the task waiting for answers nobody reads (Spark's local
   * mode, MapReduce), or make Spark's handler end the whole executor for one task's read. Met
   * while it answered nothing (idle, or bound with nothing asked), there is no read to hand it
   * to: the connection closes as a broken one (a read that takes it meanwhile asks again free of
   * charge) and the thread's uncaught handler gets it.
   */
  private void run() {
    try {
      serve();
    } catch (RuntimeException | Error t) {
      // The read it answers cannot change while a request is unanswered: a connection is
      // released, and taken by another read, only with nothing unanswered.
      Binding b = binding;
      boolean answering = false;
      if (b != null) {
        synchronized (b.lock()) {
          answering = binding == b && !pending.isEmpty();
        }
      }
      if (!answering) {
        fail(CrossdockException.transport(addr, "the fetch connection's thread failed", t));
        throw t;
      }
      try {
        fail(CrossdockException.local(addr, "the fetch connection's thread failed", t));
      } catch (RuntimeException | Error again) {
        // Handing the requests back failed too: fail() noted it and told the read.
      }
    }
  }

  private void serve() {
    DataInputStream in;
    try {
      Socket s = Net.connect("Crossdock worker", addr, connectTimeoutMs);
      try {
        Handshake.prove(s, addr, appId, appToken, readTimeoutMs);
      } catch (IOException | RuntimeException | Error e) {
        try {
          s.close(); // not yet this stream's socket: nothing else would close it
        } catch (IOException ignored) {
          // the handshake's failure is the one to report
        }
        throw e;
      }
      s.setSoTimeout(readTimeoutMs);
      s.setReceiveBufferSize(1 << 20);
      keepAlive(s);
      // Not released before it is connected: the read that opened it is bound until then.
      synchronized (binding.lock()) {
        socket = s;
        if (closed) {
          closeSocket();
          return;
        }
        out = new BufferedOutputStream(s.getOutputStream(), 64 << 10);
        write(unsent);
        unsent.clear();
        connected = true;
        everConnected = true;
      }
      in = new DataInputStream(new BufferedInputStream(s.getInputStream(), 256 << 10));
    } catch (IOException e) {
      fail(e);
      return;
    }
    // The read being served when the frame that failed began (null: idle): a failure is
    // charged to it, not to a read that took the connection since.
    Binding at = null;
    try {
      while (true) {
        at = binding;
        awaitFrame(in);
        at = binding;
        FrameHeader h = StreamFrames.readHeader(in, addr);
        // Only data takes room: an end or a refusal is read at once.
        boolean data = h.kind() == Kinds.KIND_FETCH_CHUNK || h.kind() == Kinds.KIND_FETCH_RECORDS;
        if (data && !admit(h.bodyLen())) {
          return;
        }
        if (!handOver(StreamFrames.readBody(in, h, addr))) {
          return;
        }
      }
    } catch (CrossdockException e) {
      fail(recordsFallback(e, at));
    } catch (IOException e) {
      fail(recordsFallback(CrossdockException.transport(addr, "fetch stream broke", e), at));
    }
  }

  /**
   * Blocks until the next frame's first byte has arrived. The read timeout fails the connection
   * only when requests have waited that long with nothing arriving; an idle connection, or one
   * whose read is busy with what it has, just goes on waiting.
   */
  private void awaitFrame(DataInputStream in) throws IOException {
    while (true) {
      try {
        in.mark(1);
        if (in.read() < 0) {
          throw new EOFException("the worker closed the connection");
        }
        in.reset();
        return;
      } catch (SocketTimeoutException e) {
        boolean expired = System.nanoTime() - idleSinceNanos > IDLE_LIMIT_NANOS;
        if (binding == null && idle != null && expired && idle.remove(this)) {
          // Out of the list first: a read that took it just now keeps it.
          closed = true;
          throw new EOFException("idle for longer than the client keeps a connection");
        }
        if (!quiet()) {
          throw e;
        }
      }
    }
  }

  /**
   * Waits until the read this connection serves has room for a frame body of {@code bytes}
   * ({@link Events#admit}), so that what a read holds stays under its limit even when one
   * request is larger than the limit: meanwhile the body stays in the socket and the worker's
   * stream waits in TCP's flow control, not in the executor's heap. False once the connection
   * was closed.
   */
  private boolean admit(int bytes) throws InterruptedIOException {
    while (true) {
      Binding b = binding;
      if (b == null) {
        return true; // a frame on an idle connection: handOver reports it
      }
      synchronized (b.lock()) {
        if (binding != b) {
          continue; // taken by another read just now
        }
        if (closed) {
          return false;
        }
        if (pending.isEmpty()) {
          return true; // it answers nothing: handOver reports it
        }
        if (b.events().admit(this, bytes)) {
          admitted = bytes;
          return true;
        }
        heldBack = true;
        try {
          // Woken when the task consumes; the timeout is a safety net only.
          b.lock().wait(50);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new InterruptedIOException("interrupted waiting for room in the read");
        }
      }
    }
  }

  /** Whether {@code s} is among the requests written here and not yet answered. */
  boolean isPending(Segment s) {
    for (Request r : pending) {
      if (r.segment() == s) {
        return true;
      }
    }
    return false;
  }

  /** The admitted body ends (handed over, or never will be). Call with the lock held. */
  private void endAdmitted(Events events) {
    if (admitted != 0) {
      events.arrived(admitted);
      admitted = 0;
    }
  }

  /** Whether nothing is overdue: no request unanswered, or progress within the read timeout. */
  private boolean quiet() {
    Binding b = binding;
    if (b == null) {
      return true;
    }
    synchronized (b.lock()) {
      return binding != b || pending.isEmpty()
          || System.nanoTime() - lastActivityNanos < readTimeoutMs * 1_000_000L;
    }
  }

  /**
   * Hands a frame to the read the connection is bound to, under its lock; false once the
   * connection was closed. A frame on an idle connection answers nothing: a protocol error.
   */
  private boolean handOver(Codec.Frame f) throws CrossdockException {
    while (true) {
      Binding b = binding;
      if (b == null) {
        throw CrossdockException.protocol(addr, "a frame on an idle fetch connection", null);
      }
      synchronized (b.lock()) {
        if (binding != b) {
          continue; // taken by another read just now
        }
        endAdmitted(b.events());
        heldBack = false;
        if (closed) {
          return false;
        }
        lastActivityNanos = System.nanoTime();
        stale = false;
        dispatch(f, b.events());
        return true;
      }
    }
  }

  /**
   * A frame that did not decode, a batch that failed the checks or a broken connection while the
   * request being answered takes stored records: those the worker sent unread, so it is its
   * checked read that must judge the data. The request stops taking them ({@link
   * Segment#dropRecords}: it is asked again from where it began) and a failed check becomes a
   * broken connection, which asks the same copy again; the worker then finds any damage, reports
   * its copy and refuses ({@code corrupt_data}, {@code data_lost}), as it would have without
   * records. Other failures are returned as they are.
   */
  private CrossdockException recordsFallback(CrossdockException e, Binding b) {
    if (b == null) {
      return e; // idle when the frame began: nothing was asked
    }
    synchronized (b.lock()) {
      Request head = pending.peek();
      // A closed stream's requests were taken back already (drainPending).
      if (binding != b || closed || head == null) {
        return e;
      }
      Segment h = head.segment();
      if (e.isTransport()) {
        // A broken stream that delivered records resumes where it began, without them, as
        // after a failed check; the break costs a retry as any.
        if (h.deliveredRecords()) {
          h.dropRecords();
        }
        return e;
      }
      if (!h.dropRecords()) {
        return e;
      }
      // Nobody's fault but the record's: the requests on this connection are asked again
      // without using up a retry.
      for (Request r : pending) {
        r.segment().freeRetry = true;
      }
    }
    return CrossdockException.transport(addr,
        "a stored record failed the reader's checks; asking again without records", e);
  }

  /** Hands a frame to the request it answers. Called with the lock held. */
  private void dispatch(Codec.Frame f, Events events) throws CrossdockException {
    Request head = pending.peek();
    if (head == null || f.header().requestId() != head.id()) {
      throw CrossdockException.protocol(addr, "answer to request " + f.header().requestId()
          + " while request " + (head == null ? "none" : head.id()) + " was expected", null);
    }
    Segment s = head.segment();
    Message m = f.message();
    if (m instanceof Message.FetchChunk || m instanceof Message.FetchRecords) {
      long before = s.received;
      boolean whole = false;
      try {
        if (m instanceof Message.FetchChunk c) {
          s.accept(addr, c.batches());
        } else {
          s.acceptRecords(addr, ((Message.FetchRecords) m).batches());
        }
        whole = true;
      } finally {
        // The batches queued before one that failed are good and counted (a frame that
        // failed before any is no progress: it resets no retry count).
        if (whole || s.received > before) {
          events.received(this, s, s.received - before);
        }
      }
    } else if (m instanceof Message.FetchEnd e) {
      s.end(addr, e);
      pending.poll();
      events.ended(this, s);
    } else if (m instanceof Message.Error e) {
      pending.poll();
      if (s.deliveredRecords()) {
        // Read on, here or elsewhere, from where the request began: its records' map and
        // sequence numbers were not checked by anyone.
        s.dropRecords();
      }
      events.refused(this, s, CrossdockException.remote(addr, e.code(), e.message()));
    } else {
      throw CrossdockException.protocol(
          addr, "unexpected answer " + m.getClass().getSimpleName() + " to a fetch", null);
    }
  }

  private void fail(IOException e) {
    CrossdockException ce = e instanceof CrossdockException c
        ? c
        : CrossdockException.transport(addr, "fetch stream broke", e);
    while (true) {
      Binding b = binding;
      if (b == null) {
        // Idle (the worker closed it, most likely): out of the idle list, nobody to tell. If a
        // read took it meanwhile, the binding is set by now and that read is told below.
        if ((idle != null && idle.remove(this)) || closed) {
          closed = true;
          closeSocket();
          return;
        }
        continue;
      }
      synchronized (b.lock()) {
        if (binding != b) {
          continue;
        }
        closeSocket();
        endAdmitted(b.events());
        if (closed) {
          return;
        }
        closed = true;
        List<Segment> unanswered = new ArrayList<>();
        for (Request r : pending) {
          Segment s = r.segment();
          unanswered.add(s);
          if (stale && !s.staleRetried) {
            s.freeRetry = true;
            s.staleRetried = true;
          }
          if (heldBack) {
            s.freeRetry = true;
          }
        }
        if (stale && idle != null) {
          // Its idle siblings most likely died with it (a restarted or vanished worker): the
          // retry opens a new connection instead of taking one of them.
          idle.closeIdle(poolKey);
        }
        pending.clear();
        unsent.clear();
        try {
          b.events().broken(this, unanswered, ce);
        } catch (RuntimeException | Error t) {
          // Handing the requests back failed part-way (e.g. no thread for a retry's connection):
          // the read must still learn that it is over, or it would wait for them.
          CrossdockException local = ce;
          if (!CrossdockException.isLocal(ce)) {
            local = CrossdockException.local(addr, "handing a broken connection's requests back failed", t);
          } else if (ce.getCause() != t) {
            ce.addSuppressed(t);
          }
          b.events().failedLocally(local);
          throw t;
        }
        return;
      }
    }
  }

  /**
   * Gives the connection back to the executor's idle list for the next task, if it is
   * connected and nothing on it is unanswered; false if it was not kept (the caller closes it).
   * Call with the read's lock held.
   */
  boolean release() {
    if (idle == null || closed || !connected || !pending.isEmpty() || !unsent.isEmpty()) {
      return false;
    }
    return idle.put(this);
  }

  /** Leaves the read it served; called by {@link IdleStreams#put} under its lock. */
  void unbind() {
    idleSinceNanos = System.nanoTime();
    binding = null;
  }

  /**
   * Closes the socket of an idle connection the list let go of, already {@link #markClosed}
   * (called by {@link IdleStreams#closeIdle} outside its lock: nobody else can reach it). Its
   * thread sees the closed socket and ends.
   */
  void closeIdle() {
    closeSocket();
  }

  /**
   * Marks an idle connection closed as the idle list lets go of it, under the list's lock, so
   * that its own thread, failing meanwhile, finds it closed rather than waiting for a read to
   * take it ({@link #fail}).
   */
  void markClosed() {
    closed = true;
  }

  /**
   * TCP keepalive probes after 30 s of silence, every 10 s, 3 unanswered ones ending it: an
   * idle connection to a host that vanished without closing it (power, network) leaves the
   * idle list within about a minute instead of the system's two hours. Best effort: where the
   * options do not exist, the system's defaults apply.
   */
  private static void keepAlive(Socket s) {
    try {
      s.setKeepAlive(true);
      s.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE, 30);
      s.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL, 10);
      s.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT, 3);
    } catch (IOException | UnsupportedOperationException e) {
      // the system's keepalive settings, or none
    }
  }

  /** Serves the read {@code b}; called by {@link IdleStreams#take} under its lock and b's. */
  void bindIdle(Binding b) {
    stale = true;
    lastActivityNanos = System.nanoTime();
    binding = b;
  }

  /** False if the worker could not even be connected to. Call with the lock held. */
  boolean everConnected() {
    return everConnected;
  }

  /** True once the stream failed or was closed: it takes no more requests. */
  boolean isClosed() {
    return closed;
  }

  /**
   * Closes the connection without telling the scheduler (it takes its unanswered requests back
   * itself: {@link #drainPending}). Call with the scheduler's lock held.
   */
  @Override
  public void close() {
    closed = true;
    closeSocket();
  }

  /** The unanswered requests of a closed stream, removed. Call with the lock held. */
  List<Segment> drainPending() {
    List<Segment> out = new ArrayList<>();
    Request head = pending.peek();
    if (head != null && head.segment().deliveredRecords()) {
      // The request being answered is asked again from where it began (its stored records are
      // not trusted for a resume point).
      head.segment().dropRecords();
    }
    for (Request r : pending) {
      out.add(r.segment());
    }
    pending.clear();
    unsent.clear();
    return out;
  }

  private void closeSocket() {
    if (socket != null) {
      try {
        socket.close();
      } catch (IOException ignored) {
        // nothing to do
      }
    }
    connected = false;
  }
}
