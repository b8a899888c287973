package org.apache.spark.shuffle.crossdock;

import org.apache.spark.SparkConf;
import org.apache.spark.network.util.JavaUtils;
import org.crossdock.client.TaskWindows;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.RunSizes;
import org.crossdock.client.route.RoutePolicy;

/**
 * The {@code spark.crossdock.*} keys (documented in clients/spark/README.md). Only the
 * coordinator is required; everything else has a default meant to be left alone.
 */
public final class CrossdockConf {
  public static final String COORDINATOR = "spark.crossdock.coordinator";
  public static final String PUSH_BATCH_SIZE = "spark.crossdock.push.batchSize";
  public static final String PUSH_MAX_IN_FLIGHT = "spark.crossdock.push.maxInFlight";
  public static final String NETWORK_TIMEOUT = "spark.crossdock.network.timeout";
  public static final String FETCH_MAX_IN_FLIGHT = "spark.crossdock.fetch.maxInFlight";
  public static final String FETCH_POLICY = "spark.crossdock.fetch.policy";
  public static final String ROUTE = "spark.crossdock.route";
  public static final String ROUTE_MAX_SPARK_SIZE = "spark.crossdock.route.maxSparkShuffleSize";
  /** Whether SQL reduce tasks prefer the hosts of their partitions' workers. */
  public static final String LOCALITY = "spark.crossdock.locality";
  /** Key-ordered shuffles pushed as sorted runs and merged once by the reader (default on). */
  public static final String MERGE_SORTED_RUNS = "spark.crossdock.mergeSortedRuns";
  /** PEM file of the authorities the Crossdock servers' certificates are checked against. */
  public static final String TLS_CA = "spark.crossdock.tls.ca";
  /** Most shuffle bytes this application may store on one worker, if less than the workers allow. */
  public static final String APP_STORED_QUOTA = "spark.crossdock.app.storedQuota";
  /** The share (0 to 1] of a worker's memory this application may hold, if less than allowed. */
  public static final String APP_MEMORY_SHARE = "spark.crossdock.app.memoryShare";

  public static final String DEFAULT_BATCH_SIZE = "1m";
  public static final String DEFAULT_MAX_IN_FLIGHT = "32m";
  public static final String DEFAULT_NETWORK_TIMEOUT = "120s";
  /** Spark's own default for {@code spark.reducer.maxSizeInFlight}. */
  public static final String DEFAULT_FETCH_MAX_IN_FLIGHT = "48m";
  public static final String DEFAULT_ROUTE_MAX_SPARK_SIZE = "64m";

  /** Not keys: fixed choices. */
  public static final int CONNECT_TIMEOUT_MS = 5_000;
  public static final int LEASE_MS = 60_000;
  public static final int FETCH_MAX_RESUMES = 3;
  /** A reader blocked this long on a copy, and 4 times what the other copy takes, moves away. */
  public static final long FETCH_MOVE_AWAY_MS = 200;
  /** The workers' batch limit (docs/protocol.md, "Limits"). */
  public static final long MAX_BATCH = 16L << 20;

  public final String coordinator;
  public final int batchSize;
  public final long maxInFlight;
  public final long networkTimeoutMs;
  /** The hard in-flight limit of a reduce task's reads. */
  public final long fetchMaxInFlight;
  /** How a reduce task plans its reads. */
  public final FetchScheduler.Policy fetchPolicy;
  /** Which shuffles go through Crossdock and which through Spark's own sort shuffle. */
  public final RoutePolicy route;
  /** SQL reduce tasks prefer their partitions' hosts ({@link #LOCALITY}, default on). */
  public final boolean locality;
  /** {@link #MERGE_SORTED_RUNS}. */
  public final boolean mergeSortedRuns;
  /** TLS to the servers, or null for plain TCP (when {@link #TLS_CA} is not set). */
  public final org.crossdock.client.Tls tls;
  /** {@link #APP_STORED_QUOTA} in bytes, 0 when not set. */
  public final long appStoredQuota;
  /** {@link #APP_MEMORY_SHARE} in parts per million, 0 when not set. */
  public final long appMemorySharePpm;
  /** The most a merged shuffle's map sorter holds before it spills: see {@link #MAP_RUN_PARTS}. */
  public final long mapRunBytes;
  /**
   * The most bytes of pushed frames a map task keeps unacknowledged beyond what Spark granted it
   * ({@link PushBufferMemory#holdFrame}): a quarter of the push window, and at most a sixty-fourth
   * of a task slot's heap ({@link #UNCOUNTED_FRAME_HEAP_PARTS}); one frame when a frame is larger.
   */
  public final long uncountedFrameBytes;


  /**
   * The share of a task slot's heap a merged shuffle's map sorter may hold before it spills (a
   * third), while its spills are pushed as sorted runs ({@link SpillRuns#toAsk}): a pushed run
   * costs the map no disk and no merge, so filling Spark's whole share first (60% of the heap
   * above Spark's reserve, for one task) buys it nothing and leaves the task's heap no room for
   * anything else (a 4 GB RDD sort's maps ran out of it; bench/min_memory.py --workloads
   * rdd-sort). Where Spark grants less, Spark decides; so it does for the spills after the runs,
   * which go to disk. The slots count {@code spark.executor.cores}, 1 when not set.
   */
  static final int MAP_RUN_PARTS = 3;

  /**
   * When Spark grants a map task no room for a frame (its share is held by its sorter or by
   * another consumer), it is pushed uncounted once the frames unacknowledged beyond what Spark
   * counts, this one included, fit in {@link #uncountedFrameBytes} (or it is the only one, when a
   * frame is larger), and waits for acknowledgements until then: a few frames stay in flight
   * instead of one per round trip. A sixty-fourth of the slot's heap (8 MiB of a 512 MiB slot,
   * 2.5 MiB of a 160 MiB one) is of the order of what Spark itself lets a sorter hold without
   * asking (5 MiB).
   */
  static final int UNCOUNTED_FRAME_HEAP_PARTS = 64;

  /**
   * The heap a task slot of an executor has, the same on the driver and on the executors (the
   * driver sizes sorted runs' batches for the executors' fetch window): {@code
   * spark.testing.memory} when set (as Spark's memory manager reads it); in local mode the driver
   * JVM's heap over the master's threads; otherwise {@code spark.executor.memory} (Spark's default
   * 1g) over the task slots, {@code spark.executor.cores} (1 when not set: where executors take
   * every core of their worker and the key is not set, the windows are not scaled down) over
   * {@code spark.task.cpus}.
   */
  static long heapPerTask(SparkConf conf) {
    int cpus = Math.max(1, conf.getInt("spark.task.cpus", 1));
    int localThreads = localThreads(conf.get("spark.master", ""));
    long heap;
    int cores;
    if (localThreads > 0) {
      heap = Runtime.getRuntime().maxMemory();
      cores = localThreads;
    } else {
      heap = conf.getSizeAsBytes("spark.executor.memory", "1g");
      cores = conf.getInt("spark.executor.cores", 1);
    }
    heap = conf.getLong("spark.testing.memory", heap);
    return heap / Math.max(1, cores / cpus);
  }

  /**
   * The task threads of a local master ({@code local}, {@code local[N]}, {@code local[*]}, {@code
   * local[N,F]}), or 0 for any other master (local-cluster's executors are JVMs of their own):
   * Spark's own reading of the master ({@code SparkContext.numDriverCores}).
   */
  static int localThreads(String master) {
    return org.apache.spark.SparkContext$.MODULE$.numDriverCores(master.trim());
  }

  public CrossdockConf(SparkConf conf) {
    String c = conf.get(COORDINATOR, "").trim();
    if (c.isEmpty()) {
      throw new IllegalArgumentException(COORDINATOR + " is not set: set it to the host:port of "
          + "the Crossdock coordinator (`crossdock spark-conf --coordinator HOST:PORT` prints "
          + "every property Crossdock needs)");
    }
    this.coordinator = c;
    long b = conf.getSizeAsBytes(PUSH_BATCH_SIZE, DEFAULT_BATCH_SIZE);
    if (b < 1024 || b > MAX_BATCH) {
      throw new IllegalArgumentException(PUSH_BATCH_SIZE + " must be between 1k and 16m, got " + b);
    }
    this.batchSize = (int) b;
    long heapPerTask = heapPerTask(conf);
    this.maxInFlight = conf.contains(PUSH_MAX_IN_FLIGHT)
        ? Math.max(conf.getSizeAsBytes(PUSH_MAX_IN_FLIGHT), 1)
        : TaskWindows.windowFor(heapPerTask, JavaUtils.byteStringAsBytes(DEFAULT_MAX_IN_FLIGHT),
            TaskWindows.PUSH_PARTS);
    this.networkTimeoutMs = Math.max(conf.getTimeAsMs(NETWORK_TIMEOUT, DEFAULT_NETWORK_TIMEOUT), 1000);
    this.mapRunBytes = heapPerTask / MAP_RUN_PARTS;
    this.uncountedFrameBytes = Math.min(maxInFlight / 4, heapPerTask / UNCOUNTED_FRAME_HEAP_PARTS);
    this.fetchMaxInFlight = conf.contains(FETCH_MAX_IN_FLIGHT)
        ? conf.getSizeAsBytes(FETCH_MAX_IN_FLIGHT)
        : TaskWindows.windowFor(heapPerTask,
            JavaUtils.byteStringAsBytes(DEFAULT_FETCH_MAX_IN_FLIGHT), TaskWindows.FETCH_PARTS);
    if (fetchMaxInFlight < (1 << 20)) {
      throw new IllegalArgumentException(FETCH_MAX_IN_FLIGHT + " must be at least 1m, got "
          + fetchMaxInFlight);
    }
    String policy = conf.get(FETCH_POLICY, "adaptive").trim();
    switch (policy) {
      case "adaptive" -> this.fetchPolicy = FetchScheduler.Policy.ADAPTIVE;
      case "static" -> this.fetchPolicy = FetchScheduler.Policy.STATIC;
      default -> throw new IllegalArgumentException(
          FETCH_POLICY + " must be adaptive or static, got '" + policy + "'");
    }
    this.locality = conf.getBoolean(LOCALITY, true);
    this.mergeSortedRuns = conf.getBoolean(MERGE_SORTED_RUNS, true);
    String ca = conf.get(TLS_CA, "").trim();
    this.tls = ca.isEmpty() ? null : org.crossdock.client.Tls.trusting(java.nio.file.Path.of(ca));
    RoutePolicy.Mode mode = RoutePolicy.Mode.parse(ROUTE, conf.get(ROUTE, "auto"));
    long maxSpark = conf.getSizeAsBytes(ROUTE_MAX_SPARK_SIZE, DEFAULT_ROUTE_MAX_SPARK_SIZE);
    if (maxSpark < 0) {
      throw new IllegalArgumentException(ROUTE_MAX_SPARK_SIZE + " must not be negative, got "
          + maxSpark);
    }
    this.route = new RoutePolicy(mode, maxSpark, sparkShuffleUnavailable(conf));
    this.appStoredQuota = conf.contains(APP_STORED_QUOTA)
        ? conf.getSizeAsBytes(APP_STORED_QUOTA) : 0;
    if (conf.contains(APP_STORED_QUOTA) && appStoredQuota <= 0) {
      throw new IllegalArgumentException(APP_STORED_QUOTA + " must be positive, got "
          + conf.get(APP_STORED_QUOTA));
    }
    double share = conf.getDouble(APP_MEMORY_SHARE, 0);
    if (conf.contains(APP_MEMORY_SHARE) && !(share > 0 && share <= 1)) {
      throw new IllegalArgumentException(APP_MEMORY_SHARE + " must be above 0 and at most 1, got "
          + conf.get(APP_MEMORY_SHARE));
    }
    this.appMemorySharePpm = Math.round(share * 1_000_000);
    if (conf.contains(APP_MEMORY_SHARE) && appMemorySharePpm == 0) {
      throw new IllegalArgumentException(APP_MEMORY_SHARE + " is below a millionth, the finest "
          + "share a worker keeps: " + conf.get(APP_MEMORY_SHARE));
    }
  }

  /**
   * Why Spark's own shuffle cannot carry a shuffle safely in this application, or null. With
   * dynamic allocation, an idle executor is released even when it holds shuffle files (the
   * Crossdock plug-in tells Spark that shuffle data is stored reliably), unless an external
   * shuffle service serves them or shuffle tracking keeps the executor: a routed shuffle would
   * then be lost and recomputed.
   */
  static String sparkShuffleUnavailable(SparkConf conf) {
    boolean dynamic = conf.getBoolean("spark.dynamicAllocation.enabled", false);
    boolean service = conf.getBoolean("spark.shuffle.service.enabled", false);
    // Spark's own entry, for Spark's own default (on since 3.4).
    boolean tracking = (Boolean) conf.get(
        org.apache.spark.internal.config.package$.MODULE$.DYN_ALLOCATION_SHUFFLE_TRACKING_ENABLED());
    if (dynamic && !service && !tracking) {
      return "dynamic allocation is on without an external shuffle service or shuffle tracking,"
          + " so executors holding Spark's shuffle files could be released";
    }
    return null;
  }

  /**
   * The batch size of a sorted shuffle's runs ({@link #MERGE_SORTED_RUNS}) when a reducer merges
   * {@code runs} runs ({@link RunSizes#batchBytes}).
   */
  public int runBatchBytes(long runs) {
    return RunSizes.batchBytes(fetchMaxInFlight, batchSize, runs);
  }

  /**
   * The step of the adaptive in-flight limit and the least a request asks for (the paper's
   * in-flight increment, which it leaves open, suggesting 0.5 to 2 MB): a 24th of the hard
   * limit, between 256 KiB and 8 MiB (2 MiB with the default 48 MiB).
   */
  public long fetchIncrement() {
    return Math.max(256L << 10, Math.min(8L << 20, fetchMaxInFlight / 24));
  }
}
