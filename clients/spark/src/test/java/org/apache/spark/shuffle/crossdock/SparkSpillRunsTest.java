package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.spark.HashPartitioner;
import org.apache.spark.TaskContext;
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
 * Maps of a merged shuffle that run short of memory push each spill of their sorter as a sorted
 * run of its own ({@link SpillRuns}), and reducers merge every run once. Spark's own threshold
 * (spark.shuffle.spill.numElementsForceSpillThreshold, 1000 records here) makes every map spill
 * at the same records, so the number of runs is exact: a map of 6000 records spills after
 * records 1001, 2002, 3003, 4004 and 5005 and ends with 995 in memory, six runs of each partition.
 * local[2,2]: two threads, and a failed task is tried again once.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkSpillRunsTest {
  private static final int MAPS = 8;
  private static final int PER_MAP = 6000;
  private static final int RUNS_PER_MAP = 6;

  CrossdockServer server;
  JavaSparkContext sc;

  @BeforeAll
  void start() throws Exception {
    server = CrossdockServer.start();
    sc = new JavaSparkContext(SparkLocalTest.conf(server.addr())
        .setMaster("local[2,2]")
        .set("spark.shuffle.spill.numElementsForceSpillThreshold", "1000")
        .set("spark.crossdock.fetch.maxInFlight", "1m"));
  }

  @AfterAll
  void stop() throws Exception {
    SparkLocalTest.stop(sc, server);
  }

  /** (key, "index:hex") pairs: keys repeat across maps and runs, values tell records apart. */
  static List<Tuple2<Integer, String>> data(long seed) {
    Random r = new Random(seed);
    List<Tuple2<Integer, String>> out = new ArrayList<>();
    for (int i = 0; i < MAPS * PER_MAP; i++) {
      out.add(new Tuple2<>(r.nextInt(20_000), i + ":" + Long.toHexString(r.nextLong())));
    }
    return out;
  }

  /** Checks every partition is in key order and holds exactly the records of {@code data}. */
  static void assertMergedExactly(List<Tuple2<Integer, String>> data,
      List<List<Tuple2<Integer, String>>> parts) {
    Map<Integer, List<String>> got = new TreeMap<>();
    for (int p = 0; p < parts.size(); p++) {
      int last = Integer.MIN_VALUE;
      for (Tuple2<Integer, String> t : parts.get(p)) {
        assertEquals(p, Math.floorMod(t._1().hashCode(), parts.size()), "record in its partition");
        assertTrue(t._1() >= last, "partition " + p + " is in key order at key " + t._1());
        last = t._1();
        got.computeIfAbsent(t._1(), k -> new ArrayList<>()).add(t._2());
      }
    }
    Map<Integer, List<String>> want = new TreeMap<>();
    for (Tuple2<Integer, String> t : data) {
      want.computeIfAbsent(t._1(), k -> new ArrayList<>()).add(t._2());
    }
    got.values().forEach(v -> v.sort(null));
    want.values().forEach(v -> v.sort(null));
    assertEquals(want, got, "every record read exactly once");
  }

  List<SparkListenerTaskEnd> taskEnds(String group, SparkLocalTest.Job job) throws Exception {
    SparkLocalTest.Events events = new SparkLocalTest.Events(group);
    sc.sc().addSparkListener(events);
    sc.setJobGroup(group, group, false);
    try {
      job.run();
      sc.sc().listenerBus().waitUntilEmpty();
    } finally {
      sc.clearJobGroup();
      sc.sc().removeSparkListener(events);
    }
    synchronized (events.ends) {
      return new ArrayList<>(events.ends);
    }
  }

  @Test
  void spillsArePushedAsRunsAndMergedOnce() throws Exception {
    List<Tuple2<Integer, String>> data = data(5);
    JavaPairRDD<Integer, String> sorted = sc.parallelizePairs(data, MAPS)
        .repartitionAndSortWithinPartitions(new HashPartitioner(3));
    CrossdockShuffleHandle<?, ?, ?> h =
        (CrossdockShuffleHandle<?, ?, ?>) SparkLocalTest.shuffleDep(sorted).shuffleHandle();
    assertTrue(h.sortedRuns() && h.spillRuns, "a merged shuffle pushes its spills as runs");
    List<List<Tuple2<Integer, String>>> parts = new ArrayList<>();
    List<SparkListenerTaskEnd> ends = taskEnds("runs", () -> parts.addAll(sorted.glom().collect()));
    assertMergedExactly(data, parts);
    long written = 0, read = 0, mapDiskSpill = 0, mapMemorySpill = 0, reduceSpill = 0;
    for (SparkListenerTaskEnd e : ends) {
      if (e.taskMetrics() == null) {
        continue;
      }
      written += e.taskMetrics().shuffleWriteMetrics().bytesWritten();
      read += e.taskMetrics().shuffleReadMetrics().localBytesRead()
          + e.taskMetrics().shuffleReadMetrics().remoteBytesRead();
      if (e.taskMetrics().shuffleWriteMetrics().recordsWritten() > 0) {
        mapDiskSpill += e.taskMetrics().diskBytesSpilled();
        mapMemorySpill += e.taskMetrics().memoryBytesSpilled();
      } else {
        reduceSpill += e.taskMetrics().memoryBytesSpilled() + e.taskMetrics().diskBytesSpilled();
      }
    }
    assertTrue(mapMemorySpill > 0, "the maps' sorters spilled");
    assertEquals(0, mapDiskSpill, "no spill reached a map's disk");
    assertEquals(0, reduceSpill, "the merge never spills");
    assertEquals(written, read, "every byte written (each run's too) is read back once");
    assertEquals(3L * MAPS * RUNS_PER_MAP, h.accumulators.mergedRuns.value(),
        "each of 3 reducers merged six runs of each of the maps");
  }

  @Test
  void sortByKeyOverSpilledRunsIsTotallyOrdered() {
    List<Integer> keys = new ArrayList<>();
    Random r = new Random(9);
    for (int i = 0; i < MAPS * PER_MAP; i++) {
      keys.add(r.nextInt());
    }
    List<Integer> got = sc.parallelize(keys, MAPS).mapToPair(k -> new Tuple2<>(k, 1))
        .sortByKey(false, 5).keys().collect();
    List<Integer> want = new ArrayList<>(keys);
    want.sort(java.util.Comparator.reverseOrder());
    assertEquals(want, got);
  }

  /**
   * The records of a map; the first attempts of maps 1, 4 and 7 fail at their 2500th record,
   * after two spills.
   */
  static java.util.Iterator<Tuple2<Integer, String>> failFirstAttempts(
      java.util.Iterator<Tuple2<Integer, String>> it) {
    TaskContext t = TaskContext.get();
    boolean fail = t.attemptNumber() == 0 && t.partitionId() % 3 == 1;
    return new java.util.Iterator<>() {
      int n;

      @Override
      public boolean hasNext() {
        return it.hasNext();
      }

      @Override
      public Tuple2<Integer, String> next() {
        if (fail && ++n == 2500) {
          throw new IllegalStateException("the first attempt fails after two spills");
        }
        return it.next();
      }
    };
  }

  /**
   * A map attempt that fails after pushing two spills as runs is tried again: only the runs of
   * the attempt that committed are read, at the places its own commit named.
   */
  @Test
  void theRunsOfAFailedAttemptAreNotRead() throws Exception {
    List<Tuple2<Integer, String>> data = data(6);
    JavaPairRDD<Integer, String> sorted = sc.parallelizePairs(data, MAPS)
        .mapPartitionsToPair(SparkSpillRunsTest::failFirstAttempts, true)
        .repartitionAndSortWithinPartitions(new HashPartitioner(4));
    List<List<Tuple2<Integer, String>>> parts = new ArrayList<>();
    List<SparkListenerTaskEnd> ends = taskEnds("retried", () -> parts.addAll(sorted.glom().collect()));
    assertMergedExactly(data, parts);
    long failed = ends.stream().filter(e -> !e.reason().toString().equals("Success")).count();
    assertEquals(3, failed, "maps 1, 4 and 7 failed once each");
  }
}
