package org.crossdock.client;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.crossdock.client.fetch.FetchMemory;
import org.crossdock.client.fetch.FetchMonitor;
import org.crossdock.client.fetch.FetchScheduler.Policy;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.Segment;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.Structures.PartitionStat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A reduce task's pipelined, adaptive read against a real service with two copies of every
 * partition: every byte read once whatever the policy, memory accounted and given back, a slow
 * copy left for the other, and a segment no copy serves handed back to the caller.
 */
class FetchSchedulerTest {
  static CrossdockServer server;
  static CoordinatorClient coord;
  static ConnectionPool pool;
  static final String APP = "fetch-scheduler";
  static final int MAPS = 4;
  static final int PARTS = 3;
  static final int BATCHES = 3;
  static Placement placement;

  @BeforeAll
  static void start() throws Exception {
    server = CrossdockServer.start("--replication", "2");
    coord = new CoordinatorClient(server.addr(), 3000, RealServerTest.TIMEOUT);
    pool = new ConnectionPool(3000);
    RealServerTest.coord = coord;
    RealServerTest.pool = pool;
    placement = RealServerTest.registerShuffle(APP, 1, MAPS, PARTS);
    for (int map = 0; map < MAPS; map++) {
      List<PartitionStat> stats =
          RealServerTest.pushMap(APP, 1, placement, map, 0, BATCHES, size(map), 1 << 20);
      coord.commitMap(APP, 1, map, 0, stats);
    }
  }

  @AfterAll
  static void stop() throws Exception {
    pool.close();
    coord.close();
    server.close();
  }

  static int size(int map) {
    return 20_000 + 7_000 * map;
  }

  /** Memory that counts what is held and the most held at once. */
  static final class Counting implements FetchMemory {
    long held;
    long peak;

    @Override
    public synchronized long acquire(long bytes) {
      held += bytes;
      peak = Math.max(peak, held);
      return bytes;
    }

    @Override
    public synchronized void release(long bytes) {
      held -= bytes;
      assertTrue(held >= 0, "never gives back more than it took");
    }
  }

  static FetchScheduler.Settings settings(Policy policy, long hard, long inc) {
    return new FetchScheduler.Settings(APP, CrossdockServer.token(APP), 1, policy, hard, inc, 3000, RealServerTest.TIMEOUT,
        3, 200);
  }

  /** Two segments per partition (maps [0, 2) and [2, 4)) reading from {@code copies}. */
  static List<Segment> plan(java.util.function.IntFunction<List<String>> copies) {
    List<Segment> out = new ArrayList<>();
    for (int p = 0; p < PARTS; p++) {
      long first = (long) BATCHES * (size(0) + size(1));
      long second = (long) BATCHES * (size(2) + size(3));
      out.add(new Segment(p, 0, 2, first, copies.apply(p)));
      out.add(new Segment(p, 2, 4, second, copies.apply(p)));
    }
    return out;
  }

  /** Reads everything; checks each segment's bytes and that segments are not interleaved. */
  static List<FetchScheduler.Delivery> readAll(FetchScheduler f) throws Exception {
    List<FetchScheduler.Delivery> all = new ArrayList<>();
    Map<Segment, ByteArrayOutputStream> got = new HashMap<>();
    Set<Segment> finished = new HashSet<>();
    Segment current = null;
    FetchScheduler.Delivery d;
    while ((d = f.next()) != null) {
      all.add(d);
      if (d.segment() != current) {
        assertFalse(finished.contains(d.segment()), "a segment is read in one go");
        if (current != null) {
          finished.add(current);
        }
        current = d.segment();
      }
      got.computeIfAbsent(d.segment(), s -> new ByteArrayOutputStream())
          .write(RealServerTest.bytes(d.batch().payload()));
    }
    assertEquals(2 * PARTS, got.size(), "every segment delivered");
    for (Map.Entry<Segment, ByteArrayOutputStream> e : got.entrySet()) {
      Segment s = e.getKey();
      byte[] want = RealServerTest.expected(
          s.partition, s.startMap, s.endMap, BATCHES, FetchSchedulerTest::size);
      assertArrayEquals(want, e.getValue().toByteArray(), s + ": every byte once, in order");
    }
    return all;
  }

  @Test
  void bothPoliciesReadEveryByteOnceWithinTheirLimit() throws Exception {
    for (Policy policy : Policy.values()) {
      Counting mem = new Counting();
      long hard = 64 << 10;
      try (FetchScheduler f = new FetchScheduler(settings(policy, hard, 16 << 10),
          plan(placement::copiesOf), new FetchMonitor(), mem, a -> false)) {
        readAll(f);
        assertTrue(f.peakBufferedBytes() > 0, policy + ": something was buffered");
        long largest = (long) BATCHES * (size(2) + size(3));
        assertTrue(mem.peak <= hard + largest,
            policy + ": held " + mem.peak + " at most (limit " + hard + ")");
      }
      assertEquals(0, mem.held, policy + ": every byte of memory given back");
    }
  }

  @Test
  void aSegmentLargerThanTheLimitIsHeldBackInTheSocketNotBuffered() throws Exception {
    // One map's output of a large shuffle is one segment, whatever the limit: the request plan
    // cannot bound it, so the connection must stop reading while the task holds the limit.
    int batches = 30;
    int size = 64 << 10;
    Placement one = coord.registerShuffle(APP, 2, 1, 1);
    List<PartitionStat> stats = RealServerTest.pushMap(APP, 2, one, 0, 0, batches, size, 1 << 20);
    coord.commitMap(APP, 2, 0, 0, stats);
    long hard = 512 << 10;
    FetchScheduler.Settings st = new FetchScheduler.Settings(APP, CrossdockServer.token(APP), 2,
        Policy.ADAPTIVE, hard, 64 << 10, 3000, RealServerTest.TIMEOUT, 3, 200);
    Segment big = new Segment(0, 0, 1, (long) batches * size, one.copiesOf(0));
    ByteArrayOutputStream got = new ByteArrayOutputStream();
    try (FetchScheduler f = new FetchScheduler(st, List.of(big), new FetchMonitor(),
        FetchMemory.UNLIMITED, a -> false)) {
      FetchScheduler.Delivery d = f.next();
      got.write(RealServerTest.bytes(d.batch().payload()));
      // The task stops consuming: the worker goes on sending, the read must not take it all.
      Thread.sleep(500);
      long heldWhilePaused = f.peakBufferedBytes();
      assertTrue(heldWhilePaused <= hard,
          "held " + heldWhilePaused + " of a " + batches * size + "-byte segment (limit " + hard + ")");
      while ((d = f.next()) != null) {
        got.write(RealServerTest.bytes(d.batch().payload()));
      }
    }
    assertArrayEquals(RealServerTest.expected(0, 0, 1, batches, m -> size), got.toByteArray(),
        "every byte once, in order");
  }

  @Test
  void closingMidReadGivesBackEveryByte() throws Exception {
    Counting mem = new Counting();
    FetchMonitor monitor = new FetchMonitor();
    FetchScheduler f = new FetchScheduler(settings(Policy.ADAPTIVE, 1 << 20, 64 << 10),
        plan(placement::copiesOf), monitor, mem, a -> false);
    assertNotNull(f.next());
    assertNotNull(f.next());
    assertTrue(mem.held > 0);
    f.close();
    assertEquals(0, mem.held, "a task that stops early (failed, killed, take(1)) holds nothing");
    assertThrows(java.io.IOException.class, f::next);
    assertNotNull(monitor.take(), "what it learned is given back however it ended");
    assertNull(monitor.take());
  }

  @Test
  void theAdaptiveReaderLeavesASlowCopyForTheOtherAndReadsEveryByteOnce() throws Exception {
    Map<String, SlowProxy> slow = new HashMap<>();
    try {
      for (String w : placement.workerAddrs()) {
        slow.put(w, new SlowProxy(w, 300, 4096));
      }
      // Each partition's primary answers through a crawling link; its replica directly.
      FetchMonitor monitor = new FetchMonitor();
      List<Segment> segments = plan(p -> List.of(
          slow.get(placement.addrOf(p)).addr(), placement.replicaOf(p)));
      List<FetchScheduler.Delivery> all;
      try (FetchScheduler f = new FetchScheduler(settings(Policy.ADAPTIVE, 1 << 20, 64 << 10),
          segments, monitor, FetchMemory.UNLIMITED, a -> false)) {
        all = readAll(f);
      }
      Set<String> replicas = new HashSet<>();
      for (int p = 0; p < PARTS; p++) {
        replicas.add(placement.replicaOf(p));
      }
      long fromReplicas = all.stream().filter(d -> replicas.contains(d.source())).count();
      assertTrue(fromReplicas > all.size() / 2,
          "most batches came from the replicas: " + fromReplicas + " of " + all.size());
    } finally {
      for (SlowProxy s : slow.values()) {
        s.close();
      }
    }
  }

  @Test
  void aSegmentNoCopyServesIsHandedBackAndReadAfterARetry() throws Exception {
    String nobody = CrossdockServer.unusedAddr();
    Segment s = new Segment(0, 0, MAPS, 1, List.of(nobody));
    try (FetchScheduler f = new FetchScheduler(settings(Policy.ADAPTIVE, 1 << 20, 64 << 10),
        List.of(s), new FetchMonitor(), FetchMemory.UNLIMITED, a -> false)) {
      FetchScheduler.SegmentFailed e = assertThrows(FetchScheduler.SegmentFailed.class, f::next);
      assertSame(s, e.segment);
      assertEquals(List.of(nobody), e.unreachable());
      f.retry(s, placement.copiesOf(0));
      ByteArrayOutputStream got = new ByteArrayOutputStream();
      FetchScheduler.Delivery d;
      while ((d = f.next()) != null) {
        got.write(RealServerTest.bytes(d.batch().payload()));
      }
      assertArrayEquals(RealServerTest.expected(0, 0, MAPS, BATCHES, FetchSchedulerTest::size),
          got.toByteArray());
    }
  }

  @Test
  void aReadStartsFromWhatAnEarlierReadLearnedAndPassesItOn() throws Exception {
    // One segment: its wait is the task's first (connecting), which teaches the limit nothing,
    // so what the read passes on is exactly what it started from, the runs included.
    for (FetchMonitor.Learned before : List.of(new FetchMonitor.Learned(512 << 10, 2_000_000, 5, 0),
        new FetchMonitor.Learned(256 << 10, 3_000_000, 0, 1))) {
      FetchMonitor monitor = new FetchMonitor();
      monitor.giveBack(before);
      Segment s = new Segment(0, 0, MAPS, (long) BATCHES * 4 * size(3), placement.copiesOf(0));
      try (FetchScheduler f = new FetchScheduler(settings(Policy.ADAPTIVE, 1 << 20, 64 << 10),
          List.of(s), monitor, FetchMemory.UNLIMITED, a -> false)) {
        assertEquals(before.soft(), f.softLimit(), "starts from the limit an earlier read left");
        assertEquals(before.soft(), f.startingLimit());
        while (f.next() != null) {
          // read to the end
        }
      }
      assertEquals(before, monitor.take(), "the limit, the average wait and both runs");
      assertNull(monitor.take(), "one record, given back once");
    }
  }

  @Test
  void readsOpenAtOnceEachStartFromARecordOfTheirOwnAndGiveItBack() throws Exception {
    // Two tasks of an executor reading at once must not share (and overwrite) one record:
    // each takes its own, the freshest first; a third finds none free and starts at the floor.
    // (Not closed before the end: the reads are open at once; nothing is asked before next().)
    FetchMonitor monitor = new FetchMonitor();
    FetchMonitor.Learned older = new FetchMonitor.Learned(512 << 10, 2_000_000, 5, 0);
    FetchMonitor.Learned newer = new FetchMonitor.Learned(768 << 10, 3_000_000, 0, 1);
    monitor.giveBack(older);
    monitor.giveBack(newer);
    FetchScheduler.Settings adaptive = settings(Policy.ADAPTIVE, 1 << 20, 64 << 10);
    List<Segment> one = List.of(new Segment(0, 0, MAPS, 1, placement.copiesOf(0)));
    FetchScheduler first = new FetchScheduler(adaptive, one, monitor, FetchMemory.UNLIMITED,
        a -> false);
    FetchScheduler second = new FetchScheduler(adaptive, one, monitor, FetchMemory.UNLIMITED,
        a -> false);
    FetchScheduler third = new FetchScheduler(adaptive, one, monitor, FetchMemory.UNLIMITED,
        a -> false);
    assertEquals(newer.soft(), first.softLimit(), "the freshest record first");
    assertEquals(older.soft(), second.softLimit(), "the next read the other one");
    assertEquals(2 * (64 << 10), third.softLimit(), "none free: two increments");
    second.close();
    second.close();
    first.close();
    third.close();
    // Given back as they ended (a read that learned nothing gives back what it took), once.
    FetchMonitor.Learned fresh = monitor.take();
    assertEquals(2 * (64 << 10), fresh.soft(), "the third read's, given back last");
    assertEquals(newer, monitor.take());
    assertEquals(older, monitor.take());
    assertNull(monitor.take());
    // A static read neither takes nor gives back, nor does an adaptive read of nothing.
    monitor.giveBack(older);
    new FetchScheduler(settings(Policy.STATIC, 1 << 20, 64 << 10), one, monitor,
        FetchMemory.UNLIMITED, a -> false).close();
    FetchScheduler empty = new FetchScheduler(adaptive, List.of(), monitor, FetchMemory.UNLIMITED,
        a -> false);
    assertEquals(2 * (64 << 10), empty.softLimit(), "an empty read takes no record");
    empty.close();
    assertEquals(older, monitor.take());
    assertNull(monitor.take());
  }

  @Test
  void aReadGivesBackWhatItLearnedNotWhatItTook() throws Exception {
    // Memory for less than two segments: the second ask is refused while the first is held, so
    // the read squeezes its limit to what it holds, well under where it started; the average
    // wait taken is so high that no wait of this read can grow it back.
    long cap = 200_000;
    FetchMemory capped = new FetchMemory() {
      long held;

      @Override
      public synchronized long acquire(long bytes) {
        long got = Math.max(0, Math.min(bytes, cap - held));
        held += got;
        return got;
      }

      @Override
      public synchronized void release(long bytes) {
        held -= bytes;
      }
    };
    FetchMonitor monitor = new FetchMonitor();
    FetchMonitor.Learned taken = new FetchMonitor.Learned(1 << 20, 1e12, 0, 0);
    monitor.giveBack(taken);
    FetchScheduler f = new FetchScheduler(settings(Policy.ADAPTIVE, 1 << 20, 64 << 10),
        plan(placement::copiesOf), monitor, capped, a -> false);
    readAll(f);
    long learned = f.softLimit();
    assertTrue(learned < taken.soft(), "the read squeezed its limit: " + learned);
    f.close();
    FetchMonitor.Learned back = monitor.take();
    assertEquals(learned, back.soft(), "what the read left, not what it took");
    assertNull(monitor.take());
  }

  @Test
  void theShelfKeepsTheFreshestRecordsOnly() {
    FetchMonitor monitor = new FetchMonitor();
    for (int i = 0; i < 100; i++) {
      monitor.giveBack(new FetchMonitor.Learned(i, -1, 0, 0));
    }
    for (int i = 99; i >= 36; i--) {
      assertEquals(i, monitor.take().soft());
    }
    assertNull(monitor.take(), "64 kept, the oldest dropped first");
  }

  @Test
  void emptyPlanEndsAtOnce() throws Exception {
    try (FetchScheduler f = new FetchScheduler(settings(Policy.STATIC, 1 << 20, 64 << 10),
        List.of(), new FetchMonitor(), FetchMemory.UNLIMITED, a -> false)) {
      assertNull(f.next());
    }
    Message.ResumePoint none = new Segment(0, 0, 1, 0, List.of("x:1")).resumePoint();
    assertNull(none);
  }
}
