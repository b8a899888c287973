package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
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
import org.crossdock.client.PartitionFetcher;
import org.crossdock.client.Placement;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Message;
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
 * BlockStoreShuffleReader} exactly. Any failure to get the bytes (unreachable or lost worker, a
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
      ExternalSorter sorter = new ExternalSorter(context, Option.empty(), Option.empty(), ordering,
          dep.serializer(), ExternalSorter.$lessinit$greater$default$6());
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
   * The FetchFailedException for a failure reading {@code partition}, attributed to map {@code
   * mapIndex} and to the executor that ran it (from the map output tracker), so that Spark
   * unregisters that map output and reruns the map stage. If the map's location is not known
   * (e.g. its block is empty), mapIndex is -1 and Spark retries the stage as a whole.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  FetchFailedException fetchFailed(int partition, int mapIndex, String what, Throwable cause) {
    int shuffleId = handle.shuffleId();
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
   * One map's batches when each batch is its own wrapped frame ({@link CrossdockDirectWriter}):
   * every frame is unwrapped (decrypted, decompressed) on its own and the results are
   * concatenated into one stream of serialized records.
   */
  private final class FramedStream extends InputStream {
    private final RecordIterator.MapStream batches;
    private final BlockId blockId;
    private final SerializerManager serializerManager = SparkEnv.get().serializerManager();
    private InputStream frame;

    FramedStream(RecordIterator.MapStream batches, BlockId blockId) {
      this.batches = batches;
      this.blockId = blockId;
    }

    private InputStream frame() throws IOException {
      if (frame == null) {
        ByteBuffer b = batches.nextBatch();
        if (b == null) {
          return null;
        }
        frame = serializerManager.wrapStream(blockId, new ByteBufferInputStream(b));
      }
      return frame;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      int n = read(one, 0, 1);
      return n < 0 ? -1 : (one[0] & 0xff);
    }

    @Override
    public int read(byte[] out, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      while (true) {
        InputStream f = frame();
        if (f == null) {
          return -1;
        }
        int n = f.read(out, off, len);
        if (n > 0) {
          return n;
        }
        if (n < 0) {
          f.close();
          frame = null;
        }
      }
    }
  }

  /** An InputStream over ByteBuffers, read one after the other. */
  private abstract static class BufferStream extends InputStream {
    /** The current buffer with bytes left, or null at the end of the stream. */
    abstract ByteBuffer buffer() throws IOException;

    @Override
    public int read() throws IOException {
      ByteBuffer b = buffer();
      return b == null ? -1 : (b.get() & 0xff);
    }

    @Override
    public int read(byte[] out, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      ByteBuffer b = buffer();
      if (b == null) {
        return -1;
      }
      int n = Math.min(len, b.remaining());
      b.get(out, off, n);
      return n;
    }
  }

  /** A ByteBuffer as an InputStream. */
  private static final class ByteBufferInputStream extends BufferStream {
    private final ByteBuffer b;

    ByteBufferInputStream(ByteBuffer b) {
      this.b = b;
    }

    @Override
    ByteBuffer buffer() {
      return b.hasRemaining() ? b : null;
    }

    @Override
    public int available() {
      return b.remaining();
    }
  }

  /** Records of every map of every partition in range, as (key, value) tuples. */
  private final class RecordIterator extends AbstractIterator<Tuple2<Object, Object>> {
    private final SerializerInstance serializer;
    private final SerializerManager serializerManager = SparkEnv.get().serializerManager();
    private int partition = startPartition - 1;
    private PartitionFetcher fetcher;
    private Message.FetchedBatch peeked;
    private int lastMap;
    private MapStream stream;
    private Iterator<Tuple2<Object, Object>> current;
    private long waitNanos;
    private boolean finished;
    private boolean refreshedForPartition;

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

    /**
     * A FetchFailedException passes through; an I/O failure while decoding (a codec or
     * deserializer meeting bytes that are not what was written) becomes one; anything else (a
     * user class failing to load, an interrupt) is rethrown as it is.
     */
    private RuntimeException failure(Throwable t) {
      if (t instanceof FetchFailedException) {
        return sneakyThrow(t);
      }
      for (Throwable c = t; c != null; c = c.getCause()) {
        if (c instanceof java.io.InterruptedIOException) {
          break;
        }
        if (c instanceof IOException) {
          return sneakyThrow(fetchFailed(partition, lastMap, "undecodable data: " + c, t));
        }
      }
      return sneakyThrow(t);
    }

    /** Opens the next map's stream; false at the end of everything. */
    private boolean advance() throws IOException, FetchFailedException {
      if (stream != null) {
        stream.drain();
        stream = null;
        current = null;
      }
      while (true) {
        if (fetcher != null) {
          Message.FetchedBatch b = peek();
          if (b != null) {
            lastMap = b.mapId();
            metrics.incRemoteBlocksFetched(1);
            stream = new MapStream(b.mapId());
            BlockId blockId = new ShuffleBlockId(handle.shuffleId(), b.mapId(), partition);
            InputStream wrapped = handle.framedBatches
                ? new FramedStream(stream, blockId)
                : serializerManager.wrapStream(blockId, stream);
            current = serializer.deserializeStream(wrapped).asKeyValueIterator();
            return true;
          }
          fetcher.close();
          fetcher = null;
        }
        partition++;
        if (partition >= endPartition || startMap >= endMap) {
          finish();
          return false;
        }
        lastMap = startMap;
        refreshedForPartition = false;
        fetcher = openFetcher(manager.placement(handle, context), null);
      }
    }

    /** A fetcher of the current partition over its copies, after {@code resume} if given. */
    private PartitionFetcher openFetcher(Placement placement, Message.ResumePoint resume) {
      return new PartitionFetcher(placement.copiesOf(partition), handle.appId, handle.shuffleId(),
          partition, startMap, endMap, CrossdockConf.CONNECT_TIMEOUT_MS,
          (int) Math.min(Integer.MAX_VALUE, conf.networkTimeoutMs),
          CrossdockConf.FETCH_MAX_RESUMES, resume);
    }

    /**
     * Handles a fetch that failed on every copy it knew. Once per partition it reports the
     * unreachable workers and asks the coordinator for the shuffle's current state: if a map
     * of the range lost its output (its only copy was on a lost worker), Spark must recompute
     * it, so the failure is attributed to that map; otherwise the read continues where it
     * stopped, from the partition's current copies. A second failure is a fetch failure.
     */
    private void recover(IOException e) throws FetchFailedException {
      Message.ResumePoint at = fetcher.resumePoint();
      java.util.List<String> unreachable = fetcher.unreachable();
      fetcher.close();
      fetcher = null;
      if (refreshedForPartition) {
        manager.workersFailed(handle, unreachable);
        throw fetchFailed(partition, lastMap, e.getMessage(), e);
      }
      refreshedForPartition = true;
      Message.ShuffleStatus status;
      Placement current;
      try {
        status = manager.reportAndRefresh(handle, unreachable);
        current = manager.placement(handle, context);
      } catch (IOException ce) {
        throw fetchFailed(partition, lastMap, e.getMessage() + "; the coordinator could not be"
            + " asked for the shuffle's state: " + ce.getMessage(), e);
      }
      int[] attempts = status.mapAttempts();
      for (int m = startMap; m < endMap; m++) {
        if (attempts[m] == AttemptIds.NO_ATTEMPT) {
          throw fetchFailed(partition, m, "map " + m + " has no committed output any more (its"
              + " only copy was on a lost worker); it must be recomputed. First error: "
              + e.getMessage(), e);
        }
      }
      LOG.warn("Crossdock fetch of shuffle {} partition {} failed ({}); continuing from its"
          + " current copies", handle.shuffleId(), partition, e.getMessage());
      fetcher = openFetcher(current, at);
    }

    private Message.FetchedBatch peek() throws FetchFailedException {
      if (peeked == null && fetcher != null) {
        long t0 = System.nanoTime();
        try {
          while (true) {
            try {
              peeked = fetcher.next();
              break;
            } catch (IOException e) {
              recover(e);
            }
          }
        } finally {
          waitNanos += System.nanoTime() - t0;
          long ms = waitNanos / 1_000_000;
          if (ms > 0) {
            metrics.incFetchWaitTime(ms);
            waitNanos -= ms * 1_000_000;
          }
        }
        if (peeked != null) {
          metrics.incRemoteBytesRead(peeked.payload().remaining());
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

    void close() {
      if (fetcher != null) {
        fetcher.close();
        fetcher = null;
      }
    }

    /** The concatenated payloads of one map's batches. */
    final class MapStream extends BufferStream {
      private final int mapId;
      private ByteBuffer buf;
      private boolean eof;

      MapStream(int mapId) {
        this.mapId = mapId;
      }

      /** The current batch with bytes left, or null at the end of this map. */
      @Override
      ByteBuffer buffer() throws IOException {
        while (!eof && (buf == null || !buf.hasRemaining())) {
          Message.FetchedBatch b;
          try {
            b = peek();
          } catch (FetchFailedException e) {
            throw sneakyThrow(e);
          }
          if (b == null || b.mapId() != mapId) {
            eof = true;
            buf = null;
          } else {
            peeked = null;
            buf = b.payload().duplicate();
          }
        }
        return eof ? null : buf;
      }

      @Override
      public int available() {
        return buf == null ? 0 : buf.remaining();
      }

      /** The rest of the current batch, or the next batch of this map; null at its end. */
      ByteBuffer nextBatch() throws IOException {
        ByteBuffer b = buffer();
        buf = null;
        return b;
      }

      /** Skips whatever of this map the deserializer did not read. */
      void drain() throws IOException {
        while (buffer() != null) {
          buf.position(buf.limit());
        }
      }

      @Override
      public void close() {
        // The next map's stream continues from the shared fetcher; drain() runs in advance().
      }
    }
  }
}
