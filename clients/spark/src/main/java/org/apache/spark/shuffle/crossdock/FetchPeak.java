package org.apache.spark.shuffle.crossdock;

import org.apache.spark.util.AccumulatorV2;

/**
 * The largest number of fetched bytes a reduce task held unconsumed at once, over the tasks of
 * a shuffle (the adaptive-fetch paper's "peak shuffle utilization", per task): a named
 * accumulator, so it shows in the Spark UI and the event log beside the stage.
 */
public final class FetchPeak extends AccumulatorV2<Long, Long> {
  private static final long serialVersionUID = 1L;
  /** Its name in the UI. */
  public static final String NAME = "crossdock fetch peak buffered bytes";

  private long max;

  @Override
  public boolean isZero() {
    return max == 0;
  }

  @Override
  public FetchPeak copy() {
    FetchPeak c = new FetchPeak();
    c.max = max;
    return c;
  }

  @Override
  public void reset() {
    max = 0;
  }

  @Override
  public void add(Long v) {
    max = Math.max(max, v);
  }

  @Override
  public void merge(AccumulatorV2<Long, Long> other) {
    max = Math.max(max, other.value());
  }

  @Override
  public Long value() {
    return max;
  }
}
