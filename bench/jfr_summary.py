#!/usr/bin/env python3
"""Summarize Java Flight Recordings: where executors allocate and where they spend CPU.

`bench/spark_bench.py --jfr` records every executor of every run into the run's `jfr/`
directory. This reads one or more such directories (or .jfr files), each a *group* (for
example the runs of one mode), with the JDK's own `jfr` tool, and prints per group:

- allocation: the sampled allocation weight (`jdk.ObjectAllocationSample`, bytes the JVM
  estimates each sample stands for) by allocation site, the site being the first
  `--depth` frames of the stack, optionally starting at the first frame matching `--from`;
- CPU: execution samples (`jdk.ExecutionSample`, Java threads on a CPU) by top frame.

Both are samples: compare groups recorded with the same settings, and read shares and
large differences, not small ones.

    .venv/bin/python bench/jfr_summary.py vanilla=DIR1 crossdock=DIR2 [--top 25] [--depth 3]
"""

import argparse
import collections
import json
import pathlib
import shutil
import subprocess
import sys


def jfr_tool() -> str:
    """The `jfr` tool of the JDK on PATH (the one that runs Spark)."""
    found = shutil.which("jfr")
    if found:
        return found
    java = shutil.which("java")
    if java:
        cand = pathlib.Path(java).resolve().parent / "jfr"
        if cand.exists():
            return str(cand)
    raise SystemExit("no `jfr` tool: it comes with a JDK (not a JRE); put the JDK's bin/ on PATH")


def recordings(spec: str) -> tuple[str, list[pathlib.Path]]:
    """`label=PATH` or `PATH`: every .jfr file under PATH (a file or a directory tree)."""
    label, _, path = spec.rpartition("=")
    p = pathlib.Path(path)
    files = [p] if p.is_file() else sorted(p.rglob("*.jfr"))
    if not files:
        raise SystemExit(f"{spec}: no .jfr files")
    return (label or path), files


def events(tool: str, f: pathlib.Path, names: str) -> list[dict]:
    out = subprocess.run([tool, "print", "--json", "--events", names, str(f)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["recording"]["events"]


def frame_name(fr: dict) -> str:
    m = fr.get("method") or {}
    t = (m.get("type") or {}).get("name", "?")
    return f"{t}.{m.get('name', '?')}"


def site(ev: dict, depth: int, start: str | None) -> str:
    frames = (ev.get("values", {}).get("stackTrace") or {}).get("frames") or []
    names = [frame_name(f) for f in frames]
    if start:
        i = next((k for k, n in enumerate(names) if start in n), None)
        if i is None:
            return "(no frame matches --from)"
        names = names[i:]
    return " < ".join(names[:depth]) or "(no stack)"


def summarize(tool: str, files: list[pathlib.Path], depth: int, start: str | None):
    alloc: collections.Counter = collections.Counter()
    cpu: collections.Counter = collections.Counter()
    for f in files:
        for ev in events(tool, f, "jdk.ObjectAllocationSample,jdk.ExecutionSample"):
            if ev["type"] == "jdk.ObjectAllocationSample":
                alloc[site(ev, depth, start)] += int(ev["values"].get("weight", 0))
            else:
                cpu[site(ev, 1, None)] += 1
    return alloc, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="+", metavar="[LABEL=]PATH", help="a .jfr file or a directory of them")
    ap.add_argument("--top", type=int, default=20, help="sites and methods shown per group [20]")
    ap.add_argument("--depth", type=int, default=3, help="frames that name an allocation site [3]")
    ap.add_argument("--from", dest="start", default=None,
                    help="start each allocation stack at its first frame containing this text, e.g. 'crossdock'")
    args = ap.parse_args()
    tool = jfr_tool()
    for spec in args.groups:
        label, files = recordings(spec)
        alloc, cpu = summarize(tool, files, args.depth, args.start)
        total_a, total_c = sum(alloc.values()), sum(cpu.values())
        print(f"== {label}: {len(files)} recording(s); sampled allocation {total_a / 2**20:.0f} MiB, "
              f"{total_c} CPU samples")
        print("  allocation (MiB, share, site):")
        for s, w in alloc.most_common(args.top):
            print(f"  {w / 2**20:9.1f} {w / max(total_a, 1):6.1%}  {s}")
        print("  CPU (samples, share, method):")
        for s, n in cpu.most_common(args.top):
            print(f"  {n:9d} {n / max(total_c, 1):6.1%}  {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
