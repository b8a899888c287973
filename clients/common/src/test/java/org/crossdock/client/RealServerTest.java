package org.crossdock.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.IntUnaryOperator;
import org.crossdock.client.fetch.FetchMonitor;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.Segment;
import org.crossdock.protocol.Checksums;
import org.crossdock.protocol.ErrorCode;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.Structures.CommitStatus;
import org.crossdock.protocol.Structures.PartitionStat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The Java client against a real {@code crossdock standalone}. */
class RealServerTest {
  static CrossdockServer server;
  static CoordinatorClient coord;
  static ConnectionPool pool;
  static final int TIMEOUT = 30_000;

  @BeforeAll
  static void start() throws Exception {
    server = CrossdockServer.start();
    coord = new CoordinatorClient(server.addr(), 3000, TIMEOUT);
    pool = new ConnectionPool(3000);
  }

  @AfterAll
  static void stop() throws Exception {
    CrossdockServer.closeAll(pool, coord, server);
  }

  static byte[] payload(int map, int partition, int seq, int size) {
    byte[] b = new byte[size];
    byte[] tag = ("m" + map + "p" + partition + "s" + seq + ";").getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < size; i++) {
      b[i] = tag[i % tag.length];
    }
    return b;
  }

  /** What {@link #pushMap} pushed to {@code partition} for maps {@code [start, end)}, in order. */
  static byte[] expected(int partition, int start, int end, int batches, IntUnaryOperator sizeOfMap)
      throws IOException {
    ByteArrayOutputStream want = new ByteArrayOutputStream();
    for (int map = start; map < end; map++) {
      for (int s = 0; s < batches; s++) {
        want.write(payload(map, partition, s, sizeOfMap.applyAsInt(map)));
      }
    }
    return want.toByteArray();
  }

  static byte[] bytes(ByteBuffer b) {
    byte[] raw = new byte[b.remaining()];
    b.duplicate().get(raw);
    return raw;
  }

  static byte[] readAll(FetchScheduler f, List<int[]> order) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    FetchScheduler.Delivery d;
    while ((d = f.next()) != null) {
      Message.FetchedBatch b = d.batch();
      if (order != null) {
        order.add(new int[] {b.mapId(), b.batchSeq()});
      }
      out.write(bytes(b.payload()));
    }
    return out.toByteArray();
  }

  /** Registers {@code app} and one shuffle of it. */
  static Placement registerShuffle(String app, int shuffle, int maps, int partitions)
      throws Exception {
    byte[] token = coord.registerApp(app, 60_000);
    assertArrayEquals(CrossdockServer.token(app), token, "the Java and Rust tokens agree");
    pool.authenticateAs(app, token);
    return coord.registerShuffle(app, shuffle, maps, partitions);
  }

  /** Pushes {@code batches} batches of {@code size} bytes for every partition of one map. */
  static List<PartitionStat> pushMap(String app, int shuffle, Placement pl, int map, int attempt,
      int batches, int size, long window) throws Exception {
    List<PartitionStat> stats = new ArrayList<>();
    try (MapPusher p = new MapPusher(pool, app, shuffle, map, attempt, pl.numPartitions(), window, TIMEOUT)) {
      for (int part = 0; part < pl.numPartitions(); part++) {
        for (int s = 0; s < batches; s++) {
          p.push(part, pl.addrOf(part), payload(map, part, s, size), size);
        }
        stats.add(new PartitionStat(part, (long) batches * size, batches));
      }
      p.awaitAll();
      assertEquals(0, p.inFlightBytes());
    }
    return stats;
  }

  static FetchScheduler fetcher(Placement pl, String app, int shuffle, int part, int start, int end) {
    return fetcher(pl.addrOf(part), app, shuffle, part, start, end);
  }

  /** The reduce tasks' reader, reading maps [start, end) of one partition from {@code addr}. */
  static FetchScheduler fetcher(String addr, String app, int shuffle, int part, int start, int end) {
    return fetcher(addr, app, shuffle, part, start, end, new FetchMonitor(), TIMEOUT, 3);
  }

  /** The same, as one of the tasks of the executor whose reads share {@code monitor}. */
  static FetchScheduler fetcher(String addr, String app, int shuffle, int part, int start, int end,
      FetchMonitor monitor, int readTimeoutMs, int maxRetries) {
    FetchScheduler.Settings settings = new FetchScheduler.Settings(app, CrossdockServer.token(app),
        shuffle, FetchScheduler.Policy.ADAPTIVE, 48 << 20, 2 << 20, 3000, readTimeoutMs,
        maxRetries, 200);
    return new FetchScheduler(settings, List.of(new Segment(part, start, end, 1, List.of(addr))),
        monitor, new FetchSchedulerTest.Counting(), a -> false);
  }

  /** Commits map 0 of {@code shuffle}: {@code batches} batches of {@code size} per partition. */
  static void commitOneMap(String app, int shuffle, Placement pl, int batches, int size)
      throws Exception {
    coord.commitMap(app, shuffle, 0, 0, pushMap(app, shuffle, pl, 0, 0, batches, size, 64 << 20));
  }

  /** The first partition of {@code pl} placed on {@code addr}. */
  static int partOn(Placement pl, String addr) {
    for (int p = 0; p < pl.numPartitions(); p++) {
      if (pl.addrOf(p).equals(addr)) {
        return p;
      }
    }
    throw new AssertionError("no partition on " + addr);
  }

  /** The worker's error behind a read that no copy could serve. */
  static CrossdockException failure(FetchScheduler f) {
    FetchScheduler.SegmentFailed e = assertThrows(FetchScheduler.SegmentFailed.class, f::next);
    return assertInstanceOf(CrossdockException.class, e.getCause());
  }

  @Test
  void registerPushCommitFetch() throws Exception {
    String app = "java-basic";
    Placement pl = registerShuffle(app, 1, 3, 4);
    assertEquals(4, pl.numPartitions());
    assertEquals(2, pl.workerAddrs().size(), "4 partitions spread over the 2 workers");
    // Same sizes again: same placement.
    Placement again = coord.registerShuffle(app, 1, 3, 4);
    for (int p = 0; p < 4; p++) {
      assertEquals(pl.addrOf(p), again.addrOf(p));
    }
    for (int map = 0; map < 3; map++) {
      List<PartitionStat> stats = pushMap(app, 1, pl, map, 0, 2, 1000 + map, 1 << 20);
      Message.CommitResult r = coord.commitMap(app, 1, map, 0, stats);
      assertEquals(CommitStatus.COMMITTED, r.status());
    }
    Message.ShuffleStatus st = coord.shuffleStatus(app, 1);
    assertEquals(3, st.committedMaps());
    for (int p = 0; p < 4; p++) {
      List<int[]> order = new ArrayList<>();
      byte[] got;
      try (FetchScheduler f = fetcher(pl, app, 1, p, 0, 3)) {
        got = readAll(f, order);
      }
      assertArrayEquals(expected(p, 0, 3, 2, map -> 1000 + map), got, "partition " + p);
      assertEquals(6, order.size());
      for (int i = 0; i < 6; i++) {
        assertArrayEquals(new int[] {i / 2, i % 2}, order.get(i), "(map, seq) order");
      }
      assertEquals(3 * 2 * 1000 + 2 * 1 + 2 * 2, st.partitionBytes()[p]);
    }
    // Pushes of another attempt after map 0 committed are refused.
    // The pusher reports that it lost the race instead of failing, and drops later batches.
    try (MapPusher p = new MapPusher(pool, app, 1, 0, 7, 4, 1 << 20, TIMEOUT)) {
      p.push(0, pl.addrOf(0), payload(0, 0, 0, 10), 10);
      p.awaitAll();
      assertTrue(p.lostRace());
      p.push(1, pl.addrOf(1), payload(0, 1, 0, 10), 10);
      assertEquals(0, p.inFlightBytes());
      p.awaitAll();
      assertEquals(20, p.pushedBytes());
    }
    coord.unregisterShuffle(app, 1);
    // Two attempts that both pushed: the first to commit wins, the other is rejected.
    Placement pl2 = coord.registerShuffle(app, 9, 1, 2);
    List<PartitionStat> a1 = pushMap(app, 9, pl2, 0, 1, 1, 100, 1 << 20);
    List<PartitionStat> a2 = pushMap(app, 9, pl2, 0, 2, 2, 100, 1 << 20);
    assertEquals(CommitStatus.COMMITTED, coord.commitMap(app, 9, 0, 2, a2).status());
    Message.CommitResult r = coord.commitMap(app, 9, 0, 1, a1);
    assertEquals(CommitStatus.REJECTED, r.status());
    assertEquals(2, r.winningAttempt());
    assertEquals(CommitStatus.ALREADY_COMMITTED, coord.commitMap(app, 9, 0, 2, a2).status());
    try (FetchScheduler f = fetcher(pl2, app, 9, 1, 0, 1)) {
      assertEquals(200, readAll(f, null).length, "only the winner's batches are read");
    }
    coord.unregisterShuffle(app, 1);
    coord.unregisterApp(app);
  }

  @Test
  void mapRangeFetchReadsOnlyThoseMaps() throws Exception {
    String app = "java-range";
    Placement pl = registerShuffle(app, 2, 4, 2);
    for (int map = 0; map < 4; map++) {
      coord.commitMap(app, 2, map, 0, pushMap(app, 2, pl, map, 0, 3, 500, 1 << 20));
    }
    List<int[]> order = new ArrayList<>();
    byte[] got;
    try (FetchScheduler f = fetcher(pl, app, 2, 1, 1, 3)) {
      got = readAll(f, order);
    }
    assertEquals(6 * 500, got.length);
    assertEquals(6, order.size());
    for (int[] o : order) {
      assertTrue(o[0] == 1 || o[0] == 2, "map " + o[0] + " is outside [1, 3)");
    }
    assertArrayEquals(expected(1, 1, 3, 3, map -> 500), got);
    coord.unregisterApp(app);
  }

  @Test
  void pushWindowBoundsBytesInFlight() throws Exception {
    String app = "java-window";
    Placement pl = registerShuffle(app, 3, 1, 2);
    long window = 256 << 10;
    int size = 64 << 10;
    try (MapPusher p = new MapPusher(pool, app, 3, 0, 0, 2, window, TIMEOUT)) {
      for (int s = 0; s < 200; s++) {
        int part = s % 2;
        p.push(part, pl.addrOf(part), payload(0, part, s / 2, size), size);
        assertTrue(p.inFlightBytes() <= window, "in flight " + p.inFlightBytes());
      }
      // A batch larger than the whole window still goes, alone.
      p.push(0, pl.addrOf(0), payload(0, 0, 100, 600 << 10), 600 << 10);
      p.awaitAll();
      assertTrue(p.peakInFlightBytes() <= 600 << 10);
      assertTrue(p.peakInFlightBytes() >= size, "pushes were pipelined");
      assertEquals(200 * (long) size + (600 << 10), p.pushedBytes());
      List<PartitionStat> stats = List.of(
          new PartitionStat(0, 100L * size + (600 << 10), 101), new PartitionStat(1, 100L * size, 100));
      assertEquals(CommitStatus.COMMITTED, coord.commitMap(app, 3, 0, 0, stats).status());
    }
    coord.unregisterApp(app);
  }

  @Test
  void commitWithWrongSizesIsAMismatch() throws Exception {
    String app = "java-mismatch";
    Placement pl = registerShuffle(app, 4, 1, 1);
    pushMap(app, 4, pl, 0, 0, 2, 100, 1 << 20);
    CrossdockException e = assertThrows(CrossdockException.class,
        () -> coord.commitMap(app, 4, 0, 0, List.of(new PartitionStat(0, 150, 2))));
    assertEquals(ErrorCode.COMMIT_MISMATCH, e.code());
    coord.unregisterApp(app);
  }

  @Test
  void corruptCrcIsBadChecksum() throws Exception {
    String app = "java-crc";
    Placement pl = registerShuffle(app, 5, 1, 1);
    byte[] data = payload(0, 0, 0, 128);
    int crc = Checksums.crc32c(data, 0, data.length);
    RpcConnection c = pool.get(pl.addrOf(0));
    CompletableFuture<Message> f =
        c.push(new Message.PushHeader(app, 5, 0, 0, 0, 0, crc ^ 1), data, 0, data.length);
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    assertEquals(ErrorCode.BAD_CHECKSUM, ((CrossdockException) e.getCause()).code());
    // The connection stays usable and the right CRC is accepted.
    Message ok = c.push(new Message.PushHeader(app, 5, 0, 0, 0, 0, crc), data, 0, data.length)
        .get(10, TimeUnit.SECONDS);
    assertInstanceOf(Message.Ok.class, ok);
    coord.unregisterApp(app);
  }

  @Test
  void unknownAppIsRefused() throws Exception {
    String never = "java-never-registered";
    try (CoordinatorClient owner = new CoordinatorClient(coord.addr(), 3000, TIMEOUT, never,
        CrossdockServer.token(never))) {
      CrossdockException e = assertThrows(CrossdockException.class,
          () -> owner.registerShuffle(never, 1, 1, 1));
      assertEquals(ErrorCode.UNKNOWN_APP, e.code());
      assertEquals(CrossdockException.Kind.REMOTE, e.kind());
    }
    // Without the app's token: unauthorized, whatever the app.
    CrossdockException e = assertThrows(CrossdockException.class,
        () -> coord.registerShuffle(never, 1, 1, 1));
    assertEquals(ErrorCode.UNAUTHORIZED, e.code());
    // And on a worker: a push for an app it does not know, then for one whose token the
    // connection did not prove.
    String app = "java-known";
    Placement pl = registerShuffle(app, 1, 1, 1);
    pool.authenticateAs("java-unknown", CrossdockServer.token("java-unknown"));
    try (MapPusher p = new MapPusher(pool, "java-unknown", 1, 0, 0, 1, 1 << 20, TIMEOUT)) {
      p.push(0, pl.addrOf(0), new byte[10], 10);
      CrossdockException pe = assertThrows(CrossdockException.class, p::awaitAll);
      assertEquals(ErrorCode.UNKNOWN_APP, pe.code());
    }
    try (MapPusher p = new MapPusher(pool, app, 1, 0, 0, 1, 1 << 20, TIMEOUT)) {
      p.push(0, pl.addrOf(0), new byte[10], 10);
      CrossdockException pe = assertThrows(CrossdockException.class, p::awaitAll);
      assertEquals(ErrorCode.UNAUTHORIZED, pe.code());
    }
    try (FetchScheduler f = new FetchScheduler(new FetchScheduler.Settings(app, new byte[32], 1,
        FetchScheduler.Policy.ADAPTIVE, 48 << 20, 2 << 20, 3000, TIMEOUT, 3, 200),
        List.of(new Segment(0, 0, 1, 1, List.of(pl.addrOf(0)))), new FetchMonitor(),
        new FetchSchedulerTest.Counting(), a -> false)) {
      assertEquals(ErrorCode.UNAUTHORIZED, failure(f).code(), "a fetch with a forged token");
    }
    coord.unregisterApp(app);
  }

  @Test
  void fetchOfUncommittedMapsIsRefused() throws Exception {
    String app = "java-incomplete";
    Placement pl = registerShuffle(app, 1, 2, 1);
    coord.commitMap(app, 1, 0, 0, pushMap(app, 1, pl, 0, 0, 1, 10, 1 << 20));
    try (FetchScheduler f = fetcher(pl, app, 1, 0, 0, 2)) {
      assertEquals(ErrorCode.SHUFFLE_NOT_COMPLETE, failure(f).code());
    }
    try (FetchScheduler f = fetcher(pl, app, 1, 0, 0, 1)) {
      assertEquals(10, readAll(f, null).length);
    }
    coord.unregisterApp(app);
  }

  /**
   * The acknowledgement timeout runs from the oldest batch unacknowledged, not from the pusher's
   * last progress: a map that computes longer than the timeout before its next batch, and then
   * fills its window before the worker answers, waits for the answer instead of failing at once.
   */
  @Test
  void aMapThatComputedLongerThanTheAckTimeoutStillWaitsForItsFirstAnswers() throws Exception {
    String app = "java-ack-clock";
    Placement pl = registerShuffle(app, 1, 1, 1);
    // The worker's answers take 100 ms; the timeout is 1 s and the map computes for 1.3 s
    // between its first push (acknowledged) and the next ones, two batches over the window.
    try (SlowProxy proxy = new SlowProxy(pl.addrOf(0), 100, 64 << 10);
        MapPusher p = new MapPusher(pool, app, 1, 0, 0, 1, 64 << 10, 1000)) {
      p.push(0, proxy.addr(), payload(0, 0, 0, 1000), 1000);
      p.awaitAll();
      Thread.sleep(1300);
      p.push(0, proxy.addr(), payload(0, 0, 1, 60_000), 60_000);
      p.push(0, proxy.addr(), payload(0, 0, 2, 60_000), 60_000);
      p.awaitAll();
      assertEquals(3, p.pushedBatches());
    }
    coord.unregisterApp(app);
  }

  /**
   * A batch the sending thread cannot send (here one whose length passes its buffer, a caller's
   * defect) fails the map at once with the cause, as this client's own failure (no worker
   * reported as unreachable), instead of the thread dying and the map waiting out its
   * acknowledgement timeout for a batch never sent.
   */
  @Test
  void aBatchItsThreadCannotSendFailsTheMapAtOnce() throws Exception {
    String app = "java-push-thread";
    Placement pl = registerShuffle(app, 1, 1, 1);
    long start = System.nanoTime();
    try (MapPusher p = new MapPusher(pool, app, 1, 0, 0, 1, 1 << 20, TIMEOUT)) {
      p.push(0, pl.addrOf(0), new byte[100], 200);
      CrossdockException e = assertThrows(CrossdockException.class, p::awaitAll);
      assertEquals(CrossdockException.Kind.LOCAL, e.kind(), e.getMessage());
      assertInstanceOf(IndexOutOfBoundsException.class, e.getCause(), e.getMessage());
      assertNull(p.unreachableWorker(), "no worker is to blame");
    }
    assertTrue(System.nanoTime() - start < TIMEOUT * 1_000_000L / 2,
        "failed at once, not at the acknowledgement timeout");
    coord.unregisterApp(app);
  }

  @Test
  void fetchResumesAfterABrokenConnection() throws Exception {
    String app = "java-resume";
    Placement pl = registerShuffle(app, 1, 1, 1);
    int size = 3 << 20;
    coord.commitMap(app, 1, 0, 0, pushMap(app, 1, pl, 0, 0, 4, size, 64 << 20));
    // Paced at 256 KiB per 20 ms, the 12 MiB take about a second; the connection is cut as
    // soon as the first 3 MiB batch is delivered, long before the rest can have arrived.
    try (SlowProxy proxy = new SlowProxy(pl.addrOf(0), 20, 256 << 10);
        FetchScheduler f = fetcher(proxy.addr(), app, 1, 0, 0, 1)) {
      ByteArrayOutputStream got = new ByteArrayOutputStream();
      Message.FetchedBatch b = f.next().batch();
      assertEquals(0, b.batchSeq());
      proxy.cut();
      got.write(bytes(b.payload()));
      got.write(readAll(f, null));
      assertEquals(2, proxy.connections(), "the read went on over a second connection");
      assertArrayEquals(expected(0, 0, 1, 4, map -> size), got.toByteArray(),
          "every byte once, in order");
    }
    coord.unregisterApp(app);
  }

  /** The read timeout of {@link #anExecutorsReadsShareOneConnectionPerWorker}'s reads. */
  private static final int READ_TIMEOUT_MS = 3000;

  @Test
  void anExecutorsReadsShareOneConnectionPerWorker() throws Exception {
    String app = "java-reuse";
    Placement pl = registerShuffle(app, 1, 1, 2);
    commitOneMap(app, 1, pl, 2, 1000);
    FetchMonitor monitor = new FetchMonitor();
    try (SlowProxy proxy = new SlowProxy(pl.addrOf(0), 0, 64 << 10)) {
      for (int i = 0; i < 3; i++) {
        // Idle past the read timeout between reads: an idle connection does not time out.
        // (3 s: an answer slower than the timeout would retry on a second connection, and a
        // debug server on a loaded machine can take a second to answer.)
        Thread.sleep(i == 2 ? READ_TIMEOUT_MS + 500 : 0);
        try (FetchScheduler f =
            fetcher(proxy.addr(), app, 1, 0, 0, 1, monitor, READ_TIMEOUT_MS, 3)) {
          assertArrayEquals(expected(0, 0, 1, 2, map -> 1000), readAll(f, null), "read " + i);
        }
      }
      assertEquals(1, proxy.connections(), "three reads, one connection");
      assertEquals(1, monitor.connectionsOpened());
      assertEquals(2, monitor.connectionsReused());
      assertEquals(1, monitor.connectionsIdle(), "given back after each read");
      // A read of another shuffle of the app takes it too (the shuffle is named per request).
      Placement other = coord.registerShuffle(app, 2, 1, 4);
      commitOneMap(app, 2, other, 1, 500);
      int part = partOn(other, pl.addrOf(0)); // 4 partitions over 2 workers: some are there
      try (FetchScheduler f =
          fetcher(proxy.addr(), app, 2, part, 0, 1, monitor, READ_TIMEOUT_MS, 3)) {
        assertArrayEquals(expected(part, 0, 1, 1, map -> 500), readAll(f, null));
      }
      assertEquals(1, proxy.connections());
      assertEquals(3, monitor.connectionsReused());
      // Another app never gets it: its token was not proved on it.
      String app2 = "java-reuse-2";
      Placement pl2 = registerShuffle(app2, 1, 1, 4);
      commitOneMap(app2, 1, pl2, 1, 300);
      int part2 = partOn(pl2, pl.addrOf(0));
      try (FetchScheduler f =
          fetcher(proxy.addr(), app2, 1, part2, 0, 1, monitor, READ_TIMEOUT_MS, 3)) {
        assertArrayEquals(expected(part2, 0, 1, 1, map -> 300), readAll(f, null));
      }
      assertEquals(2, proxy.connections(), "the second app opened its own");
      assertEquals(2, monitor.connectionsIdle());
      coord.unregisterApp(app2);
      // Closed on the worker's side while idle, they leave the idle list at once.
      proxy.cut();
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (monitor.connectionsIdle() > 0 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      assertEquals(0, monitor.connectionsIdle(), "closed connections are not kept");
    }
    coord.unregisterApp(app);
  }

  @Test
  void aReadOnAConnectionThatDiedWhileIdleUsesUpNoRetry() throws Exception {
    String app = "java-stale";
    Placement pl = registerShuffle(app, 1, 1, 1);
    commitOneMap(app, 1, pl, 2, 1000);
    FetchMonitor monitor = new FetchMonitor();
    try (SlowProxy proxy = new SlowProxy(pl.addrOf(0), 0, 64 << 10)) {
      try (FetchScheduler f = fetcher(proxy.addr(), app, 1, 0, 0, 1, monitor, 1000, 0)) {
        readAll(f, null);
      }
      // The idle connection's peer goes silent (no close, no reset): the next read's request
      // on it gets no answer and times out. Allowed no retry, the read still succeeds, over a
      // new connection: the stale one's failure was not the worker's.
      proxy.freeze();
      try (FetchScheduler f = fetcher(proxy.addr(), app, 1, 0, 0, 1, monitor, 1000, 0)) {
        assertArrayEquals(expected(0, 0, 1, 2, map -> 1000), readAll(f, null));
      }
      assertEquals(1, monitor.connectionsReused(), "the second read took the idle connection");
      assertEquals(2, proxy.connections(), "and went on over a new one");
    }
    coord.unregisterApp(app);
  }

  @Test
  void aReadClosedWithAnswersOnTheWayDoesNotGiveItsConnectionBack() throws Exception {
    String app = "java-unfinished";
    Placement pl = registerShuffle(app, 1, 1, 1);
    int size = 3 << 20;
    commitOneMap(app, 1, pl, 4, size);
    FetchMonitor monitor = new FetchMonitor();
    // Paced at 256 KiB per 20 ms, then frozen after the first batch: when the read is closed,
    // the rest is still on its way.
    try (SlowProxy proxy = new SlowProxy(pl.addrOf(0), 20, 256 << 10)) {
      try (FetchScheduler f = fetcher(proxy.addr(), app, 1, 0, 0, 1, monitor, TIMEOUT, 3)) {
        assertEquals(0, f.next().batch().batchSeq());
        proxy.freeze(); // the rest stays on its way however long the close takes
      }
      assertEquals(0, monitor.connectionsIdle(), "a connection with answers on the way is closed");
      try (FetchScheduler f = fetcher(proxy.addr(), app, 1, 0, 0, 1, monitor, TIMEOUT, 3)) {
        assertArrayEquals(expected(0, 0, 1, 4, map -> size), readAll(f, null));
      }
      assertEquals(2, proxy.connections(), "the next read opened its own");
      assertEquals(0, monitor.connectionsReused());
    }
    coord.unregisterApp(app);
  }

  @Test
  void anAppIsRefusedPastTheStoredQuotaItAskedFor() throws Exception {
    String app = "java-quota";
    // 250 kB stored per worker, where the test cluster's workers have no quota of their own.
    byte[] token = coord.registerApp(app, 60_000, 250_000, 0);
    pool.authenticateAs(app, token);
    Placement pl = coord.registerShuffle(app, 1, 1, 1);
    try (MapPusher p = new MapPusher(pool, app, 1, 0, 0, 1, 1 << 20, TIMEOUT)) {
      IOException e = assertThrows(IOException.class, () -> {
        for (int s = 0; s < 10; s++) {
          p.push(0, pl.addrOf(0), payload(0, 0, s, 100_000), 100_000);
          p.awaitAll();
        }
      });
      assertTrue(e.getMessage().contains("limit_exceeded")
          && e.getMessage().contains("quota of 250000 bytes"), e.getMessage());
      assertEquals(300_000, p.pushedBytes(), "two batches fit, the third is refused");
    }
    // A share above the whole is refused at registration.
    CrossdockException e = assertThrows(CrossdockException.class,
        () -> coord.registerApp("java-quota-2", 60_000, 0, 1_000_001));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    coord.unregisterApp(app);
  }

  @Test
  void unreachableCoordinatorFailsFast() throws Exception {
    String addr = CrossdockServer.unusedAddr();
    long t0 = System.nanoTime();
    CrossdockException e = assertThrows(CrossdockException.class,
        () -> new CoordinatorClient(addr, 2000, 5000));
    assertTrue(e.isTransport());
    assertTrue(e.getMessage().contains(addr), e.getMessage());
    assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5));
  }

  @Test
  void unreachableWorkerFailsThePushFast() throws Exception {
    String addr = CrossdockServer.unusedAddr();
    long t0 = System.nanoTime();
    try (MapPusher p = new MapPusher(pool, "java-noworker", 1, 0, 0, 1, 1 << 20, TIMEOUT)) {
      IOException e = assertThrows(IOException.class, () -> {
        p.push(0, addr, new byte[10], 10);
        p.awaitAll();
      });
      assertTrue(e.getMessage().contains("Crossdock worker") && e.getMessage().contains(addr),
          e.getMessage());
    }
    try (FetchScheduler f = fetcher(addr, "a", 1, 0, 0, 1)) {
      CrossdockException e = failure(f);
      assertTrue(e.isTransport() && e.getMessage().contains(addr), e.getMessage());
    }
    assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(10));
  }

  @Test
  void payloadViewsAreIndependent() {
    ByteBuffer b = ByteBuffer.wrap(new byte[] {1, 2, 3});
    assertEquals(Checksums.crc32c(b), Checksums.crc32c(new byte[] {1, 2, 3}, 0, 3));
    assertEquals(0, b.position());
  }
}
