package org.crossdock.mapreduce;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.crossdock.client.ConnectionPool;
import org.crossdock.client.CoordinatorClient;
import org.apache.hadoop.security.Credentials;
import org.crossdock.client.Net;
import org.crossdock.client.Placement;
import org.crossdock.client.SplitRoutes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A job's registration with Crossdock, shared by the job's tasks in this JVM: the app (one per
 * job, its shuffle is shuffle 0), its token, the coordinator and worker connections, the
 * shuffle's placement and the lease renewal.
 *
 * <p><b>Who registers.</b> On YARN, the submitter ({@code mapreduce.framework.name=crossdock-yarn},
 * {@link JobRegistration}) registered the app and put its id and token into the job's
 * credentials, which YARN gives every task: the session takes them from there and leaves the
 * app's end to the submitter. Under the local job runner every task runs in the submitting
 * JVM and MapReduce's local client has no such hook, so the first task of the job registers
 * the app: its id is the job id with a random suffix (local job ids repeat across processes),
 * the token never leaves the JVM, and the session unregisters the app when the last reduce
 * closed. A task on YARN whose credentials hold no app fails with a message that says how to
 * submit the job. See clients/mapreduce/README.md.
 *
 * <p><b>Lease.</b> Renewed every quarter lease while a task of the job runs here; after a
 * lease without one the session is dropped and the service expires the app, so a job that
 * failed leaves nothing behind for long. On YARN the submitter keeps the app until the job
 * ends, and the tasks' renewals only add to it.
 */
final class JobSession {
  private static final Logger LOG = LoggerFactory.getLogger(JobSession.class);
  /** The one shuffle of a MapReduce job. */
  static final int SHUFFLE_ID = 0;
  private static final Map<String, JobSession> SESSIONS = new HashMap<>();
  /** Jobs whose app this JVM registered and let expire: a later task of one fails clearly. */
  private static final Set<String> EXPIRED = new HashSet<>();
  private static ScheduledExecutorService renewer;

  final String jobId;
  final String appId;
  final byte[] token;
  final CrossdockMRConf conf;
  final CoordinatorClient coordinator;
  final ConnectionPool pool;
  final SplitRoutes routes = new SplitRoutes();
  private Placement placement;
  private Boolean keepsRuns;
  private final Set<Integer> reducesDone = new HashSet<>();
  /** True if this session registered the app (and so unregisters it at the end). */
  private final boolean owner;
  private int active;
  /** When {@link #active} last changed; all three fields are guarded by the registry's lock. */
  private long lastUse = System.nanoTime();
  private boolean closed;
  private ScheduledFuture<?> renewal;

  private JobSession(String jobId, String appId, byte[] token, CrossdockMRConf conf,
      CoordinatorClient coordinator, boolean owner) {
    this.jobId = jobId;
    this.appId = appId;
    this.token = token;
    this.conf = conf;
    this.coordinator = coordinator;
    this.owner = owner;
    this.pool = new ConnectionPool(CrossdockMRConf.CONNECT_TIMEOUT_MS);
    pool.authenticateAs(appId, token);
  }

  /**
   * The session of job {@code jobId} in this JVM, registering the app on first use; counts a
   * task of the job as running until it calls {@link #taskEnded}.
   */
  static JobSession begin(String jobId, CrossdockMRConf conf, Credentials credentials)
      throws IOException {
    synchronized (SESSIONS) {
      JobSession s = SESSIONS.get(jobId);
      if (s == null || s.closed) {
        byte[] app = credentials == null ? null : credentials.getSecretKey(JobRegistration.APP_ID);
        byte[] token =
            credentials == null ? null : credentials.getSecretKey(JobRegistration.APP_TOKEN);
        if (app != null && token != null) {
          s = join(jobId, new String(app, StandardCharsets.UTF_8), token, conf);
        } else if (EXPIRED.contains(jobId)) {
          throw new IOException("Crossdock: job " + jobId + "'s app expired: no task of the job "
              + "used it here for longer than its lease (" + CrossdockMRConf.LEASE + "), and its "
              + "shuffle data went with it");
        } else if (conf.local) {
          s = register(jobId, conf);
        } else {
          throw new IOException("Crossdock: job " + jobId + " was not registered with Crossdock "
              + "when it was submitted (its credentials hold no app): submit it with "
              + "mapreduce.framework.name=" + CrossdockClientProtocolProvider.FRAMEWORK
              + " and the Crossdock jar on the submitter's class path (HADOOP_CLASSPATH)");
        }
        SESSIONS.put(jobId, s);
      }
      s.active++;
      s.lastUse = System.nanoTime();
      return s;
    }
  }

  /** The session of a job its submitter registered (its app id and token from the credentials). */
  private static JobSession join(String jobId, String appId, byte[] token, CrossdockMRConf conf)
      throws IOException {
    Net.useTls(conf.tls);
    CoordinatorClient coordinator = new CoordinatorClient(conf.coordinator,
        CrossdockMRConf.CONNECT_TIMEOUT_MS, conf.networkTimeoutMs, appId, token);
    JobSession s = new JobSession(jobId, appId, token, conf, coordinator, false);
    scheduleRenewal(s);
    return s;
  }

  /** Registers the job's app from this task (the local job runner). */
  private static JobSession register(String jobId, CrossdockMRConf conf) throws IOException {
    Registered app = Registered.register(jobId, conf);
    JobSession s = new JobSession(jobId, app.appId(), app.token(), conf, app.coordinator(), true);
    LOG.info("Crossdock: job {} registered as app {} with coordinator {}", jobId, app.appId(),
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
      long every = Math.max(1, s.conf.leaseMs / 4);
      s.renewal = renewer.scheduleWithFixedDelay(s::renew, every, every, TimeUnit.MILLISECONDS);
    }
  }

  /**
   * Renews the lease, or lets the app go after a lease with no task of the job here. (A reduce
   * whose reducer fails in the middle of its input is never said to have ended: MapReduce calls
   * a plug-in's close only after a reduce that succeeded. Its session is then renewed until the
   * JVM exits; under the local job runner the JVM is the job's client, which ends with the
   * failed job.)
   */
  private void renew() {
    boolean closeNow;
    synchronized (SESSIONS) {
      if (closed) {
        return;
      }
      long idleMs = (System.nanoTime() - lastUse) / 1_000_000;
      closeNow = active == 0 && idleMs > conf.leaseMs;
      if (closeNow) {
        LOG.info("Crossdock: job {} has had no task here for {} ms; app {} is left to expire",
            jobId, idleMs, appId);
        if (owner) {
          EXPIRED.add(jobId);
        }
        closeLocked();
      }
    }
    if (closeNow) {
      pool.close();
      coordinator.close();
      return;
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

  /**
   * Whether the coordinator keeps where a map's several sorted runs begin (its status counts
   * them): maps may then push each spill as a run of its own. Asked once per JVM and job.
   */
  synchronized boolean keepsRuns() throws IOException {
    if (keepsRuns == null) {
      keepsRuns = coordinator.shuffleStatus(appId, SHUFFLE_ID).runCount().isPresent();
    }
    return keepsRuns;
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
    synchronized (SESSIONS) {
      active--;
      lastUse = System.nanoTime();
      if (reduceDone >= 0) {
        reducesDone.add(reduceDone);
      }
      if (!owner || closed || reducesDone.size() < numReduces) {
        return;
      }
      closeLocked();
    }
    try {
      coordinator.unregisterApp(appId);
      LOG.info("Crossdock: job {} done, app {} unregistered", jobId, appId);
    } catch (IOException e) {
      LOG.warn("Crossdock: unregistering app {} failed ({}); it expires with its lease", appId,
          e.toString());
    } finally {
      pool.close();
      coordinator.close();
    }
  }

  /** Ends the session (under the registry's lock); the caller closes its connections. */
  private void closeLocked() {
    closed = true;
    if (SESSIONS.get(jobId) == this) {
      SESSIONS.remove(jobId);
    }
    if (renewal != null) {
      renewal.cancel(false);
    }
  }
}
