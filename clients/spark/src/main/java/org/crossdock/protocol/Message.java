package org.crossdock.protocol;

import java.nio.ByteBuffer;
import java.util.List;

/**
 * Every message of protocol version 1 (docs/protocol.md, "Messages"). Integers the protocol
 * defines as {@code u32} are held in Java {@code int}s and are unsigned (use {@link
 * Integer#toUnsignedLong}); {@code u64} in {@code long}s. Payloads are read-only {@link
 * ByteBuffer} views, never copied by the decoder.
 */
public sealed interface Message {
  /** The message's kind byte. */
  int kind();

  int KIND_OK = 0x01;
  int KIND_ERROR = 0x02;
  int KIND_REGISTER_APP = 0x10;
  int KIND_RENEW_LEASE = 0x11;
  int KIND_UNREGISTER_APP = 0x12;
  int KIND_REGISTER_SHUFFLE = 0x13;
  int KIND_SHUFFLE_PLACEMENT = 0x14;
  int KIND_COMMIT_MAP = 0x15;
  int KIND_COMMIT_RESULT = 0x16;
  int KIND_UNREGISTER_SHUFFLE = 0x17;
  int KIND_GET_SHUFFLE_STATUS = 0x18;
  int KIND_SHUFFLE_STATUS = 0x19;
  int KIND_REPORT_WORKER_FAILURE = 0x1A;
  int KIND_REPORT_CORRUPTION = 0x1B;
  int KIND_REGISTER_WORKER = 0x20;
  int KIND_WORKER_REGISTERED = 0x21;
  int KIND_HEARTBEAT = 0x22;
  int KIND_PREPARE_SHUFFLE = 0x30;
  int KIND_MAP_COMMITTED = 0x31;
  int KIND_DELETE_SHUFFLE = 0x32;
  int KIND_DELETE_APP = 0x33;
  int KIND_SYNC_COMMITS = 0x34;
  int KIND_CHECK_COPIES = 0x35;
  int KIND_COPIES_HELD = 0x36;
  int KIND_PUSH_BATCH = 0x40;
  int KIND_FETCH = 0x41;
  int KIND_FETCH_CHUNK = 0x42;
  int KIND_FETCH_END = 0x43;
  int KIND_GET_WORKER_STATS = 0x44;
  int KIND_WORKER_STATS = 0x45;

  /** Attempt id meaning "not committed" in ShuffleStatus, reserved otherwise. */
  int NO_ATTEMPT = -1; // 4294967295 as u32

  // ---- records used inside bodies ----

  /** A worker as the coordinator describes it: {@code addr} is the data endpoint host:port. */
  record WorkerInfo(int id, String addr, boolean alive) implements java.io.Serializable {}

  record PartitionStat(int partition, long bytes, long records) {}

  record PartitionBytes(int partition, long bytes) {}

  enum CommitStatus {
    COMMITTED(0, "Committed"),
    ALREADY_COMMITTED(1, "AlreadyCommitted"),
    REJECTED(2, "Rejected");

    public final int wire;
    public final String jsonName;

    CommitStatus(int wire, String jsonName) {
      this.wire = wire;
      this.jsonName = jsonName;
    }

    public static CommitStatus fromWire(int v) {
      for (CommitStatus s : values()) {
        if (s.wire == v) {
          return s;
        }
      }
      return null;
    }
  }

  /** Routing header of a pushed batch; the payload follows it in the frame. */
  record PushHeader(
      String appId, int shuffleId, int partition, int mapId, int attemptId, int batchSeq, int crc32c) {}

  record FetchedBatch(int mapId, int batchSeq, int crc32c, ByteBuffer payload) {}

  record ResumePoint(int mapId, int batchSeq) {}

  // ---- messages ----

  record Ok() implements Message {
    public int kind() {
      return KIND_OK;
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
  }

  record RegisterApp(String appId, int leaseMs) implements Message {
    public int kind() {
      return KIND_REGISTER_APP;
    }
  }

  record RenewLease(String appId) implements Message {
    public int kind() {
      return KIND_RENEW_LEASE;
    }
  }

  record UnregisterApp(String appId) implements Message {
    public int kind() {
      return KIND_UNREGISTER_APP;
    }
  }

  record RegisterShuffle(String appId, int shuffleId, int numMaps, int numPartitions)
      implements Message {
    public int kind() {
      return KIND_REGISTER_SHUFFLE;
    }
  }

  /** Worker id meaning "none" (a partition without a replica). */
  int NO_WORKER = -1;

  record ShufflePlacement(List<WorkerInfo> workers, int[] partitionWorkers, int[] partitionReplicas)
      implements Message {
    public int kind() {
      return KIND_SHUFFLE_PLACEMENT;
    }
  }

  record CommitMap(
      String appId, int shuffleId, int mapId, int attemptId, List<PartitionStat> partitions)
      implements Message {
    public int kind() {
      return KIND_COMMIT_MAP;
    }
  }

  record CommitResult(CommitStatus status, int winningAttempt) implements Message {
    public int kind() {
      return KIND_COMMIT_RESULT;
    }
  }

  record UnregisterShuffle(String appId, int shuffleId) implements Message {
    public int kind() {
      return KIND_UNREGISTER_SHUFFLE;
    }
  }

  record GetShuffleStatus(String appId, int shuffleId) implements Message {
    public int kind() {
      return KIND_GET_SHUFFLE_STATUS;
    }
  }

  record ShuffleStatus(
      int numMaps,
      int numPartitions,
      int committedMaps,
      List<WorkerInfo> workers,
      int[] partitionWorkers,
      int[] mapAttempts,
      long[] partitionBytes,
      long[] partitionRecords,
      int[] partitionReplicas)
      implements Message {
    public int kind() {
      return KIND_SHUFFLE_STATUS;
    }
  }

  /** With {@code adopt}, the worker first restores the partitions from its object store. */
  record CheckCopies(
      String appId,
      int shuffleId,
      int[] mapAttempts,
      int[] partitions,
      long[] expectedBytes,
      boolean adopt)
      implements Message {
    public int kind() {
      return KIND_CHECK_COPIES;
    }
  }

  record CopiesHeld(int[] partitions) implements Message {
    public int kind() {
      return KIND_COPIES_HELD;
    }
  }

  record SyncCommits(String appId, int shuffleId, int[] mapAttempts) implements Message {
    public int kind() {
      return KIND_SYNC_COMMITS;
    }
  }

  record ReportCorruption(String appId, int shuffleId, int partition, String workerAddr)
      implements Message {
    public int kind() {
      return KIND_REPORT_CORRUPTION;
    }
  }

  record ReportWorkerFailure(String addr) implements Message {
    public int kind() {
      return KIND_REPORT_WORKER_FAILURE;
    }
  }

  record RegisterWorker(String addr, long memoryBudget, long incarnation) implements Message {
    public int kind() {
      return KIND_REGISTER_WORKER;
    }
  }

  record WorkerRegistered(int workerId, int heartbeatMs) implements Message {
    public int kind() {
      return KIND_WORKER_REGISTERED;
    }
  }

  record Heartbeat(int workerId, long bufferedBytes, long storedBytes, boolean diskFull)
      implements Message {
    public int kind() {
      return KIND_HEARTBEAT;
    }
  }

  record PrepareShuffle(
      String appId,
      int shuffleId,
      int numMaps,
      int numPartitions,
      int[] partitions,
      List<String> forwardTo)
      implements Message {
    public int kind() {
      return KIND_PREPARE_SHUFFLE;
    }
  }

  record MapCommitted(
      String appId,
      int shuffleId,
      int mapId,
      int attemptId,
      List<PartitionBytes> partitions,
      int durability)
      implements Message {
    /** The map's data is held by its workers. */
    public static final int DURABILITY_MEMORY = 0;
    /** The map's data is written and synced to its workers' disks. */
    public static final int DURABILITY_DISK = 1;
    /** The map's data is stored in the workers' object store. */
    public static final int DURABILITY_OBJECT_STORE = 2;

    public int kind() {
      return KIND_MAP_COMMITTED;
    }
  }

  /** With {@code everywhere}, the object-store copies of every worker go too. */
  record DeleteShuffle(String appId, int shuffleId, boolean everywhere) implements Message {
    public int kind() {
      return KIND_DELETE_SHUFFLE;
    }
  }

  /** With {@code everywhere}, the object-store copies of every worker go too. */
  record DeleteApp(String appId, boolean everywhere) implements Message {
    public int kind() {
      return KIND_DELETE_APP;
    }
  }

  record PushBatch(PushHeader header, ByteBuffer payload) implements Message {
    public int kind() {
      return KIND_PUSH_BATCH;
    }
  }

  /** {@code resumeAfter} is null for a fresh fetch. */
  record Fetch(
      String appId, int shuffleId, int partition, int startMap, int endMap, ResumePoint resumeAfter)
      implements Message {
    public int kind() {
      return KIND_FETCH;
    }
  }

  record FetchChunk(List<FetchedBatch> batches) implements Message {
    public int kind() {
      return KIND_FETCH_CHUNK;
    }
  }

  record FetchEnd(long batches, long bytes) implements Message {
    public int kind() {
      return KIND_FETCH_END;
    }
  }

  record GetWorkerStats() implements Message {
    public int kind() {
      return KIND_GET_WORKER_STATS;
    }
  }

  record WorkerStats(
      int workerId,
      long budgetBytes,
      long bufferedBytes,
      long peakBufferedBytes,
      long storedBytes,
      long peakRssBytes,
      long processBudgetBytes)
      implements Message {
    public int kind() {
      return KIND_WORKER_STATS;
    }
  }
}
