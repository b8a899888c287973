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
 * copy is Spark 3.5's (src/main/spark-4 holds Spark 4's). Spark 3.5 has no row-based shuffle
 * checksums: its map statuses carry none and its sorter computes none.
 */
final class SparkCompat {
  private SparkCompat() {}

  /** The Spark line this build is for. */
  static final String SPARK_LINE = "3.5";

  /** A map's status (Spark 3.5 has no checksum to carry). */
  static MapStatus mapStatus(BlockManagerId loc, long[] lengths, long mapTaskId, long checksum) {
    return MapStatus$.MODULE$.apply(loc, lengths, mapTaskId);
  }

  /** The map side's sorter. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static <K, V, C> ExternalSorter<K, V, C> mapSorter(TaskContext context,
      Option<Aggregator<K, V, C>> aggregator, Partitioner partitioner, Option<Ordering<K>> ordering,
      ShuffleDependency<K, V, C> dep) {
    return new ExternalSorter(context, aggregator, Option.apply(partitioner), ordering,
        dep.serializer());
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
          dep.serializer());
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

  /** Spark 3.5 computes no row-based checksum. */
  static long checksum(ExternalSorter<?, ?, ?> sorter) {
    return 0L;
  }

  /** The reduce side's sorter of a key-ordered shuffle (no aggregation, no partitioning). */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static <K, C> ExternalSorter<K, C, C> readSorter(TaskContext context, Option<Ordering<K>> ordering,
      Serializer serializer) {
    return new ExternalSorter(context, Option.empty(), Option.empty(), ordering, serializer);
  }
}
