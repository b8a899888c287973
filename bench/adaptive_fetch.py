"""The adaptive-fetch paper's experiment (Nicolae et al., TPDS 2017) on the live service:
Crossdock's adaptive reader against a static reader of Spark's own shape (48 MiB in
flight, fifth-of-the-limit requests in random order, primary first), and vanilla Spark,
on the paper's GroupByTest workloads (groupByKey and sortByKey of seeded random pairs
with 1000-byte values).

    sudo .venv/bin/python bench/adaptive_fetch.py [--scale 4] [--runs 3] [--parts host,cluster,slow]
    .venv/bin/python bench/adaptive_fetch.py --summarize DIR     # the table of an earlier run

Parts (each a run of bench/spark_bench.py or bench/cluster.py, its JSON in DIR):

    host     one host, vanilla / crossdock (adaptive) / crossdock-static
    cluster  the emulated 3-host cluster (1 Gbit/s links), the same three modes
    slow     the emulated cluster with replication 2, without and then with one worker's
             link slowed to a tenth (100 Mbit/s), adaptive and static readers

The table gives, per part and workload, medians over the runs: the action's wall time,
the reduce stage's wall time, the fetch wait, and the largest fetch buffer a reduce task
held (Crossdock's `crossdock fetch peak buffered bytes` accumulator), with the adaptive
reader's ratios to the static one; for `slow`, each reader's slowed reduce stage against
its unslowed one.
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

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOADS = "rdd-groupbykey,rdd-sortbykey"


def _run(cmd: list[str]) -> None:
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode != 0:
        print(f"(exit {r.returncode}: a run failed or results differ; see above)", flush=True)


def run(args) -> pathlib.Path:
    out = pathlib.Path(args.out or ROOT / "bench-results" / f"adaptive-fetch-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    common = ["--workloads", WORKLOADS, "--scale", str(args.scale), "--runs", str(args.runs)]
    parts = args.parts.split(",")
    if "host" in parts:
        _run([py, str(HERE / "spark_bench.py"), *common, "--modes", "vanilla,crossdock,crossdock-static",
              "--out", str(out / "host.json")])
    if "cluster" in parts:
        _run([py, str(HERE / "cluster.py"), *common, "--modes", "vanilla,crossdock,crossdock-static",
              "--out", str(out / "cluster.json")])
    if "slow" in parts:
        for name, extra in (("slow-off", []), ("slow-on", ["--slow-worker", "1", "--slow-rate", "100mbit"])):
            _run([py, str(HERE / "cluster.py"), *common, "--modes", "crossdock,crossdock-static",
                  "--replication", "2", *extra, "--out", str(out / f"{name}.json")])
    return out


def _median(runs: list[dict], key) -> float | None:
    vals = [key(r) for r in runs]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def _reduce_stage(r: dict) -> float | None:
    stages = [s for s in r.get("stages", []) if s.get("shuffle_read_bytes", 0) > 0]
    return stages[-1]["wall_s"] if stages else None


def _figures(doc: dict) -> dict:
    """workload -> mode -> medians of the figures the table shows."""
    out = {}
    for wl, by_mode in doc["runs"].items():
        out[wl] = {}
        for mode, runs in by_mode.items():
            if runs:
                out[wl][mode] = {
                    "wall": _median(runs, lambda r: r["wall_s"]),
                    "reduce": _median(runs, _reduce_stage),
                    "wait": _median(runs, lambda r: r["fetch_wait_s"]),
                    "peak": _median(runs, lambda r: r.get("fetch_peak_bytes") or None),
                    "runs": len(runs),
                }
    return out


def _fmt(v, unit="") -> str:
    if v is None:
        return "-"
    if unit == "MB":
        return f"{v / 1e6:.1f}"
    return f"{v:.2f}"


def summarize(d: pathlib.Path) -> int:
    rows = []
    for part in ("host", "cluster"):
        f = d / f"{part}.json"
        if not f.exists():
            continue
        for wl, m in _figures(json.loads(f.read_text())).items():
            a, s, v = m.get("crossdock", {}), m.get("crossdock-static", {}), m.get("vanilla", {})
            ratio = lambda k: (a[k] / s[k]) if a.get(k) and s.get(k) else None  # noqa: E731
            rows.append([part, wl, _fmt(v.get("wall")), _fmt(s.get("wall")), _fmt(a.get("wall")), _fmt(ratio("wall")),
                         _fmt(s.get("wait")), _fmt(a.get("wait")), _fmt(s.get("peak"), "MB"), _fmt(a.get("peak"), "MB"),
                         _fmt(s["peak"] / a["peak"]) if a.get("peak") and s.get("peak") else "-"])
    if rows:
        head = ["part", "workload", "vanilla wall s", "static wall s", "adaptive wall s", "adaptive/static",
                "static wait s", "adaptive wait s", "static peak MB", "adaptive peak MB", "static/adaptive peak"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    off, on = d / "slow-off.json", d / "slow-on.json"
    if off.exists() and on.exists():
        f_off, f_on = _figures(json.loads(off.read_text())), _figures(json.loads(on.read_text()))
        print()
        head = ["workload", "reader", "reduce stage s, unslowed", "reduce stage s, one worker at 1/10", "slowed/unslowed",
                "wall s, unslowed", "wall s, slowed"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for wl in f_off:
            for mode, name in (("crossdock", "adaptive"), ("crossdock-static", "static (primary first)")):
                a, b = f_off[wl].get(mode, {}), f_on.get(wl, {}).get(mode, {})
                r = b["reduce"] / a["reduce"] if a.get("reduce") and b.get("reduce") else None
                print(f"| {wl} | {name} | {_fmt(a.get('reduce'))} | {_fmt(b.get('reduce'))} | {_fmt(r)} | "
                      f"{_fmt(a.get('wall'))} | {_fmt(b.get('wall'))} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=4.0, help="workload scale (the issue asks for 4) [4]")
    ap.add_argument("--runs", type=int, default=3, help="runs per mode [3]")
    ap.add_argument("--parts", default="host,cluster,slow", help="which parts to run [host,cluster,slow]")
    ap.add_argument("--out", help="directory for the parts' JSON [bench-results/adaptive-fetch-<time>]")
    ap.add_argument("--summarize", metavar="DIR", help="print the table of an earlier run and exit")
    args = ap.parse_args()
    if args.summarize:
        return summarize(pathlib.Path(args.summarize))
    if ("cluster" in args.parts or "slow" in args.parts) and os.geteuid() != 0:
        print("the cluster parts need root (network namespaces, tc); run with --parts host or as root", file=sys.stderr)
        return 2
    d = run(args)
    print(f"\nresults in {d}\n")
    return summarize(d)


if __name__ == "__main__":
    sys.exit(main())
