package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.FetchFailed;
import org.apache.spark.HashPartitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReader;
import org.crossdock.client.CoordinatorClient;
import org.crossdock.protocol.AttemptIds;
import scala.Product2;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.crossdock.client.CrossdockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import scala.Tuple2;

/**
 * Spark in local[2] with CrossdockShuffleManager against a real crossdock standalone. Runs twice:
 * with Java serialization (every shuffle through ExternalSorter, {@link CrossdockShuffleWriter})
 * and with Kryo ({@link SparkLocalKryoTest}: shuffles without map-side combine through {@link
 * CrossdockDirectWriter}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SparkLocalTest {
  CrossdockServer server;
  JavaSparkContext sc;

  /** Serializer-specific settings of this run. */
  SparkConf configure(SparkConf conf) {
    return conf;
  }

  /** Whether shuffles without map-side combine use the direct writer in this run. */
  boolean direct() {
    return false;
  }

  static SparkConf conf(String coordinator) {
    return new SparkConf()
        .setMaster("local[2]")
        .setAppName("crossdock-java-test")
        .set("spark.shuffle.manager", CrossdockShuffleManager.class.getName())
        .set("spark.crossdock.coordinator", coordinator)
        .set("spark.crossdock.push.batchSize", "4k")
        .set("spark.crossdock.push.maxInFlight", "64k")
        .set("spark.ui.enabled", "false")
        // A task that ends holding managed memory fails the test: the readers' fetch buffers
        // must all be given back, however the task ends.
        .set("spark.unsafe.exceptionOnMemoryLeak", "true")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1");
  }

  @BeforeAll
  void start() throws Exception {
    server = CrossdockServer.start();
    // The least fetch limit: merged reads come in many segments per run.
    sc = new JavaSparkContext(configure(conf(server.addr()))
        .set("spark.crossdock.fetch.maxInFlight", "1m"));
  }

  @AfterAll
  void stop() throws Exception {
    stop(sc, server);
  }

  /** Stops a test's Spark context, then its server (either may be null: a failed start). */
  static void stop(JavaSparkContext sc, CrossdockServer server) throws Exception {
    if (sc != null) {
      sc.stop();
    }
    if (server != null) {
      server.close();
    }
  }

  static List<Tuple2<Integer, Integer>> pairs(int n, int keys) {
    List<Tuple2<Integer, Integer>> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(new Tuple2<>(i % keys, i));
    }
    return out;
  }

  @Test
  void managerIsCrossdock() {
    assertInstanceOf(CrossdockShuffleManager.class, SparkEnv.get().shuffleManager());
    JavaPairRDD<Integer, Iterable<Integer>> grouped =
        sc.parallelizePairs(pairs(10, 2), 2).groupByKey(2);
    CrossdockShuffleHandle<?, ?, ?> h =
        (CrossdockShuffleHandle<?, ?, ?>) shuffleDep(grouped).shuffleHandle();
    assertEquals(direct(), h.framedBatches, "writer chosen for a shuffle without combine");
    JavaPairRDD<Integer, Integer> reduced = sc.parallelizePairs(pairs(10, 2), 2)
        .reduceByKey(Integer::sum, 2);
    assertFalse(((CrossdockShuffleHandle<?, ?, ?>) shuffleDep(reduced).shuffleHandle()).framedBatches,
        "map-side combine always goes through ExternalSorter");
  }

  @Test
  void aReadStoppedEarlyGivesBackItsFetchMemory() {
    JavaPairRDD<Integer, Integer> shuffled = sc.parallelizePairs(pairs(40_000, 1000), 4)
        .partitionBy(new HashPartitioner(3));
    // Each reduce task reads one record and stops: what it fetched ahead is still buffered when
    // it ends, and must go back (spark.unsafe.exceptionOnMemoryLeak fails the task otherwise).
    List<Integer> firsts = shuffled.mapPartitions(it -> {
      List<Integer> one = new ArrayList<>();
      if (it.hasNext()) {
        one.add(it.next()._2());
      }
      return one.iterator();
    }).collect();
    assertEquals(3, firsts.size());
    CrossdockShuffleHandle<?, ?, ?> h =
        (CrossdockShuffleHandle<?, ?, ?>) shuffleDep(shuffled).shuffleHandle();
    assertNotNull(h.accumulators);
    assertTrue(h.accumulators.fetchPeak.value() > 0, "the peak of the fetch buffers is reported");
  }

  /** Waits up to 60 s for {@code cond}; fails with {@code what} if it never holds. */
  static void await(java.util.function.BooleanSupplier cond, String what) throws Exception {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (!cond.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "timed out waiting until " + what);
      Thread.sleep(20);
    }
  }

  @Test
  void aFailedReduceTaskGivesBackItsFetchMemory() throws Exception {
    JavaPairRDD<Integer, Integer> shuffled = sc.parallelizePairs(pairs(40_000, 1000), 4)
        .partitionBy(new HashPartitioner(3));
    List<SparkListenerTaskEnd> ends = taskEnds("fails", () -> {
      Exception e = assertThrows(Exception.class, () -> shuffled.mapPartitions(it -> {
        it.next();
        throw new IllegalStateException("this reduce task fails on purpose mid-read");
      }).count());
      assertTrue(String.valueOf(e.getMessage()).contains("on purpose"), String.valueOf(e));
    });
    assertTrue(ends.stream().anyMatch(e -> e.reason() instanceof org.apache.spark.ExceptionFailure),
        "a reduce task failed: " + ends);
    // Tasks of the failed stage still running are cancelled asynchronously; once they end,
    // nothing the readers fetched ahead is held any more.
    await(() -> FetchMemoryConsumer.heldInThisJvm() == 0, "the readers hold no fetch memory");
  }

  /** Reduce tasks of the kill test that have started reading. */
  static final java.util.concurrent.atomic.AtomicInteger READING =
      new java.util.concurrent.atomic.AtomicInteger();

  @Test
  void aKilledReduceTaskGivesBackItsFetchMemory() throws Exception {
    JavaPairRDD<Integer, Integer> shuffled = sc.parallelizePairs(pairs(40_000, 1000), 4)
        .partitionBy(new HashPartitioner(3));
    assertEquals(40_000, shuffled.count()); // the maps are committed; the next job only reads
    // Tasks of earlier tests that were cancelled may still be ending.
    await(() -> FetchMemoryConsumer.heldInThisJvm() == 0, "earlier readers gave back all");
    READING.set(0);
    Events events = new Events("killed");
    sc.sc().addSparkListener(events);
    Thread job = new Thread(() -> {
      sc.setJobGroup("killed", "killed", true);
      try {
        shuffled.mapPartitions(it -> {
          it.next();
          READING.incrementAndGet(); // local mode: the same JVM, the same class
          Thread.sleep(300_000); // holds its read open until it is killed
          return List.of(1).iterator();
        }).count();
      } catch (Exception expected) {
        // the job is cancelled
      }
    });
    try {
      job.start();
      await(() -> READING.get() > 0 && FetchMemoryConsumer.heldInThisJvm() > 0,
          "a reduce task is reading and holds fetch memory");
      sc.cancelJobGroup("killed");
      job.join(60_000);
      assertFalse(job.isAlive(), "the cancelled job ended");
      await(() -> FetchMemoryConsumer.heldInThisJvm() == 0, "the killed readers gave back all");
      // The executor reports the kill after the task's completion listeners ran.
      await(() -> {
        synchronized (events.ends) {
          return events.ends.stream().anyMatch(e -> e.reason() instanceof org.apache.spark.TaskKilled);
        }
      }, "a reduce task was reported killed");
    } finally {
      sc.sc().removeSparkListener(events);
    }
  }

  @Test
  void reduceByKey() {
    JavaPairRDD<Integer, Integer> rdd = sc.parallelizePairs(pairs(20_000, 97), 4);
    Map<Integer, Integer> got = rdd.reduceByKey(Integer::sum, 5).collectAsMap();
    Map<Integer, Integer> want = new HashMap<>();
    for (Tuple2<Integer, Integer> t : pairs(20_000, 97)) {
      want.merge(t._1(), t._2(), Integer::sum);
    }
    assertEquals(want, new HashMap<>(got));
  }

  @Test
  void aShuffleOfNoMapsReadsNothing() {
    // A parent without partitions (an empty table, a scan whose every partition was pruned):
    // the shuffle has no maps, is never registered with the coordinator, and every reduce task
    // reads nothing. The parent's size is unknown, so the shuffle is Crossdock's, not routed.
    org.apache.spark.rdd.RDD<Tuple2<Integer, Integer>> pruned =
        org.apache.spark.rdd.PartitionPruningRDD.create(
            sc.parallelize(pairs(100, 7), 2).rdd(),
            (scala.Function1<Object, Object> & java.io.Serializable) i -> false);
    JavaPairRDD<Integer, Integer> none = new org.apache.spark.api.java.JavaRDD<>(pruned,
        scala.reflect.ClassTag$.MODULE$.<Tuple2<Integer, Integer>>apply(Tuple2.class))
        .mapToPair(t -> t);
    assertEquals(0, none.getNumPartitions());
    JavaPairRDD<Integer, Integer> reduced = none.reduceByKey(Integer::sum, 4);
    assertEquals(0, reduced.count());
    assertInstanceOf(CrossdockShuffleHandle.class, SparkRoutingTest.handle(reduced));
    assertEquals(0, none.groupByKey(3).collect().size());
  }

  @Test
  void groupByKeyAndEmptyPartitions() {
    // 3 keys over 50 partitions: most partitions are empty; one map is empty too.
    List<Tuple2<Integer, Integer>> data = pairs(3_000, 3);
    JavaPairRDD<Integer, Integer> rdd = sc.parallelizePairs(data, 3)
        .union(sc.parallelizePairs(new ArrayList<>(), 1));
    Map<Integer, Iterable<Integer>> got = rdd.groupByKey(50).collectAsMap();
    assertEquals(3, got.size());
    for (Map.Entry<Integer, Iterable<Integer>> e : got.entrySet()) {
      long sum = 0;
      int count = 0;
      for (int v : e.getValue()) {
        sum += v;
        count++;
      }
      assertEquals(1000, count);
      long want = 0;
      for (int i = e.getKey(); i < 3000; i += 3) {
        want += i;
      }
      assertEquals(want, sum);
    }
  }

  @Test
  void sortByKeyIsTotallyOrdered() {
    List<Integer> data = new ArrayList<>();
    java.util.Random r = new java.util.Random(7);
    for (int i = 0; i < 30_000; i++) {
      data.add(r.nextInt(1_000_000));
    }
    JavaPairRDD<Integer, Integer> rdd = sc.parallelize(data, 4).mapToPair(x -> new Tuple2<>(x, 1));
    List<Integer> got = rdd.sortByKey(true, 6).keys().collect();
    List<Integer> want = new ArrayList<>(data);
    want.sort(null);
    assertEquals(want, got);
  }

  /**
   * A key-ordered shuffle is pushed as sorted runs and merged by the reader: every partition is
   * in key order, holds exactly the records written (equal keys from many maps included), no
   * reduce task spills, and every byte written is read once. 40 maps of 4 KiB batches against a
   * 1 MiB fetch limit (set for this class) make every run come in several segments.
   */
  @Test
  void keyOrderedShufflesAreMergedFromSortedRuns() throws Exception {
    // Values of 128 random hex digits: about 40 KB per run after compression, several caps.
    List<Tuple2<Integer, String>> data = new ArrayList<>();
    java.util.Random r = new java.util.Random(11);
    for (int i = 0; i < 60_000; i++) {
      StringBuilder v = new StringBuilder().append(i).append(':');
      for (int j = 0; j < 16; j++) {
        v.append(String.format("%08x", r.nextInt()));
      }
      data.add(new Tuple2<>(r.nextInt(5_000), v.toString()));
    }
    JavaPairRDD<Integer, String> sorted = sc.parallelizePairs(data, 40)
        .repartitionAndSortWithinPartitions(new HashPartitioner(3));
    CrossdockShuffleHandle<?, ?, ?> h =
        (CrossdockShuffleHandle<?, ?, ?>) shuffleDep(sorted).shuffleHandle();
    assertTrue(h.sortedRuns(), "a key-ordered shuffle without aggregation is merged");
    assertFalse(h.framedBatches, "sorted runs are written by the sorter's writer");
    List<List<Tuple2<Integer, String>>> parts = new ArrayList<>();
    List<SparkListenerTaskEnd> ends = taskEnds("merged", () -> parts.addAll(sorted.glom().collect()));
    assertEquals(3, parts.size());
    Map<Integer, List<String>> got = new TreeMap<>();
    for (int p = 0; p < 3; p++) {
      int last = Integer.MIN_VALUE;
      for (Tuple2<Integer, String> t : parts.get(p)) {
        assertEquals(p, Math.floorMod(t._1().hashCode(), 3), "record in its partition");
        assertTrue(t._1() >= last, "partition " + p + " is in key order");
        last = t._1();
        got.computeIfAbsent(t._1(), k -> new ArrayList<>()).add(t._2());
      }
    }
    Map<Integer, List<String>> want = new TreeMap<>();
    for (Tuple2<Integer, String> t : data) {
      want.computeIfAbsent(t._1(), k -> new ArrayList<>()).add(t._2());
    }
    for (List<String> v : got.values()) {
      v.sort(null);
    }
    for (List<String> v : want.values()) {
      v.sort(null);
    }
    assertEquals(want, got, "every record read exactly once");
    long written = 0, read = 0, reduceSpill = 0, recordsRead = 0;
    for (SparkListenerTaskEnd e : ends) {
      if (e.taskMetrics() == null) {
        continue;
      }
      written += e.taskMetrics().shuffleWriteMetrics().bytesWritten();
      long r2 = e.taskMetrics().shuffleReadMetrics().localBytesRead()
          + e.taskMetrics().shuffleReadMetrics().remoteBytesRead();
      read += r2;
      recordsRead += e.taskMetrics().shuffleReadMetrics().recordsRead();
      if (e.taskMetrics().shuffleReadMetrics().recordsRead() > 0) {
        reduceSpill += e.taskMetrics().memoryBytesSpilled() + e.taskMetrics().diskBytesSpilled();
      }
    }
    assertEquals(written, read, "every byte written is read back once");
    assertEquals(60_000, recordsRead);
    assertEquals(0, reduceSpill, "the merge never spills");
    assertNotNull(h.accumulators);
    assertEquals(120L, h.accumulators.mergedRuns.value(),
        "each of the 3 reducers merged one run of each of the 40 maps");
    assertTrue(h.accumulators.mergeRequests.value() > h.accumulators.mergedRuns.value(),
        "runs were read in several segments each: " + h.accumulators.mergeRequests.value()
            + " requests for " + h.accumulators.mergedRuns.value() + " runs");
  }

  @Test
  void recordsLargerThanABatchAndJoin() {
    // Values of 20 KB with a 4 KB batch size: every record spans several batches.
    char[] big = new char[20_000];
    Arrays.fill(big, 'x');
    String s = new String(big);
    JavaPairRDD<Integer, String> left = sc.parallelize(Arrays.asList(0, 1, 2, 3, 4, 5, 6, 7), 3)
        .mapToPair(i -> new Tuple2<>(i, s + i));
    JavaPairRDD<Integer, Integer> right = sc.parallelize(Arrays.asList(1, 3, 5, 7, 9), 2)
        .mapToPair(i -> new Tuple2<>(i, i * 10));
    Map<Integer, Tuple2<String, Integer>> got = new TreeMap<>(left.join(right, 4).collectAsMap());
    assertEquals(List.of(1, 3, 5, 7), new ArrayList<>(got.keySet()));
    for (Map.Entry<Integer, Tuple2<String, Integer>> e : got.entrySet()) {
      assertEquals(s + e.getKey(), e.getValue()._1());
      assertEquals(e.getKey() * 10, e.getValue()._2());
    }
  }

  @Test
  void manyReducePartitions() {
    JavaRDD<Integer> rdd = sc.parallelize(java.util.stream.IntStream.range(0, 5000).boxed().toList(), 2);
    long distinct = rdd.map(x -> x % 2500).distinct(2100).count();
    assertEquals(2500, distinct);
  }

  /** The nearest shuffle dependency in an RDD's lineage. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static ShuffleDependency<Integer, Integer, Integer> shuffleDep(JavaPairRDD<?, ?> rdd) {
    org.apache.spark.rdd.RDD<?> r = rdd.rdd();
    while (true) {
      org.apache.spark.Dependency<?> d = r.dependencies().head();
      if (d instanceof ShuffleDependency) {
        return (ShuffleDependency) d;
      }
      r = d.rdd();
    }
  }

  @Test
  void mapRangeReadThroughTheManager() {
    // What AQE's skew splits and local shuffle reader ask for: maps [1, 3) of partitions [0, 2).
    JavaPairRDD<Integer, Integer> shuffled = sc.parallelizePairs(pairs(400, 4), 4)
        .partitionBy(new HashPartitioner(2));
    assertEquals(400, shuffled.count()); // runs the map stage
    ShuffleHandle handle = shuffleDep(shuffled).shuffleHandle();
    List<Integer> got = sc.parallelize(List.of(0), 1).flatMap(x -> {
      TaskContext ctx = TaskContext.get();
      ShuffleReader<Integer, Integer> reader = SparkEnv.get().shuffleManager().getReader(
          handle, 1, 3, 0, 2, ctx, ctx.taskMetrics().createTempShuffleReadMetrics());
      List<Integer> values = new ArrayList<>();
      scala.collection.Iterator<Product2<Integer, Integer>> it = reader.read();
      while (it.hasNext()) {
        values.add(it.next()._2());
      }
      return values.iterator();
    }).collect();
    List<Integer> sorted = new ArrayList<>(got);
    sorted.sort(null);
    List<Integer> want = new ArrayList<>();
    for (int i = 100; i < 300; i++) {
      want.add(i); // parallelize puts elements [100, 300) in slices 1 and 2
    }
    assertEquals(want, sorted);
  }

  /** Collects the task-end events of the jobs in job group {@code group}. */
  static final class Events extends SparkListener {
    final String group;
    final java.util.Set<Integer> stages = java.util.concurrent.ConcurrentHashMap.newKeySet();
    final List<SparkListenerTaskEnd> ends = java.util.Collections.synchronizedList(new ArrayList<>());

    Events(String group) {
      this.group = group;
    }

    @Override
    public void onJobStart(org.apache.spark.scheduler.SparkListenerJobStart e) {
      if (e.properties() != null && group.equals(e.properties().getProperty("spark.jobGroup.id"))) {
        scala.collection.Iterator<Object> it = e.stageIds().iterator();
        while (it.hasNext()) {
          stages.add((Integer) it.next());
        }
      }
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd e) {
      if (stages.contains(e.stageId())) {
        ends.add(e);
      }
    }
  }

  interface Job {
    void run() throws Exception;
  }

  /** Runs {@code job} in job group {@code group}; returns the task-end events of its jobs. */
  List<SparkListenerTaskEnd> taskEnds(String group, Job job) throws Exception {
    return taskEnds(sc, group, job);
  }

  /** As above, in {@code sc}. */
  static List<SparkListenerTaskEnd> taskEnds(JavaSparkContext sc, String group, Job job)
      throws Exception {
    Events events = new Events(group);
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
  void metricsAreFilled() throws Exception {
    List<SparkListenerTaskEnd> ends = taskEnds("metrics", () -> {
      long n = sc.parallelizePairs(pairs(10_000, 1000), 3).groupByKey(4).count();
      assertEquals(1000, n);
    });
    long written = 0, recordsWritten = 0, read = 0, recordsRead = 0, writeTime = 0;
    for (SparkListenerTaskEnd e : ends) {
      if (e.taskMetrics() == null) {
        continue;
      }
      written += e.taskMetrics().shuffleWriteMetrics().bytesWritten();
      recordsWritten += e.taskMetrics().shuffleWriteMetrics().recordsWritten();
      writeTime += e.taskMetrics().shuffleWriteMetrics().writeTime();
      // The workers run on this host: their bytes count as local, as Spark counts host-local
      // blocks.
      read += e.taskMetrics().shuffleReadMetrics().localBytesRead()
          + e.taskMetrics().shuffleReadMetrics().remoteBytesRead();
      recordsRead += e.taskMetrics().shuffleReadMetrics().recordsRead();
    }
    assertEquals(10_000, recordsWritten);
    assertEquals(10_000, recordsRead);
    assertTrue(written > 0);
    assertEquals(written, read, "every byte written is read back once");
    assertTrue(writeTime > 0);
  }

  @Test
  void lostShuffleDataIsAFetchFailure() throws Exception {
    JavaPairRDD<Integer, Integer> shuffled = sc.parallelizePairs(pairs(100, 10), 2)
        .partitionBy(new HashPartitioner(3));
    assertEquals(100, shuffled.count()); // maps committed; a later job reuses them
    int shuffleId = shuffleDep(shuffled).shuffleId();
    String appId = ((CrossdockShuffleHandle<?, ?, ?>) shuffleDep(shuffled).shuffleHandle()).appId;
    try (CoordinatorClient c = new CoordinatorClient(server.addr(), 3000, 10_000, appId,
        CrossdockServer.token(appId))) {
      c.unregisterShuffle(appId, shuffleId); // the workers drop the data
    }
    List<SparkListenerTaskEnd> ends =
        taskEnds("lost", () -> assertThrows(Exception.class, shuffled::collect));
    // Every reduce task that failed reports a typed FetchFailed; the first one is attributed to
    // the map being read and the executor that ran it (later ones may find the map output
    // already unregistered by Spark's recovery and fall back to a stage-level retry).
    List<FetchFailed> ffs = new ArrayList<>();
    for (SparkListenerTaskEnd e : ends) {
      if (e.reason() instanceof FetchFailed f) {
        ffs.add(f);
      }
    }
    assertFalse(ffs.isEmpty(), "a reduce task failed with a typed FetchFailed");
    for (FetchFailed f : ffs) {
      assertEquals(shuffleId, f.shuffleId());
      assertTrue(f.message().contains("Crossdock fetch"), f.message());
    }
    assertTrue(ffs.stream().anyMatch(f -> f.bmAddress() != null && f.mapIndex() >= 0),
        "attributed to the executor that ran the map: " + ffs);
  }

  @Test
  void unreachableCoordinatorFailsFast() throws Exception {
    String addr = CrossdockServer.unusedAddr();
    long t0 = System.nanoTime();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> new CrossdockShuffleManager(conf(addr), true));
    assertTrue(e.getMessage().contains(addr), e.getMessage());
    assertTrue(e.getMessage().contains("spark.crossdock.coordinator"), e.getMessage());
    assertTrue(System.nanoTime() - t0 < 10_000_000_000L);
  }

  @Test
  void attemptIdsAreUniqueAcrossTaskAndStageAttempts() {
    java.util.Set<Integer> seen = new java.util.HashSet<>();
    for (int stage = 0; stage < 8; stage++) {
      for (int task = 0; task < 8; task++) {
        int id = AttemptIds.of(stage, task);
        assertTrue(seen.add(id));
        assertNotEquals(AttemptIds.NO_ATTEMPT, id);
        assertEquals(stage, AttemptIds.generation(id));
      }
    }
  }
}
