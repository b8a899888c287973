package org.crossdock.mapreduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.io.RawComparator;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.io.WritableComparator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The merge of sorted runs ({@link MergedRuns}) over runs decoded from the wire format, a map's
 * sort buffer and its spill files: order, ties, empty runs, every record exactly once.
 */
class MergedRunsTest {
  @SuppressWarnings("unchecked")
  private static final RawComparator<Text> TEXT =
      (RawComparator<Text>) WritableComparator.get(Text.class);

  @TempDir Path dir;

  /** A run in the wire format, decoded as the reduce side decodes a batch. */
  private static RecordCursor run(String... records) throws IOException {
    DataOutputBuffer out = new DataOutputBuffer();
    for (String r : records) {
      String[] kv = r.split("=", 2);
      DataOutputBuffer k = new DataOutputBuffer();
      new Text(kv[0]).write(k);
      byte[] v = kv[1].getBytes(StandardCharsets.UTF_8);
      RecordFormat.write(out, k.getData(), 0, k.getLength(), v, 0, v.length);
    }
    byte[] b = Arrays.copyOf(out.getData(), out.getLength());
    return new RecordCursor() {
      private final int[] len = new int[1];
      private int pos;

      @Override
      boolean advance() throws IOException {
        if (pos >= b.length) {
          return false;
        }
        buf = b;
        pos = RecordFormat.readVInt(b, pos, b.length, len);
        keyLen = len[0];
        pos = RecordFormat.readVInt(b, pos, b.length, len);
        valLen = len[0];
        keyOff = pos;
        valOff = pos + keyLen;
        pos = valOff + valLen;
        return true;
      }
    };
  }

  private static List<String> drain(MergedRuns m) throws IOException {
    List<String> out = new ArrayList<>();
    while (m.next()) {
      Text k = new Text();
      var kb = m.getKey();
      k.readFields(kb);
      var vb = m.getValue();
      out.add(k + "=" + new String(vb.getData(), vb.getPosition(),
          vb.getLength() - vb.getPosition(), StandardCharsets.UTF_8));
    }
    m.close();
    return out;
  }

  @Test
  void runsMergeInKeyOrderWithTiesInRunOrderAndEmptyRunsSkipped() throws IOException {
    MergedRuns m = new MergedRuns(List.of(
        run(),
        run("a=0.1", "c=0.2", "c=0.3", "e=0.4"),
        run(),
        run("b=2.1", "c=2.2", "f=2.3"),
        run("c=3.1"),
        run()), TEXT);
    assertEquals(List.of("a=0.1", "b=2.1", "c=0.2", "c=0.3", "c=2.2", "c=3.1", "e=0.4", "f=2.3"),
        drain(m));
    assertEquals(1.0f, m.getProgress().getProgress());
  }

  @Test
  void aRunOutOfKeyOrderFailsTheMergeInsteadOfHandingItOut() throws IOException {
    // "d" after "e" in the second run: "e" is handed out, then "d" would follow it.
    MergedRuns m = new MergedRuns(List.of(run("a=0", "c=0", "f=0"), run("b=1", "e=1", "d=1")),
        TEXT);
    List<String> out = new ArrayList<>();
    IOException e = assertThrows(IOException.class, () -> {
      while (m.next()) {
        out.add(new String(m.getValue().getData(), m.getValue().getPosition(),
            m.getValue().getLength() - m.getValue().getPosition(), StandardCharsets.UTF_8));
      }
    });
    assertTrue(e.getMessage().contains("sorted run 1 of 2 is out of key order"), e.getMessage());
    assertEquals(List.of("0", "1", "0", "1"), out, "a, b, c, e handed out before the failure");
    m.close();
  }

  @Test
  void noRunsOrOnlyEmptyRunsMergeToNothing() throws IOException {
    assertFalse(new MergedRuns(List.of(), TEXT).next());
    assertFalse(new MergedRuns(List.of(run(), run()), TEXT).next());
  }

  @Test
  void aLengthCutOffOrNegativeIsAnError() {
    byte[] b = {5, 3, 'a'}; // a key of 5 bytes, a value of 3, one byte there
    assertThrows(IOException.class, () -> RecordFormat.readVInt(b, 3, 3, new int[1]));
    int[] len = new int[1];
    assertThrows(IOException.class, () -> RecordFormat.readVInt(new byte[] {-120}, 0, 1, len));
  }

  /** The batch encoder's lengths are Hadoop's own variable-length ints, byte for byte. */
  @Test
  void batchLengthsAreWritableUtilsVInts() throws IOException {
    int[] values = {0, 1, 100, 127, 128, 255, 256, 1000, 65535, 65536, 1 << 23, (1 << 24) - 1,
        1 << 24, 123456789, Integer.MAX_VALUE};
    for (int v : values) {
      DataOutputBuffer want = new DataOutputBuffer();
      org.apache.hadoop.io.WritableUtils.writeVInt(want, v);
      byte[] got = new byte[5];
      int n = RecordFormat.putVInt(got, 0, v);
      assertEquals(want.getLength(), n, "length of " + v);
      assertEquals(Arrays.toString(Arrays.copyOf(want.getData(), want.getLength())),
          Arrays.toString(Arrays.copyOf(got, n)), "bytes of " + v);
      int[] back = new int[1];
      assertEquals(n, RecordFormat.readVInt(got, 0, n, back));
      assertEquals(v, back[0]);
    }
    BatchBuffer b = new BatchBuffer(8);
    byte[] key = "k".repeat(300).getBytes(StandardCharsets.UTF_8);
    byte[] val = "v".repeat(5).getBytes(StandardCharsets.UTF_8);
    byte[] record = Arrays.copyOf(key, key.length + val.length);
    System.arraycopy(val, 0, record, key.length, val.length);
    // Larger than the buffer alone: it grows.
    b.append(record, 0, key.length, key.length, val.length);
    DataOutputBuffer want = new DataOutputBuffer();
    RecordFormat.write(want, key, 0, key.length, val, 0, val.length);
    assertEquals(want.getLength(), b.length());
    assertEquals(Arrays.toString(Arrays.copyOf(want.getData(), want.getLength())),
        Arrays.toString(Arrays.copyOf(b.take(), want.getLength())));
    assertEquals(0, b.length());
  }

  /**
   * A map's records through its sort buffer and spills, merged as the map merges them before
   * pushing: per partition, every record once, sorted, equal keys in input order.
   */
  @Test
  void spillsOfASortBufferMergeBackToEachPartitionsSortedRecords() throws IOException {
    Random r = new Random(7);
    int partitions = 3;
    List<List<String>> expected = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      expected.add(new ArrayList<>());
    }
    List<SpillFile> spills = new ArrayList<>();
    int seq = 0;
    for (int s = 0; s < 4; s++) {
      SortBuffer buffer = new SortBuffer(TEXT);
      for (int i = 0; i < 500 + s * 100; i++) {
        String key = "k" + r.nextInt(300);
        String value = Integer.toString(seq++);
        int p = Math.floorMod(key.hashCode(), partitions);
        int start = buffer.mark();
        new Text(key).write(buffer.data);
        int keyEnd = buffer.mark();
        buffer.data.write(value.getBytes(StandardCharsets.UTF_8));
        buffer.add(p, start, keyEnd);
        expected.get(p).add(key + "=" + value);
      }
      buffer.sort(partitions);
      SpillFile f = new SpillFile(dir.resolve("spill" + s + ".out"), partitions);
      for (int p = 0; p < partitions; p++) {
        f.begin(p);
        RecordCursor c = buffer.partition(p);
        while (c.advance()) {
          f.write(c.buf, c.keyOff, c.keyLen, c.valOff, c.valLen);
        }
      }
      assertEquals(500 + s * 100, f.finish());
      spills.add(f);
    }
    for (int p = 0; p < partitions; p++) {
      List<RecordCursor> runs = new ArrayList<>();
      for (SpillFile f : spills) {
        runs.add(f.partition(p));
      }
      // Sorted by key; a stable sort keeps equal keys in input order, as spills and merge do.
      List<String> want = new ArrayList<>(expected.get(p));
      want.sort((a, b) -> a.split("=")[0].compareTo(b.split("=")[0]));
      assertEquals(want, drain(new MergedRuns(runs, TEXT)), "partition " + p);
    }
    for (SpillFile f : spills) {
      f.close();
    }
  }
}
