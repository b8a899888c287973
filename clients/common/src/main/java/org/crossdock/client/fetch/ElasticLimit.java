package org.crossdock.client.fetch;

/**
 * A reduce task's elastic in-flight limit (Nicolae et al., section 4.2.2, Algorithm 2): how
 * many bytes it may have asked for and not yet consumed. After each request the task reads to
 * its end (the paper's block), the limit grows by one increment if the task waited longer for
 * that request than it does on average (it reads faster than the data comes: ask for more at
 * once), and shrinks by one increment otherwise (the data is there before it is needed: buffer
 * less). It never exceeds the hard limit and never falls below its floor.
 *
 * <p>One quirk of the paper's pseudocode is mended: a wait above the average at the hard limit
 * keeps the limit (the printed code shrinks it). The paper leaves the average open: it is an
 * exponential moving average of weight {@code alpha}, as in {@code crates/policy}. The rest is
 * the caller's to choose, with the methods below: the floor, where the limit starts and with
 * which average, whether the first wait counts, whether the limit shrinks after every wait at
 * or below the average (the paper) or only after a run of requests without any wait (the Spark
 * reader; see {@link #shrinkingAfterQuiet}), and whether it grows at every wait above the
 * average (the paper) or only at one that ends a run of waits (the Spark reader; see {@link
 * #growingAfterWaits}). The decisions match {@code crates/policy}'s on the shared vectors
 * ({@code testdata/policy/adaptive_fetch.json}).
 */
public final class ElasticLimit {
  /** The reader's average weight (the simulator's too). */
  public static final double ALPHA = 0.125;

  private final long hard;
  private final long increment;
  private final double alpha;
  private long floor;
  private long soft;
  private boolean skipFirst;
  private boolean hasAverage;
  private double avgWaitNanos;
  /** 0: the paper's rule; n: shrink after n requests in a row without a wait. */
  private int quietToShrink;
  private int quiet;
  /** 1: the paper's rule; n: grow only on the n-th request in a row that waited. */
  private int waitsToGrow = 1;
  private int waited;
  private long grown;
  private long shrunk;

  /**
   * A limit of at most {@code hard} bytes growing and shrinking by {@code increment}, averaging
   * waits with weight {@code alpha}; as the paper has it, it starts at the hard limit, with a
   * floor of one increment.
   */
  public ElasticLimit(long hard, long increment, double alpha) {
    if (increment <= 0 || hard < increment) {
      throw new IllegalArgumentException(
          "in-flight limit " + hard + " must be at least its increment " + increment);
    }
    this.hard = hard;
    this.increment = increment;
    this.alpha = alpha;
    this.floor = increment;
    this.soft = hard;
  }

  /**
   * Never below {@code floor} (kept within one increment and the hard limit). The paper's text
   * says one increment, its code two: a reader that asks for a new increment only when one fits
   * under the limit needs two, one being consumed while the next arrives, or it prefetches
   * nothing.
   */
  public ElasticLimit withFloor(long floor) {
    this.floor = Math.max(increment, Math.min(hard, floor));
    this.soft = Math.max(this.soft, this.floor);
    return this;
  }

  /**
   * Starts at {@code soft} instead of the hard limit. Starting at the hard limit makes every
   * task's first burst as large as a static reader's: the peak memory the paper sets out to cut.
   */
  public ElasticLimit startingAt(long soft) {
    this.soft = Math.max(floor, Math.min(hard, soft));
    return this;
  }

  /** Starts with {@code avgWaitNanos} as the average wait (carried over from an earlier task). */
  public ElasticLimit withAverage(double avgWaitNanos) {
    this.hasAverage = true;
    this.avgWaitNanos = Math.max(0, avgWaitNanos);
    return this;
  }

  /** Leaves the first request's wait out: it measures connecting, not the flow of data. */
  public ElasticLimit skippingFirstWait() {
    this.skipFirst = true;
    return this;
  }

  /**
   * Shrinks only after {@code n} requests in a row were read without any wait; a wait at or below
   * the average keeps the limit. The paper's rule (shrink after every such wait) suits reducers
   * that read thousands of blocks with steady waits. A Spark task reads a few requests, and on a
   * busy host the waits are noisy: with the paper's rule the limit sits at its floor, where each
   * request waits out the round trip (measured in {@code docs/papers.md}).
   */
  public ElasticLimit shrinkingAfterQuiet(int n) {
    this.quietToShrink = Math.max(1, n);
    return this;
  }

  /**
   * Grows only on a wait above the average that is the {@code n}-th in a row (the paper: every
   * wait above the average). On a busy host a task's requests wait now and then for no lack of
   * prefetching (its connection's thread or the worker did not get a core in time); growing on
   * each such lone wait raises the limit in bursts, and a limit that has grown stays up for at
   * least the run of quiet requests it takes to shrink it. A reader that lacks prefetching
   * waits on request after request, so it still grows on every one after the first.
   */
  public ElasticLimit growingAfterWaits(int n) {
    this.waitsToGrow = Math.max(1, n);
    return this;
  }

  /**
   * Continues a run of {@code n} requests that waited (carried over from an earlier task, see
   * {@link #waitRun}).
   */
  public ElasticLimit withWaitRun(int n) {
    this.waited = Math.max(0, n);
    return this;
  }

  /** Requests read in a row that waited (any wait, above the average or not). */
  public int waitRun() {
    return waited;
  }

  /**
   * Continues a run of {@code n} requests read without a wait (carried over from an earlier
   * task, see {@link #quietRun}).
   */
  public ElasticLimit withQuietRun(int n) {
    this.quiet = Math.max(0, n);
    return this;
  }

  /**
   * Requests read in a row without a wait since the last wait or shrink (0 unless {@link
   * #shrinkingAfterQuiet}).
   */
  public int quietRun() {
    return quietToShrink == 0 ? 0 : quiet;
  }

  /** The limit now. */
  public long soft() {
    return soft;
  }

  public long hard() {
    return hard;
  }

  public long increment() {
    return increment;
  }

  /** Times the limit grew by an increment (at the hard limit, where it cannot, not counted). */
  public long grown() {
    return grown;
  }

  /** Times the limit shrank by an increment (a squeeze is not counted). */
  public long shrunk() {
    return shrunk;
  }

  /** The average wait so far, in ns; negative before there is one. */
  public double averageWaitNanos() {
    return hasAverage ? avgWaitNanos : -1;
  }

  /** The task read a request to its end, after waiting {@code waitNanos} in all for it. */
  public void consumed(long waitNanos) {
    if (skipFirst) {
      skipFirst = false;
      return;
    }
    if (!hasAverage) {
      hasAverage = true;
      avgWaitNanos = waitNanos;
      return;
    }
    waited = waitNanos > 0 ? waited + 1 : 0;
    boolean shrink;
    if (quietToShrink == 0) {
      shrink = waitNanos <= avgWaitNanos;
    } else {
      quiet = waitNanos > 0 ? 0 : quiet + 1;
      shrink = quiet >= quietToShrink;
    }
    if (waitNanos > avgWaitNanos && waited >= waitsToGrow) {
      if (soft < hard) {
        soft = Math.min(hard, soft + increment);
        grown++;
      }
    } else if (shrink && soft - increment >= floor) {
      soft -= increment;
      shrunk++;
      quiet = 0;
    }
    avgWaitNanos += alpha * (waitNanos - avgWaitNanos);
  }

  /** Gives up {@code bytes} of the limit that memory could not be had for. */
  public void squeeze(long bytes) {
    soft = Math.max(floor, Math.min(soft, bytes));
  }
}
