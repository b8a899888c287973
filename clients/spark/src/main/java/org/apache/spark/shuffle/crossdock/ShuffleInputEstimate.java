package org.apache.spark.shuffle.crossdock;

import java.lang.reflect.Method;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashSet;
import java.util.Set;
import org.apache.spark.Dependency;
import org.apache.spark.MapOutputStatistics;
import org.apache.spark.MapOutputTracker;
import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.Partition;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.rdd.HadoopPartition;
import org.apache.spark.rdd.NewHadoopPartition;
import org.apache.spark.rdd.RDD;
import org.crossdock.client.route.RoutePolicy;
import scala.Option;
import scala.collection.Iterator;

/**
 * What a shuffle's map stage reads, estimated on the driver when the shuffle is registered: the
 * walk goes up the RDD lineage from the map side's RDD through its narrow dependencies, and
 * sums its inputs:
 *
 * <ul>
 *   <li>files read by Spark SQL (a {@code FilePartition}'s files) and by Hadoop input formats
 *       (each split's length);
 *   <li>an earlier shuffle whose every map output is registered, by the sizes its maps reported
 *       (with adaptive query execution a stage is planned after its child stages ran, so this
 *       is AQE's own statistic of the child stage).
 * </ul>
 *
 * Anything else (a generated range, a parallelized collection, an earlier shuffle that has not
 * run, an unknown source) makes the size unknown, and the shuffle then goes through Crossdock.
 * The estimate is of the input, an upper bound of the shuffle in most plans (projections,
 * filters and partial aggregation shrink it; decompressing a columnar file can grow it, which
 * is why the threshold leaves room).
 */
final class ShuffleInputEstimate {
  /** RDDs visited at most: a longer lineage counts as unknown rather than slowing the driver. */
  static final int MAX_RDDS = 10_000;
  private static final String SQL_FILE_PARTITION =
      "org.apache.spark.sql.execution.datasources.FilePartition";

  private ShuffleInputEstimate() {}

  /** The estimate for a shuffle whose map side computes {@code rdd}. */
  static RoutePolicy.Shuffle of(ShuffleDependency<?, ?, ?> dep) {
    int maps = dep.rdd().getNumPartitions();
    int partitions = dep.partitioner().numPartitions();
    long total = 0;
    int files = 0;
    int shuffles = 0;
    Deque<RDD<?>> todo = new ArrayDeque<>();
    Set<Integer> seen = new HashSet<>();
    todo.add(dep.rdd());
    try {
      while (!todo.isEmpty()) {
        RDD<?> rdd = todo.poll();
        if (!seen.add(rdd.id())) {
          continue;
        }
        if (seen.size() > MAX_RDDS) {
          return unknown(maps, partitions, "a lineage of more than " + MAX_RDDS + " RDDs");
        }
        // scala.collection.Seq: immutable in Spark 4 (Scala 2.13), not in Spark 3.5 (2.12).
        scala.collection.Seq<Dependency<?>> deps = rdd.dependencies();
        if (deps.isEmpty()) {
          long[] leaf = leafBytes(rdd);
          if (leaf == null) {
            return unknown(maps, partitions, "it reads " + rdd.getClass().getSimpleName());
          }
          total += leaf[0];
          files += (int) leaf[1];
          continue;
        }
        Iterator<Dependency<?>> it = deps.iterator();
        while (it.hasNext()) {
          Dependency<?> d = it.next();
          if (d instanceof ShuffleDependency<?, ?, ?> parent) {
            long b = shuffleBytes(parent);
            if (b < 0) {
              return unknown(maps, partitions,
                  "shuffle " + parent.shuffleId() + " it reads has not run yet");
            }
            total += b;
            shuffles++;
          } else {
            todo.add(d.rdd());
          }
        }
      }
    } catch (RuntimeException | LinkageError e) {
      return unknown(maps, partitions, "its lineage could not be read: " + e);
    }
    String source = files + " file" + (files == 1 ? "" : "s") + " and " + shuffles
        + " earlier shuffle" + (shuffles == 1 ? "" : "s");
    return new RoutePolicy.Shuffle(maps, partitions, total, source);
  }

  private static RoutePolicy.Shuffle unknown(int maps, int partitions, String why) {
    return new RoutePolicy.Shuffle(maps, partitions, -1, why);
  }

  /** {bytes, files} an input RDD reads, or null when its size is not known. */
  private static long[] leafBytes(RDD<?> rdd) {
    long bytes = 0;
    long files = 0;
    for (Partition p : rdd.partitions()) {
      if (p instanceof HadoopPartition hp) {
        bytes += splitLength(() -> hp.inputSplit().value().getLength());
        files++;
      } else if (p instanceof NewHadoopPartition np) {
        bytes += splitLength(() -> np.serializableHadoopSplit().value().getLength());
        files++;
      } else if (p.getClass().getName().equals(SQL_FILE_PARTITION)) {
        long[] f = sqlFiles(p);
        if (f == null) {
          return null;
        }
        bytes += f[0];
        files += f[1];
      } else {
        return null;
      }
    }
    return new long[] {bytes, files};
  }

  private interface Length {
    long get() throws Exception;
  }

  private static long splitLength(Length l) {
    try {
      return Math.max(0, l.get());
    } catch (Exception e) {
      throw new IllegalStateException("an input split's length is unknown: " + e, e);
    }
  }

  /**
   * {bytes, files} of a Spark SQL {@code FilePartition}, read by reflection: the client is
   * built against spark-core alone and runs with or without spark-sql.
   */
  private static long[] sqlFiles(Partition p) {
    try {
      Object[] files = (Object[]) p.getClass().getMethod("files").invoke(p);
      long bytes = 0;
      for (Object f : files) {
        Method length = f.getClass().getMethod("length");
        bytes += Math.max(0, (Long) length.invoke(f));
      }
      return new long[] {bytes, files.length};
    } catch (ReflectiveOperationException | ClassCastException e) {
      return null;
    }
  }

  /** The bytes a finished shuffle's maps wrote, or -1 if any map output is missing. */
  private static long shuffleBytes(ShuffleDependency<?, ?, ?> dep) {
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      return -1;
    }
    MapOutputTracker tracker = env.mapOutputTracker();
    if (!(tracker instanceof MapOutputTrackerMaster master)
        || !master.containsShuffle(dep.shuffleId())) {
      return -1;
    }
    Option<? extends scala.collection.Seq<Object>> missing =
        master.findMissingPartitions(dep.shuffleId());
    if (missing.isEmpty() || !missing.get().isEmpty()) {
      return -1;
    }
    MapOutputStatistics stats = master.getStatistics(dep);
    long sum = 0;
    for (long b : stats.bytesByPartitionId()) {
      sum += b;
    }
    return sum;
  }
}
