package org.crossdock.mapreduce;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.io.RawComparator;
import org.apache.hadoop.io.serializer.SerializationFactory;
import org.apache.hadoop.io.serializer.Serializer;
import org.apache.hadoop.mapred.Counters;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.MapOutputCollector;
import org.apache.hadoop.mapred.MapTask;
import org.apache.hadoop.mapred.OutputCollector;
import org.apache.hadoop.mapred.Task;
import org.apache.hadoop.mapred.TaskAttemptID;
import org.apache.hadoop.mapred.TaskStatus;
import org.apache.hadoop.mapreduce.TaskCounter;
import org.crossdock.client.MapPusher;
import org.crossdock.client.Placement;
import org.crossdock.client.fetch.RunSizes;
import org.crossdock.protocol.Message;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A map task's output, pushed to Crossdock as one sorted run per partition
 * ({@code mapreduce.job.map.output.collector.class}).
 *
 * <p>Records are serialized into a sort buffer of {@code mapreduce.task.io.sort.mb}; at the end
 * of the map they are sorted by (partition, key) with the job's comparator, the combiner (if the
 * job has one) runs over each partition, and each partition's records are pushed in key order
 * as batches of whole records ({@link RecordFormat}), cut small enough that a reducer can hold
 * two of every map's ({@link CrossdockMRConf#runBatchBytes}). A map whose records outgrow the
 * buffer pushes what it holds, sorted and combined, as one run of each partition, and goes on:
 * each spill is a run of its own (Hadoop-A: nothing is merged on the map, the reducer merges
 * every run once), and the commit says where each partition's later runs begin. A map makes at
 * most {@link RunSizes#MAX_RUNS_PER_MAP} runs of a partition, so that a reducer's memory stays
 * bounded: spills past them go to local disk and are merged into the last run. With a
 * coordinator that predates run starts, spills go to local disk as MapReduce's do and are merged
 * into one run per partition at the end.
 * A job that compresses its map outputs ({@code mapreduce.map.output.compress}) has each batch
 * compressed with its codec ({@link BatchCodec}).
 *
 * <p>Then it waits for every acknowledgement and commits the attempt with its partitions'
 * sizes: the first attempt of a map to commit wins, and a retry or speculative attempt that
 * loses returns normally (its output is ignored; the winner ran the same map on the same
 * split). A failed push or commit reports an unreachable worker to the coordinator and fails
 * the attempt, which MapReduce retries.
 */
public final class CrossdockMapOutputCollector<K, V> implements MapOutputCollector<K, V> {
  private static final Logger LOG = LoggerFactory.getLogger(CrossdockMapOutputCollector.class);

  private JobConf job;
  private MapTask task;
  private Task.TaskReporter reporter;
  private CrossdockMRConf conf;
  private JobSession session;
  private int numPartitions;
  private int mapIndex;
  private int attemptId;
  private int runBatch;
  /** The job's map output codec; null when it does not compress map outputs. */
  private BatchCodec codec;
  private RawComparator<K> comparator;
  private Serializer<K> keySerializer;
  private Serializer<V> valueSerializer;
  private Task.CombinerRunner<K, V> combiner;
  private SortBuffer buffer;
  private final List<SpillFile> spills = new ArrayList<>();
  /** Whether spills are pushed as runs ({@link JobSession#keepsRuns}). */
  private boolean spillRuns;
  /** Spills pushed as runs so far. */
  private int pushedSpills;
  private Placement placement;
  private MapPusher pusher;
  private long[] bytes;
  private long[] records;
  private Counters.Counter outputRecords;
  private Counters.Counter outputBytes;
  private Counters.Counter spilledRecords;
  private Counters.Counter materializedBytes;
  private Counters.Counter combinedRecords;
  private boolean flushed;
  private boolean closed;

  @Override
  @SuppressWarnings("unchecked")
  public void init(Context context) throws IOException, ClassNotFoundException {
    job = context.getJobConf();
    task = context.getMapTask();
    reporter = context.getReporter();
    conf = new CrossdockMRConf(job);
    numPartitions = job.getNumReduceTasks();
    int numMaps = job.getNumMapTasks();
    TaskAttemptID id = task.getTaskID();
    mapIndex = id.getTaskID().getId();
    attemptId = id.getId();
    if (numMaps <= mapIndex) {
      throw new IOException("map " + mapIndex + " of a job with " + numMaps + " maps ("
          + "mapreduce.job.maps): Crossdock needs the job's map count");
    }
    runBatch = conf.runBatchBytes(numMaps);
    codec = BatchCodec.of(job);
    comparator = (RawComparator<K>) job.getOutputKeyComparator();
    buffer = new SortBuffer(comparator);
    SerializationFactory serialization = new SerializationFactory(job);
    keySerializer = serialization.getSerializer((Class<K>) job.getMapOutputKeyClass());
    keySerializer.open(buffer.data);
    valueSerializer = serialization.getSerializer((Class<V>) job.getMapOutputValueClass());
    valueSerializer.open(buffer.data);
    combiner = Task.CombinerRunner.create(job, id,
        reporter.getCounter(TaskCounter.COMBINE_INPUT_RECORDS), reporter, null);
    outputRecords = reporter.getCounter(TaskCounter.MAP_OUTPUT_RECORDS);
    outputBytes = reporter.getCounter(TaskCounter.MAP_OUTPUT_BYTES);
    spilledRecords = reporter.getCounter(TaskCounter.SPILLED_RECORDS);
    materializedBytes = reporter.getCounter(TaskCounter.MAP_OUTPUT_MATERIALIZED_BYTES);
    combinedRecords = reporter.getCounter(TaskCounter.COMBINE_OUTPUT_RECORDS);
    bytes = new long[numPartitions];
    records = new long[numPartitions];
    session = JobSession.begin(id.getJobID().toString(), conf, job.getCredentials());
    try {
      placement = session.placement(numMaps, numPartitions);
      spillRuns = conf.spillRuns && session.keepsRuns();
      pusher = new MapPusher(session.pool, session.appId, JobSession.SHUFFLE_ID, mapIndex,
          attemptId, numPartitions, conf.pushMaxInFlight, conf.networkTimeoutMs, session.routes,
          placement::addrOfSlot);
    } catch (IOException | RuntimeException e) {
      session.taskEnded(-1, numPartitions);
      session = null;
      throw e;
    }
  }

  /** Synchronized as MapReduce's own collector: the old API's MultithreadedMapRunner shares it. */
  @Override
  public synchronized void collect(K key, V value, int partition) throws IOException {
    if (partition < 0 || partition >= numPartitions) {
      throw new IOException("Illegal partition for " + key + " (" + partition + ") of "
          + numPartitions);
    }
    int start = buffer.mark();
    keySerializer.serialize(key);
    int keyEnd = buffer.mark();
    valueSerializer.serialize(value);
    buffer.add(partition, start, keyEnd);
    outputRecords.increment(1);
    outputBytes.increment(buffer.mark() - start);
    if (buffer.bytes() >= conf.sortBufferBytes) {
      spill();
    }
  }

  /**
   * Sorts the buffer and pushes it as one run of each partition, or writes it to a spill file
   * (combined, as MapReduce's spills are) when the coordinator keeps no run starts.
   */
  private void spill() throws IOException {
    // The last run is the map's end; so at most MAX_RUNS_PER_MAP - 1 spills are runs, and
    // later ones go to disk, merged at the end into that last run.
    if (spillRuns && pushedSpills < RunSizes.MAX_RUNS_PER_MAP - 1) {
      pushedSpills++;
      try {
        pushRuns();
      } catch (IOException | RuntimeException e) {
        failed();
        throw e;
      }
      reporter.progress();
      return;
    }
    buffer.sort(numPartitions);
    Path path = Path.of(task.getMapOutputFile()
        .getSpillFileForWrite(spills.size(), buffer.bytes()).toUri().getPath());
    SpillFile f = new SpillFile(path, numPartitions);
    spills.add(f);
    for (int p = 0; p < numPartitions; p++) {
      f.begin(p);
      emit(buffer.partition(p), f::write);
    }
    spilledRecords.increment(f.finish());
    buffer.clear();
    reporter.progress();
  }

  /** Writes one partition's sorted records to {@code sink}, through the combiner if any. */
  private void emit(RecordCursor sorted, RecordSink sink) throws IOException {
    if (combiner == null) {
      while (sorted.advance()) {
        sink.write(sorted.buf, sorted.keyOff, sorted.keyLen, sorted.valOff, sorted.valLen);
      }
      return;
    }
    try {
      combiner.combine(new MergedRuns(List.of(sorted), comparator), new Combined(sink));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while combining", e);
    } catch (ClassNotFoundException e) {
      throw new IOException(e);
    }
  }

  /** The combiner's output, serialized again into records. */
  private final class Combined implements OutputCollector<K, V> {
    private final RecordSink sink;
    private final DataOutputBuffer scratch = new DataOutputBuffer();
    private final Serializer<K> keys;
    private final Serializer<V> values;

    @SuppressWarnings("unchecked")
    Combined(RecordSink sink) throws IOException {
      this.sink = sink;
      SerializationFactory serialization = new SerializationFactory(job);
      keys = serialization.getSerializer((Class<K>) job.getMapOutputKeyClass());
      keys.open(scratch);
      values = serialization.getSerializer((Class<V>) job.getMapOutputValueClass());
      values.open(scratch);
    }

    @Override
    public void collect(K key, V value) throws IOException {
      scratch.reset();
      keys.serialize(key);
      int keyLen = scratch.getLength();
      values.serialize(value);
      sink.write(scratch.getData(), 0, keyLen, keyLen, scratch.getLength() - keyLen);
      combinedRecords.increment(1);
    }
  }

  /**
   * Pushes the map's runs and commits the attempt, if the map succeeded. MapTask closes a
   * new-API mapper's output (flush, then close) also when the mapper failed, and only its
   * success path enters the sort phase first: a flush in any other phase is a failed attempt's,
   * whose partial output must never be committed (it would win over the retry's whole one).
   */
  @Override
  public void flush() throws IOException {
    if (flushed) {
      return;
    }
    flushed = true;
    if (task.getPhase() != TaskStatus.Phase.SORT) {
      LOG.info("Crossdock map {}: attempt {} ended in phase {}; its output is not pushed",
          mapIndex, attemptId, task.getPhase());
      return;
    }
    try {
      if (spills.isEmpty()) {
        pushRuns();
      } else {
        if (buffer.count() > 0) {
          spill();
        }
        for (int p = 0; p < numPartitions; p++) {
          List<RecordCursor> parts = new ArrayList<>(spills.size());
          try {
            for (SpillFile f : spills) {
              parts.add(f.partition(p));
            }
            MergedRuns merged = new MergedRuns(parts, comparator);
            Run run = new Run(p);
            while (merged.next()) {
              RecordCursor c = merged.current();
              run.write(c.buf, c.keyOff, c.keyLen, c.valOff, c.valLen);
            }
            run.close();
          } finally {
            closeQuietly(parts);
          }
        }
      }
      buffer.clear();
      pusher.awaitAll();
      commit();
    } catch (IOException | RuntimeException e) {
      failed();
      throw e;
    }
  }

  /** Sorts the buffer and pushes it as one run of each partition (the last run, or a spill). */
  private void pushRuns() throws IOException {
    buffer.sort(numPartitions);
    for (int p = 0; p < numPartitions; p++) {
      Run run = new Run(p);
      emit(buffer.partition(p), run);
      run.close(); // not on a failure: the attempt fails, nothing more is pushed
    }
    buffer.clear();
  }

  /** One partition's run: batches of whole records, each pushed when it reaches the run batch. */
  private final class Run implements RecordSink {
    private final int partition;
    private final BatchBuffer batch = new BatchBuffer(runBatch);

    Run(int partition) {
      this.partition = partition;
      pusher.beginRun(partition);
    }

    @Override
    public void write(byte[] b, int keyOff, int keyLen, int valOff, int valLen) throws IOException {
      int size = RecordFormat.size(keyLen, valLen);
      if (size > CrossdockMRConf.MAX_BATCH) {
        throw new IOException("a map output record of " + size + " bytes (partition "
            + partition + "): a record travels whole in one batch, and workers take batches "
            + "of at most " + CrossdockMRConf.MAX_BATCH + " bytes");
      }
      if (batch.length() > 0 && batch.length() + size > runBatch) {
        send(); // a batch never passes the run batch but by a record that is larger alone
      }
      batch.append(b, keyOff, keyLen, valOff, valLen);
      records[partition]++;
      if (batch.length() >= runBatch) {
        send();
      }
    }

    private void send() throws IOException {
      int n = batch.length();
      if (n == 0) {
        return;
      }
      byte[] b = batch.take();
      if (codec != null) {
        b = codec.compress(b, n);
        if (b.length > CrossdockMRConf.MAX_BATCH) {
          throw new IOException("a batch of partition " + partition + " grew from " + n
              + " to " + b.length + " bytes with " + codec.name() + "; workers take batches "
              + "of at most " + CrossdockMRConf.MAX_BATCH + " bytes");
        }
        n = b.length;
      }
      pusher.push(partition, placement.addrOf(partition), b, n); // now the pusher's
      bytes[partition] += n;
      materializedBytes.increment(n);
      reporter.progress();
    }

    /** Pushes the last batch. */
    void close() throws IOException {
      send();
    }
  }

  private static void closeQuietly(List<RecordCursor> cursors) {
    for (RecordCursor c : cursors) {
      try {
        c.close();
      } catch (IOException e) {
        LOG.warn("Crossdock: closing a spill file failed: {}", e.toString());
      }
    }
  }

  /**
   * Commits the attempt with its non-empty partitions' sizes, counted where they went (the
   * partition, or the split its first batch was routed to). Another attempt's win is no error.
   */
  private void commit() throws IOException {
    if (pusher.lostRace()) {
      LOG.info("Crossdock map {}: another attempt committed while attempt {} pushed", mapIndex,
          attemptId);
      return;
    }
    Message.CommitResult r = session.coordinator.commitMap(session.appId, JobSession.SHUFFLE_ID,
        mapIndex, attemptId, pusher.stats(bytes, records), pusher.runStarts());
    if (r.status() == Message.CommitStatus.REJECTED) {
      LOG.info("Crossdock map {}: attempt {} lost to attempt {}; its output is ignored", mapIndex,
          attemptId, Integer.toUnsignedString(r.winningAttempt()));
    }
  }

  /** Reports a worker a push could not reach, so that the retry pushes where data can go. */
  private void failed() {
    String addr = pusher == null ? null : pusher.unreachableWorker();
    if (addr != null) {
      try {
        session.coordinator.reportWorkerFailure(addr);
      } catch (IOException e) {
        LOG.warn("Crossdock: reporting worker {} failed: {}", addr, e.toString());
      }
      session.refreshPlacement();
    }
  }

  @Override
  public void close() throws IOException {
    if (closed) {
      return;
    }
    closed = true;
    try {
      try {
        if (pusher != null) {
          pusher.close();
        }
      } finally {
        if (codec != null) {
          codec.close();
        }
      }
      for (SpillFile f : spills) {
        try {
          f.close();
        } catch (IOException e) {
          LOG.warn("Crossdock: deleting spill {} failed: {}", f.path, e.toString());
        }
      }
    } finally {
      if (session != null) {
        session.taskEnded(-1, numPartitions);
      }
    }
  }
}
