package org.crossdock.mapreduce;

import java.io.IOException;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapred.YARNRunner;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.protocol.ClientProtocol;
import org.apache.hadoop.security.Credentials;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Registers a YARN job with Crossdock when it is submitted: the app ({@link Registered}) is
 * registered by the submitting JVM, and its id and token go into the job's credentials ({@link
 * #APP_ID}, {@link #APP_TOKEN}), which the tasks read ({@link JobSession}). The submitter then
 * renews the lease while the job runs and unregisters the app when YARN says the job ended; if
 * the submitter exits first, the tasks renew the lease while they run, and the app expires a
 * lease after the submitter and every task stopped renewing it.
 *
 * <p>It is the invocation handler of a proxy around the real client protocol ({@code
 * YARNRunner}): only {@code submitJob} is looked at, every other call goes through unchanged.
 * The lease keeper asks YARN about the job through a runner of its own, which the job
 * client's close (Cluster.close, right after waitForCompletion in most drivers) does not touch.
 */
final class JobRegistration implements InvocationHandler {
  private static final Logger LOG = LoggerFactory.getLogger(JobRegistration.class);
  /** The secret keys of the job's credentials that carry its Crossdock app. */
  static final Text APP_ID = new Text("crossdock.app.id");
  static final Text APP_TOKEN = new Text("crossdock.app.token");
  /** Status checks in a row that may fail before the keeper gives up (10 min at 15 s). */
  private static final int MAX_STATUS_FAILURES = 40;

  private final ClientProtocol delegate;
  private final Configuration hadoopConf;
  private final CrossdockMRConf conf;

  private JobRegistration(ClientProtocol delegate, Configuration hadoopConf, CrossdockMRConf conf) {
    this.delegate = delegate;
    this.hadoopConf = hadoopConf;
    this.conf = conf;
  }

  static ClientProtocol wrap(ClientProtocol delegate, Configuration hadoopConf,
      CrossdockMRConf conf) {
    return (ClientProtocol) Proxy.newProxyInstance(ClientProtocol.class.getClassLoader(),
        new Class<?>[] {ClientProtocol.class}, new JobRegistration(delegate, hadoopConf, conf));
  }

  ClientProtocol delegate() {
    return delegate;
  }

  @Override
  public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
    switch (method.getName()) {
      case "equals":
        if (args != null && args.length == 1 && method.getParameterTypes()[0] == Object.class) {
          return proxy == args[0];
        }
        break;
      case "hashCode":
        if (args == null || args.length == 0) {
          return System.identityHashCode(proxy);
        }
        break;
      case "toString":
        if (args == null || args.length == 0) {
          return "Crossdock job registration around " + delegate;
        }
        break;
      case "submitJob":
        if (args != null && args.length == 3 && args[0] instanceof JobID id
            && args[2] instanceof Credentials credentials) {
          return submit(method, args, id, credentials);
        }
        break;
      default:
        break;
    }
    return call(method, args);
  }

  private Object call(Method method, Object[] args) throws Throwable {
    try {
      return method.invoke(delegate, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  /** Registers the job, submits it, and keeps its app until it ends (undone if submitting fails). */
  private Object submit(Method method, Object[] args, JobID job, Credentials credentials)
      throws Throwable {
    Registered app = Registered.register(job.toString(), conf);
    credentials.addSecretKey(APP_ID, app.appId().getBytes(StandardCharsets.UTF_8));
    credentials.addSecretKey(APP_TOKEN, app.token());
    Object status;
    try {
      status = call(method, args);
    } catch (Throwable t) {
      unregister(app, job + " was not submitted");
      throw t;
    }
    LOG.info("Crossdock: job {} registered as app {} with coordinator {}", job, app.appId(),
        conf.coordinator);
    keepUntilDone(job, app);
    return status;
  }

  /**
   * Renews the lease every quarter lease and asks YARN whether the job ended, then unregisters
   * the app. Renewing comes first and does not depend on YARN answering.
   */
  private void keepUntilDone(JobID job, Registered app) {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "crossdock-job-lease-" + job);
      t.setDaemon(true);
      return t;
    });
    YARNRunner yarn = new YARNRunner(new Configuration(hadoopConf));
    int[] failures = {0};
    long every = Math.max(1, conf.leaseMs / 4);
    timer.scheduleWithFixedDelay(() -> {
      try {
        app.coordinator().renewLease(app.appId());
      } catch (Exception e) {
        LOG.warn("Crossdock: renewing the lease of app {} failed: {}", app.appId(), e.toString());
      }
      String end = null;
      try {
        JobStatus s = yarn.getJobStatus(job);
        failures[0] = 0;
        if (s != null && s.isJobComplete()) {
          end = "job " + job + " " + s.getState();
        }
      } catch (Exception e) {
        if (++failures[0] >= MAX_STATUS_FAILURES) {
          end = "YARN did not say how job " + job + " is for " + failures[0] + " tries (" + e
              + "); the app is left to the tasks' renewals";
        }
      }
      if (end != null) {
        if (failures[0] < MAX_STATUS_FAILURES) {
          unregister(app, end);
        } else {
          LOG.warn("Crossdock: {}", end);
          app.coordinator().close();
        }
        try {
          yarn.close();
        } catch (IOException e) {
          LOG.debug("Crossdock: closing the job's YARN client: {}", e.toString());
        }
        timer.shutdown();
      }
    }, every, every, TimeUnit.MILLISECONDS);
  }

  private static void unregister(Registered app, String why) {
    try {
      app.coordinator().unregisterApp(app.appId());
      LOG.info("Crossdock: {}; app {} unregistered", why, app.appId());
    } catch (IOException e) {
      LOG.warn("Crossdock: {}; unregistering app {} failed ({}): it expires with its lease", why,
          app.appId(), e.toString());
    } finally {
      app.coordinator().close();
    }
  }
}
