package org.apache.spark.shuffle.crossdock;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The direct writer's per-partition chunks: bytes kept in order, growth without copies. */
class PartitionChunksTest {
  /** Appends {@code n} bytes from {@code src} at {@code off}, adding the chunk asked for first. */
  static void append(PartitionChunks b, byte[] src, int off, int n) {
    int chunk = b.chunkFor(n);
    if (chunk > 0) {
      b.addChunk(chunk);
    }
    assertEquals(0, b.chunkFor(n), "room after the chunk asked for");
    b.append(src, off, n);
  }

  static byte[] read(PartitionChunks b, int from, int n) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    b.writeTo(out, from, n);
    return out.toByteArray();
  }

  @Test
  void recordsOfEverySizeComeBackInOrderFromAnyRange() throws Exception {
    Random rnd = new Random(7);
    byte[] src = new byte[3 << 20];
    rnd.nextBytes(src);
    PartitionChunks b = new PartitionChunks();
    int at = 0;
    // Small records, records across chunk ends, and one longer than the largest chunk.
    int[] sizes = {1, 17, 4000, 300, 9000, 0, 70_000, PartitionChunks.MAX_CHUNK + 12_345, 5, 200_000};
    for (int round = 0; round < 3; round++) {
      for (int n : sizes) {
        append(b, src, at, n);
        at += n;
      }
    }
    assertEquals(at, b.length());
    assertArrayEquals(java.util.Arrays.copyOf(src, at), read(b, 0, at));
    for (int i = 0; i < 200; i++) {
      int from = rnd.nextInt(at);
      int n = rnd.nextInt(at - from + 1);
      assertArrayEquals(java.util.Arrays.copyOfRange(src, from, from + n), read(b, from, n), from + "+" + n);
    }
    int end = at;
    assertThrows(IndexOutOfBoundsException.class, () -> read(b, end - 1, 2));
  }

  @Test
  void chunksGrowWithTheBufferUpToTheLargestAndCostLittleMoreThanTheyHold() {
    PartitionChunks b = new PartitionChunks();
    byte[] record = new byte[100];
    assertEquals(PartitionChunks.FIRST, b.chunkFor(100), "the first chunk");
    int held = 0;
    while (held < (4 << 20)) {
      int chunk = b.chunkFor(record.length);
      if (chunk > 0) {
        long before = b.capacity();
        assertEquals(Math.min(PartitionChunks.MAX_CHUNK, Math.max(PartitionChunks.FIRST, before)), chunk,
            "a chunk as large as the buffer, at most the largest, at " + before);
        b.addChunk(chunk);
      }
      b.append(record, 0, record.length);
      held += record.length;
    }
    // Room left is at most the last chunk: less than the largest chunk.
    assertTrue(b.capacity() - b.length() < PartitionChunks.MAX_CHUNK, "capacity " + b.capacity());
    assertThrows(IllegalStateException.class, () -> b.append(new byte[PartitionChunks.MAX_CHUNK], 0, PartitionChunks.MAX_CHUNK));
  }

  @Test
  void aClearedBufferFillsItsChunksAgainWithoutNewOnes() throws Exception {
    PartitionChunks b = new PartitionChunks();
    byte[] a = new byte[50_000];
    java.util.Arrays.fill(a, (byte) 1);
    append(b, a, 0, a.length);
    append(b, a, 0, a.length);
    long capacity = b.capacity();
    b.clear();
    assertEquals(0, b.length());
    byte[] c = new byte[90_000];
    new Random(3).nextBytes(c);
    assertEquals(0, b.chunkFor(c.length), "the kept chunks have room");
    b.append(c, 0, c.length);
    assertEquals(capacity, b.capacity());
    assertArrayEquals(c, read(b, 0, c.length));
  }
}
