package org.crossdock.client.fetch;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.crossdock.client.CrossdockException;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Checksums;
import org.crossdock.protocol.Message;

/**
 * One request of a reduce task's read: maps {@code [startMap, endMap)} of one partition, as one
 * {@code Fetch}. Its batches arrive in (map, sequence) order and are handed to the task in that
 * order; a request that breaks is asked again after its last batch ({@link #resume}), from the
 * same or another copy, so no batch is lost or read twice.
 *
 * <p>The state below is guarded by the {@link FetchScheduler}'s lock.
 */
public final class Segment {
  public final int partition;
  public final int startMap;
  public final int endMap;
  /** Bytes planned (from the map outputs' sizes); what the request counts in flight. */
  public final long estimate;
  /**
   * For one map's sorted run read by a merge ({@link RunReader}): the most payload bytes one
   * request asks for (the worker stops the run after the batch that reaches it); 0: all.
   */
  public final long runBytes;
  /**
   * For one run of a map's several (the map sorted its output in rounds and pushed each as a
   * run): the sequence number of the next run's first batch, where this one ends; 0: the map's
   * end.
   */
  public final int endBatch;
  /** For one run of a map's several: the sequence number of its first batch. */
  public final int firstBatch;
  /**
   * For one run of a map's several: the attempt whose commit listed the run starts, which the
   * worker must still hold committed (else it refuses rather than send another attempt's
   * batches between them); {@link AttemptIds#NO_ATTEMPT}: whichever is committed.
   */
  public final int expectedAttempt;
  /** Where it can be read, preferred first (primary, replica). */
  List<String> copies;

  /** The copy it is being read from; null while not issued. */
  String source;
  /** Batches received and not yet consumed. */
  final ArrayDeque<Message.FetchedBatch> ready = new ArrayDeque<>();
  /** After the last batch received: where a re-issued request starts. */
  Message.ResumePoint resume;
  /** Batches received in the current request (checked against its FetchEnd). */
  long batchesInStream;
  /** Payload bytes received since it was first issued. */
  long received;
  /** Payload bytes still counted in flight at the monitor for the current request. */
  long monitorInFlight;
  /** Bytes of memory held for it (acquired when issued, given back as it is consumed). */
  long reserved;
  /** Payload bytes received and not yet consumed. */
  long bufferedBytes;
  /** A batch of it was handed to the task: it is read to its end before another starts. */
  boolean started;
  /** The FetchEnd arrived: everything was received. */
  boolean done;
  /** A batch at or past {@link #endBatch} arrived (and was dropped): the run is read. */
  boolean pastEnd;
  /** The source gave up on it; the scheduler decides what next. */
  CrossdockException failure;
  /** Transport retries on the current source. */
  int retries;
  /** Copies given up on because they could not be reached. */
  final List<String> unreachable = new ArrayList<>();
  /**
   * Copies given up on because they refused a request of it in a way that lasts (lost or
   * corrupt data, a partition they do not hold, a batch that failed the client's checks:
   * {@link CopyReads#lasting}), or refused it more than the retry limit allows in a row: the
   * segment is not asked of them again until it is taken back with fresh copies.
   */
  final List<String> refusedBy = new ArrayList<>();
  /** Refusals that may clear up (limits, I/O), in a row without a batch received. */
  int refusals;
  /** How long the task was blocked on its batches so far (its wait, as the paper counts a block's). */
  long waitedNanos;
  /**
   * Of {@link #waitedNanos} (for a run: of the wait in progress), the part already charged to a
   * copy the read moved away from ({@link CopyReads#maybeMoveAway}); never more than it, as
   * every wait, however it ends, is counted in it.
   */
  long waitChargedNanos;
  /** When the current request was sent ({@link System#nanoTime}). */
  long sentNanos;
  /** {@link #received} when the current request was sent. */
  long receivedAtRequest;

  public Segment(int partition, int startMap, int endMap, long estimate, List<String> copies) {
    this(partition, startMap, endMap, estimate, copies, 0);
  }

  /** A segment whose requests each bring at most {@code runBytes} of every map (and one batch). */
  public Segment(int partition, int startMap, int endMap, long estimate, List<String> copies,
      long runBytes) {
    this(partition, startMap, endMap, estimate, copies, runBytes, 0, 0, AttemptIds.NO_ATTEMPT);
  }

  /**
   * One run of map {@code map}'s several, as attempt {@code attempt} committed them: its batches
   * from {@code firstBatch} to before {@code endBatch} (0: to the map's end), read {@code
   * runBytes} at a time.
   */
  public static Segment run(int partition, int map, int attempt, long estimate,
      List<String> copies, long runBytes, int firstBatch, int endBatch) {
    if (runBytes <= 0 || firstBatch < 0 || (endBatch != 0 && endBatch <= firstBatch)) {
      throw new IllegalArgumentException("no run of map " + map + " from batch " + firstBatch
          + " to " + endBatch + " capped at " + runBytes);
    }
    return new Segment(partition, map, map + 1, estimate, copies, runBytes, firstBatch, endBatch,
        attempt);
  }

  private Segment(int partition, int startMap, int endMap, long estimate, List<String> copies,
      long runBytes, int firstBatch, int endBatch, int expectedAttempt) {
    if (copies.isEmpty()) {
      throw new IllegalArgumentException("no copy of partition " + partition + " to read from");
    }
    if (runBytes > 0 && endMap - startMap != 1) {
      throw new IllegalArgumentException("a capped run is one map, not [" + startMap + ", "
          + endMap + ")");
    }
    this.partition = partition;
    this.startMap = startMap;
    this.endMap = endMap;
    this.estimate = Math.max(0, estimate);
    this.copies = List.copyOf(copies);
    this.runBytes = Math.max(0, runBytes);
    this.endBatch = endBatch;
    this.firstBatch = firstBatch;
    this.expectedAttempt = expectedAttempt;
    // A later run is read as if a read of the map had stopped after the batch before it.
    this.resume = firstBatch > 0 ? new Message.ResumePoint(startMap, firstBatch - 1) : null;
  }

  /**
   * For a run read as one attempt's ({@link #expectedAttempt}): how its map's output was
   * replaced in {@code attempts} (each map's committed attempt, from a fresh status), as
   * "map M's output was replaced (attempt A → B)"; null if it was not, or if the map has no
   * committed output now (a lost output, which readers report as such).
   */
  public String replacedIn(int[] attempts) {
    if (expectedAttempt == AttemptIds.NO_ATTEMPT || startMap >= attempts.length) {
      return null;
    }
    int now = attempts[startMap];
    if (now == expectedAttempt || now == AttemptIds.NO_ATTEMPT) {
      return null;
    }
    return "map " + startMap + "'s output was replaced (attempt "
        + Integer.toUnsignedString(expectedAttempt) + " → " + Integer.toUnsignedString(now) + ")";
  }

  /** The request that reads what is left of it. */
  Message.Fetch request(String appId, int shuffleId) {
    return new Message.Fetch(appId, shuffleId, partition, startMap, endMap, resume,
        runBytes > 0 ? java.util.OptionalLong.of(runBytes) : java.util.OptionalLong.empty(),
        endBatch > 0 ? java.util.OptionalInt.of(endBatch) : java.util.OptionalInt.empty(),
        expectedAttempt != AttemptIds.NO_ATTEMPT ? java.util.OptionalInt.of(expectedAttempt)
            : java.util.OptionalInt.empty(), java.util.OptionalInt.empty());
  }

  /**
   * Whether everything was received: the last request ended, and (for a capped run) it brought
   * fewer than {@code runBytes}, which the worker only does at the run's end.
   */
  boolean readToEnd() {
    return done && (pastEnd || runBytes == 0 || received - receivedAtRequest < runBytes);
  }

  /** Takes the segment back after it failed, to be read on from {@code copies}. */
  void takeBack(List<String> copies) {
    this.copies = List.copyOf(copies);
    failure = null;
    retries = 0;
    unreachable.clear();
    refusedBy.clear();
    refusals = 0;
  }

  /** The last batch received; null before any (for a later run: the batch before it). */
  public Message.ResumePoint resumePoint() {
    return resume;
  }

  /** Where it is read from now, or null. */
  public String source() {
    return source;
  }

  /**
   * Checks a received chunk's batches (order after the last one, CRC32C) and queues them.
   * Returns their payload bytes.
   */
  long accept(String addr, List<Message.FetchedBatch> batches) throws CrossdockException {
    long bytes = 0;
    for (Message.FetchedBatch b : batches) {
      check(addr, partition, resume, b);
      if (endBatch > 0 && Integer.compareUnsigned(b.batchSeq(), endBatch) >= 0) {
        // A worker that predates end_batch_seq sends the map's later runs too: they are not
        // this run's, and the run is read to its end.
        batchesInStream++;
        pastEnd = true;
        continue;
      }
      resume = new Message.ResumePoint(b.mapId(), b.batchSeq());
      batchesInStream++;
      bytes += b.payload().remaining();
      ready.add(b);
    }
    received += bytes;
    return bytes;
  }

  /** Checks the stream's end against what arrived. */
  void end(String addr, Message.FetchEnd e) throws CrossdockException {
    if (e.batches() != batchesInStream) {
      throw CrossdockException.corrupt(addr, "worker announced " + e.batches()
          + " batches but sent " + batchesInStream);
    }
    done = true;
  }

  /**
   * Checks one fetched batch: it comes after {@code last} in (map, sequence) order and its
   * payload matches its CRC32C.
   */
  public static void check(String addr, int partition, Message.ResumePoint last,
      Message.FetchedBatch b) throws CrossdockException {
    if (last != null
        && (Integer.compareUnsigned(b.mapId(), last.mapId()) < 0
            || (b.mapId() == last.mapId()
                && Integer.compareUnsigned(b.batchSeq(), last.batchSeq()) <= 0))) {
      throw CrossdockException.corrupt(addr, "batch (map " + b.mapId() + ", seq " + b.batchSeq()
          + ") is out of order after (map " + last.mapId() + ", seq " + last.batchSeq() + ")");
    }
    if (Checksums.crc32c(b.payload()) != b.crc32c()) {
      throw CrossdockException.corrupt(addr, "batch (map " + b.mapId() + ", seq " + b.batchSeq()
          + ") of partition " + partition + " failed its CRC32C");
    }
  }

  @Override
  public String toString() {
    String run = firstBatch > 0 || endBatch > 0
        ? " (the run from batch " + firstBatch + (endBatch > 0 ? " to " + endBatch : "") + ")"
        : "";
    return "partition " + partition + " maps [" + startMap + ", " + endMap + ")" + run;
  }
}
