package org.apache.spark.shuffle.crossdock;

import java.io.Serializable;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * Crossdock's own figures of a shuffle for the Spark UI and the event log: named accumulators,
 * registered on the driver when the shuffle is registered and shipped with its handle, so each
 * task's updates show in the stage page's accumulator table, in the task table, and in the event
 * log's task-end accumulables. They split what Spark's own shuffle metrics lump together (a map
 * task's write time holds its pushing, its wait for acknowledgements and its commit); Spark's
 * metrics carry the rest, kept exact by the writers and the reader: bytes and records written,
 * bytes read locally and remotely, fetch wait.
 */
public final class CrossdockAccumulators implements Serializable {
  private static final long serialVersionUID = 1L;
  /** Payload bytes the map tasks pushed (serialized and compressed, as on the wire). */
  public static final String PUSHED_BYTES = "crossdock pushed bytes";
  /**
   * Milliseconds map tasks waited on the workers: blocked on a full push window, then for the
   * last acknowledgements before committing ({@link #PUSH_REFUSED_WAIT_MS} counts the other wait).
   */
  public static final String PUSH_WAIT_MS = "crossdock push wait ms";
  /**
   * Frames the map tasks pushed that Spark's memory manager granted no room to (the task's share
   * held by its sorter or another consumer): each waited until the frames in flight uncounted
   * left room for it ({@code CrossdockConf.uncountedFrameBytes}). Many of them say the executor's
   * memory, not the network, paces the map stage.
   */
  public static final String PUSH_FRAMES_REFUSED = "crossdock push frames refused memory";
  /**
   * Milliseconds those frames waited for acknowledgements, counted apart from {@link
   * #PUSH_WAIT_MS} (the wait on a full window and for the last acknowledgements).
   */
  public static final String PUSH_REFUSED_WAIT_MS = "crossdock push refused-frame wait ms";
  /** Milliseconds map tasks spent committing (the coordinator's round trip). */
  public static final String COMMIT_MS = "crossdock commit ms";
  /** Sorted runs the reduce tasks merged ((partition, map) pairs read by the merge). */
  public static final String MERGED_RUNS = "crossdock merged runs";
  /** Segments the merging reduce tasks fetched (heads, next segments and retries). */
  public static final String MERGE_REQUESTS = "crossdock merge requests";

  /**
   * Connections to workers the reduce tasks opened. An executor keeps a task's connections for
   * its next tasks of the app, of any shuffle: over the app, at most executors × cores ×
   * workers when nothing fails, however many tasks read.
   */
  public static final String FETCH_CONNECTIONS_OPENED = "crossdock fetch connections opened";
  /** Connections the reduce tasks took from those an earlier task of the executor left idle. */
  public static final String FETCH_CONNECTIONS_REUSED = "crossdock fetch connections reused";
  /**
   * Times the adaptive readers' in-flight limits grew, and shrank, by an increment (the reads of
   * key-ordered shuffles, which merge runs, have no such limit and add nothing). Many more grows
   * than shrinks over a stage whose reads seldom waited long say the limit follows noise.
   */
  public static final String FETCH_LIMIT_GROWN = "crossdock fetch limit grown";
  public static final String FETCH_LIMIT_SHRUNK = "crossdock fetch limit shrunk";

  public final LongAccumulator pushedBytes = new LongAccumulator();
  public final LongAccumulator pushWaitMs = new LongAccumulator();
  public final LongAccumulator pushFramesRefused = new LongAccumulator();
  public final LongAccumulator pushRefusedWaitMs = new LongAccumulator();
  public final LongAccumulator commitMs = new LongAccumulator();
  public final LongAccumulator mergedRuns = new LongAccumulator();
  public final LongAccumulator mergeRequests = new LongAccumulator();
  public final LongAccumulator fetchConnectionsOpened = new LongAccumulator();
  public final LongAccumulator fetchConnectionsReused = new LongAccumulator();
  public final LongAccumulator fetchLimitGrown = new LongAccumulator();
  public final LongAccumulator fetchLimitShrunk = new LongAccumulator();
  /** The reduce tasks' largest fetch buffers ({@link FetchPeak#NAME}). */
  public final FetchPeak fetchPeak = new FetchPeak();

  private CrossdockAccumulators() {}

  /** A new set registered with the active context; null where none is active (no UI to show). */
  static CrossdockAccumulators registered() {
    scala.Option<SparkContext> active = org.apache.spark.SparkContext$.MODULE$.getActive();
    if (active.isEmpty()) {
      return null;
    }
    SparkContext sc = active.get();
    CrossdockAccumulators a = new CrossdockAccumulators();
    sc.register(a.pushedBytes, PUSHED_BYTES);
    sc.register(a.pushWaitMs, PUSH_WAIT_MS);
    sc.register(a.pushFramesRefused, PUSH_FRAMES_REFUSED);
    sc.register(a.pushRefusedWaitMs, PUSH_REFUSED_WAIT_MS);
    sc.register(a.commitMs, COMMIT_MS);
    sc.register(a.mergedRuns, MERGED_RUNS);
    sc.register(a.mergeRequests, MERGE_REQUESTS);
    sc.register(a.fetchPeak, FetchPeak.NAME);
    sc.register(a.fetchConnectionsOpened, FETCH_CONNECTIONS_OPENED);
    sc.register(a.fetchConnectionsReused, FETCH_CONNECTIONS_REUSED);
    sc.register(a.fetchLimitGrown, FETCH_LIMIT_GROWN);
    sc.register(a.fetchLimitShrunk, FETCH_LIMIT_SHRUNK);
    return a;
  }

  /**
   * One map attempt's pushing: {@code waitNanos} waiting on workers, {@code refusedWaitNanos} the
   * waits of its {@code framesRefused} frames Spark granted no memory, {@code commitNanos}
   * committing.
   */
  void mapDone(long pushed, long waitNanos, long framesRefused, long refusedWaitNanos,
      long commitNanos) {
    pushedBytes.add(pushed);
    pushWaitMs.add(waitNanos / 1_000_000);
    pushFramesRefused.add(framesRefused);
    pushRefusedWaitMs.add(refusedWaitNanos / 1_000_000);
    commitMs.add(commitNanos / 1_000_000);
  }

  /**
   * One reduce task's read, once at its end: its largest fetch buffers, the connections it
   * opened and those it took idle.
   */
  void readDone(long peakBuffered, long opened, long reused) {
    fetchPeak.add(peakBuffered);
    fetchConnectionsOpened.add(opened);
    fetchConnectionsReused.add(reused);
  }

  /** One adaptive read's limit, once at its end: the times it grew and shrank. */
  void limitDone(long grown, long shrunk) {
    fetchLimitGrown.add(grown);
    fetchLimitShrunk.add(shrunk);
  }
}
