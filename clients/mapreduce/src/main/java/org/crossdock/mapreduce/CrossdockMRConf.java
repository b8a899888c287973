package org.crossdock.mapreduce;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapreduce.MRJobConfig;
import org.apache.hadoop.mapreduce.TaskType;
import org.crossdock.client.TaskWindows;
import org.crossdock.client.Tls;
import org.crossdock.client.fetch.RunSizes;

/**
 * The {@code crossdock.*} job properties (documented in clients/mapreduce/README.md). Only the
 * coordinator's address is required; sizes take Hadoop's suffixes (k, m, g), times its units
 * (ms, s, m). Read once per task.
 */
final class CrossdockMRConf {
  static final String COORDINATOR = "crossdock.coordinator";
  static final String PUSH_BATCH_SIZE = "crossdock.push.batchSize";
  static final String PUSH_MAX_IN_FLIGHT = "crossdock.push.maxInFlight";
  static final String FETCH_MAX_IN_FLIGHT = "crossdock.fetch.maxInFlight";
  static final String NETWORK_TIMEOUT = "crossdock.network.timeout";
  static final String MAPS_WAIT = "crossdock.reduce.mapsWaitTimeout";
  static final String LEASE = "crossdock.app.lease";
  static final String TLS_CA = "crossdock.tls.ca";
  static final String SPILL_RUNS = "crossdock.map.spillRuns";

  /** MapReduce's own keys this client reads. */
  static final String SORT_MB = "mapreduce.task.io.sort.mb";
  static final String FRAMEWORK = "mapreduce.framework.name";

  static final int CONNECT_TIMEOUT_MS = 5_000;
  static final int FETCH_MAX_RESUMES = 3;
  /** A merge blocked this long on a run, and 4 times what its other copy takes, leaves the copy. */
  static final long FETCH_MOVE_AWAY_MS = 200;
  /** Largest batch a worker takes (its frame limit leaves room for the header). */
  static final long MAX_BATCH = 16L << 20;

  final String coordinator;
  final int batchSize;
  final long pushMaxInFlight;
  final long fetchMaxInFlight;
  final long networkTimeoutMs;
  final long mapsWaitMs;
  final int leaseMs;
  final long sortBufferBytes;
  /** Whether a map pushes each spill as a run of its own (else spills to disk and merges). */
  final boolean spillRuns;
  /** True under the local job runner: every task of the job runs in this JVM. */
  final boolean local;
  final Tls tls;

  CrossdockMRConf(Configuration c) {
    coordinator = c.getTrimmed(COORDINATOR, "");
    if (coordinator.isEmpty()) {
      throw new IllegalArgumentException(COORDINATOR + " is not set: the host:port of the "
          + "Crossdock coordinator (or of `crossdock standalone`) is required");
    }
    long batch = c.getLongBytes(PUSH_BATCH_SIZE, 1L << 20);
    if (batch < 1024 || batch > MAX_BATCH) {
      throw new IllegalArgumentException(PUSH_BATCH_SIZE + " must be between 1k and 16m, got "
          + batch + " bytes");
    }
    batchSize = (int) batch;
    local = "local".equals(c.getTrimmed(FRAMEWORK, "local"));
    pushMaxInFlight = positive(c, PUSH_MAX_IN_FLIGHT, c.getLongBytes(PUSH_MAX_IN_FLIGHT,
        TaskWindows.windowFor(taskHeap(c, TaskType.MAP, local), DEFAULT_PUSH_MAX_IN_FLIGHT,
            TaskWindows.PUSH_PARTS)));
    fetchMaxInFlight = positive(c, FETCH_MAX_IN_FLIGHT, c.getLongBytes(FETCH_MAX_IN_FLIGHT,
        TaskWindows.windowFor(taskHeap(c, TaskType.REDUCE, local), DEFAULT_FETCH_MAX_IN_FLIGHT,
            TaskWindows.FETCH_PARTS)));
    networkTimeoutMs = positive(c, NETWORK_TIMEOUT,
        c.getTimeDuration(NETWORK_TIMEOUT, 120_000, TimeUnit.MILLISECONDS));
    mapsWaitMs = positive(c, MAPS_WAIT, c.getTimeDuration(MAPS_WAIT, 30 * 60_000, TimeUnit.MILLISECONDS));
    leaseMs = (int) Math.min(Integer.MAX_VALUE,
        positive(c, LEASE, c.getTimeDuration(LEASE, 60_000, TimeUnit.MILLISECONDS)));
    int sortMb = c.getInt(SORT_MB, 100);
    if (sortMb <= 0 || sortMb > 2047) {
      throw new IllegalArgumentException(SORT_MB + " must be between 1 and 2047, got " + sortMb);
    }
    sortBufferBytes = (long) sortMb << 20;
    spillRuns = c.getBoolean(SPILL_RUNS, true);
    String ca = c.getTrimmed(TLS_CA, "");
    tls = ca.isEmpty() ? null : Tls.trusting(Path.of(ca));
  }

  /**
   * The windows' fixed defaults; below them a share of the task's heap ({@link TaskWindows}, the
   * Spark client's rule).
   */
  static final long DEFAULT_PUSH_MAX_IN_FLIGHT = 32L << 20;
  static final long DEFAULT_FETCH_MAX_IN_FLIGHT = 48L << 20;

  /**
   * The heap of a task of {@code type}, the same in every task of the job (a map sizes its runs'
   * batches for the reducers' fetch window), read as MapReduce sets it ({@link
   * JobConf#getTaskJavaOpts}, without its log line): the last {@code -Xmx} of the administrator's
   * options ({@code mapreduce.admin.{map,reduce}.child.java.opts}) followed by the job's ({@code
   * mapreduce.{map,reduce}.java.opts}, else {@code mapred.child.java.opts}); without one, the
   * container's memory ({@code mapreduce.{map,reduce}.memory.mb}) times {@code
   * mapreduce.job.heap.memory-mb.ratio} (0.8 when outside [0, 1]). Under the local job runner,
   * whose tasks share the submitting JVM, that JVM's heap over the tasks it runs at once ({@code
   * mapreduce.local.{map,reduce}.tasks.maximum}). (An uber job's tasks run in the application
   * master's JVM, whose heap this does not read: its windows follow the task options.)
   */
  static long taskHeap(Configuration c, TaskType type, boolean local) {
    boolean map = type == TaskType.MAP;
    if (local) {
      String key = map ? "mapreduce.local.map.tasks.maximum" : "mapreduce.local.reduce.tasks.maximum";
      return Runtime.getRuntime().maxMemory() / Math.max(1, c.getInt(key, 1));
    }
    String admin = c.get(map ? MRJobConfig.MAPRED_MAP_ADMIN_JAVA_OPTS : MRJobConfig.MAPRED_REDUCE_ADMIN_JAVA_OPTS,
        MRJobConfig.DEFAULT_MAPRED_ADMIN_JAVA_OPTS);
    String user = c.get(map ? JobConf.MAPRED_MAP_TASK_JAVA_OPTS : JobConf.MAPRED_REDUCE_TASK_JAVA_OPTS,
        c.get(JobConf.MAPRED_TASK_JAVA_OPTS, JobConf.DEFAULT_MAPRED_TASK_JAVA_OPTS));
    int mb = JobConf.parseMaximumHeapSizeMB(admin + " " + user);
    if (mb <= 0) {
      float ratio = c.getFloat(MRJobConfig.HEAP_MEMORY_MB_RATIO, MRJobConfig.DEFAULT_HEAP_MEMORY_MB_RATIO);
      if (ratio > 1 || ratio < 0) {
        ratio = MRJobConfig.DEFAULT_HEAP_MEMORY_MB_RATIO;
      }
      JobConf job = c instanceof JobConf j ? j : new JobConf(c);
      mb = (int) Math.ceil(job.getMemoryRequired(type) * ratio);
    }
    return mb > 0 ? (long) mb << 20 : Long.MAX_VALUE;
  }

  private static long positive(Configuration c, String key, long v) {
    if (v <= 0) {
      throw new IllegalArgumentException(key + " must be positive, got '" + c.get(key) + "'");
    }
    return v;
  }

  /**
   * The batch size of a map's runs with {@code maps} maps ({@link RunSizes#batchBytes}): sized
   * for {@link RunSizes#MAX_RUNS_PER_MAP} runs per map when maps push their spills as runs.
   */
  int runBatchBytes(int maps) {
    return RunSizes.batchBytes(fetchMaxInFlight, batchSize,
        (long) maps * (spillRuns ? RunSizes.MAX_RUNS_PER_MAP : 1));
  }

  /** The most bytes one request of a run brings ({@link RunSizes#requestBytes}). */
  long runCap(int maps, int runBatch) {
    return RunSizes.requestBytes(fetchMaxInFlight, runBatch, maps);
  }
}
