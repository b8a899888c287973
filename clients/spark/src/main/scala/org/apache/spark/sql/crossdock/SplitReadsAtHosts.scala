package org.apache.spark.sql.crossdock

import org.apache.spark.internal.Logging
import org.apache.spark.shuffle.crossdock.CrossdockShuffleManager
import org.apache.spark.sql.execution.{CoalescedPartitionSpec, ShufflePartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, AQEShuffleReadRule, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.{ENSURE_REQUIREMENTS, REBALANCE_PARTITIONS_BY_COL, REBALANCE_PARTITIONS_BY_NONE, REPARTITION_BY_COL, ShuffleOrigin}
import org.crossdock.client.ReducerHosts

/**
 * Cuts AQE's coalesced reads where a placed shuffle's partitions change host, so that a reduce
 * task reads from one host and runs there. First, it has the driver refresh the placement of
 * every placed shuffle whose map stage completed (`CrossdockShuffleManager.refreshAfterMapStage`),
 * which the cuts and the reduce tasks' preferred locations then use.
 *
 * AQE's `CoalesceShufflePartitions` merges small neighbouring partitions into one task by size
 * alone. The coordinator places a shuffle's partitions in one contiguous block per worker, so
 * most ranges lie on one host, but a range across a block boundary reads part of its input over
 * the network whichever host runs it (on the emulated cluster, a small join's six tasks put 1.4×
 * vanilla Spark's bytes on the links). Cutting each such range at the boundary adds at most one
 * task per boundary, as many as the workers less one per shuffle, and makes every piece local.
 *
 * The cuts are the union of the boundaries of every placed shuffle the stage reads, applied to
 * every read of the stage: reads that AQE coalesced together (a join's sides) had equal ranges
 * and get equal pieces, so their partitions stay aligned. A stage with any read that is not a
 * plain ascending coalesced read (a skew split, a local read) is left as it is, since cutting
 * one side of a join alone would misalign it. Spark validates the result as it does its own
 * rules' (an `AQEShuffleReadRule` that breaks a required distribution is dropped), and skips it
 * on the final stage when `spark.sql.adaptive.applyFinalStageShuffleOptimizations` is off.
 */
class SplitReadsAtHosts extends AQEShuffleReadRule with Logging {

  /** The origins whose reads AQE may coalesce: the ones whose pieces may be regrouped. */
  override val supportedShuffleOrigins: Seq[ShuffleOrigin] = Seq(
    ENSURE_REQUIREMENTS, REPARTITION_BY_COL, REBALANCE_PARTITIONS_BY_NONE,
    REBALANCE_PARTITIONS_BY_COL)

  override def apply(plan: SparkPlan): SparkPlan = {
    if (!PlaceReducers.enabled()) {
      return plan
    }
    // The placements as the map stages left them (the coordinator's re-placement, splits), once
    // per shuffle, before any host is read from them here or by the reduce tasks' preferences.
    plan.foreach {
      case stage: ShuffleQueryStageExec if stage.isMaterialized => stage.shuffle match {
        case e: PlacedShuffleExchangeExec =>
          CrossdockShuffleManager.refreshAfterMapStage(e.shuffleDependency)
        case _ =>
      }
      case _ =>
    }
    val reads = plan.collect { case r: AQEShuffleReadExec => r }
    if (reads.isEmpty || !reads.forall(splittable)) {
      return plan
    }
    val cuts = reads.flatMap(hostBoundaries).distinct.sorted.toArray
    if (cuts.isEmpty) {
      return plan
    }
    plan.transformUp { case r: AQEShuffleReadExec =>
      val stage = r.child.asInstanceOf[ShuffleQueryStageExec]
      val specs: Seq[ShufflePartitionSpec] = r.partitionSpecs.flatMap {
        case spec @ CoalescedPartitionSpec(start, end, _) =>
          val pieces = ReducerHosts.split(start, end, cuts)
          if (pieces.size == 1) {
            Seq(spec)
          } else {
            Seq.tabulate(pieces.size)(pieces.get).map { case Array(from, to) =>
              val bytes = stage.mapStats.map(_.bytesByPartitionId.slice(from, to).sum)
              CoalescedPartitionSpec(from, to, bytes)
            }
          }
        case other => Seq(other)
      }
      if (specs.length == r.partitionSpecs.length) {
        r
      } else {
        logInfo(s"Crossdock: cut the read of query stage ${stage.id} at its hosts' " +
          s"boundaries: ${r.partitionSpecs.length} tasks become ${specs.length}")
        r.copy(partitionSpecs = specs)
      }
    }
  }

  /** A plain read of a shuffle stage in ascending, disjoint coalesced ranges. */
  private def splittable(r: AQEShuffleReadExec): Boolean = r.child match {
    case stage: ShuffleQueryStageExec if isSupported(stage.shuffle) =>
      var next = 0
      r.partitionSpecs.forall {
        case CoalescedPartitionSpec(start, end, _) if start >= next && end > start =>
          next = end
          true
        case _ => false
      }
    case _ => false
  }

  /** Where the partitions of a placed shuffle change host; none for any other shuffle. */
  private def hostBoundaries(r: AQEShuffleReadExec): Seq[Int] = r.child match {
    case stage: ShuffleQueryStageExec => stage.shuffle match {
      case e: PlacedShuffleExchangeExec =>
        Option(CrossdockShuffleManager.placementOf(e.shuffleDependency))
          .map(p => ReducerHosts.hostBoundaries(p).toSeq)
          .getOrElse(Seq.empty)
      case _ => Seq.empty
    }
    case _ => Seq.empty
  }
}
