package org.crossdock.client.fetch;

/**
 * A reduce task's elastic in-flight limit (Nicolae et al., section 4.2.2, Algorithm 2): how
 * many bytes it may have asked for and not yet consumed. After each batch the task consumes, the
 * limit grows by one increment if the task waited longer for that batch than it does on average
 * (it reads faster than the data comes: ask for more at once), and shrinks by one increment
 * otherwise (the data is there before it is needed: buffer less). It never exceeds the hard
 * limit and never falls below one increment.
 *
 * <p>Two quirks of the paper's pseudocode are mended, as its text describes: a wait above the
 * average at the hard limit keeps the limit (the printed code shrinks it), and the floor is one
 * increment (the printed guard gives two). Two choices are ours: the limit starts where the
 * caller says (the paper starts at the hard limit, which makes every task's first burst as large
 * as a static reader's: the peak memory the paper wants to cut), and the wait for a task's first
 * batch, which measures connecting rather than the flow of data, is left out of the average
 * (a running mean over the task's other batches).
 */
public final class ElasticLimit {
  private final long hard;
  private final long increment;
  private long soft;
  private long waits;
  private double avgWaitNanos;

  private boolean first = true;

  /** A limit between {@code increment} and {@code hard}, starting at {@code initial}. */
  public ElasticLimit(long hard, long increment, long initial) {
    if (increment <= 0 || hard < increment) {
      throw new IllegalArgumentException(
          "in-flight limit " + hard + " must be at least its increment " + increment);
    }
    this.hard = hard;
    this.increment = increment;
    this.soft = Math.max(increment, Math.min(hard, initial));
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
    if (first) {
      first = false;
      return;
    }
    if (waits > 0) {
      if (waitNanos > avgWaitNanos) {
        soft = Math.min(hard, soft + increment);
      } else if (soft - increment >= increment) {
        soft -= increment;
      }
    }
    waits++;
    avgWaitNanos += (waitNanos - avgWaitNanos) / waits;
  }

  /** Gives up {@code bytes} of the limit that memory could not be had for. */
  public void squeeze(long bytes) {
    soft = Math.max(increment, Math.min(soft, bytes));
  }
}
