package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.MemoryMode;
import org.apache.spark.memory.TaskMemoryManager;

/**
 * The direct writer's per-partition buffers, and the frames it pushed that no worker has
 * acknowledged yet, as execution memory of the map task; for the sorting writer ({@link
 * CrossdockShuffleWriter}), its frames only (Spark's sorter holds its records itself, and gives
 * them back by spilling). Spark's memory manager then counts them
 * beside the task's other consumers (a SQL aggregate or sort in the same stage, a shuffle reader
 * feeding the writer), and a map task of a small executor pushes what it buffered when Spark
 * grants no more, instead of growing its buffers to {@code spark.crossdock.push.maxInFlight}
 * whatever the heap holds: where Spark's own writer would spill to local disk, this one pushes.
 *
 * <p>What is held is the buffers' capacity and the unacknowledged frames' lengths. A grant short
 * of a buffer's growth makes the writer push every buffer and ask again; one short of a frame
 * makes it wait until few frames are in flight uncounted ({@link
 * CrossdockConf#uncountedFrameBytes}, a sixty-fourth of the slot's heap at most, or the one frame
 * when it is larger) and ask again. What Spark still refuses then (at most the buffer of the
 * record being written, or those frames) is used without being counted, as a sorter's last
 * record must be.
 *
 * <p>When another consumer needs memory ({@link #spill}), the writer pushes its buffers without
 * waiting for room in the push window: Spark calls {@code spill} holding its memory manager's lock
 * (and the asking consumer may hold its own), so waiting there for a worker's acknowledgements
 * would stall the task's other threads. Those frames are counted as window, from what the buffers
 * held. A failure there is kept and thrown by the writer's next call ({@link #throwIfSpillFailed}),
 * where the task's own failure handling sees it; an {@link Error} a pusher's thread met (thrown
 * by {@link org.crossdock.client.MapPusher} as the task's own) leaves {@code spill} at once, into
 * Spark's memory manager and the task thread that asked it for memory.
 */
final class PushBufferMemory extends MemoryConsumer {
  /**
   * The most memory any one writer of this JVM has used at once (buffers' capacity plus frames
   * awaiting acknowledgement), and how many times Spark made a writer push for another consumer:
   * for tests.
   */
  private static final AtomicLong PEAK = new AtomicLong();
  private static final AtomicLong SPILLS = new AtomicLong();
  /** How many frames Spark granted no room to, and the most bytes in flight uncounted then. */
  private static final AtomicLong FRAMES_REFUSED = new AtomicLong();
  private static final AtomicLong PEAK_UNCOUNTED = new AtomicLong();

  static long peakInThisJvm() {
    return PEAK.get();
  }

  static long spillsInThisJvm() {
    return SPILLS.get();
  }

  static long framesRefusedInThisJvm() {
    return FRAMES_REFUSED.get();
  }

  static long peakUncountedInThisJvm() {
    return PEAK_UNCOUNTED.get();
  }

  static void resetCounters() {
    PEAK.set(0);
    SPILLS.set(0);
    FRAMES_REFUSED.set(0);
    PEAK_UNCOUNTED.set(0);
  }

  private final MapAttempt attempt;
  private final MapAttempt.Pushes pushBuffered;
  /** The thread writing the map output: only there may the buffers be pushed. */
  private final Thread writer = Thread.currentThread();
  /** Counted bytes of buffer capacity. */
  private long buffers;
  /** Counted bytes of frames pushed and unacknowledged when last looked. */
  private long window;
  /** Counted bytes of the sink the writer compresses frames in (kept for the task). */
  private long sink;
  private boolean spilling;
  private IOException spillFailure;

  /**
   * For the writer of {@code attempt}, whose {@code pushBuffered} pushes every buffer and frees
   * them all.
   */
  PushBufferMemory(TaskMemoryManager tmm, MapAttempt attempt, MapAttempt.Pushes pushBuffered) {
    super(tmm, MemoryMode.ON_HEAP);
    this.attempt = attempt;
    this.pushBuffered = pushBuffered;
  }

  /** Holds {@code bytes} more buffer if Spark grants all of them; holds nothing and says false if not. */
  boolean tryHoldBuffer(long bytes) {
    if (!tryAcquire(bytes)) {
      return false;
    }
    buffers += bytes;
    return true;
  }

  /** Holds what Spark grants of {@code bytes} of buffer (after the buffers were pushed: the rest is used uncounted). */
  void holdBufferGranted(long bytes) {
    buffers += acquireMemory(bytes);
  }

  /**
   * Holds what Spark grants of {@code bytes} more for the frame sink (the rest is used uncounted,
   * as with a buffer). Kept apart from the buffers: pushing for another consumer frees buffers
   * and moves frames out of their count, never the sink's.
   */
  void holdSink(long bytes) {
    sink += acquireMemory(bytes);
  }

  /** True while the writer pushes for another consumer: pushes must not wait then. */
  boolean spilling() {
    return spilling;
  }

  /**
   * Holds {@code len} bytes for a frame about to be pushed, which stays in memory until its worker
   * acknowledges it. First gives back what was acknowledged since the last frame; when Spark
   * grants less than {@code len}, waits until the frames in flight beyond what is counted leave
   * room for this one within {@link CrossdockConf#uncountedFrameBytes}, and holds what Spark grants
   * then. (Waiting for every acknowledgement instead kept one frame in flight per round trip
   * whenever the task's share was full: a sorter holding its share while it pushes a run.) While
   * spilling, the frame's bytes move from the buffers' count instead (no new grant, no wait).
   */
  void holdFrame(long len) throws IOException {
    settle(attempt.unacknowledgedBytes());
    if (spilling) {
      long moved = Math.min(len, buffers);
      buffers -= moved;
      window += moved;
      return;
    }
    if (tryAcquire(len)) {
      window += len;
      return;
    }
    FRAMES_REFUSED.incrementAndGet();
    // Uncounted after this frame: what is in flight beyond the counted window, plus the frame.
    attempt.awaitAcksForRefusedFrame(window + Math.max(0, attempt.conf.uncountedFrameBytes - len));
    settle(attempt.unacknowledgedBytes());
    window += acquireMemory(len);
    PEAK_UNCOUNTED.accumulateAndGet(attempt.unacknowledgedBytes() + len - window, Math::max);
  }

  /** Gives back the counted frame bytes above {@code unacknowledged}. */
  private void settle(long unacknowledged) {
    if (unacknowledged < window) {
      freeMemory(window - unacknowledged);
      window = unacknowledged;
    }
  }

  private boolean tryAcquire(long bytes) {
    long got = acquireMemory(bytes);
    if (got < bytes) {
      if (got > 0) {
        freeMemory(got);
      }
      return false;
    }
    return true;
  }

  /** Notes the writer's memory in use now, for {@link #peakInThisJvm}. */
  static void sawMemory(long bytes) {
    PEAK.accumulateAndGet(bytes, Math::max);
  }

  /** Gives back {@code bytes} of buffer memory (never more than is counted). */
  void releaseBuffer(long bytes) {
    long r = Math.min(bytes, buffers);
    if (r > 0) {
      freeMemory(r);
      buffers -= r;
    }
  }

  /** Gives back everything held (the task's writer is done or failed). */
  void releaseAll() {
    releaseBuffer(buffers);
    settle(0);
    if (sink > 0) {
      freeMemory(sink);
      sink = 0;
    }
  }

  /** Throws what failed while the writer pushed for another consumer, if anything did. */
  void throwIfSpillFailed() throws IOException {
    if (spillFailure != null) {
      throw spillFailure;
    }
  }

  /**
   * Another consumer of the task needs memory: the writer pushes what it buffered, without waiting.
   * Only on the writing thread, and never for the writer's own request (it pushes by itself when
   * refused, outside a buffer's growth). Returns the buffer memory freed (the frames' share of it
   * stays counted until acknowledged); with no buffers, the frames acknowledged since the last one.
   */
  @Override
  public long spill(long size, MemoryConsumer trigger) {
    if (trigger == this || Thread.currentThread() != writer || spilling || spillFailure != null) {
      return 0;
    }
    if (buffers == 0) {
      // Nothing to push (the sorting writer never has buffers): give back what the workers
      // acknowledged since the last frame, which stays counted until then otherwise.
      long counted = window;
      settle(attempt.unacknowledgedBytes());
      return counted - window;
    }
    long before = buffers + window;
    spilling = true;
    try {
      pushBuffered.run();
      SPILLS.incrementAndGet();
    } catch (IOException e) {
      spillFailure = e;
    } finally {
      spilling = false;
    }
    long freed = before - buffers - window;
    if (freed > 0) {
      return freed;
    }
    return 0;
  }
}
