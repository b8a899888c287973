package org.apache.spark.sql.crossdock;

import org.apache.spark.SparkEnv;
import org.apache.spark.shuffle.ShuffleManager;
import org.apache.spark.shuffle.crossdock.CrossdockShuffleManager;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec;
import scala.Function1;
import scala.runtime.AbstractPartialFunction;

/**
 * Replaces Spark's {@link ShuffleExchangeExec} with {@link PlacedShuffleExchangeExec}, when
 * Crossdock is the shuffle manager and {@code spark.crossdock.locality} is on. Only Spark's own
 * class is replaced: another plug-in's exchange (a subclass) is left to that plug-in.
 */
final class PlaceReducers extends Rule<SparkPlan> {

  @Override
  public SparkPlan apply(SparkPlan plan) {
    if (!enabled()) {
      return plan;
    }
    return plan.transformUp(new AbstractPartialFunction<SparkPlan, SparkPlan>() {
      @Override
      public boolean isDefinedAt(SparkPlan p) {
        return p.getClass() == ShuffleExchangeExec.class;
      }

      @SuppressWarnings("unchecked")
      @Override
      public <A1 extends SparkPlan, B1> B1 applyOrElse(A1 p, Function1<A1, B1> otherwise) {
        if (!isDefinedAt(p)) {
          return otherwise.apply(p);
        }
        ShuffleExchangeExec e = (ShuffleExchangeExec) p;
        return (B1) new PlacedShuffleExchangeExec(e.outputPartitioning(), e.child(),
            e.shuffleOrigin(), e.advisoryPartitionSize());
      }
    });
  }

  /** Crossdock is this application's shuffle manager and placement is wanted. */
  static boolean enabled() {
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      return false;
    }
    ShuffleManager m = env.shuffleManager();
    return m instanceof CrossdockShuffleManager c && c.localityEnabled();
  }
}
