package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleBlockId;
import org.crossdock.client.Placement;
import org.crossdock.client.fetch.FetchMonitor;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.RunReader;
import org.crossdock.client.fetch.Segment;
import org.crossdock.client.BufferStream;
import org.crossdock.protocol.Message;
import scala.Tuple2;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.math.Ordering;

/**
 * The records of a key-ordered shuffle, merged once from the maps' sorted runs (Hadoop-A's
 * network-levitated merge): every map pushed each partition's records sorted by key, so the
 * reader opens one deserializing stream per (partition, map) run (per run of a map that pushed
 * its sorter's spills as runs of their own: {@link SpillRuns}), keeps the head record of each
 * in a priority queue ordered by the dependency's key ordering, and hands out the smallest. The
 * bytes of a run are fetched a segment at a time ({@link RunReader}) as the merge drains them:
 * nothing is spilled, each record is compared in one merge, and the memory held is the runs'
 * segments (sized to the fetch limit) and their streams' buffers.
 *
 * <p>Ties between equal keys go to the lower (partition, map, run) run, so the order is
 * deterministic.
 * The records of several partitions are merged together, as Spark's reader sorts them together.
 * Failures are handled as the sequential reader does: a run no copy can serve leads to one
 * question to the coordinator (was a map's output lost: then a fetch failure that recomputes
 * it; else the run is read on from its current copies).
 */
final class MergingRecordIterator extends AbstractIterator<Tuple2<Object, Object>> {

  private final CrossdockShuffleReader<?, ?> reader;
  private final CrossdockShuffleHandle<?, ?, ?> handle;
  private final CrossdockShuffleManager manager;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;
  private final int startMap;
  private final int endMap;
  private final int startPartition;
  private final int endPartition;
  private final CrossdockConf conf;
  private final SerializerInstance serializer;
  private final SerializerManager serializerManager = SparkEnv.get().serializerManager();
  private final Ordering<Object> ordering;
  private final Map<String, Boolean> localByWorker = new ConcurrentHashMap<>();
  private final Set<Integer> refreshed = new HashSet<>();
  /** Per partition, the copies its refresh learned; and the runs read on from them. */
  private final Map<Integer, List<String>> freshCopies = new java.util.HashMap<>();
  private final Set<Segment> retriedOnFresh = new HashSet<>();
  private final PriorityQueue<Cursor> heads;
  private final List<Cursor> cursors = new ArrayList<>();
  private RunReader runs;
  private FetchMemoryConsumer memory;
  private long reportedWaitNanos;
  private boolean opened;
  private boolean finished;
  private boolean closed;
  /** What ended the read early; every later call throws it again. */
  private Throwable failed;

  @SuppressWarnings("unchecked")
  MergingRecordIterator(CrossdockShuffleReader<?, ?> reader, CrossdockShuffleHandle<?, ?, ?> handle,
      CrossdockShuffleManager manager, TaskContext context, ShuffleReadMetricsReporter metrics,
      int startMap, int endMap, int startPartition, int endPartition, CrossdockConf conf,
      SerializerInstance serializer, Ordering<?> ordering) {
    this.reader = reader;
    this.handle = handle;
    this.manager = manager;
    this.context = context;
    this.metrics = metrics;
    this.startMap = startMap;
    this.endMap = endMap;
    this.startPartition = startPartition;
    this.endPartition = endPartition;
    this.conf = conf;
    this.serializer = serializer;
    this.ordering = (Ordering<Object>) ordering;
    this.heads = new PriorityQueue<>((a, b) -> {
      int c = this.ordering.compare(a.head._1(), b.head._1());
      return c != 0 ? c : Integer.compare(a.index, b.index);
    });
  }

  /**
   * Plans the runs, asks for every head, and fills the queue with each run's first record (on
   * the first {@link #hasNext}: a task that reads nothing asks nothing).
   */
  private void open() {
    List<Segment> plan = startMap >= endMap || startPartition >= endPartition
        ? List.of()
        : FetchPlanner.runs(handle.shuffleId(), startMap, endMap, startPartition, endPartition,
            placement(), conf, handle.runBatchBytes, runStarts());
    memory = new FetchMemoryConsumer(context.taskMemoryManager());
    RunReader.Settings settings = new RunReader.Settings(handle.appId, handle.appToken,
        handle.shuffleId(), CrossdockConf.CONNECT_TIMEOUT_MS,
        (int) Math.min(Integer.MAX_VALUE, conf.networkTimeoutMs), CrossdockConf.FETCH_MAX_RESUMES,
        CrossdockConf.FETCH_MOVE_AWAY_MS);
    runs = new RunReader(settings, plan, FetchMonitor.shared(), memory, this::isLocal);
    runs.start();
    for (Segment s : plan) {
      cursors.add(new Cursor(cursors.size(), s));
    }
    for (Cursor c : cursors) {
      if (c.advance()) {
        heads.add(c);
      }
    }
  }

  /**
   * Where the maps' further sorted runs begin (maps that pushed their spills as runs), with the
   * maps' committed attempts; null: no map did.
   */
  private Message.ShuffleStatus runStarts() {
    try {
      return manager.runStarts(handle, startPartition, endPartition);
    } catch (IOException e) {
      throw CrossdockShuffleReader.sneakyThrow(reader.fetchFailed(startPartition, -1,
          "the shuffle's run starts could not be had: " + e.getMessage(), e));
    }
  }

  private Placement placement() {
    try {
      return reader.readPlacement();
    } catch (IOException e) {
      throw CrossdockShuffleReader.sneakyThrow(reader.fetchFailed(startPartition, -1,
          "the shuffle's placement could not be had: " + e.getMessage(), e));
    }
  }

  @Override
  public boolean hasNext() {
    if (failed != null) {
      throw CrossdockShuffleReader.sneakyThrow(failed);
    }
    if (!opened) {
      try {
        open();
        opened = true;
      } catch (Throwable t) {
        failed = t;
        throw t;
      } finally {
        reportWait();
      }
    }
    if (heads.isEmpty()) {
      finish();
      return false;
    }
    return true;
  }

  @Override
  public Tuple2<Object, Object> next() {
    if (!hasNext()) {
      throw new java.util.NoSuchElementException();
    }
    Cursor c = heads.poll();
    Tuple2<Object, Object> r = c.head;
    try {
      // As Spark's own merge does: the run's next record is read before this one is handed
      // out, so the queue is ordered again.
      if (c.advance()) {
        heads.add(c);
      }
    } catch (Throwable t) {
      failed = t; // the run left the queue: going on would silently lose its records
      throw t;
    } finally {
      reportWait();
    }
    metrics.incRecordsRead(1);
    return r;
  }

  private void reportWait() {
    if (runs == null) {
      return;
    }
    long ms = (runs.waitNanos() - reportedWaitNanos) / 1_000_000;
    if (ms > 0) {
      metrics.incFetchWaitTime(ms);
      reportedWaitNanos += ms * 1_000_000;
    }
  }

  private boolean isLocal(String addr) {
    return addr != null && localByWorker.computeIfAbsent(addr, CrossdockShuffleReader::onThisHost);
  }

  private void finish() {
    if (!finished) {
      finished = true;
      close();
      context.taskMetrics().mergeShuffleReadMetrics();
    }
  }

  /** Ends the read: connections closed, every byte of memory given back. */
  synchronized void close() {
    // Called at the end and again when the task completes, on another thread for PySpark's
    // writer: the sums are reported once, after the read can send nothing more.
    if (runs != null && !closed) {
      closed = true;
      runs.close();
      if (handle.accumulators != null) {
        handle.accumulators.readDone(
            runs.peakBufferedBytes(), runs.connectionsOpened(), runs.connectionsReused());
        handle.accumulators.mergedRuns.add(cursors.size());
        handle.accumulators.mergeRequests.add(runs.requests());
      }
    }
  }

  /**
   * A run no copy could serve: read on from the current copies, or a fetch failure. When a
   * worker is lost, every run of its partitions fails at once; the first asks the coordinator
   * (once per partition), and the others take the copies it learned, each once. A run that
   * fails again after that is a fetch failure.
   */
  private void recover(FetchScheduler.SegmentFailed f) {
    Segment s = f.segment;
    List<String> fresh = freshCopies.get(s.partition);
    if (fresh != null && retriedOnFresh.add(s)) {
      runs.retry(s, fresh);
      return;
    }
    try {
      fresh = reader.copiesAfterFailure(f, refreshed);
    } catch (FetchFailedException e) {
      throw CrossdockShuffleReader.sneakyThrow(e);
    }
    freshCopies.put(s.partition, fresh);
    retriedOnFresh.add(s);
    runs.retry(s, fresh);
  }

  /** One run: its bytes as a stream, deserialized, and its current head record. */
  private final class Cursor {
    final int index;
    final Segment run;
    private Iterator<Tuple2<Object, Object>> records;
    Tuple2<Object, Object> head;

    Cursor(int index, Segment run) {
      this.index = index;
      this.run = run;
    }

    /** Moves to the run's next record; false at its end. */
    boolean advance() {
      try {
        if (records == null) {
          RunStream stream = new RunStream(this);
          if (stream.buffer() == null) {
            // An empty run (the map wrote nothing here, or its run is in another slot of a
            // split partition): no records, and nothing a serializer could open (Java's
            // reads a stream header at once).
            records = noRecords();
          } else {
            BlockId blockId = new ShuffleBlockId(handle.shuffleId(), run.startMap, run.partition);
            InputStream wrapped = serializerManager.wrapStream(blockId, stream);
            records = serializer.deserializeStream(wrapped).asKeyValueIterator();
          }
        }
        if (records.hasNext()) {
          Tuple2<Object, Object> prev = head;
          head = records.next();
          if (prev != null && ordering.compare(prev._1(), head._1()) > 0) {
            // Run starts that are not those of the attempt read (a commit replaced between
            // asking and reading) would merge two runs as one: never hand that out as sorted.
            throw CrossdockShuffleReader.sneakyThrow(reader.fetchFailed(run.partition,
                run.startMap, "the run of map " + run.startMap + " (" + run + ") is not in key"
                    + " order: its run starts are not those of the attempt that was read", null));
          }
          return true;
        }
        head = null;
        return false;
      } catch (Throwable t) {
        throw failure(t);
      }
    }

    /** See {@link CrossdockShuffleReader#readFailure}. */
    private RuntimeException failure(Throwable t) {
      return CrossdockShuffleReader.readFailure(t, c -> reader.fetchFailed(run.partition,
          run.startMap, "undecodable data: " + c, t));
    }
  }

  /** An empty record iterator (Scala 2.12's and 2.13's signatures of `empty` differ). */
  @SuppressWarnings("unchecked")
  private static Iterator<Tuple2<Object, Object>> noRecords() {
    return (Iterator<Tuple2<Object, Object>>) (Iterator<?>) scala.collection.Iterator$.MODULE$.empty();
  }

  /** A run's batches as one stream, fetched segment by segment as it is read. */
  private final class RunStream extends BufferStream {
    private final Cursor cursor;
    private ByteBuffer buf;
    private boolean eof;
    private boolean counted;

    RunStream(Cursor cursor) {
      this.cursor = cursor;
    }

    @Override
    protected ByteBuffer buffer() throws IOException {
      while (!eof && (buf == null || !buf.hasRemaining())) {
        FetchScheduler.Delivery d;
        while (true) {
          try {
            d = runs.next(cursor.run);
            break;
          } catch (FetchScheduler.SegmentFailed f) {
            recover(f);
          }
        }
        if (d == null) {
          eof = true;
          buf = null;
        } else {
          long n = d.batch().payload().remaining();
          boolean local = isLocal(d.source());
          if (!counted) {
            counted = true; // a run is a block: (map, partition)
            if (local) {
              metrics.incLocalBlocksFetched(1);
            } else {
              metrics.incRemoteBlocksFetched(1);
            }
          }
          if (local) {
            metrics.incLocalBytesRead(n);
          } else {
            metrics.incRemoteBytesRead(n);
          }
          buf = d.batch().payload().duplicate();
        }
      }
      return eof ? null : buf;
    }

    @Override
    public int available() {
      return buf == null ? 0 : buf.remaining();
    }
  }
}
