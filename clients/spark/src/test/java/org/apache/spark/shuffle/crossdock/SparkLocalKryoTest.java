package org.apache.spark.shuffle.crossdock;

import org.apache.spark.SparkConf;

/** {@link SparkLocalTest} with Kryo: shuffles without map-side combine use the direct writer. */
class SparkLocalKryoTest extends SparkLocalTest {
  @Override
  SparkConf configure(SparkConf conf) {
    return conf.set("spark.serializer", "org.apache.spark.serializer.KryoSerializer");
  }

  @Override
  boolean direct() {
    return true;
  }
}
