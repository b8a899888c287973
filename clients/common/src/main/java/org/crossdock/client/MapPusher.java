package org.crossdock.client;

import java.io.Closeable;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.crossdock.protocol.Checksums;
import org.crossdock.protocol.ErrorCode;
import org.crossdock.protocol.Message;

/**
 * Pushes one map attempt's batches to the workers asynchronously, with a bounded number of bytes
 * in flight.
 *
 * <p>{@link #push} hands a batch to a sender thread and returns at once unless the bytes queued or
 * sent-but-not-acknowledged would exceed {@code maxInFlightBytes}: then it blocks until
 * acknowledgements free room (back-pressure; a worker short of memory delays its acknowledgements
 * and stops reading, so the window fills and the map task waits instead of buffering). A batch
 * larger than the window is still sent, alone. The first failure (a worker's Error answer, a
 * broken connection, no acknowledgement within the timeout, this client's own failure on the
 * sender thread) is kept and thrown by the next {@link #push} or by {@link #awaitAll}; an {@link
 * Error} the sender thread met is thrown as it is, as if the task had met it itself.
 *
 * <p><b>Splits.</b> A worker whose partition was split answers {@code PushRedirect}: the batch
 * is stored, and the partition goes on in a split slot on another worker. The pusher records it
 * in the executor's {@link SplitRoutes}, and every partition a map attempt begins goes to the
 * latest slot known. A map's batches of one partition all go to the slot its first batch went to,
 * because together they are one stream that a reader decodes in order ({@link #slotOf}); the
 * worker that was split keeps taking them.
 */
public final class MapPusher implements Closeable {
  private record Item(int partition, int slot, String addr, int seq, byte[] buf, int len) {}

  private final ConnectionPool pool;
  private final String appId;
  private final int shuffleId;
  private final int mapId;
  private final int attemptId;
  private final long maxInFlightBytes;
  private final long ackTimeoutMs;
  private final int[] nextSeq;
  private final SplitRoutes routes;
  /** The current primary of a split slot, if the caller's placement knows it (else null). */
  private final java.util.function.IntFunction<String> slotAddr;
  /** The slot each partition's batches go to in this attempt, -1 before its first batch. */
  private final int[] slots;
  /** The address of each partition's slot in this attempt. */
  private final String[] slotAddrs;
  /** Partitions whose next batch begins a run ({@link #beginRun}). */
  private final boolean[] runPending;
  private final List<Message.RunStart> runStarts = new ArrayList<>();

  private final ArrayDeque<Item> queue = new ArrayDeque<>();
  private long inFlight;
  private long peakInFlight;
  private long lastProgressNanos = System.nanoTime();
  private IOException failure;
  private String unreachable;
  private boolean lostRace;
  private boolean closed;
  private Thread sender;
  private long pushedBytes;
  private long pushedBatches;
  private long blockedNanos;

  public MapPusher(
      ConnectionPool pool,
      String appId,
      int shuffleId,
      int mapId,
      int attemptId,
      int numPartitions,
      long maxInFlightBytes,
      long ackTimeoutMs) {
    this(pool, appId, shuffleId, mapId, attemptId, numPartitions, maxInFlightBytes, ackTimeoutMs,
        new SplitRoutes(), slot -> null);
  }

  /**
   * A pusher that starts each partition where {@code routes} says it goes on, at the address
   * {@code slotAddr} gives for the split (the caller's placement: after a worker's loss it
   * names the split's new primary), else at the one the redirect named.
   */
  public MapPusher(
      ConnectionPool pool,
      String appId,
      int shuffleId,
      int mapId,
      int attemptId,
      int numPartitions,
      long maxInFlightBytes,
      long ackTimeoutMs,
      SplitRoutes routes,
      java.util.function.IntFunction<String> slotAddr) {
    this.pool = pool;
    this.appId = appId;
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.attemptId = attemptId;
    this.maxInFlightBytes = Math.max(1, maxInFlightBytes);
    this.ackTimeoutMs = ackTimeoutMs;
    this.nextSeq = new int[numPartitions];
    this.routes = routes;
    this.slotAddr = slotAddr;
    this.slots = new int[numPartitions];
    java.util.Arrays.fill(slots, -1);
    this.slotAddrs = new String[numPartitions];
    this.runPending = new boolean[numPartitions];
  }

  /**
   * The slot {@code partition}'s batches of this attempt went to: the partition itself, or the
   * split it went on in when the attempt began it. What the commit reports its bytes under.
   */
  public synchronized int slotOf(int partition) {
    return slots[partition] < 0 ? partition : slots[partition];
  }

  /**
   * The next batch of {@code partition} begins a new sorted run of it (a map pushing its sorted
   * output in rounds calls this at each round's start). A run that pushes nothing is no run.
   */
  public synchronized void beginRun(int partition) {
    runPending[partition] = true;
  }

  /**
   * Where the partitions' second and later runs began ({@link #beginRun}), under the slot each
   * partition's batches went to, in (slot, batch) order: what the commit reports; empty when
   * every partition was pushed as one run.
   */
  public synchronized List<Message.RunStart> runStarts() {
    List<Message.RunStart> out = new ArrayList<>(runStarts);
    out.sort(java.util.Comparator.comparingInt(Message.RunStart::partition)
        .thenComparingInt(Message.RunStart::batchSeq));
    return out;
  }

  /**
   * What a commit of this attempt reports: every partition that received bytes, counted under
   * the slot its batches went to ({@link #slotOf}).
   *
   * @param bytes bytes pushed per partition
   * @param records records pushed per partition
   */
  public synchronized List<Message.PartitionStat> stats(long[] bytes, long[] records) {
    List<Message.PartitionStat> out = new ArrayList<>();
    for (int p = 0; p < bytes.length; p++) {
      if (bytes[p] > 0) {
        out.add(new Message.PartitionStat(slotOf(p), bytes[p], records[p]));
      }
    }
    return out;
  }

  /**
   * Queues {@code buf[0, len)} as the next batch of {@code partition}, to the worker at {@code
   * addr}. The pusher owns {@code buf} from now on: the caller must not change it.
   */
  public void push(int partition, String addr, byte[] buf, int len) throws IOException {
    enqueue(partition, addr, buf, len, true);
  }

  /**
   * {@link #push} without waiting for room in the window: the batch is queued even when the bytes
   * unacknowledged pass {@code maxInFlightBytes}. For a caller that must not block, e.g. one
   * handing its buffered bytes over while a lock of its engine is held (Spark's memory manager
   * asking a consumer to give memory back); the bytes it queues are what it gave back.
   */
  public void pushWithoutWaiting(int partition, String addr, byte[] buf, int len) throws IOException {
    enqueue(partition, addr, buf, len, false);
  }

  private void enqueue(int partition, String addr, byte[] buf, int len, boolean waitForRoom)
      throws IOException {
    if (len <= 0) {
      return;
    }
    synchronized (this) {
      long start = System.nanoTime();
      if (inFlight == 0) {
        // The acknowledgement clock runs from the oldest batch unacknowledged: a map that computed
        // longer than the timeout before this batch has not been waiting for any.
        lastProgressNanos = start;
      }
      while (waitForRoom && failure == null && inFlight > 0 && inFlight + len > maxInFlightBytes) {
        waitForProgress();
      }
      blockedNanos += System.nanoTime() - start;
      if (failure != null) {
        throw thrown(failure);
      }
      if (closed) {
        throw new IOException("pusher is closed");
      }
      pushedBytes += len;
      pushedBatches++;
      if (lostRace) {
        return; // another attempt of this map committed: nothing more to send
      }
      inFlight += len;
      peakInFlight = Math.max(peakInFlight, inFlight);
      if (slots[partition] < 0) {
        SplitRoutes.Route r = routes.of(partition);
        String current = r == null ? null : slotAddr.apply(r.slot());
        slots[partition] = r == null ? partition : r.slot();
        slotAddrs[partition] = r == null ? addr : current != null ? current : r.addr();
      }
      if (runPending[partition]) {
        runPending[partition] = false;
        if (nextSeq[partition] > 0) { // the first run begins at batch 0 and is never listed
          runStarts.add(new Message.RunStart(slots[partition], nextSeq[partition]));
        }
      }
      queue.add(new Item(partition, slots[partition], slotAddrs[partition],
          nextSeq[partition]++, buf, len));
      if (sender == null) {
        sender = new Thread(this::sendLoop, "crossdock-push-" + shuffleId + "-" + mapId);
        sender.setDaemon(true);
        sender.start();
      }
      notifyAll();
    }
  }

  /** Waits (holding the monitor) for an acknowledgement or a failure; enforces the timeout. */
  private void waitForProgress() throws IOException {
    long waitedMs = (System.nanoTime() - lastProgressNanos) / 1_000_000;
    if (waitedMs >= ackTimeoutMs) {
      failure = CrossdockException.transport(
          "workers", "no push acknowledgement within " + ackTimeoutMs + " ms", null);
      notifyAll();
      return;
    }
    try {
      wait(Math.min(1000, ackTimeoutMs - waitedMs));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while waiting for push acknowledgements");
    }
  }

  private void sendLoop() {
    while (true) {
      Item it;
      synchronized (this) {
        while (queue.isEmpty() && !closed && failure == null) {
          try {
            wait();
          } catch (InterruptedException e) {
            return;
          }
        }
        if (closed || failure != null) {
          return;
        }
        it = queue.poll();
        if (lostRace) {
          inFlight -= it.len;
          notifyAll();
          continue;
        }
      }
      try {
        int crc = Checksums.crc32c(it.buf, 0, it.len);
        Message.PushHeader h =
            new Message.PushHeader(appId, shuffleId, it.slot, mapId, attemptId, it.seq, crc);
        CompletableFuture<Message> f = pool.get(it.addr).push(h, it.buf, 0, it.len);
        final Item sent = it;
        f.whenComplete((m, e) -> acked(sent, e, m));
      } catch (IOException e) {
        acked(it, e, null);
      } catch (RuntimeException | Error t) {
        // The map fails with it rather than waiting out the acknowledgement timeout for a
        // batch this thread never sent.
        acked(it, CrossdockException.local(it.addr, "the push thread failed", t), null);
      }
    }
  }

  private synchronized void acked(Item it, Throwable e, Message m) {
    inFlight -= it.len;
    lastProgressNanos = System.nanoTime();
    String addr = it.addr;
    if (m instanceof Message.PushRedirect r) {
      routes.learn(it.partition, r.slot(), r.addr());
    }
    if (e instanceof CrossdockException ce && ce.code() == ErrorCode.PUSH_AFTER_COMMIT) {
      lostRace = true;
    } else if (failure == null) {
      if (e != null && !(e instanceof CrossdockException ce && !ce.isTransport())) {
        unreachable = addr;
      }
      if (e != null) {
        failure = e instanceof IOException io ? io : new IOException(e);
      } else if (!(m instanceof Message.Ok || m instanceof Message.PushRedirect)) {
        failure = CrossdockException.protocol("worker", "unexpected push answer " + m, null);
      }
    }
    notifyAll();
  }

  /** The failure to throw: an {@link Error} the sender thread met is the task's own. */
  private static IOException thrown(IOException failure) {
    CrossdockException.throwIfLocalError(failure);
    return failure;
  }

  /** Waits until every pushed batch is acknowledged; throws the first failure. */
  public synchronized void awaitAll() throws IOException {
    awaitInFlightAtMost(0);
  }

  /**
   * Waits until at most {@code bytes} pushed are unacknowledged (every batch, for 0); throws the
   * first failure. The acknowledgement timeout runs from the call.
   */
  public synchronized void awaitInFlightAtMost(long bytes) throws IOException {
    lastProgressNanos = System.nanoTime();
    while (failure == null && inFlight > bytes) {
      waitForProgress();
    }
    if (failure != null) {
      throw thrown(failure);
    }
  }

  /**
   * True once a worker answered push_after_commit: another attempt of this map committed first,
   * so this attempt's output does not count. Later batches are dropped (still counted in {@link
   * #pushedBytes}) and {@link #awaitAll} returns normally.
   */
  public synchronized boolean lostRace() {
    return lostRace;
  }

  /** The worker whose connection failed, if the first failure was one: to report it. */
  public synchronized String unreachableWorker() {
    return unreachable;
  }

  public synchronized long inFlightBytes() {
    return inFlight;
  }

  /** Most bytes that were queued or unacknowledged at one time. */
  public synchronized long peakInFlightBytes() {
    return peakInFlight;
  }

  public synchronized long pushedBytes() {
    return pushedBytes;
  }

  public synchronized long pushedBatches() {
    return pushedBatches;
  }

  /** Time {@link #push} spent blocked on a full window. */
  public synchronized long blockedNanos() {
    return blockedNanos;
  }

  @Override
  public synchronized void close() {
    closed = true;
    queue.clear();
    notifyAll();
  }
}
