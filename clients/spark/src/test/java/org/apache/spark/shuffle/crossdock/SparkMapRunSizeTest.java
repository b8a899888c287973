package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.crossdock.client.CrossdockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import scala.Tuple2;

/**
 * A merged shuffle's map sorter spills once it holds a third of the task slot's heap ({@link
 * CrossdockConf#MAP_RUN_PARTS}), though Spark would grant it more: its spills are pushed as runs,
 * so holding more buys the map nothing, and Spark's share of a heap with nothing reserved left a
 * 4 GB RDD sort's maps no room for anything else. Here a task slot has 96 MiB and nothing
 * reserved: Spark's share is 57.6 MiB, a run 32 MiB, and one map of about 70 MB of records.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkMapRunSizeTest {
  static final long HEAP = 96L << 20;
  static final long RUN = HEAP / CrossdockConf.MAP_RUN_PARTS;
  /** What Spark lets a sorter hold before it asks (spark.shuffle.spill.initialMemoryThreshold). */
  static final long UNASKED = 5L << 20;
  static final int RECORDS = 250_000;

  CrossdockServer server;
  JavaSparkContext sc;

  @BeforeAll
  void start() throws Exception {
    server = CrossdockServer.start();
    sc = new JavaSparkContext(SparkLocalTest.conf(server.addr())
        .setMaster("local[1]")
        .set("spark.testing.memory", String.valueOf(HEAP))
        .set("spark.testing.reservedMemory", "0"));
  }

  @AfterAll
  void stop() throws Exception {
    SparkLocalTest.stop(sc, server);
  }

  /** One map's records, made in the task: ascending keys, each with a 200-character value of its own. */
  static Iterator<Tuple2<Integer, String>> records(int unused) {
    return new Iterator<>() {
      int i;

      @Override
      public boolean hasNext() {
        return i < RECORDS;
      }

      @Override
      public Tuple2<Integer, String> next() {
        int k = (i * 7919) % RECORDS;
        i++;
        return new Tuple2<>(k, String.format("%0200d", k));
      }
    };
  }

  @Test
  void aMergedShufflesMapSorterSpillsAtARunNotAtSparksShare() throws Exception {
    JavaPairRDD<Integer, String> sorted = sc.parallelize(List.of(1), 1)
        .flatMapToPair(SparkMapRunSizeTest::records)
        .sortByKey(true, 4);
    CrossdockShuffleHandle<?, ?, ?> h =
        (CrossdockShuffleHandle<?, ?, ?>) SparkLocalTest.shuffleDep(sorted).shuffleHandle();
    assertTrue(h.sortedRuns() && h.spillRuns, "a merged shuffle pushes its spills as runs");
    long[] checked = new long[2];
    List<SparkListenerTaskEnd> ends = SparkLocalTest.taskEnds(sc, "run size", () -> {
      Iterator<Tuple2<Integer, String>> it = sorted.toLocalIterator();
      int want = 0;
      while (it.hasNext()) {
        Tuple2<Integer, String> t = it.next();
        assertEquals(want, t._1(), "every key once, in order");
        assertEquals(String.format("%0200d", want), t._2());
        want++;
      }
      checked[0] = want;
    });
    assertEquals(RECORDS, checked[0], "every record read");
    long mapPeak = 0;
    for (SparkListenerTaskEnd e : ends) {
      if (e.taskMetrics() != null && e.taskMetrics().shuffleWriteMetrics().recordsWritten() > 0) {
        mapPeak = Math.max(mapPeak, e.taskMetrics().peakExecutionMemory());
        checked[1] += e.taskMetrics().memoryBytesSpilled();
      }
    }
    assertTrue(checked[1] > 0, "the map's sorter spilled");
    assertTrue(mapPeak > 0, "the map's sorter held memory");
    // Spark's sorter checks its size every 32 records, and its array grows by doubling: it passes
    // a run by a little (Spark's share would let it reach 57.6 MiB and more).
    assertTrue(mapPeak <= RUN + UNASKED + (4 << 20),
        "the map's sorter held " + mapPeak + " bytes; a run is " + RUN + ", Spark's share "
            + (long) (0.6 * HEAP));
  }
}
