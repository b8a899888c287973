package org.crossdock.protocol;

import java.util.List;
import org.crossdock.protocol.Wire.Reader;
import org.crossdock.protocol.Wire.Writer;

/**
 * The messages only the coordinator and the workers exchange (registration, heartbeats,
 * shuffle preparation, commits, deletion, copies): members of {@link Message} like every
 * other message, declared here to keep each file readable. Clients decode them for the
 * shared vectors and never send them.
 */
public interface ClusterMessages extends Structures, Kinds {
  record RegisterWorker(String addr, long memoryBudget, long incarnation, String host, String zone)
      implements Message {
    public int kind() {
      return KIND_REGISTER_WORKER;
    }

    public void encode(Writer w) {
      w.str(addr);
      w.u64(memoryBudget);
      w.u64(incarnation);
      w.str(host);
      w.str(zone);
    }

    public static RegisterWorker decode(Reader r) throws ProtocolException {
      return new RegisterWorker(r.str("addr"), r.u64("memory_budget"), r.u64("incarnation"),
          r.str("host"), r.str("zone"));
    }
  }

  record WorkerRegistered(int workerId, int heartbeatMs) implements Message {
    public int kind() {
      return KIND_WORKER_REGISTERED;
    }

    public void encode(Writer w) {
      w.u32(workerId);
      w.u32(heartbeatMs);
    }

    public static WorkerRegistered decode(Reader r) throws ProtocolException {
      return new WorkerRegistered(r.u32("worker_id"), r.u32("heartbeat_ms"));
    }
  }

  /**
   * pushedBytes, fetchedBytes and objectBytes were appended in version 2: empty from a worker
   * that predates them, and then encoded as nothing (a decoded heartbeat encodes back to its own
   * bytes).
   */
  record Heartbeat(int workerId, long bufferedBytes, long storedBytes, boolean diskFull,
      java.util.OptionalLong pushedBytes, java.util.OptionalLong fetchedBytes,
      java.util.OptionalLong objectBytes) implements Message {
    public int kind() {
      return KIND_HEARTBEAT;
    }

    public void encode(Writer w) {
      w.u32(workerId);
      w.u64(bufferedBytes);
      w.u64(storedBytes);
      w.bool(diskFull);
      w.appendedU64(pushedBytes);
      w.appendedU64(fetchedBytes);
      w.appendedU64(objectBytes);
    }

    public static Heartbeat decode(Reader r) throws ProtocolException {
      return new Heartbeat(r.u32("worker_id"), r.u64("buffered_bytes"), r.u64("stored_bytes"),
          r.bool("disk_full"), r.appendedU64("pushed_bytes"), r.appendedU64("fetched_bytes"),
          r.appendedU64("object_bytes"));
    }
  }

  /**
   * Coordinator to worker: place {@code partitions}. {@code continuedIn} and {@code continuedAt}
   * (appended, both or neither; null when absent) give, per entry, the slot the partition
   * continues in (4294967295: none) and that slot's primary's address. Only the coordinator sends
   * it; this encoder serves the shared test vectors.
   */
  record PrepareShuffle(String appId, int shuffleId, int numMaps, int numPartitions,
      int[] partitions, List<String> forwardTo, java.util.OptionalLong appStoredQuota,
      java.util.OptionalLong appMemorySharePpm, int[] continuedIn, List<String> continuedAt)
      implements Message {
    public int kind() {
      return KIND_PREPARE_SHUFFLE;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(numMaps);
      w.u32(numPartitions);
      w.u32List(partitions);
      w.strList(forwardTo);
      if (continuedIn != null || continuedAt != null) {
        // Appended fields go in order: the limits come first, present.
        w.u64(appStoredQuota.orElse(0));
        w.u64(appMemorySharePpm.orElse(0));
        w.u32List(continuedIn != null ? continuedIn : new int[0]);
        w.strList(continuedAt != null ? continuedAt : List.of());
      } else {
        w.appendedU64(appStoredQuota);
        w.appendedU64(appMemorySharePpm);
      }
    }

    public static PrepareShuffle decode(Reader r) throws ProtocolException {
      return new PrepareShuffle(r.str("app_id"), r.u32("shuffle_id"), r.u32("num_maps"),
          r.u32("num_partitions"), r.u32List("partitions"), r.strList("forward_to"),
          r.appendedU64("app_stored_quota"), r.appendedU64("app_memory_share_ppm"),
          r.remaining() == 0 ? null : r.u32List("continued_in"),
          r.remaining() == 0 ? null : r.strList("continued_at"));
    }
  }

  record MapCommitted(String appId, int shuffleId, int mapId, int attemptId,
      List<PartitionBytes> partitions, int durability) implements Message {
    /** The map's data is held by its workers. */
    public static final int DURABILITY_MEMORY = 0;
    /** The map's data is written and synced to its workers' disks. */
    public static final int DURABILITY_DISK = 1;
    /** The map's data is stored in the workers' object store. */
    public static final int DURABILITY_OBJECT_STORE = 2;

    public int kind() {
      return KIND_MAP_COMMITTED;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(mapId);
      w.u32(attemptId);
      w.list(partitions);
      w.u8(durability);
    }

    public static MapCommitted decode(Reader r) throws ProtocolException {
      String app = r.str("app_id");
      int shuffle = r.u32("shuffle_id");
      int map = r.u32("map_id");
      int attempt = r.u32("attempt_id");
      List<PartitionBytes> ps =
          r.list(PartitionBytes.MIN_LEN, "partitions", PartitionBytes::decode);
      int durability = r.u8("durability");
      if (durability > DURABILITY_OBJECT_STORE) {
        throw new ProtocolException(ErrorCode.MALFORMED_FRAME,
            "durability must be 0 (memory), 1 (disk) or 2 (object store), got " + durability);
      }
      return new MapCommitted(app, shuffle, map, attempt, ps, durability);
    }
  }

  /** With {@code everywhere}, the object-store copies of every worker go too. */
  record DeleteShuffle(String appId, int shuffleId, boolean everywhere) implements Message {
    public int kind() {
      return KIND_DELETE_SHUFFLE;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.bool(everywhere);
    }

    public static DeleteShuffle decode(Reader r) throws ProtocolException {
      return new DeleteShuffle(r.str("app_id"), r.u32("shuffle_id"), r.bool("everywhere"));
    }
  }

  /** With {@code everywhere}, the object-store copies of every worker go too. */
  record DeleteApp(String appId, boolean everywhere) implements Message {
    public int kind() {
      return KIND_DELETE_APP;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.bool(everywhere);
    }

    public static DeleteApp decode(Reader r) throws ProtocolException {
      return new DeleteApp(r.str("app_id"), r.bool("everywhere"));
    }
  }

  record SyncCommits(String appId, int shuffleId, int[] mapAttempts) implements Message {
    public int kind() {
      return KIND_SYNC_COMMITS;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32List(mapAttempts);
    }

    public static SyncCommits decode(Reader r) throws ProtocolException {
      return new SyncCommits(r.str("app_id"), r.u32("shuffle_id"), r.u32List("map_attempts"));
    }
  }

  /** With {@code adopt}, the worker first restores the partitions from its object store. */
  record CheckCopies(String appId, int shuffleId, int[] mapAttempts, int[] partitions,
      long[] expectedBytes, boolean adopt) implements Message {
    public int kind() {
      return KIND_CHECK_COPIES;
    }

    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32List(mapAttempts);
      w.u32List(partitions);
      w.u64List(expectedBytes);
      w.bool(adopt);
    }

    public static CheckCopies decode(Reader r) throws ProtocolException {
      return new CheckCopies(r.str("app_id"), r.u32("shuffle_id"), r.u32List("map_attempts"),
          r.u32List("partitions"), r.u64List("expected_bytes"), r.bool("adopt"));
    }
  }

  record CopiesHeld(int[] partitions) implements Message {
    public int kind() {
      return KIND_COPIES_HELD;
    }

    public void encode(Writer w) {
      w.u32List(partitions);
    }

    public static CopiesHeld decode(Reader r) throws ProtocolException {
      return new CopiesHeld(r.u32List("partitions"));
    }
  }
}
