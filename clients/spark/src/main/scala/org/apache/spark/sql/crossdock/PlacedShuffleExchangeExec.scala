package org.apache.spark.sql.crossdock

import org.apache.spark.{Partition, ShuffleDependency}
import org.apache.spark.rdd.RDD
import org.apache.spark.shuffle.crossdock.CrossdockShuffleManager
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.plans.physical.{Partitioning, RangePartitioning}
import org.apache.spark.sql.execution.{CoalescedPartitionSpec, PartialMapperPartitionSpec, PartialReducerPartitionSpec, ShufflePartitionSpec, ShuffledRowRDD, SparkPlan}
import org.apache.spark.sql.execution.exchange.{ShuffleExchangeExec, ShuffleOrigin}
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * Spark's shuffle exchange, whose reduce side is a [[PlacedShuffledRowRDD]]: the same map side,
 * statistics, metrics and adaptive behaviour (it is a `ShuffleExchangeExec`, so every rule of
 * Spark that matches one still does), and reduce tasks that prefer their partitions' hosts.
 *
 * Written in Scala because javac cannot subclass a Spark plan node (the erased signatures that
 * Scala's `UnaryLike` trait leaves on `Exchange` do not reconcile), and in Spark's `sql` package
 * because the exchange's read metrics are `private[sql]`.
 *
 * A copy of the node by a rule (`withNewChildren`) or by Spark's reflective `makeCopy` stays a
 * placed exchange; a `copy(...)` call would give back Spark's own, which is correct, only not
 * placed (no rule of Spark copies an exchange once it is a query stage).
 */
class PlacedShuffleExchangeExec(
    partitioning: Partitioning,
    input: SparkPlan,
    origin: ShuffleOrigin,
    advisorySize: Option[Long])
  extends ShuffleExchangeExec(partitioning, input, origin, advisorySize) {

  /**
   * A range exchange's input samples itself while Spark's range partitioner reads it for its
   * bounds ([[RangeSampleTap]]); the shuffle registers with that sample, from which the
   * coordinator predicts how its bytes divide. Other partitionings read their input as Spark's
   * exchange does.
   */
  @transient override lazy val inputRDD: RDD[InternalRow] = partitioning match {
    case RangePartitioning(ordering, n) if n > 1 =>
      new RangeSampleTap(child.execute(), n, ordering, child.output)
    case _ => child.execute()
  }

  /** The reduce RDD of a plain `execute()`, built once as Spark's own exchange does. */
  @transient private var shuffleRdd: RDD[InternalRow] = _

  override def nodeName: String = "Exchange (Crossdock placed)"

  /**
   * Not equal to Spark's own exchange of the same fields. A case class's equality would make
   * them equal, and a rule replacing an exchange under another node would then be undone:
   * `TreeNode.mapChildren` keeps the old child when it equals the new one. Under adaptive
   * execution each exchange is the root of its query stage, which hid this; without it, Spark's
   * exchange stayed in the plan.
   */
  override def equals(other: Any): Boolean =
    other.isInstanceOf[PlacedShuffleExchangeExec] && super.equals(other)

  /** Spark's exchange asks this when it compares itself with a placed one. (The hash stays
   * Spark's: equal placed exchanges have equal fields.) */
  override def canEqual(other: Any): Boolean = other.isInstanceOf[PlacedShuffleExchangeExec]

  /**
   * Canonically Spark's own exchange: adaptive execution looks a new exchange up in its stage
   * cache by Spark's exchange's canonical form, before this one replaces it, and exchange reuse
   * compares canonical forms, so a placed exchange and Spark's of the same plan are one.
   */
  override protected def doCanonicalize(): SparkPlan =
    ShuffleExchangeExec(outputPartitioning, child, shuffleOrigin, advisoryPartitionSize)
      .canonicalized

  override def getShuffleRDD(partitionSpecs: Array[ShufflePartitionSpec]): RDD[InternalRow] =
    new PlacedShuffledRowRDD(shuffleDependency, readMetrics, partitionSpecs)

  override protected def doExecute(): RDD[InternalRow] = synchronized {
    if (shuffleRdd == null) {
      shuffleRdd = new PlacedShuffledRowRDD(shuffleDependency, readMetrics,
        Array.tabulate[ShufflePartitionSpec](shuffleDependency.partitioner.numPartitions) { i =>
          CoalescedPartitionSpec(i, i + 1)
        })
    }
    shuffleRdd
  }

  override protected def withNewChildInternal(newChild: SparkPlan): ShuffleExchangeExec =
    new PlacedShuffleExchangeExec(outputPartitioning, newChild, shuffleOrigin,
      advisoryPartitionSize)
}

/**
 * Spark SQL's reduce-side RDD, whose tasks prefer the hosts of the Crossdock workers holding
 * their partitions (`CrossdockShuffleManager.preferredHosts`) instead of the hosts that ran the
 * most maps: with a push shuffle the data is where it was pushed, not where it was made.
 *
 * What a task reads decides its hosts: a whole partition or a range of them (AQE's coalesced
 * read), a slice of one partition's maps (AQE's skew split: the whole partition lives on one
 * worker, so the slice does too), or one map's part of a range of partitions (the local shuffle
 * read). A map range across all partitions reads from every worker and keeps Spark's own
 * preference, as does a shuffle that went through Spark's sort shuffle.
 */
class PlacedShuffledRowRDD(
    dependency: ShuffleDependency[Int, InternalRow, InternalRow],
    metrics: Map[String, SQLMetric],
    specs: Array[ShufflePartitionSpec])
  extends ShuffledRowRDD(dependency, metrics, specs) {

  override def getPreferredLocations(partition: Partition): Seq[String] = {
    // Spark numbers the partitions by their spec's index.
    val range = specs(partition.index) match {
      case CoalescedPartitionSpec(start, end, _) => Some((start, end))
      case PartialReducerPartitionSpec(reducer, _, _, _) => Some((reducer, reducer + 1))
      case PartialMapperPartitionSpec(_, start, end) => Some((start, end))
      case _ => None
    }
    range.flatMap { case (start, end) =>
      Option(CrossdockShuffleManager.preferredHosts(this.dependency, start, end))
    } match {
      // Indexed, not through a collection converter: one source for Scala 2.12 and 2.13.
      case Some(hosts) => List.tabulate(hosts.size)(hosts.get)
      case None => super.getPreferredLocations(partition)
    }
  }
}
