package org.crossdock.client.fetch;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.crossdock.client.CrossdockException;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.Checksums;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.Structures;

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
  /**
   * Each map's committed attempt, by map id, when the read takes stored records ({@code
   * FetchRecords}: sent by the worker from its files unread, so checked here against these);
   * null: it does not.
   */
  private int[] recordAttempts;
  /** Its requests ask for stored records: until one fails the checks ({@link #dropRecords}). */
  boolean takeRecords;
  /** Batches received as stored records. */
  long storedRecords;
  /** (map, sequence, CRC) of a batch delivered. */
  private record Delivered(int mapId, int batchSeq, int crc32c) {}
  /** Where the current request began: the resume point it was sent with. */
  private Message.ResumePoint requestStart;
  /** The batches the current request delivered while it took stored records. */
  private ArrayDeque<Delivered> fromRecords = new ArrayDeque<>();
  /**
   * After a fallback from stored records: the batches the checked read must send first, as they
   * were delivered (not delivered again).
   */
  private ArrayDeque<Delivered> redelivered = new ArrayDeque<>();
  /** Payload bytes of the current request's batches that were delivered before (not again). */
  long redeliveredBytes;

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
  /**
   * The next transport failure's retry is free: a fallback from stored records, or a
   * connection taken idle that had died ({@link #staleRetried}).
   */
  boolean freeRetry;
  /**
   * A free retry was granted for a connection taken idle that failed, and nothing arrived
   * since: the next such failure costs a retry (a request that breaks every connection it is
   * sent on must not go on for free on connections other tasks keep giving back).
   */
  boolean staleRetried;
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
    this.requestStart = resume;
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

  /**
   * Takes batches as the worker stores them ({@code FetchRecords}), which a worker sends from its
   * files without reading them; {@code mapAttempts} holds each map's committed attempt by map id
   * (the shuffle status's {@code map_attempts}), against which every record is checked. Null
   * leaves the segment reading checked chunks only, and so does a capped run ({@link #runBytes}):
   * its next request would start after the last batch of the one before, a record whose map and
   * sequence number nothing checked (they are outside its CRC). Returns this segment.
   */
  public Segment acceptingRecords(int[] mapAttempts) {
    recordAttempts = mapAttempts;
    takeRecords = mapAttempts != null && runBytes == 0;
    return this;
  }

  /** Whether its requests still ask for stored records. */
  public boolean takesRecords() {
    return takeRecords;
  }

  /** Batches of it received as stored records so far. */
  public long storedRecords() {
    return storedRecords;
  }

  /**
   * Stops asking for stored records (one failed the checks, or the stream of them broke): the
   * next request asks the worker's checked read from where the current one began, not from the
   * last batch, since a record's map and sequence number are not covered by its CRC and a
   * damaged one could point the resume past batches never received; what the current request
   * delivered must come again first, the same (map, sequence, CRC), and is not delivered twice.
   * Returns whether it was asking.
   */
  boolean dropRecords() {
    if (!takeRecords) {
      return false;
    }

    takeRecords = false;
    resume = requestStart;
    redelivered = fromRecords;
    fromRecords = new ArrayDeque<>();
    return true;
  }

  /** Whether the current request delivered batches from stored records. */
  boolean deliveredRecords() {
    return !fromRecords.isEmpty();
  }

  /** The request that reads what is left of it. */
  Message.Fetch request(String appId, int shuffleId) {
    requestStart = resume;
    fromRecords.clear();
    redeliveredBytes = 0;
    return new Message.Fetch(appId, shuffleId, partition, startMap, endMap, resume,
        runBytes > 0 ? java.util.OptionalLong.of(runBytes) : java.util.OptionalLong.empty(),
        endBatch > 0 ? java.util.OptionalInt.of(endBatch) : java.util.OptionalInt.empty(),
        expectedAttempt != AttemptIds.NO_ATTEMPT ? java.util.OptionalInt.of(expectedAttempt)
            : java.util.OptionalInt.empty(),
        takeRecords ? java.util.OptionalInt.of(Structures.StoredBatch.FETCH_RECORDS)
            : java.util.OptionalInt.empty());
  }

  /**
   * Whether everything was received: the last request ended, and (for a capped run) it brought
   * fewer than {@code runBytes}, which the worker only does at the run's end.
   */
  boolean readToEnd() {
    return done
        && (pastEnd || runBytes == 0 || received - receivedAtRequest + redeliveredBytes < runBytes);
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
    // Counted as it goes: a batch that fails leaves the ones before it received.
    for (Message.FetchedBatch b : batches) {
      bytes += acceptOne(addr, b);
    }
    return bytes;
  }

  /** {@link #accept} for one batch. */
  private long acceptOne(String addr, Message.FetchedBatch b) throws CrossdockException {
    check(addr, partition, resume, b);
    if (!redelivered.isEmpty()) {
      Delivered want = redelivered.peek();
      if (b.mapId() != want.mapId() || b.batchSeq() != want.batchSeq()
          || b.crc32c() != want.crc32c()) {
        throw CrossdockException.corrupt(addr, "the checked read sent (map "
            + Integer.toUnsignedString(b.mapId()) + ", seq " + Integer.toUnsignedString(b.batchSeq())
            + ") where a stored record had delivered (map " + Integer.toUnsignedString(want.mapId())
            + ", seq " + Integer.toUnsignedString(want.batchSeq())
            + "): the data already delivered was not the partition's");
      }
      redelivered.poll();
      resume = new Message.ResumePoint(b.mapId(), b.batchSeq());
      batchesInStream++;
      redeliveredBytes += b.payload().remaining();
      return 0;
    }
    if (endBatch > 0 && Integer.compareUnsigned(b.batchSeq(), endBatch) >= 0) {
      // A worker that predates end_batch_seq sends the map's later runs too: they are not
      // this run's, and the run is read to its end.
      batchesInStream++;
      pastEnd = true;
      return 0;
    }
    resume = new Message.ResumePoint(b.mapId(), b.batchSeq());
    batchesInStream++;
    long n = b.payload().remaining();
    received += n;
    if (takeRecords) {
      // What a fallback from stored records must see again, same (map, seq, CRC).
      fromRecords.add(new Delivered(b.mapId(), b.batchSeq(), b.crc32c()));
    }
    ready.add(b);
    return n;
  }

  /**
   * Checks received stored records and queues their batches: what only a record needs (its map
   * is in the range, its attempt is the committed one: its CRC covers the payload alone, and the
   * worker checked nothing), then what every batch needs ({@link #acceptOne}). Returns their payload
   * bytes. A record that fails leaves the ones before it queued.
   */
  long acceptRecords(String addr, List<Structures.StoredBatch> records) throws CrossdockException {
    long bytes = 0;
    for (Structures.StoredBatch r : records) {
      if (!takeRecords) {
        throw CrossdockException.protocol(addr, "stored records to a fetch that did not ask for"
            + " them", null);
      }
      if (Integer.compareUnsigned(r.mapId(), startMap) < 0
          || Integer.compareUnsigned(r.mapId(), endMap) >= 0) {
        throw CrossdockException.corrupt(addr, "record (map " + Integer.toUnsignedString(r.mapId())
            + ", seq " + Integer.toUnsignedString(r.batchSeq()) + ") is outside maps [" + startMap
            + ", " + endMap + ")");
      }
      if (endBatch > 0 && Integer.compareUnsigned(r.batchSeq(), endBatch) >= 0) {
        // A worker that sends records knows end_batch_seq: a record past it is damaged.
        throw CrossdockException.corrupt(addr, "record (map " + Integer.toUnsignedString(r.mapId())
            + ", seq " + Integer.toUnsignedString(r.batchSeq()) + ") is past the run's end "
            + Integer.toUnsignedString(endBatch));
      }
      int committed = expectedAttempt != AttemptIds.NO_ATTEMPT ? expectedAttempt
          : r.mapId() < recordAttempts.length ? recordAttempts[r.mapId()] : AttemptIds.NO_ATTEMPT;
      if (committed == AttemptIds.NO_ATTEMPT || r.attemptId() != committed) {
        throw CrossdockException.corrupt(addr, "record (map " + Integer.toUnsignedString(r.mapId())
            + ", seq " + Integer.toUnsignedString(r.batchSeq()) + ") is of attempt "
            + Integer.toUnsignedString(r.attemptId()) + ", not the committed "
            + (committed == AttemptIds.NO_ATTEMPT ? "(none known)"
                : Integer.toUnsignedString(committed)));
      }
      bytes += acceptOne(addr, r.toFetched());
      storedRecords++;
    }
    return bytes;
  }

  /** Checks the stream's end against what arrived. */
  void end(String addr, Message.FetchEnd e) throws CrossdockException {
    if (!redelivered.isEmpty()) {
      Delivered want = redelivered.peek();
      throw CrossdockException.corrupt(addr, "the checked read ended before (map "
          + Integer.toUnsignedString(want.mapId()) + ", seq "
          + Integer.toUnsignedString(want.batchSeq()) + "), which a stored record had delivered");
    }
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
