package org.crossdock.mapreduce;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.PriorityQueue;
import org.apache.hadoop.io.DataInputBuffer;
import org.apache.hadoop.io.RawComparator;
import org.apache.hadoop.mapred.RawKeyValueIterator;
import org.apache.hadoop.util.Progress;

/**
 * Sorted runs merged in one pass: a priority queue holds each run's current record, ordered by
 * the job's raw key comparator, ties going to the lower run (so equal keys keep run order and
 * the output is deterministic). Each record is compared in this one merge and handed out once,
 * as the serialized bytes the maps wrote. The reduce side merges every map's run of its
 * partition with it (Hadoop-A's levitated merge); a map merges its spills with it.
 *
 * <p>The merge checks its own output's order: a run out of key order (run starts that do not
 * belong to the attempt read, or bytes that decode into other records) makes some record sort
 * before the one handed out just before it, and the merge then fails with an {@link
 * IOException} (the task is retried) instead of handing out a wrongly ordered partition.
 */
final class MergedRuns implements RawKeyValueIterator {
  private final List<RecordCursor> runs;
  private final PriorityQueue<Head> heads;
  private final DataInputBuffer key = new DataInputBuffer();
  private final DataInputBuffer value = new DataInputBuffer();
  private final Progress progress = new Progress();
  private final RawComparator<?> comparator;
  private Head current;
  /** The key handed out last, copied (a cursor may reuse its buffer once advanced). */
  private byte[] lastKey = new byte[64];
  private int lastKeyLen = -1;
  private boolean opened;
  private int ended;

  /** One run in the queue. */
  private record Head(int index, RecordCursor cursor) {}

  MergedRuns(List<? extends RecordCursor> runs, RawComparator<?> comparator) {
    this.runs = new ArrayList<>(runs);
    this.comparator = comparator;
    this.heads = new PriorityQueue<>(Math.max(1, runs.size()), (a, b) -> {
      RecordCursor x = a.cursor;
      RecordCursor y = b.cursor;
      int c = comparator.compare(x.buf, x.keyOff, x.keyLen, y.buf, y.keyOff, y.keyLen);
      return c != 0 ? c : Integer.compare(a.index, b.index);
    });
  }

  @Override
  public boolean next() throws IOException {
    if (!opened) {
      opened = true;
      for (int i = 0; i < runs.size(); i++) {
        offer(new Head(i, runs.get(i)));
      }
    } else if (current != null) {
      offer(current); // its record was handed out: on to the next one
    }
    current = heads.poll();
    if (current == null) {
      progress.complete();
      return false;
    }
    RecordCursor c = current.cursor;
    checkOrder(c);
    key.reset(c.buf, c.keyOff, c.keyLen);
    value.reset(c.buf, c.valOff, c.valLen);
    return true;
  }

  private void checkOrder(RecordCursor c) throws IOException {
    if (lastKeyLen >= 0
        && comparator.compare(lastKey, 0, lastKeyLen, c.buf, c.keyOff, c.keyLen) > 0) {
      throw new IOException("sorted run " + current.index + " of " + runs.size()
          + " is out of key order: a record sorts before the one handed out before it"
          + " (the run's bytes or run starts do not belong to the map attempt read)");
    }
    if (lastKey.length < c.keyLen) {
      lastKey = new byte[Math.max(c.keyLen, lastKey.length * 2)];
    }
    System.arraycopy(c.buf, c.keyOff, lastKey, 0, c.keyLen);
    lastKeyLen = c.keyLen;
  }

  private void offer(Head h) throws IOException {
    if (h.cursor.advance()) {
      heads.add(h);
    } else {
      ended++;
      progress.set((float) ended / Math.max(1, runs.size()));
    }
  }

  /** The run whose record {@link #next} moved to (its key and value as the run holds them). */
  RecordCursor current() {
    return current.cursor;
  }

  @Override
  public DataInputBuffer getKey() {
    return key;
  }

  @Override
  public DataInputBuffer getValue() {
    return value;
  }

  @Override
  public Progress getProgress() {
    return progress;
  }

  @Override
  public void close() throws IOException {
    IOException first = null;
    for (RecordCursor c : runs) {
      try {
        c.close();
      } catch (IOException e) {
        first = first == null ? e : first;
      }
    }
    heads.clear();
    current = null;
    if (first != null) {
      throw first;
    }
  }
}
