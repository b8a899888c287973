package org.crossdock.mapreduce;

import java.util.Arrays;

/**
 * One pushed batch being filled with whole records in the wire format ({@link RecordFormat}):
 * records are copied into a plain array (Hadoop's DataOutputBuffer takes a lock for every byte
 * and every write, which cost the map a third of its own CPU). {@link #take} hands the array to
 * the pusher, which owns it from then on, and starts a fresh one.
 */
final class BatchBuffer {
  private final int capacity;
  private byte[] buf;
  private int len;

  BatchBuffer(int capacity) {
    this.capacity = capacity;
  }

  int length() {
    return len;
  }

  /** Appends the record {@code b[keyOff, +keyLen)}, {@code b[valOff, +valLen)}. */
  void append(byte[] b, int keyOff, int keyLen, int valOff, int valLen) {
    int need = RecordFormat.size(keyLen, valLen);
    if (buf == null) {
      buf = new byte[Math.max(capacity, need)]; // allocated when a record comes, not before
    } else if (len + need > buf.length) {
      buf = Arrays.copyOf(buf, Math.max(len + need, buf.length * 2)); // a record larger alone
    }
    len = RecordFormat.putVInt(buf, len, keyLen);
    len = RecordFormat.putVInt(buf, len, valLen);
    System.arraycopy(b, keyOff, buf, len, keyLen);
    len += keyLen;
    System.arraycopy(b, valOff, buf, len, valLen);
    len += valLen;
  }

  /** The filled array (its first {@link #length} bytes count); the buffer starts empty again. */
  byte[] take() {
    byte[] b = buf;
    buf = null;
    len = 0;
    return b;
  }
}
