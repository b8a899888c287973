package org.crossdock.client.fetch;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.crossdock.client.ConnectionPool;
import org.crossdock.client.CoordinatorClient;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.CrossdockServer;
import org.crossdock.client.MapPusher;
import org.crossdock.client.Placement;
import org.crossdock.protocol.Structures.PartitionStat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A fetch connection's thread against a real {@code crossdock standalone}, when what it runs on
 * the read's behalf throws something other than an I/O error.
 */
class SourceStreamTest {
  static final int TIMEOUT = 30_000;
  static final String APP = "java-source-stream";
  static CrossdockServer server;
  static CoordinatorClient coord;
  static ConnectionPool pool;
  static byte[] token;
  static String addr;

  /** One committed map of one partition, two batches. */
  @BeforeAll
  static void start() throws Exception {
    server = CrossdockServer.start();
    coord = new CoordinatorClient(server.addr(), 3000, TIMEOUT);
    pool = new ConnectionPool(3000);
    token = coord.registerApp(APP, 60_000);
    pool.authenticateAs(APP, token);
    Placement pl = coord.registerShuffle(APP, 1, 1, 1);
    addr = pl.addrOf(0);
    byte[] batch = new byte[1000];
    try (MapPusher p = new MapPusher(pool, APP, 1, 0, 0, 1, 1 << 20, TIMEOUT)) {
      p.push(0, addr, batch, batch.length);
      p.push(0, addr, batch, batch.length);
      p.awaitAll();
    }
    coord.commitMap(APP, 1, 0, 0, List.of(new PartitionStat(0, 2000, 2)));
  }

  @AfterAll
  static void stop() throws Exception {
    CrossdockServer.closeAll(pool, coord, server);
  }

  /** A read whose bookkeeping throws {@code thrown} when the first batches arrive. */
  static final class Throwing implements SourceStream.Events {
    final Throwable thrown;
    final CountDownLatch broken = new CountDownLatch(1);
    final List<Segment> unanswered = new ArrayList<>();
    CrossdockException why;

    Throwing(Throwable thrown) {
      this.thrown = thrown;
    }

    @Override
    public void received(SourceStream src, Segment s, long bytes) {
      if (thrown instanceof Error e) {
        throw e;
      }
      throw (RuntimeException) thrown;
    }

    @Override
    public void ended(SourceStream src, Segment s) {}

    @Override
    public void refused(SourceStream src, Segment s, CrossdockException e) {}

    @Override
    public void broken(SourceStream src, List<Segment> segs, CrossdockException e) {
      unanswered.addAll(segs);
      why = e;
      broken.countDown();
    }

    @Override
    public void failedLocally(CrossdockException e) {
      throw new AssertionError("told apart from broken(), which did not fail: " + e);
    }

    @Override
    public boolean admit(SourceStream src, long bytes) {
      return true;
    }

    @Override
    public void arrived(long bytes) {}
  }

  /**
   * Runs one read whose bookkeeping throws {@code thrown} on the connection's thread and checks
   * that the read is told, as this client's own failure naming the cause, and that nothing
   * reaches the thread's uncaught handler (Spark's ends the executor).
   */
  static void aThrowIsHandedToTheRead(Throwable thrown) throws Exception {
    List<Throwable> uncaught = new ArrayList<>();
    Thread.UncaughtExceptionHandler was = Thread.getDefaultUncaughtExceptionHandler();
    Thread.setDefaultUncaughtExceptionHandler((t, e) -> {
      synchronized (uncaught) {
        uncaught.add(e);
      }
    });
    try {
      Object lock = new Object();
      Throwing events = new Throwing(thrown);
      Segment s = new Segment(0, 0, 1, 2000, List.of(addr));
      SourceStream st = new SourceStream(addr, APP, token,
          new SourceStream.Binding(lock, events, 1), null, 3000, TIMEOUT);
      synchronized (lock) {
        st.send(s);
      }
      assertTrue(events.broken.await(20, TimeUnit.SECONDS),
          "the read is told its connection failed, not left waiting for answers");
      synchronized (lock) {
        assertEquals(List.of(s), events.unanswered);
        assertEquals(CrossdockException.Kind.LOCAL, events.why.kind(), events.why.getMessage());
        assertSame(thrown, events.why.getCause());
        assertTrue(events.why.getMessage().contains(thrown.getMessage()), events.why.getMessage());
        assertTrue(st.isClosed());
        assertEquals(0, st.outstanding());
      }
      // A read told so ends with it at its next call, as the task's own failure.
      FetchScheduler.Settings settings = new FetchScheduler.Settings(APP, token, 1,
          FetchScheduler.Policy.ADAPTIVE, 48 << 20, 2 << 20, 3000, TIMEOUT, 3, 200);
      try (FetchScheduler f = new FetchScheduler(settings, List.of(s), new FetchMonitor(),
          FetchMemory.UNLIMITED, a -> false)) {
        synchronized (f.lock) {
          f.broken(st, List.of(), events.why);
        }
        Throwable rethrown = assertThrows(Throwable.class, f::next);
        if (thrown instanceof Error) {
          assertSame(thrown, rethrown, "an Error reaches the task as it is");
        } else {
          assertSame(events.why, rethrown, "anything else as the task's I/O error, not a"
              + " segment's failure for the readers' recovery");
        }
      }
    } finally {
      Thread.setDefaultUncaughtExceptionHandler(was);
    }
    synchronized (uncaught) {
      assertEquals(List.of(), uncaught, "nothing left to the thread's uncaught handler");
    }
  }

  @Test
  void aDefectInTheReadsBookkeepingFailsTheReadInsteadOfKillingTheThread() throws Exception {
    aThrowIsHandedToTheRead(new IllegalStateException("test: a defect in the read"));
  }

  @Test
  void anErrorOnTheConnectionsThreadReachesTheTask() throws Exception {
    aThrowIsHandedToTheRead(new OutOfMemoryError("test: no heap for a frame body"));
  }
}
