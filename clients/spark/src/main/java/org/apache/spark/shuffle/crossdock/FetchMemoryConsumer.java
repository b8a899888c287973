package org.apache.spark.shuffle.crossdock;

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
  FetchMemoryConsumer(TaskMemoryManager tmm) {
    super(tmm, MemoryMode.ON_HEAP);
  }

  @Override
  public long acquire(long bytes) {
    return acquireMemory(bytes);
  }

  @Override
  public void release(long bytes) {
    if (bytes > 0) {
      freeMemory(bytes);
    }
  }

  @Override
  public long spill(long size, MemoryConsumer trigger) {
    return 0;
  }
}
