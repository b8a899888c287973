package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.io.OutputStream;
import java.util.Arrays;

/**
 * One partition's serialized records in the direct writer, in chunks filled one after the other.
 *
 * <p>A buffer that doubles copies what it holds at every growth and, while it copies, needs the old
 * and the new array at once (three times its contents): in a map task of a small executor that
 * transient was where the heap ran out, and across a task its copies allocate about twice the bytes
 * it writes. Chunks are never copied: a buffer grows by one more chunk, whose size follows the
 * buffer's (from {@link #FIRST} bytes, doubling what it holds, up to {@link #MAX_CHUNK}), so a
 * partition that holds little costs little and one that holds a batch needs a handful of chunks.
 * A record longer than the room left spans chunks; one longer than a chunk gets a chunk of its own
 * size for what does not fit.
 *
 * <p>The writer asks {@link #chunkFor} before it appends, so that the memory of the chunk it adds
 * is granted by Spark first. {@link #clear} keeps the chunks for the partition's next records (the
 * writer's choice, as it kept its arrays before). Not thread-safe.
 */
final class PartitionChunks {
  /** The first chunk's size. */
  static final int FIRST = 4 << 10;
  /** The largest chunk added for growth (a longer record still gets one of its own length). */
  static final int MAX_CHUNK = 256 << 10;

  private byte[][] chunks = new byte[4][];
  private int count;
  /** The chunk being filled, and where in it. */
  private int at;
  private int pos;
  private int length;
  private long capacity;

  /** Bytes held. */
  int length() {
    return length;
  }

  /** Bytes of the chunks allocated (what the buffer costs). */
  long capacity() {
    return capacity;
  }

  /**
   * The size of the chunk to {@link #addChunk} before {@code n} more bytes can be appended, or 0
   * if the chunks have room for them.
   */
  int chunkFor(int n) {
    long room = capacity - length;
    if (room >= n) {
      return 0;
    }
    long grown = Math.min(MAX_CHUNK, Math.max(FIRST, capacity));
    return (int) Math.min(Integer.MAX_VALUE - 8, Math.max(grown, n - room));
  }

  /** Adds an empty chunk of {@code size} bytes after the others. */
  void addChunk(int size) {
    if (count == chunks.length) {
      chunks = Arrays.copyOf(chunks, count * 2);
    }
    chunks[count++] = new byte[size];
    capacity += size;
  }

  /** Appends {@code src[off, off + n)}; the chunks must have room ({@link #chunkFor} was 0). */
  void append(byte[] src, int off, int n) {
    if (capacity - length < n) {
      throw new IllegalStateException("no room for " + n + " bytes: " + (capacity - length) + " left");
    }
    length += n;
    while (n > 0) {
      byte[] c = chunks[at];
      int k = Math.min(n, c.length - pos);
      System.arraycopy(src, off, c, pos, k);
      off += k;
      n -= k;
      pos += k;
      if (pos == c.length && at + 1 < count) {
        at++;
        pos = 0;
      }
    }
  }

  /** Writes the {@code n} bytes held from {@code from} on to {@code out}. */
  void writeTo(OutputStream out, int from, int n) throws IOException {
    if (from < 0 || n < 0 || from > length - n) {
      throw new IndexOutOfBoundsException("bytes " + from + "+" + n + " of " + length);
    }
    if (n == 0) {
      return;
    }
    int i = 0;
    while (from >= chunks[i].length) {
      from -= chunks[i].length;
      i++;
    }
    while (n > 0) {
      int k = Math.min(n, chunks[i].length - from);
      out.write(chunks[i], from, k);
      n -= k;
      from = 0;
      i++;
    }
  }

  /** Empties the buffer and keeps its chunks, to be filled again from the first. */
  void clear() {
    length = 0;
    at = 0;
    pos = 0;
  }
}
