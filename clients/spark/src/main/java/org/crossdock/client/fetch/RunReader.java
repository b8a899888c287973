package org.crossdock.client.fetch;

import java.io.Closeable;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import org.crossdock.client.CrossdockException;
import org.crossdock.protocol.Message;

/**
 * Reads many sorted runs at once, each a little at a time: the fetching half of a merge
 * (Hadoop-A's network-levitated merge, Wang et al., chapter 3).
 *
 * <p>Every run is one map's output for one partition, a {@link Segment} of one map with a
 * {@link Segment#runBytes} cap. {@link #start} asks for the head of every run at once, pipelined
 * on one connection per worker (the paper's header-first fetch); the merge then takes batches of
 * whichever run holds the smallest key ({@link #next}). When a run's last buffered batch is
 * handed out and the run has more, its next segment is asked for right away, so it arrives
 * while that batch is merged: a run holds at most two segments, and the reader at most
 * {@code runs × 2 × runBytes} (plus one batch per run where a batch is larger than the cap).
 * Nothing is written to disk and each batch is handed out once.
 *
 * <p>Failures are handled as {@link FetchScheduler} does: a broken connection is retried on the
 * same copy, a copy that cannot serve is left for the other one (a run resumes after its last
 * batch, which both copies hold under the same ids), and a run no copy can serve comes out of
 * {@link #next} as {@link FetchScheduler.SegmentFailed}, to be given back with fresh copies by
 * {@link #retry}.
 */
public final class RunReader implements Closeable, SourceStream.Events {
  /** Fixed settings of a read ({@code appToken}: empty without authentication). */
  public record Settings(
      String appId,
      byte[] appToken,
      int shuffleId,
      int connectTimeoutMs,
      int readTimeoutMs,
      int maxRetries) {}

  private final Object lock = new Object();
  private final Settings settings;
  private final List<Segment> runs;
  private final FetchMonitor monitor;
  private final FetchMemory memory;
  private final Predicate<String> local;
  private final Map<String, SourceStream> streams = new HashMap<>();
  private long buffered;
  private long peakBuffered;
  private long waitNanos;
  private long requests;
  private boolean started;
  private boolean closed;

  public RunReader(Settings settings, List<Segment> runs, FetchMonitor monitor, FetchMemory memory,
      Predicate<String> local) {
    for (Segment s : runs) {
      if (s.runBytes <= 0) {
        throw new IllegalArgumentException(s + " is not a capped run");
      }
    }
    this.settings = settings;
    this.runs = List.copyOf(runs);
    this.monitor = monitor;
    this.memory = memory;
    this.local = local;
  }

  /** Asks for the head segment of every run. */
  public void start() {
    synchronized (lock) {
      if (started) {
        return;
      }
      started = true;
      for (Segment s : runs) {
        issue(s);
      }
    }
  }

  /**
   * The next batch of {@code run}, or null once the run was read to its end. Blocks until it is
   * there; the time blocked is the task's fetch wait.
   */
  public FetchScheduler.Delivery next(Segment run) throws IOException {
    synchronized (lock) {
      start();
      long waitStart = 0;
      while (true) {
        if (closed) {
          throw new IOException("the read was closed");
        }
        Message.FetchedBatch b = run.ready.poll();
        if (b != null) {
          if (waitStart != 0) {
            long waited = System.nanoTime() - waitStart;
            waitNanos += waited;
            if (run.source != null) {
              monitor.waited(run.source, waited / 1_000_000);
            }
          }
          consume(run, b);
          if (run.ready.isEmpty() && run.done && !run.readToEnd()) {
            issue(run); // prefetch: the next segment comes while this batch is merged
          }
          return new FetchScheduler.Delivery(run, b, run.source);
        }
        if (run.done) {
          if (run.readToEnd()) {
            release(run);
            return null;
          }
          issue(run);
        }
        if (run.failure != null) {
          CrossdockException e = run.failure;
          release(run);
          throw new FetchScheduler.SegmentFailed(run, e);
        }
        if (waitStart == 0) {
          waitStart = System.nanoTime();
        }
        try {
          lock.wait(25);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new InterruptedIOException("interrupted while fetching " + run);
        }
      }
    }
  }

  /** Takes back a run {@link #next} gave up on, to be read on from {@code copies}. */
  public void retry(Segment run, List<String> copies) {
    synchronized (lock) {
      run.copies = List.copyOf(copies);
      run.failure = null;
      run.retries = 0;
      run.unreachable.clear();
      issue(run);
      lock.notifyAll();
    }
  }

  /** Nanoseconds the task spent blocked in {@link #next} so far. */
  public long waitNanos() {
    synchronized (lock) {
      return waitNanos;
    }
  }

  /** The most payload bytes received and not yet handed out at once. */
  public long peakBufferedBytes() {
    synchronized (lock) {
      return peakBuffered;
    }
  }

  /** Fetch requests sent so far (heads, next segments and retries). */
  public long requests() {
    synchronized (lock) {
      return requests;
    }
  }

  private void consume(Segment s, Message.FetchedBatch b) {
    long n = b.payload().remaining();
    s.bufferedBytes -= n;
    buffered -= n;
    long give = Math.min(n, s.reserved);
    s.reserved -= give;
    memory.release(give);
  }

  private void release(Segment s) {
    memory.release(s.reserved);
    s.reserved = 0;
  }

  /** Asks the best copy for the run's next segment, holding memory for it. */
  private void issue(Segment s) {
    if (s.reserved < s.runBytes) {
      // The heads must all be there for the merge to start, so a smaller grant is taken as
      // it is; the cap was sized so that the runs fit the task's budget.
      s.reserved += memory.acquire(s.runBytes - s.reserved);
    }
    send(s, monitor.choose(usable(s), local));
  }

  private void send(Segment s, String source) {
    s.source = source;
    s.done = false;
    s.batchesInStream = 0;
    s.receivedAtRequest = s.received;
    s.monitorInFlight = s.runBytes;
    monitor.requested(source, s.monitorInFlight);
    requests++;
    SourceStream st = streams.get(source);
    if (st == null || st.isClosed()) {
      st = new SourceStream(source, settings.appId(), settings.appToken(), settings.shuffleId(),
          lock, this, settings.connectTimeoutMs(), settings.readTimeoutMs());
      streams.put(source, st);
    }
    st.send(s);
  }

  /** A run's copies that did not fail it (all of them if every one did). */
  private static List<String> usable(Segment s) {
    Set<String> ok = new LinkedHashSet<>(s.copies);
    ok.removeAll(s.unreachable);
    return ok.isEmpty() ? s.copies : List.copyOf(ok);
  }

  private void arrivedAll(String source, Segment s) {
    monitor.arrived(source, s.monitorInFlight);
    s.monitorInFlight = 0;
  }

  @Override
  public void received(SourceStream src, Segment s, long bytes) {
    long a = Math.min(bytes, s.monitorInFlight);
    monitor.arrived(src.addr, a);
    s.monitorInFlight -= a;
    s.retries = 0;
    s.bufferedBytes += bytes;
    buffered += bytes;
    peakBuffered = Math.max(peakBuffered, buffered);
    lock.notifyAll();
  }

  @Override
  public void ended(SourceStream src, Segment s) {
    arrivedAll(src.addr, s);
    lock.notifyAll();
  }

  @Override
  public void refused(SourceStream src, Segment s, CrossdockException e) {
    arrivedAll(src.addr, s);
    failed(s, src.addr, e, false);
    lock.notifyAll();
  }

  @Override
  public void broken(SourceStream src, List<Segment> unanswered, CrossdockException e) {
    streams.remove(src.addr, src);
    for (int i = 0; i < unanswered.size(); i++) {
      Segment s = unanswered.get(i);
      arrivedAll(src.addr, s);
      CrossdockException why = i == 0 || e.isTransport()
          ? e
          : CrossdockException.transport(src.addr, "connection closed after another fetch failed", e);
      failed(s, src.addr, why, !src.everConnected());
    }
    lock.notifyAll();
  }

  /**
   * A copy failed a run's request: ask it again (a broken connection, retries left), or another
   * copy (when one may serve), or give up on the run ({@link #next} throws).
   */
  private void failed(Segment s, String addr, CrossdockException e, boolean neverConnected) {
    if (closed) {
      return;
    }
    List<String> others = new ArrayList<>(s.copies);
    others.remove(addr);
    others.removeAll(s.unreachable);
    boolean giveUpCopy = neverConnected && !others.isEmpty();
    if (e.isTransport() && s.retries < settings.maxRetries() && !giveUpCopy) {
      s.retries++;
      send(s, addr);
      return;
    }
    if (e.isTransport() && !s.unreachable.contains(addr)) {
      s.unreachable.add(addr);
    }
    if (!others.isEmpty() && FetchScheduler.anotherCopyMayServe(e)) {
      s.retries = 0;
      send(s, monitor.choose(others, local));
      return;
    }
    s.source = null;
    s.failure = e;
  }

  /** Stops every connection and gives back all memory held. */
  @Override
  public void close() {
    synchronized (lock) {
      if (closed) {
        return;
      }
      closed = true;
      for (SourceStream st : streams.values()) {
        st.close();
        for (Segment s : st.drainPending()) {
          arrivedAll(st.addr, s);
        }
      }
      streams.clear();
      for (Segment s : runs) {
        release(s);
      }
      lock.notifyAll();
    }
  }
}
