package org.crossdock.protocol;

import java.nio.ByteBuffer;
import java.util.List;
import org.crossdock.protocol.Wire.Encodable;
import org.crossdock.protocol.Wire.Reader;
import org.crossdock.protocol.Wire.Writer;

/**
 * Every message of protocol version 2 (docs/protocol.md, "Messages"). Integers the protocol
 * defines as {@code u32} are held in Java {@code int}s and are unsigned (use {@link
 * Integer#toUnsignedLong}); {@code u64} in {@code long}s. Payloads are read-only {@link
 * ByteBuffer} views, never copied by the decoder.
 *
 * <p>Each message and each structure inside a body ({@link Structures}, inherited as members
 * of this interface, as the kind bytes of {@link Kinds} are) is declared once: its fields, its {@code encode} (the fields in wire
 * order) and its static {@code decode} (the same order) stand together, as in Spark's {@code
 * network-common} messages and as the Rust declaration in crates/proto/src/message.rs. {@link
 * Codec} adds the framing and maps each kind byte to its decoder. Decoders ignore bytes after
 * the last known field. The messages between the coordinator and the workers alone are declared
 * in {@link ClusterMessages} (inherited as members here, so they are named {@code
 * Message.Heartbeat} like the rest).
 */
public sealed interface Message extends Encodable, Structures, Kinds, ClusterMessages
    permits Message.Ok, Message.Error, Message.Hello, Message.Challenge, Message.Authenticate,
        Message.AppRegistered, Message.RegisterApp, Message.RenewLease, Message.UnregisterApp,
        Message.RegisterShuffle, Message.ShufflePlacement, Message.CommitMap, Message.CommitResult,
        Message.UnregisterShuffle, Message.GetShuffleStatus, Message.ShuffleStatus,
        Message.SplitPartition, Message.PartitionSplit, Message.PushRedirect,
        Message.ReportWorkerFailure, Message.ReportLostCopy, Message.PushBatch, Message.Fetch,
        Message.FetchChunk, Message.FetchRecords, Message.FetchEnd, Message.GetWorkerStats,
        Message.WorkerStats, ClusterMessages.RegisterWorker, ClusterMessages.WorkerRegistered,
        ClusterMessages.Heartbeat, ClusterMessages.PrepareShuffle, ClusterMessages.MapCommitted,
        ClusterMessages.DeleteShuffle, ClusterMessages.DeleteApp, ClusterMessages.SyncCommits,
        ClusterMessages.CheckCopies, ClusterMessages.CopiesHeld {
  /** The message's kind byte. */
  int kind();

  /** Appends the message's body: its fields in wire order. */
  @Override
  void encode(Writer w);


  /** Worker id meaning "none" (a partition without a replica). */
  int NO_WORKER = -1;

  // ---- messages ----

  record Ok() implements Message {
    public int kind() {
      return KIND_OK;
    }

    public void encode(Writer w) {}

    public static Ok decode(Reader r) {
      return new Ok();
    }
  }

  /** {@code code} is kept raw so a code newer than this build still reaches the caller. */
  record Error(int code, String message) implements Message {
    public int kind() {
      return KIND_ERROR;
    }

    /** The known code, or null. */
    public ErrorCode errorCode() {
      return ErrorCode.fromCode(code);
    }

    public void encode(Writer w) {
      w.u16(code);
      w.str(message);
    }

    public static Error decode(Reader r) throws ProtocolException {
      return new Error(r.u16("code"), r.str("message"));
    }
  }

  /** Asks for the connection's challenge (docs/security.md). */
  record Hello() implements Message {
    public int kind() {
      return KIND_HELLO;
    }

    public void encode(Writer w) {}

    public static Hello decode(Reader r) {
      return new Hello();
    }
  }

  /** The connection's nonce: the rest of the body. */
  record Challenge(ByteBuffer nonce) implements Message {
    public int kind() {
      return KIND_CHALLENGE;
    }

    public void encode(Writer w) {
      w.bytes(nonce);
    }

    public static Challenge decode(Reader r) {
      return new Challenge(r.rest());
    }
  }

  /** A proof of {@code appId}'s token (of the cluster secret when empty); see {@link Auth}. */
  record Authenticate(String appId, ByteBuffer proof) implements Message {
    public int kind() {
      return KIND_AUTHENTICATE;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.bytes(proof);
    }

    public static Authenticate decode(Reader r) throws ProtocolException {
      return new Authenticate(r.str("app_id"), r.rest());
    }
  }

  /** The answer to RegisterApp: the app's token (empty when authentication is off). */
  record AppRegistered(ByteBuffer token) implements Message {
    public int kind() {
      return KIND_APP_REGISTERED;
    }

    public void encode(Writer w) {
      w.bytes(token);
    }

    public static AppRegistered decode(Reader r) {
      return new AppRegistered(r.rest());
    }
  }

  /**
   * Registers an app. The appended limits ask the workers to hold it to less than their
   * settings allow (0: no request); absent, as an older client sends it.
   */
  record RegisterApp(String appId, int leaseMs, java.util.OptionalLong storedQuota,
      java.util.OptionalLong memorySharePpm) implements Message {
    /** A registration asking for no limits of its own. */
    public RegisterApp(String appId, int leaseMs) {
      this(appId, leaseMs, java.util.OptionalLong.of(0), java.util.OptionalLong.of(0));
    }

    public int kind() {
      return KIND_REGISTER_APP;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(leaseMs);
      w.appendedU64(storedQuota);
      w.appendedU64(memorySharePpm);
    }

    public static RegisterApp decode(Reader r) throws ProtocolException {
      return new RegisterApp(r.str("app_id"), r.u32("lease_ms"), r.appendedU64("stored_quota"),
          r.appendedU64("memory_share_ppm"));
    }
  }

  record RenewLease(String appId) implements Message {
    public int kind() {
      return KIND_RENEW_LEASE;
    }

    public void encode(Writer w) {
      w.str(appId);
    }

    public static RenewLease decode(Reader r) throws ProtocolException {
      return new RenewLease(r.str("app_id"));
    }
  }

  record UnregisterApp(String appId) implements Message {
    public int kind() {
      return KIND_UNREGISTER_APP;
    }

    public void encode(Writer w) {
      w.str(appId);
    }

    public static UnregisterApp decode(Reader r) throws ProtocolException {
      return new UnregisterApp(r.str("app_id"));
    }
  }

  /**
   * {@code sampleInputs} and {@code sampleCounts} (appended; null when absent): a range
   * partitioner's sample of the map stage's input, one entry per input partition, and where
   * its sampled records go (non-zero counts, by input then partition).
   */
  record RegisterShuffle(String appId, int shuffleId, int numMaps, int numPartitions,
      List<InputSample> sampleInputs, List<SampleCount> sampleCounts) implements Message {
    /** A registration without a sample. */
    public RegisterShuffle(String appId, int shuffleId, int numMaps, int numPartitions) {
      this(appId, shuffleId, numMaps, numPartitions, null, null);
    }

    public int kind() {
      return KIND_REGISTER_SHUFFLE;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(numMaps);
      w.u32(numPartitions);
      if (sampleInputs != null || sampleCounts != null) {
        w.list(sampleInputs == null ? List.of() : sampleInputs);
      }
      if (sampleCounts != null) {
        w.list(sampleCounts);
      }
    }

    public static RegisterShuffle decode(Reader r) throws ProtocolException {
      String app = r.str("app_id");
      int shuffle = r.u32("shuffle_id");
      int maps = r.u32("num_maps");
      int partitions = r.u32("num_partitions");
      List<InputSample> inputs = r.remaining() == 0 ? null
          : r.list(InputSample.MIN_LEN, "sample_inputs", InputSample::decode);
      List<SampleCount> counts = r.remaining() == 0 ? null
          : r.list(SampleCount.MIN_LEN, "sample_counts", SampleCount::decode);
      return new RegisterShuffle(app, shuffle, maps, partitions, inputs, counts);
    }
  }

  /** Replica ids are {@link #NO_WORKER} where a partition has none. */
  record ShufflePlacement(List<WorkerInfo> workers, int[] partitionWorkers, int[] partitionReplicas)
      implements Message {
    public int kind() {
      return KIND_SHUFFLE_PLACEMENT;
    }

    public void encode(Writer w) {
      w.list(workers);
      w.u32List(partitionWorkers);
      w.u32List(partitionReplicas);
    }

    public static ShufflePlacement decode(Reader r) throws ProtocolException {
      return new ShufflePlacement(WorkerInfo.decodeList(r), r.u32List("partition_workers"),
          r.u32List("partition_replicas"));
    }
  }

  /**
   * {@code runStarts} (appended; null when absent): where the attempt's further sorted runs
   * begin, in increasing (partition, batch) order.
   */
  record CommitMap(String appId, int shuffleId, int mapId, int attemptId,
      List<PartitionStat> partitions, List<RunStart> runStarts) implements Message {
    /** A commit of one run per partition. */
    public CommitMap(String appId, int shuffleId, int mapId, int attemptId,
        List<PartitionStat> partitions) {
      this(appId, shuffleId, mapId, attemptId, partitions, null);
    }

    public int kind() {
      return KIND_COMMIT_MAP;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(mapId);
      w.u32(attemptId);
      w.list(partitions);
      if (runStarts != null) {
        w.list(runStarts);
      }
    }

    public static CommitMap decode(Reader r) throws ProtocolException {
      return new CommitMap(r.str("app_id"), r.u32("shuffle_id"), r.u32("map_id"),
          r.u32("attempt_id"), r.list(PartitionStat.MIN_LEN, "partitions", PartitionStat::decode),
          r.remaining() == 0 ? null : r.list(RunStart.MIN_LEN, "run_starts", RunStart::decode));
    }
  }

  record CommitResult(CommitStatus status, int winningAttempt) implements Message {
    public int kind() {
      return KIND_COMMIT_RESULT;
    }

    public void encode(Writer w) {
      status.encode(w);
      w.u32(winningAttempt);
    }

    public static CommitResult decode(Reader r) throws ProtocolException {
      return new CommitResult(CommitStatus.decode(r), r.u32("winning_attempt"));
    }
  }

  record UnregisterShuffle(String appId, int shuffleId) implements Message {
    public int kind() {
      return KIND_UNREGISTER_SHUFFLE;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
    }

    public static UnregisterShuffle decode(Reader r) throws ProtocolException {
      return new UnregisterShuffle(r.str("app_id"), r.u32("shuffle_id"));
    }
  }

  /** {@code runsFrom}, {@code runsTo} (appended): the partitions whose run starts to list. */
  record GetShuffleStatus(String appId, int shuffleId, java.util.OptionalInt runsFrom,
      java.util.OptionalInt runsTo) implements Message {
    /** The status without run starts. */
    public GetShuffleStatus(String appId, int shuffleId) {
      this(appId, shuffleId, java.util.OptionalInt.empty(), java.util.OptionalInt.empty());
    }

    public int kind() {
      return KIND_GET_SHUFFLE_STATUS;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.appendedU32(runsTo.isPresent() && runsFrom.isEmpty() ? java.util.OptionalInt.of(0)
          : runsFrom);
      w.appendedU32(runsTo);
    }

    public static GetShuffleStatus decode(Reader r) throws ProtocolException {
      return new GetShuffleStatus(r.str("app_id"), r.u32("shuffle_id"), r.appendedU32("runs_from"),
          r.appendedU32("runs_to"));
    }
  }

  /**
   * {@code mapAttempts} holds {@link AttemptIds#NO_ATTEMPT} for a map not committed. The
   * per-partition lists cover every slot: the partitions, then their splits; {@code
   * splitParents} (appended; null when absent) gives the partition of each split slot, from
   * {@code numPartitions} on. {@code runCount} (appended) counts the run starts of the whole
   * shuffle; {@code runStarts} (appended; null when absent) lists those asked for.
   */
  record ShuffleStatus(int numMaps, int numPartitions, int committedMaps, List<WorkerInfo> workers,
      int[] partitionWorkers, int[] mapAttempts, long[] partitionBytes, long[] partitionRecords,
      int[] partitionReplicas, int[] splitParents, java.util.OptionalLong runCount,
      List<MapRunStart> runStarts) implements Message {
    public int kind() {
      return KIND_SHUFFLE_STATUS;
    }

    public void encode(Writer w) {
      w.u32(numMaps);
      w.u32(numPartitions);
      w.u32(committedMaps);
      w.list(workers);
      w.u32List(partitionWorkers);
      w.u32List(mapAttempts);
      w.u64List(partitionBytes);
      w.u64List(partitionRecords);
      w.u32List(partitionReplicas);
      // An appended field is written with every one before it.
      boolean runs = runCount.isPresent() || runStarts != null;
      if (splitParents != null || runs) {
        w.u32List(splitParents != null ? splitParents : new int[0]);
      }
      if (runs) {
        w.u64(runCount.orElse(0));
      }
      if (runStarts != null) {
        w.list(runStarts);
      }
    }

    public static ShuffleStatus decode(Reader r) throws ProtocolException {
      return new ShuffleStatus(r.u32("num_maps"), r.u32("num_partitions"), r.u32("committed_maps"),
          WorkerInfo.decodeList(r), r.u32List("partition_workers"), r.u32List("map_attempts"),
          r.u64List("partition_bytes"), r.u64List("partition_records"),
          r.u32List("partition_replicas"),
          r.remaining() == 0 ? null : r.u32List("split_parents"), r.appendedU64("run_count"),
          r.remaining() == 0 ? null
              : r.list(MapRunStart.MIN_LEN, "run_starts", MapRunStart::decode));
    }
  }

  /** A worker asks the coordinator for the split continuing {@code slot} (cluster only). */
  record SplitPartition(String appId, int shuffleId, int slot) implements Message {
    public int kind() {
      return KIND_SPLIT_PARTITION;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(slot);
    }

    public static SplitPartition decode(Reader r) throws ProtocolException {
      return new SplitPartition(r.str("app_id"), r.u32("shuffle_id"), r.u32("slot"));
    }
  }

  /** The answer to SplitPartition: the split's slot and its primary's address. */
  record PartitionSplit(int slot, String addr) implements Message {
    public int kind() {
      return KIND_PARTITION_SPLIT;
    }

    public void encode(Writer w) {
      w.u32(slot);
      w.str(addr);
    }

    public static PartitionSplit decode(Reader r) throws ProtocolException {
      return new PartitionSplit(r.u32("slot"), r.str("addr"));
    }
  }

  /**
   * A push's answer once its partition was split: the batch is stored; the map's next batches
   * of the partition go to {@code slot} on the worker at {@code addr}.
   */
  record PushRedirect(int slot, String addr) implements Message {
    public int kind() {
      return KIND_PUSH_REDIRECT;
    }

    public void encode(Writer w) {
      w.u32(slot);
      w.str(addr);
    }

    public static PushRedirect decode(Reader r) throws ProtocolException {
      return new PushRedirect(r.u32("slot"), r.str("addr"));
    }
  }

  record ReportWorkerFailure(String addr) implements Message {
    public int kind() {
      return KIND_REPORT_WORKER_FAILURE;
    }

    public void encode(Writer w) {
      w.str(addr);
    }

    public static ReportWorkerFailure decode(Reader r) throws ProtocolException {
      return new ReportWorkerFailure(r.str("addr"));
    }
  }

  record ReportLostCopy(String appId, int shuffleId, int partition, String workerAddr)
      implements Message {
    public int kind() {
      return KIND_REPORT_LOST_COPY;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(partition);
      w.str(workerAddr);
    }

    public static ReportLostCopy decode(Reader r) throws ProtocolException {
      return new ReportLostCopy(
          r.str("app_id"), r.u32("shuffle_id"), r.u32("partition"), r.str("worker_addr"));
    }
  }

  /** The payload is everything after the header (see {@link Codec#encodePushPrefix}). */
  record PushBatch(PushHeader header, ByteBuffer payload) implements Message {
    public int kind() {
      return KIND_PUSH_BATCH;
    }

    public void encode(Writer w) {
      header.encode(w);
      w.bytes(payload);
    }

    public static PushBatch decode(Reader r) throws ProtocolException {
      return new PushBatch(PushHeader.decode(r), r.rest());
    }
  }

  /**
   * {@code resumeAfter} is null for a fresh fetch; on the wire it is {@code bool has_resume}.
   * Appended: {@code runBytes}, a merging reader's per-map segment size (empty or 0 for all);
   * {@code endBatchSeq}, where one run of a map's several ends (empty or 0 for none);
   * {@code expectedAttempt}, the attempt every map of the range must have committed (the one
   * whose run starts the reader holds; a worker with another answers {@code commit_mismatch};
   * empty or {@link AttemptIds#NO_ATTEMPT}: whichever is committed); {@code flags}, bit
   * {@link StoredBatch#FETCH_RECORDS}: the reader also takes {@link FetchRecords}.
   */
  record Fetch(String appId, int shuffleId, int partition, int startMap, int endMap,
      ResumePoint resumeAfter, java.util.OptionalLong runBytes, java.util.OptionalInt endBatchSeq,
      java.util.OptionalInt expectedAttempt, java.util.OptionalInt flags) implements Message {
    public int kind() {
      return KIND_FETCH;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(partition);
      w.u32(startMap);
      w.u32(endMap);
      w.bool(resumeAfter != null);
      if (resumeAfter != null) {
        resumeAfter.encode(w);
      }
      // An appended field is sent with every one before it (filled with their "nothing":
      // 0 for no cap and no end, NO_ATTEMPT for whichever attempt is committed).
      boolean afterAttempt = flags.isPresent();
      boolean later = afterAttempt || expectedAttempt.isPresent();
      boolean laterThanCap = later || endBatchSeq.isPresent();
      w.appendedU64(laterThanCap && runBytes.isEmpty() ? java.util.OptionalLong.of(0) : runBytes);
      w.appendedU32(later && endBatchSeq.isEmpty() ? java.util.OptionalInt.of(0) : endBatchSeq);
      w.appendedU32(afterAttempt && expectedAttempt.isEmpty()
          ? java.util.OptionalInt.of(AttemptIds.NO_ATTEMPT) : expectedAttempt);
      w.appendedU32(flags);
    }

    public static Fetch decode(Reader r) throws ProtocolException {
      return new Fetch(r.str("app_id"), r.u32("shuffle_id"), r.u32("partition"),
          r.u32("start_map"), r.u32("end_map"),
          r.bool("has_resume") ? ResumePoint.decode(r) : null, r.appendedU64("run_bytes"),
          r.appendedU32("end_batch_seq"), r.appendedU32("expected_attempt"),
          r.appendedU32("flags"));
    }
  }

  record FetchChunk(List<FetchedBatch> batches) implements Message {
    public int kind() {
      return KIND_FETCH_CHUNK;
    }

    public void encode(Writer w) {
      w.list(batches);
    }

    public static FetchChunk decode(Reader r) throws ProtocolException {
      return new FetchChunk(r.list(FetchedBatch.MIN_LEN, "batches", FetchedBatch::decode));
    }
  }

  /** Batches as the worker stores them; only to a {@link Fetch} that set FETCH_RECORDS. */
  record FetchRecords(List<StoredBatch> batches) implements Message {
    public int kind() {
      return KIND_FETCH_RECORDS;
    }

    public void encode(Writer w) {
      w.list(batches);
    }

    public static FetchRecords decode(Reader r) throws ProtocolException {
      return new FetchRecords(r.list(StoredBatch.HEADER_LEN, "batches", StoredBatch::decode));
    }
  }

  record FetchEnd(long batches, long bytes) implements Message {
    public int kind() {
      return KIND_FETCH_END;
    }

    public void encode(Writer w) {
      w.u64(batches);
      w.u64(bytes);
    }

    public static FetchEnd decode(Reader r) throws ProtocolException {
      return new FetchEnd(r.u64("batches"), r.u64("bytes"));
    }
  }

  record GetWorkerStats() implements Message {
    public int kind() {
      return KIND_GET_WORKER_STATS;
    }

    public void encode(Writer w) {}

    public static GetWorkerStats decode(Reader r) {
      return new GetWorkerStats();
    }
  }

  record WorkerStats(int workerId, long budgetBytes, long bufferedBytes, long peakBufferedBytes,
      long storedBytes, long peakRssBytes, long processBudgetBytes) implements Message {
    public int kind() {
      return KIND_WORKER_STATS;
    }

    public void encode(Writer w) {
      w.u32(workerId);
      w.u64(budgetBytes);
      w.u64(bufferedBytes);
      w.u64(peakBufferedBytes);
      w.u64(storedBytes);
      w.u64(peakRssBytes);
      w.u64(processBudgetBytes);
    }

    public static WorkerStats decode(Reader r) throws ProtocolException {
      return new WorkerStats(r.u32("worker_id"), r.u64("budget_bytes"), r.u64("buffered_bytes"),
          r.u64("peak_buffered_bytes"), r.u64("stored_bytes"), r.u64("peak_rss_bytes"),
          r.u64("process_budget_bytes"));
    }
  }
}
