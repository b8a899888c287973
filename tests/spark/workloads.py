"""Shuffle workloads run once with Spark's own shuffle and once through Crossdock.

Each workload takes a SparkSession and returns a plain, comparable Python value. Inputs
are fixed (seeded), so both runs see the same data.
"""

from __future__ import annotations

import contextlib
import os
import random
import time

from pyspark.sql import Window
from pyspark.sql import functions as F


@contextlib.contextmanager
def sql_conf(spark, **settings):
    """Sets SQL confs for one workload and restores them afterwards."""
    keys = {k.replace("__", "."): str(v) for k, v in settings.items()}
    old = {k: spark.conf.get(k, None) for k in keys}
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _pairs(sc, n=20000, keys=500, parts=6, seed=7):
    rnd = random.Random(seed)
    data = [(rnd.randrange(keys), rnd.randrange(1000)) for _ in range(n)]
    return sc.parallelize(data, parts)


def rdd_group_by_key(spark):
    return sorted((k, sorted(v)) for k, v in _pairs(spark.sparkContext).groupByKey(5).collect())


def rdd_reduce_by_key(spark):
    return sorted(_pairs(spark.sparkContext).reduceByKey(lambda a, b: a + b, 7).collect())


def rdd_aggregate_by_key(spark):
    r = _pairs(spark.sparkContext).aggregateByKey((0, 0), lambda a, v: (a[0] + v, a[1] + 1),
                                                  lambda a, b: (a[0] + b[0], a[1] + b[1]), 4)
    return sorted(r.collect())


def rdd_combine_by_key(spark):
    r = _pairs(spark.sparkContext).combineByKey(lambda v: [v], lambda c, v: c + [v], lambda a, b: a + b, 3)
    return sorted((k, sorted(v)) for k, v in r.collect())


def rdd_sort_by_key(spark):
    # Keys must come out in order; values of equal keys have no defined order (vanilla
    # Spark's own order depends on which blocks arrive first), so they are compared as a
    # multiset.
    out = _pairs(spark.sparkContext).sortByKey(ascending=False, numPartitions=5).collect()
    keys = [k for k, _ in out]
    assert keys == sorted(keys, reverse=True), "keys out of order"
    return (keys, sorted(out))


def rdd_join(spark):
    sc = spark.sparkContext
    a = _pairs(sc, n=3000, keys=300, seed=1)
    b = _pairs(sc, n=2000, keys=400, seed=2)
    return sorted(a.join(b, 6).collect())


def rdd_cogroup(spark):
    sc = spark.sparkContext
    a = _pairs(sc, n=2000, keys=200, seed=3)
    b = _pairs(sc, n=2000, keys=250, seed=4)
    return sorted((k, (sorted(x), sorted(y))) for k, (x, y) in a.cogroup(b, 4).collect())


def rdd_repartition(spark):
    r = spark.sparkContext.parallelize(range(50000), 3).repartition(11)
    return (r.getNumPartitions(), sorted(r.collect()))


def rdd_coalesce_with_shuffle(spark):
    r = spark.sparkContext.parallelize(range(30000), 9).coalesce(4, shuffle=True)
    return (r.getNumPartitions(), sorted(r.collect()))


def rdd_distinct(spark):
    return sorted(spark.sparkContext.parallelize([i % 777 for i in range(40000)], 5).distinct(6).collect())


def _df(spark, rows=60000, keys=1000, seed=11):
    return (spark.range(0, rows, numPartitions=6)
            .withColumn("k", (F.hash(F.col("id"), F.lit(seed)) % keys).cast("int"))
            .withColumn("v", (F.col("id") * 7 % 1003).cast("long")))


def df_group_by_agg(spark):
    out = _df(spark).groupBy("k").agg(F.sum("v").alias("s"), F.count("*").alias("c"), F.max("v").alias("m"))
    return sorted(map(tuple, out.collect()))


def df_order_by(spark):
    return [tuple(r) for r in _df(spark).orderBy(F.col("v").desc(), "id").limit(5000).collect()]


def df_sort_merge_join(spark):
    with sql_conf(spark, spark__sql__autoBroadcastJoinThreshold=-1):
        return _df_sort_merge_join(spark)


def _df_sort_merge_join(spark):
    a = _df(spark, rows=40000, seed=1).select("k", F.col("v").alias("a"))
    b = _df(spark, rows=30000, seed=2).groupBy("k").agg(F.sum("v").alias("b"))
    out = a.join(b, "k").groupBy("k").agg(F.sum("a").alias("sa"), F.first("b").alias("b"))
    return sorted(map(tuple, out.collect()))


def df_window(spark):
    w = Window.partitionBy("k").orderBy("id")
    out = _df(spark, rows=30000, keys=200).withColumn("rn", F.row_number().over(w)).withColumn(
        "run", F.sum("v").over(w)).filter(F.col("rn") <= 5)
    return sorted(map(tuple, out.collect()))


def df_union_distinct(spark):
    a = _df(spark, rows=20000, keys=500).select("k")
    b = _df(spark, rows=20000, keys=700, seed=3).select("k")
    return sorted(r[0] for r in a.union(b).distinct().collect())


def df_aqe_skew_join(spark):
    """A skewed sort-merge join that AQE splits (skew reads are map-range reads)."""
    # The aggregation after the join would make AQE decline the split (it would add a
    # shuffle); forcing it keeps this a real skew split: map-range reads of one partition.
    with sql_conf(spark, spark__sql__autoBroadcastJoinThreshold=-1,
                  spark__sql__adaptive__forceOptimizeSkewedJoin="true",
                  spark__sql__adaptive__skewJoin__skewedPartitionThresholdInBytes="1k",
                  spark__sql__adaptive__skewJoin__skewedPartitionFactor=1,
                  spark__sql__adaptive__advisoryPartitionSizeInBytes="4k"):
        return _df_aqe_skew_join(spark)


def _df_aqe_skew_join(spark):
    big = spark.range(0, 80000, numPartitions=8).withColumn("k", F.when(F.col("id") % 10 < 8, 0).otherwise(F.col("id") % 50))
    small = spark.range(0, 50).withColumnRenamed("id", "k").withColumn("w", F.col("k") * 3)
    out = big.join(small, "k").groupBy("k").agg(F.count("*").alias("c"), F.sum("w").alias("sw"))
    rows = sorted(map(tuple, out.collect()))
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert "skewed" in plan, "AQE did not split the skewed partition:\n" + plan
    return rows


def df_aqe_local_shuffle_reader(spark):
    """A join AQE turns into a broadcast join at run time, reading its shuffle locally."""
    # No broadcast when planning (a sort-merge join over two shuffles); AQE sees at run
    # time that one side is tiny, broadcasts it and reads the other shuffle locally.
    with sql_conf(spark, spark__sql__autoBroadcastJoinThreshold=-1,
                  spark__sql__adaptive__autoBroadcastJoinThreshold="10MB"):
        return _df_aqe_local_shuffle_reader(spark)


def _df_aqe_local_shuffle_reader(spark):
    a = _df(spark, rows=40000, seed=5)
    b = _df(spark, rows=40000, seed=6).filter(F.col("v") < 3).groupBy("k").agg(F.count("*").alias("n"))
    out = a.join(b, "k").groupBy("n").agg(F.count("*").alias("c"))
    rows = sorted(map(tuple, out.collect()))
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert "local" in plan and "BroadcastHashJoin" in plan, "AQE did not use the local shuffle reader:\n" + plan
    return rows


def empty_partitions_and_maps(spark):
    sc = spark.sparkContext
    r = sc.parallelize([], 4).union(sc.parallelize([(1, 1), (2, 2)], 3)).reduceByKey(lambda a, b: a + b, 9)
    empty = sc.parallelize([], 5).groupByKey(3).collect()
    return (sorted(r.collect()), empty)


def many_reduce_partitions(spark):
    """A shuffle of more than 2000 partitions (Spark then compresses its map statuses), read
    as AQE coalesces it: a few reduce tasks, each reading a range of the 2001 partitions (one
    task per partition would cost half a minute of task launches on two cores)."""
    with sql_conf(spark, spark__sql__shuffle__partitions=2001,
                  spark__sql__adaptive__coalescePartitions__enabled="true"):
        out = (spark.range(0, 30000, numPartitions=4)
               .groupBy((F.col("id") % 2500).alias("k")).agg(F.count("*").alias("c"), F.sum("id").alias("s")))
        rows = sorted(map(tuple, out.collect()))
        plan = out._jdf.queryExecution().executedPlan().toString()
        assert "2001" in plan and "coalesced" in plan, "not a coalesced read of 2001 partitions:\n" + plan
        return rows


def records_bigger_than_a_batch(spark):
    big = "x" * (3 << 20)  # 3 MiB values, larger than a 1 MiB push batch
    r = spark.sparkContext.parallelize(range(6), 3).map(lambda i: (i % 2, big + str(i))).groupByKey(2)
    return sorted((k, sorted((len(v), v[-1]) for v in vs)) for k, vs in r.collect())


def retried_task(spark):
    """A map task that fails once; Spark retries it and the result must not change."""
    flag = os.path.join(os.environ.get("CROSSDOCK_TEST_TMP", "/tmp"), f"fail-once-{spark.sparkContext.applicationId}")

    def maybe_fail(i):
        if i == 3 and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("injected failure, first attempt only")
        return (i % 10, i)

    r = spark.sparkContext.parallelize(range(100), 4).map(maybe_fail).reduceByKey(lambda a, b: a + b, 3)
    return sorted(r.collect())


def speculative_maps(spark):
    """With speculation on, a slow first attempt of a map gets a copy; both push, one wins."""
    flag = os.path.join(os.environ.get("CROSSDOCK_TEST_TMP", "/tmp"), f"slow-once-{spark.sparkContext.applicationId}")

    def slow_first(i, it):
        if i == 0 and not os.path.exists(flag):
            open(flag, "w").close()
            time.sleep(4)
        return ((x % 13, x) for x in it)

    r = spark.sparkContext.parallelize(range(4000), 4).mapPartitionsWithIndex(slow_first).reduceByKey(lambda a, b: a + b, 3)
    return sorted(r.collect())


def concurrent_jobs(spark):
    """Several jobs of one app at the same time, each with its own shuffle."""
    from concurrent.futures import ThreadPoolExecutor

    def job(seed):
        return sorted(_pairs(spark.sparkContext, n=5000, seed=seed).reduceByKey(lambda a, b: a + b, 4).collect())

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(job, range(4)))


def jvm_sort_by_key(spark):
    """sortByKey through the Java API (bench/jvm's SortByKeyJob, whose jar the runner loads):
    PySpark's own sortByKey sorts in Python, so only a JVM job has a shuffle with a key
    ordering, which Crossdock merges from the maps' sorted runs. The job checks the global
    order itself; count and checksum are compared across the two runs."""
    r = spark.sparkContext._jvm.org.crossdock.bench.SortByKeyJob.sortByKey(
        spark.sparkContext._jsc, 60_000, 12, 5, 64)
    return [int(x) for x in r]


WORKLOADS = {f.__name__: f for f in [
    rdd_group_by_key, rdd_reduce_by_key, rdd_aggregate_by_key, rdd_combine_by_key, rdd_sort_by_key,
    jvm_sort_by_key,
    rdd_join, rdd_cogroup, rdd_repartition, rdd_coalesce_with_shuffle, rdd_distinct,
    df_group_by_agg, df_order_by, df_sort_merge_join, df_window, df_union_distinct,
    df_aqe_skew_join, df_aqe_local_shuffle_reader,
    empty_partitions_and_maps, many_reduce_partitions, records_bigger_than_a_batch,
    retried_task, speculative_maps, concurrent_jobs,
]}


def _selected(workloads, names):
    """The workloads `names` (comma-separated) lists, all of them when it is empty; an
    unknown name is an error, so a typo cannot quietly shrink the suite."""
    if not names:
        return workloads
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in workloads]
    if unknown:
        raise ValueError(f"unknown workloads in CROSSDOCK_TEST_WORKLOADS: {unknown}; known: {list(workloads)}")
    return {n: workloads[n] for n in wanted}


# `make test` runs a part of them on the second Spark line (scripts/test.sh), every one on
# the first; `make test-spark-3.5` runs them all on both.
WORKLOADS = _selected(WORKLOADS, os.environ.get("CROSSDOCK_TEST_WORKLOADS", ""))

# Session settings both modes use: speculation on, and quick to trigger.
SESSION_CONF = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "500ms",
}
