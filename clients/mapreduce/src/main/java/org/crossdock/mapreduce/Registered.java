package org.crossdock.mapreduce;

import java.io.IOException;
import java.security.SecureRandom;
import org.crossdock.client.CoordinatorClient;
import org.crossdock.client.Net;

/**
 * A job's app, registered with the coordinator: its id ({@code <job id>-<random>}: job ids
 * repeat across local runners and across restarted clusters, and an id registered by another
 * client cannot be taken), its token and a coordinator client that proves it.
 */
record Registered(String appId, byte[] token, CoordinatorClient coordinator) {
  static Registered register(String jobId, CrossdockMRConf conf) throws IOException {
    Net.useTls(conf.tls);
    String appId = jobId + "-" + Long.toHexString(new SecureRandom().nextLong());
    CoordinatorClient coordinator = new CoordinatorClient(conf.coordinator,
        CrossdockMRConf.CONNECT_TIMEOUT_MS, conf.networkTimeoutMs);
    try {
      byte[] token = coordinator.registerApp(appId, conf.leaseMs);
      coordinator.authenticateAs(appId, token);
      return new Registered(appId, token, coordinator);
    } catch (IOException | RuntimeException e) {
      coordinator.close();
      throw new IOException("Crossdock: registering job " + jobId + " with coordinator "
          + conf.coordinator + " failed: " + e.getMessage(), e);
    }
  }
}
