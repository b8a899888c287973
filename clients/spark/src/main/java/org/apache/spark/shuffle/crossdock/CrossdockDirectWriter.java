package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.io.OutputStream;
import java.util.Arrays;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.storage.ShuffleBlockId;
import org.crossdock.client.ByteSink;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;

/**
 * The writer for shuffles without map-side combine whose serializer supports relocation of
 * serialized objects (every Spark SQL shuffle: UnsafeRowSerializer; Kryo): a deliberate
 * deviation from reusing {@code ExternalSorter}, for speed.
 *
 * <p>Crossdock's workers group a partition's data themselves, so a map task needs no sort: each
 * record is serialized once, straight into its partition's buffer (one serialization stream
 * writes into a scratch buffer whose bytes are moved to the partition, in chunks that are never
 * copied to grow ({@link PartitionChunks}); relocation makes the concatenation a valid stream,
 * the property Spark's own {@code UnsafeShuffleWriter} relies on). A partition's buffer is
 * compressed (and encrypted) with {@code serializerManager.wrapStream} as one frame and pushed
 * when it reaches {@code spark.crossdock.push.batchSize}; when all the
 * task's buffers together pass {@code spark.crossdock.push.maxInFlight}, every buffer is pushed.
 * The buffers and the frames awaiting acknowledgement are the task's execution memory ({@link
 * PushBufferMemory}): when Spark grants no more, or another consumer of the task needs memory,
 * every buffer is pushed (or, for a frame, the acknowledgements awaited).
 * No records are kept as objects and nothing is spilled to disk (ExternalSorter's object buffer
 * and size sampling cost this path's runtime and GC). The reader decodes each batch as its own
 * frame ({@code framedBatches} in the handle).
 *
 * <p>Attempt ids, the commit, losing the race and the MapStatus are {@link MapAttempt}'s.
 */
final class CrossdockDirectWriter<K, V, C> extends ShuffleWriter<K, V> {
  private final CrossdockShuffleHandle<K, V, C> handle;
  private final MapAttempt attempt;

  /**
   * Most raw bytes in one frame: 15 MiB, so that a frame of incompressible data, with the
   * codec's and encryption's overhead, stays under the workers' 16 MiB batch limit.
   */
  static final int MAX_FRAME_RAW = 15 << 20;

  private static final scala.reflect.ClassTag<Object> OBJECT = scala.reflect.ClassTag$.MODULE$.Object();

  // Per-partition buffers of serialized, not yet compressed records.
  private PartitionChunks[] bufs;
  private long[] bytes;
  private long[] records;
  private long buffered;
  private long capacity;
  private long writeNanos;
  /**
   * Where each frame is compressed, kept for the task; the frame pushed is a copy of exactly its
   * bytes. (A sink per frame, started at half the raw bytes, left most of its array unused and
   * uncounted while the frame awaited acknowledgement when the data compressed well, and was
   * copied to grow, old and new array at once, when it did not: where small executors ran out of
   * heap.) Its array is counted as the task's memory ({@link PushBufferMemory#holdSink}).
   */
  private ByteSink frameSink;
  /** The frame sink's bytes asked of Spark so far (what it did not grant is used uncounted). */
  private long frameSinkAsked;
  private PushBufferMemory memory;
  private SerializerManager serializerManager;

  CrossdockDirectWriter(CrossdockShuffleHandle<K, V, C> handle, CrossdockShuffleManager manager,
      long mapTaskId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
    this.handle = handle;
    this.attempt = new MapAttempt(handle, manager, mapTaskId, context, metrics);
  }

  /** Whether a dependency's shuffle is written by this writer (decided once, on the driver). */
  static boolean canUse(ShuffleDependency<?, ?, ?> dep) {
    return !dep.mapSideCombine() && dep.serializer().supportsRelocationOfSerializedObjects();
  }

  @Override
  public void write(Iterator<Product2<K, V>> input) throws IOException {
    if (attempt.finishEmptyShuffle(input)) {
      return;
    }
    int numPartitions = attempt.numPartitions;
    bufs = new PartitionChunks[numPartitions];
    bytes = new long[numPartitions];
    records = new long[numPartitions];
    memory = new PushBufferMemory(attempt.context.taskMemoryManager(), attempt, this::pushBuffered);
    try {
      attempt.startPushing();
      attempt.pushAndCommit(() -> pushAll(input), bytes, records);
    } finally {
      memory.releaseAll();
    }
    attempt.finish(bytes, 0L);
  }

  /** Serializes and pushes every record; returns the time spent compressing and pushing. */
  private long pushAll(Iterator<Product2<K, V>> input) throws IOException {
    ShuffleDependency<K, V, C> dep = handle.dependency();
    Partitioner partitioner = dep.partitioner();
    serializerManager = SparkEnv.get().serializerManager();
    ByteSink scratch = new ByteSink(64 << 10);
    SerializationStream out = dep.serializer().newInstance().serializeStream(scratch);
    int batch = attempt.conf.batchSize;
    long budget = attempt.conf.maxInFlight;
    while (input.hasNext()) {
      Product2<K, V> r = input.next();
      K key = r._1();
      int p = partitioner.getPartition(key);
      scratch.reset();
      out.writeKey(key, OBJECT);
      out.writeValue(r._2(), OBJECT);
      out.flush();
      append(p, scratch.array(), scratch.length());
      records[p]++;
      attempt.metrics.incRecordsWritten(1);
      if (bufs[p].length() >= batch) {
        flush(p, true);
      } else if (buffered >= budget) {
        pushBuffered();
      }
    }
    scratch.reset();
    out.close();
    if (scratch.length() > 0) {
      throw new IOException("serializer " + dep.serializer().getClass().getName()
          + " wrote " + scratch.length() + " bytes on close; it cannot be relocated");
    }
    pushBuffered();
    return writeNanos;
  }

  /** Pushes every partition's buffer and frees them all; returns the capacity freed. */
  private long pushBuffered() throws IOException {
    long before = capacity;
    for (int q = 0; q < attempt.numPartitions; q++) {
      flush(q, false);
    }
    return before - capacity;
  }

  private void append(int p, byte[] src, int n) throws IOException {
    if (bufs[p] == null) {
      bufs[p] = new PartitionChunks();
    }
    int chunk = bufs[p].chunkFor(n);
    if (chunk > 0) {
      grow(p, chunk, n);
    }
    bufs[p].append(src, 0, n);
    buffered += n;
  }

  /**
   * Adds a chunk of {@code size} bytes to partition p's buffer, with the memory Spark grants the
   * task: when it grants less, every buffer is pushed first and p's starts again with the chunk
   * the {@code n} bytes to append need.
   */
  private void grow(int p, int size, int n) throws IOException {
    memory.throwIfSpillFailed();
    if (!memory.tryHoldBuffer(size)) {
      pushBuffered();
      bufs[p] = new PartitionChunks();
      size = bufs[p].chunkFor(n);
      memory.holdBufferGranted(size);
    }
    bufs[p].addChunk(size);
    capacity += size;
    PushBufferMemory.sawMemory(capacity + frameSinkAsked + attempt.unacknowledgedBytes());
  }

  /**
   * Compresses partition p's buffer and pushes it, as frames of at most {@link #MAX_FRAME_RAW}
   * raw bytes each (a frame may end inside a record: the reader concatenates the unwrapped
   * frames of a map into one stream), so no batch can exceed the workers' batch limit even for
   * records larger than a batch.
   */
  private void flush(int p, boolean keepBuffer) throws IOException {
    memory.throwIfSpillFailed();
    PartitionChunks buf = bufs[p];
    int len = buf == null ? 0 : buf.length();
    if (len == 0) {
      if (!keepBuffer && buf != null) {
        // An empty buffer kept from an earlier push: freed too.
        free(p);
      }
      return;
    }
    long t0 = System.nanoTime();
    int chunk = Math.min(attempt.conf.batchSize, MAX_FRAME_RAW);
    ShuffleBlockId blockId = new ShuffleBlockId(handle.shuffleId(), attempt.mapTaskId, p);
    for (int off = 0; off < len; off += chunk) {
      int n = Math.min(chunk, len - off);
      ByteSink sink = frameSink(n);
      OutputStream w = serializerManager.wrapStream(blockId, sink);
      buf.writeTo(w, off, n);
      w.close();
      countFrameSink(sink.array().length);
      int frameLen = sink.length();
      bytes[p] += frameLen;
      attempt.metrics.incBytesWritten(frameLen);
      memory.holdFrame(frameLen);
      attempt.push(p, Arrays.copyOf(sink.array(), frameLen), frameLen, !memory.spilling());
      PushBufferMemory.sawMemory(capacity + frameSinkAsked + attempt.unacknowledgedBytes());
    }
    buf.clear();
    buffered -= len;
    if (!keepBuffer || capacity > attempt.conf.maxInFlight) {
      free(p);
    }
    writeNanos += System.nanoTime() - t0;
  }

  /**
   * The frame sink, emptied, with room for a frame of {@code raw} bytes that do not compress
   * (the codecs' framing adds well under 1/16): replaced by a larger one, counted first, when it
   * has less.
   */
  private ByteSink frameSink(int raw) {
    int want = (int) Math.min(Integer.MAX_VALUE - 8, raw + (raw >> 4) + 1024L);
    if (frameSink == null || frameSink.array().length < want) {
      frameSink = null;
      countFrameSink(want);
      frameSink = new ByteSink(want);
    }
    frameSink.reset();
    return frameSink;
  }

  /**
   * Asks Spark for the frame sink's array at {@code bytes} if that is more than asked so far. Not
   * while the writer pushes for another consumer (Spark is asking for memory back then): what it
   * grew by is asked for at the next frame.
   */
  private void countFrameSink(long bytes) {
    if (bytes > frameSinkAsked && !memory.spilling()) {
      memory.holdSink(bytes - frameSinkAsked);
      frameSinkAsked = bytes;
    }
  }

  /** Drops partition p's buffer and gives its memory back. */
  private void free(int p) {
    long c = bufs[p].capacity();
    capacity -= c;
    memory.releaseBuffer(c);
    bufs[p] = null;
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    try {
      return attempt.stop(success);
    } finally {
      bufs = null;
      frameSink = null;
    }
  }

  @Override
  public long[] getPartitionLengths() {
    return attempt.partitionLengths();
  }
}
