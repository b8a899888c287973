package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.util.collection.ExternalSorter;
import org.crossdock.client.CoordinatorClient;
import org.crossdock.client.MapPusher;
import org.crossdock.client.Placement;
import org.crossdock.protocol.Message;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;

/**
 * Writes one map task's output to Crossdock.
 *
 * <p>Records go through Spark's own {@link ExternalSorter} (partitioner, map-side combine when the
 * dependency asks for it, spilling within Spark's memory manager); the sorter then writes each
 * partition as one serialized, {@code wrapStream}-ed stream into a {@link
 * CrossdockMapOutputWriter}, which pushes it in batches. At the end the writer waits for every
 * acknowledgement and commits the attempt with its per-partition bytes and records.
 *
 * <p><b>Attempt id</b> = {@code (stageAttemptNumber << 16) | (attemptNumber & 0xffff)}: unique
 * across the retries and speculative copies of a task (attemptNumber) and across stage retries
 * (stageAttemptNumber), which restart attemptNumber at 0. It never reaches the reserved
 * 0xffffffff.
 *
 * <p><b>Losing the race.</b> If another attempt of the map committed first (CommitResult
 * Rejected, or a worker answering push_after_commit), the winner's output is what reducers read,
 * and this attempt still returns normally: Spark only needs the map to be done. Its MapStatus
 * then carries this attempt's own sizes: the winner ran the same task on the same input, so they
 * are the best estimate available without another round trip, and they only steer AQE.
 */
final class CrossdockShuffleWriter<K, V, C> extends ShuffleWriter<K, V> {
  private static final Logger LOG = LoggerFactory.getLogger(CrossdockShuffleWriter.class);

  private final CrossdockShuffleHandle<K, V, C> handle;
  private final CrossdockShuffleManager manager;
  private final long mapTaskId;
  private final TaskContext context;
  private final ShuffleWriteMetricsReporter metrics;
  private final CrossdockConf conf;
  private final int mapIndex;
  private final int attemptId;

  private ExternalSorter<K, V, ?> sorter;
  private MapPusher pusher;
  private long[] lengths;
  private MapStatus mapStatus;
  private boolean stopping;

  CrossdockShuffleWriter(CrossdockShuffleHandle<K, V, C> handle, CrossdockShuffleManager manager,
      long mapTaskId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
    this.handle = handle;
    this.manager = manager;
    this.mapTaskId = mapTaskId;
    this.context = context;
    this.metrics = metrics;
    this.conf = manager.conf();
    this.mapIndex = context.partitionId();
    this.attemptId = attemptId(context.stageAttemptNumber(), context.attemptNumber());
  }

  static int attemptId(int stageAttempt, int taskAttempt) {
    return (stageAttempt << 16) | (taskAttempt & 0xffff);
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  @Override
  public void write(Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, C> dep = handle.dependency();
    Partitioner partitioner = dep.partitioner();
    int numPartitions = partitioner.numPartitions();
    if (handle.placement == null) {
      // A shuffle with no partitions (or no maps) was never registered: nothing can be written.
      if (records.hasNext()) {
        throw new IOException("shuffle " + dep.shuffleId() + " has no partitions but got records");
      }
      lengths = new long[numPartitions];
      mapStatus = MapStatus$.MODULE$.apply(
          SparkEnv.get().blockManager().shuffleServerId(), lengths, mapTaskId, 0L);
      return;
    }
    if (dep.mapSideCombine()) {
      sorter = new ExternalSorter(context, dep.aggregator(), Option.apply(partitioner),
          Option.empty(), dep.serializer(), dep.rowBasedChecksums());
    } else {
      sorter = new ExternalSorter(context, Option.empty(), Option.apply(partitioner),
          Option.empty(), dep.serializer(), dep.rowBasedChecksums());
    }
    ((ExternalSorter) sorter).insertAll(records);

    Placement placement = manager.placement(handle, context);
    pusher = new MapPusher(manager.pool(), handle.appId, dep.shuffleId(), mapIndex, attemptId,
        numPartitions, conf.maxInFlight, conf.networkTimeoutMs);
    CrossdockMapOutputWriter out =
        new CrossdockMapOutputWriter(pusher, placement, numPartitions, conf.batchSize);
    try {
      sorter.writePartitionedMapOutput(
          dep.shuffleId(), mapTaskId, out, out.countingRecords(metrics));
      long t0 = System.nanoTime();
      pusher.awaitAll();
      commit(manager, handle, mapIndex, attemptId, pusher, out.bytes, out.records);
      metrics.incWriteTime(System.nanoTime() - t0);
    } catch (IOException e) {
      failed(manager, handle, pusher);
      throw e;
    }
    lengths = out.bytes.clone();
    mapStatus = MapStatus$.MODULE$.apply(SparkEnv.get().blockManager().shuffleServerId(), lengths,
        mapTaskId, sorter.getAggregatedChecksumValue());
  }

  /**
   * Commits a map attempt whose pushes were all acknowledged, with its non-empty partitions'
   * sizes. Returns normally when another attempt won (see the class comment); throws on any
   * other failure so that Spark retries the task.
   */
  static void commit(CrossdockShuffleManager manager, CrossdockShuffleHandle<?, ?, ?> handle,
      int mapIndex, int attemptId, MapPusher pusher, long[] bytes, long[] records)
      throws IOException {
    int shuffleId = handle.shuffleId();
    if (pusher.lostRace()) {
      LOG.info("Crossdock shuffle {} map {}: another attempt committed while attempt {} pushed",
          shuffleId, mapIndex, attemptId);
      return;
    }
    List<Message.PartitionStat> stats = new ArrayList<>();
    for (int p = 0; p < bytes.length; p++) {
      if (bytes[p] > 0) {
        stats.add(new Message.PartitionStat(p, bytes[p], records[p]));
      }
    }
    CoordinatorClient coordinator = manager.coordinator();
    Message.CommitResult r =
        coordinator.commitMap(handle.appId, shuffleId, mapIndex, attemptId, stats);
    if (r.status() == Message.CommitStatus.REJECTED) {
      LOG.info("Crossdock shuffle {} map {}: attempt {} lost to attempt {}; its output is ignored",
          shuffleId, mapIndex, attemptId, Integer.toUnsignedString(r.winningAttempt()));
    }
  }

  /**
   * After a failed push or commit: reports the worker that could not be reached (the coordinator
   * moves its partitions) and refreshes the placement, so that Spark's retry of the task pushes
   * where the data can go.
   */
  static void failed(CrossdockShuffleManager manager, CrossdockShuffleHandle<?, ?, ?> handle,
      MapPusher pusher) {
    String addr = pusher.unreachableWorker();
    manager.workersFailed(handle, addr == null ? List.of() : List.of(addr));
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    try {
      if (stopping) {
        return Option.empty();
      }
      stopping = true;
      if (success) {
        if (mapStatus == null) {
          throw new IllegalStateException("cannot call stop(true) without having called write()");
        }
        return Option.apply(mapStatus);
      }
      return Option.empty();
    } finally {
      if (pusher != null) {
        pusher.close();
      }
      if (sorter != null) {
        long start = System.nanoTime();
        sorter.stop();
        metrics.incWriteTime(System.nanoTime() - start);
        sorter = null;
      }
    }
  }

  @Override
  public long[] getPartitionLengths() {
    return lengths;
  }
}
