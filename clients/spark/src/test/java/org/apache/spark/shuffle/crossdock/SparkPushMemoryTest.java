package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.HashPartitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.MemoryMode;
import org.apache.spark.memory.TaskMemoryManager;
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
 * ran out of heap in the map stage where vanilla Spark spilled). The sorting writer's batches are
 * held the same way.
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
    sc = new JavaSparkContext(conf(server.addr()));
  }

  /** One task slot of 16 MiB, nothing reserved: Spark's pool is {@link #POOL}. */
  static org.apache.spark.SparkConf conf(String coordinator) {
    return SparkLocalTest.conf(coordinator)
        .setMaster("local[1]")
        .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .set("spark.crossdock.push.batchSize", "1m")
        .set("spark.crossdock.push.maxInFlight", "32m")
        .set("spark.testing.memory", String.valueOf(16 << 20))
        .set("spark.testing.reservedMemory", "0");
  }

  @AfterAll
  void stop() throws Exception {
    SparkLocalTest.stop(sc, server);
  }

  JavaPairRDD<Integer, String> pairs(int maps) {
    return pairs(sc, maps);
  }

  /** 40 MB in {@code maps} map tasks: keys 0 to 199,999, each with ~200 bytes. */
  static JavaPairRDD<Integer, String> pairs(JavaSparkContext sc, int maps) {
    List<Integer> seeds = new ArrayList<>();
    for (int m = 0; m < maps; m++) {
      seeds.add(m);
    }
    int each = 200_000 / maps;
    return sc.parallelize(seeds, maps).flatMapToPair(seed -> {
      List<Tuple2<Integer, String>> out = new ArrayList<>();
      String pad = "x".repeat(190);
      for (int i = 0; i < each; i++) {
        out.add(new Tuple2<>(seed * each + i, pad));
      }
      return out.iterator();
    });
  }

  /** The sum of {@code rdd}'s keys (199,999 × 200,000 / 2 for {@link #pairs}). */
  static long keySum(JavaPairRDD<Integer, String> rdd) {
    return rdd.keys().map(Integer::longValue).reduce(Long::sum);
  }

  static boolean direct(JavaPairRDD<Integer, String> shuffled) {
    return ((CrossdockShuffleHandle<?, ?, ?>) SparkLocalTest.shuffleDep(shuffled).shuffleHandle())
        .framedBatches;
  }

  @Test
  void aMapTaskBuffersNoMoreThanSparkGrantsIt() {
    PushBufferMemory.resetCounters();
    // Two map tasks of 20 MB each over 64 partitions.
    JavaPairRDD<Integer, String> shuffled = pairs(2).partitionBy(new HashPartitioner(64));
    assertTrue(direct(shuffled), "the direct writer");
    assertEquals(199_999L * 200_000L / 2, keySum(shuffled), "every record read once");
    assertEquals(200_000L, shuffled.count());
    long peak = PushBufferMemory.peakInThisJvm();
    assertTrue(peak > 0, "the writer's memory was seen");
    // At most the pool, and what a refusal leaves uncounted: one frame (at most a batch) or one
    // record's buffer.
    assertTrue(peak <= POOL + (1 << 20), "the writer's memory peaked at " + peak + " bytes; the pool is " + POOL);
  }

  /**
   * The sorting writer (a key-ordered shuffle, whose map sorter pushes its spills as sorted runs)
   * holds the batches awaiting acknowledgement as the task's execution memory: when the task's
   * share is taken (here by another consumer of the task holding all but 3 MiB, and the sorter
   * growing into the rest) and the sorter spills, a run's batches find no room and wait for the
   * acknowledgements (all but {@link CrossdockConf#uncountedFrameBytes}) instead of filling the 32
   * MiB push window beside the records being spilled (where a map task of a small executor ran out
   * of heap); every record arrives once, in order.
   */
  @Test
  void theSortingWritersBatchesWaitForRoomWhenTheTasksShareIsTaken() {
    sortWithTheTasksShareTaken(sc);
    // What went uncounted stayed within the allowance: a sixty-fourth of the 16 MiB slot.
    long uncounted = PushBufferMemory.peakUncountedInThisJvm();
    assertTrue(uncounted > 0 && uncounted <= ALLOWANCE,
        "frames in flight uncounted peaked at " + uncounted + " bytes");
  }

  /** {@link CrossdockConf#uncountedFrameBytes} of a 16 MiB slot. */
  static final long ALLOWANCE = 256 << 10;

  /**
   * Sorts {@link #pairs} by key in 8 partitions with another consumer of each map task holding
   * all of the pool but 3 MiB, checks that every record arrives once and in order and that Spark
   * refused the sorting writer's frames room; the counters are reset first. Returns the shuffle's
   * handle (its accumulators hold the map tasks' figures).
   */
  static CrossdockShuffleHandle<?, ?, ?> sortWithTheTasksShareTaken(JavaSparkContext sc) {
    assertEquals(ALLOWANCE, new CrossdockConf(sc.getConf()).uncountedFrameBytes);
    // Each value a string of its own (pairs' values share one), so that the sorter's records take
    // their size in the heap and it spills.
    JavaPairRDD<Integer, String> sorted = pairs(sc, 2)
        .mapToPair(t -> new Tuple2<>(t._1(), t._2() + t._1()))
        .mapPartitionsToPair(SparkPushMemoryTest::holdingAllBut3MiB, true)
        .sortByKey(true, 8);
    CrossdockShuffleHandle<?, ?, ?> handle =
        (CrossdockShuffleHandle<?, ?, ?>) SparkLocalTest.shuffleDep(sorted).shuffleHandle();
    assertFalse(handle.framedBatches, "the sorting writer");
    assertTrue(handle.spillRuns, "spills pushed as runs");
    PushBufferMemory.resetCounters();
    List<Integer> keys = sorted.keys().collect();
    assertEquals(200_000, keys.size(), "every record once");
    for (int i = 0; i < keys.size(); i++) {
      assertEquals(i, keys.get(i), "key order at " + i);
    }
    assertTrue(PushBufferMemory.framesRefusedInThisJvm() > 0,
        "no batch was refused room: the sorting writer's frames were not the task's memory");
    return handle;
  }

  /** {@code it}, with a consumer of the task holding all of the pool but 3 MiB while it is read. */
  static java.util.Iterator<Tuple2<Integer, String>> holdingAllBut3MiB(
      java.util.Iterator<Tuple2<Integer, String>> it) {
    Hungry h = new Hungry(TaskContext.get().taskMemoryManager());
    h.granted = h.acquireMemory(POOL - (3 << 20));
    return new java.util.Iterator<>() {
      @Override
      public boolean hasNext() {
        boolean more = it.hasNext();
        if (!more && h.granted > 0) {
          h.freeMemory(h.granted);
          h.granted = 0;
        }
        return more;
      }

      @Override
      public Tuple2<Integer, String> next() {
        return it.next();
      }
    };
  }

  /** An operator upstream of the writer in the same task that needs execution memory midway. */
  static final class Hungry extends MemoryConsumer {
    long granted;

    Hungry(TaskMemoryManager tmm) {
      super(tmm, MemoryMode.ON_HEAP);
    }

    @Override
    public long spill(long size, MemoryConsumer trigger) {
      return 0;
    }
  }

  /**
   * Another consumer of the map task (as a SQL aggregate or sort before the exchange would be)
   * asks for the whole pool while the writer holds part of it: Spark asks the writer to give memory
   * back ({@code spill}), the writer pushes what it buffered without waiting for acknowledgements,
   * the other consumer gets its memory, and every record still arrives once.
   */
  @Test
  void anotherConsumerOfTheTaskMakesTheWriterPushAndEveryRecordArrivesOnce() {
    JavaPairRDD<Integer, String> hungry =
        pairs(2).mapPartitionsToPair(SparkPushMemoryTest::hungryMidway, true);
    JavaPairRDD<Integer, String> shuffled = hungry.partitionBy(new HashPartitioner(64));
    assertTrue(direct(shuffled), "the direct writer");
    PushBufferMemory.resetCounters();
    GRANTED.set(0);
    assertEquals(199_999L * 200_000L / 2, keySum(shuffled), "every record read once");
    assertTrue(PushBufferMemory.spillsInThisJvm() > 0, "the other consumer's request made the writer push");
    // Everything but what the writer could not give back (the frames it pushed, until acknowledged).
    assertTrue(GRANTED.get() >= POOL / 2, "the other consumer got " + GRANTED.get() + " of " + POOL);
  }

  /**
   * {@code it}, with a {@link Hungry} consumer of the task that asks for the whole pool at the
   * 60,000th record (the writer holds part of it then) and gives what it got back 1,000 records
   * later. (Static: a lambda's anonymous class would
   * capture the test.)
   */
  static java.util.Iterator<Tuple2<Integer, String>> hungryMidway(
      java.util.Iterator<Tuple2<Integer, String>> it) {
    Hungry h = new Hungry(TaskContext.get().taskMemoryManager());
    return new java.util.Iterator<>() {
      int seen;

      @Override
      public boolean hasNext() {
        boolean more = it.hasNext();
        if (!more) {
          giveBack();
        }
        return more;
      }

      @Override
      public Tuple2<Integer, String> next() {
        if (++seen == 60_000) {
          h.granted = h.acquireMemory(POOL);
          GRANTED.accumulateAndGet(h.granted, Math::max);
        } else if (seen == 61_000) {
          giveBack();
        }
        return it.next();
      }

      private void giveBack() {
        if (h.granted > 0) {
          h.freeMemory(h.granted);
          h.granted = 0;
        }
      }
    };
  }

  /** The largest grant the other consumer got (tasks run in this JVM: local mode). */
  static final java.util.concurrent.atomic.AtomicLong GRANTED = new java.util.concurrent.atomic.AtomicLong();
}
