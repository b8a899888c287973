package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import org.apache.spark.SparkConf;
import org.crossdock.client.TaskWindows;
import org.junit.jupiter.api.Test;

/**
 * The windows' defaults and a merged shuffle's map run follow the heap a task slot has; a value
 * set is taken as it is.
 */
class CrossdockConfTest {
  static final long MIB = 1L << 20;

  static SparkConf conf(long heap, int cores) {
    return new SparkConf(false)
        .set(CrossdockConf.COORDINATOR, "127.0.0.1:1")
        .set("spark.testing.memory", String.valueOf(heap))
        .set("spark.executor.cores", String.valueOf(cores));
  }

  @Test
  void aWindowIsAShareOfATaskSlotsHeapUpToItsFixedDefault() {
    assertEquals(8 * MIB, TaskWindows.windowFor(64 * MIB, 32 * MIB, 8));
    assertEquals(4 * MIB, TaskWindows.windowFor(64 * MIB, 32 * MIB, 16));
    assertEquals(32 * MIB, TaskWindows.windowFor(256 * MIB, 32 * MIB, 8), "from 256 MiB up, the fixed default");
    assertEquals(32 * MIB, TaskWindows.windowFor(8192 * MIB, 32 * MIB, 16));
    assertEquals(MIB, TaskWindows.windowFor(2 * MIB, 32 * MIB, 8), "at least 1 MiB");
  }

  @Test
  void theDefaultsScaleWithTheExecutorsHeapAndItsTaskSlots() {
    CrossdockConf small = new CrossdockConf(conf(64 * MIB, 1));
    assertEquals(4 * MIB, small.maxInFlight, "a sixteenth: a map task holds its window twice");
    assertEquals(8 * MIB, small.fetchMaxInFlight, "an eighth");
    CrossdockConf shared = new CrossdockConf(conf(2048 * MIB, 8).set("spark.task.cpus", "2"));
    assertEquals(32 * MIB, shared.maxInFlight, "2 GiB over 4 slots: 512 MiB each");
    assertEquals(512 * MIB / 3, shared.mapRunBytes, "a merged shuffle's map run: a third of a slot");
    CrossdockConf many = new CrossdockConf(conf(1024 * MIB, 16));
    assertEquals(4 * MIB, many.maxInFlight, "1 GiB over 16 slots: 64 MiB each");
    assertEquals(8 * MIB, many.fetchMaxInFlight);
    CrossdockConf usual = new CrossdockConf(conf(1024 * MIB, 1));
    assertEquals(32 * MIB, usual.maxInFlight);
    assertEquals(48 * MIB, usual.fetchMaxInFlight);
    assertEquals(1024 * MIB / 3, usual.mapRunBytes, "no fixed cap: a third of any slot");
    assertEquals(8 * MIB, usual.uncountedFrameBytes, "a quarter of the push window");
    assertEquals(MIB, small.uncountedFrameBytes, "a sixty-fourth of a 64 MiB slot");
    assertEquals(8 * MIB, shared.uncountedFrameBytes);
    CrossdockConf pinned = new CrossdockConf(conf(1024 * MIB, 1).set(CrossdockConf.PUSH_MAX_IN_FLIGHT, "2m"));
    assertEquals(MIB / 2, pinned.uncountedFrameBytes, "a quarter of a window set by hand");
    CrossdockConf wide = new CrossdockConf(conf(64 * MIB, 1).set(CrossdockConf.PUSH_MAX_IN_FLIGHT, "32m"));
    assertEquals(MIB, wide.uncountedFrameBytes, "a sixty-fourth of the slot, below a quarter of the window");
  }

  @Test
  void theDriverAndTheExecutorsSeeTheSameExecutorHeap() {
    // Not local: spark.executor.memory, whatever the heap of the JVM reading it (the driver sizes
    // sorted runs' batches for the executors' fetch window).
    SparkConf cluster = new SparkConf(false).set(CrossdockConf.COORDINATOR, "127.0.0.1:1")
        .set("spark.master", "local-cluster[2,1,1024]").set("spark.executor.memory", "64m");
    assertEquals(64 * MIB, CrossdockConf.heapPerTask(cluster));
    assertEquals(8 * MIB, new CrossdockConf(cluster).fetchMaxInFlight);
    assertEquals(1024 * MIB, CrossdockConf.heapPerTask(new SparkConf(false).set("spark.master", "yarn")),
        "Spark's default executor memory, 1g");
    // Local: the one JVM's heap over the master's threads.
    long heap = Runtime.getRuntime().maxMemory();
    assertEquals(heap / 4, CrossdockConf.heapPerTask(new SparkConf(false).set("spark.master", "local[4]")));
    assertEquals(heap, CrossdockConf.heapPerTask(new SparkConf(false).set("spark.master", "local")));
  }

  @Test
  void localMastersAreParsedForTheirThreads() {
    assertEquals(1, CrossdockConf.localThreads("local"));
    assertEquals(3, CrossdockConf.localThreads("local[3]"));
    assertEquals(2, CrossdockConf.localThreads("local[2, 4]"));
    assertEquals(Runtime.getRuntime().availableProcessors(), CrossdockConf.localThreads("local[*]"));
    assertEquals(0, CrossdockConf.localThreads("local-cluster[2,1,1024]"));
    assertEquals(0, CrossdockConf.localThreads("spark://host:7077"));
    assertEquals(0, CrossdockConf.localThreads(""));
  }

  @Test
  void aWindowSetIsTakenWhateverTheHeap() {
    CrossdockConf c = new CrossdockConf(conf(64 * MIB, 1)
        .set(CrossdockConf.PUSH_MAX_IN_FLIGHT, "32m")
        .set(CrossdockConf.FETCH_MAX_IN_FLIGHT, "48m"));
    assertEquals(32 * MIB, c.maxInFlight);
    assertEquals(48 * MIB, c.fetchMaxInFlight);
    assertThrows(IllegalArgumentException.class,
        () -> new CrossdockConf(conf(64 * MIB, 1).set(CrossdockConf.FETCH_MAX_IN_FLIGHT, "512k")));
  }
}
