package org.crossdock.client;

/**
 * The default size of a window an engine's task holds (the push window: bytes pushed and not yet
 * acknowledged; the fetch window: bytes a read holds) when the user sets none: the engine client's
 * fixed default, or a share of the heap the task has when that is less, and at least 1 MiB. A
 * fixed window is the same for every executor, so a small one ran out of heap where the engine's
 * own shuffle did not (a Spark groupBy whose executors have 64 MiB: at the fixed defaults its map
 * tasks' pushes and then its reduce tasks' reads filled the heap; bench/min_memory.py). The Spark
 * and MapReduce clients both size their windows here, each reading its task heap its own way.
 */
public final class TaskWindows {
  /**
   * The push window takes a sixteenth of the task's heap: a map task holds it twice (its frames
   * awaiting acknowledgement and, in Spark's direct writer, its buffers; in MapReduce, beside its
   * sort buffer). The fixed 32 MiB default stands from 512 MiB of heap.
   */
  public static final int PUSH_PARTS = 16;
  /** The fetch window takes an eighth: the fixed 48 MiB default stands from 384 MiB of heap. */
  public static final int FETCH_PARTS = 8;

  private TaskWindows() {}

  /** {@code fixed}, or {@code heap / parts} when that is less, and at least 1 MiB. */
  public static long windowFor(long heap, long fixed, int parts) {
    return Math.max(1L << 20, Math.min(fixed, heap / parts));
  }
}
