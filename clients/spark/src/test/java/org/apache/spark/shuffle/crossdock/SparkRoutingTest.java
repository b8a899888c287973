package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.shuffle.ShuffleHandle;
import org.crossdock.client.CrossdockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import scala.Tuple2;

/**
 * Auto-routing in a real Spark (local[2]) against a real crossdock standalone: shuffles known
 * to be small go through Spark's sort shuffle, the others through Crossdock, in one job, with
 * the exact results either way. The threshold is 16 KiB here so that small files show both
 * routes.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkRoutingTest {
  CrossdockServer server;
  JavaSparkContext sc;
  @TempDir Path dir;

  @BeforeAll
  void start() throws Exception {
    server = CrossdockServer.start();
    sc = new JavaSparkContext(SparkLocalTest.conf(server.addr())
        .set(CrossdockConf.ROUTE_MAX_SPARK_SIZE, "16k"));
  }

  @AfterAll
  void stop() throws Exception {
    SparkLocalTest.stop(sc, server);
  }

  static CrossdockShuffleManager manager() {
    return (CrossdockShuffleManager) SparkEnv.get().shuffleManager();
  }

  static ShuffleHandle handle(JavaPairRDD<?, ?> rdd) {
    return ((ShuffleDependency<?, ?, ?>) rdd.rdd().dependencies().head()).shuffleHandle();
  }

  /** A text file of {@code lines} numbers, 0 to lines - 1. */
  Path numbers(String name, int lines) throws IOException {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < lines; i++) {
      b.append(i).append('\n');
    }
    Path p = dir.resolve(name);
    Files.writeString(p, b);
    return p;
  }

  static Map<Integer, Long> sumsByKey(int lines, int keys) {
    Map<Integer, Long> m = new TreeMap<>();
    for (int i = 0; i < lines; i++) {
      m.merge(i % keys, (long) i, Long::sum);
    }
    return m;
  }

  @Test
  void aSmallFileIsShuffledBySparkABigOneByCrossdock() throws Exception {
    long sparkBefore = manager().shufflesThroughSpark();
    long crossdockBefore = manager().shufflesThroughCrossdock();
    Path small = numbers("small.txt", 1_000); // 3.9 KB
    Path big = numbers("big.txt", 20_000); // 109 KB
    JavaPairRDD<Integer, Long> smallSums = sc.textFile(small.toString(), 2)
        .mapToPair(l -> new Tuple2<>(Integer.parseInt(l) % 7, Long.parseLong(l)))
        .reduceByKey(Long::sum, 3);
    JavaPairRDD<Integer, Long> bigSums = sc.textFile(big.toString(), 2)
        .mapToPair(l -> new Tuple2<>(Integer.parseInt(l) % 7, Long.parseLong(l)))
        .reduceByKey(Long::sum, 3);
    assertFalse(handle(smallSums) instanceof CrossdockShuffleHandle, "3.9 KB is small");
    assertInstanceOf(CrossdockShuffleHandle.class, handle(bigSums), "109 KB is not");
    assertEquals(sparkBefore + 1, manager().shufflesThroughSpark());
    assertEquals(crossdockBefore + 1, manager().shufflesThroughCrossdock());
    assertEquals(sumsByKey(1_000, 7), new TreeMap<>(smallSums.collectAsMap()));
    assertEquals(sumsByKey(20_000, 7), new TreeMap<>(bigSums.collectAsMap()));

    // A join of the two into 2 partitions shuffles both sides again; they have run, and
    // their 7 records each are small: both join shuffles go through Spark, one reading a
    // routed shuffle's output on its map side, the other a Crossdock one.
    List<Tuple2<Integer, Tuple2<Long, Long>>> joined =
        new ArrayList<>(smallSums.join(bigSums, 2).collect());
    assertEquals(sparkBefore + 3, manager().shufflesThroughSpark());
    joined.sort((a, b) -> a._1() - b._1());
    Map<Integer, Long> s = sumsByKey(1_000, 7);
    Map<Integer, Long> g = sumsByKey(20_000, 7);
    assertEquals(7, joined.size());
    for (Tuple2<Integer, Tuple2<Long, Long>> t : joined) {
      assertEquals(s.get(t._1()), t._2()._1());
      assertEquals(g.get(t._1()), t._2()._2());
    }
  }

  @Test
  void aBigShuffleIntoOnePartitionIsShuffledBySpark() throws Exception {
    long sparkBefore = manager().shufflesThroughSpark();
    Path big = numbers("big-one.txt", 20_000); // 109 KB, above the 16k threshold
    JavaPairRDD<Integer, Long> total = sc.textFile(big.toString(), 3)
        .mapToPair(l -> new Tuple2<>(Integer.parseInt(l) % 7, Long.parseLong(l)))
        .reduceByKey(Long::sum, 1);
    assertFalse(handle(total) instanceof CrossdockShuffleHandle, "one partition: one block per map");
    assertEquals(sparkBefore + 1, manager().shufflesThroughSpark());
    assertEquals(sumsByKey(20_000, 7), new TreeMap<>(total.collectAsMap()));
  }

  @Test
  void aShuffleOfAFinishedSmallShuffleIsEstimatedFromItsMapOutputs() throws Exception {
    // The parent is unknown at registration (a parallelized collection): Crossdock.
    List<Tuple2<Integer, Integer>> pairs = SparkLocalTest.pairs(2_000, 50);
    JavaPairRDD<Integer, Integer> first = sc.parallelizePairs(pairs, 2).reduceByKey(Integer::sum, 4);
    assertInstanceOf(CrossdockShuffleHandle.class, handle(first));
    Map<Integer, Integer> expected = new TreeMap<>(first.collectAsMap());
    // Once it ran, a shuffle reading it knows its size (50 small records): Spark's shuffle,
    // reading Crossdock's output on its map side.
    JavaPairRDD<Integer, Integer> second = first.mapToPair(t -> new Tuple2<>(t._1() % 5, t._2()))
        .reduceByKey(Integer::sum, 3);
    assertFalse(handle(second) instanceof CrossdockShuffleHandle,
        "the finished parent shuffle is small");
    // A shuffle registered before its parent (the routed one) ran: unknown size, Crossdock.
    JavaPairRDD<Integer, Integer> third = second.mapToPair(t -> new Tuple2<>(t._1() % 2, t._2()))
        .partitionBy(new org.apache.spark.HashPartitioner(2));
    assertInstanceOf(CrossdockShuffleHandle.class, handle(third));
    Map<Integer, Integer> got = new TreeMap<>();
    for (Tuple2<Integer, Integer> t : third.collect()) {
      got.merge(t._1(), t._2(), Integer::sum);
    }
    Map<Integer, Integer> want = new TreeMap<>();
    expected.forEach((k, v) -> want.merge(k % 5, v, Integer::sum));
    assertEquals(want, new TreeMap<>(second.collectAsMap()));
    Map<Integer, Integer> want3 = new TreeMap<>();
    want.forEach((k, v) -> want3.merge(k % 2, v, Integer::sum));
    assertEquals(want3, got);
  }
}
