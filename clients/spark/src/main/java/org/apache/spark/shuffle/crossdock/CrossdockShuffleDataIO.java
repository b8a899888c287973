package org.apache.spark.shuffle.crossdock;

import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;

/**
 * Spark's shuffle-data-IO plug-in ({@code spark.shuffle.sort.io.plugin.class}) for Crossdock.
 * Its main job is to tell Spark's scheduler that shuffle data outlives the executors that wrote
 * it ({@link ShuffleDriverComponents#supportsReliableStorage()}): the map outputs live on the
 * Crossdock workers. With it, Spark
 *
 * <ul>
 *   <li>keeps a lost executor's map outputs registered instead of recomputing them, and
 *   <li>allows dynamic allocation without an external shuffle service or shuffle tracking, and
 *       releases idle executors even when they wrote shuffle data.
 * </ul>
 *
 * <p>A map output that really is lost (its only copy was on a lost Crossdock worker) is found
 * by the reader, which raises a {@code FetchFailedException} for that map, and Spark recomputes
 * it. Reading and writing are {@link CrossdockShuffleManager}'s; the executor components are
 * Spark's local-disk ones, for the shuffles the manager routes through Spark's own shuffle.
 * Those shuffles' files do live on executors: a lost executor's routed map outputs are found
 * missing by their reducers (a fetch failure), and recomputed.
 */
public final class CrossdockShuffleDataIO implements ShuffleDataIO {
  private final SparkConf conf;

  public CrossdockShuffleDataIO(SparkConf conf) {
    this.conf = conf;
  }

  @Override
  public ShuffleDriverComponents driver() {
    return new ShuffleDriverComponents() {
      @Override
      public Map<String, String> initializeApplication() {
        return Map.of();
      }

      @Override
      public void cleanupApplication() {
        // The shuffle manager unregisters the app, which deletes its data on the workers.
      }

      @Override
      public boolean supportsReliableStorage() {
        return true;
      }
    };
  }

  /**
   * Spark's local-disk components: the shuffles that {@link CrossdockShuffleManager} routes
   * through Spark's sort shuffle write their files with them, exactly as vanilla Spark does.
   */
  @Override
  public ShuffleExecutorComponents executor() {
    return new LocalDiskShuffleDataIO(conf).executor();
  }
}
