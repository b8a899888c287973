package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.crossdock.client.CrossdockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import scala.Tuple2;

/**
 * The direct writer's buffers and unacknowledged frames are execution memory: in an executor whose
 * memory pool is far below the push window ({@code spark.crossdock.push.maxInFlight}, 32 MiB by
 * default), a map task pushes what it buffered when Spark grants no more, and waits for
 * acknowledgements before it pushes more than Spark grants, so its memory stays within the pool
 * (before, buffers and frames each grew to the window whatever the heap held, and a small executor
 * ran out of heap in the map stage where vanilla Spark spilled).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkPushMemoryTest {
  /** Spark's memory pool here: 60% of 16 MiB, nothing reserved. */
  static final long POOL = (long) (0.6 * (16 << 20));

  CrossdockServer server;
  JavaSparkContext sc;

  @BeforeAll
  void start() throws Exception {
    server = CrossdockServer.start();
    sc = new JavaSparkContext(SparkLocalTest.conf(server.addr())
        .setMaster("local[1]")
        .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .set("spark.crossdock.push.batchSize", "1m")
        .set("spark.crossdock.push.maxInFlight", "32m")
        .set("spark.testing.memory", String.valueOf(16 << 20))
        .set("spark.testing.reservedMemory", "0"));
  }

  @AfterAll
  void stop() throws Exception {
    SparkLocalTest.stop(sc, server);
  }

  @Test
  void aMapTaskBuffersNoMoreThanSparkGrantsIt() {
    List<Integer> seeds = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      seeds.add(i);
    }
    // Two map tasks of 20 MiB each (100,000 records of ~200 bytes) over 64 partitions.
    JavaPairRDD<Integer, String> pairs = sc.parallelize(seeds, 2).flatMapToPair(seed -> {
      List<Tuple2<Integer, String>> out = new ArrayList<>();
      String pad = "x".repeat(190);
      for (int i = 0; i < 100_000; i++) {
        out.add(new Tuple2<>(seed * 100_000 + i, pad));
      }
      return out.iterator();
    });
    PushBufferMemory.resetPeak();
    JavaPairRDD<Integer, String> shuffled = pairs.partitionBy(new HashPartitioner(64));
    assertTrue(((CrossdockShuffleHandle<?, ?, ?>) SparkLocalTest.shuffleDep(shuffled).shuffleHandle())
        .framedBatches, "the direct writer");
    long keys = shuffled.keys().map(Integer::longValue).reduce(Long::sum);
    assertEquals(199_999L * 200_000L / 2, keys, "every record read once");
    assertEquals(200_000L, shuffled.count());
    long peak = PushBufferMemory.peakInThisJvm();
    assertTrue(peak > 0, "the writer's memory was seen");
    // At most the pool, and what a refusal leaves uncounted: one frame (at most a batch) or one
    // record's buffer.
    assertTrue(peak <= POOL + (1 << 20), "the writer's memory peaked at " + peak + " bytes; the pool is " + POOL);
  }
}
