package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.io.InputStream;
import java.nio.ByteBuffer;
import org.apache.spark.Aggregator;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.collection.ExternalSorter;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.Net;
import org.crossdock.client.Placement;
import org.crossdock.client.fetch.FetchMonitor;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.Segment;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Message;
import org.crossdock.client.BufferStream;
import scala.Option;
import scala.Product2;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.math.Ordering;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads partitions {@code [startPartition, endPartition)} of maps {@code [startMap, endMap)}.
 *
 * <p>For each partition it fetches exactly that map range from the partition's worker (the
 * worker's map index serves it; a partition is never read whole to be filtered, which is what
 * AQE's skew splits and the local shuffle reader need). Batches arrive in (map, seq) order; each
 * map's batches form one stream, which is {@code wrapStream}-ed and deserialized with the
 * dependency's serializer. Aggregation and key ordering then follow Spark's {@code
 * BlockStoreShuffleReader} exactly, except for a shuffle pushed as sorted runs, whose runs are
 * merged once ({@link MergingRecordIterator}) instead of sorted again. Any failure to get the bytes (unreachable or lost worker, a
 * stream that cannot be resumed, CRC mismatch, a worker error, undecodable data) surfaces as
 * Spark's typed {@link FetchFailedException}, so Spark's stage recovery runs.
 */
final class CrossdockShuffleReader<K, C> implements ShuffleReader<K, C> {
  private static final Logger LOG = LoggerFactory.getLogger(CrossdockShuffleReader.class);
  private final CrossdockShuffleHandle<K, ?, C> handle;
  private final CrossdockShuffleManager manager;
  private final int startMap;
  private final int endMap;
  private final int startPartition;
  private final int endPartition;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;
  private final CrossdockConf conf;
  /** The placement the task reads with, once asked ({@link #readPlacement()}). */
  private volatile Placement readPlacement;

  CrossdockShuffleReader(CrossdockShuffleHandle<K, ?, C> handle, CrossdockShuffleManager manager,
      int startMap, int endMap, int startPartition, int endPartition, TaskContext context,
      ShuffleReadMetricsReporter metrics, CrossdockConf conf) {
    this.handle = handle;
    this.manager = manager;
    this.startMap = startMap;
    this.endMap = endMap;
    this.startPartition = startPartition;
    this.endPartition = endPartition;
    this.context = context;
    this.metrics = metrics;
    this.conf = conf;
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  @Override
  public Iterator<Product2<K, C>> read() {
    ShuffleDependency<K, ?, C> dep = handle.dependency();
    if (handle.sortedRuns() && dep.keyOrdering().isDefined() && dep.aggregator().isEmpty()) {
      // Sorted runs: merged once, in key order; no sorter, no spill.
      MergingRecordIterator merged = new MergingRecordIterator(this, handle, manager, context,
          metrics, startMap, endMap, startPartition, endPartition, conf,
          dep.serializer().newInstance(), dep.keyOrdering().get());
      context.addTaskCompletionListener((TaskCompletionListener) ctx -> merged.close());
      return new InterruptibleIterator(context, merged);
    }
    RecordIterator records = new RecordIterator(dep.serializer().newInstance());
    context.addTaskCompletionListener((TaskCompletionListener) ctx -> records.close());

    Iterator interruptible = new InterruptibleIterator(context, records);
    Iterator<Product2<K, C>> aggregated;
    if (dep.aggregator().isDefined()) {
      Aggregator agg = dep.aggregator().get();
      aggregated = dep.mapSideCombine()
          ? agg.combineCombinersByKey(interruptible, context)
          : agg.combineValuesByKey(interruptible, context);
    } else {
      aggregated = interruptible;
    }
    Iterator<Product2<K, C>> result;
    Option<Ordering<K>> ordering = dep.keyOrdering();
    if (ordering.isDefined()) {
      ExternalSorter sorter = SparkCompat.readSorter(context, ordering, dep.serializer());
      result = sorter.insertAllAndUpdateMetrics(aggregated);
    } else {
      result = aggregated;
    }
    if (result instanceof InterruptibleIterator) {
      return result;
    }
    return new InterruptibleIterator(context, result);
  }

  /** Throws a checked exception without declaring it (Scala code above us does not care). */
  @SuppressWarnings("unchecked")
  static <E extends Throwable> RuntimeException sneakyThrow(Throwable t) throws E {
    throw (E) t;
  }

  /**
   * Throws what a failure {@code t} of a reader's records means to Spark: a FetchFailedException
   * passes through; an I/O failure while decoding (a codec or deserializer meeting bytes that are
   * not what was written) becomes {@code undecodable} of it; anything else is rethrown as it is:
   * a user class failing to load, an interrupt, and this client's own failure (a LOCAL one: the
   * shuffle's data is fine, and a fetch failure would make Spark recompute its maps for nothing).
   */
  static RuntimeException readFailure(Throwable t,
      java.util.function.Function<IOException, FetchFailedException> undecodable) {
    if (t instanceof FetchFailedException) {
      return sneakyThrow(t);
    }
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof java.io.InterruptedIOException || CrossdockException.isLocal(c)) {
        return sneakyThrow(t); // wherever it is in the chain
      }
    }
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof IOException io) {
        return sneakyThrow(undecodable.apply(io));
      }
    }
    return sneakyThrow(t);
  }

  /**
   * The FetchFailedException for a failure reading {@code partition}, attributed to map {@code
   * mapIndex} and to the executor that ran it (from the map output tracker), so that Spark
   * unregisters that map output and reruns the map stage. If the map's location is not known
   * (e.g. its block is empty), mapIndex is -1 and Spark retries the stage as a whole.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  FetchFailedException fetchFailed(int slot, int mapIndex, String what, Throwable cause) {
    int shuffleId = handle.shuffleId();
    // A split's slot fails as its partition: that is what Spark knows.
    Placement p = readPlacement;
    int partition = p == null || slot < p.numPartitions() ? slot : p.partitionOf(slot);
    BlockManagerId location = null;
    long mapTaskId = -1;
    int index = -1;
    try {
      Iterator<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> it =
          SparkEnv.get().mapOutputTracker().getMapSizesByExecutorId(
              shuffleId, mapIndex, mapIndex + 1, partition, partition + 1);
      if (it.hasNext()) {
        Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>> t = it.next();
        if (t._2().nonEmpty() && t._2().head()._1() instanceof ShuffleBlockId b) {
          location = t._1();
          mapTaskId = b.mapId();
          index = mapIndex;
        }
      }
    } catch (Throwable ignored) {
      // No location: fall back to a stage-level retry.
    }
    String msg = "Crossdock fetch of shuffle " + shuffleId + " partition " + partition + " maps ["
        + startMap + ", " + endMap + ") failed: " + what;
    return new FetchFailedException(location, shuffleId, mapTaskId, index, partition, msg, cause);
  }

  /**
   * The placement the task reads with, splits included ({@link
   * CrossdockShuffleManager#readPlacement}); asked on first use.
   */
  Placement readPlacement() throws IOException {
    Placement p = readPlacement;
    if (p == null) {
      p = manager.readPlacement(handle, context);
      readPlacement = p;
    }
    return p;
  }

  /**
   * What to do about a segment (or run) no copy could serve. Once per partition ({@code
   * refreshed} remembers which) it reports the unreachable workers and asks the coordinator for
   * the shuffle's current state: if a map of the range lost its output (its only copy was on a
   * lost worker), Spark must recompute it, so a fetch failure attributed to that map is thrown;
   * otherwise the partition's current copies are returned, to read the segment on from where it
   * stopped. A second failure of the partition is a fetch failure.
   */
  List<String> copiesAfterFailure(FetchScheduler.SegmentFailed f, Set<Integer> refreshed)
      throws FetchFailedException {
    Segment s = f.segment;
    int partition = s.partition;
    int map = s.resumePoint() != null ? s.resumePoint().mapId() : s.startMap;
    if (!refreshed.add(partition)) {
      manager.workersFailed(handle, f.unreachable());
      throw fetchFailed(partition, map, f.getMessage(), f);
    }
    Message.ShuffleStatus status;
    Placement placement;
    try {
      status = manager.reportAndRefresh(handle, f.unreachable());
      placement = manager.placement(handle, context);
    } catch (IOException ce) {
      throw fetchFailed(partition, map, f.getMessage() + "; the coordinator could not be"
          + " asked for the shuffle's state: " + ce.getMessage(), f);
    }
    int[] attempts = status.mapAttempts();
    String replaced = s.replacedIn(attempts);
    if (replaced != null) {
      // The run starts this merge was planned with are another attempt's: a rerun of the map
      // stage replaced the output (this task is usually a zombie of the older stage attempt).
      // A task failure, not a fetch failure: the new output is good, and a fetch failure would
      // make Spark drop it and run the map again; a retried task plans with the new starts.
      throw sneakyThrow(new IOException("Crossdock: " + replaced + " after this read planned"
          + " its runs; the task is to be retried. First error: " + f.getMessage(), f));
    }
    for (int m = startMap; m < endMap; m++) {
      if (attempts[m] == AttemptIds.NO_ATTEMPT) {
        throw fetchFailed(partition, m, "map " + m + " has no committed output any more (its"
            + " only copy was on a lost worker); it must be recomputed. First error: "
            + f.getMessage(), f);
      }
    }
    LOG.warn("Crossdock fetch of shuffle {} {} failed ({}); continuing from its current copies",
        handle.shuffleId(), s, f.getMessage());
    return placement.copiesOf(partition);
  }

  /**
   * Whether a worker is on this executor's host: the same host, or a worker on a loopback
   * address while the executor is named by a routable one. Two distinct loopback addresses are
   * two hosts (that is how the tests emulate several hosts on one machine).
   */
  static boolean onThisHost(String addr) {
    String host = Net.parse(addr).getHostString();
    String mine = SparkEnv.get().blockManager().blockManagerId().host();
    return host.equals(mine) || (isLoopback(host) && !isLoopback(mine))
        || (isDefaultLoopback(host) && isDefaultLoopback(mine));
  }

  private static boolean isLoopback(String host) {
    return host.startsWith("127.") || isDefaultLoopback(host);
  }

  /** The names of this machine's usual loopback address, which are one host. */
  private static boolean isDefaultLoopback(String host) {
    return host.equals("127.0.0.1") || host.equals("::1") || host.equals("localhost");
  }

  /** Records of every map of every partition in range, as (key, value) tuples. */
  private final class RecordIterator extends AbstractIterator<Tuple2<Object, Object>> {
    /** {@link #isLocal}'s answer per worker address. */
    private final Map<String, Boolean> localByWorker = new ConcurrentHashMap<>();
    private final SerializerInstance serializer;
    private final SerializerManager serializerManager = SparkEnv.get().serializerManager();
    private final Set<Integer> refreshed = new HashSet<>();
    private FetchScheduler scheduler;
    private FetchMemoryConsumer memory;
    private FetchScheduler.Delivery peeked;
    private int lastPartition = startPartition;
    private int lastMap = startMap;
    private MapStream stream;
    private Iterator<Tuple2<Object, Object>> current;
    private long reportedWaitNanos;
    private boolean finished;
    private boolean closed;

    RecordIterator(SerializerInstance serializer) {
      this.serializer = serializer;
    }

    @Override
    public boolean hasNext() {
      try {
        while (current == null || !current.hasNext()) {
          if (!advance()) {
            return false;
          }
        }
        return true;
      } catch (Throwable t) {
        throw failure(t);
      }
    }

    @Override
    public Tuple2<Object, Object> next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      Tuple2<Object, Object> r;
      try {
        r = current.next();
      } catch (Throwable t) {
        throw failure(t);
      }
      metrics.incRecordsRead(1);
      return r;
    }

    private RuntimeException failure(Throwable t) {
      return readFailure(t, c -> fetchFailed(lastPartition, lastMap, "undecodable data: " + c, t));
    }

    /** Opens the next map's stream; false at the end of everything. */
    private boolean advance() throws IOException, FetchFailedException {
      if (stream != null) {
        stream.drain();
        stream = null;
        current = null;
      }
      FetchScheduler.Delivery d = peek();
      if (d == null) {
        finish();
        return false;
      }
      lastPartition = readPlacement.partitionOf(d.segment().partition);
      lastMap = d.batch().mapId();
      if (isLocal(d.source())) {
        metrics.incLocalBlocksFetched(1);
      } else {
        metrics.incRemoteBlocksFetched(1);
      }
      stream = new MapStream(d.segment(), lastMap);
      BlockId blockId = new ShuffleBlockId(handle.shuffleId(), lastMap, lastPartition);
      InputStream wrapped = handle.framedBatches
          ? new BatchStreams.FramedStream(stream, blockId)
          : serializerManager.wrapStream(blockId, stream);
      current = serializer.deserializeStream(wrapped).asKeyValueIterator();
      return true;
    }

    /**
     * The task's read, planned on first use. Under the iterator's lock, as {@link #close} is: a
     * close from another thread (the task's end, while PySpark's writer thread has not started
     * reading) either comes first, and then no read starts, or closes the read made here.
     */
    private synchronized FetchScheduler scheduler() throws IOException {
      if (scheduler == null) {
        if (closed) {
          throw new IOException("the read was closed");
        }
        // No map in the range (a shuffle of no maps is never registered with the coordinator)
        // or no partition: nothing to read, and no placement to ask for.
        List<Segment> plan = startMap >= endMap || startPartition >= endPartition
            ? List.of()
            : FetchPlanner.plan(handle.shuffleId(), startMap, endMap, startPartition,
                endPartition, readPlacement(), conf, context.taskAttemptId());
        memory = new FetchMemoryConsumer(context.taskMemoryManager());
        FetchScheduler.Settings settings = new FetchScheduler.Settings(handle.appId, handle.appToken,
            handle.shuffleId(), conf.fetchPolicy, conf.fetchMaxInFlight, conf.fetchIncrement(),
            CrossdockConf.CONNECT_TIMEOUT_MS, (int) Math.min(Integer.MAX_VALUE, conf.networkTimeoutMs),
            CrossdockConf.FETCH_MAX_RESUMES, CrossdockConf.FETCH_MOVE_AWAY_MS);
        scheduler = new FetchScheduler(settings, plan, FetchMonitor.shared(), memory,
            this::isLocal);
      }
      return scheduler;
    }

    /**
     * Whether a worker is on this executor's host (its bytes count as local): the same host, or
     * a worker on a loopback address (reachable from this machine only) while the executor is
     * named by a routable address. Two distinct loopback addresses are two hosts: that is how
     * the tests emulate several hosts on one machine.
     */
    private boolean isLocal(String addr) {
      // Asked for every batch; a task reads from a handful of workers.
      return addr != null && localByWorker.computeIfAbsent(addr, CrossdockShuffleReader::onThisHost);
    }

    private void recover(FetchScheduler.SegmentFailed f) throws FetchFailedException {
      scheduler.retry(f.segment, copiesAfterFailure(f, refreshed));
    }

    private FetchScheduler.Delivery peek() throws IOException, FetchFailedException {
      if (peeked == null && !finished) {
        FetchScheduler sch = scheduler();
        try {
          while (true) {
            try {
              peeked = sch.next();
              break;
            } catch (FetchScheduler.SegmentFailed f) {
              recover(f);
            }
          }
        } finally {
          long waited = sch.waitNanos() - reportedWaitNanos;
          long ms = waited / 1_000_000;
          if (ms > 0) {
            metrics.incFetchWaitTime(ms);
            reportedWaitNanos += ms * 1_000_000;
          }
        }
        if (peeked != null) {
          long n = peeked.batch().payload().remaining();
          if (isLocal(peeked.source())) {
            metrics.incLocalBytesRead(n);
          } else {
            metrics.incRemoteBytesRead(n);
          }
        }
      }
      return peeked;
    }

    private void finish() {
      if (!finished) {
        finished = true;
        close();
        context.taskMetrics().mergeShuffleReadMetrics();
      }
    }

    /** Ends the read: connections closed, every byte of memory given back. */
    synchronized void close() {
      // Called at the end and again when the task completes, on another thread for PySpark's
      // writer: the sums are reported once, after the read can open nothing more.
      if (closed) {
        return;
      }
      closed = true;
      if (scheduler != null) {
        scheduler.close();
        if (LOG.isDebugEnabled()) {
          // One line per read: how the adaptive limit moved in it, to follow it task by task.
          String limit = conf.fetchPolicy == FetchScheduler.Policy.ADAPTIVE
              ? String.format("in-flight limit %d -> %d bytes (grew %d, shrank %d times)",
                  scheduler.startingLimit(), scheduler.softLimit(), scheduler.limitGrown(),
                  scheduler.limitShrunk())
              : "in-flight limit " + scheduler.startingLimit() + " bytes";
          LOG.debug("Task {} read of shuffle {} ({}): {}, {} requests, fetch wait {} ms, "
                  + "peak buffered {} bytes", context.taskAttemptId(), handle.shuffleId(),
              conf.fetchPolicy, limit, scheduler.requests(), scheduler.waitNanos() / 1_000_000,
              scheduler.peakBufferedBytes());
        }
        if (handle.accumulators != null) {
          handle.accumulators.readDone(scheduler.peakBufferedBytes(),
              scheduler.connectionsOpened(), scheduler.connectionsReused());
          handle.accumulators.limitDone(scheduler.limitGrown(), scheduler.limitShrunk());
        }
      }
    }

    /** The concatenated payloads of one map's batches (of one segment). */
    final class MapStream extends BufferStream {
      private final Segment segment;
      private final int mapId;
      private ByteBuffer buf;
      private boolean eof;

      MapStream(Segment segment, int mapId) {
        this.segment = segment;
        this.mapId = mapId;
      }

      /** The current batch with bytes left, or null at the end of this map. */
      @Override
      protected ByteBuffer buffer() throws IOException {
        while (!eof && (buf == null || !buf.hasRemaining())) {
          FetchScheduler.Delivery d;
          try {
            d = peek();
          } catch (FetchFailedException e) {
            throw sneakyThrow(e);
          }
          if (d == null || d.segment() != segment || d.batch().mapId() != mapId) {
            eof = true;
            buf = null;
          } else {
            peeked = null;
            buf = d.batch().payload().duplicate();
          }
        }
        return eof ? null : buf;
      }

      @Override
      public int available() {
        return buf == null ? 0 : buf.remaining();
      }

      /** Skips whatever of this map the deserializer did not read. */
      void drain() throws IOException {
        while (buffer() != null) {
          buf.position(buf.limit());
        }
      }

      @Override
      public void close() {
        // The next map's stream continues from the shared read; drain() runs in advance().
      }
    }
  }
}
