package org.crossdock.mapreduce;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import org.apache.hadoop.mapred.JobConf;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Batches through each codec a job may name, with Hadoop's pure-Java codecs as the tests run
 * (no libhadoop): sizes from one byte to past bzip2's 900 KB block, one codec instance reused
 * for every batch as a task reuses it, payloads as read-only buffers as fetches deliver them,
 * and corrupt batches refused with a message.
 */
class BatchCodecTest {
  static final int MAX = 16 << 20;

  static BatchCodec codec(String name) {
    JobConf job = new JobConf(false);
    job.setBoolean("mapreduce.map.output.compress", true);
    job.set("mapreduce.map.output.compress.codec", "org.apache.hadoop.io.compress." + name);
    return BatchCodec.of(job);
  }

  /** Bytes from a small alphabet in runs: compressible, not trivially. */
  static byte[] records(int n, long seed) {
    Random r = new Random(seed);
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) {
      b[i] = (byte) ('a' + (i % 7 == 0 ? r.nextInt(26) : r.nextInt(4)));
    }
    return b;
  }

  static ByteBuffer fetched(byte[] compressed) {
    return ByteBuffer.wrap(compressed).asReadOnlyBuffer();
  }

  @ParameterizedTest
  @ValueSource(strings = {"DefaultCodec", "GzipCodec", "BZip2Codec", "SnappyCodec"})
  void batchesOfEverySizeRoundTripThroughOneReusedCodec(String name) throws IOException {
    try (BatchCodec maps = codec(name); BatchCodec reduce = codec(name)) {
      byte[] into = null;
      int[] sizes = {1, 1024, 200 << 10, 2 << 20, 77, 5};
      for (int i = 0; i < sizes.length; i++) {
        byte[] raw = records(sizes[i], i);
        byte[] c = maps.compress(raw, raw.length);
        assertEquals(raw.length, ByteBuffer.wrap(c).getInt(), "the raw length leads the batch");
        into = reduce.decompress(fetched(c), into, MAX);
        assertEquals(raw.length, reduce.lastLength);
        assertArrayEquals(raw, Arrays.copyOf(into, reduce.lastLength), name + ", " + sizes[i]);
        if (sizes[i] >= 1024) {
          assertTrue(c.length < raw.length, name + " did not shrink " + sizes[i] + " bytes");
        }
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"DefaultCodec", "BZip2Codec"})
  void corruptBatchesAreRefusedWithAMessage(String name) throws IOException {
    try (BatchCodec codec = codec(name)) {
      byte[] raw = records(64 << 10, 7);
      byte[] c = codec.compress(raw, raw.length);

      IOException tiny = assertThrows(IOException.class,
          () -> codec.decompress(fetched(new byte[] {0, 1}), null, MAX));
      assertTrue(tiny.getMessage().contains("has no length"), tiny.getMessage());

      byte[] huge = c.clone();
      ByteBuffer.wrap(huge).putInt(MAX + 1);
      IOException big = assertThrows(IOException.class,
          () -> codec.decompress(fetched(huge), null, MAX));
      assertTrue(big.getMessage().contains("batches hold at most"), big.getMessage());

      byte[] claimsLess = c.clone();
      ByteBuffer.wrap(claimsLess).putInt(raw.length - 1);
      IOException more = assertThrows(IOException.class,
          () -> codec.decompress(fetched(claimsLess), null, MAX));
      assertTrue(more.getMessage().contains("holds more than"), more.getMessage());

      byte[] claimsMore = c.clone();
      ByteBuffer.wrap(claimsMore).putInt(raw.length + 1);
      IOException fewer = assertThrows(IOException.class,
          () -> codec.decompress(fetched(claimsMore), null, MAX));
      assertTrue(fewer.getMessage().contains("of the " + (raw.length + 1)), fewer.getMessage());

      byte[] cut = Arrays.copyOf(c, c.length / 2);
      assertThrows(IOException.class, () -> codec.decompress(fetched(cut), null, MAX));

      // After all that, the same codec still reads a good batch.
      byte[] back = codec.decompress(fetched(c), null, MAX);
      assertArrayEquals(raw, Arrays.copyOf(back, codec.lastLength));
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"false", "unset"})
  void aJobThatDoesNotCompressHasNoCodec(String setting) {
    JobConf job = new JobConf(false);
    if (!setting.equals("unset")) {
      job.set("mapreduce.map.output.compress", setting);
    }
    assertNull(BatchCodec.of(job));
  }
}
