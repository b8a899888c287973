package org.crossdock.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import org.crossdock.client.fetch.FetchMonitor;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.RunReader;
import org.crossdock.client.fetch.Segment;
import org.crossdock.protocol.AttemptIds;
import org.crossdock.protocol.ErrorCode;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.Structures.CommitStatus;
import org.crossdock.protocol.Structures.PartitionStat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The merge's run reader against a real {@code crossdock standalone}: runs read a segment at a
 * time (the worker's per-map cap), interleaved as a merge consumes them, each batch exactly once
 * and in order, empty runs included, and every byte of memory given back.
 */
@org.junit.jupiter.api.Timeout(120) // a request kept back and never sent would hang a read
class RunReaderTest {
  static final String APP = "java-runs";
  static final int MAPS = 4;
  static final int PARTS = 2;
  static CrossdockServer server;
  static CoordinatorClient coord;
  static ConnectionPool pool;
  static Placement pl;

  /** Batches map {@code m} pushes to partition {@code p}: map 1 writes nothing to partition 1. */
  static int batches(int m, int p) {
    return new int[][] {{3, 3}, {5, 0}, {1, 1}, {4, 4}}[m][p];
  }

  static int size(int m) {
    return 1000 + m;
  }

  @BeforeAll
  static void start() throws Exception {
    server = CrossdockServer.start();
    coord = new CoordinatorClient(server.addr(), 3000, RealServerTest.TIMEOUT);
    pool = new ConnectionPool(3000);
    pool.authenticateAs(APP, coord.registerApp(APP, 60_000));
    pl = coord.registerShuffle(APP, 1, MAPS, PARTS);
    for (int m = 0; m < MAPS; m++) {
      List<PartitionStat> stats = new ArrayList<>();
      try (MapPusher p = new MapPusher(pool, APP, 1, m, 0, PARTS, 1 << 20, RealServerTest.TIMEOUT)) {
        for (int part = 0; part < PARTS; part++) {
          for (int s = 0; s < batches(m, part); s++) {
            p.push(part, pl.addrOf(part), RealServerTest.payload(m, part, s, size(m)), size(m));
          }
          stats.add(new PartitionStat(part, (long) batches(m, part) * size(m), batches(m, part)));
        }
        p.awaitAll();
      }
      assertEquals(CommitStatus.COMMITTED, coord.commitMap(APP, 1, m, 0, stats).status());
    }
  }

  @AfterAll
  static void stop() throws Exception {
    CrossdockServer.closeAll(pool, coord, server);
  }

  static List<Segment> runs(long cap, List<String> extraFirstCopy) {
    List<Segment> runs = new ArrayList<>();
    for (int p = 0; p < PARTS; p++) {
      List<String> copies = new ArrayList<>(extraFirstCopy);
      copies.add(pl.addrOf(p));
      for (int m = 0; m < MAPS; m++) {
        runs.add(new Segment(p, m, m + 1, cap, copies, cap));
      }
    }
    return runs;
  }

  /**
   * Reads every run, one batch of each in turn (as a merge of equal-paced runs does), checking
   * each batch is its run's next one; returns the bytes per run and the requests made.
   */
  static long readInterleaved(long cap, List<String> extraFirstCopy) throws Exception {
    return readInterleaved(runs(cap, extraFirstCopy), extraFirstCopy);
  }

  static long readInterleaved(List<Segment> runs, List<String> extraFirstCopy) throws Exception {
    // The extra copy counts as local, so it is tried first and must be given up on.
    return read(runs, extraFirstCopy::contains, new FetchMonitor(), 200).requests();
  }

  /** What a read did: requests sent, and times it left a slow copy. */
  record Read(long requests, long moves) {}

  /** Reads {@code runs} as {@link #readInterleaved} does, with the given reader settings. */
  static Read read(List<Segment> runs, java.util.function.Predicate<String> local,
      FetchMonitor monitor, long moveAwayMs) throws Exception {
    FetchSchedulerTest.Counting memory = new FetchSchedulerTest.Counting();
    List<ByteArrayOutputStream> got = new ArrayList<>();
    int[] nextSeq = new int[runs.size()];
    Read read;
    RunReader.Settings settings = new RunReader.Settings(APP, CrossdockServer.token(APP), 1, 3000,
        RealServerTest.TIMEOUT, 3, moveAwayMs);
    try (RunReader reader = new RunReader(settings, runs, monitor, memory, local)) {
      for (int i = 0; i < runs.size(); i++) {
        got.add(new ByteArrayOutputStream());
      }
      boolean[] ended = new boolean[runs.size()];
      int open = runs.size();
      while (open > 0) {
        for (int i = 0; i < runs.size(); i++) {
          if (ended[i]) {
            continue;
          }
          FetchScheduler.Delivery d = reader.next(runs.get(i));
          if (d == null) {
            ended[i] = true;
            open--;
            continue;
          }
          Message.FetchedBatch b = d.batch();
          assertEquals(runs.get(i).startMap, b.mapId(), "a run holds its own map's batches");
          assertEquals(nextSeq[i]++, b.batchSeq(), "each batch once, in order");
          got.get(i).write(RealServerTest.bytes(b.payload()));
        }
      }
      read = new Read(reader.requests(), reader.moves());
      assertTrue(reader.peakBufferedBytes() > 0);
    }
    assertEquals(0, memory.held, "every byte of memory given back");
    for (int i = 0; i < runs.size(); i++) {
      Segment s = runs.get(i);
      assertArrayEquals(RealServerTest.expected(s.partition, s.startMap, s.endMap,
          batches(s.startMap, s.partition), m -> size(m)), got.get(i).toByteArray(),
          "run " + s);
    }
    return read;
  }

  @Test
  void aOneByteCapReadsEveryRunOneBatchAtATime() throws Exception {
    // One request per batch, and one more that finds the end (an empty run: just that one).
    long batches = 0;
    for (int m = 0; m < MAPS; m++) {
      for (int p = 0; p < PARTS; p++) {
        batches += batches(m, p);
      }
    }
    assertEquals(batches + MAPS * PARTS, readInterleaved(1, List.of()));
  }

  @Test
  void aCapOfSeveralBatchesEndsARunOnItsShortAnswer() throws Exception {
    // 2500 bytes: three ~1000-byte batches per request. Runs of 3, 4 or 5 batches take two
    // requests (the second either finds nothing or is short), runs of 0 or 1 take one.
    int want = 0;
    for (int m = 0; m < MAPS; m++) {
      for (int p = 0; p < PARTS; p++) {
        want += batches(m, p) >= 3 ? 2 : 1;
      }
    }
    assertEquals(want, readInterleaved(2500, List.of()));
  }

  @Test
  void aRunWhoseFirstCopyIsUnreachableIsReadFromTheOther() throws Exception {
    readInterleaved(1500, List.of(CrossdockServer.unusedAddr()));
  }

  /**
   * Partition 0's runs are first asked of the other worker, which does not hold the partition and
   * refuses; it counts as local, so by the monitor alone every request would go to it first. Each
   * run is asked of it once: after the refusal, the run's later requests go to its own copy.
   * (Partition 1's runs are read from that worker alone.)
   */
  @Test
  void aCopyThatRefusedARunIsNotAskedForItAgain() throws Exception {
    String other = pl.addrOf(1);
    assertTrue(!other.equals(pl.addrOf(0)), "the two partitions on different workers");
    List<Segment> runs = new ArrayList<>();
    int want = 0;
    for (int p = 0; p < PARTS; p++) {
      List<String> copies = p == 0 ? List.of(other, pl.addrOf(0)) : List.of(other);
      for (int m = 0; m < MAPS; m++) {
        runs.add(new Segment(p, m, m + 1, 2500, copies, 2500));
        want += batches(m, p) >= 3 ? 2 : 1; // as in aCapOfSeveralBatchesEndsARunOnItsShortAnswer
      }
    }
    long requests = read(runs, other::equals, new FetchMonitor(), 200).requests();
    assertEquals(want + MAPS, requests, "one refused request per run of partition 0");
  }

  @Test
  void moreRunsThanOneConnectionTakesAtOnceAreAllRead() throws Exception {
    // 50 readers' worth of the same 8 runs, 400 requests at the start against one worker:
    // more than a connection carries unanswered (RunReader.MAX_OUTSTANDING), the rest wait.
    List<Segment> many = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      many.addAll(runs(2500, List.of()));
    }
    assertTrue(many.size() > 2 * RunReader.MAX_OUTSTANDING);
    readInterleaved(many, List.of());
  }

  /**
   * The same 400 runs, each first asked of a worker that cannot be reached: 128 are written to
   * its connection and the rest kept back; when the connection fails, every one of them fails
   * over to the run's other copy, and the executor's monitor counts nothing in flight from the
   * unreachable worker afterwards (the kept-back ones were once left counted there for good).
   */
  @Test
  void requestsKeptBackForAnUnreachableWorkerFailOverAndAreSettled() throws Exception {
    String nobody = CrossdockServer.unusedAddr();
    List<Segment> many = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      many.addAll(runs(2500, List.of(nobody)));
    }
    FetchMonitor monitor = new FetchMonitor();
    read(many, nobody::equals, monitor, 200);
    assertEquals(0, monitor.inFlight(nobody), "nothing left counted in flight from " + nobody);
    for (int p = 0; p < PARTS; p++) {
      assertEquals(0, monitor.inFlight(pl.addrOf(p)), "settled: " + pl.addrOf(p));
    }
  }

  /**
   * 400 runs, 200 on each worker, each worker behind a slowed link (100 ms per 64 KiB): 128
   * requests are written to each connection and 72 kept back. Once the first answers arrive (the
   * connection is up, and about 45 requests are still kept back), both connections are cut: what
   * was unanswered is asked again on a new connection, and what was kept back follows it there.
   * Every batch arrives once, in order, and the monitor settles every byte it counted.
   */
  @Test
  void aConnectionCutWhileRequestsAreKeptBackForItLosesNone() throws Exception {
    try (SlowProxy a = new SlowProxy(pl.addrOf(0), 100, 64 << 10);
        SlowProxy b = new SlowProxy(pl.addrOf(1), 100, 64 << 10)) {
      List<Segment> many = new ArrayList<>();
      for (int i = 0; i < 50; i++) {
        for (int p = 0; p < PARTS; p++) {
          String via = p == 0 ? a.addr() : b.addr();
          for (int m = 0; m < MAPS; m++) {
            many.add(new Segment(p, m, m + 1, 2500, List.of(via), 2500));
          }
        }
      }
      FetchMonitor monitor = new FetchMonitor();
      long askedOfEach = 200L * 2500;
      java.util.concurrent.atomic.AtomicBoolean cut = new java.util.concurrent.atomic.AtomicBoolean();
      Thread cutter = new Thread(() -> {
        try {
          long deadline = System.nanoTime() + 30_000_000_000L;
          // Every first request asked (counted in flight, written or kept back), then the first
          // answers arrived on both: cut then, not during the connections' handshakes.
          if (awaitUntil(() -> monitor.inFlight(a.addr()) >= askedOfEach
                  && monitor.inFlight(b.addr()) >= askedOfEach, deadline)
              && awaitUntil(() -> monitor.inFlight(a.addr()) < askedOfEach
                  && monitor.inFlight(b.addr()) < askedOfEach, deadline)) {
            a.cut();
            b.cut();
            cut.set(true);
          }
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      });
      cutter.start();
      read(many, x -> false, monitor, Long.MAX_VALUE);
      cutter.join();
      assertTrue(cut.get(), "cut during the read");
      assertTrue(a.connections() >= 2 && b.connections() >= 2, "each read on after a reconnect");
      assertEquals(0, monitor.inFlight(a.addr()), "settled: " + a.addr());
      assertEquals(0, monitor.inFlight(b.addr()), "settled: " + b.addr());
    }
  }

  /** Polls {@code condition} every millisecond until it holds (true) or {@code deadline} passes. */
  static boolean awaitUntil(java.util.function.BooleanSupplier condition, long deadline)
      throws InterruptedException {
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(1);
    }
    return true;
  }

  /**
   * Every run has two copies, the first behind a crawling link (300 ms per 4 KiB), and the
   * monitor spreads the heads over both. The merge, blocked on a head that the slow copy holds,
   * leaves it after 200 ms: the connection is dropped and what was asked of it is asked of the
   * other copy from where it stopped, also (with 800 runs, about 200 heads per slow copy) what
   * waited its turn there, which would otherwise wait for a connection that is gone. Each batch
   * still arrives once and in order, and the monitor settles every byte it counted in flight.
   */
  @Test
  void aMergeBlockedOnASlowCopyLeavesItAndReadsEveryBatchOnce() throws Exception {
    java.util.Map<String, SlowProxy> slow = new java.util.HashMap<>();
    try {
      for (int p = 0; p < PARTS; p++) {
        if (!slow.containsKey(pl.addrOf(p))) {
          slow.put(pl.addrOf(p), new SlowProxy(pl.addrOf(p), 300, 4096));
        }
      }
      for (int copies : new int[] {1, 100}) {
        List<Segment> runs = slowFirst(copies, slow);
        assertTrue(copies == 1 || runs.size() / 2 / slow.size() > RunReader.MAX_OUTSTANDING);
        FetchMonitor monitor = new FetchMonitor();
        java.util.Map<String, Integer> before = new java.util.HashMap<>();
        slow.values().forEach(proxy -> before.put(proxy.addr(), proxy.connections()));
        Read r = read(runs, a -> false, monitor, 200);
        assertTrue(r.moves() >= 1, runs.size() + " runs: the merge left the slow copy");
        for (SlowProxy proxy : slow.values()) {
          // Idle after the move, the slow copy scores best at the monitor; the read does not
          // go back to it (which would take a new connection) while the other copy serves.
          assertTrue(proxy.connections() - before.get(proxy.addr()) <= 1,
              (proxy.connections() - before.get(proxy.addr())) + " connections to " + proxy.addr());
        }
        double slowest = 0;
        for (SlowProxy proxy : slow.values()) {
          slowest = Math.max(slowest, monitor.avgWaitMs(proxy.addr()));
          assertEquals(0, monitor.inFlight(proxy.addr()), "settled: " + proxy.addr());
        }
        for (int p = 0; p < PARTS; p++) {
          assertEquals(0, monitor.inFlight(pl.addrOf(p)), "settled: " + pl.addrOf(p));
        }
        assertTrue(slowest >= 200.0 / FetchMonitor.WINDOW, "a slow copy was charged its wait");
        if (copies == 1) {
          assertEquals(0,
              read(slowFirst(1, slow), a -> false, new FetchMonitor(), Long.MAX_VALUE).moves(),
              "with the move off, the read waits for the slow copy");
        }
      }
    } finally {
      for (SlowProxy s : slow.values()) {
        s.close();
      }
    }
  }

  /** {@code copies} × every run, each with its copy behind {@code slow}'s proxy listed first. */
  static List<Segment> slowFirst(int copies, java.util.Map<String, SlowProxy> slow) {
    List<Segment> runs = new ArrayList<>();
    for (int i = 0; i < copies; i++) {
      for (int p = 0; p < PARTS; p++) {
        for (int m = 0; m < MAPS; m++) {
          runs.add(new Segment(p, m, m + 1, 2500,
              List.of(slow.get(pl.addrOf(p)).addr(), pl.addrOf(p)), 2500));
        }
      }
    }
    return runs;
  }

  /**
   * One map's batches read as several runs (as when the map pushed its spills as runs): each
   * run from its first batch to before the next one's, under any cap, each batch once.
   */
  @Test
  void aMapsBatchesReadAsSeveralRunsAreEachReadToTheNextRunsStart() throws Exception {
    // Map 3 pushed 4 batches of each partition; say its runs begin at batches 0, 1 and 3.
    for (long cap : new long[] {1, 2500, 1 << 20}) {
      List<Segment> runs = new ArrayList<>();
      List<int[]> want = new ArrayList<>();
      for (int p = 0; p < PARTS; p++) {
        int[][] bounds = {{0, 1}, {1, 3}, {3, 0}};
        for (int[] b : bounds) {
          // Attempt 0 is the one committed: the workers check it.
          runs.add(Segment.run(p, 3, 0, cap, List.of(pl.addrOf(p)), cap, b[0], b[1]));
          want.add(b);
        }
      }
      FetchSchedulerTest.Counting memory = new FetchSchedulerTest.Counting();
      RunReader.Settings settings = new RunReader.Settings(APP, CrossdockServer.token(APP), 1,
          3000, RealServerTest.TIMEOUT, 3, 200);
      try (RunReader reader = new RunReader(settings, runs, new FetchMonitor(), memory, a -> false)) {
        for (int i = runs.size() - 1; i >= 0; i--) { // the later runs first: no order needed
          List<Integer> seqs = new ArrayList<>();
          FetchScheduler.Delivery d;
          while ((d = reader.next(runs.get(i))) != null) {
            Message.FetchedBatch b = d.batch();
            assertEquals(3, b.mapId());
            assertArrayEquals(
                RealServerTest.payload(3, runs.get(i).partition, b.batchSeq(), size(3)),
                RealServerTest.bytes(b.payload()), "batch " + b.batchSeq());
            seqs.add(b.batchSeq());
          }
          int end = want.get(i)[1] == 0 ? batches(3, runs.get(i).partition) : want.get(i)[1];
          List<Integer> expected = new ArrayList<>();
          for (int s = want.get(i)[0]; s < end; s++) {
            expected.add(s);
          }
          assertEquals(expected, seqs, runs.get(i) + " with cap " + cap);
        }
      }
      assertEquals(0, memory.held, "every byte of memory given back");
    }
    assertThrows(IllegalArgumentException.class,
        () -> Segment.run(0, 3, 0, 1, List.of("x:1"), 1, 3, 3), "an empty run");
  }

  @Test
  void aRunOfAnAttemptThatIsNotTheCommittedOneIsRefusedNotRead() throws Exception {
    // Its run starts would be another attempt's: the worker refuses rather than send attempt
    // 0's batches between them, and no other copy is asked (each would say the same).
    Segment run = Segment.run(0, 3, AttemptIds.of(1, 0), 100, List.of(pl.addrOf(0)), 1 << 20,
        1, 3);
    FetchSchedulerTest.Counting memory = new FetchSchedulerTest.Counting();
    RunReader.Settings settings = new RunReader.Settings(APP, CrossdockServer.token(APP), 1,
        3000, RealServerTest.TIMEOUT, 3, 200);
    try (RunReader reader = new RunReader(settings, List.of(run), new FetchMonitor(), memory,
        a -> false)) {
      FetchScheduler.SegmentFailed e =
          assertThrows(FetchScheduler.SegmentFailed.class, () -> reader.next(run));
      assertEquals(ErrorCode.COMMIT_MISMATCH, ((CrossdockException) e.getCause()).code(), e.getMessage());
      assertTrue(e.getMessage().contains("map 3's committed output is attempt 0, not attempt 65536"),
          e.getMessage());
    }
    assertEquals(0, memory.held, "every byte of memory given back");
  }

  @Test
  void aRunOfManyMapsIsRefused() {
    assertThrows(IllegalArgumentException.class,
        () -> new Segment(0, 0, 2, 1, List.of("127.0.0.1:1"), 100));
  }
}
