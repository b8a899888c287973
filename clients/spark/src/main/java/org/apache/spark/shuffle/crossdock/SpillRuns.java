package org.apache.spark.shuffle.crossdock;

import java.util.Comparator;
import org.apache.spark.SparkEnv;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.ShufflePartitionPairsWriter;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.util.collection.WritablePartitionedIterator;
import org.apache.spark.util.collection.WritablePartitionedPairCollection;
import org.crossdock.client.fetch.RunSizes;
import scala.Option;

/**
 * The spills of a merged shuffle's map sorter, pushed as sorted runs instead of written to local
 * files (Hadoop-A's levitated merge, Wang et al., chapter 3: a map's output is merged only once,
 * by the reader). When Spark's sorter runs short of memory it sorts what it holds by (partition,
 * key) and hands it here ({@link SparkCompat#runPushingSorter}); each partition it holds becomes
 * one run, written exactly as the sorter writes its final output (the dependency's serializer,
 * wrapped per block by the serializer manager) into the task's {@link CrossdockMapOutputWriter},
 * which pushes it and notes where the run begins. What is left in memory at the end is the last
 * run of each partition. Nothing goes to the map's disk and nothing is read back.
 *
 * <p>Because a pushed run costs the map no disk and no merge, the sorter spills once it holds
 * {@code runBytes} (a third of a task slot's heap, {@link CrossdockConf#MAP_RUN_PARTS}) even when
 * Spark would grant it more ({@link #toAsk}, called by the sorter's memory requests): the map task
 * keeps the rest of its heap. Once the map pushed the runs it may, Spark's own grants decide its
 * further spills, which go to disk.
 */
final class SpillRuns {
  private final CrossdockMapOutputWriter out;
  private final ShuffleWriteMetricsReporter metrics;
  private final Comparator<Object> keyOrder;
  private final int shuffleId;
  private final long mapTaskId;
  private final SerializerManager serializerManager = SparkEnv.get().serializerManager();
  private final SerializerInstance serializer;
  private final long runBytes;
  private int pushed;

  @SuppressWarnings("unchecked")
  SpillRuns(CrossdockMapOutputWriter out, ShuffleWriteMetricsReporter metrics,
      Comparator<?> keyOrder, SerializerInstance serializer, int shuffleId, long mapTaskId,
      long runBytes) {
    this.out = out;
    this.metrics = metrics;
    this.keyOrder = (Comparator<Object>) keyOrder;
    this.serializer = serializer;
    this.shuffleId = shuffleId;
    this.mapTaskId = mapTaskId;
    this.runBytes = runBytes;
  }

  /**
   * What the sorter asks Spark for when it holds {@code used} bytes (beyond the few MiB Spark lets
   * a sorter hold unasked) and wants {@code asked} more: no more than takes it to {@code runBytes}
   * while its next spill would be pushed as a run; all of it once the map pushed the runs it may.
   * Granted less than it needs, Spark's sorter spills.
   */
  long toAsk(long used, long asked) {
    if (pushed >= RunSizes.MAX_RUNS_PER_MAP - 1) {
      return asked; // its further spills go to disk: Spark decides when, as for its own
    }
    return Math.max(0, Math.min(asked, runBytes - used));
  }

  /**
   * Pushes {@code collection}, emptying it, as one sorted run of each partition it holds; false
   * (nothing done) once the map pushed as many spills as it may, the last run being its end.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  boolean push(WritablePartitionedPairCollection collection) {
    if (pushed >= RunSizes.MAX_RUNS_PER_MAP - 1) {
      return false;
    }
    WritablePartitionedIterator it =
        collection.destructiveSortedWritablePartitionedIterator(Option.apply(keyOrder));
    while (it.hasNext()) {
      int partition = it.nextPartition();
      // A failed push surfaces here as the pusher's IOException, thrown through Spark's code
      // to the writer, which reports it as any failed push.
      ShufflePartitionPairsWriter run = new ShufflePartitionPairsWriter(
          out.getPartitionWriter(partition), serializerManager, serializer,
          new ShuffleBlockId(shuffleId, mapTaskId, partition), metrics, null);
      Throwable failure = null;
      try {
        while (it.hasNext() && it.nextPartition() == partition) {
          it.writeNext(run);
        }
      } catch (Throwable t) {
        failure = t;
        throw t;
      } finally {
        // Closing pushes the run's last batch; when the run already failed, a failure of that
        // push is the lesser one.
        if (failure == null) {
          run.close();
        } else {
          try {
            run.close();
          } catch (Throwable t) {
            failure.addSuppressed(t);
          }
        }
      }
    }
    pushed++;
    return true;
  }

  /** How many spills were pushed as runs. */
  int pushed() {
    return pushed;
  }
}
