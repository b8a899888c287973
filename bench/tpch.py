"""TPC-H on Spark SQL: vanilla Spark against Crossdock with auto-routing on (`crossdock`)
and with every shuffle forced through Crossdock (`crossdock-forced`), in the same run.

    .venv/bin/python bench/tpch.py [--scale-factor 1] [--runs 3] [--queries 1-22]
        [--modes vanilla,crossdock,crossdock-forced] [--peer …]

The data is TPC-H's, made on this machine by `tpchgen-cli` (a Rust port of dbgen that
writes the same rows, from PyPI; `make setup` installs it) as Parquet, once per scale factor,
under target/tpch/. The queries are the specification's 22 with its validation parameters
(bench/sql/tpch.sql).

Each (run, mode) is one Spark application (local-cluster: two 1-core executors, AQE on,
`spark.sql.shuffle.partitions` 24) that runs every query in turn, after one warm-up
query; modes alternate A B C, C B A, … as in bench/spark_bench.py. Every query's rows are
compared across modes and runs, and at scale factor 1 its row count against the
specification's answer set. The report gives, per query and in total, the median over runs
of each mode's time and of its per-run ratio to vanilla, and how many shuffles each
Crossdock mode sent through Crossdock and how many it routed to Spark's own shuffle.
Writes bench-results/tpch-<timestamp>.json and prints a table.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import pathlib
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import spark_bench as sb  # noqa: E402

SQL = HERE / "sql" / "tpch.sql"
TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")
# Rows in the specification's answer set of each query at scale factor 1 (clause 2.1.3.5).
ROWS_AT_SF1 = {1: 4, 2: 100, 3: 10, 4: 5, 5: 5, 6: 1, 7: 4, 8: 2, 9: 175, 10: 20, 11: 1048, 12: 2, 13: 42, 14: 1,
               15: 1, 16: 18314, 17: 1, 18: 57, 19: 1, 20: 186, 21: 100, 22: 7}
SPARK_CONF = {"spark.sql.shuffle.partitions": "24", "spark.sql.adaptive.enabled": "true"}
DEFAULT_MODES = "vanilla,crossdock,crossdock-forced"
sb.WORKLOAD_CONF["tpch"] = SPARK_CONF  # applied over the suite's defaults by sb.app_conf


def queries(scale_factor: float) -> dict[int, str]:
    """The 22 queries by number, Q11's FRACTION set for the scale factor."""
    text = SQL.read_text()
    parts = re.split(r"^-- Q(\d+):.*$", text, flags=re.M)
    out = {int(n): body.strip() for n, body in zip(parts[1::2], parts[2::2])}
    if sorted(out) != list(range(1, 23)):
        raise RuntimeError(f"{SQL}: expected queries Q1..Q22, found {sorted(out)}")
    fraction = f"{0.0001 / scale_factor:.10f}".rstrip("0")
    return {n: q.replace("${fraction}", fraction) for n, q in out.items()}


def parse_queries(spec: str) -> list[int]:
    """`1-22`, `1,3,5-7`: query numbers, each within 1..22."""
    out: list[int] = []
    for item in (x.strip() for x in spec.split(",") if x.strip()):
        lo, _, hi = item.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise SystemExit(f"--queries {spec!r}: expected numbers and ranges such as 1,3,5-7")
        if not 1 <= a <= b <= 22:
            raise SystemExit(f"--queries {spec!r}: queries are numbered 1 to 22")
        out.extend(n for n in range(a, b + 1) if n not in out)
    return out


def generate(scale_factor: float, root: pathlib.Path) -> pathlib.Path:
    """The tables as Parquet under root/sf<scale_factor>, made once: a directory per table
    (what `--parts` makes), the large ones split into 4 files per unit of scale so that
    scans are parallel."""
    dest = root / f"sf{scale_factor:g}"
    done = dest / "COMPLETE"
    if done.is_file():
        return dest
    # Where `make setup` installs it: the project's main environment, also when this runs from
    # another one (the Spark 3.5 tests).
    tool = HERE.parent / ".venv" / "bin" / "tpchgen-cli"
    if not tool.is_file():
        raise SystemExit(f"{tool} is missing: run `make setup` (it installs tpchgen-cli from PyPI)")
    shutil.rmtree(dest, ignore_errors=True)
    parts = max(1, round(4 * scale_factor))
    print(f"generating TPC-H scale factor {scale_factor:g} into {dest} ({parts} files for the large tables)", flush=True)
    for tables, n in (("lineitem,orders,partsupp,part,customer", parts), ("supplier,nation,region", 1)):
        subprocess.run([str(tool), "parquet", "-s", f"{scale_factor:g}", f"--tables={tables}", f"--parts={n}",
                        f"--output-dir={dest}"], check=True)
    missing = [t for t in TABLES if not any((dest / t).glob("*.parquet"))]
    if missing:
        raise RuntimeError(f"tpchgen-cli did not write {missing} under {dest}")
    done.write_text(f"tpchgen-cli parquet -s {scale_factor:g}\n")
    return dest


def _cell(v) -> str:
    """One value as text that is equal across runs exactly when the value is: decimals,
    integers, strings and dates as they are, doubles to 12 significant digits (sums of
    doubles may be added in another order when the reduce side reads blocks in another order)."""
    return f"{v:.12g}" if isinstance(v, float) else str(v)


# ---- one application, in a child process ----

def child(conf_path: str, data: str, scale_factor: float, numbers: list[int]) -> None:
    conf = json.loads(pathlib.Path(conf_path).read_text())
    texts = queries(scale_factor)
    with sb.spark_session(conf.pop("__app_name__"), conf) as spark:
        for t in TABLES:
            spark.read.parquet(str(pathlib.Path(data) / t)).createOrReplaceTempView(t)
        # Warm the executors' JVMs and the Parquet reader alike in every mode.
        spark.sql("select count(*), max(l_shipdate) from lineitem").collect()
        manager = spark.sparkContext._jsc.sc().env().shuffleManager()
        crossdock = manager.getClass().getSimpleName() == "CrossdockShuffleManager"

        def routes() -> dict[str, int]:
            if not crossdock:
                return {}
            return {"through_crossdock": manager.shufflesThroughCrossdock(), "through_spark": manager.shufflesThroughSpark()}
        results = {}
        for n in numbers:
            before = {s["stageId"] for s in sb._rest(spark, "stages")}
            routed_before = routes()
            t0 = time.monotonic()
            rows = spark.sql(texts[n]).collect()
            wall = time.monotonic() - t0
            routed = {k: v - routed_before[k] for k, v in routes().items()}
            stages = [s for s in sb._rest(spark, "stages?status=complete") if s["stageId"] not in before]
            digest = hashlib.sha256("\n".join("|".join(_cell(v) for v in r) for r in rows).encode()).hexdigest()[:16]
            results[n] = {"wall_s": wall, "rows": len(rows), "digest": digest, "stages": len(stages),
                          "shuffle_write_bytes": sum(s.get("shuffleWriteBytes", 0) for s in stages),
                          "shuffle_write_s": sum(s.get("shuffleWriteTime", 0) for s in stages) / 1e9,
                          "fetch_wait_s": sum(s.get("shuffleFetchWaitTime", 0) for s in stages) / 1e3,
                          "routes": routed}
        print("RESULT " + json.dumps({"queries": results, "routes": routes(),
                                      "wall_s": sum(r["wall_s"] for r in results.values()),
                                      "shuffle_write_bytes": sum(r["shuffle_write_bytes"] for r in results.values())}),
              flush=True)


# ---- the suite ----

def _median_ratio(runs: dict, mode: str, key) -> float | None:
    """Median over rounds of mode's value over vanilla's in the same round."""
    base = {r["round"]: key(r) for r in runs.get("vanilla", [])}
    ratios = [key(r) / base[r["round"]] for r in runs.get(mode, []) if base.get(r["round"])]
    return statistics.median(ratios) if ratios else None


def report(runs: dict, modes: list[str], numbers: list[int], scale_factor: float) -> dict:
    """Per query and in total: medians and ratios; result equality; row counts."""
    summary: dict = {"queries": {}, "total": {}, "routes": {}}
    digests: dict[int, set] = {n: set() for n in numbers}
    for m in modes:
        for r in runs[m]:
            for n in numbers:
                digests[n].add(r["queries"][str(n)]["digest"])
    for n in numbers:
        q: dict = {"results_equal": len(digests[n]) == 1}
        rows = {r["queries"][str(n)]["rows"] for m in modes for r in runs[m]}
        q["rows"] = sorted(rows)
        if scale_factor == 1:
            q["rows_as_specified"] = rows == {ROWS_AT_SF1[n]}
        for m in modes:
            walls = [r["queries"][str(n)]["wall_s"] for r in runs[m]]
            q[m] = {"wall_s": statistics.median(walls) if walls else None,
                    "stages": statistics.median(r["queries"][str(n)]["stages"] for r in runs[m]) if walls else None,
                    "shuffle_mb": statistics.median(r["queries"][str(n)]["shuffle_write_bytes"] for r in runs[m]) / 1e6 if walls else None}
            if m != "vanilla":
                q[m]["ratio"] = _median_ratio(runs, m, lambda r, n=n: r["queries"][str(n)]["wall_s"])
            routed = [r["queries"][str(n)].get("routes") for r in runs[m]]
            if routed and all(routed):
                q[m]["routes"] = {k: statistics.median(x[k] for x in routed) for k in routed[0]}
        summary["queries"][n] = q
    for m in modes:
        walls = [r["wall_s"] for r in runs[m]]
        t = {"wall_s": statistics.median(walls) if walls else None,
             "machine_cpu_s": statistics.median(r["machine_cpu_s"] for r in runs[m]) if walls else None,
             "commit_p50_ms": statistics.median(r.get("commit_p50_ms", 0) for r in runs[m]) if walls else None,
             "commit_p99_ms": statistics.median(r.get("commit_p99_ms", 0) for r in runs[m]) if walls else None}
        if m != "vanilla":
            t["ratio"] = _median_ratio(runs, m, lambda r: r["wall_s"])
            t["machine_cpu_ratio"] = _median_ratio(runs, m, lambda r: r["machine_cpu_s"])
            ratios = [summary["queries"][n][m]["ratio"] for n in numbers if summary["queries"][n][m].get("ratio")]
            t["median_query_ratio"] = statistics.median(ratios) if ratios else None
            t["queries_above_1_1"] = sum(1 for x in ratios if x > 1.1)
            t["worst_query_ratio"] = max(ratios) if ratios else None
        summary["total"][m] = t
        if runs[m] and runs[m][0].get("routes"):
            summary["routes"][m] = {k: statistics.median(r["routes"][k] for r in runs[m]) for k in runs[m][0]["routes"]}
    summary["results_equal"] = all(q["results_equal"] for q in summary["queries"].values())
    return summary


def print_table(summary: dict, modes: list[str]) -> None:
    others = [m for m in modes if m != "vanilla"]
    head = f"{'query':>5} {'rows':>6} {'vanilla s':>9}" + "".join(f" {m + ' s':>17} {'x':>6}" for m in others) + "  equal"
    print(head)
    for n, q in summary["queries"].items():
        line = f"{'Q' + str(n):>5} {','.join(map(str, q['rows'])):>6} {q['vanilla']['wall_s']:>9.2f}"
        for m in others:
            ratio = q[m].get("ratio")
            line += f" {q[m]['wall_s']:>17.2f} {(f'{ratio:.2f}' if ratio else '-'):>6}"
        flag = "yes" if q["results_equal"] else "NO"
        if q.get("rows_as_specified") is False:
            flag += " (row count differs from the specification's answer)"
        print(line + "  " + flag)
    t = summary["total"]
    line = f"{'total':>5} {'':>6} {t['vanilla']['wall_s']:>9.2f}"
    for m in others:
        ratio = t[m].get("ratio")
        line += f" {t[m]['wall_s']:>17.2f} {(f'{ratio:.2f}' if ratio else '-'):>6}"
    print(line)
    for m in others:
        if t[m].get("median_query_ratio"):
            print(f"{m}: total {t[m]['ratio']:.3f}x vanilla, median query {t[m]['median_query_ratio']:.3f}x, "
                  f"worst {t[m]['worst_query_ratio']:.2f}x, {t[m]['queries_above_1_1']} queries above 1.1x; "
                  f"machine CPU {t[m]['machine_cpu_ratio']:.3f}x; commit p50 {t[m]['commit_p50_ms']:.2f} ms, "
                  f"p99 {t[m]['commit_p99_ms']:.2f} ms")
    for m in others:
        through = [f"Q{n} {q[m]['routes']['through_crossdock']:g}/{sum(q[m]['routes'].values()):g}"
                   for n, q in summary["queries"].items() if q[m].get("routes", {}).get("through_crossdock")]
        if through and any(q[m].get("routes", {}).get("through_spark") for q in summary["queries"].values()):
            print(f"{m}: shuffles through Crossdock / all, per query: " + ", ".join(through))
    for m, r in summary["routes"].items():
        print(f"{m}: {r.get('through_crossdock', 0):.0f} shuffles through Crossdock, {r.get('through_spark', 0):.0f} routed to Spark's own (median per run)")


def run_suite(args, workdir: pathlib.Path) -> int:
    numbers = parse_queries(args.queries)
    names = [m for m in args.modes.split(",") if m]
    bad = [m for m in names if m not in sb.BUILTIN_MODES]
    if bad:
        raise SystemExit(f"unknown modes {bad}: --modes takes {', '.join(sb.BUILTIN_MODES)}; add others with --peer")
    modes = ([sb.Mode(m) for m in names] + [p for spec in (args.peer or []) for p in sb.parse_peer(spec)]
             + [sb.parse_build(spec, workdir) for spec in (args.build or [])])
    if len({m.name for m in modes}) != len(modes):
        raise SystemExit("two modes have the same name")
    if "vanilla" not in names:
        raise SystemExit("--modes needs vanilla: every ratio is against it")
    data = generate(args.scale_factor, pathlib.Path(args.data_dir))
    backend = sb.LocalBackend(workdir)
    build = sb.Build(workdir / "build", script=pathlib.Path(__file__).resolve())
    shutil.copytree(SQL.parent, build.script.parent / SQL.parent.name)  # the queries, taken with the build
    out = pathlib.Path(args.out) if args.out else sb.ROOT / "bench-results" / f"tpch-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "machine": sb._machine(),
            "command": " ".join(shlex.quote(a) for a in sys.argv), "git": sb._git(), "build_sha256": build.sha256,
            "backend": backend.describe(), "spark_conf": SPARK_CONF, "scale_factor": args.scale_factor,
            "modes": [{"name": m.name, **m.describe()} for m in modes]}
    runs: dict = {m.name: [] for m in modes}
    failures: list[dict] = []
    started = time.monotonic()
    child_args = ["--child", "--data", str(data), "--scale-factor", str(args.scale_factor),
                  "--queries", ",".join(map(str, numbers))]
    print(f"TPC-H scale factor {args.scale_factor:g}: {len(numbers)} queries x {len(modes)} modes x {args.runs} runs", flush=True)
    try:
        for run in range(args.runs):
            for mode in (modes if run % 2 == 0 else list(reversed(modes))):
                try:
                    r = sb.one_run(backend, build, "tpch", mode, 1.0, workdir / "runs" / f"{mode.name}-{run + 1}",
                                   args.app_timeout, child_args=child_args)
                    r["round"] = run
                    runs[mode.name].append(r)
                    msg = f"{r['wall_s']:.1f} s for {len(numbers)} queries, {r['shuffle_write_bytes'] / 1e6:.0f} MB shuffled"
                except RuntimeError as e:
                    failures.append({"mode": mode.name, "round": run, "error": str(e)[-4000:]})
                    msg = f"FAILED: {str(e).splitlines()[0]}"
                    print(str(e), file=sys.stderr, flush=True)
                print(f"[{sb._fmt_s(time.monotonic() - started)}] {mode.name} run {run + 1}: {msg}", flush=True)
    except KeyboardInterrupt:
        print("\ninterrupted: reporting the runs so far", file=sys.stderr)
        meta["interrupted"] = True
    meta["elapsed_s"] = time.monotonic() - started
    if not runs["vanilla"]:
        print("no vanilla run finished: there is nothing to compare with", file=sys.stderr)
        return 1
    complete = [m.name for m in modes if runs[m.name]]
    summary = report(runs, complete, numbers, args.scale_factor)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "args": {k: v for k, v in vars(args).items() if k not in ("child", "conf_file")},
                               "summary": summary, "runs": runs, "failures": failures}, indent=1, default=str))
    print()
    print_table(summary, complete)
    print(f"\nwrote {out} ({sb._fmt_s(meta['elapsed_s'])})")
    rows_ok = all(q.get("rows_as_specified", True) for q in summary["queries"].values())
    return 0 if summary["results_equal"] and rows_ok and not failures and not meta.get("interrupted") else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale-factor", type=float, default=1.0, help="TPC-H scale factor: 1 is about 1 GB of text [1]")
    ap.add_argument("--queries", default="1-22", help="query numbers and ranges, e.g. 1,3,5-7 [1-22]")
    ap.add_argument("--runs", type=int, default=3, help="applications per mode [3]")
    ap.add_argument("--modes", default=DEFAULT_MODES, help=f"from {', '.join(sb.BUILTIN_MODES)} [{DEFAULT_MODES}]")
    ap.add_argument("--peer", action="append", metavar="SPEC", help="another shuffle manager as one more mode (see bench/spark_bench.py)")
    ap.add_argument("--build", action="append", metavar="NAME=DIR",
                    help="Crossdock from another build as one more mode (see bench/spark_bench.py)")
    ap.add_argument("--data-dir", default=str(sb.ROOT / "target" / "tpch"), help="where the generated tables are kept [target/tpch]")
    ap.add_argument("--out", default=None, help="JSON file [bench-results/tpch-<timestamp>.json]")
    ap.add_argument("--app-timeout", type=float, default=3600, help="seconds before one application is killed [3600]")
    ap.add_argument("--keep-logs", action="store_true", help="keep every run's driver and service logs (printed path)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--conf-file", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.conf_file, args.data, args.scale_factor, parse_queries(args.queries))
        return 0
    with sb.work_dir("crossdock-tpch-", args.keep_logs) as workdir:
        return run_suite(args, workdir)


if __name__ == "__main__":
    sys.exit(main())
