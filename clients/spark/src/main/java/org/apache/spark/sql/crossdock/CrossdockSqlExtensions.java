package org.apache.spark.sql.crossdock;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.SparkPlan;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * Crossdock's Spark SQL extension: every shuffle exchange of a query becomes a {@link
 * PlacedShuffleExchangeExec}, whose reduce tasks prefer the hosts that hold their partitions.
 *
 * <p>It is found without configuration: the jar names it in {@code
 * META-INF/services/org.apache.spark.sql.SparkSessionExtensionsProvider}, which Spark loads for
 * every session. Naming it in {@code spark.sql.extensions} works too (Spark applies it once per
 * name). It changes nothing unless the application's shuffle manager is Crossdock's and {@code
 * spark.crossdock.locality} is on (the default).
 *
 * <p>The rule is a columnar rule because that is the one hook Spark applies both to a plan
 * without adaptive execution and to each adaptive query stage just before it runs (the way
 * accelerator plug-ins replace Spark's exchange).
 *
 * <p>A second rule, {@link SplitReadsAtHosts}, runs after adaptive execution has coalesced a
 * stage's reads and cuts any coalesced range that spans two hosts at the boundary, so that each
 * reduce task reads from the host it runs on.
 */
public final class CrossdockSqlExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit>
    implements SparkSessionExtensionsProvider {

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectColumnar(new AbstractFunction1<SparkSession, ColumnarRule>() {
      @Override
      public ColumnarRule apply(SparkSession session) {
        return new ColumnarRule() {
          @Override
          public Rule<SparkPlan> preColumnarTransitions() {
            return new PlaceReducers();
          }
        };
      }
    });
    extensions.injectQueryStageOptimizerRule(new AbstractFunction1<SparkSession, Rule<SparkPlan>>() {
      @Override
      public Rule<SparkPlan> apply(SparkSession session) {
        return new SplitReadsAtHosts();
      }
    });
    return BoxedUnit.UNIT;
  }
}
