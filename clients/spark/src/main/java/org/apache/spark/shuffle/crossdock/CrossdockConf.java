package org.apache.spark.shuffle.crossdock;

import org.apache.spark.SparkConf;

/**
 * The {@code spark.crossdock.*} keys (documented in clients/spark/README.md). Only the
 * coordinator is required; everything else has a default meant to be left alone.
 */
public final class CrossdockConf {
  public static final String COORDINATOR = "spark.crossdock.coordinator";
  public static final String PUSH_BATCH_SIZE = "spark.crossdock.push.batchSize";
  public static final String PUSH_MAX_IN_FLIGHT = "spark.crossdock.push.maxInFlight";
  public static final String NETWORK_TIMEOUT = "spark.crossdock.network.timeout";

  public static final String DEFAULT_BATCH_SIZE = "1m";
  public static final String DEFAULT_MAX_IN_FLIGHT = "32m";
  public static final String DEFAULT_NETWORK_TIMEOUT = "120s";

  /** Not keys: fixed choices. */
  public static final int CONNECT_TIMEOUT_MS = 5_000;
  public static final int LEASE_MS = 60_000;
  public static final int FETCH_MAX_RESUMES = 3;
  /** The workers' batch limit (docs/protocol.md, "Limits"). */
  public static final long MAX_BATCH = 16L << 20;

  public final String coordinator;
  public final int batchSize;
  public final long maxInFlight;
  public final long networkTimeoutMs;

  public CrossdockConf(SparkConf conf) {
    String c = conf.get(COORDINATOR, "").trim();
    if (c.isEmpty()) {
      throw new IllegalArgumentException(COORDINATOR + " is not set: set it to the host:port of "
          + "the Crossdock coordinator (`crossdock spark-conf --coordinator HOST:PORT` prints "
          + "every property Crossdock needs)");
    }
    this.coordinator = c;
    long b = conf.getSizeAsBytes(PUSH_BATCH_SIZE, DEFAULT_BATCH_SIZE);
    if (b < 1024 || b > MAX_BATCH) {
      throw new IllegalArgumentException(PUSH_BATCH_SIZE + " must be between 1k and 16m, got " + b);
    }
    this.batchSize = (int) b;
    this.maxInFlight = Math.max(conf.getSizeAsBytes(PUSH_MAX_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT), 1);
    this.networkTimeoutMs = Math.max(conf.getTimeAsMs(NETWORK_TIMEOUT, DEFAULT_NETWORK_TIMEOUT), 1000);
  }
}
