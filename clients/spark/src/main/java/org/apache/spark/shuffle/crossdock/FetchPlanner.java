package org.apache.spark.shuffle.crossdock;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.spark.SparkEnv;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.crossdock.client.Placement;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.RunSizes;
import org.crossdock.client.fetch.RunStartIndex;
import org.crossdock.client.fetch.Segment;
import org.crossdock.protocol.Message;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.Iterator;

/**
 * Cuts a reduce task's read (partitions {@code [startPartition, endPartition)}, maps {@code
 * [startMap, endMap)}) into {@link Segment}s: for each partition, runs of consecutive maps whose
 * outputs add up to the target size, the sizes being those the writers reported in their
 * MapStatus (exact for up to 2000 partitions, averaged above, as Spark keeps them). Every map of
 * the range is in exactly one segment, also the empty ones, so a map whose output was lost is
 * always noticed. When the tracker has no sizes (its outputs were unregistered while the task
 * started, as Spark does after a fetch failure), every partition is one segment: the workers'
 * commits, not the tracker, say what there is to read.
 *
 * <p>A split partition (a hot one continued on other workers) is read from every slot of it
 * ({@link Placement#slotsOf}); a segment's {@code partition} is the slot it fetches.
 *
 * <p>Target size: the in-flight increment for the adaptive reader (segments are packed per
 * source at request time), a fifth of the limit for the static one (Spark's request size), whose
 * segments are then shuffled as Spark shuffles its requests.
 */
final class FetchPlanner {
  private FetchPlanner() {}

  /** The segments of a read. */
  static List<Segment> plan(int shuffleId, int startMap, int endMap, int startPartition,
      int endPartition, Placement placement, CrossdockConf conf, long seed) {
    int maps = Math.max(0, endMap - startMap);
    int parts = Math.max(0, endPartition - startPartition);
    boolean adaptive = conf.fetchPolicy == FetchScheduler.Policy.ADAPTIVE;
    long target = adaptive ? conf.fetchIncrement() : Math.max(1, conf.fetchMaxInFlight / 5);
    long[][] sizes = trackedSizes(shuffleId, startMap, endMap, startPartition, endPartition);
    if (sizes == null) {
      sizes = new long[parts][maps];
      for (long[] row : sizes) {
        if (maps > 0) {
          row[maps - 1] = target;
        }
      }
    }
    List<Segment> out = new ArrayList<>();
    for (int p = 0; p < parts; p++) {
      // A split partition is read from every slot, each cut the same way: which maps went on
      // in a split is not known here, so each slot counts its share of their sizes.
      int[] slots = placement.slotsOf(startPartition + p);
      for (int slot : slots) {
        List<String> copies = placement.copiesOf(slot);
        int first = 0;
        long bytes = 0;
        for (int m = 0; m < maps; m++) {
          bytes += sizes[p][m];
          if (bytes >= target || m == maps - 1) {
            long share = (bytes + slots.length - 1) / slots.length;
            out.add(new Segment(slot, startMap + first, startMap + m + 1, share, copies)
                .acceptingRecords(placement.mapAttempts()));
            first = m + 1;
            bytes = 0;
          }
        }
      }
    }
    if (!adaptive) {
      Collections.shuffle(out, new Random(seed));
    }
    return out;
  }

  /**
   * The runs of a merged read: one capped segment per (partition, map), in (partition, map)
   * order, or one per run of a map that pushed several ({@code runStarts}: where each map's
   * further runs begin, by slot, map and batch, as the coordinator lists them). Every map of the
   * range gets one, also those the tracker says wrote nothing to the partition: the tracker's
   * sizes may be those of an attempt that lost the commit race, and an empty run costs one small
   * request. The cap shares the fetch limit out, about two segments of every run, but is never
   * below a run batch ({@code runBatch}: every answer brings at least one batch, so a smaller cap
   * would only hide memory from the count). A run of a map that pushed several is read only
   * from the attempt {@code runStarts} lists as committed with them.
   */
  static List<Segment> runs(int shuffleId, int startMap, int endMap, int startPartition,
      int endPartition, Placement placement, CrossdockConf conf, int runBatch,
      Message.ShuffleStatus runStarts) {
    int maps = Math.max(0, endMap - startMap);
    int parts = Math.max(0, endPartition - startPartition);
    long[][] sizes = trackedSizes(shuffleId, startMap, endMap, startPartition, endPartition);
    RunStartIndex later = runStarts == null ? new RunStartIndex(null, null, startMap, endMap)
        : new RunStartIndex(runStarts.runStarts(), runStarts.mapAttempts(), startMap, endMap);
    long n = (long) maps * parts + later.count();
    long cap = RunSizes.requestBytes(conf.fetchMaxInFlight, runBatch, n);
    List<Segment> out = new ArrayList<>((int) Math.min(Integer.MAX_VALUE, n));
    for (int p = 0; p < parts; p++) {
      // A split partition: each map's run is whole in one of its slots (a map's batches of a
      // partition never leave the slot they began in); the others answer it empty.
      for (int slot : placement.slotsOf(startPartition + p)) {
        List<String> copies = placement.copiesOf(slot);
        for (int m = 0; m < maps; m++) {
          long estimate = sizes == null ? cap : sizes[p][m];
          later.addSegments(out, slot, startMap + m, estimate, copies, cap);
        }
      }
    }
    for (Segment s : out) {
      s.acceptingRecords(placement.mapAttempts());
    }
    return out;
  }

  /**
   * Bytes per (partition, map) of the read, from the map output tracker; null when it has none
   * (the outputs were unregistered after a fetch failure).
   */
  private static long[][] trackedSizes(int shuffleId, int startMap, int endMap,
      int startPartition, int endPartition) {
    try {
      return sizes(shuffleId, startMap, endMap, startPartition, endPartition,
          Math.max(0, endMap - startMap), Math.max(0, endPartition - startPartition));
    } catch (Exception e) {
      // Scala throws the tracker's MetadataFetchFailedException undeclared.
      if (!(e instanceof org.apache.spark.shuffle.FetchFailedException)) {
        throw e;
      }
      return null;
    }
  }

  /** Bytes per (partition, map) of the read, from the map output tracker. */
  @SuppressWarnings("unchecked")
  private static long[][] sizes(int shuffleId, int startMap, int endMap, int startPartition,
      int endPartition, int maps, int parts) {
    long[][] sizes = new long[parts][maps];
    if (maps == 0 || parts == 0) {
      return sizes;
    }
    Iterator<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> it =
        SparkEnv.get().mapOutputTracker().getMapSizesByExecutorId(
            shuffleId, startMap, endMap, startPartition, endPartition);
    while (it.hasNext()) {
      scala.collection.Iterator<Tuple3<BlockId, Object, Object>> blocks = it.next()._2().iterator();
      while (blocks.hasNext()) {
        Tuple3<BlockId, Object, Object> b = blocks.next();
        if (b._1() instanceof org.apache.spark.storage.ShuffleBlockId id) {
          int p = id.reduceId() - startPartition;
          int m = (Integer) b._3() - startMap;
          if (p >= 0 && p < parts && m >= 0 && m < maps) {
            sizes[p][m] += (Long) b._2();
          }
        }
      }
    }
    return sizes;
  }
}
