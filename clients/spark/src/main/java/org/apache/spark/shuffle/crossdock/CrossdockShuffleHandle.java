package org.apache.spark.shuffle.crossdock;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.crossdock.client.Placement;

/**
 * What executors need to write and read a shuffle, shipped with the tasks: the coordinator, the
 * app id and the placement (worker per partition), so executors make no extra RPC to find them.
 * {@code placement} is null for a shuffle with no maps or no partitions (never registered).
 *
 * <p>{@code framedBatches} tells the reader how the writer laid out a partition's bytes: true
 * when each pushed batch is its own {@code wrapStream}-ed (compressed, encrypted) frame of
 * serialized records ({@link CrossdockDirectWriter}); false when a map's batches together are
 * one wrapped stream ({@link CrossdockShuffleWriter}).
 *
 * <p>{@code runBatchBytes} is positive for a key-ordered shuffle read by merging: every map
 * sorts its records by key and pushes each partition as a sorted run in batches of that size,
 * and the reader merges the runs ({@link MergingRecordIterator}) instead of sorting.
 */
public final class CrossdockShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 1L;

  public final String coordinator;
  public final String appId;
  /**
   * The app's token, which executors prove to the coordinator and the workers (empty when the
   * cluster runs without authentication). It travels with the tasks, as Spark ships its own
   * {@code spark.authenticate} secret to executors; keep {@code spark.network.crypto.enabled} on
   * where task payloads cross an untrusted network.
   */
  public final byte[] appToken;
  public final int numMaps;
  public final Placement placement;
  public final boolean framedBatches;
  public final int runBatchBytes;
  /**
   * For a merged shuffle: whether maps push each spill of their sorter as a run of its own
   * (the coordinator keeps run starts), instead of merging their spills before pushing.
   */
  public final boolean spillRuns;
  /** Crossdock's figures for the Spark UI (registered on the driver); null without a context. */
  public final CrossdockAccumulators accumulators;

  public CrossdockShuffleHandle(int shuffleId, ShuffleDependency<K, V, C> dependency,
      String coordinator, String appId, byte[] appToken, int numMaps, Placement placement,
      boolean framedBatches, int runBatchBytes, boolean spillRuns,
      CrossdockAccumulators accumulators) {
    super(shuffleId, dependency);
    this.coordinator = coordinator;
    this.appId = appId;
    this.appToken = appToken;
    this.numMaps = numMaps;
    this.placement = placement;
    this.framedBatches = framedBatches;
    this.runBatchBytes = runBatchBytes;
    this.spillRuns = spillRuns;
    this.accumulators = accumulators;
  }

  /** Whether maps push sorted runs that the reader merges. */
  public boolean sortedRuns() {
    return runBatchBytes > 0;
  }
}
