package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.crossdock.client.MapPusher;
import org.crossdock.client.Placement;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Message;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.collection.Iterator;

/**
 * One map task attempt's life on Crossdock, the part both writers share ({@link
 * CrossdockShuffleWriter}, {@link CrossdockDirectWriter}; they differ only in how records become
 * pushed batches): its attempt id, its pusher, the wait for every acknowledgement, the commit, the
 * failure report, the MapStatus and the common part of {@code stop}.
 *
 * <p><b>Attempt id</b> = {@link AttemptIds#of}{@code (stageAttemptNumber, attemptNumber)}: unique
 * across the retries and speculative copies of a task (attemptNumber) and across stage retries
 * (stageAttemptNumber), which restart attemptNumber at 0. It never reaches the reserved
 * 0xffffffff.
 *
 * <p><b>Losing the race.</b> If another attempt of the map committed first (CommitResult
 * Rejected, or a worker answering push_after_commit), the winner's output is what reducers read,
 * and this attempt still returns normally: Spark only needs the map to be done. Its MapStatus
 * then carries this attempt's own sizes: the winner ran the same task on the same input, so they
 * are the best estimate available without another round trip, and they only steer AQE.
 *
 * <p><b>Write time.</b> Waiting for the acknowledgements and committing count as the task's
 * shuffle write time, with whatever of its own pushing the writer measured.
 */
final class MapAttempt {
  private static final Logger LOG = LoggerFactory.getLogger(MapAttempt.class);

  /** A writer's pushing: sends every batch, returns the write time it measured (ns). */
  @FunctionalInterface
  interface Pushes {
    long run() throws IOException;
  }

  private final CrossdockShuffleHandle<?, ?, ?> handle;
  private final CrossdockShuffleManager manager;
  private final int mapIndex;
  private final int attemptId;
  /** The shuffle's partitions (its partitioner's). */
  final int numPartitions;
  // What the writers need of the task as well.
  final long mapTaskId;
  final TaskContext context;
  final ShuffleWriteMetricsReporter metrics;
  final CrossdockConf conf;

  private Placement placement;
  private MapPusher pusher;
  private long[] lengths;
  private MapStatus mapStatus;
  private boolean stopping;
  /** Frames Spark granted no memory, and how long they waited for acknowledgements. */
  private long framesRefused;
  private long refusedWaitNanos;

  MapAttempt(CrossdockShuffleHandle<?, ?, ?> handle, CrossdockShuffleManager manager,
      long mapTaskId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
    this.handle = handle;
    this.manager = manager;
    this.mapTaskId = mapTaskId;
    this.context = context;
    this.metrics = metrics;
    this.conf = manager.conf();
    this.mapIndex = context.partitionId();
    this.attemptId = AttemptIds.of(context.stageAttemptNumber(), context.attemptNumber());
    this.numPartitions = handle.dependency().partitioner().numPartitions();
  }

  /**
   * A shuffle with no partitions (or no maps) was never registered: nothing can be written, so
   * the attempt is done at once, with empty sizes. Returns false for any other shuffle.
   */
  boolean finishEmptyShuffle(Iterator<?> records) throws IOException {
    if (handle.placement != null) {
      return false;
    }
    if (records.hasNext()) {
      throw new IOException("shuffle " + handle.shuffleId() + " has no partitions but got records");
    }
    finish(new long[numPartitions], 0L);
    return true;
  }

  /** Looks up where the partitions go and opens the attempt's pusher. */
  MapPusher startPushing() throws IOException {
    placement = manager.placement(handle, context);
    pusher = new MapPusher(manager.pool(handle), handle.appId, handle.shuffleId(), mapIndex, attemptId,
        numPartitions, conf.maxInFlight, conf.networkTimeoutMs, manager.routes(handle.shuffleId()),
        placement::addrOfSlot);
    return pusher;
  }

  /** Where the partitions go (after {@link #startPushing}). */
  Placement placement() {
    return placement;
  }

  /** Bytes pushed and not yet acknowledged (after {@link #startPushing}). */
  long unacknowledgedBytes() {
    return pusher.inFlightBytes();
  }

  /**
   * For a frame Spark granted no memory: waits until at most {@code bytes} pushed are
   * unacknowledged (the pusher stays open), counting the frame and the wait for the task's
   * figures ({@link CrossdockAccumulators#PUSH_FRAMES_REFUSED}).
   */
  void awaitAcksForRefusedFrame(long bytes) throws IOException {
    long start = System.nanoTime();
    framesRefused++;
    try {
      pusher.awaitInFlightAtMost(bytes);
    } finally {
      refusedWaitNanos += System.nanoTime() - start;
    }
  }

  /**
   * Pushes {@code buf[0, len)} as the next batch of {@code partition}, to its worker; waits for
   * room in the push window unless {@code mayWait} is false ({@link MapPusher#pushWithoutWaiting}).
   */
  void push(int partition, byte[] buf, int len, boolean mayWait) throws IOException {
    if (mayWait) {
      pusher.push(partition, placement.addrOf(partition), buf, len);
    } else {
      pusher.pushWithoutWaiting(partition, placement.addrOf(partition), buf, len);
    }
  }

  /**
   * Runs the writer's {@code pushes}, waits for every acknowledgement and commits with {@code
   * bytes} and {@code records} per partition (read once {@code pushes} returned). On a failure it
   * reports it ({@link #failed}) and rethrows, so that Spark retries the task.
   */
  void pushAndCommit(Pushes pushes, long[] bytes, long[] records) throws IOException {
    if (pusher == null) {
      throw new IllegalStateException("pushAndCommit before startPushing");
    }
    try {
      long writeNanos = pushes.run();
      long t0 = System.nanoTime();
      pusher.awaitAll();
      long t1 = System.nanoTime();
      commit(bytes, records);
      long t2 = System.nanoTime();
      metrics.incWriteTime(writeNanos + t2 - t0);
      if (handle.accumulators != null) {
        handle.accumulators.mapDone(pusher.pushedBytes(), pusher.blockedNanos() + t1 - t0,
            framesRefused, refusedWaitNanos, t2 - t1);
      }
    } catch (IOException e) {
      failed();
      throw e;
    }
  }

  /**
   * Commits a map attempt whose pushes were all acknowledged, with its non-empty partitions'
   * sizes. Returns normally when another attempt won (see the class comment); throws on any
   * other failure so that Spark retries the task.
   */
  private void commit(long[] bytes, long[] records) throws IOException {
    int shuffleId = handle.shuffleId();
    if (pusher.lostRace()) {
      LOG.info("Crossdock shuffle {} map {}: another attempt committed while attempt {} pushed",
          shuffleId, mapIndex, attemptId);
      return;
    }
    // Each partition's bytes are counted where they went: the partition, or the split the
    // pusher began it in.
    Message.CommitResult r = manager.coordinator(handle).commitMap(handle.appId, shuffleId,
        mapIndex, attemptId, pusher.stats(bytes, records), pusher.runStarts());
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
  private void failed() {
    String addr = pusher.unreachableWorker();
    manager.workersFailed(handle, addr == null ? List.of() : List.of(addr));
  }

  /**
   * The attempt is done: its MapStatus carries its own sizes {@code bytes} (also when it lost
   * the race, see the class comment) and the writer's {@code checksum}.
   */
  void finish(long[] bytes, long checksum) {
    lengths = bytes.clone();
    mapStatus = SparkCompat.mapStatus(
        SparkEnv.get().blockManager().shuffleServerId(), lengths, mapTaskId, checksum);
  }

  /** The partition sizes of the MapStatus (null before {@link #finish}). */
  long[] partitionLengths() {
    return lengths;
  }

  /**
   * The common part of {@code ShuffleWriter.stop}: the MapStatus on the first call after a
   * success, nothing otherwise; the pusher is closed in any case. The writer releases its own
   * resources after this.
   */
  Option<MapStatus> stop(boolean success) {
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
    }
  }
}
