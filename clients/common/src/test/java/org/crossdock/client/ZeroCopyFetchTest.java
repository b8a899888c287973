package org.crossdock.client;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.crossdock.client.fetch.FetchMonitor;
import org.crossdock.client.fetch.FetchScheduler;
import org.crossdock.client.fetch.Segment;
import org.crossdock.protocol.ErrorCode;
import org.crossdock.protocol.Message;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Stored records ({@code FetchRecords}) read by the reduce tasks' reader from a real service
 * whose commits are on disk: the workers send the records from their files unread, the reader
 * checks each, and a damaged one sends it back to the worker's checked read, which reports the
 * copy and refuses, as it does for readers that take no records.
 */
class ZeroCopyFetchTest {
  static CrossdockServer server;
  static CoordinatorClient coord;
  static ConnectionPool pool;
  static final int MAPS = 3;
  static final int BATCHES = 2;

  @BeforeAll
  static void start() throws Exception {
    server = CrossdockServer.start("--durability", "disk");
    coord = new CoordinatorClient(server.addr(), 3000, RealServerTest.TIMEOUT);
    pool = new ConnectionPool(3000);
    RealServerTest.coord = coord;
    RealServerTest.pool = pool;
  }

  @AfterAll
  static void stop() throws Exception {
    pool.close();
    coord.close();
    server.close();
  }

  static int size(int map) {
    return 3_000 + 500 * map;
  }

  /** Registers {@code app}, pushes and commits every map: the placement of its status. */
  static Placement committed(String app, int partitions) throws Exception {
    Placement pl = RealServerTest.registerShuffle(app, 1, MAPS, partitions);
    for (int map = 0; map < MAPS; map++) {
      coord.commitMap(app, 1, map, 0,
          RealServerTest.pushMap(app, 1, pl, map, 0, BATCHES, size(map), 1 << 20));
    }
    return Placement.of(coord.shuffleStatus(app, 1));
  }

  static FetchScheduler reader(String app, Segment s) {
    FetchScheduler.Settings settings = new FetchScheduler.Settings(app, CrossdockServer.token(app),
        1, FetchScheduler.Policy.ADAPTIVE, 48 << 20, 2 << 20, 3000, RealServerTest.TIMEOUT, 3, 200);
    return new FetchScheduler(settings, List.of(s), new FetchMonitor(),
        new FetchSchedulerTest.Counting(), a -> false);
  }

  /** The partition file of partition {@code p} of shuffle 1 of {@code app}. */
  static Path partitionFile(String app, int p) throws Exception {
    Path tail = Path.of(app, "1", p + ".data");
    try (Stream<Path> files = Files.walk(server.dataDir())) {
      return files.filter(f -> f.endsWith(tail)).findFirst().orElseThrow();
    }
  }

  @Test
  void batchesOnDiskArriveAsStoredRecordsAndReadExactly() throws Exception {
    String app = "zero-copy-read";
    Placement pl = committed(app, 2);
    for (int p = 0; p < 2; p++) {
      Segment s = new Segment(p, 0, MAPS, 1, pl.copiesOf(p)).acceptingRecords(pl.mapAttempts());
      try (FetchScheduler f = reader(app, s)) {
        byte[] got = RealServerTest.readAll(f, null);
        assertArrayEquals(RealServerTest.expected(p, 0, MAPS, BATCHES, ZeroCopyFetchTest::size),
            got, "partition " + p);
      }
      assertEquals(MAPS * BATCHES, s.storedRecords(), "every batch as a stored record");
      assertTrue(s.takesRecords(), "none failed the checks");
    }
    // A reader that does not ask gets checked chunks.
    Segment plain = new Segment(0, 0, MAPS, 1, pl.copiesOf(0));
    try (FetchScheduler f = reader(app, plain)) {
      RealServerTest.readAll(f, null);
    }
    assertEquals(0, plain.storedRecords());
    // A capped run's next request starts after the last batch of the one before: not after a
    // record nobody checked. It reads checked chunks.
    Segment capped =
        new Segment(0, 0, 1, 1, pl.copiesOf(0), 64 << 10).acceptingRecords(pl.mapAttempts());
    assertFalse(capped.takesRecords());
    coord.unregisterApp(app);
  }

  @Test
  void aDamagedRecordFallsBackToTheWorkersCheckedReadWhichReportsIt() throws Exception {
    String app = "zero-copy-damage";
    Placement pl = committed(app, 1);
    Path file = partitionFile(app, 0);
    byte[] bytes = Files.readAllBytes(file);
    // Inside the payload of map 1's first batch: map 0's two records come first.
    int at = 2 * (24 + size(0)) + 24 + 100;
    bytes[at] ^= (byte) 0xff;
    Files.write(file, bytes);
    Segment s = new Segment(0, 0, MAPS, 1, pl.copiesOf(0)).acceptingRecords(pl.mapAttempts());
    try (FetchScheduler f = reader(app, s)) {
      FetchScheduler.SegmentFailed e = assertThrows(FetchScheduler.SegmentFailed.class,
          () -> RealServerTest.readAll(f, null));
      CrossdockException ce = assertInstanceOf(CrossdockException.class, e.getCause());
      assertEquals(ErrorCode.CORRUPT_DATA, ce.code(), ce.getMessage());
    }
    assertFalse(s.takesRecords(), "asked again without records");
    assertEquals(BATCHES, s.storedRecords(), "map 0's records were good and kept");
    // The worker reported its copy: the maps that wrote into it are revoked.
    Message.ShuffleStatus st = coord.shuffleStatus(app, 1);
    assertEquals(0, st.committedMaps());
    coord.unregisterApp(app);
  }

  @Test
  void aRecordOfAnotherAttemptIsRefusedThoughItsCrcMatches() throws Exception {
    String app = "zero-copy-attempt";
    Placement pl = committed(app, 1);
    // The reader believes map 2 committed attempt 5: the records say 0, so it asks the worker's
    // checked read, which serves the committed attempt.
    int[] attempts = pl.mapAttempts().clone();
    attempts[2] = 5;
    Segment s = new Segment(0, 0, MAPS, 1, pl.copiesOf(0)).acceptingRecords(attempts);
    try (FetchScheduler f = reader(app, s)) {
      assertArrayEquals(RealServerTest.expected(0, 0, MAPS, BATCHES, ZeroCopyFetchTest::size),
          RealServerTest.readAll(f, null));
    }
    assertFalse(s.takesRecords());
    assertEquals(2 * BATCHES, s.storedRecords(), "maps 0 and 1 came as records");
    coord.unregisterApp(app);
  }

  @Test
  void aDamagedSequenceNumberCannotMakeTheReaderSkipBatches() throws Exception {
    // Map 0's first record says seq 1: its CRC (of the payload) matches, so the reader takes it,
    // and the real seq 1 then looks out of order. Resuming after the damaged "seq 1" would skip
    // the real one silently; the reader asks again from where the request began, so the worker's
    // checked read meets the damaged header and reports the copy.
    String app = "zero-copy-seq";
    Placement pl = committed(app, 1);
    Path file = partitionFile(app, 0);
    byte[] bytes = Files.readAllBytes(file);
    java.nio.ByteBuffer.wrap(bytes).putInt(12, 1);
    Files.write(file, bytes);
    Segment s = new Segment(0, 0, MAPS, 1, pl.copiesOf(0)).acceptingRecords(pl.mapAttempts());
    try (FetchScheduler f = reader(app, s)) {
      FetchScheduler.SegmentFailed e = assertThrows(FetchScheduler.SegmentFailed.class,
          () -> RealServerTest.readAll(f, null));
      CrossdockException ce = assertInstanceOf(CrossdockException.class, e.getCause());
      assertEquals(ErrorCode.CORRUPT_DATA, ce.code(), ce.getMessage());
    }
    assertFalse(s.takesRecords());
    assertEquals(0, coord.shuffleStatus(app, 1).committedMaps(), "the copy was reported");
    coord.unregisterApp(app);
  }
}
