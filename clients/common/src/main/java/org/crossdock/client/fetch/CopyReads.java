package org.crossdock.client.fetch;

import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.crossdock.client.CrossdockException;
import org.crossdock.protocol.ErrorCode;

/**
 * What a reduce task's two readers share ({@link FetchScheduler}, which reads segments one after
 * the other, and {@link RunReader}, which reads sorted runs side by side for a merge): one
 * pipelined connection per worker (taken from the executor's idle ones when it can, given back
 * at the end), the bookkeeping of received bytes, and the rule for a copy
 * that fails a request. A broken connection is asked again on the same copy (up to {@code
 * maxRetries} times without progress); a copy that cannot serve is left for another copy, the
 * request resuming after its last batch (every copy holds the same batches under the same ids),
 * and is not asked for that segment again; with no copy left, the segment carries the failure
 * for the reader to report.
 *
 * <p>Every field and package-private method is used with {@link #lock} held; the public getters
 * take it.
 */
abstract class CopyReads implements SourceStream.Events {
  /** The read's lock: the connections' threads hand their frames over under it. */
  final Object lock = new Object();
  final FetchMonitor monitor;
  final Predicate<String> local;
  final Map<String, SourceStream> streams = new HashMap<>();
  private final String appId;
  private final byte[] appToken;
  /** What the read's connections are bound to while it uses them. */
  private final SourceStream.Binding binding;
  private final int connectTimeoutMs;
  private final int readTimeoutMs;
  private final int maxRetries;
  /** Payload bytes received and not yet handed to the task. */
  long buffered;
  long peakBuffered;
  /** Frame bodies admitted ({@link #admit}) and being read off their connections. */
  long arriving;
  /** A connection waits for room ({@link #admit} said no): consuming must wake it. */
  boolean admissionWaits;
  /** Fetch requests sent (first requests, continuations and retries). */
  long requests;
  /** Connections the read opened, and those it took from the executor's idle ones. */
  long opened;
  long reused;
  /** How long the task was blocked waiting for batches. */
  long waitNanos;
  /** Times the read dropped a slow copy's connection ({@link #maybeMoveAway}). */
  long moves;
  boolean closed;
  /**
   * The most requests written and unanswered on one connection; 0 for no limit. The worker
   * reads a connection's requests only while it has room to queue their answers, so a reader
   * that wrote thousands at once, holding the lock its reading thread needs, could block both.
   */
  int maxOutstanding;
  /** Requests kept back per worker while its connection has {@link #maxOutstanding}. */
  private final Map<String, java.util.ArrayDeque<Segment>> held = new HashMap<>();
  /**
   * Copies this read moved away from ({@link #maybeMoveAway}). Later requests of the read go to
   * another copy while one is usable: once idle, a slow copy scores best at the monitor (nothing
   * in flight), so by the score alone the next request would go straight back to it and wait
   * there again. Other reads (the executor's next tasks) still try it, as the paper's rule does.
   */
  private final java.util.Set<String> left = new java.util.HashSet<>();
  /**
   * This client's own failure on a connection's thread ({@link CrossdockException.Kind#LOCAL}):
   * the read ends with it at its next call, whatever became of that connection's requests (the
   * failure may have cut their hand-over short). Not a segment's failure: no copy is to blame,
   * and the readers' recovery (other copies, the coordinator, a fetch failure) must not run.
   */
  private CrossdockException localFailure;

  CopyReads(String appId, byte[] appToken, int shuffleId, int connectTimeoutMs,
      int readTimeoutMs, int maxRetries, FetchMonitor monitor, Predicate<String> local) {
    this.appId = appId;
    this.appToken = appToken;
    this.binding = new SourceStream.Binding(lock, this, shuffleId);
    this.connectTimeoutMs = connectTimeoutMs;
    this.readTimeoutMs = readTimeoutMs;
    this.maxRetries = maxRetries;
    this.monitor = monitor;
    this.local = local;
  }

  /** Nanoseconds the task spent blocked waiting for batches so far. */
  public final long waitNanos() {
    synchronized (lock) {
      return waitNanos;
    }
  }

  /** The largest number of payload bytes received and not yet consumed at once. */
  public final long peakBufferedBytes() {
    synchronized (lock) {
      return peakBuffered;
    }
  }

  /** Fetch requests sent so far (first requests, continuations and retries). */
  public final long requests() {
    synchronized (lock) {
      return requests;
    }
  }

  /** Connections to workers the read opened (none was idle to take). */
  public final long connectionsOpened() {
    synchronized (lock) {
      return opened;
    }
  }

  /** Connections the read took from those earlier reads of the executor left idle. */
  public final long connectionsReused() {
    synchronized (lock) {
      return reused;
    }
  }

  /** Times the read left a slow copy, dropping its connection and asking the other copies. */
  public final long moves() {
    synchronized (lock) {
      return moves;
    }
  }

  /** The bytes a request for {@code s} is expected to bring (counted in flight at the monitor). */
  abstract long expected(Segment s);

  /** Whether {@code s} is still being read: a failure of one that is not is ignored. */
  abstract boolean reading(Segment s);

  /** Asks {@code source} for what is left of {@code s}, on its connection. */
  final void send(Segment s, String source) {
    s.source = source;
    s.sentNanos = System.nanoTime();
    s.done = false;
    s.batchesInStream = 0;
    s.receivedAtRequest = s.received;
    s.monitorInFlight = expected(s);
    monitor.requested(source, s.monitorInFlight);
    requests++;
    java.util.ArrayDeque<Segment> waiting = held.get(source);
    if (waiting != null && !waiting.isEmpty()) {
      waiting.add(s);
      return;
    }
    SourceStream st = stream(source);
    if (maxOutstanding > 0 && st.outstanding() >= maxOutstanding) {
      held.computeIfAbsent(source, a -> new java.util.ArrayDeque<>()).add(s);
      return;
    }
    st.send(s);
  }

  private SourceStream stream(String source) {
    SourceStream st = streams.get(source);
    if (st == null || st.isClosed()) {
      st = monitor.idle.take(source, appId, appToken, binding);
      if (st == null) {
        st = new SourceStream(source, appId, appToken, binding, monitor.idle, connectTimeoutMs,
            readTimeoutMs);
        monitor.idle.opened();
        opened++;
      } else {
        reused++;
      }
      streams.put(source, st);
    }
    return st;
  }

  /** Writes requests kept back for {@code source} while its connection has room. */
  private void sendHeld(String source) {
    java.util.ArrayDeque<Segment> waiting = held.get(source);
    while (waiting != null && !waiting.isEmpty() && !closed) {
      SourceStream st = stream(source);
      if (st.outstanding() >= maxOutstanding) {
        return;
      }
      st.send(waiting.poll());
    }
  }

  /** Waits (lock held) up to 25 ms for the connections to bring something for {@code s}. */
  final void pause(Segment s) throws InterruptedIOException {
    try {
      lock.wait(25);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while fetching " + s);
    }
  }

  /** A segment's copies that did not fail it (all of them if every one did). */
  static List<String> usable(Segment s) {
    List<String> ok = othersThan(s, null);
    return ok.isEmpty() ? s.copies : ok;
  }

  /**
   * A segment's copies other than {@code addr} that have not failed it (neither unreachable nor
   * refusing it for good); {@code addr} null: all of them that have not.
   */
  static List<String> othersThan(Segment s, String addr) {
    List<String> ok = new ArrayList<>();
    for (String c : s.copies) {
      if (!c.equals(addr) && !s.unreachable.contains(c) && !s.refusedBy.contains(c)) {
        ok.add(c);
      }
    }
    return ok;
  }

  /** Where a request of {@code s} may go: its usable copies, less those the read left. */
  final List<String> candidatesOf(Segment s) {
    return notLeft(usable(s));
  }

  /** {@code copies} less those the read moved away from, unless that leaves none. */
  private List<String> notLeft(List<String> copies) {
    if (left.isEmpty()) {
      return copies;
    }
    List<String> rest = new ArrayList<>(copies);
    rest.removeAll(left);
    return rest.isEmpty() ? copies : rest;
  }

  /** Whatever of {@code s}'s request the monitor still counts in flight arrived (or never will). */
  final void arrivedAll(String source, Segment s) {
    monitor.arrived(source, s.monitorInFlight);
    s.monitorInFlight = 0;
  }

  @Override
  public final void received(SourceStream src, Segment s, long bytes) {
    long a = Math.min(bytes, s.monitorInFlight);
    monitor.arrived(src.addr, a);
    s.monitorInFlight -= a;
    s.retries = 0;
    s.refusals = 0;
    s.staleRetried = false;
    s.bufferedBytes += bytes;
    buffered += bytes;
    peakBuffered = Math.max(peakBuffered, buffered);
    lock.notifyAll();
  }

  @Override
  public final boolean admit(SourceStream src, long bytes) {
    if (!roomFor(src, bytes)) {
      admissionWaits = true;
      return false;
    }
    arriving += bytes;
    return true;
  }

  @Override
  public final void arrived(long bytes) {
    arriving -= bytes;
    wakeAdmission();
  }

  /**
   * Whether a frame body of {@code bytes} on {@code src} may be read now (see {@link
   * SourceStream.Events#admit}); every frame by default.
   */
  boolean roomFor(SourceStream src, long bytes) {
    return true;
  }

  /** Wakes the connections waiting for room, if any: something was consumed or let go. */
  final void wakeAdmission() {
    if (admissionWaits) {
      admissionWaits = false;
      lock.notifyAll();
    }
  }

  @Override
  public final void ended(SourceStream src, Segment s) {
    arrivedAll(src.addr, s);
    afterEnd(s);
    sendHeld(src.addr);
    lock.notifyAll();
  }

  /** Called when a request of {@code s} was answered to its end. */
  void afterEnd(Segment s) {}

  @Override
  public final void refused(SourceStream src, Segment s, CrossdockException e) {
    arrivedAll(src.addr, s);
    failed(s, src.addr, e, false);
    sendHeld(src.addr);
    lock.notifyAll();
  }

  @Override
  public final void failedLocally(CrossdockException e) {
    if (localFailure == null) {
      localFailure = e;
    }
    lock.notifyAll();
  }

  /**
   * Throws the read's LOCAL failure, if a connection's thread met one, as the task's own: an
   * {@link Error} as it is (the engine's policy for it applies, e.g. Spark ending the executor on
   * a JVM out of memory), anything else as the task's I/O error. Call with the lock held.
   */
  final void throwIfFailedLocally() throws CrossdockException {
    if (localFailure != null) {
      CrossdockException.throwIfLocalError(localFailure);
      throw localFailure;
    }
  }

  @Override
  public final void broken(SourceStream src, List<Segment> unanswered, CrossdockException e) {
    streams.remove(src.addr, src);
    // Taken out first: a request retried on this copy below joins the queue anew.
    java.util.ArrayDeque<Segment> waiting = held.remove(src.addr);
    if (CrossdockException.isLocal(e)) {
      // The read ends with it (its next call throws it): nothing is asked again.
      for (Segment s : unanswered) {
        arrivedAll(src.addr, s);
      }
      failedLocally(e);
      return;
    }
    for (int i = 0; i < unanswered.size(); i++) {
      Segment s = unanswered.get(i);
      arrivedAll(src.addr, s);
      // Only the request being answered can have caused a corrupt or malformed stream.
      CrossdockException why = i == 0 || e.isTransport()
          ? e
          : CrossdockException.transport(src.addr, "connection closed after another fetch failed", e);
      failed(s, src.addr, why, !src.everConnected());
    }
    if (waiting != null && !src.everConnected()) {
      // The worker could not be reached: what waited for it fails over now, not one
      // connection attempt (and its timeout) per batch of requests.
      for (Segment s : waiting) {
        arrivedAll(src.addr, s);
        failed(s, src.addr, e, true);
      }
    } else if (waiting != null) {
      // What was retried above went out on the new connection: a connection never has more
      // than maxOutstanding unanswered, so it all fit, and these follow it.
      held.put(src.addr, waiting);
    }
    sendHeld(src.addr); // on a new connection
    lock.notifyAll();
  }

  /**
   * A copy failed a request of {@code s}: ask it again (a broken connection, retries left), or
   * another copy (when one may serve), or give up on the segment (its {@code failure} is set).
   * A copy that could not even be connected to is not retried while another exists: each
   * attempt would wait for the connect timeout.
   */
  final void failed(Segment s, String addr, CrossdockException e, boolean neverConnected) {
    boolean free = s.freeRetry;
    s.freeRetry = false;
    if (closed || !reading(s)) {
      return;
    }
    List<String> others = othersThan(s, addr);
    boolean giveUpCopy = neverConnected && !others.isEmpty();
    if (e.isTransport() && (free || s.retries < maxRetries) && !giveUpCopy) {
      if (!free) {
        s.retries++;
      }
      send(s, addr);
      return;
    }
    if (e.isTransport()) {
      if (!s.unreachable.contains(addr)) {
        s.unreachable.add(addr);
      }
    } else if ((lasting(e) || ++s.refusals > maxRetries) && !s.refusedBy.contains(addr)) {
      s.refusedBy.add(addr);
    }
    if (!others.isEmpty() && anotherCopyMayServe(e)) {
      s.retries = 0;
      s.staleRetried = false; // another copy, another connection
      send(s, monitor.choose(notLeft(others), local));
      return;
    }
    s.source = null;
    s.failure = e;
  }

  /** Whether a failure of one copy may be cured by reading another. */
  static boolean anotherCopyMayServe(CrossdockException e) {
    if (e.kind() != CrossdockException.Kind.REMOTE) {
      return true; // unreachable, broken stream, corrupt batch
    }
    ErrorCode c = e.code();
    return c == ErrorCode.CORRUPT_DATA || c == ErrorCode.DATA_LOST || c == ErrorCode.UNKNOWN_APP
        || c == ErrorCode.UNKNOWN_SHUFFLE || c == ErrorCode.UNKNOWN_PARTITION
        || c == ErrorCode.IO || c == ErrorCode.INTERNAL || c == ErrorCode.SHUTTING_DOWN
        || c == ErrorCode.LIMIT_EXCEEDED;
  }

  /**
   * Whether a copy's failure of a segment will not clear up by itself: its data is lost or
   * corrupt, it does not hold the segment, or it sent what failed the client's checks. A
   * refusal that may clear (limits, I/O, shutting down) is not.
   */
  static boolean lasting(CrossdockException e) {
    if (e.kind() != CrossdockException.Kind.REMOTE) {
      return true;
    }
    ErrorCode c = e.code();
    return c == ErrorCode.CORRUPT_DATA || c == ErrorCode.DATA_LOST || c == ErrorCode.UNKNOWN_APP
        || c == ErrorCode.UNKNOWN_SHUFFLE || c == ErrorCode.UNKNOWN_PARTITION;
  }

  /**
   * The escape from a slow copy. The monitor's score steers new requests away from a source
   * that answers slowly, but a request already written stays where it went, and a worker answers
   * a connection's requests in order. So a reader blocked on {@code s} since {@code waitStart}
   * ({@link System#nanoTime}), and on its current copy since its request went there, more than
   * {@code moveAwayMs} and four times what its best other copy has lately been taking,
   * drops its connection to the slow copy (the worker stops sending), and everything unanswered
   * or kept back there is asked again, from where it stopped, of the best of its other copies
   * (of the slow one only if it has no other). That wait is charged to the slow copy, so it
   * scores worse, and not to the copy that serves {@code s} next; for the rest of the read,
   * requests go to the slow copy only when no other can serve ({@link #left}). Returns whether
   * it moved.
   */
  final boolean maybeMoveAway(Segment s, long waitStart, long moveAwayMs) {
    String slow = s.source;
    if (slow == null) {
      return false;
    }
    long waitedNanos = System.nanoTime() - Math.max(waitStart, s.sentNanos);
    List<String> others = othersThan(s, slow);
    if (others.isEmpty()) {
      return false;
    }
    double waitedMs = waitedNanos / 1e6;
    String better = monitor.choose(notLeft(others), local);
    if (waitedMs < moveAwayMs || waitedMs < 4 * monitor.avgWaitMs(better)) {
      return false;
    }
    SourceStream st = streams.remove(slow);
    java.util.ArrayDeque<Segment> waiting = held.remove(slow);
    if (st == null && waiting == null) {
      return false;
    }
    monitor.waited(slow, (long) waitedMs);
    s.waitChargedNanos += waitedNanos; // not charged again to the copy it is read from next
    List<Segment> moved = new ArrayList<>();
    if (st != null) {
      st.close();
      moved.addAll(st.drainPending()); // in request order, then what waited its turn
    }
    if (waiting != null) {
      moved.addAll(waiting);
    }
    if (moved.remove(s)) {
      moved.add(0, s); // what the reader is blocked on is sent first of the moved requests
    }
    left.add(slow);
    for (Segment m : moved) {
      arrivedAll(slow, m);
      send(m, monitor.choose(candidatesOf(m), local));
    }
    moves++;
    wakeAdmission(); // the segment the task waits for may now be behind a waiting connection
    return true;
  }

  /**
   * Ends the read's use of its connections: those with nothing unanswered go back to the
   * executor's idle ones, the others are closed, settling what the monitor counted for their
   * unanswered requests.
   */
  final void closeStreams() {
    for (Map.Entry<String, java.util.ArrayDeque<Segment>> e : held.entrySet()) {
      for (Segment s : e.getValue()) {
        arrivedAll(e.getKey(), s);
      }
    }
    held.clear();
    for (SourceStream st : streams.values()) {
      if (st.release()) {
        continue;
      }
      st.close();
      for (Segment s : st.drainPending()) {
        arrivedAll(st.addr, s);
      }
    }
    streams.clear();
  }
}
