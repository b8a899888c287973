package org.crossdock.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;

/**
 * An InputStream over ByteBuffers read one after the other (fetched batches as the streams a
 * deserializer or a decompressor reads), without copying them into an array first.
 */
public abstract class BufferStream extends InputStream {
  /** The current buffer with bytes left, or null at the end of the stream. */
  protected abstract ByteBuffer buffer() throws IOException;

  /** A single buffer as a stream (read in place; its position moves). */
  public static BufferStream of(ByteBuffer b) {
    return new BufferStream() {
      @Override
      protected ByteBuffer buffer() {
        return b.hasRemaining() ? b : null;
      }

      @Override
      public int available() {
        return b.remaining();
      }
    };
  }

  /** The rest of the current buffer, or the next one; null at the end. */
  public ByteBuffer nextBatch() throws IOException {
    ByteBuffer b = buffer();
    if (b != null) {
      ByteBuffer rest = b.slice();
      b.position(b.limit());
      return rest;
    }
    return null;
  }

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
