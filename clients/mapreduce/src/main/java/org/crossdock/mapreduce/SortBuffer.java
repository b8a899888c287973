package org.crossdock.mapreduce;

import java.io.IOException;
import java.util.Arrays;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.io.RawComparator;
import org.apache.hadoop.util.IndexedSortable;
import org.apache.hadoop.util.QuickSort;

/**
 * A map's records in memory, serialized back to back, with 4 ints per record (partition, key
 * offset, key length, value length). {@link #sort} orders them by partition, then by the job's
 * raw key comparator (Hadoop's own QuickSort, as MapReduce's sort buffer uses); {@link
 * #partition} then walks one partition's records in that order. {@link #bytes} is what the
 * buffer holds, data and index, which the collector keeps under {@code mapreduce.task.io.sort.mb}.
 */
final class SortBuffer {
  private static final int META = 4;

  /** The serialized keys and values; serializers write into it. */
  final DataOutputBuffer data = new DataOutputBuffer();
  private final RawComparator<?> comparator;
  private int[] meta = new int[META * 1024];
  private int[] order = new int[0];
  private int count;
  private int[] partitionStart;

  SortBuffer(RawComparator<?> comparator) {
    this.comparator = comparator;
  }

  /** Records held. */
  int count() {
    return count;
  }

  /** Bytes held: the serialized records and 5 ints of index per record. */
  long bytes() {
    return (long) data.getLength() + 20L * count;
  }

  /** The offset where the next record's key begins (before serializing it into {@link #data}). */
  int mark() {
    return data.getLength();
  }

  /** Records the record serialized into {@link #data} since {@code keyStart}. */
  void add(int partition, int keyStart, int keyEnd) {
    if (meta.length < META * (count + 1)) {
      meta = Arrays.copyOf(meta, Math.max(META * 1024, meta.length * 2));
    }
    int i = META * count++;
    meta[i] = partition;
    meta[i + 1] = keyStart;
    meta[i + 2] = keyEnd - keyStart;
    meta[i + 3] = data.getLength() - keyEnd;
  }

  /** Orders the records by (partition, key); records of equal keys keep their input order. */
  void sort(int numPartitions) {
    order = new int[count];
    for (int i = 0; i < count; i++) {
      order[i] = i;
    }
    byte[] b = data.getData();
    new QuickSort().sort(new IndexedSortable() {
      @Override
      public int compare(int x, int y) {
        int i = META * order[x];
        int j = META * order[y];
        int c = Integer.compare(meta[i], meta[j]);
        if (c == 0) {
          c = comparator.compare(b, meta[i + 1], meta[i + 2], b, meta[j + 1], meta[j + 2]);
        }
        // QuickSort is not stable: the input order breaks ties.
        return c != 0 ? c : Integer.compare(order[x], order[y]);
      }

      @Override
      public void swap(int x, int y) {
        int t = order[x];
        order[x] = order[y];
        order[y] = t;
      }
    }, 0, count);
    partitionStart = new int[numPartitions + 1];
    int r = 0;
    for (int p = 0; p < numPartitions; p++) {
      partitionStart[p] = r;
      while (r < count && meta[META * order[r]] == p) {
        r++;
      }
    }
    partitionStart[numPartitions] = count;
  }

  /** A cursor over {@code partition}'s records in sorted order (after {@link #sort}). */
  RecordCursor partition(int partition) {
    int from = partitionStart[partition];
    int to = partitionStart[partition + 1];
    byte[] b = data.getData();
    return new RecordCursor() {
      private int next = from;

      @Override
      boolean advance() throws IOException {
        if (next >= to) {
          return false;
        }
        int i = META * order[next++];
        buf = b;
        keyOff = meta[i + 1];
        keyLen = meta[i + 2];
        valOff = keyOff + keyLen;
        valLen = meta[i + 3];
        return true;
      }
    };
  }

  /** Empties the buffer for the next records (its arrays are kept). */
  void clear() {
    data.reset();
    count = 0;
    order = new int[0];
    partitionStart = null;
  }
}
