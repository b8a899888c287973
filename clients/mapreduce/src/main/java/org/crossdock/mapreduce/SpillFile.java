package org.crossdock.mapreduce;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.apache.hadoop.io.WritableUtils;

/**
 * One spill of a map whose records outgrew its sort buffer: every partition's records, sorted,
 * one after another in a local file ({@link RecordFormat}), with the offset where each partition
 * begins. At the end of the map the spills' runs of a partition are merged into the one run that
 * is pushed ({@link MergedRuns}), so a reducer still sees one run per map.
 */
final class SpillFile implements AutoCloseable {
  final Path path;
  private final long[] start;
  private DataOutputStream out;
  private int writing = -1;
  private long written;
  private long records;

  SpillFile(Path path, int numPartitions) throws IOException {
    this.path = path;
    this.start = new long[numPartitions + 1];
    Files.createDirectories(path.getParent());
    this.out = new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(path), 1 << 16));
  }

  /** Starts {@code partition}'s records (partitions in increasing order). */
  void begin(int partition) {
    while (writing < partition) {
      start[++writing] = written;
    }
  }

  /** Writes a record of the current partition. */
  void write(byte[] b, int keyOff, int keyLen, int valOff, int valLen) throws IOException {
    RecordFormat.write(out, b, keyOff, keyLen, b, valOff, valLen);
    written += RecordFormat.size(keyLen, valLen);
    records++;
  }

  /** Ends the spill; returns the records written. */
  long finish() throws IOException {
    begin(start.length - 1);
    out.close();
    out = null;
    return records;
  }

  /** A cursor over {@code partition}'s records in this spill (after {@link #finish}). */
  RecordCursor partition(int partition) throws IOException {
    long from = start[partition];
    long length = start[partition + 1] - from;
    FileChannel ch = FileChannel.open(path, StandardOpenOption.READ).position(from);
    InputStream bounded = Channels.newInputStream(ch);
    DataInputStream in = new DataInputStream(new BufferedInputStream(bounded, 1 << 16));
    return new RecordCursor() {
      private long left = length;

      @Override
      boolean advance() throws IOException {
        if (left <= 0) {
          return false;
        }
        int k = WritableUtils.readVInt(in);
        int v = WritableUtils.readVInt(in);
        int n = k + v;
        if (k < 0 || v < 0 || n < 0) {
          throw new IOException("a corrupt record in spill " + path);
        }
        if (buf == null || buf.length < n) {
          buf = new byte[Math.max(n, 256)];
        }
        in.readFully(buf, 0, n);
        keyOff = 0;
        keyLen = k;
        valOff = k;
        valLen = v;
        left -= RecordFormat.size(k, v);
        return true;
      }

      @Override
      void close() throws IOException {
        in.close();
      }
    };
  }

  @Override
  public void close() throws IOException {
    if (out != null) {
      out.close();
    }
    Files.deleteIfExists(path);
  }
}
