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
 * at the same records, so the number of runs is exact: a map of 3500 records spills after records
 * 1001, 2002 and 3003 and ends with 497 in memory, four runs of each partition. A map of 6000
 * records spills twice more: past the three spills a map pushes, those go to disk and are merged
 * into its last run. local[2,2]: two threads, and a failed task is tried again once.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkSpillRunsTest {
  private static final int MAPS = 8;
  private static final int PER_MAP = 3500;
  private static final int RUNS_PER_MAP = 4;

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
    return data(seed, PER_MAP);
  }

  static List<Tuple2<Integer, String>> data(long seed, int perMap) {
    Random r = new Random(seed);
    List<Tuple2<Integer, String>> out = new ArrayList<>();
    for (int i = 0; i < MAPS * perMap; i++) {
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
    return SparkLocalTest.taskEnds(sc, group, job);
  }

  /** Spill figures of a merged job's tasks: map disk, map memory, reduce, written, read. */
  record Spills(long mapDisk, long mapMemory, long reduce, long written, long read) {
    static Spills of(List<SparkListenerTaskEnd> ends) {
      long written = 0, read = 0, mapDisk = 0, mapMemory = 0, reduce = 0;
      for (SparkListenerTaskEnd e : ends) {
        if (e.taskMetrics() == null) {
          continue;
        }
        written += e.taskMetrics().shuffleWriteMetrics().bytesWritten();
        read += e.taskMetrics().shuffleReadMetrics().localBytesRead()
            + e.taskMetrics().shuffleReadMetrics().remoteBytesRead();
        if (e.taskMetrics().shuffleWriteMetrics().recordsWritten() > 0) {
          mapDisk += e.taskMetrics().diskBytesSpilled();
          mapMemory += e.taskMetrics().memoryBytesSpilled();
        } else {
          reduce += e.taskMetrics().memoryBytesSpilled() + e.taskMetrics().diskBytesSpilled();
        }
      }
      return new Spills(mapDisk, mapMemory, reduce, written, read);
    }
  }

  /** Sorts {@code data} within 3 hash partitions; returns the partitions and the job's spills. */
  Spills sortWithin(List<Tuple2<Integer, String>> data, String group) throws Exception {
    JavaPairRDD<Integer, String> sorted = sc.parallelizePairs(data, MAPS)
        .repartitionAndSortWithinPartitions(new HashPartitioner(3));
    CrossdockShuffleHandle<?, ?, ?> h =
        (CrossdockShuffleHandle<?, ?, ?>) SparkLocalTest.shuffleDep(sorted).shuffleHandle();
    assertTrue(h.sortedRuns() && h.spillRuns, "a merged shuffle pushes its spills as runs");
    List<List<Tuple2<Integer, String>>> parts = new ArrayList<>();
    Spills spills = Spills.of(taskEnds(group, () -> parts.addAll(sorted.glom().collect())));
    assertMergedExactly(data, parts);
    assertEquals(0, spills.reduce(), "the merge never spills");
    assertEquals(spills.written(), spills.read(), "every byte written is read back once");
    assertEquals(3L * MAPS * RUNS_PER_MAP, h.accumulators.mergedRuns.value(),
        "each of 3 reducers merged four runs of each of the maps");
    return spills;
  }

  @Test
  void spillsArePushedAsRunsAndMergedOnce() throws Exception {
    Spills spills = sortWithin(data(5), "runs");
    assertTrue(spills.mapMemory() > 0, "the maps' sorters spilled");
    assertEquals(0, spills.mapDisk(), "no spill reached a map's disk");
  }

  @Test
  void spillsPastThoseAMapPushesAreMergedIntoItsLastRun() throws Exception {
    Spills spills = sortWithin(data(8, 6000), "more spills");
    assertTrue(spills.mapDisk() > 0, "the fourth and fifth spills of each map went to disk");
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
