package org.crossdock.bench;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.zip.CRC32;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.spark.HashPartitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * The benchmarks' key-ordered RDD shuffle, run in the JVM: PySpark's {@code sortByKey} sorts in
 * Python after a shuffle that carries no key ordering, so only the Scala/Java API shows what a
 * shuffle service does with one. Its input is GroupByTest's: {@code maps} tasks of seeded pairs,
 * a random int key and its own random value (incompressible, never the same twice).
 */
public final class SortByKeyJob {
  private SortByKeyJob() {}

  /**
   * Sorts {@code pairs} pairs with {@code valueBytes}-byte values from {@code maps} maps into
   * {@code partitions} partitions, checks that the output is in global key order, and returns
   * {count, checksum of every key and value}.
   */
  public static long[] sortByKey(JavaSparkContext jsc, long pairs, int maps, int partitions,
      int valueBytes) {
    long perMap = Math.max(1, pairs / maps);
    List<Integer> ids = indices(maps);
    JavaPairRDD<Integer, byte[]> input = jsc.parallelize(ids, maps)
        .flatMapToPair(m -> generate(m, perMap, valueBytes));
    List<long[]> parts = input.sortByKey(true, partitions).mapPartitions(SortByKeyJob::summary)
        .collect();
    long count = 0;
    long sum = 0;
    long prevLast = -1;
    for (long[] p : parts) {
      if (p[1] != 1 || (p[0] > 0 && p[2] < prevLast)) {
        throw new IllegalStateException("sortByKey output is not globally ordered");
      }
      if (p[0] > 0) {
        prevLast = p[3];
      }
      count += p[0];
      sum += p[4];
    }
    return new long[] {count, sum};
  }

  /**
   * The failure tests' job: {@code repartitionAndSortWithinPartitions} (a key-ordered shuffle
   * without the range partitioner's sampling job) of the same kind of pairs, with a gate in
   * {@code gateDir}: {@code block} "maps" holds the maps from index {@code maps / 2} on,
   * "reducers" holds every reduce task before it reads, until the file {@code go} exists (a
   * reducer first creates {@code reducer-started-P-A}). Returns {count, checksum, every
   * partition in key order (1/0), the count and checksum of the input, computed here}.
   */
  public static long[] sortWithinPartitionsGated(JavaSparkContext jsc, long pairs, int maps,
      int partitions, int valueBytes, String gateDir, String block) {
    long perMap = Math.max(1, pairs / maps);
    JavaPairRDD<Integer, byte[]> input = jsc.parallelize(indices(maps), maps).flatMapToPair(m -> {
      if (block.equals("maps") && m >= maps / 2) {
        waitFor(Paths.get(gateDir, "go"));
      }
      return generate(m, perMap, valueBytes);
    });
    List<long[]> parts = input
        .repartitionAndSortWithinPartitions(new HashPartitioner(partitions))
        .mapPartitions(it -> {
          if (block.equals("reducers")) {
            TaskContext tc = TaskContext.get();
            Files.write(Paths.get(gateDir,
                "reducer-started-" + tc.partitionId() + "-" + tc.attemptNumber()), new byte[0]);
            waitFor(Paths.get(gateDir, "go"));
          }
          return summary(it);
        })
        .collect();
    long count = 0;
    long sum = 0;
    long ordered = 1;
    for (long[] p : parts) {
      count += p[0];
      sum += p[4];
      ordered &= p[1];
    }
    long wantCount = 0;
    long wantSum = 0;
    for (int m = 0; m < maps; m++) {
      Iterator<Tuple2<Integer, byte[]>> it = generate(m, perMap, valueBytes);
      while (it.hasNext()) {
        Tuple2<Integer, byte[]> t = it.next();
        wantCount++;
        wantSum += checksum(t);
      }
    }
    return new long[] {count, sum, ordered, wantCount, wantSum};
  }

  private static List<Integer> indices(int n) {
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      ids.add(i);
    }
    return ids;
  }

  /** Map {@code m}'s pairs: seeded by the map index, so every run makes the same ones. */
  private static Iterator<Tuple2<Integer, byte[]>> generate(int m, long perMap, int valueBytes) {
    SplittableRandom rnd = new SplittableRandom(m);
    return new Iterator<Tuple2<Integer, byte[]>>() {
      long left = perMap;

      @Override
      public boolean hasNext() {
        return left > 0;
      }

      @Override
      public Tuple2<Integer, byte[]> next() {
        left--;
        byte[] v = new byte[valueBytes];
        rnd.nextBytes(v);
        return new Tuple2<>(rnd.nextInt(1 << 30), v);
      }
    };
  }

  private static long checksum(Tuple2<Integer, byte[]> t) {
    CRC32 crc = new CRC32();
    crc.update(t._2());
    return crc.getValue() ^ t._1();
  }

  /** One partition's {count, in key order (1/0), first key, last key, checksum}. */
  private static Iterator<long[]> summary(Iterator<Tuple2<Integer, byte[]>> it) {
    long n = 0;
    long ordered = 1;
    long first = -1;
    long last = -1;
    long sum = 0;
    while (it.hasNext()) {
      Tuple2<Integer, byte[]> t = it.next();
      if (n == 0) {
        first = t._1();
      } else if (t._1() < last) {
        ordered = 0;
      }
      last = t._1();
      n++;
      sum += checksum(t);
    }
    List<long[]> one = new ArrayList<>();
    one.add(new long[] {n, ordered, first, last, sum});
    return one.iterator();
  }

  private static void waitFor(java.nio.file.Path p) throws InterruptedException {
    while (!Files.exists(p)) {
      Thread.sleep(50);
    }
  }
}
