package org.apache.spark.shuffle.crossdock;

import java.util.List;
import org.apache.spark.Dependency;
import org.apache.spark.NarrowDependency;
import org.apache.spark.ShuffleDependency;
import org.crossdock.protocol.Message;

/**
 * A range-partitioned shuffle's sample of its map stage's input, taken before the maps ran
 * (SCache's sampling for range partitioners, paper 003 §3.2.2): per input partition its records
 * and how many were sampled, and where the partitioner sends the sampled ones. The coordinator
 * divides the shuffle's predicted bytes by it, since with input ordered by key the first maps to
 * commit hold only the lowest ranges. Sent with the shuffle's registration.
 *
 * <p>Spark SQL's range exchange samples its input once already, to choose its range bounds; the
 * SQL extension's exchange ({@code PlacedShuffleExchangeExec}) samples alongside that pass, so
 * the sample costs no pass of its own. RDD shuffles ({@code sortByKey}) have none: Spark's
 * {@code RangePartitioner} keeps only its bounds, and the shuffle is registered inside the DAG
 * scheduler, where no sampling job can run.
 */
public record RangeSample(List<Message.InputSample> inputs, List<Message.SampleCount> counts) {
  /** An RDD of a shuffle's map side that samples its input while Spark's partitioner does. */
  public interface Source {
    /**
     * Stops sampling (the maps then run without it) and returns the sample of {@code dep}'s
     * input, its records sent through {@code dep}'s own partitioning; null when there is none.
     */
    RangeSample takeSample(ShuffleDependency<?, ?, ?> dep);

    /** Stops sampling and drops what was sampled. */
    void dropSample();
  }

  /**
   * The sample of {@code dep}'s input, when the RDD its map side reads is a {@link Source} that
   * took one; null otherwise. Stops that source's sampling either way.
   */
  static RangeSample of(ShuffleDependency<?, ?, ?> dep) {
    Source s = sourceOf(dep);
    return s == null ? null : s.takeSample(dep);
  }

  /** Stops the sampling of {@code dep}'s input, if any, for a shuffle that will not use it. */
  static void drop(ShuffleDependency<?, ?, ?> dep) {
    Source s = sourceOf(dep);
    if (s != null) {
      s.dropSample();
    }
  }

  /**
   * The source that feeds {@code dep}'s map side directly: the sampled rows go through that
   * side's own function ({@link Source#takeSample}), which is right only for its own input.
   */
  private static Source sourceOf(ShuffleDependency<?, ?, ?> dep) {
    scala.collection.Seq<Dependency<?>> deps = dep.rdd().dependencies();
    if (deps.size() == 1 && deps.head() instanceof NarrowDependency<?> d
        && d.rdd() instanceof Source s) {
      return s;
    }
    return null;
  }

  /** Input partitions sampled. */
  public int size() {
    return inputs.size();
  }
}
