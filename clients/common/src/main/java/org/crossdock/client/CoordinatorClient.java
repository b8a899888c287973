package org.crossdock.client;

import java.io.Closeable;
import java.io.IOException;
import java.util.List;
import org.crossdock.protocol.Message.CommitResult;
import org.crossdock.protocol.Message.ShuffleStatus;
import org.crossdock.protocol.Message;
import org.crossdock.protocol.Structures.PartitionStat;

/**
 * Typed calls to the coordinator. Connects eagerly so an unreachable coordinator fails fast;
 * reconnects on the next call after a transport failure.
 */
public final class CoordinatorClient implements Closeable {
  private final String addr;
  private final int connectTimeoutMs;
  private final long requestTimeoutMs;
  private RpcConnection conn;
  /** The app whose token each new connection proves; null before one is known. */
  private volatile String authApp;
  private volatile byte[] authToken;

  public CoordinatorClient(String addr, int connectTimeoutMs, long requestTimeoutMs)
      throws CrossdockException {
    this(addr, connectTimeoutMs, requestTimeoutMs, null, null);
  }

  /** A client that proves {@code appId}'s {@code token} (null: none yet) on its connections. */
  public CoordinatorClient(String addr, int connectTimeoutMs, long requestTimeoutMs, String appId,
      byte[] token) throws CrossdockException {
    this.addr = addr;
    this.connectTimeoutMs = connectTimeoutMs;
    this.requestTimeoutMs = requestTimeoutMs;
    this.authApp = appId;
    this.authToken = token;
    this.conn = RpcConnection.connect("Crossdock coordinator", addr, connectTimeoutMs, appId,
        token);
  }

  public String addr() {
    return addr;
  }

  private synchronized RpcConnection conn() throws CrossdockException {
    if (conn == null || conn.isClosed()) {
      conn = RpcConnection.connect("Crossdock coordinator", addr, connectTimeoutMs, authApp,
          authToken);
    }
    return conn;
  }

  /** How long calls keep retrying while the coordinator cannot be reached (a restart). */
  public static final long RETRY_WINDOW_MS = 60_000;

  /**
   * Sends any request and waits for its answer. While the coordinator cannot be reached (it
   * restarts, say), the call is retried with backoff for up to {@link #RETRY_WINDOW_MS}: every
   * coordinator request is idempotent (a repeated commit answers "already committed").
   */
  public Message call(Message m) throws IOException {
    String what = m.getClass().getSimpleName();
    long deadline = System.nanoTime() + RETRY_WINDOW_MS * 1_000_000L;
    long backoffMs = 100;
    while (true) {
      try {
        return Futures.await(conn().call(m), requestTimeoutMs, addr, what);
      } catch (CrossdockException e) {
        if (!e.isTransport() || System.nanoTime() + backoffMs * 1_000_000L > deadline) {
          throw e;
        }
        try {
          Thread.sleep(backoffMs);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw e;
        }
        backoffMs = Math.min(2_000, backoffMs * 2);
      }
    }
  }

  private void expectOk(Message m) throws IOException {
    Message r = call(m);
    if (!(r instanceof Message.Ok)) {
      throw Futures.unexpected(addr, r);
    }
  }

  /**
   * Registers (or renews) an app whose lease lasts {@code leaseMs} after each renewal and
   * returns its token (empty when the cluster runs without authentication), which this client
   * proves on every later connection. Executors get the token from the driver (in the shuffle
   * handle) and call {@link #authenticateAs}.
   */
  public byte[] registerApp(String appId, int leaseMs) throws IOException {
    return registerApp(appId, leaseMs, 0, 0);
  }

  /**
   * {@link #registerApp(String, int)}, asking every worker to hold the app to at most
   * {@code storedQuota} bytes stored and {@code memorySharePpm} parts per million of its memory
   * where that is stricter than the worker's own settings (0: no request). A worker never
   * raises a limit for an app's asking.
   */
  public byte[] registerApp(String appId, int leaseMs, long storedQuota, long memorySharePpm)
      throws IOException {
    Message r = call(new Message.RegisterApp(appId, leaseMs,
        java.util.OptionalLong.of(storedQuota), java.util.OptionalLong.of(memorySharePpm)));
    if (!(r instanceof Message.AppRegistered a)) {
      throw Futures.unexpected(addr, r);
    }
    byte[] token = new byte[a.token().remaining()];
    a.token().duplicate().get(token);
    synchronized (this) {
      // The connection that registered may act for the app already; later ones prove it.
      authApp = appId;
      authToken = token;
    }
    return token;
  }

  /**
   * Proves {@code appId}'s token from now on: the current connection is replaced, so the next
   * call opens one that authenticates.
   */
  public synchronized void authenticateAs(String appId, byte[] token) {
    boolean changed = !java.util.Arrays.equals(token, authToken) || !appId.equals(authApp);
    authApp = appId;
    authToken = token;
    if (changed && conn != null) {
      conn.close();
      conn = null;
    }
  }

  public void renewLease(String appId) throws IOException {
    expectOk(new Message.RenewLease(appId));
  }

  public void unregisterApp(String appId) throws IOException {
    expectOk(new Message.UnregisterApp(appId));
  }

  /** Registers a shuffle; the same sizes again return the same placement. */
  public Placement registerShuffle(String appId, int shuffleId, int numMaps, int numPartitions)
      throws IOException {
    return registerShuffle(appId, shuffleId, numMaps, numPartitions, null, null);
  }

  /**
   * Registers a shuffle with a range partitioner's sample of its map stage's input (null: none),
   * from which the coordinator predicts how its bytes divide among the partitions.
   */
  public Placement registerShuffle(String appId, int shuffleId, int numMaps, int numPartitions,
      List<Message.InputSample> sampleInputs, List<Message.SampleCount> sampleCounts)
      throws IOException {
    Message r = call(new Message.RegisterShuffle(appId, shuffleId, numMaps, numPartitions,
        sampleInputs, sampleCounts));
    if (r instanceof Message.ShufflePlacement p) {
      if (p.partitionWorkers().length != numPartitions) {
        throw CrossdockException.protocol(addr, "placement has " + p.partitionWorkers().length
            + " partitions, expected " + numPartitions, null);
      }
      return Placement.of(p.workers(), p.partitionWorkers(), p.partitionReplicas());
    }
    throw Futures.unexpected(addr, r);
  }

  /** Commits a map attempt with its non-empty partitions' sizes. */
  public CommitResult commitMap(
      String appId, int shuffleId, int mapId, int attemptId, List<PartitionStat> partitions)
      throws IOException {
    return commitMap(appId, shuffleId, mapId, attemptId, partitions, List.of());
  }

  /**
   * Commits a map attempt with its non-empty partitions' sizes and where its further sorted
   * runs begin ({@code runStarts}, in increasing (partition, batch) order; empty: one run per
   * partition, and the commit says nothing of runs, as one from before them).
   */
  public CommitResult commitMap(String appId, int shuffleId, int mapId, int attemptId,
      List<PartitionStat> partitions, List<Message.RunStart> runStarts) throws IOException {
    Message r = call(new Message.CommitMap(appId, shuffleId, mapId, attemptId, partitions,
        runStarts.isEmpty() ? null : runStarts));
    if (r instanceof CommitResult c) {
      return c;
    }
    throw Futures.unexpected(addr, r);
  }

  /**
   * Tells the coordinator that the worker at {@code workerAddr} could not be reached, so that
   * it checks the worker at once (and moves its partitions if it is gone) instead of waiting
   * for the worker's heartbeat deadline.
   */
  public void reportWorkerFailure(String workerAddr) throws IOException {
    expectOk(new Message.ReportWorkerFailure(workerAddr));
  }

  public void unregisterShuffle(String appId, int shuffleId) throws IOException {
    expectOk(new Message.UnregisterShuffle(appId, shuffleId));
  }

  public ShuffleStatus shuffleStatus(String appId, int shuffleId) throws IOException {
    return status(new Message.GetShuffleStatus(appId, shuffleId));
  }

  /**
   * The shuffle's status with the run starts of partitions {@code [runsFrom, runsTo)} and of
   * their splits. A coordinator that predates run starts answers without them (null).
   */
  public ShuffleStatus shuffleStatus(String appId, int shuffleId, int runsFrom, int runsTo)
      throws IOException {
    return status(new Message.GetShuffleStatus(appId, shuffleId,
        java.util.OptionalInt.of(runsFrom), java.util.OptionalInt.of(runsTo)));
  }

  private ShuffleStatus status(Message.GetShuffleStatus ask) throws IOException {
    Message r = call(ask);
    if (r instanceof ShuffleStatus s) {
      return s;
    }
    throw Futures.unexpected(addr, r);
  }

  @Override
  public synchronized void close() {
    if (conn != null) {
      conn.close();
      conn = null;
    }
  }
}
