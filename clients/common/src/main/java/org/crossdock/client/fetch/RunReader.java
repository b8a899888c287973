package org.crossdock.client.fetch;

import java.io.Closeable;
import java.io.IOException;
import java.util.List;
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
 * whichever run holds the smallest key ({@link #next}). Whenever a run's last request ended and
 * less than a segment of it is buffered, its next segment is asked for ({@link #prefetch}), so
 * it arrives while the one before is merged: a run holds at most two segments, and the reader
 * at most {@code runs × 2 × runBytes} (plus one batch per run where a batch is larger than the
 * cap).
 * Nothing is written to disk and each batch is handed out once.
 *
 * <p>Failures of a copy are handled as for every read ({@link CopyReads}); a run no copy can
 * serve comes out of {@link #next} as {@link FetchScheduler.SegmentFailed}, to be given back
 * with fresh copies by {@link #retry}. A slow copy is left as the adaptive reader leaves it
 * ({@link CopyReads#maybeMoveAway}): the merge cannot go on without the run it waits for, and
 * the heads of many runs sit on one connection behind each other, so one slow copy would
 * otherwise hold the whole merge for as long as its link takes to send them.
 */
public final class RunReader extends CopyReads implements Closeable {
  /**
   * Fixed settings of a read ({@code appToken}: empty without authentication; {@code
   * moveAwayMs}: how long the merge is blocked on a run, and at least four times what another
   * copy of it has lately been taking, before the read leaves the run's copy).
   */
  public record Settings(
      String appId,
      byte[] appToken,
      int shuffleId,
      int connectTimeoutMs,
      int readTimeoutMs,
      int maxRetries,
      long moveAwayMs) {}

  /** Requests written and unanswered on one connection at most (the rest wait their turn). */
  public static final int MAX_OUTSTANDING = 128;

  private final List<Segment> runs;
  private final FetchMemory memory;
  private final long moveAwayMs;
  private boolean started;

  public RunReader(Settings settings, List<Segment> runs, FetchMonitor monitor, FetchMemory memory,
      Predicate<String> local) {
    super(settings.appId(), settings.appToken(), settings.shuffleId(), settings.connectTimeoutMs(),
        settings.readTimeoutMs(), settings.maxRetries(), monitor, local);
    for (Segment s : runs) {
      if (s.runBytes <= 0) {
        throw new IllegalArgumentException(s + " is not a capped run");
      }
    }
    this.runs = List.copyOf(runs);
    this.memory = memory;
    this.moveAwayMs = settings.moveAwayMs();
    this.maxOutstanding = MAX_OUTSTANDING;
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
      run.waitChargedNanos = 0; // a run's waits are counted per call
      while (true) {
        if (closed) {
          throw new IOException("the read was closed");
        }
        throwIfFailedLocally();
        Message.FetchedBatch b = run.ready.poll();
        if (b != null) {
          if (waitStart != 0) {
            long waited = System.nanoTime() - waitStart;
            waitNanos += waited;
            if (run.source != null) {
              monitor.waited(run.source, Math.max(0, waited - run.waitChargedNanos) / 1_000_000);
            }
          }
          consume(run, b);
          String source = run.source; // the copy this batch came from, before a prefetch moves
          prefetch(run);
          return new FetchScheduler.Delivery(run, b, source);
        }
        if (run.done) {
          if (run.readToEnd()) {
            waited(waitStart);
            release(run);
            return null;
          }
          issue(run);
        }
        if (run.failure != null) {
          waited(waitStart);
          CrossdockException e = run.failure;
          release(run);
          throw new FetchScheduler.SegmentFailed(run, e);
        }
        if (waitStart == 0) {
          waitStart = System.nanoTime();
        }
        maybeMoveAway(run, waitStart, moveAwayMs);
        pause(run);
      }
    }
  }

  /**
   * Asks for the run's next segment as soon as its last request ended and less than a segment
   * is buffered: a run keeps up to two segments, one being merged while the next arrives, so
   * the merge waits for a round trip only when it drains a run faster than the network fills it.
   */
  private void prefetch(Segment run) {
    if (run.done && !run.readToEnd() && run.failure == null && run.bufferedBytes < run.runBytes
        && !closed) {
      issue(run);
    }
  }

  @Override
  void afterEnd(Segment s) {
    if (started && s.reserved > 0) {
      prefetch(s); // from a connection's thread: memory was taken by the task's thread
    }
  }

  /** Counts a wait that ended without a batch (the run's end or its failure) as fetch wait. */
  private void waited(long waitStart) {
    if (waitStart != 0) {
      waitNanos += System.nanoTime() - waitStart;
    }
  }

  /** Takes back a run {@link #next} gave up on, to be read on from {@code copies}. */
  public void retry(Segment run, List<String> copies) {
    synchronized (lock) {
      run.takeBack(copies);
      issue(run);
      lock.notifyAll();
    }
  }

  private void consume(Segment s, Message.FetchedBatch b) {
    long n = b.payload().remaining();
    s.bufferedBytes -= n;
    buffered -= n;
  }

  private void release(Segment s) {
    memory.release(s.reserved);
    s.reserved = 0;
  }

  /**
   * Asks the best copy for the run's next segment. The first call, in the task's thread, takes
   * the run's memory for its whole read: two segments, held until the run ends (a smaller grant
   * is taken as it is: the heads must all be there for the merge to start, and the cap was sized
   * so that the runs fit the task's budget). Later requests, also those sent from a connection's
   * thread when a segment arrives, need no more.
   */
  private void issue(Segment s) {
    if (s.reserved == 0) {
      // Two segments, or what the run holds if less (its estimate, plus one segment for a
      // batch that passes the cap).
      s.reserved = memory.acquire(Math.min(2 * s.runBytes, s.estimate + s.runBytes));
    }
    send(s, monitor.choose(candidatesOf(s), local));
  }

  @Override
  long expected(Segment s) {
    return s.runBytes;
  }

  @Override
  boolean reading(Segment s) {
    return true; // every run is read until the read closes
  }

  /** Stops every connection and gives back all memory held. */
  @Override
  public void close() {
    synchronized (lock) {
      if (closed) {
        return;
      }
      closed = true;
      closeStreams();
      for (Segment s : runs) {
        release(s);
      }
      lock.notifyAll();
    }
  }
}
