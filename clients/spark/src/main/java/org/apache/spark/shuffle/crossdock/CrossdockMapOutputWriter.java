package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.io.OutputStream;
import java.util.Arrays;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.api.ShuffleMapOutputWriter;
import org.apache.spark.shuffle.api.ShufflePartitionWriter;
import org.apache.spark.shuffle.api.metadata.MapOutputCommitMessage;
import org.crossdock.client.MapPusher;
import org.crossdock.client.Placement;

/**
 * The sink of {@code ExternalSorter.writePartitionedMapOutput}: Spark writes each partition's
 * records as one serialized stream, already wrapped with {@code serializerManager.wrapStream}
 * (compression, encryption), into the stream this writer opens; the stream cuts it into batches
 * of {@code batchSize} bytes and hands them to the {@link MapPusher}. Spark opens partitions one
 * after the other, so only one batch buffer is filled at a time.
 *
 * <p><b>Several runs.</b> A map of a merged shuffle that runs short of memory pushes each sorted
 * spill as a run of its own ({@link SpillRuns}) through this writer too, and the rest at the end:
 * a partition may then be opened once per run, each time as a new stream, and each stream
 * begins a run at the pusher ({@link MapPusher#beginRun}), which notes where the later ones begin
 * for the commit.
 *
 * <p><b>Memory.</b> Each batch pushed stays in the heap until its worker acknowledges it; it is
 * held as the task's execution memory first ({@link PushBufferMemory#holdFrame}), so that when the
 * sorter holds the task's whole share (a spill pushed as a run is written while the sorter still
 * holds the records it spills) the writer waits for acknowledgements instead of filling the push
 * window beside it.
 */
final class CrossdockMapOutputWriter implements ShuffleMapOutputWriter {
  private final MapPusher pusher;
  private final Placement placement;
  private final PushBufferMemory memory;
  private final int batchSize;
  final long[] bytes;
  final long[] records;
  private int current = -1;

  CrossdockMapOutputWriter(MapPusher pusher, Placement placement, PushBufferMemory memory,
      int numPartitions, int batchSize) {
    this.pusher = pusher;
    this.placement = placement;
    this.memory = memory;
    this.batchSize = batchSize;
    this.bytes = new long[numPartitions];
    this.records = new long[numPartitions];
  }

  @Override
  public ShufflePartitionWriter getPartitionWriter(int partition) {
    current = partition;
    pusher.beginRun(partition);
    return new ShufflePartitionWriter() {
      private PartitionStream stream;

      @Override
      public OutputStream openStream() {
        if (stream == null) {
          stream = new PartitionStream(partition);
        }
        return stream;
      }

      /** This stream's bytes: Spark counts each stream's own into the write metrics. */
      @Override
      public long getNumBytesWritten() {
        return stream == null ? 0 : stream.written;
      }
    };
  }

  @Override
  public MapOutputCommitMessage commitAllPartitions(long[] checksums) {
    return MapOutputCommitMessage.of(bytes.clone());
  }

  @Override
  public void abort(Throwable error) {
    pusher.close();
  }

  /** Wraps the task's write metrics to attribute each written record to the open partition. */
  ShuffleWriteMetricsReporter countingRecords(ShuffleWriteMetricsReporter m) {
    return new ShuffleWriteMetricsReporter() {
      @Override
      public void incBytesWritten(long v) {
        m.incBytesWritten(v);
      }

      @Override
      public void incRecordsWritten(long v) {
        if (current >= 0) {
          records[current] += v;
        }
        m.incRecordsWritten(v);
      }

      @Override
      public void incWriteTime(long v) {
        m.incWriteTime(v);
      }

      @Override
      public void decBytesWritten(long v) {
        m.decBytesWritten(v);
      }

      @Override
      public void decRecordsWritten(long v) {
        if (current >= 0) {
          records[current] -= v;
        }
        m.decRecordsWritten(v);
      }
    };
  }

  /** One partition's byte stream, cut into batches. */
  private final class PartitionStream extends OutputStream {
    private final int partition;
    private final String addr;
    private byte[] buf;
    private int len;
    private boolean closed;
    /** Bytes written to this stream (one run of the partition). */
    long written;

    PartitionStream(int partition) {
      this.partition = partition;
      this.addr = placement.addrOf(partition);
      // Start small and grow: most partitions of a wide shuffle are far smaller than a batch.
      this.buf = new byte[Math.min(batchSize, 32 << 10)];
    }

    @Override
    public void write(int b) throws IOException {
      if (len == buf.length) {
        grow(1);
      }
      buf[len++] = (byte) b;
      bytes[partition]++;
      written++;
    }

    @Override
    public void write(byte[] b, int off, int n) throws IOException {
      bytes[partition] += n;
      written += n;
      while (n > 0) {
        if (len == buf.length) {
          grow(n);
        }
        int k = Math.min(n, buf.length - len);
        System.arraycopy(b, off, buf, len, k);
        len += k;
        off += k;
        n -= k;
      }
    }

    /** Grows the buffer up to a batch, or pushes the full batch and starts a new one. */
    private void grow(int want) throws IOException {
      if (buf.length < batchSize) {
        int size = (int) Math.min(batchSize, Math.max((long) buf.length * 2, (long) len + want));
        buf = Arrays.copyOf(buf, size);
      } else {
        flushBatch();
        buf = new byte[batchSize];
      }
    }

    private void flushBatch() throws IOException {
      if (len > 0) {
        memory.holdFrame(len);
        pusher.push(partition, addr, buf, len);
        buf = null;
        len = 0;
      }
    }

    @Override
    public void close() throws IOException {
      if (!closed) {
        closed = true;
        flushBatch();
      }
    }
  }
}
