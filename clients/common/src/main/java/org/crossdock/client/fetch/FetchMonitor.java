package org.crossdock.client.fetch;

import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What one executor knows of the workers its reduce tasks read from (Nicolae et al., TPDS 2017,
 * section 4.1: the {@code BlockTransferMonitor}). Shared by every reduce task of the executor
 * (one per JVM), it keeps per source (a worker's address):
 *
 * <ul>
 *   <li>{@code inFlight}: bytes the executor's tasks asked of it that have not arrived yet;
 *   <li>the waits of the last {@link #WINDOW} requests read from it: how long a task was blocked
 *       on that request's batches (0 when each was already buffered when the task wanted it).
 * </ul>
 *
 * <p>A source's score is {@code (avgWait_ms + 1) * inFlight}; the reader picks the copy with the
 * lowest score, so requests spread over the least loaded and most responsive workers. The
 * {@code +1} keeps the load counting when the waits are zero. Ties go to the copy listed first
 * (the primary), which is the paper's static order: every executor agrees on it.
 *
 * <p>It also keeps the executor's idle fetch connections ({@link IdleStreams}), so a task does
 * not open a connection to a worker that an earlier task of the app already opened.
 *
 * <p>The paper's Algorithm 1 compares against {@code Score[id]} (the reader's own executor); that
 * is a misprint for the best score so far, which is what {@link #choose} does.
 */
public final class FetchMonitor {
  /** Requests per source in the moving average of waits (the paper's K; the simulator's too). */
  public static final int WINDOW = 16;

  /** Records of learned limits kept for later reads: more than an executor has reads open at once. */
  static final int SHELF = 64;

  private static final FetchMonitor SHARED = new FetchMonitor();

  private final ConcurrentHashMap<String, Source> sources = new ConcurrentHashMap<>();
  /**
   * Records of what finished reads learned, the most recently given back last: each read takes
   * one for its own while it runs, so concurrent tasks of an executor never share (or overwrite)
   * one another's runs. A record is made only when a read finds none free, so the shelf holds
   * at most as many as there were reads open at once (a task may have two, as a join's two
   * sides); at most {@link #SHELF} are kept, the oldest dropped first.
   */
  private final ArrayDeque<Learned> shelf = new ArrayDeque<>();
  /** Fetch connections between tasks. */
  final IdleStreams idle = new IdleStreams();

  /**
   * Where an adaptive read of the executor left its {@link ElasticLimit}: the limit, the
   * average wait ({@code < 0} if none), and the runs of requests read without a wait and with
   * one, which a later read starts from. The runs are carried with the limit: a task reads too
   * few requests to complete a run of its own, so a limit carried without them could grow from
   * task to task and never shrink.
   */
  public record Learned(long soft, double avgWaitNanos, int quietRun, int waitRun) {
    /** Where {@code limit} is now. */
    static Learned of(ElasticLimit limit) {
      return new Learned(limit.soft(), limit.averageWaitNanos(), limit.quietRun(),
          limit.waitRun());
    }
  }

  /** The executor's monitor. */
  public static FetchMonitor shared() {
    return SHARED;
  }

  /** One source's figures. */
  private static final class Source {
    long inFlight;
    final long[] waitsMs = new long[WINDOW];
    int count;
    int next;
    long sumMs;

    synchronized void addWait(long ms) {
      if (count == WINDOW) {
        sumMs -= waitsMs[next];
      } else {
        count++;
      }
      waitsMs[next] = ms;
      sumMs += ms;
      next = (next + 1) % WINDOW;
    }

    synchronized double avgWaitMs() {
      return count == 0 ? 0 : (double) sumMs / count;
    }

    synchronized long inFlight() {
      return inFlight;
    }

    synchronized void addInFlight(long bytes) {
      inFlight = Math.max(0, inFlight + bytes);
    }
  }

  private Source source(String addr) {
    return sources.computeIfAbsent(addr, a -> new Source());
  }

  /**
   * The record a new read starts from, taken off the shelf until the read gives it back: the one
   * given back last (the freshest), or null when none is free (the executor's first reads, or
   * as many reads running as records given back).
   */
  public Learned take() {
    synchronized (shelf) {
      return shelf.pollLast();
    }
  }

  /** What a read learned, given back when it ends for the executor's next read to take. */
  public void giveBack(Learned l) {
    synchronized (shelf) {
      shelf.addLast(l);
      if (shelf.size() > SHELF) {
        shelf.pollFirst();
      }
    }
  }

  /** Bytes were asked of {@code addr}. */
  public void requested(String addr, long bytes) {
    source(addr).addInFlight(bytes);
  }

  /** Bytes asked of {@code addr} arrived (or will not: the request ended or failed). */
  public void arrived(String addr, long bytes) {
    source(addr).addInFlight(-bytes);
  }

  /** A task waited {@code ms} in all for a request it read from {@code addr}. */
  public void waited(String addr, long ms) {
    source(addr).addWait(Math.max(0, ms));
  }

  /** Bytes in flight from {@code addr}. */
  public long inFlight(String addr) {
    Source s = sources.get(addr);
    return s == null ? 0 : s.inFlight();
  }

  /** The average wait of the last {@link #WINDOW} requests read from {@code addr}, in ms. */
  public double avgWaitMs(String addr) {
    Source s = sources.get(addr);
    return s == null ? 0 : s.avgWaitMs();
  }

  /** The paper's score of {@code addr}: lower is better. */
  public double score(String addr) {
    return (avgWaitMs(addr) + 1) * inFlight(addr);
  }

  /**
   * The copy to read from: the lowest score among {@code copies}; on a tie, the one listed
   * first. {@code local} copies (on the reader's own host) win over any remote one, as the
   * paper's locality rule asks.
   */
  public String choose(List<String> copies, java.util.function.Predicate<String> local) {
    String best = null;
    double bestScore = 0;
    boolean bestLocal = false;
    for (String c : copies) {
      double s = score(c);
      boolean l = local.test(c);
      if (best == null || (l && !bestLocal) || (l == bestLocal && s < bestScore)) {
        best = c;
        bestScore = s;
        bestLocal = l;
      }
    }
    return best;
  }

  /** Fetch connections the executor's reads opened (none was idle to take). */
  public long connectionsOpened() {
    return idle.openedCount();
  }

  /** Times a read took an idle connection instead of opening one. */
  public long connectionsReused() {
    return idle.reusedCount();
  }

  /** Fetch connections idle now. */
  public int connectionsIdle() {
    return idle.idleCount();
  }

  /** Forgets everything (tests). */
  void reset() {
    sources.clear();
    idle.closeAll();
  }
}
