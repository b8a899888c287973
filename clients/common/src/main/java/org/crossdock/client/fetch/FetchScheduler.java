package org.crossdock.client.fetch;

import java.io.Closeable;
import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;
import org.crossdock.client.CrossdockException;
import org.crossdock.protocol.Message;

/**
 * One reduce task's read: its {@link Segment}s fetched ahead of the task, under an in-flight
 * limit, and handed over batch by batch.
 *
 * <p>With {@link Policy#ADAPTIVE} (Nicolae et al., TPDS 2017, section 4): whenever an increment
 * fits under the task's {@link ElasticLimit}, the executor's {@link FetchMonitor} picks the best
 * source among the copies of the segments still to ask for, and the next segments that source
 * holds are packed into one go until they make an increment; every request to a worker shares one
 * pipelined connection ({@link SourceStream}). The limit grows and shrinks with the task's waits,
 * learned per request; a read starts from a record an earlier read of the executor gave back
 * and gives its own back when it ends ({@link FetchMonitor#take}), so the limit carries over
 * from task to task while concurrent tasks each keep their own.
 * A task blocked on a copy much longer than the other copy of the same partition has been taking
 * lately moves away from it: the connection is dropped and its unanswered segments are asked
 * again, from where they stopped, of the better copies, and the read's later requests go to the
 * slow copy only when no other can serve them.
 *
 * <p>With {@link Policy#STATIC}, Spark's own shape: segments of at most a fifth of the limit, in
 * random order, asked of their primary whenever the next fits under the fixed limit (the
 * baseline the paper compares against).
 *
 * <p>The task consumes one segment at a time, each to its end (a segment is whole maps, and a
 * map's batches form one stream); it starts with whichever asked segment has data first.
 * Failures of a copy are handled here (retry the same copy after a broken connection, move to the
 * other copy for a corrupt or missing one); a segment no copy can serve comes out of {@link
 * #next} as {@link SegmentFailed}, and {@link #retry} takes it back with fresh copies.
 */
public final class FetchScheduler extends CopyReads implements Closeable {
  /** How requests are planned. */
  public enum Policy {
    ADAPTIVE,
    STATIC
  }

  /** Fixed settings of a read. */
  /** {@code appToken}: the app's token (empty without authentication). */
  public record Settings(
      String appId,
      byte[] appToken,
      int shuffleId,
      Policy policy,
      long hardLimit,
      long increment,
      int connectTimeoutMs,
      int readTimeoutMs,
      int maxRetries,
      long moveAwayMs) {}

  /** A batch and what it belongs to. */
  public record Delivery(Segment segment, Message.FetchedBatch batch, String source) {}

  /** A segment no copy could serve (after retries and failover). */
  public static final class SegmentFailed extends IOException {
    private static final long serialVersionUID = 1L;
    public final transient Segment segment;

    SegmentFailed(Segment segment, CrossdockException cause) {
      super("cannot read " + segment + ": " + cause.getMessage(), cause);
      this.segment = segment;
    }

    /** Copies that could not be reached (to report to the coordinator). */
    public List<String> unreachable() {
      return List.copyOf(segment.unreachable);
    }
  }

  /** Requests read in a row without a wait after which the adaptive limit shrinks. */
  static final int QUIET_REQUESTS = 8;

  /** Requests in a row that waited, the last above the average, after which the limit grows. */
  static final int WAITS_TO_GROW = 2;

  private final Settings settings;
  private final FetchMemory memory;
  private final ElasticLimit limit;
  /** The in-flight limit the read started from. */
  private final long startingLimit;
  /**
   * Whether the read took a record of what earlier reads learned and gives one back: an adaptive
   * read with something to read (an empty one would only hide a record from concurrent reads and
   * put an unchanged one back on top).
   */
  private final boolean learns;
  /** Not asked for yet, in order. */
  private final ArrayDeque<Segment> queue;
  /** Asked for and not consumed, in the order they were first asked for. */
  private final List<Segment> issued = new ArrayList<>();
  private Segment current;
  /** Bytes held for issued segments (what the limit bounds). */
  private long inFlight;

  public FetchScheduler(Settings settings, List<Segment> plan, FetchMonitor monitor,
      FetchMemory memory, Predicate<String> local) {
    super(settings.appId(), settings.appToken(), settings.shuffleId(), settings.connectTimeoutMs(),
        settings.readTimeoutMs(), settings.maxRetries(), monitor, local);
    this.settings = settings;
    this.memory = memory;
    this.learns = settings.policy() == Policy.ADAPTIVE && !plan.isEmpty();
    if (settings.policy() == Policy.ADAPTIVE) {
      this.limit = adaptiveLimit(settings.hardLimit(), settings.increment(),
          learns ? monitor.take() : null);
    } else {
      this.limit = new ElasticLimit(settings.hardLimit(), settings.increment(), ElasticLimit.ALPHA);
    }
    this.startingLimit = limit.soft();
    this.queue = new ArrayDeque<>(plan);
  }

  /**
   * An adaptive read's limit: between two increments (one consumed while the next arrives) and
   * the hard limit, starting where an earlier read of the executor left it ({@code from}: a task
   * reads too few requests to learn its own), else low; its first request's wait (connecting)
   * left out.
   */
  static ElasticLimit adaptiveLimit(long hard, long increment, FetchMonitor.Learned from) {
    long two = 2 * increment;
    ElasticLimit l = new ElasticLimit(hard, increment, ElasticLimit.ALPHA).withFloor(two)
        .startingAt(two).shrinkingAfterQuiet(QUIET_REQUESTS).growingAfterWaits(WAITS_TO_GROW)
        .skippingFirstWait();
    if (from != null) {
      l.startingAt(from.soft()).withQuietRun(from.quietRun()).withWaitRun(from.waitRun());
      if (from.avgWaitNanos() >= 0) {
        l.withAverage(from.avgWaitNanos());
      }
    }
    return l;
  }

  /** Times this read's in-flight limit grew by an increment (0 for the static policy). */
  public long limitGrown() {
    synchronized (lock) {
      return limit.grown();
    }
  }

  /** Times this read's in-flight limit shrank by an increment (0 for the static policy). */
  public long limitShrunk() {
    synchronized (lock) {
      return limit.shrunk();
    }
  }

  /**
   * The in-flight limit the read started from: for an adaptive read where an earlier read of the
   * executor left it, or the floor; for a static read the fixed limit.
   */
  public long startingLimit() {
    return startingLimit;
  }

  /** The in-flight limit now. */
  public long softLimit() {
    synchronized (lock) {
      return limit.soft();
    }
  }

  /**
   * The next batch, or null once every segment was read. Blocks until one is there; the time
   * blocked is the task's fetch wait.
   */
  public Delivery next() throws IOException {
    synchronized (lock) {
      long waitStart = 0;
      while (true) {
        if (closed) {
          throw new IOException("the read was closed");
        }
        throwIfFailedLocally();
        refill();
        if (current == null || (!current.started && current.ready.isEmpty())) {
          Segment was = current;
          current = pick();
          if (current != was) {
            wakeAdmission(); // who is let in depends on the current segment
          }
          if (current == null) {
            return null;
          }
        }
        Segment s = current;
        Message.FetchedBatch b = s.ready.poll();
        if (b != null) {
          long waited = waitStart == 0 ? 0 : System.nanoTime() - waitStart;
          return consume(s, b, waited);
        }
        if (s.done) {
          // A wait that ended with the segment's end is that segment's: the next one is
          // judged and charged from its own.
          endWait(s, waitStart);
          waitStart = 0;
          finish(s);
          continue;
        }
        if (s.failure != null) {
          endWait(s, waitStart);
          issued.remove(s);
          current = null;
          release(s);
          throw new SegmentFailed(s, s.failure);
        }
        if (waitStart == 0) {
          waitStart = System.nanoTime();
        }
        if (settings.policy() == Policy.ADAPTIVE) {
          maybeMoveAway(s, waitStart, settings.moveAwayMs());
        }
        pause(s);
      }
    }
  }

  /** Counts a wait on {@code s} that ended without a batch ({@code waitStart} 0: none began). */
  private void endWait(Segment s, long waitStart) {
    if (waitStart != 0) {
      long waited = System.nanoTime() - waitStart;
      waitNanos += waited;
      s.waitedNanos += waited;
    }
  }

  /**
   * Takes back a segment {@link #next} gave up on, to be read again from {@code copies} after
   * its last delivered batch.
   */
  public void retry(Segment s, List<String> copies) {
    synchronized (lock) {
      s.takeBack(copies);
      s.source = null;
      queue.addFirst(s);
      lock.notifyAll();
    }
  }

  /** The segment to consume next: the first asked for with data (or an end), else the first. */
  private Segment pick() {
    for (Segment s : issued) {
      if (!s.ready.isEmpty() || s.done || s.failure != null) {
        return s;
      }
    }
    return issued.isEmpty() ? null : issued.get(0);
  }

  private Delivery consume(Segment s, Message.FetchedBatch b, long waitedNanos) {
    s.started = true;
    long n = b.payload().remaining();
    s.bufferedBytes -= n;
    buffered -= n;
    long give = Math.min(n, s.reserved);
    s.reserved -= give;
    inFlight -= give;
    memory.release(give);
    wakeAdmission();
    waitNanos += waitedNanos;
    s.waitedNanos += waitedNanos;
    return new Delivery(s, b, s.source);
  }

  /**
   * A segment read to its end: its memory goes back, and its wait (the time the task was blocked
   * on it, over all its batches) is what the monitor and the elastic limit learn from. Learning
   * per request, as the paper does per block, and not per batch: within a request every batch
   * after the first is usually there already, and counting those zeros would shrink the limit
   * after every wait and keep it at its floor.
   */
  private void finish(Segment s) {
    issued.remove(s);
    release(s);
    if (s.source != null) {
      monitor.waited(s.source, Math.max(0, s.waitedNanos - s.waitChargedNanos) / 1_000_000);
      s.waitChargedNanos = 0;
    }
    if (settings.policy() == Policy.ADAPTIVE) {
      limit.consumed(s.waitedNanos);
    }
    if (current == s) {
      current = null;
    }
    wakeAdmission();
  }

  private void release(Segment s) {
    inFlight -= s.reserved;
    memory.release(s.reserved);
    s.reserved = 0;
  }

  /**
   * Room for a frame body of {@code bytes} on {@code src}: what the read holds (batches not yet
   * consumed and bodies being read) stays under the hard limit, even when one segment is larger
   * than the limit (one map's output of a large shuffle), which the request plan alone cannot
   * bound. Other segments' frames take at most half of it while the task consumes a segment that
   * has more to come, so that segment keeps reading ahead instead of getting one frame per
   * frame consumed. A read holding nothing takes any frame, and the frames the task waits for
   * are always read: it consumes one segment at a time, so when it has nothing of its current
   * segment, holding that segment's frames (or those ahead of them on its connection) back
   * behind other segments' batches would never end.
   */
  @Override
  boolean roomFor(SourceStream src, long bytes) {
    long held = buffered + arriving;
    if (held == 0) {
      return true;
    }
    long hard = settings.hardLimit();
    Segment c = current;
    if (c == null || c.done || c.failure != null) {
      return held + bytes <= hard;
    }
    if (src.isPending(c)) {
      return c.bufferedBytes == 0 || held + bytes <= hard;
    }
    return held + bytes <= hard && held - c.bufferedBytes + bytes <= hard / 2;
  }

  /** Bytes of a segment not yet received (what asking for it adds in flight). */
  private static long remaining(Segment s) {
    return Math.max(1, s.estimate - s.received);
  }

  /** Asks for segments while the limit has room. Called with the lock held. */
  private void refill() {
    if (settings.policy() == Policy.STATIC) {
      while (!queue.isEmpty()) {
        Segment s = queue.peek();
        if (inFlight > 0 && inFlight + remaining(s) > limit.hard()) {
          return;
        }
        if (!issue(s, s.copies.get(0))) {
          return;
        }
        queue.poll();
      }
      return;
    }
    long inc = limit.increment();
    while (!queue.isEmpty() && (inFlight == 0 || inFlight + inc <= limit.soft())) {
      String src = monitor.choose(candidates(), local);
      long packed = 0;
      boolean any = false;
      for (Segment s : List.copyOf(queue)) {
        if (!candidatesOf(s).contains(src)) {
          continue;
        }
        if (any && (packed >= inc || inFlight + remaining(s) > limit.soft())) {
          break;
        }
        if (!issue(s, src)) {
          return;
        }
        queue.remove(s);
        packed += remaining(s);
        any = true;
      }
      if (!any) {
        return;
      }
    }
  }

  /** Sources of the segments still to ask for, in queue order. */
  private List<String> candidates() {
    Set<String> out = new LinkedHashSet<>();
    for (Segment s : queue) {
      out.addAll(candidatesOf(s));
    }
    return List.copyOf(out);
  }

  /**
   * Asks {@code source} for what is left of {@code s}, holding memory for it. False if memory
   * could not be had while other segments are in flight (it waits for them).
   */
  private boolean issue(Segment s, String source) {
    long want = remaining(s);
    if (s.reserved < want) {
      long got = memory.acquire(want - s.reserved);
      if (got < want - s.reserved && inFlight > 0) {
        memory.release(got);
        limit.squeeze(inFlight);
        return false;
      }
      s.reserved += got;
      inFlight += got;
    }
    send(s, source);
    if (!issued.contains(s)) {
      issued.add(s);
    }
    return true;
  }

  @Override
  long expected(Segment s) {
    return remaining(s);
  }

  @Override
  boolean reading(Segment s) {
    return issued.contains(s);
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
      if (learns) {
        // However the read ended: what it learned of its requests' waits still holds.
        monitor.giveBack(FetchMonitor.Learned.of(limit));
      }
      for (Segment s : issued) {
        release(s);
      }
      issued.clear();
      queue.clear();
      lock.notifyAll();
    }
  }
}
