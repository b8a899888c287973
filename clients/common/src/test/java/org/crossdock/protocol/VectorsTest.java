package org.crossdock.protocol;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import org.crossdock.protocol.ClusterMessages.*;
import org.crossdock.protocol.Message.*;
import org.crossdock.protocol.Structures.*;
import org.junit.jupiter.api.Test;

/**
 * The shared protocol vectors (testdata/protocol/vectors.json): every valid frame decodes to its
 * stated message and that message encodes back to the same bytes; every invalid frame is rejected
 * with its stated error code.
 */
class VectorsTest {
  static final ObjectMapper M = new ObjectMapper();
  static final HexFormat HEX = HexFormat.of();

  /** The repository root: the nearest ancestor holding testdata/protocol/vectors.json. */
  static Path repoRoot() {
    Path p = Path.of("").toAbsolutePath();
    while (p != null) {
      if (Files.exists(p.resolve("testdata/protocol/vectors.json"))) {
        return p;
      }
      p = p.getParent();
    }
    throw new IllegalStateException("testdata/protocol/vectors.json not found above the build dir");
  }

  static JsonNode vectors() throws Exception {
    return M.readTree(repoRoot().resolve("testdata/protocol/vectors.json").toFile());
  }

  @Test
  void validFramesDecodeAndEncodeExactly() throws Exception {
    JsonNode v = vectors();
    assertEquals(Codec.VERSION, v.get("protocol_version").asInt());
    Set<Integer> kinds = new HashSet<>();
    int n = 0;
    for (JsonNode f : v.get("frames")) {
      String name = f.get("name").asText();
      byte[] frame = HEX.parseHex(f.get("hex").asText());
      long requestId = f.get("request_id").asLong();
      Codec.Frame decoded = Codec.decodeFrame(frame);
      assertEquals(requestId, decoded.header().requestId(), name);
      JsonNode expected = f.get("message");
      assertEquals(expected, normalize(toJson(decoded.message())), name + ": decode");
      Message fromJson = fromJson(expected);
      assertEquals(f.get("hex").asText(), HEX.formatHex(Codec.encodeFrame(fromJson, requestId)),
          name + ": encode");
      kinds.add(decoded.message().kind());
      if (fromJson instanceof PushBatch p) {
        byte[] prefix = Codec.encodePushPrefix(requestId, p.header(), p.payload().remaining());
        byte[] payload = new byte[p.payload().remaining()];
        p.payload().duplicate().get(payload);
        assertEquals(f.get("hex").asText(), HEX.formatHex(prefix) + HEX.formatHex(payload));
        assertEquals(p.header().crc32c(), Checksums.crc32c(payload, 0, payload.length));
      }
      n++;
    }
    assertTrue(n >= 38, "expected every kind, got " + n + " frames");
    assertEquals(38, kinds.size(), "every message kind is covered: " + kinds);
  }

  /** testdata/protocol/auth.json: tokens and proofs as the Rust implementation computes them. */
  @Test
  void authenticationVectorsHold() throws Exception {
    JsonNode v = M.readTree(repoRoot().resolve("testdata/protocol/auth.json").toFile());
    byte[] secret = HEX.parseHex(v.get("secret").asText());
    String app = v.get("app_id").asText();
    byte[] token = HEX.parseHex(v.get("token").asText());
    byte[] nonce = HEX.parseHex(v.get("nonce").asText());
    assertArrayEquals(token, Auth.appToken(secret, app));
    assertArrayEquals(HEX.parseHex(v.get("app_proof").asText()), Auth.proof(token, nonce, app));
    assertArrayEquals(HEX.parseHex(v.get("cluster_proof").asText()), Auth.proof(secret, nonce, ""));
  }

  @Test
  void invalidFramesAreRejectedWithTheirCode() throws Exception {
    int n = 0;
    for (JsonNode f : vectors().get("invalid")) {
      String name = f.get("name").asText();
      ErrorCode want = ErrorCode.fromName(f.get("error").asText());
      assertNotNull(want, name + ": unknown error name " + f.get("error"));
      byte[] frame = HEX.parseHex(f.get("hex").asText());
      ProtocolException e =
          assertThrows(ProtocolException.class, () -> Codec.decodeFrame(frame), name);
      assertEquals(want, e.code(), name + ": " + e.getMessage());
      n++;
    }
    assertTrue(n >= 7);
  }

  /** A fetch that sets only its flags sends the appended fields before them as "nothing". */
  @Test
  void aFetchWithOnlyFlagsFillsTheFieldsBeforeThem() throws Exception {
    JsonNode vector = null;
    for (JsonNode f : vectors().get("frames")) {
      if (f.get("name").asText().equals("fetch_accepting_records")) {
        vector = f;
      }
    }
    assertNotNull(vector);
    Fetch onlyFlags = new Fetch("app-1", 7, 3, 0, 3, null, java.util.OptionalLong.empty(),
        java.util.OptionalInt.empty(), java.util.OptionalInt.empty(),
        java.util.OptionalInt.of(StoredBatch.FETCH_RECORDS));
    assertEquals(vector.get("hex").asText(),
        HEX.formatHex(Codec.encodeFrame(onlyFlags, vector.get("request_id").asLong())));
  }

  @Test
  void appendedFieldsReadAsZeroFromAnOlderSender() throws Exception {
    // A heartbeat body as a worker that predates its counters writes it.
    ByteBuffer body = ByteBuffer.allocate(21);
    body.putInt(3).putLong(4096).putLong(1L << 40).put((byte) 0).flip();
    Heartbeat old = new Heartbeat(3, 4096, 1L << 40, false, java.util.OptionalLong.empty(),
        java.util.OptionalLong.empty(), java.util.OptionalLong.empty());
    assertEquals(old, Codec.decodeBody(Message.KIND_HEARTBEAT, body));
    // It encodes back to the bytes it was read from.
    byte[] frame = Codec.encodeFrame(old, 1);
    assertEquals(FrameHeader.LEN + 21, frame.length);
    // Half of an appended field is a truncated body, not an absent field.
    ByteBuffer half = ByteBuffer.allocate(25);
    half.putInt(3).putLong(4096).putLong(1L << 40).put((byte) 0).putInt(7).flip();
    ProtocolException e = assertThrows(ProtocolException.class,
        () -> Codec.decodeBody(Message.KIND_HEARTBEAT, half));
    assertEquals(ErrorCode.TRUNCATED_FRAME, e.code());
  }

  @Test
  void errorCodesMatchTheSpec() {
    assertEquals(26, ErrorCode.values().length);
    assertEquals(ErrorCode.UNAUTHORIZED, ErrorCode.fromCode(55));
    assertEquals(ErrorCode.DATA_LOST, ErrorCode.fromName("data_lost"));
    assertEquals(ErrorCode.DATA_LOST, ErrorCode.fromCode(56));
    assertEquals(ErrorCode.BAD_CHECKSUM, ErrorCode.fromCode(32));
    assertEquals(ErrorCode.SHUTTING_DOWN, ErrorCode.fromName("shutting_down"));
    assertNull(ErrorCode.fromCode(0));
  }

  // ---------------------------------------------------------------- JSON mapping

  static void putOpt(ObjectNode o, String field, java.util.OptionalInt v) {
    if (v.isPresent()) {
      o.put(field, u(v.getAsInt()));
    } else {
      o.putNull(field);
    }
  }

  static java.util.OptionalInt optInt(JsonNode n, String field) {
    JsonNode v = n.get(field);
    return v == null || v.isNull() ? java.util.OptionalInt.empty()
        : java.util.OptionalInt.of((int) v.asLong());
  }

  static List<MapRunStart> mapRuns(JsonNode n) {
    if (n == null || n.isNull()) {
      return null;
    }
    List<MapRunStart> out = new ArrayList<>();
    for (JsonNode r : n) {
      out.add(new MapRunStart(i(r, "partition"), i(r, "map_id"), i(r, "batch_seq")));
    }
    return out;
  }

  static JsonNode normalize(JsonNode n) throws Exception {
    return M.readTree(M.writeValueAsString(n));
  }

  static long u(int v) {
    return Integer.toUnsignedLong(v);
  }

  static ArrayNode u32s(int[] xs) {
    ArrayNode a = M.createArrayNode();
    for (int x : xs) {
      a.add(u(x));
    }
    return a;
  }

  static ArrayNode u64s(long[] xs) {
    ArrayNode a = M.createArrayNode();
    for (long x : xs) {
      a.add(x);
    }
    return a;
  }

  static String hex(ByteBuffer b) {
    byte[] raw = new byte[b.remaining()];
    b.duplicate().get(raw);
    return HEX.formatHex(raw);
  }

  static ArrayNode workers(List<WorkerInfo> ws) {
    ArrayNode a = M.createArrayNode();
    for (WorkerInfo w : ws) {
      a.addObject().put("id", u(w.id())).put("addr", w.addr()).put("alive", w.alive())
          .put("host", w.host()).put("zone", w.zone());
    }
    return a;
  }

  static JsonNode toJson(Message m) {
    ObjectNode o = M.createObjectNode();
    o.put("type", m.getClass().getSimpleName());
    if (m instanceof Message.Error e) {
      o.put("code", e.code()).put("message", e.message());
    } else if (m instanceof Challenge c) {
      o.put("nonce", hex(c.nonce()));
    } else if (m instanceof Authenticate a) {
      o.put("app_id", a.appId()).put("proof", hex(a.proof()));
    } else if (m instanceof AppRegistered a) {
      o.put("token", hex(a.token()));
    } else if (m instanceof RegisterApp r) {
      o.put("app_id", r.appId()).put("lease_ms", u(r.leaseMs()))
          .put("stored_quota", r.storedQuota().getAsLong())
          .put("memory_share_ppm", r.memorySharePpm().getAsLong());
    } else if (m instanceof RenewLease r) {
      o.put("app_id", r.appId());
    } else if (m instanceof UnregisterApp r) {
      o.put("app_id", r.appId());
    } else if (m instanceof RegisterShuffle r) {
      o.put("app_id", r.appId()).put("shuffle_id", u(r.shuffleId()))
          .put("num_maps", u(r.numMaps())).put("num_partitions", u(r.numPartitions()));
      if (r.sampleInputs() == null) {
        o.putNull("sample_inputs");
      } else {
        ArrayNode a = o.putArray("sample_inputs");
        for (InputSample i : r.sampleInputs()) {
          a.addObject().put("records", i.records()).put("sampled", u(i.sampled()));
        }
      }
      if (r.sampleCounts() == null) {
        o.putNull("sample_counts");
      } else {
        ArrayNode a = o.putArray("sample_counts");
        for (SampleCount c : r.sampleCounts()) {
          a.addObject().put("input", u(c.input())).put("partition", u(c.partition()))
              .put("count", u(c.count()));
        }
      }
    } else if (m instanceof ShufflePlacement p) {
      o.set("workers", workers(p.workers()));
      o.set("partition_workers", u32s(p.partitionWorkers()));
      o.set("partition_replicas", u32s(p.partitionReplicas()));
    } else if (m instanceof CommitMap c) {
      o.put("app_id", c.appId()).put("shuffle_id", u(c.shuffleId())).put("map_id", u(c.mapId()))
          .put("attempt_id", u(c.attemptId()));
      ArrayNode a = o.putArray("partitions");
      for (PartitionStat s : c.partitions()) {
        a.addObject().put("partition", u(s.partition())).put("bytes", s.bytes())
            .put("records", s.records());
      }
      if (c.runStarts() == null) {
        o.putNull("run_starts");
      } else {
        ArrayNode runs = o.putArray("run_starts");
        for (RunStart r : c.runStarts()) {
          runs.addObject().put("partition", u(r.partition())).put("batch_seq", u(r.batchSeq()));
        }
      }
    } else if (m instanceof CommitResult r) {
      o.put("status", r.status().jsonName).put("winning_attempt", u(r.winningAttempt()));
    } else if (m instanceof UnregisterShuffle r) {
      o.put("app_id", r.appId()).put("shuffle_id", u(r.shuffleId()));
    } else if (m instanceof GetShuffleStatus r) {
      o.put("app_id", r.appId()).put("shuffle_id", u(r.shuffleId()));
      putOpt(o, "runs_from", r.runsFrom());
      putOpt(o, "runs_to", r.runsTo());
    } else if (m instanceof ShuffleStatus s) {
      o.put("num_maps", u(s.numMaps())).put("num_partitions", u(s.numPartitions()))
          .put("committed_maps", u(s.committedMaps()));
      o.set("workers", workers(s.workers()));
      o.set("partition_workers", u32s(s.partitionWorkers()));
      o.set("map_attempts", u32s(s.mapAttempts()));
      o.set("partition_bytes", u64s(s.partitionBytes()));
      o.set("partition_records", u64s(s.partitionRecords()));
      o.set("partition_replicas", u32s(s.partitionReplicas()));
      if (s.splitParents() == null) {
        o.putNull("split_parents");
      } else {
        o.set("split_parents", u32s(s.splitParents()));
      }
      if (s.runCount().isPresent()) {
        o.put("run_count", s.runCount().getAsLong());
      } else {
        o.putNull("run_count");
      }
      if (s.runStarts() == null) {
        o.putNull("run_starts");
      } else {
        ArrayNode runs = o.putArray("run_starts");
        for (MapRunStart r : s.runStarts()) {
          runs.addObject().put("partition", u(r.partition())).put("map_id", u(r.mapId()))
              .put("batch_seq", u(r.batchSeq()));
        }
      }
    } else if (m instanceof SplitPartition r) {
      o.put("app_id", r.appId()).put("shuffle_id", u(r.shuffleId())).put("slot", u(r.slot()));
    } else if (m instanceof PartitionSplit r) {
      o.put("slot", u(r.slot())).put("addr", r.addr());
    } else if (m instanceof PushRedirect r) {
      o.put("slot", u(r.slot())).put("addr", r.addr());
    } else if (m instanceof ReportWorkerFailure r) {
      o.put("addr", r.addr());
    } else if (m instanceof ReportLostCopy r) {
      o.put("app_id", r.appId()).put("shuffle_id", u(r.shuffleId()))
          .put("partition", u(r.partition())).put("worker_addr", r.workerAddr());
    } else if (m instanceof CheckCopies c) {
      o.put("app_id", c.appId()).put("shuffle_id", u(c.shuffleId()));
      o.set("map_attempts", u32s(c.mapAttempts()));
      o.set("partitions", u32s(c.partitions()));
      o.set("expected_bytes", u64s(c.expectedBytes()));
      o.put("adopt", c.adopt());
    } else if (m instanceof CopiesHeld c) {
      o.set("partitions", u32s(c.partitions()));
    } else if (m instanceof SyncCommits c) {
      o.put("app_id", c.appId()).put("shuffle_id", u(c.shuffleId()));
      o.set("map_attempts", u32s(c.mapAttempts()));
    } else if (m instanceof RegisterWorker r) {
      o.put("addr", r.addr()).put("memory_budget", r.memoryBudget())
          .put("incarnation", r.incarnation()).put("host", r.host()).put("zone", r.zone());
    } else if (m instanceof WorkerRegistered r) {
      o.put("worker_id", u(r.workerId())).put("heartbeat_ms", u(r.heartbeatMs()));
    } else if (m instanceof Heartbeat h) {
      o.put("worker_id", u(h.workerId())).put("buffered_bytes", h.bufferedBytes())
          .put("stored_bytes", h.storedBytes()).put("disk_full", h.diskFull())
          .put("pushed_bytes", h.pushedBytes().getAsLong())
          .put("fetched_bytes", h.fetchedBytes().getAsLong())
          .put("object_bytes", h.objectBytes().getAsLong());
    } else if (m instanceof PrepareShuffle p) {
      o.put("app_id", p.appId()).put("shuffle_id", u(p.shuffleId())).put("num_maps", u(p.numMaps()))
          .put("num_partitions", u(p.numPartitions()));
      o.set("partitions", u32s(p.partitions()));
      ArrayNode f = o.putArray("forward_to");
      p.forwardTo().forEach(f::add);
      o.put("app_stored_quota", p.appStoredQuota().getAsLong())
          .put("app_memory_share_ppm", p.appMemorySharePpm().getAsLong());
      if (p.continuedIn() == null) {
        o.putNull("continued_in");
      } else {
        o.set("continued_in", u32s(p.continuedIn()));
      }
      if (p.continuedAt() == null) {
        o.putNull("continued_at");
      } else {
        ArrayNode c = o.putArray("continued_at");
        p.continuedAt().forEach(c::add);
      }
    } else if (m instanceof MapCommitted c) {
      o.put("app_id", c.appId()).put("shuffle_id", u(c.shuffleId())).put("map_id", u(c.mapId()))
          .put("attempt_id", u(c.attemptId()));
      ArrayNode a = o.putArray("partitions");
      for (PartitionBytes s : c.partitions()) {
        a.addObject().put("partition", u(s.partition())).put("bytes", s.bytes());
      }
      o.put("durability", c.durability());
    } else if (m instanceof DeleteShuffle d) {
      o.put("app_id", d.appId()).put("shuffle_id", u(d.shuffleId()))
          .put("everywhere", d.everywhere());
    } else if (m instanceof DeleteApp d) {
      o.put("app_id", d.appId()).put("everywhere", d.everywhere());
    } else if (m instanceof PushBatch p) {
      PushHeader h = p.header();
      o.putObject("header").put("app_id", h.appId()).put("shuffle_id", u(h.shuffleId()))
          .put("partition", u(h.partition())).put("map_id", u(h.mapId()))
          .put("attempt_id", u(h.attemptId())).put("batch_seq", u(h.batchSeq()))
          .put("crc32c", u(h.crc32c()));
      o.put("payload", hex(p.payload()));
    } else if (m instanceof Fetch f) {
      o.put("app_id", f.appId()).put("shuffle_id", u(f.shuffleId())).put("partition", u(f.partition()))
          .put("start_map", u(f.startMap())).put("end_map", u(f.endMap()));
      if (f.resumeAfter() == null) {
        o.putNull("resume_after");
      } else {
        o.putObject("resume_after").put("map_id", u(f.resumeAfter().mapId()))
            .put("batch_seq", u(f.resumeAfter().batchSeq()));
      }
      if (f.runBytes().isPresent()) {
        o.put("run_bytes", f.runBytes().getAsLong());
      } else {
        o.putNull("run_bytes");
      }
      putOpt(o, "end_batch_seq", f.endBatchSeq());
      putOpt(o, "expected_attempt", f.expectedAttempt());
      putOpt(o, "flags", f.flags());
    } else if (m instanceof FetchRecords c) {
      ArrayNode a = o.putArray("batches");
      for (StoredBatch b : c.batches()) {
        a.addObject().put("map_id", u(b.mapId())).put("attempt_id", u(b.attemptId()))
            .put("batch_seq", u(b.batchSeq())).put("crc32c", u(b.crc32c()))
            .put("payload", hex(b.payload()));
      }
    } else if (m instanceof FetchChunk c) {
      ArrayNode a = o.putArray("batches");
      for (FetchedBatch b : c.batches()) {
        a.addObject().put("map_id", u(b.mapId())).put("batch_seq", u(b.batchSeq()))
            .put("crc32c", u(b.crc32c())).put("payload", hex(b.payload()));
      }
    } else if (m instanceof FetchEnd e) {
      o.put("batches", e.batches()).put("bytes", e.bytes());
    } else if (m instanceof WorkerStats s) {
      o.put("worker_id", u(s.workerId())).put("budget_bytes", s.budgetBytes())
          .put("buffered_bytes", s.bufferedBytes()).put("peak_buffered_bytes", s.peakBufferedBytes())
          .put("stored_bytes", s.storedBytes()).put("peak_rss_bytes", s.peakRssBytes())
          .put("process_budget_bytes", s.processBudgetBytes());
    }
    return o;
  }

  static int i(JsonNode n, String f) {
    JsonNode v = n.get(f);
    assertNotNull(v, "missing field " + f + " in " + n);
    return (int) v.asLong();
  }

  static long l(JsonNode n, String f) {
    JsonNode v = n.get(f);
    assertNotNull(v, "missing field " + f + " in " + n);
    return v.asLong();
  }

  static String s(JsonNode n, String f) {
    return n.get(f).asText();
  }

  static int[] ints(JsonNode a) {
    int[] out = new int[a.size()];
    for (int k = 0; k < out.length; k++) {
      out[k] = (int) a.get(k).asLong();
    }
    return out;
  }

  static List<String> strings(JsonNode a) {
    List<String> out = new ArrayList<>();
    for (JsonNode x : a) {
      out.add(x.asText());
    }
    return out;
  }

  static long[] longs(JsonNode a) {
    long[] out = new long[a.size()];
    for (int k = 0; k < out.length; k++) {
      out[k] = a.get(k).asLong();
    }
    return out;
  }

  static List<WorkerInfo> workersOf(JsonNode a) {
    List<WorkerInfo> out = new ArrayList<>();
    for (JsonNode w : a) {
      out.add(new WorkerInfo(i(w, "id"), s(w, "addr"), w.get("alive").asBoolean(), s(w, "host"),
          s(w, "zone")));
    }
    return out;
  }

  static ByteBuffer bytes(JsonNode n) {
    return ByteBuffer.wrap(HEX.parseHex(n.asText()));
  }

  static Message fromJson(JsonNode n) {
    String t = n.get("type").asText();
    switch (t) {
      case "Ok": return new Ok();
      case "Hello": return new Hello();
      case "Challenge": return new Challenge(bytes(n.get("nonce")));
      case "Authenticate": return new Authenticate(s(n, "app_id"), bytes(n.get("proof")));
      case "AppRegistered": return new AppRegistered(bytes(n.get("token")));
      case "Error": return new Message.Error(i(n, "code"), s(n, "message"));
      case "RegisterApp":
        return new RegisterApp(s(n, "app_id"), i(n, "lease_ms"),
            java.util.OptionalLong.of(l(n, "stored_quota")),
            java.util.OptionalLong.of(l(n, "memory_share_ppm")));
      case "RenewLease": return new RenewLease(s(n, "app_id"));
      case "UnregisterApp": return new UnregisterApp(s(n, "app_id"));
      case "RegisterShuffle": {
        List<InputSample> inputs = null;
        if (n.get("sample_inputs") != null && !n.get("sample_inputs").isNull()) {
          inputs = new ArrayList<>();
          for (JsonNode x : n.get("sample_inputs")) {
            inputs.add(new InputSample(l(x, "records"), i(x, "sampled")));
          }
        }
        List<SampleCount> counts = null;
        if (n.get("sample_counts") != null && !n.get("sample_counts").isNull()) {
          counts = new ArrayList<>();
          for (JsonNode x : n.get("sample_counts")) {
            counts.add(new SampleCount(i(x, "input"), i(x, "partition"), i(x, "count")));
          }
        }
        return new RegisterShuffle(s(n, "app_id"), i(n, "shuffle_id"), i(n, "num_maps"),
            i(n, "num_partitions"), inputs, counts);
      }
      case "ShufflePlacement":
        return new ShufflePlacement(workersOf(n.get("workers")), ints(n.get("partition_workers")),
            ints(n.get("partition_replicas")));
      case "CommitMap": {
        List<PartitionStat> ps = new ArrayList<>();
        for (JsonNode p : n.get("partitions")) {
          ps.add(new PartitionStat(i(p, "partition"), l(p, "bytes"), l(p, "records")));
        }
        List<RunStart> runs = null;
        if (n.get("run_starts") != null && !n.get("run_starts").isNull()) {
          runs = new ArrayList<>();
          for (JsonNode r : n.get("run_starts")) {
            runs.add(new RunStart(i(r, "partition"), i(r, "batch_seq")));
          }
        }
        return new CommitMap(s(n, "app_id"), i(n, "shuffle_id"), i(n, "map_id"), i(n, "attempt_id"), ps,
            runs);
      }
      case "CommitResult": {
        CommitStatus st = null;
        for (CommitStatus c : CommitStatus.values()) {
          if (c.jsonName.equals(s(n, "status"))) {
            st = c;
          }
        }
        assertNotNull(st, "status " + n.get("status"));
        return new CommitResult(st, i(n, "winning_attempt"));
      }
      case "UnregisterShuffle": return new UnregisterShuffle(s(n, "app_id"), i(n, "shuffle_id"));
      case "GetShuffleStatus":
        return new GetShuffleStatus(s(n, "app_id"), i(n, "shuffle_id"), optInt(n, "runs_from"),
            optInt(n, "runs_to"));
      case "ShuffleStatus":
        return new ShuffleStatus(i(n, "num_maps"), i(n, "num_partitions"), i(n, "committed_maps"),
            workersOf(n.get("workers")), ints(n.get("partition_workers")), ints(n.get("map_attempts")),
            longs(n.get("partition_bytes")), longs(n.get("partition_records")),
            ints(n.get("partition_replicas")),
            n.get("split_parents") == null || n.get("split_parents").isNull() ? null
                : ints(n.get("split_parents")),
            n.get("run_count") == null || n.get("run_count").isNull()
                ? java.util.OptionalLong.empty() : java.util.OptionalLong.of(l(n, "run_count")),
            mapRuns(n.get("run_starts")));
      case "SplitPartition":
        return new SplitPartition(s(n, "app_id"), i(n, "shuffle_id"), i(n, "slot"));
      case "PartitionSplit": return new PartitionSplit(i(n, "slot"), s(n, "addr"));
      case "PushRedirect": return new PushRedirect(i(n, "slot"), s(n, "addr"));
      case "ReportWorkerFailure": return new ReportWorkerFailure(s(n, "addr"));
      case "ReportLostCopy":
        return new ReportLostCopy(s(n, "app_id"), i(n, "shuffle_id"), i(n, "partition"),
            s(n, "worker_addr"));
      case "CheckCopies":
        return new CheckCopies(s(n, "app_id"), i(n, "shuffle_id"), ints(n.get("map_attempts")),
            ints(n.get("partitions")), longs(n.get("expected_bytes")),
            n.get("adopt").asBoolean());
      case "CopiesHeld": return new CopiesHeld(ints(n.get("partitions")));
      case "SyncCommits":
        return new SyncCommits(s(n, "app_id"), i(n, "shuffle_id"), ints(n.get("map_attempts")));
      case "RegisterWorker":
        return new RegisterWorker(s(n, "addr"), l(n, "memory_budget"), l(n, "incarnation"),
            s(n, "host"), s(n, "zone"));
      case "WorkerRegistered": return new WorkerRegistered(i(n, "worker_id"), i(n, "heartbeat_ms"));
      case "Heartbeat":
        return new Heartbeat(i(n, "worker_id"), l(n, "buffered_bytes"), l(n, "stored_bytes"),
            n.get("disk_full").asBoolean(), java.util.OptionalLong.of(l(n, "pushed_bytes")),
            java.util.OptionalLong.of(l(n, "fetched_bytes")),
            java.util.OptionalLong.of(l(n, "object_bytes")));
      case "PrepareShuffle":
        return new PrepareShuffle(s(n, "app_id"), i(n, "shuffle_id"), i(n, "num_maps"),
            i(n, "num_partitions"), ints(n.get("partitions")), strings(n.get("forward_to")),
            java.util.OptionalLong.of(l(n, "app_stored_quota")),
            java.util.OptionalLong.of(l(n, "app_memory_share_ppm")),
            n.get("continued_in") == null || n.get("continued_in").isNull() ? null
                : ints(n.get("continued_in")),
            n.get("continued_at") == null || n.get("continued_at").isNull() ? null
                : strings(n.get("continued_at")));
      case "MapCommitted": {
        List<PartitionBytes> ps = new ArrayList<>();
        for (JsonNode p : n.get("partitions")) {
          ps.add(new PartitionBytes(i(p, "partition"), l(p, "bytes")));
        }
        return new MapCommitted(s(n, "app_id"), i(n, "shuffle_id"), i(n, "map_id"), i(n, "attempt_id"), ps,
            i(n, "durability"));
      }
      case "DeleteShuffle":
        return new DeleteShuffle(s(n, "app_id"), i(n, "shuffle_id"), n.get("everywhere").asBoolean());
      case "DeleteApp": return new DeleteApp(s(n, "app_id"), n.get("everywhere").asBoolean());
      case "PushBatch": {
        JsonNode h = n.get("header");
        return new PushBatch(new PushHeader(s(h, "app_id"), i(h, "shuffle_id"), i(h, "partition"),
            i(h, "map_id"), i(h, "attempt_id"), i(h, "batch_seq"), i(h, "crc32c")), bytes(n.get("payload")));
      }
      case "Fetch": {
        JsonNode r = n.get("resume_after");
        ResumePoint rp = (r == null || r.isNull()) ? null : new ResumePoint(i(r, "map_id"), i(r, "batch_seq"));
        JsonNode cap = n.get("run_bytes");
        return new Fetch(s(n, "app_id"), i(n, "shuffle_id"), i(n, "partition"), i(n, "start_map"),
            i(n, "end_map"), rp, (cap == null || cap.isNull()) ? java.util.OptionalLong.empty()
                : java.util.OptionalLong.of(cap.asLong()), optInt(n, "end_batch_seq"),
            optInt(n, "expected_attempt"), optInt(n, "flags"));
      }
      case "FetchRecords": {
        List<StoredBatch> bs = new ArrayList<>();
        for (JsonNode b : n.get("batches")) {
          bs.add(new StoredBatch(i(b, "map_id"), i(b, "attempt_id"), i(b, "batch_seq"),
              i(b, "crc32c"), bytes(b.get("payload"))));
        }
        return new FetchRecords(bs);
      }
      case "FetchChunk": {
        List<FetchedBatch> bs = new ArrayList<>();
        for (JsonNode b : n.get("batches")) {
          bs.add(new FetchedBatch(i(b, "map_id"), i(b, "batch_seq"), i(b, "crc32c"), bytes(b.get("payload"))));
        }
        return new FetchChunk(bs);
      }
      case "FetchEnd": return new FetchEnd(l(n, "batches"), l(n, "bytes"));
      case "GetWorkerStats": return new GetWorkerStats();
      case "WorkerStats":
        return new WorkerStats(i(n, "worker_id"), l(n, "budget_bytes"), l(n, "buffered_bytes"),
            l(n, "peak_buffered_bytes"), l(n, "stored_bytes"), l(n, "peak_rss_bytes"),
            l(n, "process_budget_bytes"));
      default:
        fail("unknown message type " + t);
        return null;
    }
  }
}
