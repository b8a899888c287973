package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.MemoryMode;
import org.apache.spark.memory.TaskMemoryManager;

/**
 * The direct writer's per-partition buffers, and the frames it pushed that no worker has
 * acknowledged yet, as execution memory of the map task. Spark's memory
 * manager then counts them beside the task's other consumers (a SQL aggregate or sort in the same
 * stage), and a map task of a small executor pushes what it buffered when Spark grants no more,
 * instead of growing its buffers to {@code spark.crossdock.push.maxInFlight} whatever the heap
 * holds: where Spark's own writer would spill to local disk, this one pushes to the workers.
 *
 * <p>What is held is the buffers' capacity and the unacknowledged frames' lengths. A grant short
 * of a buffer's growth makes the writer push every buffer and ask again; one short of a frame
 * makes it wait for every acknowledgement and ask again. What Spark still refuses then (at most
 * the buffer of the record being written, or one frame) is used without being counted, as a
 * sorter's last record must be. Frames pushed while Spark asked the writer to give memory back
 * ({@link #spill}) are not counted either: that push is what gives it back.
 */
final class PushBufferMemory extends MemoryConsumer {
  /** What the writer does when Spark asks it to give memory back. */
  interface Pusher {
    /** Pushes every buffered byte and frees the buffers; returns the bytes of memory freed. */
    long pushBuffered() throws IOException;
  }

  /** Waits until every frame pushed so far is acknowledged. */
  interface Acks {
    void awaitAll() throws IOException;
  }

  /**
   * The most memory any one writer of this JVM has used at once (buffers' capacity plus frames
   * awaiting acknowledgement), for tests: with a small memory pool it must stay near the pool, not
   * at the push window.
   */
  private static final AtomicLong PEAK = new AtomicLong();

  static long peakInThisJvm() {
    return PEAK.get();
  }

  static void resetPeak() {
    PEAK.set(0);
  }

  private final Pusher pusher;
  /** The thread writing the map output: only there may the buffers be pushed. */
  private final Thread writer = Thread.currentThread();
  /** Counted bytes of buffer capacity. */
  private long buffers;
  /** Counted bytes of frames pushed and unacknowledged when last looked. */
  private long window;
  private boolean spilling;

  PushBufferMemory(TaskMemoryManager tmm, Pusher pusher) {
    super(tmm, MemoryMode.ON_HEAP);
    this.pusher = pusher;
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
   * Holds {@code len} bytes for a frame about to be pushed, which stays in memory until its worker
   * acknowledges it. First gives back what was acknowledged since the last frame ({@code
   * unacknowledged}: the bytes still waiting now); when Spark grants less than {@code len}, waits
   * for every acknowledgement and holds what it grants then.
   */
  void holdFrame(long len, long unacknowledged, Acks acks) throws IOException {
    settle(unacknowledged);
    if (spilling) {
      return;
    }
    if (tryAcquire(len)) {
      window += len;
      return;
    }
    acks.awaitAll();
    settle(0);
    window += acquireMemory(len);
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
  }

  /**
   * Another consumer of the task needs memory: the writer pushes what it buffered. Only on the
   * writing thread, and never for the writer's own request (it pushes by itself when refused,
   * outside a buffer's growth).
   */
  @Override
  public long spill(long size, MemoryConsumer trigger) throws IOException {
    if (trigger == this || Thread.currentThread() != writer || spilling || buffers == 0) {
      return 0;
    }
    long before = buffers;
    spilling = true;
    try {
      pusher.pushBuffered();
    } finally {
      spilling = false;
    }
    return before - buffers;
  }
}
