package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.crossdock.client.CrossdockServer;
import org.crossdock.client.Placement;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import scala.Tuple2;

/**
 * Hot partitions split across the workers, in a real Spark (local[2], Kryo, so shuffles without
 * map-side combine take the direct writer) against a real crossdock standalone whose workers
 * split a partition at 1 MiB: every writer path (framed batches, a serialized stream per map,
 * sorted runs) pushes past the split, its later maps land on the other worker, and the readers
 * read every split with the exact results.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkSplitTest {
  CrossdockServer server;
  JavaSparkContext sc;

  /**
   * 12 maps of 3000 records: key 0 gets a third of them, with 1200 random hex digits each (about
   * 7 MiB compressed), the others short values.
   */
  static final int MAPS = 12;
  static final int PER_MAP = 3000;

  @BeforeAll
  void start() throws Exception {
    server = CrossdockServer.start("--split-size", "1MiB");
    sc = new JavaSparkContext(SparkLocalTest.conf(server.addr())
        .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .set("spark.crossdock.push.batchSize", "32k"));
  }

  @AfterAll
  void stop() throws Exception {
    SparkLocalTest.stop(sc, server);
  }

  /** The records: (key, value) with key 0 hot and long values. */
  JavaPairRDD<Integer, String> skewed() {
    List<Integer> seeds = new ArrayList<>();
    for (int m = 0; m < MAPS; m++) {
      seeds.add(m);
    }
    return sc.parallelize(seeds, MAPS).flatMapToPair(m -> {
      List<Tuple2<Integer, String>> out = new ArrayList<>();
      for (int i = 0; i < PER_MAP; i++) {
        int key = i % 3 == 0 ? 0 : 1 + (m * PER_MAP + i) % 500;
        out.add(new Tuple2<>(key, value(m, i, key)));
      }
      return out.iterator();
    });
  }

  /** The slots of partition 0 of the shuffle feeding {@code rdd}, from the coordinator. */
  static int slotsOfPartition0(JavaPairRDD<?, ?> rdd) throws Exception {
    CrossdockShuffleManager m = (CrossdockShuffleManager) SparkEnv.get().shuffleManager();
    int shuffleId = shuffleOf(rdd.rdd()).shuffleHandle().shuffleId();
    Placement p = m.currentPlacement(shuffleId);
    return p.slotsOf(0).length;
  }

  /** The shuffle dependency nearest above {@code rdd}. */
  static org.apache.spark.ShuffleDependency<?, ?, ?> shuffleOf(org.apache.spark.rdd.RDD<?> rdd) {
    org.apache.spark.Dependency<?> d = rdd.dependencies().head();
    return d instanceof org.apache.spark.ShuffleDependency<?, ?, ?> s ? s : shuffleOf(d.rdd());
  }

  @Test
  void aHotPartitionOfFramedBatchesIsSplitAndReadWhole() throws Exception {
    JavaPairRDD<Integer, Iterable<String>> grouped = skewed().groupByKey(4);
    Map<Integer, Integer> counts = new HashMap<>();
    long chars = 0;
    for (Tuple2<Integer, Iterable<String>> t : grouped.collect()) {
      int n = 0;
      for (String v : t._2()) {
        n++;
        chars += v.length();
      }
      counts.put(t._1(), n);
    }
    assertEquals(MAPS * PER_MAP / 3, counts.get(0));
    assertEquals(501, counts.size());
    assertEquals(expectedChars(), chars);
    assertTrue(shuffleOf(grouped.rdd()).shuffleHandle() instanceof CrossdockShuffleHandle<?, ?, ?> h
        && h.framedBatches, "the direct writer's path");
    assertTrue(slotsOfPartition0(grouped) > 1, "partition 0 was split");
  }

  @Test
  void aHotPartitionOfCombinedStreamsIsSplitAndReadWhole() throws Exception {
    JavaPairRDD<Integer, Long> lengths = skewed().mapValues(v -> (long) v.length())
        .reduceByKey(Long::sum, 4);
    Map<Integer, Long> got = new HashMap<>(lengths.collectAsMap());
    long total = got.values().stream().mapToLong(Long::longValue).sum();
    assertEquals(expectedChars(), total);
    assertEquals(501, got.size());
    // Values are small after the map-side combine: the split here comes from the groupBy
    // below, whose maps write each partition as one serialized stream (Java serializer path
    // off: Kryo's groupByKey with combine off takes the direct writer, so use aggregateByKey).
    JavaPairRDD<Integer, List<String>> lists = skewed().aggregateByKey(
        new ArrayList<String>(), 4, (l, v) -> {
          l.add(v);
          return l;
        }, (a, b) -> {
          a.addAll(b);
          return a;
        });
    long n = 0;
    long chars = 0;
    for (Tuple2<Integer, List<String>> t : lists.collect()) {
      n += t._2().size();
      for (String v : t._2()) {
        chars += v.length();
      }
    }
    assertEquals((long) MAPS * PER_MAP, n);
    assertEquals(expectedChars(), chars);
    assertTrue(shuffleOf(lists.rdd()).shuffleHandle() instanceof CrossdockShuffleHandle<?, ?, ?> h
        && !h.framedBatches, "the sort writer's path");
    assertTrue(slotsOfPartition0(lists) > 1, "partition 0 was split");
  }

  @Test
  void aHotPartitionOfSortedRunsIsSplitAndMergedInOrder() throws Exception {
    JavaPairRDD<Integer, String> sorted = skewed().sortByKey(true, 3);
    List<Integer> keys = sorted.keys().collect();
    assertEquals(MAPS * PER_MAP, keys.size());
    for (int i = 1; i < keys.size(); i++) {
      assertTrue(keys.get(i - 1) <= keys.get(i), "out of order at " + i);
    }
    long chars = sorted.values().map(String::length).reduce(Integer::sum);
    assertEquals(expectedChars(), chars);
    assertTrue(slotsOfPartition0(sorted) > 1, "partition 0 was split");
  }

  /** Record {@code i} of map {@code m}'s value: hot ones long and incompressible. */
  static String value(int m, int i, int key) {
    if (key != 0) {
      return m + ":" + i;
    }
    java.util.Random r = new java.util.Random(m * (long) PER_MAP + i);
    StringBuilder b = new StringBuilder(1200);
    while (b.length() < 1200) {
      b.append(Long.toHexString(r.nextLong()));
    }
    return b.toString();
  }

  static long expectedChars() {
    long chars = 0;
    for (int m = 0; m < MAPS; m++) {
      for (int i = 0; i < PER_MAP; i++) {
        int key = i % 3 == 0 ? 0 : 1 + (m * PER_MAP + i) % 500;
        chars += value(m, i, key).length();
      }
    }
    return chars;
  }
}
