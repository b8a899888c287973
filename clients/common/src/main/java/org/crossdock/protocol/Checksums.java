package org.crossdock.protocol;

import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/** CRC32C (Castagnoli), the checksum of every pushed and fetched payload. */
public final class Checksums {
  private Checksums() {}

  public static int crc32c(byte[] b, int off, int len) {
    CRC32C c = new CRC32C();
    c.update(b, off, len);
    return (int) c.getValue();
  }

  /** CRC32C of the buffer's remaining bytes; the buffer's position is not changed. */
  public static int crc32c(ByteBuffer b) {
    CRC32C c = new CRC32C();
    c.update(b.duplicate());
    return (int) c.getValue();
  }
}
