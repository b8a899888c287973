"""One Spark application that runs a shuffle job with a fault injected by the parent
process, and writes its result and task counts as JSON.

    python failure_job.py OUT.json GATE_DIR [--coordinator HOST:PORT] --block maps|reducers
    python failure_job.py OUT.json GATE_DIR --coordinator HOST:PORT --dynamic
    python failure_job.py OUT.json GATE_DIR [--coordinator HOST:PORT] --mixed --block reducers
    python failure_job.py OUT.json GATE_DIR [--coordinator HOST:PORT] --sorted --block maps|reducers

With `--sorted`, the job is a key-ordered shuffle run in the JVM (bench/jvm's
SortByKeyJob: repartitionAndSortWithinPartitions, which Crossdock merges from sorted runs),
gated the same way; it checks every partition's key order and the count and checksum of
every record against its input.

The job has MAPS map tasks and a reduce stage. With `--block maps`, map tasks from index
MAPS/2 on wait for the file GATE_DIR/go before producing anything; with `--block
reducers`, every reduce task waits for it before reading. The parent kills what it wants
to kill in between (it watches the coordinator's commit counter, or the files reduce
tasks create when they start), then creates the file. Waiting on a file, not on time,
keeps the test deterministic. Without `--coordinator` the job runs on vanilla Spark.

With `--dynamic`, dynamic allocation is on (no external shuffle service, no shuffle
tracking): the job runs once, waits until every executor was released as idle, then
reads the same shuffle again with new executors.

With `--mixed`, the map stage reads a small text file (a few MB, a known size), so its
shuffle is routed through Spark's own sort shuffle; the gated stage that reads it is the
map side of a second shuffle, registered before the first ran (an unknown size), which goes
through Crossdock. The report then also counts the shuffles of each route.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import base_conf, crossdock_conf, jvm_jobs_jar, spark_session  # noqa: E402

MAPS = 8
ROWS_PER_MAP = 40_000
KEYS = 997


def expected() -> list[tuple[int, int]]:
    """The job's answer, computed without Spark."""
    sums = [0] * KEYS
    for m in range(MAPS):
        for i in range(ROWS_PER_MAP):
            x = m * ROWS_PER_MAP + i
            sums[x % KEYS] += x * 3 + 1
    return [(k, v) for k, v in enumerate(sums)]


def wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("gate")
    ap.add_argument("--coordinator")
    ap.add_argument("--block", choices=["maps", "reducers", "none"], default="none")
    ap.add_argument("--dynamic", action="store_true")
    ap.add_argument("--mixed", action="store_true")
    ap.add_argument("--sorted", action="store_true")
    args = ap.parse_args()
    go = os.path.join(args.gate, "go")
    conf = {**base_conf(),
            "spark.ui.enabled": "true", "spark.ui.port": "0",
            # A lost shuffle output makes Spark rerun the map stage; allow the reruns.
            "spark.stage.maxConsecutiveAttempts": "8"}
    if args.coordinator:
        conf.update(crossdock_conf(args.coordinator))
    if args.dynamic:
        conf.update({"spark.dynamicAllocation.enabled": "true",
                     "spark.dynamicAllocation.shuffleTracking.enabled": "false",
                     "spark.shuffle.service.enabled": "false",
                     "spark.dynamicAllocation.minExecutors": "0",
                     "spark.dynamicAllocation.initialExecutors": "2",
                     "spark.dynamicAllocation.maxExecutors": "2",
                     "spark.dynamicAllocation.executorIdleTimeout": "2s"})
    if args.sorted:
        jar = str(jvm_jobs_jar(pathlib.Path(args.gate)))
        conf["spark.jars"] = ",".join(j for j in (conf.get("spark.jars"), jar) if j)
    block = args.block
    gate = args.gate

    def produce(m, rows):
        if block == "maps" and m >= MAPS // 2:
            wait_for(go)
        for i in range(ROWS_PER_MAP):
            x = m * ROWS_PER_MAP + i
            yield (x % KEYS, x * 3 + 1)

    def gated(rows):
        if block == "reducers":
            open(os.path.join(gate, f"reducer-started-{os.getpid()}"), "w").close()
            wait_for(go)
        return rows

    with spark_session("crossdock-failure", conf) as spark:
        sc = spark.sparkContext
        with open(os.path.join(gate, "app_id"), "w") as f:
            f.write(sc.applicationId)
        if not args.dynamic:
            # Both executors registered before the job (Spark starts it as soon as one is):
            # then each runs maps, and killing either loses map outputs.
            deadline = time.monotonic() + 120
            while sc._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver counts too
                if time.monotonic() > deadline:
                    raise SystemExit("the application's 2 executors did not register in 120 s")
                time.sleep(0.1)
        t0 = time.monotonic()
        if args.mixed:
            numbers = os.path.join(gate, "numbers.txt")
            with open(numbers, "w") as f:
                f.writelines(f"{x}\n" for x in range(MAPS * ROWS_PER_MAP))
            pairs = sc.textFile(numbers, MAPS).map(lambda line: (int(line) % KEYS, int(line) * 3 + 1))
            # Routed (small input), then gated on its reduce side, then through Crossdock.
            shuffled = (pairs.reduceByKey(lambda a, b: a + b, 6).mapPartitions(gated)
                        .reduceByKey(lambda a, b: a + b, 4))
        elif not args.sorted:
            rdd = sc.parallelize(range(MAPS), MAPS).mapPartitionsWithIndex(produce)
            shuffled = rdd.reduceByKey(lambda a, b: a + b, 4).mapPartitions(gated)
        if args.sorted:
            job = sc._jvm.org.crossdock.bench.SortByKeyJob
            count, checksum, ordered, want_count, want_checksum = list(job.sortWithinPartitionsGated(
                sc._jsc, MAPS * ROWS_PER_MAP, MAPS, 4, 100, gate, block))
            sorted_ok = ordered == 1 and count == want_count and checksum == want_checksum
            result = None
        else:
            result = sorted(shuffled.collect())
        released = None
        again = None
        if args.dynamic:
            # Wait until dynamic allocation released every executor (all idle, and all
            # of them wrote shuffle data), then read the shuffle again.
            deadline = time.monotonic() + 60
            while sc._jsc.sc().getExecutorMemoryStatus().size() > 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            released = sc._jsc.sc().getExecutorMemoryStatus().size() == 1
            again = sorted(shuffled.collect())
        seconds = time.monotonic() - t0
        routes = None
        if args.coordinator:
            manager = sc._jvm.org.apache.spark.SparkEnv.get().shuffleManager()
            routes = {"spark": manager.shufflesThroughSpark(),
                      "crossdock": manager.shufflesThroughCrossdock()}
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
        stages = json.loads(urllib.request.urlopen(url, timeout=30).read())
    # The job's first stage is the map stage; a rerun of it (after a fetch failure) is
    # another attempt of the same stage id, with only the missing tasks.
    map_stage = min(s["stageId"] for s in stages)
    map_attempts = [s for s in stages if s["stageId"] == map_stage]
    reduce_attempts = [s for s in stages if s["stageId"] != map_stage]
    report = {
        "equal": sorted_ok if args.sorted else (result == expected() and (again is None or again == expected())),
        "executors_released": released,
        "routes": routes,
        "rows": count if args.sorted else len(result),
        "seconds": round(seconds, 2),
        # Runs the reducers merged (a shuffle read by merging sorted runs; else 0).
        "merged_runs": sum(int(a.get("value", 0)) for st in stages for a in st.get("accumulatorUpdates", [])
                           if a.get("name") == "crossdock merged runs"),
        "map_stage_attempts": len(map_attempts),
        "map_tasks_completed": sum(s["numCompleteTasks"] for s in map_attempts),
        "map_tasks_failed": sum(s["numFailedTasks"] for s in map_attempts),
        "reduce_tasks_failed": sum(s["numFailedTasks"] for s in reduce_attempts),
        "reduce_stage_attempts": len(reduce_attempts),
    }
    # Map tasks that ran to completion beyond the MAPS a clean run needs.
    report["map_tasks_recomputed"] = report["map_tasks_completed"] - MAPS
    with open(args.out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
