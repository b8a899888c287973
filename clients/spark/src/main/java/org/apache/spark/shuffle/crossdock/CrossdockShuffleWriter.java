package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;

/**
 * Writes one map task's output to Crossdock.
 *
 * <p>Records go through Spark's own {@link ExternalSorter} (partitioner, map-side combine when the
 * dependency asks for it, spilling within Spark's memory manager); the sorter then writes each
 * partition as one serialized, {@code wrapStream}-ed stream into a {@link
 * CrossdockMapOutputWriter}, which pushes it in batches. For a shuffle read by merging ({@link
 * CrossdockShuffleHandle#sortedRuns}) the sorter orders each partition by key, so every partition
 * is pushed as a sorted run; when the sorter runs short of memory, each spill is pushed as a run
 * of its own instead of being written to disk and merged ({@link SpillRuns}). At the end the
 * writer waits for every acknowledgement and commits the attempt with its per-partition bytes and
 * records (and where its further runs begin). Batches awaiting acknowledgement are the task's
 * execution memory ({@link PushBufferMemory}, frames only: the sorter's records are its own).
 *
 * <p>Attempt ids, the commit, losing the race and the MapStatus are {@link MapAttempt}'s.
 */
final class CrossdockShuffleWriter<K, V, C> extends ShuffleWriter<K, V> {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(CrossdockShuffleWriter.class);

  private final CrossdockShuffleHandle<K, V, C> handle;
  private final MapAttempt attempt;
  private ExternalSorter<K, V, ?> sorter;
  /** The spills pushed as runs, for a merged shuffle ({@link CrossdockShuffleHandle#spillRuns}). */
  private SpillRuns spills;

  CrossdockShuffleWriter(CrossdockShuffleHandle<K, V, C> handle, CrossdockShuffleManager manager,
      long mapTaskId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
    this.handle = handle;
    this.attempt = new MapAttempt(handle, manager, mapTaskId, context, metrics);
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  @Override
  public void write(Iterator<Product2<K, V>> records) throws IOException {
    if (attempt.finishEmptyShuffle(records)) {
      return;
    }
    ShuffleDependency<K, V, C> dep = handle.dependency();
    Partitioner partitioner = dep.partitioner();
    // No buffers of its own to push for another consumer: the sorter spills its records itself.
    PushBufferMemory memory =
        new PushBufferMemory(attempt.context.taskMemoryManager(), attempt, () -> 0L);
    CrossdockMapOutputWriter out = new CrossdockMapOutputWriter(attempt.startPushing(),
        attempt.placement(), memory, attempt.numPartitions,
        handle.sortedRuns() ? handle.runBatchBytes : attempt.conf.batchSize);
    ShuffleWriteMetricsReporter counted = out.countingRecords(attempt.metrics);
    if (handle.spillRuns) {
      // A merged shuffle on a coordinator that keeps run starts: each spill of the sorter is
      // pushed as a sorted run of its own, nothing is merged on the map.
      spills = new SpillRuns(out, counted, dep.keyOrdering().get(),
          dep.serializer().newInstance(), dep.shuffleId(), attempt.mapTaskId,
          attempt.conf.mapRunBytes);
      sorter = (ExternalSorter) SparkCompat.runPushingSorter(attempt.context, partitioner,
          (scala.math.Ordering) dep.keyOrdering().get(), dep, spills);
    } else {
      // For a merged shuffle the sorter also orders each partition's records by key: each
      // partition is then written as one sorted run.
      sorter = SparkCompat.mapSorter(attempt.context,
          dep.mapSideCombine() ? dep.aggregator() : (Option) Option.empty(), partitioner,
          handle.sortedRuns() ? dep.keyOrdering() : (Option) Option.empty(), dep);
    }
    try {
      attempt.pushAndCommit(() -> {
        // With spills pushed as runs, inserting pushes too: its failures are the pushes'.
        ((ExternalSorter) sorter).insertAll(records);
        sorter.writePartitionedMapOutput(dep.shuffleId(), attempt.mapTaskId, out, counted);
        return 0L; // on this path only the wait and the commit are timed
      }, out.bytes, out.records);
    } finally {
      memory.releaseAll();
    }
    if (spills != null && spills.pushed() > 0) {
      LOG.debug("Crossdock shuffle {} map {}: {} spills pushed as sorted runs", dep.shuffleId(),
          attempt.mapTaskId, spills.pushed());
    }
    attempt.finish(out.bytes, SparkCompat.checksum(sorter));
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    try {
      return attempt.stop(success);
    } finally {
      if (sorter != null) {
        long start = System.nanoTime();
        sorter.stop();
        attempt.metrics.incWriteTime(System.nanoTime() - start);
        sorter = null;
      }
    }
  }

  @Override
  public long[] getPartitionLengths() {
    return attempt.partitionLengths();
  }
}
