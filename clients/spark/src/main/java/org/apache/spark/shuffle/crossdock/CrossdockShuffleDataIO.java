package org.apache.spark.shuffle.crossdock;

import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;

/**
 * Spark's shuffle-data-IO plug-in ({@code spark.shuffle.sort.io.plugin.class}) for Crossdock.
 * Its only job is to tell Spark's scheduler that shuffle data outlives the executors that wrote
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
 * it. Reading and writing are {@link CrossdockShuffleManager}'s: this plug-in provides no
 * executor components, and using it with another shuffle manager is a configuration error.
 */
public final class CrossdockShuffleDataIO implements ShuffleDataIO {
  public CrossdockShuffleDataIO(SparkConf conf) {}

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

  @Override
  public ShuffleExecutorComponents executor() {
    throw new UnsupportedOperationException(CrossdockShuffleDataIO.class.getName()
        + " (spark.shuffle.sort.io.plugin.class) works only with spark.shuffle.manager="
        + CrossdockShuffleManager.class.getName());
  }
}
