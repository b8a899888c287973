package org.crossdock.protocol;

/**
 * Attempt ids: which run of a map task wrote a batch or a commit (a {@code u32} on the wire, an
 * {@code int} here; the Rust side is crates/proto/src/attempt.rs).
 *
 * <p>An id is {@code (stageAttempt << 16) | (taskAttempt & 0xffff)}: unique across the retries
 * and speculative copies of a task (the task attempt) and across stage retries (the stage
 * attempt), which restart the task attempt at 0. Within a <i>generation</i> (the stage attempt,
 * the high 16 bits) the first attempt to commit wins and the others are ignored; a commit of a
 * later generation (a rerun of the whole stage) replaces the earlier one. No attempt gets {@link
 * #NO_ATTEMPT}.
 */
public final class AttemptIds {
  /** No attempt: a map not committed (in ShuffleStatus), reserved otherwise. 0xffffffff as u32. */
  public static final int NO_ATTEMPT = -1;

  private AttemptIds() {}

  /** The attempt {@code taskAttempt} of a task in stage attempt {@code stageAttempt}. */
  public static int of(int stageAttempt, int taskAttempt) {
    return (stageAttempt << 16) | (taskAttempt & 0xffff);
  }

  /** The stage attempt an attempt id belongs to. */
  public static int generation(int attemptId) {
    return attemptId >>> 16;
  }
}
