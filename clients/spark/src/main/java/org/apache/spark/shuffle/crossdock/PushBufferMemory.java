package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.MemoryMode;
import org.apache.spark.memory.TaskMemoryManager;

/**
 * The direct writer's per-partition buffers as execution memory of the map task. Spark's memory
 * manager then counts them beside the task's other consumers (a SQL aggregate or sort in the same
 * stage), and a map task of a small executor pushes what it buffered when Spark grants no more,
 * instead of growing its buffers to {@code spark.crossdock.push.maxInFlight} whatever the heap
 * holds: where Spark's own writer would spill to local disk, this one pushes to the workers.
 *
 * <p>What is held is the buffers' capacity. A grant short of a buffer's growth makes the writer
 * push every buffer and ask again; what Spark still refuses then (at most the buffer of the record
 * being written) is used without being counted, as a sorter's last record must be. Frames pushed
 * and not yet acknowledged are bounded by the push window ({@code maxInFlight}) and not counted.
 */
final class PushBufferMemory extends MemoryConsumer {
  /** What the writer does when Spark asks it to give memory back. */
  interface Pusher {
    /** Pushes every buffered byte and frees the buffers; returns the bytes of memory freed. */
    long pushBuffered() throws IOException;
  }

  /**
   * The largest capacity any one writer of this JVM has held, for tests: with a small memory
   * pool it must stay near the pool, not at the push window.
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
  private long held;

  PushBufferMemory(TaskMemoryManager tmm, Pusher pusher) {
    super(tmm, MemoryMode.ON_HEAP);
    this.pusher = pusher;
  }

  /** Holds {@code bytes} more if Spark grants all of them; holds nothing and says false if not. */
  boolean tryHold(long bytes) {
    long got = acquireMemory(bytes);
    if (got < bytes) {
      if (got > 0) {
        freeMemory(got);
      }
      return false;
    }
    held += got;
    return true;
  }

  /** Holds what Spark grants of {@code bytes} (after the buffers were pushed: the rest is used uncounted). */
  void holdGranted(long bytes) {
    held += acquireMemory(bytes);
  }

  /** Notes the buffers' capacity now, for {@link #peakInThisJvm}. */
  static void sawCapacity(long capacity) {
    PEAK.accumulateAndGet(capacity, Math::max);
  }

  /** Gives back {@code bytes} of buffer memory (never more than is held). */
  void release(long bytes) {
    long r = Math.min(bytes, held);
    if (r > 0) {
      freeMemory(r);
      held -= r;
    }
  }

  /** Gives back everything held (the task's writer is done or failed). */
  void releaseAll() {
    release(held);
  }

  /**
   * Another consumer of the task needs memory: the writer pushes what it buffered. Only on the
   * writing thread, and never for the writer's own request (it pushes by itself when refused,
   * outside a buffer's growth).
   */
  @Override
  public long spill(long size, MemoryConsumer trigger) throws IOException {
    if (trigger == this || Thread.currentThread() != writer || held == 0) {
      return 0;
    }
    long before = held;
    pusher.pushBuffered();
    return before - held;
  }
}
