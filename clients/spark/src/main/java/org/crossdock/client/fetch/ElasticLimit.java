package org.crossdock.client.fetch;

/**
 * A reduce task's elastic in-flight limit (Nicolae et al., section 4.2.2, Algorithm 2): how
 * many bytes it may have asked for and not yet consumed. After each batch the task consumes, the
 * limit grows by one increment if the task waited longer for that batch than it does on average
 * (it reads faster than the data comes: ask for more at once), and shrinks by one increment
 * otherwise (the data is there before it is needed: buffer less). It never exceeds the hard
 * limit and never falls below its floor.
 *
 * <p>One quirk of the paper's pseudocode is mended: a wait above the average at the hard limit
 * keeps the limit (the printed code shrinks it). The paper leaves the average open: it is an
 * exponential moving average of weight {@code alpha}, as in {@code crates/policy}. Three
 * choices are the caller's: the floor (the paper's text says one increment, its code two; a
 * reader that asks for a new increment only when one fits under the limit needs two, one being
 * consumed while the next arrives, or it prefetches nothing), where the limit starts (the paper
 * starts at the hard limit, which makes every task's first burst as large as a static reader's:
 * the peak memory the paper wants to cut), and whether the first batch's wait, which measures
 * connecting rather than the flow of data, is left out. The decisions match {@code
 * crates/policy}'s on the shared vectors ({@code testdata/policy/adaptive_fetch.json}).
 */
public final class ElasticLimit {
  private final long hard;
  private final long increment;
  private final long floor;
  private final double alpha;
  private long soft;
  private boolean skipFirst;
  private boolean hasAverage;
  private double avgWaitNanos;

  /** The reader's average weight (the simulator's too). */
  public static final double ALPHA = 0.125;

  /**
   * A limit between {@code floor} (at least one increment) and {@code hard}, starting at {@code
   * initial}, averaging waits with weight {@code alpha}, leaving out the first wait if {@code
   * skipFirst}.
   */
  public ElasticLimit(long hard, long increment, long floor, long initial, double alpha,
      boolean skipFirst) {
    if (increment <= 0 || hard < increment) {
      throw new IllegalArgumentException(
          "in-flight limit " + hard + " must be at least its increment " + increment);
    }
    this.hard = hard;
    this.increment = increment;
    this.floor = Math.max(increment, Math.min(hard, floor));
    this.soft = Math.max(this.floor, Math.min(hard, initial));
    this.alpha = alpha;
    this.skipFirst = skipFirst;
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

  /** The task consumed a batch after waiting {@code waitNanos} for it. */
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
    if (waitNanos > avgWaitNanos) {
      soft = Math.min(hard, soft + increment);
    } else if (soft - increment >= floor) {
      soft -= increment;
    }
    avgWaitNanos += alpha * (waitNanos - avgWaitNanos);
  }

  /** Gives up {@code bytes} of the limit that memory could not be had for. */
  public void squeeze(long bytes) {
    soft = Math.max(floor, Math.min(soft, bytes));
  }
}
