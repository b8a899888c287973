package org.apache.spark.shuffle.crossdock;

import org.apache.spark.Aggregator;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.util.collection.ExternalSorter;
import org.apache.spark.util.collection.WritablePartitionedPairCollection;
import scala.Option;
import scala.math.Ordering;

/**
 * What differs between the Spark versions the client is built for, one small method each; this
 * copy is Spark 4's (src/main/spark-3.5 holds Spark 3.5's). The Maven profile of the version
 * picks the directory; everything else is one source for both.
 */
final class SparkCompat {
  private SparkCompat() {}

  /** The Spark line this build is for. */
  static final String SPARK_LINE = "4";

  /** A map's status: Spark 4 carries the map's row-based checksum. */
  static MapStatus mapStatus(BlockManagerId loc, long[] lengths, long mapTaskId, long checksum) {
    return MapStatus$.MODULE$.apply(loc, lengths, mapTaskId, checksum);
  }

  /** The map side's sorter, with the dependency's row-based checksums (Spark 4). */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static <K, V, C> ExternalSorter<K, V, C> mapSorter(TaskContext context,
      Option<Aggregator<K, V, C>> aggregator, Partitioner partitioner, Option<Ordering<K>> ordering,
      ShuffleDependency<K, V, C> dep) {
    return new ExternalSorter(context, aggregator, Option.apply(partitioner), ordering,
        dep.serializer(), dep.rowBasedChecksums());
  }

  /**
   * The map side's sorter of a merged shuffle (no aggregation, ordered by key), whose spills
   * {@code runs} pushes as sorted runs instead of writing them to disk (the first ones: later
   * spills go to disk and are merged into the map's last run, as Spark's own are).
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static <K, V> ExternalSorter<K, V, V> runPushingSorter(TaskContext context,
      Partitioner partitioner, Ordering<K> ordering, ShuffleDependency<K, V, ?> dep,
      SpillRuns runs) {
    return new RunPushingSorter(context, partitioner, ordering, dep, runs);
  }

  /**
   * Spark's sorter with its {@code spill} (public in bytecode) pushing runs, and its memory
   * requests capped at a run ({@link SpillRuns#toAsk}).
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private static final class RunPushingSorter<K, V> extends ExternalSorter<K, V, V> {
    private final SpillRuns runs;

    RunPushingSorter(TaskContext context, Partitioner partitioner, Ordering<K> ordering,
        ShuffleDependency<K, V, ?> dep, SpillRuns runs) {
      super(context, Option.empty(), Option.apply(partitioner), Option.apply(ordering),
          dep.serializer(), dep.rowBasedChecksums());
      this.runs = runs;
    }

    /** Spark's sorter asks here before it grows; granted less than it needs, it spills. */
    @Override
    public long acquireMemory(long size) {
      long ask = runs.toAsk(getUsed(), size);
      return ask == 0 ? 0 : super.acquireMemory(ask);
    }

    @Override
    public void spill(WritablePartitionedPairCollection<K, V> collection) {
      if (!runs.push(collection)) {
        super.spill(collection); // past the runs a map may push: to disk, merged at the end
      }
    }
  }

  /** The row-based checksum the map side's sorter aggregated. */
  static long checksum(ExternalSorter<?, ?, ?> sorter) {
    return sorter.getAggregatedChecksumValue();
  }

  /** The reduce side's sorter of a key-ordered shuffle (no aggregation, no partitioning). */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static <K, C> ExternalSorter<K, C, C> readSorter(TaskContext context, Option<Ordering<K>> ordering,
      Serializer serializer) {
    return new ExternalSorter(context, Option.empty(), Option.empty(), ordering, serializer,
        ExternalSorter.$lessinit$greater$default$6());
  }
}
