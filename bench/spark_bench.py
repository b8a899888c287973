"""Spark benchmark driver: Crossdock against vanilla Spark, measured in the same run.

Each (workload, mode) run is a separate Spark application (local-cluster mode) in a
process of its own; modes alternate A B A B … so drift on the machine hits both alike.
The report gives medians over the runs and ratios against vanilla from the same run:
action wall time, whole-machine CPU (from /proc/stat, so a push client's background
threads and the Crossdock workers count too), executor run time, shuffle write time and
fetch wait time, shuffle bytes, JVM GC time, peak execution memory, and the Crossdock
worker process's peak RSS.

    .venv/bin/python bench/spark_bench.py [--workloads a,b] [--runs 3] [--scale 1.0]

Writes bench-results/spark-<timestamp>.json and prints a table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "spark"))
from harness import Standalone, base_conf, crossdock_conf, spark_session  # noqa: E402


# ---- workloads: each returns a small digest so both modes can be checked for equality ----

def _rows(scale: float, base: int) -> int:
    return max(1000, int(base * scale))


def w_df_repartition(spark, scale):
    """Pure repartition: every row crosses the shuffle once (no map-side reduction)."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 8_000_000), numPartitions=16).withColumn("h", F.sha2(F.col("id").cast("string"), 256))
    return df.repartition(64).agg(F.count("*"), F.sum(F.crc32("h"))).collect()[0]


def w_df_groupby(spark, scale):
    """groupBy-aggregate over millions of keys (map-side aggregation cannot shrink it much)."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 8_000_000), numPartitions=16).withColumn("k", F.col("id") * 7919 % 3_000_000)
    out = df.groupBy("k").agg(F.count("*").alias("n"), F.sum("id").alias("s"))
    return out.agg(F.count("*"), F.sum("n"), F.sum("s")).collect()[0]


def w_df_orderby(spark, scale):
    """orderBy: range partitioning (a sampling job, then the shuffle)."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 6_000_000), numPartitions=16).withColumn("h", F.sha2(F.col("id").cast("string"), 256))
    out = df.orderBy("h").withColumn("i", F.monotonically_increasing_id())
    return out.agg(F.count("*"), F.sum(F.crc32(F.concat(F.col("h"), F.col("i").cast("string"))))).collect()[0]


def w_rdd_group_by_key(spark, scale):
    """GroupByTest-style: seeded pairs with 1000-byte values, groupByKey (adaptive-fetch paper)."""
    sc = spark.sparkContext
    mappers, reducers = 16, 16
    pairs = _rows(scale, 40_000) // mappers

    def gen(i):
        import random
        rnd = random.Random(i)
        blob = bytes(rnd.getrandbits(8) for _ in range(1000))
        return [(rnd.randrange(1 << 30), blob) for _ in range(pairs)]

    r = sc.parallelize(range(mappers), mappers).flatMap(gen).groupByKey(reducers)
    return (r.count(), r.map(lambda kv: len(kv[1])).sum())


def w_rdd_sort_by_key(spark, scale):
    """GroupByTest-style pairs with 1000-byte values, sortByKey (adaptive-fetch paper)."""
    sc = spark.sparkContext
    mappers, reducers = 16, 16
    pairs = _rows(scale, 40_000) // mappers

    def gen(i):
        import random
        rnd = random.Random(i)
        blob = bytes(rnd.getrandbits(8) for _ in range(1000))
        return [(rnd.randrange(1 << 30), blob) for _ in range(pairs)]

    r = sc.parallelize(range(mappers), mappers).flatMap(gen).sortByKey(numPartitions=reducers)
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
    n = _rows(scale, 4_000_000)
    a = spark.range(0, n, numPartitions=16).select((F.col("id") * 31 % (n // 2)).alias("k"), F.sha2(F.col("id").cast("string"), 224).alias("a"))
    b = spark.range(0, n // 2, numPartitions=16).select(F.col("id").alias("k"), (F.col("id") * 7).alias("b"))
    return a.join(b, "k").agg(F.count("*"), F.sum("b"), F.sum(F.crc32("a"))).collect()[0]


ZIPF_ALPHA = float(os.environ.get("CROSSDOCK_BENCH_ZIPF_ALPHA", "1.3"))


def w_df_skew_zipf(spark, scale):
    """Repartition and join on a Zipf-distributed key (alpha from CROSSDOCK_BENCH_ZIPF_ALPHA,
    default 1.3): skew that map-side aggregation cannot hide."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    n = _rows(scale, 4_000_000)
    # Inverse-CDF sampling of a Pareto/Zipf tail: k = floor(u^(-1/(alpha-1))), capped.
    k = F.least(F.floor(F.pow(F.rand(42) + F.lit(1e-12), F.lit(-1.0 / (ZIPF_ALPHA - 1.0)))), F.lit(1_000_000)).cast("long")
    facts = spark.range(0, n, numPartitions=16).select(k.alias("k"), F.sha2(F.col("id").cast("string"), 224).alias("v"))
    dims = spark.range(0, 1_000_001, numPartitions=4).select(F.col("id").alias("k"), (F.col("id") % 97).alias("d"))
    out = facts.repartition(64, "k").join(dims, "k")
    return out.agg(F.count("*"), F.sum("d"), F.sum(F.crc32("v"))).collect()[0]


def w_terasort(spark, scale):
    """TeraSort-style: generate 100-byte records (10-byte key), sort, validate the order."""
    from pyspark.sql import functions as F
    n = _rows(scale, 5_000_000)
    recs = spark.range(0, n, numPartitions=16).select(
        F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 10).alias("key"),
        F.rpad(F.col("id").cast("string"), 90, "x").alias("value"))
    out = recs.orderBy("key").withColumn("p", F.spark_partition_id())
    parts = out.groupBy("p").agg(F.min("key").alias("lo"), F.max("key").alias("hi"), F.count("*").alias("n")).orderBy("p").collect()
    assert all(a["hi"] <= b["lo"] for a, b in zip(parts, parts[1:])), "TeraSort output is not globally ordered"
    total = sum(r["n"] for r in parts)
    return (total, recs.agg(F.sum(F.crc32(F.concat("key", "value")))).collect()[0][0])


def w_many_small_blocks(spark, scale):
    """2000 map tasks x 2000 reduce partitions: M x R small blocks."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    m = max(50, int(2000 * min(scale, 1.0)))
    df = spark.range(0, m * 200, numPartitions=m).withColumn("v", F.col("id") * 3)
    out = df.repartition(m, "id").groupBy(F.spark_partition_id().alias("p")).agg(F.count("*").alias("n"), F.sum("v").alias("s"))
    return out.agg(F.count("*"), F.sum("n"), F.sum("s")).collect()[0]


def w_memory_starved(spark, scale):
    """groupBy over many keys with small executors (see WORKLOAD_CONF): vanilla spills."""
    from pyspark.sql import functions as F
    df = spark.range(0, _rows(scale, 6_000_000), numPartitions=8).withColumn("k", F.col("id") % 2_000_000).withColumn(
        "v", F.sha2(F.col("id").cast("string"), 256))
    out = df.groupBy("k").agg(F.count("*").alias("n"), F.max("v").alias("m"))
    return out.agg(F.count("*"), F.sum("n"), F.sum(F.crc32("m"))).collect()[0]


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
}

# Per-workload Spark settings (the same in both modes).
WORKLOAD_CONF = {
    "memory-starved": {"spark.executor.memory": "512m", "spark.memory.fraction": "0.3"},
}


# ---- one run, in a child process ----

def _rest(spark, path):
    sc = spark.sparkContext
    return json.load(urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{path}", timeout=30))


def child(workload: str, scale: float, coordinator: str | None) -> None:
    conf = {**base_conf(executors=2, executor_memory_mb=2048), "spark.ui.enabled": "true", "spark.ui.port": "0",
            "spark.sql.shuffle.partitions": "64",
            # Peak memory is reported with executor heartbeats: make them frequent enough
            # for runs of a few seconds.
            "spark.executor.heartbeatInterval": "1s", "spark.executor.metrics.pollingInterval": "100ms"}
    conf.update(WORKLOAD_CONF.get(workload, {}))
    if coordinator:
        conf.update(crossdock_conf(coordinator))
    with spark_session(f"bench-{workload}-{'crossdock' if coordinator else 'vanilla'}", conf) as spark:
        spark.range(1000).repartition(4).count()  # warm the executors' JVMs alike in both modes
        before = {s["stageId"] for s in _rest(spark, "stages")}
        t0 = time.monotonic()
        digest = WORKLOADS[workload](spark, scale)
        wall = time.monotonic() - t0
        time.sleep(1.5)  # one more heartbeat carries the executors' final peaks
        stages = [s for s in _rest(spark, "stages?status=complete") if s["stageId"] not in before]
        peak_heap = max((s.get("peakExecutorMetrics", {}).get("JVMHeapMemory", 0) for s in stages), default=0)
        sums = lambda k: sum(s.get(k, 0) for s in stages)  # noqa: E731
        print("RESULT " + json.dumps({
            "digest": [str(x) for x in digest],
            "wall_s": wall,
            "stages": [{"id": s["stageId"], "name": s["name"][:60], "run_ms": s.get("executorRunTime", 0)} for s in stages],
            "executor_run_s": sums("executorRunTime") / 1e3,
            "gc_s": sums("jvmGcTime") / 1e3,
            "shuffle_write_bytes": sums("shuffleWriteBytes"),
            "shuffle_write_s": sums("shuffleWriteTime") / 1e9,
            "fetch_wait_s": sums("shuffleFetchWaitTime") / 1e3,
            "peak_execution_memory": max((s.get("peakExecutionMemory", 0) for s in stages), default=0),
            "peak_executor_heap": peak_heap,
        }), flush=True)


def _cpu_jiffies() -> tuple[int, int]:
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def one_run(workload: str, mode: str, scale: float) -> dict:
    sa = Standalone(workers=2, memory="1GiB") if mode == "crossdock" else None
    try:
        busy0, _ = _cpu_jiffies()
        cmd = [sys.executable, __file__, "--child", workload, "--scale", str(scale)]
        if sa:
            cmd += ["--coordinator", sa.address]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        busy1, _ = _cpu_jiffies()
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            raise RuntimeError(f"{workload}/{mode} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        r = json.loads(line[len("RESULT "):])
        # Whole machine, including the application's start and stop (the same in both modes).
        r["machine_cpu_s"] = (busy1 - busy0) / os.sysconf("SC_CLK_TCK")
        r["worker_peak_rss"] = _peak_rss(sa.proc.pid) if sa else 0
        return r
    finally:
        if sa:
            sa.stop()


METRICS = [("wall_s", "action wall s"), ("machine_cpu_s", "machine CPU s"), ("executor_run_s", "task run s"),
           ("shuffle_write_s", "shuffle write s"), ("fetch_wait_s", "fetch wait s"), ("gc_s", "GC s"),
           ("shuffle_write_bytes", "shuffle bytes"), ("peak_executor_heap", "peak exec heap"),
           ("worker_peak_rss", "worker RSS")]


def report(results: dict, modes: list[str]) -> dict:
    summary = {}
    for wl, by_mode in results.items():
        summary[wl] = {}
        for mode in modes:
            runs = by_mode.get(mode, [])
            summary[wl][mode] = {k: statistics.median(r[k] for r in runs) for k, _ in METRICS} if runs else {}
        digests = {mode: {tuple(r["digest"]) for r in by_mode.get(mode, [])} for mode in modes}
        summary[wl]["results_equal"] = len(set().union(*digests.values())) == 1
    print()
    head = f"{'workload':<20}{'metric':<17}" + "".join(f"{m:>14}" for m in modes) + "".join(f"{m + '/vanilla':>20}" for m in modes if m != "vanilla")
    print(head)
    print("-" * len(head))
    for wl, s in summary.items():
        for k, label in METRICS:
            vals = [s[m].get(k) for m in modes]
            if all(v in (None, 0) for v in vals):
                continue
            fmt = (lambda v: f"{v / 1e6:12.1f}MB") if ("bytes" in k or "heap" in k or "rss" in k) else (lambda v: f"{v:14.2f}")
            row = f"{wl:<20}{label:<17}" + "".join(fmt(v) if v is not None else f"{'-':>14}" for v in vals)
            base = s.get("vanilla", {}).get(k)
            for m in modes:
                if m != "vanilla":
                    v = s[m].get(k)
                    row += f"{(v / base):19.2f}x" if base and v is not None else f"{'-':>20}"
            print(row)
        print(f"{wl:<20}{'results equal':<17}{str(s['results_equal']):>14}")
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, from: " + ", ".join(WORKLOADS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every workload's data size")
    ap.add_argument("--modes", default="vanilla,crossdock")
    ap.add_argument("--out", default=None, help="JSON file [bench-results/spark-<timestamp>.json]")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--coordinator", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.scale, args.coordinator)
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}")
    modes = [m for m in args.modes.split(",") if m]
    results: dict = {w: {m: [] for m in modes} for w in workloads}
    total = len(workloads) * len(modes) * args.runs
    done = 0
    started = time.monotonic()
    for wl in workloads:
        for run in range(args.runs):
            for mode in (modes if run % 2 == 0 else list(reversed(modes))):
                r = one_run(wl, mode, args.scale)
                results[wl][mode].append(r)
                done += 1
                print(f"[{done}/{total}, {time.monotonic() - started:5.0f} s] {wl} {mode} run {run + 1}: "
                      f"{r['wall_s']:.1f} s, {r['shuffle_write_bytes'] / 1e6:.0f} MB shuffled", flush=True)
    summary = report(results, modes)
    out = pathlib.Path(args.out) if args.out else ROOT / "bench-results" / f"spark-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "summary": summary, "runs": results}, indent=1, default=str))
    print(f"\nwrote {out}")
    return 0 if all(s["results_equal"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
