package org.crossdock.mapreduce;

import java.io.IOException;
import java.security.SecureRandom;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.crossdock.client.ConnectionPool;
import org.crossdock.client.CoordinatorClient;
import org.crossdock.client.CrossdockException;
import org.crossdock.client.Net;
import org.crossdock.client.Placement;
import org.crossdock.client.SplitRoutes;
import org.crossdock.protocol.ErrorCode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A job's registration with Crossdock, shared by the job's tasks in this JVM: the app (one per
 * job, its shuffle is shuffle 0), its token, the coordinator and worker connections, the
 * shuffle's placement and the lease renewal.
 *
 * <p><b>Who registers.</b> MapReduce has no driver-side hook a job property can enable, so the
 * first task of the job that runs in a JVM registers the app. Under the local job runner every
 * task runs in the submitting JVM: the app id is the job id with a random suffix (local job ids
 * repeat across processes), the token never leaves the JVM, and the session unregisters the app
 * when the last reduce closed. Tasks in separate JVMs (YARN) would share the registration by the
 * job id alone, which a service with authentication refuses (only the token's holder may
 * register an id again): the error says so. See clients/mapreduce/README.md.
 *
 * <p><b>Lease.</b> Renewed every quarter lease while a task of the job runs here or ran within
 * the last lease; after that the session is dropped and the service expires the app, so a job
 * that failed leaves nothing behind for longer than a lease.
 */
final class JobSession {
  private static final Logger LOG = LoggerFactory.getLogger(JobSession.class);
  /** The one shuffle of a MapReduce job. */
  static final int SHUFFLE_ID = 0;
  private static final Map<String, JobSession> SESSIONS = new HashMap<>();
  private static ScheduledExecutorService renewer;

  final String jobId;
  final String appId;
  final byte[] token;
  final CrossdockMRConf conf;
  final CoordinatorClient coordinator;
  final ConnectionPool pool;
  final SplitRoutes routes = new SplitRoutes();
  private Placement placement;
  private final Set<Integer> reducesDone = new HashSet<>();
  private int active;
  private long lastUse = System.nanoTime();
  private boolean closed;

  private JobSession(String jobId, String appId, byte[] token, CrossdockMRConf conf,
      CoordinatorClient coordinator) {
    this.jobId = jobId;
    this.appId = appId;
    this.token = token;
    this.conf = conf;
    this.coordinator = coordinator;
    this.pool = new ConnectionPool(CrossdockMRConf.CONNECT_TIMEOUT_MS);
    pool.authenticateAs(appId, token);
  }

  /**
   * The session of job {@code jobId} in this JVM, registering the app on first use; counts a
   * task of the job as running until it calls {@link #taskEnded}.
   */
  static JobSession begin(String jobId, CrossdockMRConf conf) throws IOException {
    synchronized (SESSIONS) {
      JobSession s = SESSIONS.get(jobId);
      if (s == null || s.closed) {
        s = register(jobId, conf);
        SESSIONS.put(jobId, s);
      }
      s.active++;
      s.lastUse = System.nanoTime();
      return s;
    }
  }

  private static JobSession register(String jobId, CrossdockMRConf conf) throws IOException {
    Net.useTls(conf.tls);
    String appId = conf.local
        ? jobId + "-" + Long.toHexString(new SecureRandom().nextLong())
        : jobId;
    CoordinatorClient coordinator = new CoordinatorClient(conf.coordinator,
        CrossdockMRConf.CONNECT_TIMEOUT_MS, conf.networkTimeoutMs);
    byte[] token;
    try {
      token = coordinator.registerApp(appId, conf.leaseMs);
    } catch (CrossdockException e) {
      coordinator.close();
      if (e.code() == ErrorCode.UNAUTHORIZED) {
        throw new IOException("Crossdock refused to register job " + jobId + " again: its "
            + "tasks run in several JVMs and the service requires authentication, which the "
            + "MapReduce client supports under the local job runner only so far (see "
            + "clients/mapreduce/README.md): " + e.getMessage(), e);
      }
      throw e;
    }
    coordinator.authenticateAs(appId, token);
    JobSession s = new JobSession(jobId, appId, token, conf, coordinator);
    LOG.info("Crossdock: job {} registered as app {} with coordinator {}", jobId, appId,
        conf.coordinator);
    scheduleRenewal(s);
    return s;
  }

  private static void scheduleRenewal(JobSession s) {
    synchronized (SESSIONS) {
      if (renewer == null) {
        renewer = Executors.newSingleThreadScheduledExecutor(r -> {
          Thread t = new Thread(r, "crossdock-mapreduce-lease-renewer");
          t.setDaemon(true);
          return t;
        });
      }
    }
    long every = Math.max(1, s.conf.leaseMs / 4);
    renewer.scheduleWithFixedDelay(() -> s.renew(), every, every, TimeUnit.MILLISECONDS);
  }

  private void renew() {
    synchronized (SESSIONS) {
      if (closed) {
        throw new IllegalStateException("stop renewing"); // ends this periodic task
      }
      long idleMs = (System.nanoTime() - lastUse) / 1_000_000;
      if (active == 0 && idleMs > conf.leaseMs) {
        LOG.info("Crossdock: job {} has had no task here for {} ms; app {} is left to expire",
            jobId, idleMs, appId);
        closeLocked(false);
        throw new IllegalStateException("stop renewing");
      }
    }
    try {
      coordinator.renewLease(appId);
    } catch (Exception e) {
      LOG.warn("Crossdock: renewing the lease of app {} failed: {}", appId, e.toString());
    }
  }

  /**
   * The shuffle's placement, registering the shuffle on first use (the same sizes again return
   * the same placement, so tasks in other JVMs agree).
   */
  synchronized Placement placement(int numMaps, int numPartitions) throws IOException {
    if (placement == null) {
      placement = coordinator.registerShuffle(appId, SHUFFLE_ID, numMaps, numPartitions);
    }
    return placement;
  }

  /** Forgets the cached placement (after a worker was reported lost). */
  synchronized void refreshPlacement() {
    placement = null;
  }

  /**
   * A task of the job ended here. Under the local job runner, once every reduce closed after
   * reading, nothing will read the shuffle again: the app is unregistered at once.
   */
  void taskEnded(int reduceDone, int numReduces) {
    boolean unregister;
    synchronized (SESSIONS) {
      active--;
      lastUse = System.nanoTime();
      if (reduceDone >= 0) {
        reducesDone.add(reduceDone);
      }
      unregister = conf.local && !closed && reducesDone.size() >= numReduces;
      if (unregister) {
        closeLocked(true);
      }
    }
  }

  private void closeLocked(boolean unregister) {
    closed = true;
    if (SESSIONS.get(jobId) == this) {
      SESSIONS.remove(jobId);
    }
    if (unregister) {
      try {
        coordinator.unregisterApp(appId);
        LOG.info("Crossdock: job {} done, app {} unregistered", jobId, appId);
      } catch (IOException e) {
        LOG.warn("Crossdock: unregistering app {} failed ({}); it expires with its lease", appId,
            e.toString());
      }
    }
    pool.close();
    coordinator.close();
  }
}
