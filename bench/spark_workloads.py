"""The workloads of the Spark benchmarks (bench/spark_bench.py and the suites built on it):
each runs one job in the application it is given and returns a small digest, so that every
mode's result can be checked for equality. Sizes are each workload's default (scale 1.0),
multiplied by --scale.
"""

from __future__ import annotations

import os


def _rows(scale: float, base: int) -> int:
    return max(1000, int(base * scale))


def w_df_repartition(spark, scale):
    """Pure repartition: every row crosses the shuffle once (no map-side reduction)."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 16_000_000), numPartitions=16).withColumn("h", F.sha2(F.col("id").cast("string"), 256))
    return df.repartition(64).agg(F.count("*"), F.sum(F.crc32("h"))).collect()[0]


def w_df_groupby(spark, scale):
    """groupBy-aggregate over millions of keys (map-side aggregation cannot shrink it much)."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 3_000_000), numPartitions=16).withColumn("k", F.col("id") * 7919 % 3_000_000)
    out = df.groupBy("k").agg(F.count("*").alias("n"), F.sum("id").alias("s"))
    return out.agg(F.count("*"), F.sum("n"), F.sum("s")).collect()[0]


def w_df_orderby(spark, scale):
    """orderBy: range partitioning (a sampling job, then the shuffle). The result checks the
    order, not where the range bounds fall: they come from a seeded sample whose seed Spark
    derives from RDD ids, which any change to the plan moves (Crossdock's exchange adds one
    RDD). Each row's hash is weighted by its global rank (its position in its partition plus
    the rows of the partitions before), summed exactly from per-partition sums."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 2_000_000), numPartitions=16).withColumn("h", F.sha2(F.col("id").cast("string"), 256))
    out = df.orderBy("h").select("h", F.monotonically_increasing_id().alias("i"), F.spark_partition_id().alias("p"))
    c = F.crc32("h").cast("decimal(38,0)")
    pos = F.col("i") - F.shiftleft(F.col("p").cast("long"), 33)  # the row's index in its partition
    parts = out.groupBy("p").agg(F.count("*").alias("n"), F.sum(c).alias("s1"),
                                 F.sum(c * (pos + 1)).alias("s2")).orderBy("p").collect()
    rows = digest = 0
    for r in parts:
        digest += int(r["s2"]) + rows * int(r["s1"])
        rows += r["n"]
    return (rows, digest)


def _kv_pairs(sc, scale, mappers):
    """GroupByTest's input: `mappers` tasks, each with seeded pairs of a random int key and
    its own random 1000-byte value (incompressible, and never the same object twice, so
    neither compression nor pickling can shrink the shuffle)."""
    pairs = max(100, _rows(scale, 100_000) // mappers)

    def gen(i):
        import random
        rnd = random.Random(i)
        return [(rnd.randrange(1 << 30), rnd.randbytes(1000)) for _ in range(pairs)]

    return sc.parallelize(range(mappers), mappers).flatMap(gen)


def w_rdd_group_by_key(spark, scale):
    """GroupByTest-style: seeded pairs with 1000-byte values, groupByKey (adaptive-fetch paper)."""
    r = _kv_pairs(spark.sparkContext, scale, mappers=16).groupByKey(16)
    return (r.count(), r.map(lambda kv: len(kv[1])).sum())


def w_rdd_sort_by_key(spark, scale):
    """GroupByTest-style pairs with 1000-byte values, sortByKey (adaptive-fetch paper)."""
    r = _kv_pairs(spark.sparkContext, scale, mappers=16).sortByKey(numPartitions=16)
    bounds = r.mapPartitions(lambda it: [[k for k, _ in it]]).map(lambda ks: (len(ks), ks == sorted(ks), ks[0] if ks else None, ks[-1] if ks else None)).collect()
    ordered = all(b[1] for b in bounds)
    edges = [b for b in bounds if b[0]]
    ordered = ordered and all(a[3] <= b[2] for a, b in zip(edges, edges[1:]))
    assert ordered, "sortByKey output is not globally ordered"
    return (sum(b[0] for b in bounds),)


def w_df_join(spark, scale):
    """Sort-merge join of two large tables (broadcast disabled)."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    n = _rows(scale, 2_000_000)
    a = spark.range(0, n, numPartitions=16).select((F.col("id") * 31 % (n // 2)).alias("k"), F.sha2(F.col("id").cast("string"), 224).alias("a"))
    b = spark.range(0, n // 2, numPartitions=16).select(F.col("id").alias("k"), (F.col("id") * 7).alias("b"))
    return a.join(b, "k").agg(F.count("*"), F.sum("b"), F.sum(F.crc32("a"))).collect()[0]


ZIPF_ALPHA = float(os.environ.get("CROSSDOCK_BENCH_ZIPF_ALPHA", "1.3"))


def w_df_skew_zipf(spark, scale):
    """Repartition and join on a Zipf-distributed key (alpha from CROSSDOCK_BENCH_ZIPF_ALPHA,
    default 1.3): skew that map-side aggregation cannot hide."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    n = _rows(scale, 2_000_000)
    # Inverse-CDF sampling of a Pareto/Zipf tail: k = floor(u^(-1/(alpha-1))), capped.
    k = F.least(F.floor(F.pow(F.rand(42) + F.lit(1e-12), F.lit(-1.0 / (ZIPF_ALPHA - 1.0)))), F.lit(1_000_000)).cast("long")
    facts = spark.range(0, n, numPartitions=16).select(k.alias("k"), F.sha2(F.col("id").cast("string"), 224).alias("v"))
    dims = spark.range(0, 1_000_001, numPartitions=4).select(F.col("id").alias("k"), (F.col("id") % 97).alias("d"))
    out = facts.repartition(64, "k").join(dims, "k")
    return out.agg(F.count("*"), F.sum("d"), F.sum(F.crc32("v"))).collect()[0]


def w_terasort(spark, scale):
    """TeraSort-style: generate 100-byte records (10-byte key, 90-byte value), sort by key,
    validate that the partitions are in global order; every value goes through the sort
    (its checksum is part of the result)."""
    from pyspark.sql import functions as F
    n = _rows(scale, 10_000_000)
    recs = spark.range(0, n, numPartitions=16).select(
        F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 10).alias("key"),
        F.substring(F.sha2(F.col("id").cast("string"), 512), 1, 90).alias("value"))
    out = recs.orderBy("key").select(F.spark_partition_id().alias("p"), "key", "value")
    parts = out.groupBy("p").agg(F.min("key").alias("lo"), F.max("key").alias("hi"), F.count("*").alias("n"),
                                 F.sum(F.crc32(F.concat("key", "value"))).alias("c")).orderBy("p").collect()
    assert all(a["hi"] < b["lo"] for a, b in zip(parts, parts[1:])), "TeraSort output is not globally ordered"
    return (sum(r["n"] for r in parts), sum(r["c"] for r in parts))


def w_many_small_blocks(spark, scale):
    """M map tasks x M reduce partitions of 200 rows per map: M x M small blocks. M = 1000 at
    scale 1 (a million blocks), 2000 at scale 2 (`--workload-scale many-small-blocks=2`)."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    m = max(50, min(4000, int(1000 * scale)))
    df = spark.range(0, m * 200, numPartitions=m).withColumn("v", F.col("id") * 3)
    out = df.repartition(m, "id").groupBy(F.spark_partition_id().alias("p")).agg(F.count("*").alias("n"), F.sum("v").alias("s"))
    return out.agg(F.count("*"), F.sum("n"), F.sum("s")).collect()[0]


def w_memory_starved(spark, scale):
    """groupBy over many keys with small executors (see WORKLOAD_CONF): vanilla spills."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 3_000_000), numPartitions=8).withColumn("k", F.col("id") % 2_000_000).withColumn(
        "v", F.sha2(F.col("id").cast("string"), 256))
    out = df.groupBy("k").agg(F.count("*").alias("n"), F.max("v").alias("m"))
    return out.agg(F.count("*"), F.sum("n"), F.sum(F.crc32("m"))).collect()[0]


def w_one_mb_shuffle(spark, scale):
    """About 1 MB shuffled from 2 maps into 24 partitions: the fixed cost of one shuffle
    (its map stage, registration to the last commit; its reduce stage, the first fetches),
    read from the per-stage wall times. Auto-routing sends it through Spark's own shuffle;
    mode crossdock-forced shows what Crossdock's path costs."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    df = spark.range(0, _rows(scale, 64_000), numPartitions=2).withColumn("v", F.xxhash64("id")).withColumn(
        "w", F.xxhash64("v"))  # 16 incompressible bytes a row
    return df.repartition(24).agg(F.count("*"), F.sum(F.col("v") % 1000), F.sum(F.col("w") % 1000)).collect()[0]


def _jvm_sort_by_key(spark, scale, maps):
    """rdd-sortbykey's data (1000-byte values, 16 partitions) sorted by the Java API's
    sortByKey (bench/jvm/SortByKeyJob.java), whose dependency carries the key ordering."""
    jvm = spark.sparkContext._jvm
    r = jvm.org.crossdock.bench.SortByKeyJob.sortByKey(spark.sparkContext._jsc, _rows(scale, 100_000), maps, 16, 1000)
    return (int(r[0]), int(r[1]))


def w_jvm_sort_by_key(spark, scale):
    """sortByKey in the JVM, 16 maps: a sorted shuffle Crossdock merges from sorted runs."""
    return _jvm_sort_by_key(spark, scale, 16)


def w_jvm_sort_by_key_2000(spark, scale):
    """The same data from 2000 maps: 2000 runs per reducer to merge."""
    return _jvm_sort_by_key(spark, scale, 2000)


WORKLOADS = {
    "df-repartition": w_df_repartition,
    "df-groupby": w_df_groupby,
    "df-orderby": w_df_orderby,
    "df-join": w_df_join,
    "df-skew-zipf": w_df_skew_zipf,
    "rdd-groupbykey": w_rdd_group_by_key,
    "rdd-sortbykey": w_rdd_sort_by_key,
    "terasort": w_terasort,
    "many-small-blocks": w_many_small_blocks,
    "memory-starved": w_memory_starved,
    "one-mb-shuffle": w_one_mb_shuffle,
    "jvm-sortbykey": w_jvm_sort_by_key,
    "jvm-sortbykey-2000": w_jvm_sort_by_key_2000,
}

# Workloads whose job is Java code (bench/jvm), compiled into a jar each application loads.
JVM_WORKLOADS = ("jvm-sortbykey", "jvm-sortbykey-2000")
# Executors small enough that vanilla Spark's sorting reducers spill (a tenth of 512 MiB
# less Spark's reserved 300 MiB for execution and storage: about 21 MiB).
_SMALL_SORT = {"spark.executor.memory": "512m", "spark.memory.fraction": "0.1"}

# Per-workload Spark settings (the same in every mode).
WORKLOAD_CONF = {
    "memory-starved": {"spark.executor.memory": "512m", "spark.memory.fraction": "0.3"},
    "jvm-sortbykey": _SMALL_SORT,
    "jvm-sortbykey-2000": _SMALL_SORT,
}
