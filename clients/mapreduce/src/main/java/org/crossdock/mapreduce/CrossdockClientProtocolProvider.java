package org.crossdock.mapreduce;

import java.io.IOException;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapred.YARNRunner;
import org.apache.hadoop.mapreduce.MRConfig;
import org.apache.hadoop.mapreduce.protocol.ClientProtocol;
import org.apache.hadoop.mapreduce.protocol.ClientProtocolProvider;

/**
 * The job client's side of a YARN job shuffled through Crossdock: {@code
 * mapreduce.framework.name=crossdock-yarn} submits the job to YARN as {@code yarn} does, after
 * registering it with Crossdock ({@link JobRegistration}). MapReduce has no other hook a job
 * property can enable on the submitting side, and the submitter is the one place that can put
 * the app's token into the job's credentials, which YARN hands to the application master and
 * every task, and nobody else. Found by MapReduce's {@code Cluster} through the service file
 * {@code META-INF/services/org.apache.hadoop.mapreduce.protocol.ClientProtocolProvider}, so the
 * jar must be on the submitter's class path (HADOOP_CLASSPATH) as well as on the tasks'.
 */
public final class CrossdockClientProtocolProvider extends ClientProtocolProvider {
  /** The framework name that selects this provider. */
  public static final String FRAMEWORK = "crossdock-yarn";

  @Override
  public ClientProtocol create(Configuration conf) throws IOException {
    if (!FRAMEWORK.equals(conf.getTrimmed(MRConfig.FRAMEWORK_NAME))) {
      return null;
    }
    // Checked first: a bad setting must fail here, not fall through to plain YARN.
    CrossdockMRConf crossdock = new CrossdockMRConf(conf);
    // The job itself runs on YARN like any other: its configuration (written to job.xml after
    // this, when it is the job's own, as with Job.getInstance) says yarn, so the application
    // master and the tasks see nothing unusual.
    conf.set(MRConfig.FRAMEWORK_NAME, MRConfig.YARN_FRAMEWORK_NAME);
    return JobRegistration.wrap(new YARNRunner(conf), conf, crossdock);
  }

  @Override
  public ClientProtocol create(InetSocketAddress addr, Configuration conf) throws IOException {
    return create(conf);
  }

  @Override
  public void close(ClientProtocol client) throws IOException {
    ClientProtocol inner = client;
    if (Proxy.isProxyClass(client.getClass())
        && Proxy.getInvocationHandler(client) instanceof JobRegistration r) {
      inner = r.delegate();
    }
    if (inner instanceof YARNRunner y) {
      y.close();
    }
  }
}
