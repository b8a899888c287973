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
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.protocol.ClientProtocol;
import org.apache.hadoop.security.Credentials;
import org.crossdock.client.CoordinatorClient;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Registers a YARN job with Crossdock when it is submitted: the app (the job id with a random
 * suffix) is registered by the submitting JVM, and its id and token go into the job's
 * credentials ({@link #APP_ID}, {@link #APP_TOKEN}), which the tasks read ({@link JobSession}).
 * The submitter then renews the lease while the job runs and unregisters the app when YARN
 * says the job ended; if the submitter exits first, the tasks renew the lease while they run
 * and the app expires one lease after the last of them.
 *
 * <p>It is the invocation handler of a proxy around the real client protocol ({@code
 * YARNRunner}): only {@code submitJob} is looked at, every call goes through unchanged.
 */
final class JobRegistration implements InvocationHandler {
  private static final Logger LOG = LoggerFactory.getLogger(JobRegistration.class);
  /** The secret keys of the job's credentials that carry its Crossdock app. */
  static final Text APP_ID = new Text("crossdock.app.id");
  static final Text APP_TOKEN = new Text("crossdock.app.token");

  private final ClientProtocol delegate;
  private final CrossdockMRConf conf;

  private JobRegistration(ClientProtocol delegate, CrossdockMRConf conf) {
    this.delegate = delegate;
    this.conf = conf;
  }

  static ClientProtocol wrap(ClientProtocol delegate, CrossdockMRConf conf) {
    return (ClientProtocol) Proxy.newProxyInstance(ClientProtocol.class.getClassLoader(),
        new Class<?>[] {ClientProtocol.class}, new JobRegistration(delegate, conf));
  }

  ClientProtocol delegate() {
    return delegate;
  }

  @Override
  public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
    if (method.getName().equals("submitJob") && args != null && args.length == 3
        && args[0] instanceof JobID id && args[2] instanceof Credentials credentials) {
      register(id, credentials);
    }
    try {
      return method.invoke(delegate, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  private void register(JobID job, Credentials credentials) throws IOException {
    Registered app = Registered.register(job.toString(), conf);
    String appId = app.appId();
    byte[] token = app.token();
    CoordinatorClient coordinator = app.coordinator();
    credentials.addSecretKey(APP_ID, appId.getBytes(StandardCharsets.UTF_8));
    credentials.addSecretKey(APP_TOKEN, token);
    LOG.info("Crossdock: job {} registered as app {} with coordinator {}", job, appId,
        conf.coordinator);
    keepUntilDone(job, appId, coordinator);
  }

  /** Renews the lease every quarter lease until the job ends, then unregisters the app. */
  private void keepUntilDone(JobID job, String appId, CoordinatorClient coordinator) {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "crossdock-job-lease-" + job);
      t.setDaemon(true);
      return t;
    });
    long every = Math.max(1, conf.leaseMs / 4);
    timer.scheduleWithFixedDelay(() -> {
      try {
        JobStatus s = delegate.getJobStatus(job);
        if (s != null && s.isJobComplete()) {
          coordinator.unregisterApp(appId);
          LOG.info("Crossdock: job {} {}, app {} unregistered", job, s.getState(), appId);
          coordinator.close();
          timer.shutdown();
          return;
        }
        coordinator.renewLease(appId);
      } catch (Exception e) {
        LOG.warn("Crossdock: keeping app {} of job {} failed this time: {}", appId, job,
            e.toString());
      }
    }, every, every, TimeUnit.MILLISECONDS);
  }
}
