package org.apache.spark.shuffle.crossdock;

import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.MergedBlockMeta;
import org.apache.spark.shuffle.ShuffleBlockResolver;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleMergedBlockId;
import scala.Option;
import scala.collection.immutable.Seq;

/** Crossdock keeps no shuffle blocks in executors: nothing is ever served from here. */
final class CrossdockBlockResolver implements ShuffleBlockResolver {
  @Override
  public ManagedBuffer getBlockData(BlockId blockId, Option<String[]> dirs) {
    throw new UnsupportedOperationException(
        "shuffle block " + blockId + " lives in Crossdock, not in this executor");
  }

  @Override
  public Seq<ManagedBuffer> getMergedBlockData(ShuffleMergedBlockId blockId, Option<String[]> dirs) {
    throw new UnsupportedOperationException("Crossdock does not use Spark's push-based merge");
  }

  @Override
  public MergedBlockMeta getMergedBlockMeta(ShuffleMergedBlockId blockId, Option<String[]> dirs) {
    throw new UnsupportedOperationException("Crossdock does not use Spark's push-based merge");
  }

  @Override
  public void stop() {}
}
