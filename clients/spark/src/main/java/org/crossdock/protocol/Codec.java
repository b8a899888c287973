package org.crossdock.protocol;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.crossdock.protocol.Message.*;

/**
 * Encoder and decoder of protocol-version-1 frames, byte for byte as docs/protocol.md specifies
 * (the Rust reference is crates/proto). Decoders ignore bytes after the last known field.
 */
public final class Codec {
  public static final int VERSION = 1;
  /** Largest body accepted for any frame other than a pushed batch or a fetched chunk. */
  public static final int MAX_CONTROL_FRAME = 64 << 20;
  public static final int MAX_STRING = 0xffff;

  private Codec() {}

  /** A decoded frame: its header and message. */
  public record Frame(FrameHeader header, Message message) {}

  // ------------------------------------------------------------------ encoding

  /** Encodes a whole frame (header and body). */
  public static byte[] encodeFrame(Message m, long requestId) {
    Writer w = new Writer(64);
    w.pos = FrameHeader.LEN;
    encodeBody(m, w);
    int bodyLen = w.pos - FrameHeader.LEN;
    ByteBuffer b = ByteBuffer.wrap(w.buf, 0, FrameHeader.LEN);
    FrameHeader.of(m.kind(), requestId, bodyLen).encode(b);
    return Arrays.copyOf(w.buf, w.pos);
  }

  /**
   * The bytes of a PushBatch frame that come before the payload (frame header and routing
   * header), so a caller can write the payload after them without copying it.
   */
  public static byte[] encodePushPrefix(long requestId, PushHeader h, int payloadLen) {
    Writer w = new Writer(FrameHeader.LEN + 32 + h.appId().length() * 3);
    w.pos = FrameHeader.LEN;
    putPushHeader(w, h);
    int bodyLen = w.pos - FrameHeader.LEN + payloadLen;
    FrameHeader.of(Message.KIND_PUSH_BATCH, requestId, bodyLen)
        .encode(ByteBuffer.wrap(w.buf, 0, FrameHeader.LEN));
    return Arrays.copyOf(w.buf, w.pos);
  }

  private static void putPushHeader(Writer w, PushHeader h) {
    w.str(h.appId());
    w.u32(h.shuffleId());
    w.u32(h.partition());
    w.u32(h.mapId());
    w.u32(h.attemptId());
    w.u32(h.batchSeq());
    w.u32(h.crc32c());
  }

  private static void putWorkers(Writer w, List<WorkerInfo> workers) {
    w.u32(workers.size());
    for (WorkerInfo x : workers) {
      w.u32(x.id());
      w.str(x.addr());
      w.u8(x.alive() ? 1 : 0);
    }
  }

  private static void encodeBody(Message m, Writer w) {
    if (m instanceof Ok || m instanceof GetWorkerStats) {
      return;
    } else if (m instanceof Message.Error e) {
      w.u16(e.code());
      w.str(e.message());
    } else if (m instanceof RegisterApp r) {
      w.str(r.appId());
      w.u32(r.leaseMs());
    } else if (m instanceof RenewLease r) {
      w.str(r.appId());
    } else if (m instanceof UnregisterApp r) {
      w.str(r.appId());
    } else if (m instanceof RegisterShuffle r) {
      w.str(r.appId());
      w.u32(r.shuffleId());
      w.u32(r.numMaps());
      w.u32(r.numPartitions());
    } else if (m instanceof ShufflePlacement p) {
      putWorkers(w, p.workers());
      w.u32List(p.partitionWorkers());
      w.u32List(p.partitionReplicas());
    } else if (m instanceof CommitMap c) {
      w.str(c.appId());
      w.u32(c.shuffleId());
      w.u32(c.mapId());
      w.u32(c.attemptId());
      w.u32(c.partitions().size());
      for (PartitionStat s : c.partitions()) {
        w.u32(s.partition());
        w.u64(s.bytes());
        w.u64(s.records());
      }
    } else if (m instanceof CommitResult r) {
      w.u8(r.status().wire);
      w.u32(r.winningAttempt());
    } else if (m instanceof UnregisterShuffle r) {
      w.str(r.appId());
      w.u32(r.shuffleId());
    } else if (m instanceof GetShuffleStatus r) {
      w.str(r.appId());
      w.u32(r.shuffleId());
    } else if (m instanceof ShuffleStatus s) {
      w.u32(s.numMaps());
      w.u32(s.numPartitions());
      w.u32(s.committedMaps());
      putWorkers(w, s.workers());
      w.u32List(s.partitionWorkers());
      w.u32List(s.mapAttempts());
      w.u64List(s.partitionBytes());
      w.u64List(s.partitionRecords());
      w.u32List(s.partitionReplicas());
    } else if (m instanceof ReportWorkerFailure r) {
      w.str(r.addr());
    } else if (m instanceof ReportCorruption r) {
      w.str(r.appId());
      w.u32(r.shuffleId());
      w.u32(r.partition());
      w.str(r.workerAddr());
    } else if (m instanceof CheckCopies c) {
      w.str(c.appId());
      w.u32(c.shuffleId());
      w.u32List(c.mapAttempts());
      w.u32List(c.partitions());
      w.u64List(c.expectedBytes());
      w.u8(c.adopt() ? 1 : 0);
    } else if (m instanceof CopiesHeld c) {
      w.u32List(c.partitions());
    } else if (m instanceof SyncCommits c) {
      w.str(c.appId());
      w.u32(c.shuffleId());
      w.u32List(c.mapAttempts());
    } else if (m instanceof RegisterWorker r) {
      w.str(r.addr());
      w.u64(r.memoryBudget());
      w.u64(r.incarnation());
    } else if (m instanceof WorkerRegistered r) {
      w.u32(r.workerId());
      w.u32(r.heartbeatMs());
    } else if (m instanceof Heartbeat h) {
      w.u32(h.workerId());
      w.u64(h.bufferedBytes());
      w.u64(h.storedBytes());
      w.u8(h.diskFull() ? 1 : 0);
    } else if (m instanceof PrepareShuffle p) {
      w.str(p.appId());
      w.u32(p.shuffleId());
      w.u32(p.numMaps());
      w.u32(p.numPartitions());
      w.u32List(p.partitions());
      w.u32(p.forwardTo().size());
      for (String a : p.forwardTo()) {
        w.str(a);
      }
    } else if (m instanceof MapCommitted c) {
      w.str(c.appId());
      w.u32(c.shuffleId());
      w.u32(c.mapId());
      w.u32(c.attemptId());
      w.u32(c.partitions().size());
      for (PartitionBytes s : c.partitions()) {
        w.u32(s.partition());
        w.u64(s.bytes());
      }
      w.u8(c.durability());
    } else if (m instanceof DeleteShuffle d) {
      w.str(d.appId());
      w.u32(d.shuffleId());
      w.u8(d.everywhere() ? 1 : 0);
    } else if (m instanceof DeleteApp d) {
      w.str(d.appId());
      w.u8(d.everywhere() ? 1 : 0);
    } else if (m instanceof PushBatch p) {
      putPushHeader(w, p.header());
      w.bytes(p.payload());
    } else if (m instanceof Fetch f) {
      w.str(f.appId());
      w.u32(f.shuffleId());
      w.u32(f.partition());
      w.u32(f.startMap());
      w.u32(f.endMap());
      if (f.resumeAfter() == null) {
        w.u8(0);
      } else {
        w.u8(1);
        w.u32(f.resumeAfter().mapId());
        w.u32(f.resumeAfter().batchSeq());
      }
    } else if (m instanceof FetchChunk c) {
      w.u32(c.batches().size());
      for (FetchedBatch b : c.batches()) {
        w.u32(b.mapId());
        w.u32(b.batchSeq());
        w.u32(b.payload().remaining());
        w.u32(b.crc32c());
        w.bytes(b.payload());
      }
    } else if (m instanceof FetchEnd e) {
      w.u64(e.batches());
      w.u64(e.bytes());
    } else if (m instanceof WorkerStats s) {
      w.u32(s.workerId());
      w.u64(s.budgetBytes());
      w.u64(s.bufferedBytes());
      w.u64(s.peakBufferedBytes());
      w.u64(s.storedBytes());
      w.u64(s.peakRssBytes());
      w.u64(s.processBudgetBytes());
    } else {
      throw new IllegalArgumentException("cannot encode " + m);
    }
  }

  // ------------------------------------------------------------------ decoding

  /**
   * Decodes one whole frame held in {@code frame}: checks the header's length, version and kind,
   * then decodes the body. Bytes after the frame's length are ignored.
   */
  public static Frame decodeFrame(byte[] frame) throws ProtocolException {
    if (frame.length < FrameHeader.LEN) {
      throw new ProtocolException(
          ErrorCode.TRUNCATED_FRAME, "frame of " + frame.length + " bytes has no full header");
    }
    FrameHeader h = FrameHeader.decode(frame, 0);
    checkHeader(h);
    if ((long) frame.length - FrameHeader.LEN < h.bodyLen()) {
      throw new ProtocolException(
          ErrorCode.TRUNCATED_FRAME,
          "frame announces " + h.bodyLen() + " body bytes but has "
              + (frame.length - FrameHeader.LEN));
    }
    ByteBuffer body = ByteBuffer.wrap(frame, FrameHeader.LEN, h.bodyLen()).slice();
    return new Frame(h, decodeBody(h.kind(), body));
  }

  /** Checks a header's version and kind. */
  public static void checkHeader(FrameHeader h) throws ProtocolException {
    if (h.version() != VERSION) {
      throw new ProtocolException(
          ErrorCode.UNSUPPORTED_VERSION,
          "protocol version " + h.version() + " is not supported (this build speaks version 1)");
    }
    if (!isKnownKind(h.kind())) {
      throw new ProtocolException(
          ErrorCode.UNKNOWN_MESSAGE_KIND, String.format("unknown message kind 0x%02x", h.kind()));
    }
  }

  public static boolean isKnownKind(int kind) {
    switch (kind) {
      case 0x01, 0x02, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x20, 0x21,
          0x22, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45:
        return true;
      default:
        return false;
    }
  }

  /**
   * Decodes a body of the given kind. The buffer's content from position to limit is the body;
   * payloads in the result are views of it (not copies).
   */
  public static Message decodeBody(int kind, ByteBuffer body) throws ProtocolException {
    Reader r = new Reader(body);
    switch (kind) {
      case Message.KIND_OK:
        return new Ok();
      case Message.KIND_ERROR:
        return new Message.Error(r.u16("code"), r.str("message"));
      case Message.KIND_REGISTER_APP:
        return new RegisterApp(r.str("app_id"), r.u32("lease_ms"));
      case Message.KIND_RENEW_LEASE:
        return new RenewLease(r.str("app_id"));
      case Message.KIND_UNREGISTER_APP:
        return new UnregisterApp(r.str("app_id"));
      case Message.KIND_REGISTER_SHUFFLE:
        return new RegisterShuffle(
            r.str("app_id"), r.u32("shuffle_id"), r.u32("num_maps"), r.u32("num_partitions"));
      case Message.KIND_SHUFFLE_PLACEMENT:
        return new ShufflePlacement(
            r.workers(), r.u32List("partition_workers"), r.u32List("partition_replicas"));
      case Message.KIND_COMMIT_MAP: {
        String app = r.str("app_id");
        int shuffle = r.u32("shuffle_id");
        int map = r.u32("map_id");
        int attempt = r.u32("attempt_id");
        int n = r.count(20, "partitions");
        List<PartitionStat> ps = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          ps.add(new PartitionStat(r.u32("partition"), r.u64("bytes"), r.u64("records")));
        }
        return new CommitMap(app, shuffle, map, attempt, ps);
      }
      case Message.KIND_COMMIT_RESULT: {
        int raw = r.u8("status");
        CommitStatus s = CommitStatus.fromWire(raw);
        if (s == null) {
          throw new ProtocolException(ErrorCode.MALFORMED_FRAME, "unknown commit status " + raw);
        }
        return new CommitResult(s, r.u32("winning_attempt"));
      }
      case Message.KIND_UNREGISTER_SHUFFLE:
        return new UnregisterShuffle(r.str("app_id"), r.u32("shuffle_id"));
      case Message.KIND_GET_SHUFFLE_STATUS:
        return new GetShuffleStatus(r.str("app_id"), r.u32("shuffle_id"));
      case Message.KIND_SHUFFLE_STATUS:
        return new ShuffleStatus(
            r.u32("num_maps"),
            r.u32("num_partitions"),
            r.u32("committed_maps"),
            r.workers(),
            r.u32List("partition_workers"),
            r.u32List("map_attempts"),
            r.u64List("partition_bytes"),
            r.u64List("partition_records"),
            r.u32List("partition_replicas"));
      case Message.KIND_CHECK_COPIES:
        return new CheckCopies(r.str("app_id"), r.u32("shuffle_id"), r.u32List("map_attempts"),
            r.u32List("partitions"), r.u64List("expected_bytes"), r.bool("adopt"));
      case Message.KIND_COPIES_HELD:
        return new CopiesHeld(r.u32List("partitions"));
      case Message.KIND_SYNC_COMMITS:
        return new SyncCommits(r.str("app_id"), r.u32("shuffle_id"), r.u32List("map_attempts"));
      case Message.KIND_REPORT_CORRUPTION:
        return new ReportCorruption(
            r.str("app_id"), r.u32("shuffle_id"), r.u32("partition"), r.str("worker_addr"));
      case Message.KIND_REPORT_WORKER_FAILURE:
        return new ReportWorkerFailure(r.str("addr"));
      case Message.KIND_REGISTER_WORKER:
        return new RegisterWorker(r.str("addr"), r.u64("memory_budget"), r.u64("incarnation"));
      case Message.KIND_WORKER_REGISTERED:
        return new WorkerRegistered(r.u32("worker_id"), r.u32("heartbeat_ms"));
      case Message.KIND_HEARTBEAT:
        return new Heartbeat(r.u32("worker_id"), r.u64("buffered_bytes"), r.u64("stored_bytes"),
            r.bool("disk_full"));
      case Message.KIND_PREPARE_SHUFFLE:
        return new PrepareShuffle(
            r.str("app_id"),
            r.u32("shuffle_id"),
            r.u32("num_maps"),
            r.u32("num_partitions"),
            r.u32List("partitions"),
            r.strList("forward_to"));
      case Message.KIND_MAP_COMMITTED: {
        String app = r.str("app_id");
        int shuffle = r.u32("shuffle_id");
        int map = r.u32("map_id");
        int attempt = r.u32("attempt_id");
        int n = r.count(12, "partitions");
        List<PartitionBytes> ps = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          ps.add(new PartitionBytes(r.u32("partition"), r.u64("bytes")));
        }
        int durability = r.u8("durability");
        if (durability > MapCommitted.DURABILITY_OBJECT_STORE) {
          throw new ProtocolException(ErrorCode.MALFORMED_FRAME,
              "durability must be 0 (memory), 1 (disk) or 2 (object store), got " + durability);
        }
        return new MapCommitted(app, shuffle, map, attempt, ps, durability);
      }
      case Message.KIND_DELETE_SHUFFLE:
        return new DeleteShuffle(r.str("app_id"), r.u32("shuffle_id"), r.bool("everywhere"));
      case Message.KIND_DELETE_APP:
        return new DeleteApp(r.str("app_id"), r.bool("everywhere"));
      case Message.KIND_PUSH_BATCH: {
        PushHeader h = decodePushHeader(r);
        return new PushBatch(h, r.rest());
      }
      case Message.KIND_FETCH: {
        String app = r.str("app_id");
        int shuffle = r.u32("shuffle_id");
        int partition = r.u32("partition");
        int start = r.u32("start_map");
        int end = r.u32("end_map");
        ResumePoint resume = null;
        if (r.bool("has_resume")) {
          resume = new ResumePoint(r.u32("resume_map_id"), r.u32("resume_batch_seq"));
        }
        return new Fetch(app, shuffle, partition, start, end, resume);
      }
      case Message.KIND_FETCH_CHUNK: {
        int n = r.count(16, "batches");
        List<FetchedBatch> bs = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          int map = r.u32("batch.map_id");
          int seq = r.u32("batch.batch_seq");
          long len = Integer.toUnsignedLong(r.u32("batch.len"));
          int crc = r.u32("batch.crc32c");
          bs.add(new FetchedBatch(map, seq, crc, r.bytes(len, "batch.payload")));
        }
        return new FetchChunk(bs);
      }
      case Message.KIND_FETCH_END:
        return new FetchEnd(r.u64("batches"), r.u64("bytes"));
      case Message.KIND_GET_WORKER_STATS:
        return new GetWorkerStats();
      case Message.KIND_WORKER_STATS:
        return new WorkerStats(
            r.u32("worker_id"),
            r.u64("budget_bytes"),
            r.u64("buffered_bytes"),
            r.u64("peak_buffered_bytes"),
            r.u64("stored_bytes"),
            r.u64("peak_rss_bytes"),
            r.u64("process_budget_bytes"));
      default:
        throw new ProtocolException(
            ErrorCode.UNKNOWN_MESSAGE_KIND, String.format("unknown message kind 0x%02x", kind));
    }
  }

  public static PushHeader decodePushHeader(Reader r) throws ProtocolException {
    return new PushHeader(
        r.str("app_id"),
        r.u32("shuffle_id"),
        r.u32("partition"),
        r.u32("map_id"),
        r.u32("attempt_id"),
        r.u32("batch_seq"),
        r.u32("crc32c"));
  }

  // ------------------------------------------------------------------ primitives

  /** A growable big-endian body writer. */
  static final class Writer {
    byte[] buf;
    int pos;

    Writer(int cap) {
      buf = new byte[Math.max(cap, 16)];
    }

    private void ensure(int n) {
      if (pos + n > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
      }
    }

    void u8(int v) {
      ensure(1);
      buf[pos++] = (byte) v;
    }

    void u16(int v) {
      ensure(2);
      buf[pos++] = (byte) (v >>> 8);
      buf[pos++] = (byte) v;
    }

    void u32(int v) {
      ensure(4);
      buf[pos++] = (byte) (v >>> 24);
      buf[pos++] = (byte) (v >>> 16);
      buf[pos++] = (byte) (v >>> 8);
      buf[pos++] = (byte) v;
    }

    void u64(long v) {
      u32((int) (v >>> 32));
      u32((int) v);
    }

    void str(String s) {
      byte[] b = s.getBytes(StandardCharsets.UTF_8);
      if (b.length > MAX_STRING) {
        throw new IllegalArgumentException("string field longer than 65535 bytes");
      }
      u16(b.length);
      ensure(b.length);
      System.arraycopy(b, 0, buf, pos, b.length);
      pos += b.length;
    }

    void bytes(ByteBuffer b) {
      ByteBuffer d = b.duplicate();
      ensure(d.remaining());
      int n = d.remaining();
      d.get(buf, pos, n);
      pos += n;
    }

    void u32List(int[] xs) {
      u32(xs.length);
      for (int x : xs) {
        u32(x);
      }
    }

    void u64List(long[] xs) {
      u32(xs.length);
      for (long x : xs) {
        u64(x);
      }
    }
  }

  /** A bounds-checked big-endian body reader. */
  public static final class Reader {
    private final ByteBuffer b;

    public Reader(ByteBuffer body) {
      this.b = body.slice().order(java.nio.ByteOrder.BIG_ENDIAN);
    }

    public int remaining() {
      return b.remaining();
    }

    private void need(long n, String field) throws ProtocolException {
      if (b.remaining() < n) {
        throw new ProtocolException(
            ErrorCode.TRUNCATED_FRAME,
            "frame body ends " + (n - b.remaining()) + " byte(s) early while reading " + field);
      }
    }

    public int u8(String f) throws ProtocolException {
      need(1, f);
      return b.get() & 0xff;
    }

    public int u16(String f) throws ProtocolException {
      need(2, f);
      return b.getShort() & 0xffff;
    }

    public int u32(String f) throws ProtocolException {
      need(4, f);
      return b.getInt();
    }

    public long u64(String f) throws ProtocolException {
      need(8, f);
      return b.getLong();
    }

    public boolean bool(String f) throws ProtocolException {
      int v = u8(f);
      if (v == 0) {
        return false;
      }
      if (v == 1) {
        return true;
      }
      throw new ProtocolException(ErrorCode.MALFORMED_FRAME, f + " must be 0 or 1, got " + v);
    }

    public String str(String f) throws ProtocolException {
      int len = u16(f);
      need(len, f);
      ByteBuffer raw = b.slice();
      raw.limit(len);
      b.position(b.position() + len);
      try {
        return StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)
            .decode(raw)
            .toString();
      } catch (CharacterCodingException e) {
        throw new ProtocolException(ErrorCode.MALFORMED_FRAME, f + " is not valid UTF-8");
      }
    }

    /** {@code n} raw bytes as a read-only view. */
    public ByteBuffer bytes(long n, String f) throws ProtocolException {
      need(n, f);
      ByteBuffer v = b.slice();
      v.limit((int) n);
      b.position(b.position() + (int) n);
      return v.asReadOnlyBuffer();
    }

    /** Everything not read yet. */
    public ByteBuffer rest() {
      ByteBuffer v = b.slice().asReadOnlyBuffer();
      b.position(b.limit());
      return v;
    }

    /** A list count whose elements (at least {@code minElem} bytes each) fit in the rest. */
    public int count(int minElem, String f) throws ProtocolException {
      long n = Integer.toUnsignedLong(u32(f));
      need(n * minElem, f);
      return (int) n;
    }

    public int[] u32List(String f) throws ProtocolException {
      int n = count(4, f);
      int[] out = new int[n];
      for (int i = 0; i < n; i++) {
        out[i] = b.getInt();
      }
      return out;
    }

    public List<String> strList(String f) throws ProtocolException {
      int n = count(2, f);
      List<String> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        out.add(str(f));
      }
      return out;
    }

    public long[] u64List(String f) throws ProtocolException {
      int n = count(8, f);
      long[] out = new long[n];
      for (int i = 0; i < n; i++) {
        out[i] = b.getLong();
      }
      return out;
    }

    List<WorkerInfo> workers() throws ProtocolException {
      int n = count(7, "workers");
      List<WorkerInfo> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        out.add(new WorkerInfo(r32("worker.id"), str("worker.addr"), bool("worker.alive")));
      }
      return out;
    }

    private int r32(String f) throws ProtocolException {
      return u32(f);
    }
  }

}
