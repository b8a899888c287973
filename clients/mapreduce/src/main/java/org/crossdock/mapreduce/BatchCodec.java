package org.crossdock.mapreduce;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.apache.hadoop.io.compress.CodecPool;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.CompressionInputStream;
import org.apache.hadoop.io.compress.CompressionOutputStream;
import org.apache.hadoop.io.compress.Compressor;
import org.apache.hadoop.io.compress.Decompressor;
import org.apache.hadoop.io.compress.DefaultCodec;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.util.ReflectionUtils;
import org.crossdock.client.BufferStream;
import org.crossdock.client.ByteSink;

/**
 * Map output compression, as the job asks for it with MapReduce's own settings
 * ({@code mapreduce.map.output.compress}, {@code mapreduce.map.output.compress.codec}).
 *
 * <p>Each pushed batch is compressed on its own, so that it still decodes alone (a reducer
 * reads a run batch by batch, and resumes a broken read at a batch): {@code u32 rawLength}
 * (big-endian), then the codec's stream of the batch's records ({@link RecordFormat}). Maps and
 * reduces of a job read the same job settings, so both sides agree without anything on the
 * wire saying which codec it is. The byte counters (materialized, shuffled) count what travels,
 * compressed, as MapReduce's own shuffle does.
 *
 * <p>One instance serves one task's thread: it keeps one pooled compressor or decompressor,
 * returned by {@link #close}. A batch is handed to the codec in one write: some of Hadoop's
 * pure-Java compressors (gzip's) start their stream afresh on every input they are given.
 */
final class BatchCodec implements AutoCloseable {
  /** Bytes decompressed per read: some codecs (bzip2's pure-Java stream) misread at offsets. */
  private static final int SCRATCH = 64 << 10;

  private final CompressionCodec codec;
  private final JobConf job;
  /** Pooled (de)compressors, looked up once: a codec without one gets null every time. */
  private Compressor compressor;
  private Decompressor decompressor;
  private boolean compressorLooked;
  private boolean decompressorLooked;
  /** Where a batch is compressed before its exact-length copy is pushed. */
  private final ByteSink out = new ByteSink(64 << 10);
  private byte[] scratch;
  /** The raw length of the batch {@link #decompress} last decoded. */
  int lastLength;

  private BatchCodec(CompressionCodec codec, JobConf job) {
    this.codec = codec;
    this.job = job;
  }

  /** The job's codec for map outputs, or null when the job does not compress them. */
  static BatchCodec of(JobConf job) {
    if (!job.getCompressMapOutput()) {
      return null;
    }
    Class<? extends CompressionCodec> c = job.getMapOutputCompressorClass(DefaultCodec.class);
    return new BatchCodec(ReflectionUtils.newInstance(c, job), job);
  }

  String name() {
    return codec.getClass().getSimpleName();
  }

  /** {@code raw[0, len)} compressed, in a new array of exactly its length (the pusher's). */
  byte[] compress(byte[] raw, int len) throws IOException {
    if (!compressorLooked) {
      compressorLooked = true;
      compressor = CodecPool.getCompressor(codec, job);
    }
    if (compressor != null) {
      compressor.reset();
    }
    out.reset();
    out.write(len >>> 24);
    out.write(len >>> 16);
    out.write(len >>> 8);
    out.write(len);
    // close() finishes the stream once (finish() and then close() would make bzip2's
    // pure-Java stream begin a second, empty one); our pooled compressor stays ours.
    try (CompressionOutputStream s = compressor == null
        ? codec.createOutputStream(out) : codec.createOutputStream(out, compressor)) {
      s.write(raw, 0, len);
    }
    return Arrays.copyOf(out.array(), out.length());
  }

  /**
   * Decompresses one fetched batch into {@code into} (a new array when it is too small);
   * returns the array holding the raw records, whose first {@link #lastLength} bytes count.
   *
   * @param maxRaw the largest raw batch a map can push; a larger length is a corrupt batch
   */
  byte[] decompress(ByteBuffer payload, byte[] into, int maxRaw) throws IOException {
    ByteBuffer p = payload.duplicate();
    if (p.remaining() < 4) {
      throw new IOException("a compressed batch of " + p.remaining() + " bytes has no length");
    }
    int rawLen = p.getInt();
    if (rawLen < 0 || rawLen > maxRaw) {
      throw new IOException("a compressed batch claims " + Integer.toUnsignedString(rawLen)
          + " raw bytes; batches hold at most " + maxRaw);
    }
    byte[] raw = into != null && into.length >= rawLen ? into : new byte[rawLen];
    if (!decompressorLooked) {
      decompressorLooked = true;
      decompressor = CodecPool.getDecompressor(codec);
    }
    if (decompressor != null) {
      decompressor.reset();
    }
    if (scratch == null) {
      scratch = new byte[SCRATCH];
    }
    InputStream in = BufferStream.of(p);
    int got = 0;
    try (CompressionInputStream s = decompressor == null
        ? codec.createInputStream(in) : codec.createInputStream(in, decompressor)) {
      int idle = 0;
      for (int n; (n = s.read(scratch, 0, scratch.length)) >= 0; ) {
        idle = n == 0 ? idle + 1 : 0;
        if (idle > 64) {
          throw new IOException("the " + name() + " stream of a batch stopped giving bytes");
        }
        if (got + n > rawLen) {
          throw new IOException("a compressed batch holds more than the " + rawLen
              + " raw bytes it claims (" + name() + ")");
        }
        System.arraycopy(scratch, 0, raw, got, n);
        got += n;
      }
    } catch (RuntimeException e) {
      // Some pure-Java decoders fail on corrupt input with an unchecked exception.
      throw new IOException(name() + " could not decode a batch: " + e, e);
    }
    if (got < rawLen) {
      throw new IOException("a compressed batch holds " + got + " of the " + rawLen
          + " raw bytes it claims (" + name() + ")");
    }
    lastLength = rawLen;
    return raw;
  }

  @Override
  public void close() {
    if (compressor != null) {
      CodecPool.returnCompressor(compressor);
      compressor = null;
    }
    if (decompressor != null) {
      CodecPool.returnDecompressor(decompressor);
      decompressor = null;
    }
  }
}
