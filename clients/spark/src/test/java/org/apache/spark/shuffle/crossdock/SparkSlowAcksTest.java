package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import org.apache.spark.api.java.JavaSparkContext;
import org.crossdock.client.CrossdockServer;
import org.crossdock.client.SlowProxy;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Frames Spark grants no room (the map task's share is held by another consumer and the sorter)
 * go out a few at a time, not one per round trip, and never more of them uncounted than the
 * allowance ({@link CrossdockConf#uncountedFrameBytes}). The worker's answers take 25 ms here (a
 * proxy in front of it, which the worker advertises), so frames pile up unacknowledged while the
 * sorter writes the next: a writer that waited for every acknowledgement would keep at most one
 * frame uncounted, and one that did not wait would pass the allowance.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkSlowAcksTest {
  SlowProxy proxy;
  CrossdockServer server;
  JavaSparkContext sc;

  @BeforeAll
  void start() throws Exception {
    proxy = new SlowProxy(25, 1 << 20);
    server = CrossdockServer.startWorkerAdvertising(proxy.addr(), "256MiB");
    proxy.target(server.workerAddr());
    sc = new JavaSparkContext(SparkPushMemoryTest.conf(server.addr()));
  }

  @AfterAll
  void stop() throws Exception {
    try {
      SparkLocalTest.stop(sc, server);
    } finally {
      proxy.close();
    }
  }

  @Test
  void refusedFramesStayInFlightUpToTheAllowance() {
    CrossdockAccumulators acc = SparkPushMemoryTest.sortWithTheTasksShareTaken(sc).accumulators;
    long uncounted = PushBufferMemory.peakUncountedInThisJvm();
    assertTrue(uncounted <= SparkPushMemoryTest.ALLOWANCE,
        "frames in flight uncounted peaked at " + uncounted + " bytes, past the allowance");
    // A run's batches are at most 128 KiB here (the 2 MiB fetch window over 2 maps' 4 runs,
    // twice): more than half the allowance is more than one frame.
    assertTrue(uncounted > SparkPushMemoryTest.ALLOWANCE / 2,
        "frames in flight uncounted peaked at " + uncounted + " bytes: one at a time");
    // The map tasks' figures in the UI and the event log: every refused frame (no task failed).
    // Their wait (`pushRefusedWaitMs`) is not asserted: whether a refused frame finds the
    // allowance full depends on when the answers come back, and on a loaded machine it was
    // below a millisecond a map.
    assertEquals(PushBufferMemory.framesRefusedInThisJvm(), acc.pushFramesRefused.value(),
        "refused frames counted in the tasks' accumulators");
  }
}
