package org.apache.spark.sql.crossdock

import org.apache.spark.SparkEnv
import org.apache.spark.shuffle.crossdock.CrossdockShuffleManager
import org.apache.spark.sql.{SparkSessionExtensions, SparkSessionExtensionsProvider}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec

/**
 * Crossdock's Spark SQL extension: every shuffle exchange of a query becomes a
 * [[PlacedShuffleExchangeExec]], whose reduce tasks prefer the hosts that hold their partitions.
 *
 * It is found without configuration: the jar names it in
 * `META-INF/services/org.apache.spark.sql.SparkSessionExtensionsProvider`, which Spark loads for
 * every session it builds. Naming it in `spark.sql.extensions` works too, and Spark 3.5 needs
 * that for the sessions PySpark makes through its constructor, which skips the services
 * (`crossdock spark-conf --spark 3.5` prints it); a session that applies both runs each rule
 * twice, which changes nothing (the second pass finds only placed exchanges and ranges
 * already cut). It changes nothing unless the application's shuffle manager is Crossdock's and
 * `spark.crossdock.locality` is on (the default).
 *
 * The rule is a columnar rule because that is the one hook Spark applies both to a plan
 * without adaptive execution and to each adaptive query stage just before it runs (the way
 * accelerator plug-ins replace Spark's exchange).
 *
 * A second rule, [[SplitReadsAtHosts]], runs after adaptive execution has coalesced a stage's
 * reads and cuts any coalesced range that spans two hosts at the boundary, so that each reduce
 * task reads from the host it runs on.
 */
class CrossdockSqlExtensions extends SparkSessionExtensionsProvider {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectColumnar { _ =>
      new ColumnarRule {
        override def preColumnarTransitions: Rule[SparkPlan] = new PlaceReducers
      }
    }
    extensions.injectQueryStageOptimizerRule(_ => new SplitReadsAtHosts)
  }
}

/**
 * Replaces Spark's `ShuffleExchangeExec` with [[PlacedShuffleExchangeExec]], when Crossdock is
 * the shuffle manager and `spark.crossdock.locality` is on. Only Spark's own class is replaced:
 * another plug-in's exchange (a subclass) is left to that plug-in.
 */
class PlaceReducers extends Rule[SparkPlan] {
  override def apply(plan: SparkPlan): SparkPlan = {
    if (!PlaceReducers.enabled()) {
      plan
    } else {
      plan.transformUp {
        case e: ShuffleExchangeExec if e.getClass == classOf[ShuffleExchangeExec] =>
          new PlacedShuffleExchangeExec(e.outputPartitioning, e.child, e.shuffleOrigin,
            e.advisoryPartitionSize)
      }
    }
  }
}

object PlaceReducers {
  /** Crossdock is this application's shuffle manager and placement is wanted. */
  def enabled(): Boolean = SparkEnv.get match {
    case null => false
    case env => env.shuffleManager match {
      case c: CrossdockShuffleManager => c.localityEnabled()
      case _ => false
    }
  }
}
