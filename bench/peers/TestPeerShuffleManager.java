package bench.peer;

import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.sort.SortShuffleManager;

/**
 * Spark's own sort shuffle under another class name, shipped in a jar of its own: a peer
 * that bench/peers/build-test-peer.sh builds so the peer slot's jar path can be checked
 * end to end without any other shuffle service (Spark fails at start if the class is
 * not on the driver's and the executors' class path).
 */
public class TestPeerShuffleManager extends SortShuffleManager {
  public TestPeerShuffleManager(SparkConf conf) {
    super(conf);
    System.err.println("bench.peer.TestPeerShuffleManager in use");
  }
}
