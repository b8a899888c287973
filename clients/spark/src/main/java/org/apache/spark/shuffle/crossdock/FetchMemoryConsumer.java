package org.apache.spark.shuffle.crossdock;

import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.MemoryMode;
import org.apache.spark.memory.TaskMemoryManager;
import org.crossdock.client.fetch.FetchMemory;

/**
 * A reduce task's fetch buffers as execution memory of the task: Spark's memory manager counts
 * them (and its peak execution memory metric includes them), and a grant smaller than asked makes
 * the reader ask for less at once. The buffers cannot be spilled: they are given back as the task
 * consumes them, and all at once when the task ends, whether it succeeded, failed or was killed.
 */
final class FetchMemoryConsumer extends MemoryConsumer implements FetchMemory {
  /**
   * The fetch memory all readers of this JVM hold. Spark frees a failed or killed task's memory
   * itself, without saying whether the consumer gave it back; this count lets a test see that the
   * reader did.
   */
  private static final AtomicLong HELD = new AtomicLong();

  static long heldInThisJvm() {
    return HELD.get();
  }

  FetchMemoryConsumer(TaskMemoryManager tmm) {
    super(tmm, MemoryMode.ON_HEAP);
  }

  @Override
  public long acquire(long bytes) {
    long got = acquireMemory(bytes);
    HELD.addAndGet(got);
    return got;
  }

  @Override
  public void release(long bytes) {
    if (bytes > 0) {
      freeMemory(bytes);
      HELD.addAndGet(-bytes);
    }
  }

  @Override
  public long spill(long size, MemoryConsumer trigger) {
    return 0;
  }
}
