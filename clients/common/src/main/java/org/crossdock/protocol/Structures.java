package org.crossdock.protocol;

import java.nio.ByteBuffer;
import java.util.List;
import org.crossdock.protocol.Wire.Encodable;
import org.crossdock.protocol.Wire.Reader;
import org.crossdock.protocol.Wire.Writer;

/**
 * The structures used inside message bodies (docs/protocol.md, "Messages"): each declared
 * once with its fields, its {@code encode} and its static {@code decode}, as the messages are.
 * {@link Message} extends this interface, so every structure is named as a member of it
 * ({@code Message.PartitionStat}); it lives apart only to keep each file readable.
 */
public interface Structures {
  /**
   * A worker as the coordinator describes it: {@code addr} is the data endpoint host:port,
   * {@code host} the machine as Spark names executor hosts, {@code zone} its failure domain
   * (empty: unlabelled).
   */
  record WorkerInfo(int id, String addr, boolean alive, String host, String zone)
      implements Encodable, java.io.Serializable {
    /** Encoded size with empty strings: the least a list element takes. */
    static final int MIN_LEN = 4 + 2 + 1 + 2 + 2;

    @Override
    public void encode(Writer w) {
      w.u32(id);
      w.str(addr);
      w.bool(alive);
      w.str(host);
      w.str(zone);
    }

    public static WorkerInfo decode(Reader r) throws ProtocolException {
      return new WorkerInfo(r.u32("worker.id"), r.str("worker.addr"), r.bool("worker.alive"),
          r.str("worker.host"), r.str("worker.zone"));
    }

    static List<WorkerInfo> decodeList(Reader r) throws ProtocolException {
      return r.list(MIN_LEN, "workers", WorkerInfo::decode);
    }
  }

  /** Bytes and records one map wrote to one partition. */
  record PartitionStat(int partition, long bytes, long records) implements Encodable {
    static final int MIN_LEN = 4 + 8 + 8;

    @Override
    public void encode(Writer w) {
      w.u32(partition);
      w.u64(bytes);
      w.u64(records);
    }

    public static PartitionStat decode(Reader r) throws ProtocolException {
      return new PartitionStat(r.u32("partition"), r.u64("bytes"), r.u64("records"));
    }
  }

  /**
   * One input partition of a range-partitioned shuffle's map stage as the engine sampled it
   * before the maps ran: its records and how many of them the sample kept.
   */
  record InputSample(long records, int sampled) implements Encodable {
    static final int MIN_LEN = 8 + 4;

    @Override
    public void encode(Writer w) {
      w.u64(records);
      w.u32(sampled);
    }

    public static InputSample decode(Reader r) throws ProtocolException {
      return new InputSample(r.u64("sample.records"), r.u32("sample.sampled"));
    }
  }

  /**
   * How many of input {@code input}'s sampled records the shuffle's partitioner sends to
   * {@code partition} ({@code input} indexes a {@code RegisterShuffle}'s sample inputs).
   */
  record SampleCount(int input, int partition, int count) implements Encodable {
    static final int MIN_LEN = 4 + 4 + 4;

    @Override
    public void encode(Writer w) {
      w.u32(input);
      w.u32(partition);
      w.u32(count);
    }

    public static SampleCount decode(Reader r) throws ProtocolException {
      return new SampleCount(r.u32("sample.input"), r.u32("sample.partition"),
          r.u32("sample.count"));
    }
  }

  /**
   * Where one of a map's further sorted runs of a partition (slot) begins: the sequence number
   * of its first batch. A map's first run begins at batch 0 and is never listed.
   */
  record RunStart(int partition, int batchSeq) implements Encodable {
    static final int MIN_LEN = 4 + 4;

    @Override
    public void encode(Writer w) {
      w.u32(partition);
      w.u32(batchSeq);
    }

    public static RunStart decode(Reader r) throws ProtocolException {
      return new RunStart(r.u32("run.partition"), r.u32("run.batch_seq"));
    }
  }

  /** A {@link RunStart} of a committed map, as the coordinator returns it to readers. */
  record MapRunStart(int partition, int mapId, int batchSeq) implements Encodable {
    static final int MIN_LEN = 4 + 4 + 4;

    @Override
    public void encode(Writer w) {
      w.u32(partition);
      w.u32(mapId);
      w.u32(batchSeq);
    }

    public static MapRunStart decode(Reader r) throws ProtocolException {
      return new MapRunStart(r.u32("run.partition"), r.u32("run.map_id"), r.u32("run.batch_seq"));
    }
  }

  /** Bytes one map attempt wrote to one partition, as a worker must hold them. */
  record PartitionBytes(int partition, long bytes) implements Encodable {
    static final int MIN_LEN = 4 + 8;

    @Override
    public void encode(Writer w) {
      w.u32(partition);
      w.u64(bytes);
    }

    public static PartitionBytes decode(Reader r) throws ProtocolException {
      return new PartitionBytes(r.u32("partition"), r.u64("bytes"));
    }
  }

  enum CommitStatus implements Encodable {
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

    @Override
    public void encode(Writer w) {
      w.u8(wire);
    }

    public static CommitStatus decode(Reader r) throws ProtocolException {
      int raw = r.u8("status");
      CommitStatus s = fromWire(raw);
      if (s == null) {
        throw new ProtocolException(ErrorCode.MALFORMED_FRAME, "unknown commit status " + raw);
      }
      return s;
    }
  }

  /** Routing header of a pushed batch; the payload follows it in the frame. */
  record PushHeader(
      String appId, int shuffleId, int partition, int mapId, int attemptId, int batchSeq, int crc32c)
      implements Encodable {
    @Override
    public void encode(Writer w) {
      w.str(appId);
      w.u32(shuffleId);
      w.u32(partition);
      w.u32(mapId);
      w.u32(attemptId);
      w.u32(batchSeq);
      w.u32(crc32c);
    }

    public static PushHeader decode(Reader r) throws ProtocolException {
      return new PushHeader(r.str("app_id"), r.u32("shuffle_id"), r.u32("partition"),
          r.u32("map_id"), r.u32("attempt_id"), r.u32("batch_seq"), r.u32("crc32c"));
    }
  }

  /** One batch of a fetched chunk: {@code u32 len} before the CRC, then the payload. */
  record FetchedBatch(int mapId, int batchSeq, int crc32c, ByteBuffer payload)
      implements Encodable {
    /** Encoded size of a batch's header (an empty payload). */
    static final int MIN_LEN = 16;

    @Override
    public void encode(Writer w) {
      w.u32(mapId);
      w.u32(batchSeq);
      w.u32(payload.remaining());
      w.u32(crc32c);
      w.bytes(payload);
    }

    public static FetchedBatch decode(Reader r) throws ProtocolException {
      int map = r.u32("batch.map_id");
      int seq = r.u32("batch.batch_seq");
      long len = Integer.toUnsignedLong(r.u32("batch.len"));
      int crc = r.u32("batch.crc32c");
      return new FetchedBatch(map, seq, crc, r.bytes(len, "batch.payload"));
    }
  }

  /**
   * One batch as a worker stores it ({@code FetchRecords}): magic "CDK1", map, attempt,
   * sequence, length, CRC32C, then the payload. Nobody but the reader checks it.
   */
  record StoredBatch(int mapId, int attemptId, int batchSeq, int crc32c, ByteBuffer payload)
      implements Encodable {
    /** The magic number that starts every stored record ("CDK1"). */
    public static final int MAGIC = 0x43444B31;
    /** {@code Fetch.flags} bit: the reader takes {@code FetchRecords}. */
    public static final int FETCH_RECORDS = 1;
    /** Encoded size of a record's header (an empty payload). */
    static final int HEADER_LEN = 24;

    @Override
    public void encode(Writer w) {
      w.u32(MAGIC);
      w.u32(mapId);
      w.u32(attemptId);
      w.u32(batchSeq);
      w.u32(payload.remaining());
      w.u32(crc32c);
      w.bytes(payload);
    }

    public static StoredBatch decode(Reader r) throws ProtocolException {
      int magic = r.u32("record.magic");
      if (magic != MAGIC) {
        throw new ProtocolException(ErrorCode.MALFORMED_FRAME, String.format(
            "a stored record starts with 0x%08x, not the magic number", magic));
      }
      int map = r.u32("record.map_id");
      int attempt = r.u32("record.attempt_id");
      int seq = r.u32("record.batch_seq");
      long len = Integer.toUnsignedLong(r.u32("record.len"));
      int crc = r.u32("record.crc32c");
      return new StoredBatch(map, attempt, seq, crc, r.bytes(len, "record.payload"));
    }

    /** The batch as a {@code FetchChunk} carries it (the same payload, not copied). */
    public FetchedBatch toFetched() {
      return new FetchedBatch(mapId, batchSeq, crc32c, payload);
    }
  }

  /** Where a resumed fetch starts: after this batch of this map. */
  record ResumePoint(int mapId, int batchSeq) implements Encodable {
    @Override
    public void encode(Writer w) {
      w.u32(mapId);
      w.u32(batchSeq);
    }

    public static ResumePoint decode(Reader r) throws ProtocolException {
      return new ResumePoint(r.u32("resume_map_id"), r.u32("resume_batch_seq"));
    }
  }
}
