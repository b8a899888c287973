package org.crossdock.client;

import java.io.OutputStream;
import java.util.Arrays;

/**
 * A growable in-memory byte sink whose array is read in place ({@link #array}, {@link #length})
 * and reused after {@link #reset}: where a batch is assembled before it is pushed. Unlike
 * {@link java.io.ByteArrayOutputStream} it takes no lock per write and hands its array out
 * without a copy. Not thread-safe.
 */
public final class ByteSink extends OutputStream {
  private byte[] buf;
  private int count;

  /** A sink whose first array holds {@code capacity} bytes (at least 64). */
  public ByteSink(int capacity) {
    buf = new byte[Math.max(capacity, 64)];
  }

  /** The array written so far; its first {@link #length} bytes count. */
  public byte[] array() {
    return buf;
  }

  public int length() {
    return count;
  }

  /** Empties the sink, keeping its array. */
  public void reset() {
    count = 0;
  }

  @Override
  public void write(int b) {
    ensure(1);
    buf[count++] = (byte) b;
  }

  @Override
  public void write(byte[] b, int off, int len) {
    ensure(len);
    System.arraycopy(b, off, buf, count, len);
    count += len;
  }

  private void ensure(int n) {
    if (count + n > buf.length) {
      buf = Arrays.copyOf(buf, (int) Math.min(Integer.MAX_VALUE - 8,
          Math.max((long) buf.length * 2, (long) count + n)));
    }
  }
}
