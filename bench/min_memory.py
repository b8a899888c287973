"""The smallest executor memory with which a large sort and a large groupBy complete, vanilla
Spark against Crossdock (the DMO chapter of the Comet dissertation reports 0.68x when the
shuffle's data lives in a disaggregated pool instead of the executors).

    .venv/bin/python bench/min_memory.py [--workloads sort,rdd-sort,groupby] [--candidates 512,768,...]

For each workload and mode it bisects over the candidate executor memories (MiB), assuming
that a job which completes with some memory also completes with more: each trial is one
Spark application (local-cluster, 2 executors x 1 core) whose result must equal the
reference result; a failure (out of memory, lost executors, a task failing 4 times, or
--app-timeout) counts as "does not complete". The Crossdock service's own memory (2
workers x 1 GiB by default, `--worker-memory`, outside the executors) is the same in every trial
and its peak resident set is recorded with each trial: the comparison is of what the executors
need, and the service's memory is what a total (the DMO chapter's Mem_Spark + Mem_DMO) adds.

Spark keeps 300 MiB of every executor's heap for itself and refuses an executor of less than
1.5 times that (450 MiB of heap, about 512 MiB asked), so by default the bisection cannot go
below Spark's own floor. `--reserved-mb N` sets Spark's `spark.testing.reservedMemory` to N MiB
in every trial of both modes (0 takes the floor away: the unified memory is then 60% of the
whole heap), and lowers `spark.network.maxRemoteBlockSizeFetchToMem` to 32 MiB (an executor
whose heap is below it refuses to start), to find what the shuffle itself needs below the floor.

Workloads, 4 GB of shuffled data each on one host:

    sort         TeraSort-style DataFrame sort of 40 M 100-byte records (spark_bench's terasort x4)
    rdd-sort     sortByKey of 4 M pairs with 1000-byte values through the Java API (jvm-sortbykey x40):
                 the dissertation's TeraSort (HiBench's) is an RDD sortByKey, whose shuffle carries the
                 key ordering, so Crossdock's reducers merge sorted runs where vanilla's reducers sort;
                 a DataFrame sort sorts on the reduce side in both modes (SortExec)
    groupby      GroupByTest-style groupByKey of 4 M pairs with 1000-byte values (rdd-groupbykey x40)
    repartition  DataFrame repartition of 48 M rows with a 64-character hash, then a global count
                 and checksum (df-repartition x3): the reduce side needs no memory of its own, so
                 the shuffle's writers are what the executor memory must hold

`--binary` and `--jar` run another build's service and client (e.g. an older one) in the
Crossdock trials; `--crossdock-conf KEY=VALUE` sets a Spark property in the Crossdock trials only
(e.g. a smaller push window, to see what the client needs at a given size). A failed trial
records the first out-of-memory error of its executors with the frames under it (where the heap
ran out); `--keep-logs` keeps every trial's logs, and `--heap-dumps` has every executor that
runs out of heap write a heap dump beside them (`bench/heap_histogram.py` tells what filled it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import shutil
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import spark_bench as sb  # noqa: E402

WORKLOADS = {"sort": ("terasort", 4.0), "groupby": ("rdd-groupbykey", 40.0),
             "repartition": ("df-repartition", 3.0), "rdd-sort": ("jvm-sortbykey", 40.0)}
# Spark settings of a workload in this bench, in both modes: spark_bench runs jvm-sortbykey with
# a tenth of the memory as Spark's unified memory (to make vanilla spill at 512 MiB); here the
# executor's size is what varies, so Spark's default share.
TRIAL_CONF = {"rdd-sort": {"spark.memory.fraction": "0.6"}}
DEFAULT_CANDIDATES = "512,640,768,1024,1280,1536,2048,3072"


def trial(backend, build, workload: str, mode: str, mem_mb: int, workdir: pathlib.Path, timeout: float,
          reserved_mb: int | None = None, extra: dict | None = None, heap_dumps: bool = False) -> dict:
    name, scale = WORKLOADS[workload]
    conf = {"spark.executor.memory": f"{mem_mb}m",
            # The local-cluster workers must offer what the executor asks, with room to spare.
            "spark.master": f"local-cluster[2,1,{max(2048, mem_mb + 512)}]",
            **TRIAL_CONF.get(workload, {})}
    if reserved_mb is not None:
        # Read by the driver (its check of the executor memory) and by every executor.
        conf["spark.testing.reservedMemory"] = str(reserved_mb << 20)
        # Spark's next floor: an executor refuses to start when its Netty direct memory (its
        # heap size, by default) is below this threshold (200 MiB by default). Remote blocks
        # above it go to disk instead of memory, as a starved executor wants anyway.
        conf["spark.network.maxRemoteBlockSizeFetchToMem"] = "32m"
    conf.update(extra or {})
    run_dir = workdir / f"{workload}-{mode}-{mem_mb}m"
    if heap_dumps:
        # Each executor that runs out of heap writes java_pid<N>.hprof here (read them with
        # bench/heap_histogram.py).
        run_dir.mkdir(parents=True, exist_ok=True)
        conf["spark.executor.extraJavaOptions"] = " ".join(filter(None, [
            conf.get("spark.executor.extraJavaOptions"),
            f"-XX:+HeapDumpOnOutOfMemoryError -XX:HeapDumpPath={run_dir}/"]))
    t0 = time.monotonic()
    try:
        r = sb.one_run(backend, build, name, sb.Mode(mode, conf=conf), scale, run_dir, timeout)
        lost = lost_executors(run_dir)
        if lost:
            # Completed only because Spark relaunched executors that died (out of memory) and
            # retried their tasks: not "completes with this memory".
            return {"mem_mb": mem_mb, "ok": False, "error": f"completed only after {lost} executor(s) were lost",
                    "app_s": time.monotonic() - t0, "executor_oom": first_oom(run_dir), "lost_executors": lost}
        return {"mem_mb": mem_mb, "ok": True, "digest": r["digest"], "wall_s": r["wall_s"],
                "app_s": time.monotonic() - t0, "spill": r.get("spill_disk_bytes", 0),
                "service_rss": r.get("worker_peak_rss", 0)}
    except RuntimeError as e:
        return {"mem_mb": mem_mb, "ok": False, "error": str(e).splitlines()[0][-300:], "app_s": time.monotonic() - t0,
                "executor_oom": first_oom(run_dir)}


def lost_executors(run_dir: pathlib.Path) -> int:
    """How many executors the application lost (Spark's scheduler logs each one)."""
    log = run_dir / "driver.log"
    if not log.exists():
        return 0
    return sum(1 for ln in log.read_text(errors="replace").splitlines() if "Lost executor" in ln)


def first_oom(run_dir: pathlib.Path) -> str | None:
    """The first out-of-memory error in the trial's executor logs, with the frames under it
    (where the heap ran out), or None."""
    for log in sorted((run_dir / "spark-work").rglob("stderr")):
        lines = log.read_text(errors="replace").splitlines()
        for i, ln in enumerate(lines):
            if "java.lang.OutOfMemoryError" in ln:
                return "\n".join(x.strip() for x in lines[i:i + 8])
    return None


def bisect(backend, build, workload: str, mode: str, candidates: list[int], workdir: pathlib.Path,
           timeout: float, reference: dict, reserved_mb: int | None = None,
           extra: dict | None = None, heap_dumps: bool = False) -> tuple[int | None, list[dict]]:
    """The smallest candidate with which the job completes (None if none does), and the trials."""
    lo, hi = -1, len(candidates)  # candidates[lo] fails (or none), candidates[hi] succeeds (or none)
    trials = []
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = trial(backend, build, workload, mode, candidates[mid], workdir, timeout, reserved_mb, extra, heap_dumps)
        if t["ok"]:
            want = reference.setdefault(workload, t["digest"])
            if t["digest"] != want:
                t["ok"] = False
                t["error"] = f"wrong result {t['digest']} (expected {want})"
        trials.append(t)
        status = f"ok in {t['wall_s']:.0f} s" if t["ok"] else f"failed: {t['error'][:120]}"
        if t.get("service_rss"):
            status += f", service peak RSS {t['service_rss'] / 2**20:.0f} MiB"
        if t.get("executor_oom"):
            status += "\n  an executor ran out of memory:\n    " + t["executor_oom"].replace("\n", "\n    ")
        print(f"{workload} {mode} {candidates[mid]} MiB: {status}", flush=True)
        if t["ok"]:
            hi = mid
        else:
            lo = mid
    return (candidates[hi] if hi < len(candidates) else None), trials


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="sort,rdd-sort,groupby",
                    help="from: sort, rdd-sort, groupby, repartition [sort,rdd-sort,groupby]")
    ap.add_argument("--candidates", default=DEFAULT_CANDIDATES, help=f"executor memories to try, MiB [{DEFAULT_CANDIDATES}]")
    ap.add_argument("--modes", default="vanilla,crossdock", help="[vanilla,crossdock]")
    ap.add_argument("--app-timeout", type=float, default=1500, help="seconds a trial may take [1500]")
    ap.add_argument("--reserved-mb", type=int, help="Spark's reserved executor memory, MiB, in every trial "
                    "(spark.testing.reservedMemory; 0 removes Spark's 450 MiB heap floor) [Spark's own: 300]")
    ap.add_argument("--worker-memory", default="1GiB",
                    help="memory budget of each of the 2 Crossdock workers (what the service holds beside the "
                         "executors: the DMO chapter counts its pool in the total) [1GiB]")
    ap.add_argument("--binary", default=str(sb.BINARY), help="the crossdock binary [target/release/crossdock]")
    ap.add_argument("--jar", default=str(sb.CLIENT_JAR), help="the Spark client jar [clients/spark/target/crossdock-spark.jar]")
    ap.add_argument("--out", help="JSON file [bench-results/min-memory-<time>.json]")
    ap.add_argument("--crossdock-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark property for the Crossdock trials only, e.g. spark.crossdock.push.maxInFlight=8m "
                         "(what the client needs at a given size); repeatable")
    ap.add_argument("--keep-logs", action="store_true", help="keep every trial's driver, executor and service logs (printed path)")
    ap.add_argument("--heap-dumps", action="store_true", help="an executor that runs out of heap writes a heap dump into "
                    "its trial's directory (read it with bench/heap_histogram.py); implies --keep-logs")
    args = ap.parse_args()
    args.keep_logs = args.keep_logs or args.heap_dumps
    workloads = [w for w in args.workloads.split(",") if w]
    bad_conf = [c for c in args.crossdock_conf if "=" not in c]
    if bad_conf:
        raise SystemExit(f"--crossdock-conf {bad_conf[0]!r}: expected KEY=VALUE")
    crossdock_conf = dict(c.split("=", 1) for c in args.crossdock_conf)
    bad = [w for w in workloads if w not in WORKLOADS]
    if bad:
        raise SystemExit(f"unknown workloads {bad}; choose from {list(WORKLOADS)}")
    candidates = sorted(int(x) for x in args.candidates.split(",") if x)
    modes = [m for m in args.modes.split(",") if m]
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="crossdock-min-memory-"))
    out = pathlib.Path(args.out) if args.out else sb.ROOT / "bench-results" / f"min-memory-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    results: dict = {}
    reference: dict = {}
    started = time.monotonic()
    try:
        backend = sb.LocalBackend(workdir, worker_memory=args.worker_memory)
        build = sb.Build(workdir / "build", pathlib.Path(args.binary), pathlib.Path(args.jar))
        for w in workloads:
            results[w] = {}
            for m in modes:
                extra = crossdock_conf if m != "vanilla" else {}
                best, trials = bisect(backend, build, w, m, candidates, workdir, args.app_timeout, reference,
                                      args.reserved_mb, extra, args.heap_dumps)
                results[w][m] = {"min_mb": best, "trials": trials}
    finally:
        if args.keep_logs:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    print("| workload | " + " | ".join(f"{m} min executor memory" for m in modes) + " | crossdock / vanilla |")
    print("|---|" + "---|" * (len(modes) + 1))
    for w in workloads:
        mins = [results[w][m]["min_mb"] for m in modes]
        ratio = "-"
        if "vanilla" in modes and "crossdock" in modes:
            v, c = results[w]["vanilla"]["min_mb"], results[w]["crossdock"]["min_mb"]
            ratio = f"{c / v:.2f}" if v and c else "-"
        print(f"| {w} | " + " | ".join(f"{x} MiB" if x else f"> {candidates[-1]} MiB" for x in mins) + f" | {ratio} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                                        "command": " ".join(sys.argv), "git": sb._git(), "machine": sb._machine(),
                                        "candidates_mb": candidates, "reserved_mb": args.reserved_mb,
                                        "build": build.sha256, "elapsed_s": time.monotonic() - started,
                                        "service": f"crossdock standalone, 2 workers x {args.worker_memory} (outside the executors)"},
                               "results": results}, indent=1))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
