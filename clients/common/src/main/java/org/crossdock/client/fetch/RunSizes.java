package org.crossdock.client.fetch;

/**
 * How big the pieces of a merged read are: the one rule both engines' clients follow for a
 * shuffle read by merging sorted runs ({@link RunReader}).
 *
 * <p>A reducer merging a partition keeps a request open on every map's run at once, and holds
 * about two batches of each (the one being merged and the next one arriving). For that to fit
 * in the reader's fetch limit with many maps, the runs are pushed in smaller batches and each
 * request brings a share of the limit: fewer, larger pieces as the maps get fewer, as the
 * levitated merge's header-first protocol does.
 */
public final class RunSizes {
  /** The least batch worth a request of its own. */
  static final long MIN_BATCH = 16L << 10;
  /** The least bytes one request of a run asks for. */
  static final long MIN_REQUEST = 4L << 10;
  /**
   * The most sorted runs one map pushes of a partition: a map short of memory pushes its first
   * spills as runs of their own and merges any later ones on its disk into its last run, so a
   * reducer merges at most this many runs per map, and batches are sized for that many.
   */
  public static final int MAX_RUNS_PER_MAP = 4;

  private RunSizes() {}

  /**
   * The batch size maps push their runs in: {@code runs × 2} batches fit in {@code fetchLimit},
   * between 16 KiB (or the push batch size if smaller) and the push batch size.
   *
   * @param fetchLimit the reader's bytes in flight at most
   * @param pushBatch the batch size unsorted shuffles are pushed in
   * @param runs the runs a reducer merges (one per map)
   */
  public static int batchBytes(long fetchLimit, int pushBatch, long runs) {
    long fit = share(fetchLimit, runs);
    return (int) Math.max(Math.min(MIN_BATCH, pushBatch), Math.min(pushBatch, fit));
  }

  /**
   * The most payload bytes one request of a run brings (the worker ends the request after the
   * batch that reaches it): the fetch limit shared out over {@code runs × 2}, at least a batch.
   *
   * @param runs the runs the limit is shared over (the Spark reader: maps × partitions read;
   *     the MapReduce reduce: maps)
   */
  public static long requestBytes(long fetchLimit, int runBatch, long runs) {
    return Math.max(Math.max(MIN_REQUEST, runBatch), share(fetchLimit, runs));
  }

  private static long share(long fetchLimit, long runs) {
    return fetchLimit / (2L * Math.max(1, runs));
  }
}
