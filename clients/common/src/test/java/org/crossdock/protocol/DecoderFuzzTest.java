package org.crossdock.protocol;

import static org.junit.jupiter.api.Assertions.*;

import com.code_intelligence.jazzer.junit.FuzzTest;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.fetch.StreamFrames;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Fuzzing of the Java decoder (issue 12; the Rust decoders' targets are in crates/fuzz): {@link
 * Codec#decodeFrame} with {@link FrameHeader#decode} and every message's body decoder, and the
 * fetch stream's frame reader {@link StreamFrames#read}.
 *
 * <p>What must hold for any bytes: the decoder returns or throws {@link ProtocolException} (a
 * {@code BufferUnderflowException}, a negative array size, an {@code OutOfMemoryError} is a
 * finding); what decodes encodes back to the bytes it was read from (a prefix of the body, as
 * decoders ignore bytes after the fields they know); and a decode allocates at most a fixed
 * multiple of its input's size plus a constant.
 *
 * <p>Two runs use it. {@code mvn package} (so {@code make test}): the {@link FuzzTest} in Jazzer's
 * regression mode, and {@link #vectorsAndFixedMutations} over the shared vectors and a fixed
 * sequence of mutations of them, deterministic. {@code make fuzz} (scripts/fuzz.sh): the same
 * {@link FuzzTest} in fuzzing mode ({@code JAZZER_FUZZ=1}), coverage-guided, seeded with the same
 * frames.
 */
class DecoderFuzzTest {
  /**
   * Bytes a decode may allocate per input byte, garbage included (the JVM counts every
   * allocation, and each string field costs a decoder, a view and a copy: a list of empty
   * strings, 2 bytes each on the wire, takes about 150 bytes each). An allocation sized by a
   * hostile count or length (up to 4 GiB from 4 bytes) is far past it.
   */
  static final long PER_INPUT_BYTE = 512;
  /** Bytes a decode may allocate whatever its input: error texts, the frame record. */
  static final long BASE = 4L << 20;
  /** Mutations of the fixed run: seconds in a test JVM. */
  static final int MUTATIONS = 20_000;

  static final com.sun.management.ThreadMXBean THREADS =
      (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

  /** Set once the decoder's classes are loaded (see {@link #warmUp}). */
  private static boolean warm;

  /**
   * Loads (and lets Jazzer instrument) every class a decode may use, before any allocation is
   * measured: loading and instrumenting a class allocates on the thread that first uses it, and
   * that is not the decoder's memory.
   */
  private static void warmUp() {
    if (warm) {
      return;
    }
    warm = true;
    try {
      List<byte[]> seeds = seeds();
      Mutator m = new Mutator(1);
      for (int i = 0; i < 2_000; i++) {
        byte[] input = i < seeds.size() ? seeds.get(i) : m.mutate(seeds.get(i % seeds.size()), seeds);
        checkFrame(input);
      }
    } catch (Exception e) {
      throw new IllegalStateException("the vectors cannot be read", e);
    }
  }

  /**
   * The coverage-guided target: one frame in memory, as the test vectors hold them. An input that
   * takes over 10 seconds is a hang (Jazzer hands the timeout to libFuzzer, per input; the first
   * one also loads the decoder, see {@link #warmUp}).
   */
  @FuzzTest(maxDuration = "10m")
  @Timeout(value = 10, unit = TimeUnit.SECONDS)
  void decodeFrame(byte[] data) {
    warmUp();
    long before = THREADS.getCurrentThreadAllocatedBytes();
    checkFrame(data);
    long allocated = THREADS.getCurrentThreadAllocatedBytes() - before;
    assertTrue(
        allocated <= data.length * PER_INPUT_BYTE + BASE,
        "decoding " + data.length + " bytes allocated " + allocated);
  }

  /** Every frame of vectors.json (valid and invalid) and fixed mutations of them. */
  @Test
  void vectorsAndFixedMutations() throws Exception {
    List<byte[]> seeds = seeds();
    assertTrue(seeds.size() >= 40, "the vectors' frames: " + seeds.size());
    for (byte[] s : seeds) {
      decodeFrame(s);
      readStream(s);
    }
    byte[] all = concat(seeds);
    readStream(all);
    Mutator m = new Mutator(0x5eedL);
    for (int i = 0; i < MUTATIONS; i++) {
      byte[] input = m.mutate(seeds.get(i % seeds.size()), seeds);
      try {
        decodeFrame(input);
        readStream(input);
      } catch (Throwable t) {
        throw new AssertionError("input " + HexFormat.of().formatHex(input), t);
      }
    }
  }

  /** Frames as a fetch stream delivers them, read one after another to the first error. */
  static void readStream(byte[] data) {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(data));
    for (int frames = 0; frames <= data.length / FrameHeader.LEN; frames++) {
      try {
        StreamFrames.read(in, "fuzz");
      } catch (CrossdockException e) {
        return; // a cut stream or bytes that are not a frame: named, not thrown raw
      }
    }
    fail("more frames than 16-byte headers in " + data.length + " bytes");
  }

  static void checkFrame(byte[] data) {
    if (data.length >= FrameHeader.LEN) {
      try {
        FrameHeader h = FrameHeader.decode(data, 0);
        // Every field is kept: the header encodes back exactly.
        assertArrayEquals(Arrays.copyOf(data, FrameHeader.LEN), h.encode());
      } catch (ProtocolException e) {
        assertNotNull(e.code());
      }
    }
    Codec.Frame f;
    try {
      f = Codec.decodeFrame(data);
    } catch (ProtocolException e) {
      assertNotNull(e.code());
      return;
    }
    assertEquals(f.header().kind(), f.message().kind());
    byte[] again = Codec.encodeFrame(f.message(), f.header().requestId());
    int bodyLen = again.length - FrameHeader.LEN;
    assertTrue(bodyLen <= f.header().bodyLen(), "the encoding is longer than what was read");
    assertArrayEquals(
        Arrays.copyOfRange(data, FrameHeader.LEN, FrameHeader.LEN + bodyLen),
        Arrays.copyOfRange(again, FrameHeader.LEN, again.length),
        "encodes to bytes that are not the ones it was read from: " + f.message());
    try {
      Codec.Frame back = Codec.decodeFrame(again);
      assertArrayEquals(again, Codec.encodeFrame(back.message(), back.header().requestId()));
    } catch (ProtocolException e) {
      fail("an encoded frame does not decode: " + e.getMessage());
    }
  }

  static List<byte[]> seeds() throws Exception {
    JsonNode v = VectorsTest.vectors();
    List<byte[]> out = new ArrayList<>();
    for (String list : new String[] {"frames", "invalid"}) {
      for (JsonNode f : v.get(list)) {
        out.add(HexFormat.of().parseHex(f.get("hex").asText()));
      }
    }
    return out;
  }

  static byte[] concat(List<byte[]> parts) {
    int n = parts.stream().mapToInt(p -> p.length).sum();
    byte[] out = new byte[n];
    int at = 0;
    for (byte[] p : parts) {
      System.arraycopy(p, 0, out, at, p.length);
      at += p.length;
    }
    return out;
  }

  /**
   * A fixed sequence of mutations (xorshift from a constant seed), the kinds that break decoders:
   * flipped bits, boundary values over length and count fields, bytes inserted and removed, cut
   * tails, splices. The same as crates/fuzz/src/mutate.rs does for the Rust decoders.
   */
  static final class Mutator {
    private long state;
    private static final long[] INTERESTING = {
      0, 1, 2, 0x7f, 0x80, 0xff, 0xffff, 0x1_0000, 0x7fff_ffffL, 0xffff_ffffL, Long.MIN_VALUE, -1
    };

    Mutator(long seed) {
      state = seed | 1;
    }

    private long next() {
      state ^= state >>> 12;
      state ^= state << 25;
      state ^= state >>> 27;
      return state * 0x2545_f491_4f6c_dd1dL;
    }

    private int below(int n) {
      return (int) Long.remainderUnsigned(next(), n);
    }

    byte[] mutate(byte[] input, List<byte[]> others) {
      byte[] out = input.clone();
      for (int i = 1 + below(4); i > 0; i--) {
        out = change(out, others);
      }
      return out;
    }

    private byte[] change(byte[] b, List<byte[]> others) {
      int len = b.length;
      switch (below(7)) {
        case 0:
          if (len > 0) {
            b[below(len)] ^= (byte) (1 << below(8));
          }
          return b;
        case 1:
          {
            int width = 1 << below(4);
            if (len >= width) {
              int at = below(len - width + 1);
              long v = INTERESTING[below(INTERESTING.length)];
              for (int i = 0; i < width; i++) {
                b[at + i] = (byte) (v >>> (8 * (width - 1 - i)));
              }
            }
            return b;
          }
        case 2:
          {
            int at = below(len + 1);
            byte[] fresh = new byte[1 + below(16)];
            for (int i = 0; i < fresh.length; i++) {
              fresh[i] = (byte) next();
            }
            byte[] out = new byte[len + fresh.length];
            System.arraycopy(b, 0, out, 0, at);
            System.arraycopy(fresh, 0, out, at, fresh.length);
            System.arraycopy(b, at, out, at + fresh.length, len - at);
            return out;
          }
        case 3:
          {
            if (len == 0) {
              return b;
            }
            int at = below(len);
            int n = 1 + below(Math.min(len - at, 32));
            byte[] out = new byte[len - n];
            System.arraycopy(b, 0, out, 0, at);
            System.arraycopy(b, at + n, out, at, len - at - n);
            return out;
          }
        case 4:
          return len == 0 ? b : Arrays.copyOf(b, below(len));
        case 5:
          if (len > 0) {
            b[below(len)] = (byte) next();
          }
          return b;
        default:
          {
            byte[] other = others.get(below(others.size()));
            int head = below(len + 1);
            int tail = below(other.length + 1);
            byte[] out = Arrays.copyOf(b, head + other.length - tail);
            System.arraycopy(other, tail, out, head, other.length - tail);
            return out;
          }
      }
    }
  }
}
