package org.crossdock.mapreduce;

import java.io.DataOutput;
import java.io.IOException;
import org.apache.hadoop.io.WritableUtils;

/**
 * How a MapReduce record travels through Crossdock: {@code vint keyLength, vint valueLength, key,
 * value}, Hadoop's own variable-length integers (WritableUtils) and its IFile record layout
 * without IFile's end marker and checksum (every pushed batch carries a CRC32C already). A batch
 * holds whole records only, so each batch decodes on its own, and a run is its batches in order.
 */
final class RecordFormat {
  private RecordFormat() {}

  /** Bytes {@link #write} takes for a record of these lengths. */
  static int size(int keyLen, int valLen) {
    return WritableUtils.getVIntSize(keyLen) + WritableUtils.getVIntSize(valLen) + keyLen + valLen;
  }

  static void write(DataOutput out, byte[] key, int keyOff, int keyLen, byte[] val, int valOff,
      int valLen) throws IOException {
    WritableUtils.writeVInt(out, keyLen);
    WritableUtils.writeVInt(out, valLen);
    out.write(key, keyOff, keyLen);
    out.write(val, valOff, valLen);
  }

  /**
   * Writes the non-negative {@code v} at {@code pos} of {@code b} as WritableUtils.writeVInt
   * does (one byte up to 127, else a length byte and 1–4 big-endian bytes); returns the position
   * after it. Used where records are copied into batches: no stream, no lock per byte.
   */
  static int putVInt(byte[] b, int pos, int v) {
    if (v <= 127) {
      b[pos] = (byte) v;
      return pos + 1;
    }
    int bytes = 4 - Integer.numberOfLeadingZeros(v) / 8;
    b[pos++] = (byte) (-112 - bytes);
    for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) {
      b[pos++] = (byte) (v >>> shift);
    }
    return pos;
  }

  /**
   * Reads one variable-length int at {@code pos} of {@code b} (below {@code end}) into {@code
   * out[0]}; returns the position after it. Throws on a truncated or negative length.
   */
  static int readVInt(byte[] b, int pos, int end, int[] out) throws IOException {
    if (pos >= end) {
      throw new IOException("a record is cut off (no length at byte " + pos + ")");
    }
    byte first = b[pos];
    int n = WritableUtils.decodeVIntSize(first);
    if (pos + n > end) {
      throw new IOException("a record is cut off (a length at byte " + pos + ")");
    }
    long v;
    if (n == 1) {
      v = first;
    } else {
      long x = 0;
      for (int i = 1; i < n; i++) {
        x = (x << 8) | (b[pos + i] & 0xff);
      }
      v = WritableUtils.isNegativeVInt(first) ? ~x : x;
    }
    if (v < 0 || v > Integer.MAX_VALUE) {
      throw new IOException("a record length of " + v + " at byte " + pos);
    }
    out[0] = (int) v;
    return pos + n;
  }
}
