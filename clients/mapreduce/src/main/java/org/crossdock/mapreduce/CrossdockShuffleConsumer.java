package org.crossdock.mapreduce;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.io.DataInputBuffer;
import org.apache.hadoop.io.RawComparator;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.RawKeyValueIterator;
import org.apache.hadoop.mapred.Reporter;
import org.apache.hadoop.mapred.ShuffleConsumerPlugin;
import org.apache.hadoop.util.Progress;
import org.crossdock.client.Placement;
import org.crossdock.client.fetch.FetchMemory;
import org.crossdock.client.fetch.FetchMonitor;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.RunReader;
import org.crossdock.client.fetch.RunStartIndex;
import org.crossdock.client.fetch.Segment;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Message;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A reduce task's input, read from Crossdock and merged once
 * ({@code mapreduce.job.reduce.shuffle.consumer.plugin.class}): Hadoop-A's network-levitated
 * merge. Every map pushed its records of this reduce's partition as one sorted run; the reduce
 * waits until every map committed, asks for the head segment of every run at once ({@link
 * RunReader}), and merges the runs with a priority queue on the job's key comparator ({@link
 * MergedRuns}), fetching a run's next segment while the one before is merged. Nothing is copied
 * to local disk or merged twice: the reducer consumes the merge as it is fetched, and memory is
 * about two segments of every run, which the cap keeps within {@code crossdock.fetch.maxInFlight}.
 * Compressed map outputs ({@link BatchCodec}) are decompressed a batch at a time, into one
 * buffer per run (a raw batch more per run, outside that cap, until the run is read).
 *
 * <p>A run no copy can serve leads to one question to the coordinator per partition: if a map's
 * committed output was lost (its only copy was on a lost worker) the attempt fails with that
 * reason; otherwise the run is read on from the copies the coordinator names, after its last
 * batch. A failed reduce attempt's retry reads everything again (nothing was consumed).
 */
public final class CrossdockShuffleConsumer<K, V> implements ShuffleConsumerPlugin<K, V> {
  private static final Logger LOG = LoggerFactory.getLogger(CrossdockShuffleConsumer.class);
  /** Longest pause between two looks at whether every map committed. */
  private static final long MAX_POLL_MS = 1_000;

  private Context<K, V> context;
  private JobConf job;
  private CrossdockMRConf conf;
  private JobSession session;
  private int reduce;
  private int numMaps;
  private int numReduces;
  private RunReader reader;
  /** The job's map output codec; null when map outputs are not compressed. */
  private BatchCodec codec;
  private int runCount;
  /** The committed bytes of this partition (the coordinator's count), and those read so far. */
  private long expectedBytes;
  private long readBytes;
  private final Progress progress = new Progress();
  private final Map<Integer, List<String>> freshCopies = new HashMap<>();
  /** The runs read on from the copies learned (each may be, once). */
  private final Set<Segment> retriedOnFresh = new HashSet<>();
  private boolean ended;

  @Override
  public void init(Context<K, V> context) {
    this.context = context;
    this.job = context.getJobConf();
    this.conf = new CrossdockMRConf(job);
    this.reduce = context.getReduceId().getTaskID().getId();
    this.numMaps = job.getNumMapTasks();
    this.numReduces = job.getNumReduceTasks();
    this.codec = BatchCodec.of(job);
  }

  /**
   * Starts the read. ReduceTask calls {@link #close} only after a reduce that succeeded, so a
   * failure here ends the read and the task's part in the session before it is thrown.
   */
  @Override
  public RawKeyValueIterator run() throws IOException, InterruptedException {
    session = JobSession.begin(context.getReduceId().getJobID().toString(), conf,
        job.getCredentials());
    try {
      return startRead();
    } catch (IOException | InterruptedException | RuntimeException | Error e) {
      close();
      throw e;
    }
  }

  @SuppressWarnings("unchecked")
  private RawKeyValueIterator startRead() throws IOException, InterruptedException {
    List<RecordCursor> cursors = new ArrayList<>();
    if (numMaps > 0) {
      Message.ShuffleStatus status = awaitMaps();
      Placement placement = Placement.of(status);
      int runBatch = conf.runBatchBytes(numMaps);
      long cap = conf.runCap(numMaps, runBatch);
      // Where maps that pushed their spills as runs began their later ones.
      RunStartIndex later =
          new RunStartIndex(status.runStarts(), status.mapAttempts(), 0, numMaps);
      if (later.count() > 0) {
        cap = conf.runCap(numMaps + (int) Math.min(Integer.MAX_VALUE, later.count()), runBatch);
      }
      List<Segment> runs = new ArrayList<>();
      for (int slot : placement.slotsOf(reduce)) {
        long slotBytes = slot < status.partitionBytes().length ? status.partitionBytes()[slot] : cap;
        expectedBytes += slotBytes;
        long estimate = Math.min(cap, (slotBytes + numMaps - 1) / numMaps);
        for (int m = 0; m < numMaps; m++) {
          later.addSegments(runs, slot, m, estimate, placement.copiesOf(slot), cap);
        }
      }
      // Every map committed (awaitMaps): stored records are checked against these attempts.
      for (Segment run : runs) {
        run.acceptingRecords(status.mapAttempts());
      }
      RunReader.Settings settings = new RunReader.Settings(session.appId, session.token,
          JobSession.SHUFFLE_ID, CrossdockMRConf.CONNECT_TIMEOUT_MS,
          (int) Math.min(Integer.MAX_VALUE, conf.networkTimeoutMs), CrossdockMRConf.FETCH_MAX_RESUMES,
          CrossdockMRConf.FETCH_MOVE_AWAY_MS);
      // MapReduce has no memory manager to account the buffers to: the cap bounds them, and
      // their peak is logged at the end.
      reader = new RunReader(settings, runs, FetchMonitor.shared(), FetchMemory.UNLIMITED,
          addr -> false);
      runCount = runs.size();
      reader.start();
      for (Segment s : runs) {
        cursors.add(new BatchCursor(s));
      }
    }
    MergedRuns merged = new MergedRuns(cursors, (RawComparator<K>) job.getOutputKeyComparator());
    context.getShuffledMapsCounter().increment(numMaps);
    // Copying and merging happen as the reducer consumes the merge: the copy phase ends here
    // (as MapReduce's own Shuffle ends it), the sort phase when run() returns (ReduceTask).
    context.getCopyPhase().complete();
    return new Reading(merged);
  }

  /** Waits until every map of the job committed; returns the shuffle's state then. */
  private Message.ShuffleStatus awaitMaps() throws IOException, InterruptedException {
    session.placement(numMaps, numReduces); // registers the shuffle if no map did yet
    long start = System.nanoTime();
    long pause = 20;
    Reporter reporter = context.getReporter();
    while (true) {
      Message.ShuffleStatus status =
          session.coordinator.shuffleStatus(session.appId, JobSession.SHUFFLE_ID);
      if (status.committedMaps() >= numMaps) {
        // Where maps that pushed their spills as runs began the later ones, if any did: the
        // run starts of this reduce's partition and its splits, asked once.
        return status.runCount().orElse(0) == 0 ? status : session.coordinator.shuffleStatus(
            session.appId, JobSession.SHUFFLE_ID, reduce, reduce + 1);
      }
      if ((System.nanoTime() - start) / 1_000_000 > conf.mapsWaitMs) {
        throw new IOException("Crossdock: only " + status.committedMaps() + " of " + numMaps
            + " maps committed after " + conf.mapsWaitMs + " ms ("
            + CrossdockMRConf.MAPS_WAIT + ")");
      }
      reporter.setStatus("waiting for maps: " + status.committedMaps() + " of " + numMaps
          + " committed");
      reporter.progress();
      Thread.sleep(pause);
      pause = Math.min(MAX_POLL_MS, pause * 2);
    }
  }

  /**
   * A run no copy could serve: the first time, report the unreachable workers and ask for the
   * shuffle's current state (a map whose output was lost ends the attempt); runs then go on from
   * the copies learned, once each; a run that fails again ends the attempt.
   */
  private void recover(FetchScheduler.SegmentFailed f) throws IOException {
    Segment s = f.segment;
    if (!retriedOnFresh.add(s)) {
      throw new IOException("Crossdock: the run of map " + s.startMap + " of partition "
          + s.partition + " failed again after the coordinator was asked: " + f.getMessage(), f);
    }
    if (freshCopies.isEmpty()) { // the first failure: ask once, for every slot of the partition
      for (String addr : f.unreachable()) {
        session.coordinator.reportWorkerFailure(addr);
      }
      Message.ShuffleStatus status =
          session.coordinator.shuffleStatus(session.appId, JobSession.SHUFFLE_ID);
      int[] attempts = status.mapAttempts();
      for (int m = 0; m < numMaps; m++) {
        if (attempts[m] == AttemptIds.NO_ATTEMPT) {
          throw new IOException("Crossdock: map " + m + " has no committed output any more (its "
              + "only copy was on a lost worker); first error: " + f.getMessage(), f);
        }
      }
      String replaced = s.replacedIn(attempts);
      if (replaced != null) {
        throw new IOException("Crossdock: " + replaced + " after this reduce planned its runs;"
            + " first error: " + f.getMessage(), f);
      }
      Placement placement = Placement.of(status);
      for (int slot : placement.slotsOf(reduce)) {
        freshCopies.put(slot, placement.copiesOf(slot));
      }
    }
    List<String> fresh = freshCopies.get(s.partition);
    if (fresh == null || fresh.isEmpty()) {
      throw new IOException("Crossdock: run of map " + s.startMap + " of partition "
          + s.partition + " could not be read: " + f.getMessage(), f);
    }
    reader.retry(s, fresh);
  }

  /** One map's run of this partition, decoded batch by batch as the merge drains it. */
  private final class BatchCursor extends RecordCursor {
    private final Segment run;
    private final int[] len = new int[1];
    /** A compressed batch's records, decompressed (this run's own: the merge holds its key). */
    private byte[] raw;
    private int pos;
    private int end;
    private boolean counted;

    BatchCursor(Segment run) {
      this.run = run;
    }

    @Override
    boolean advance() throws IOException {
      while (pos >= end) {
        if (!nextBatch()) {
          return false;
        }
      }
      pos = RecordFormat.readVInt(buf, pos, end, len);
      keyLen = len[0];
      pos = RecordFormat.readVInt(buf, pos, end, len);
      valLen = len[0];
      if ((long) pos + keyLen + valLen > end) {
        throw new IOException("Crossdock: a record of map " + run.startMap + " is cut off at "
            + "the end of its batch");
      }
      keyOff = pos;
      valOff = pos + keyLen;
      pos = valOff + valLen;
      return true;
    }

    private boolean nextBatch() throws IOException {
      FetchScheduler.Delivery d;
      while (true) {
        try {
          d = reader.next(run);
          break;
        } catch (FetchScheduler.SegmentFailed f) {
          recover(f);
        }
      }
      if (d == null) {
        // The run is read: its buffers go before the merge ends (the merge never reads a
        // cursor again once it has ended).
        raw = null;
        buf = null;
        pos = 0;
        end = 0;
        return false;
      }
      if (!counted) {
        // A map output merged: a run that holds data (of a split partition, each map's run
        // is whole in one of its slots and the others answer empty).
        counted = true;
        context.getMergedMapOutputsCounter().increment(1);
      }
      ByteBuffer p = d.batch().payload();
      int n = p.remaining();
      if (codec != null) {
        try {
          raw = codec.decompress(p, raw, (int) CrossdockMRConf.MAX_BATCH);
        } catch (IOException | RuntimeException e) {
          throw new IOException("Crossdock: batch " + d.batch().batchSeq() + " of map "
              + run.startMap + " (partition " + reduce + ", slot " + run.partition
              + ") does not decompress: " + e.getMessage(), e);
        }
        buf = raw;
        pos = 0;
        end = codec.lastLength;
      } else if (p.hasArray()) {
        buf = p.array();
        pos = p.arrayOffset() + p.position();
        end = pos + n;
      } else {
        buf = new byte[n];
        p.duplicate().get(buf);
        pos = 0;
        end = n;
      }
      context.getReduceShuffleBytes().increment(n);
      readBytes += n;
      progress.set(expectedBytes <= 0 ? 1f : Math.min(1f, (float) readBytes / expectedBytes));
      return true;
    }
  }

  /** The merge as the reducer reads it; the read is ended once the merge is. */
  private final class Reading implements RawKeyValueIterator {
    private final MergedRuns merge;

    Reading(MergedRuns merge) {
      this.merge = merge;
    }

    @Override
    public DataInputBuffer getKey() throws IOException {
      return merge.getKey();
    }

    @Override
    public DataInputBuffer getValue() throws IOException {
      return merge.getValue();
    }

    @Override
    public boolean next() throws IOException {
      boolean more = merge.next();
      if (!more) {
        // Read to its end: the task's part in the session ends here, not at close (which
        // MapReduce skips when the reducer fails after reading).
        endRead();
        endTask(reduce);
      }
      return more;
    }

    @Override
    public void close() throws IOException {
      endRead();
    }

    /** The share of the partition's bytes fetched (the merge consumes them as they come). */
    @Override
    public Progress getProgress() {
      return progress;
    }
  }

  /** Closes the connections and gives back the buffers (at the end, or when the task ends). */
  private void endRead() {
    try {
      endReader();
    } finally {
      if (codec != null) {
        codec.close();
      }
    }
  }

  private void endReader() {
    if (reader != null) {
      LOG.info("Crossdock reduce {}: {} runs merged, {} requests, peak {} bytes buffered, fetch "
          + "wait {} ms, connections {} opened and {} taken idle", reduce, runCount,
          reader.requests(), reader.peakBufferedBytes(), reader.waitNanos() / 1_000_000,
          reader.connectionsOpened(), reader.connectionsReused());
      reader.close();
      reader = null;
    }
  }

  @Override
  public void close() {
    endRead();
    endTask(-1);
  }

  /** Ends the task's part in the session once: {@code done} is the reduce read whole, or -1. */
  private void endTask(int done) {
    if (!ended && session != null) {
      ended = true;
      session.taskEnded(done, numReduces);
    }
  }
}
