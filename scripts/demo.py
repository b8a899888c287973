"""The Crossdock demo: one shuffle-heavy Spark job, with Spark's own shuffle and through
Crossdock, on the same input; the results must be equal.

Run by `make demo` (after `make build`). Options: --rows N (default 15 million, about
1.2 GB of shuffle), --only crossdock|vanilla.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "spark"))
from harness import Standalone, base_conf, crossdock_conf, spark_session  # noqa: E402


def job(spark, rows: int):
    """Repartition every row by a hash string (a full shuffle of all columns), then
    aggregate per key (a second, smaller shuffle). Returns an order-independent digest."""
    from pyspark.sql import functions as F

    df = (spark.range(0, rows, numPartitions=16)
          .withColumn("h", F.sha2(F.col("id").cast("string"), 256))
          .withColumn("k", (F.col("id") * 7919 % 10007).cast("int")))
    out = (df.repartition(48, "h")
           .groupBy("k")
           .agg(F.count("*").alias("n"), F.sum(F.crc32("h")).alias("c"), F.max("id").alias("m")))
    rows_out = out.agg(F.count("*"), F.sum("n"), F.sum("c"), F.sum("m"), F.sum(F.col("k") * F.col("c") % 1000003)).collect()[0]
    return tuple(int(x) for x in rows_out)


def shuffle_bytes(spark) -> int:
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    stages = json.load(urllib.request.urlopen(url, timeout=30))
    return sum(s.get("shuffleWriteBytes", 0) for s in stages)


def run(mode: str, rows: int, coordinator: str | None):
    conf = {**base_conf(executors=2, executor_memory_mb=2048), "spark.ui.enabled": "true",
            "spark.ui.port": "4050", "spark.sql.adaptive.enabled": "true"}
    if coordinator:
        conf.update(crossdock_conf(coordinator))
    with spark_session(f"crossdock-demo-{mode}", conf) as spark:
        job(spark, 1000)  # warm up the executors' JVMs so both modes start alike
        start = time.monotonic()
        digest = job(spark, rows)
        elapsed = time.monotonic() - start
        return digest, elapsed, shuffle_bytes(spark)


def child(mode: str, rows: int, coordinator: str | None) -> None:
    digest, secs, nbytes = run(mode, rows, coordinator)
    print("RESULT " + json.dumps({"digest": list(digest), "secs": secs, "bytes": nbytes}), flush=True)


def in_own_process(mode: str, rows: int, coordinator: str | None) -> tuple:
    """Runs one mode in a process of its own: the driver JVM keeps the classpath it was
    started with, so the two applications cannot share a Python process."""
    cmd = [sys.executable, __file__, "--child", mode, "--rows", str(rows)]
    if coordinator:
        cmd += ["--coordinator", coordinator]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"the {mode} run failed (exit {proc.returncode})")
    r = json.loads(line[len("RESULT "):])
    return tuple(r["digest"]), r["secs"], r["bytes"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=15_000_000)
    ap.add_argument("--only", choices=["crossdock", "vanilla"])
    ap.add_argument("--child", choices=["crossdock", "vanilla"], help=argparse.SUPPRESS)
    ap.add_argument("--coordinator", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.rows, args.coordinator)
        return 0
    results = {}
    with Standalone(workers=2, memory="1GiB") as sa:
        print(f"crossdock standalone on {sa.address}; job over {args.rows:,} rows, "
              "each mode in its own Spark application (local-cluster, 2 executors)", flush=True)
        for mode in ("vanilla", "crossdock"):
            if args.only and mode != args.only:
                continue
            digest, secs, nbytes = in_own_process(mode, args.rows, sa.address if mode == "crossdock" else None)
            results[mode] = (digest, secs, nbytes)
            print(f"{mode:>9}: {secs:6.1f} s, shuffle written {nbytes / 1e9:.2f} GB, result {digest}", flush=True)
    if len(results) == 2:
        (dv, tv, bv), (dc, tc, bc) = results["vanilla"], results["crossdock"]
        same = dv == dc
        print(f"results equal: {same}; crossdock / vanilla time: {tc / tv:.2f}x; shuffle bytes: {bc / max(bv, 1):.2f}x")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
