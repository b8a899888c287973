"""Partition-size prediction on the live service (SCache, paper 003, §3.2.2 and Fig. 7):
how well the coordinator's prediction, made once a tenth of a shuffle's maps have
committed, matches each partition's final size, for hash and range partitioners on
uniform and skewed keys.

    .venv/bin/python bench/prediction.py [--runs 3] [--records 4000000] [--maps 100]
        [--partitions 200] [--cases uniform-hash,zipf-hash,zipf-range,clustered-range]

Each run is one Spark application (local-cluster, two 1-core executors, adaptive
execution off so that a shuffle has exactly --partitions partitions) whose shuffles all go
through a fresh `crossdock standalone`. The coordinator scores each prediction when the
shuffle's last map commits and logs it ("partition size prediction scored"); this script
reads those lines, so the figures are the service's own, not recomputed here.

Cases (keys drawn in Spark, seeded by the run number):
- uniform-hash:    uniform 40-bit keys, hash partitioner (`repartition(p, k)`): Fig. 7a's case.
- zipf-hash:       Zipf-like keys (P(k) ~ k^-1.3), hash partitioner.
- zipf-range:      the same keys, Spark's range partitioner (`sort(k)`), input in random order.
- clustered-range: a multiple of the row id as key, range partitioner: each map holds one contiguous key
                   range (data already ordered, as by time), so the first maps to commit see
                   only the lowest keys. The case the paper samples for (Fig. 7b/c).

A range case's shuffle registers with a sample of its input, taken by the Spark client's
exchange while Spark's range partitioner reads the input for its bounds; the coordinator then
predicts from that sample and the first maps' bytes per record (`from` says which).

Figures per shuffle: `error_std`, the population standard deviation over partitions of
(predicted share - final share), the paper's "standard deviation of the normalised
prediction" (0.0015 in Fig. 7b, for its sampling method on a skewed range-partitioned
input; the paper gives no partition count); `error_std_rel`, the same divided by the mean
share 1/p, comparable across partition counts; the total's relative error; the mean and
largest per-partition relative errors. Medians over runs. JSON in
bench-results/prediction-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "crossdock"
JAR = ROOT / "clients" / "spark" / "target" / "crossdock-spark.jar"
sys.path.insert(0, str(ROOT / "bench"))
from services import Proc  # noqa: E402

CASES = ["uniform-hash", "zipf-hash", "zipf-range", "clustered-range"]
SCORED = "partition size prediction scored"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FIELD = re.compile(r"(\w+)=(\"[^\"]*\"|\S+)")


def start_service(data_dir: str) -> Proc:
    """A `crossdock standalone` whose coordinator logs each prediction's score."""
    env = {"NO_COLOR": "1", "CROSSDOCK_LOG": "warn,crossdock_server::coordinator::prediction=info"}
    return Proc("crossdock standalone",
                [str(BINARY), "standalone", "--no-auth", "--listen", "127.0.0.1:0", "--workers", "2",
                 "--memory", "1GiB", "--data-dir", data_dir],
                ready=r"crossdock standalone listening on (\S+)", env=env, timeout=30)


def scores(service: Proc, want: int, timeout: float = 20) -> list[dict[str, str]]:
    """The next `want` scored predictions in the service's output (fewer if they do not
    come within `timeout`)."""
    out, deadline = [], time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        try:
            line = service.lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if line is None:
            break
        if SCORED in line:
            out.append({k: v.strip('"') for k, v in FIELD.findall(ANSI.sub("", line))})
    return out


def frame(session, case: str, records: int, maps: int, partitions: int, seed: int):
    """The case's data frame and the shuffle that scatters it."""
    from pyspark.sql import functions as F
    rows = session.range(0, records, numPartitions=maps)
    if case == "uniform-hash":
        df = rows.select((F.rand(seed) * (1 << 40)).cast("long").alias("k"), "id")
    elif case == "clustered-range":
        # id * 7, not id: Spark knows a range's ids are sorted and would skip the shuffle.
        df = rows.select((F.col("id") * 7).alias("k"), "id")
    else:
        # A discrete power law: P(K >= k) = k^-0.3, so P(K = k) ~ k^-1.3 (Zipf, alpha 1.3).
        k = F.least(F.floor(F.pow(F.rand(seed) + F.lit(1e-12), F.lit(-1 / 0.3))), F.lit(1e15))
        df = rows.select(k.cast("long").alias("k"), "id")
    # A sort's range partitioner takes spark.sql.shuffle.partitions partitions.
    return df.sort("k") if case.endswith("-range") else df.repartition(partitions, "k")


def run_once(run: int, args, cases: list[str]) -> dict[str, dict[str, float]]:
    from pyspark.sql import SparkSession
    with tempfile.TemporaryDirectory() as d:
        service = start_service(d)
        conf_lines = subprocess.run([str(BINARY), "spark-conf", "--coordinator", service.match.group(1), "--jar", str(JAR)],
                                    check=True, capture_output=True, text=True).stdout.splitlines()
        builder = SparkSession.builder.appName(f"prediction-{run}")
        conf = {
            **dict(l.split("=", 1) for l in conf_lines if "=" in l),
            "spark.master": "local-cluster[2,1,1024]",
            "spark.driver.memory": "1g",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.crossdock.route": "crossdock",
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.shuffle.partitions": str(args.partitions),
        }
        for k, v in conf.items():
            builder = builder.config(k, v)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        out = {}
        try:
            for case in cases:
                frame(session, case, args.records, args.maps, args.partitions, seed=run).write.format("noop").mode("overwrite").save()
                # One shuffle per case (a range sort's sampling is a job, not a shuffle).
                got = scores(service, 1)
                if not got:
                    raise SystemExit(f"{case}: the coordinator logged no scored prediction")
                s = got[0]
                std = float(s["error_std"])
                out[case] = {
                    "maps_observed": int(s["maps_observed"]), "maps": int(s["maps"]),
                    "from_sample": s.get("from_sample") == "true",
                    "partitions": int(s["partitions"]), "error_std": std,
                    "error_std_rel": std * int(s["partitions"]),
                    "total_error": float(s["total_error"]) if s["total_error"][0].isdigit() else None,
                    "mean_partition_error": float(s["mean_partition_error"]),
                    "max_partition_error": float(s["max_partition_error"]),
                }
                print(f"  run {run} {case}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                                          for k, v in out[case].items()), flush=True)
        finally:
            session.stop()
            service.stop()
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--maps", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    cases = args.cases.split(",")
    unknown = set(cases) - set(CASES)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    for path in (BINARY, JAR):
        if not path.exists():
            raise SystemExit(f"{path} is missing: run `make build` first")
    print(f"prediction: {len(cases)} cases x {args.runs} runs, {args.records} records, {args.maps} maps, "
          f"{args.partitions} partitions, predicted after a tenth of the maps", flush=True)
    runs = [run_once(r, args, cases) for r in range(args.runs)]
    metrics = ["error_std", "error_std_rel", "total_error", "mean_partition_error", "max_partition_error"]
    summary = {}
    for case in cases:
        sampled = {r[case]["from_sample"] for r in runs}
        summary[case] = {"maps_observed": runs[0][case]["maps_observed"], "maps": runs[0][case]["maps"],
                         "from": "sample" if sampled == {True} else "maps" if sampled == {False} else "mixed"}
        for m in metrics:
            vals = [r[case][m] for r in runs if r[case][m] is not None]
            summary[case][m] = statistics.median(vals) if vals else None
    print()
    print(f"{'case':<16} {'from':>6} {'observed':>9} {'error std':>10} {'x p':>6} {'total err':>10} "
          f"{'mean part err':>14} {'max part err':>13}")
    for case, s in summary.items():
        def f(v, fmt):
            return format(v, fmt) if v is not None else "-"
        print(f"{case:<16} {s['from']:>6} {s['maps_observed']:>4}/{s['maps']:<4} {f(s['error_std'], '.5f'):>10} "
              f"{f(s['error_std_rel'], '.3f'):>6} {f(s['total_error'], '.3f'):>10} "
              f"{f(s['mean_partition_error'], '.3f'):>14} {f(s['max_partition_error'], '.3f'):>13}")
    print("paper (Fig. 7b, sampling, skewed range-partitioned input): error std 0.0015, partition count not given")
    out = ROOT / "bench-results" / f"prediction-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "runs": runs, "median": summary}, indent=2))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
