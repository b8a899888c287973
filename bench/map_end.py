"""What the end of a map task costs through Crossdock: the compression, the wait for the last
acknowledgements and the commit, per map, on many small partitions (spark_bench's
many-small-blocks workload itself: M maps x M partitions, 200 rows a map, M from 50 to 4000),
against vanilla Spark, in the same run.

    .venv/bin/python bench/map_end.py [--maps 1000] [--runs 3] [--before-jar OLD.jar]

Each run is one Spark application of its own (local-cluster, 2 executors x 1 core) with its
event log on; every Crossdock run gets a fresh `crossdock standalone` (2 workers of 1 GiB)
and sends every shuffle through Crossdock (`spark.crossdock.route=crossdock`). Modes
alternate run by run: vanilla, then Crossdock with the client jar of this tree, and with
`--before-jar` a third mode, the same service with another client jar (an A/B of a client
change against the build before it). Per run: the action's wall time, and per map task (from
the event log) Spark's shuffle write time and Crossdock's `push wait ms` and `commit ms`
accumulators. Prints each run, then medians and the per-run ratios; `--json` writes them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "spark"))
sys.path.insert(0, str(REPO / "bench"))


def one_run(maps: int, coordinator: str | None, logdir: str) -> float:
    """Runs spark_bench's many-small-blocks once in this process; returns the action's wall time."""
    from harness import base_conf, crossdock_conf, spark_session
    from spark_workloads import w_many_small_blocks

    conf = {**base_conf(), "spark.eventLog.enabled": "true", "spark.eventLog.dir": logdir,
            "spark.eventLog.compress": "false"}
    if coordinator:
        conf.update({**crossdock_conf(coordinator), "spark.crossdock.route": "crossdock"})
    with spark_session("map-end", conf) as spark:
        spark.range(0, 1000, numPartitions=4).count()  # executors up, JIT warm
        t = time.monotonic()
        row = w_many_small_blocks(spark, (maps + 0.5) / 1000)  # the workload takes int(1000 * scale)
        wall = time.monotonic() - t
    if (row[0], row[1]) != (maps, maps * 200):
        raise SystemExit(f"wrong result {tuple(row)}, expected {maps} partitions of {maps * 200} rows")
    return wall


def per_map(logdir: str) -> dict:
    """Per map task (tasks that wrote shuffle data): Spark's write time, Crossdock's waits."""
    tasks = 0
    write_ns = 0
    acc: dict[str, int] = {}
    for f in glob.glob(logdir + "/**/*events*", recursive=True):
        for line in open(f, encoding="utf-8"):
            e = json.loads(line)
            if e.get("Event") != "SparkListenerTaskEnd":
                continue
            w = ((e.get("Task Metrics") or {}).get("Shuffle Write Metrics") or {}).get("Shuffle Write Time", 0)
            if not w:
                continue
            tasks += 1
            write_ns += w
            for a in e["Task Info"].get("Accumulables", []):
                name = a.get("Name") or ""
                if name in ("crossdock push wait ms", "crossdock commit ms"):
                    acc[name] = acc.get(name, 0) + int(a.get("Update", 0))
    n = max(1, tasks)
    return {"map_tasks": tasks, "write_ms": write_ns / 1e6 / n,
            "push_wait_ms": acc.get("crossdock push wait ms", 0) / n,
            "commit_ms": acc.get("crossdock commit ms", 0) / n}


def child(args) -> None:
    """One run, in a process of its own (a pyspark driver keeps the classpath it began with)."""
    from harness import Standalone

    logdir = tempfile.mkdtemp(prefix="crossdock-map-end-")
    if args.mode == "vanilla":
        wall = one_run(args.maps, None, logdir)
    else:
        with Standalone(workers=2, memory="1GiB") as sa:
            wall = one_run(args.maps, sa.address, logdir)
    print(json.dumps({"wall_s": wall, **per_map(logdir)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maps", type=int, default=1000, help="M: maps and partitions, 50 to 4000 [1000]")
    ap.add_argument("--runs", type=int, default=3, help="runs of each mode [3]")
    ap.add_argument("--before-jar", help="another Crossdock client jar, run as mode 'before'")
    ap.add_argument("--json", help="write the runs and medians here")
    ap.add_argument("--mode", help=argparse.SUPPRESS)  # a child run
    args = ap.parse_args()
    if not 50 <= args.maps <= 4000:
        ap.error("--maps must be from 50 to 4000 (many-small-blocks' range)")
    if args.mode:
        child(args)
        return
    modes = [("vanilla", {}), ("crossdock", {})]
    if args.before_jar:
        modes.append(("before", {"CROSSDOCK_SPARK_JAR": str(pathlib.Path(args.before_jar).resolve())}))
    runs: dict[str, list[dict]] = {m: [] for m, _ in modes}
    for r in range(args.runs):
        for mode, env in modes:
            proc = subprocess.run([sys.executable, __file__, "--maps", str(args.maps), "--mode",
                                   "vanilla" if mode == "vanilla" else "crossdock"],
                                  capture_output=True, text=True, env={**os.environ, **env})
            if proc.returncode != 0:
                raise SystemExit(f"{mode} run {r} failed:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            runs[mode].append(res)
            print(f"run {r} {mode:9s} wall {res['wall_s']:6.2f} s  per map: write {res['write_ms']:5.2f} ms, "
                  f"push wait {res['push_wait_ms']:5.2f} ms, commit {res['commit_ms']:5.2f} ms", flush=True)
    medians = {m: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for m, rs in runs.items()}
    ratios = {m: [round(a["wall_s"] / v["wall_s"], 3) for a, v in zip(rs, runs["vanilla"])]
              for m, rs in runs.items() if m != "vanilla"}
    print("medians:", json.dumps(medians, indent=1))
    for m, rs in ratios.items():
        print(f"{m} wall / vanilla per run: {rs} (median {statistics.median(rs):.3f})")
    if args.before_jar:
        ab = [round(a["wall_s"] / b["wall_s"], 3) for a, b in zip(runs["crossdock"], runs["before"])]
        print(f"crossdock wall / before per run: {ab} (median {statistics.median(ab):.3f})")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"maps": args.maps, "runs": runs, "medians": medians,
                                                       "wall_ratios_to_vanilla": ratios}, indent=1))


if __name__ == "__main__":
    main()
