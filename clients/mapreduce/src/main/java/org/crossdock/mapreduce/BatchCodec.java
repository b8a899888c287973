package org.crossdock.mapreduce;

import java.io.ByteArrayInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.apache.hadoop.io.IOUtils;
import org.apache.hadoop.io.compress.CodecPool;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.CompressionInputStream;
import org.apache.hadoop.io.compress.CompressionOutputStream;
import org.apache.hadoop.io.compress.Compressor;
import org.apache.hadoop.io.compress.Decompressor;
import org.apache.hadoop.io.compress.DefaultCodec;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.util.ReflectionUtils;

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
 * returned by {@link #close}.
 */
final class BatchCodec implements AutoCloseable {
  private final CompressionCodec codec;
  private Compressor compressor;
  private Decompressor decompressor;
  /** Where a batch is compressed before its exact-length copy is pushed. */
  private final Growable out = new Growable();
  /** The raw length of the batch {@link #decompress} last decoded. */
  int lastLength;

  private BatchCodec(CompressionCodec codec) {
    this.codec = codec;
  }

  /** The job's codec for map outputs, or null when the job does not compress them. */
  static BatchCodec of(JobConf job) {
    if (!job.getCompressMapOutput()) {
      return null;
    }
    Class<? extends CompressionCodec> c = job.getMapOutputCompressorClass(DefaultCodec.class);
    return new BatchCodec(ReflectionUtils.newInstance(c, job));
  }

  String name() {
    return codec.getClass().getSimpleName();
  }

  /** {@code raw[0, len)} compressed, in a new array of exactly its length (the pusher's). */
  byte[] compress(byte[] raw, int len) throws IOException {
    if (compressor == null) {
      compressor = CodecPool.getCompressor(codec);
    }
    if (compressor != null) {
      compressor.reset();
    }
    out.reset();
    out.write(len >>> 24);
    out.write(len >>> 16);
    out.write(len >>> 8);
    out.write(len);
    CompressionOutputStream s = compressor == null
        ? codec.createOutputStream(out) : codec.createOutputStream(out, compressor);
    s.write(raw, 0, len);
    s.finish();
    return Arrays.copyOf(out.buf, out.len);
  }

  /**
   * Decompresses one fetched batch into {@code into} (grown when too small); returns the array
   * holding the raw records, whose first {@link #lastLength} bytes count.
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
    ByteArrayInputStream in = p.hasArray()
        ? new ByteArrayInputStream(p.array(), p.arrayOffset() + p.position(), p.remaining())
        : new ByteArrayInputStream(copy(p));
    byte[] raw = into != null && into.length >= rawLen ? into : new byte[rawLen];
    if (decompressor == null) {
      decompressor = CodecPool.getDecompressor(codec);
    }
    if (decompressor != null) {
      decompressor.reset();
    }
    try (CompressionInputStream s = decompressor == null
        ? codec.createInputStream(in) : codec.createInputStream(in, decompressor)) {
      IOUtils.readFully(s, raw, 0, rawLen);
      if (s.read() >= 0) {
        throw new IOException("a compressed batch holds more than the " + rawLen
            + " raw bytes it claims (" + name() + ")");
      }
    } catch (EOFException e) {
      throw new IOException("a compressed batch holds fewer than the " + rawLen
          + " raw bytes it claims (" + name() + ")", e);
    }
    lastLength = rawLen;
    return raw;
  }

  private static byte[] copy(ByteBuffer p) {
    byte[] b = new byte[p.remaining()];
    p.get(b);
    return b;
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

  /** A byte sink whose array is reused from batch to batch (no lock per byte). */
  private static final class Growable extends OutputStream {
    byte[] buf = new byte[64 << 10];
    int len;

    void reset() {
      len = 0;
    }

    @Override
    public void write(int b) {
      ensure(1);
      buf[len++] = (byte) b;
    }

    @Override
    public void write(byte[] b, int off, int n) {
      ensure(n);
      System.arraycopy(b, off, buf, len, n);
      len += n;
    }

    private void ensure(int n) {
      if (len + n > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(len + n, buf.length * 2));
      }
    }
  }
}
