"""A worker with a slow disk shared by a heavy and a light application: the light one's push
latency and the worker's memory, with congestion-aware throttling and fair completion
scheduling on and off (Wang 2014, chapter 5's congestion-aware dispatch, and chapter 4's
order, on the live service).

    sudo .venv/bin/python bench/congestion.py [--runs 3] [--write-mbps 40]

One `crossdock standalone` per run with one worker of --memory whose data directory is on a
slow disk: `scripts/slowfs.py`, a FUSE file system writing at --write-mbps (this machine
has no other way to slow a disk: cgroup v1's blkio throttle misses buffered writeback and
there is no device-mapper). Two load generators (`crossdock bench push-fetch
--coordinator`, each its own application) push to it:

    heavy   --heavy bytes, several times the worker's memory, so most of it is written to
            the slow disk while it pushes; started first
    light   --light bytes, which fit in memory, started --light-after seconds later

Each pushes, commits, then fetches and checks every byte. Modes (same run, alternating):

    fifo          waiting pushes served in arrival order, no throttling (--scheduling fifo
                  --congestion-step 0: what the workers did before either existed)
    fair          fair completion order, no throttling (--congestion-step 0)
    fair+cad      fair completion order and congestion-aware throttling (the defaults)
    fair+cad+share  the same, with each application held to half the worker's memory
                  (--app-memory-share 0.5, a quota an operator sets)

and, once per run, the light application alone on the same slow disk. Printed, medians
over --runs: the light application's push latency (p50, p99 per batch, from its own
client), its push time, the heavy one's push time, and the worker's peak resident set
against its budget + 64 MiB. Needs root for FUSE; installs fuse, libfuse2 (apt) and fusepy
(pip) when missing.
"""

from __future__ import annotations

import argparse
import ctypes.util
import datetime
import json
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from services import Proc  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "crossdock"
MODES = {
    "fifo": ["--scheduling", "fifo", "--congestion-step", "0"],
    "fair": ["--scheduling", "fair", "--congestion-step", "0"],
    "fair+cad": ["--scheduling", "fair"],
    "fair+cad+share": ["--scheduling", "fair", "--app-memory-share", "0.5"],
}


def ensure_fuse() -> None:
    """Installs what scripts/slowfs.py needs when it is missing."""
    if not shutil.which("fusermount") or not ctypes.util.find_library("fuse"):
        subprocess.run(["apt-get", "install", "-y", "-q", "fuse", "libfuse2"], check=True,
                       env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    try:
        import fuse  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "fusepy==3.0.1"], check=True)


class SlowDisk:
    """scripts/slowfs.py mounted at `mount`, its data in `backing`."""

    def __init__(self, backing: pathlib.Path, mount: pathlib.Path, mbps: float):
        self.mount = mount
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "slowfs.py"), str(backing), str(mount),
                                      "--write-mbps", str(mbps)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        deadline = time.monotonic() + 20
        while not mount.is_mount():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out = self.proc.stdout.read() if self.proc.poll() is not None else ""
                self.stop()
                raise RuntimeError(f"slowfs did not mount {mount}: {out}")
            time.sleep(0.1)

    def stop(self) -> None:
        subprocess.run(["fusermount", "-u", str(self.mount)], check=False, capture_output=True)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def load(address: str, nbytes: str, maps: int, partitions: int) -> subprocess.Popen:
    """One application pushing `nbytes` through `address` (checked when it ends)."""
    return subprocess.Popen([str(BINARY), "bench", "push-fetch", "--coordinator", address, "--bytes", nbytes,
                             "--maps", str(maps), "--partitions", str(partitions), "--runs", "1", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"CROSSDOCK_LOG": "warn", "PATH": "/usr/bin:/bin"})


def result(p: subprocess.Popen, what: str) -> dict:
    out, err = p.communicate(timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed ({p.returncode}):\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def figures(r: dict) -> dict:
    """An application's push figures from its push-fetch JSON (which exits non-zero, failing
    the run, if anything read back differs from what was pushed)."""
    return {"push_p50_ms": r["push_latency_p50_ms"], "push_p99_ms": r["push_latency_p99_ms"],
            "push_s": r["bytes"] / (r["push_gbps"] * 1e9)}


def parse_bytes(s: str) -> int:
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)?", s)
    if not m:
        raise ValueError(f"not a size: {s}")
    return int(m.group(1)) << {None: 0, "KiB": 10, "MiB": 20, "GiB": 30}[m.group(2)]


def one(mode: str | None, args, disk: SlowDisk, run_dir: pathlib.Path) -> dict:
    """One service on the slow disk: the light application alone (mode None) or both."""
    data = disk.mount / run_dir.name
    svc = Proc("crossdock standalone",
               [str(BINARY), "standalone", "--listen", "127.0.0.1:0", "--workers", "1", "--memory", args.memory,
                "--data-dir", str(data)] + MODES.get(mode or "fair+cad", []),
               r"crossdock standalone listening on (\S+)", env={"CROSSDOCK_LOG": "warn"},
               log=run_dir.with_suffix(".log"))
    try:
        address = svc.match.group(1)
        out = {"mode": mode or "light alone"}
        heavy = None
        if mode:
            heavy = load(address, args.heavy, 16, 32)
            time.sleep(args.light_after)
        light = load(address, args.light, 4, 8)
        out["light"] = figures(result(light, "light"))
        if heavy:
            out["heavy"] = figures(result(heavy, "heavy"))
        out["worker_peak_rss"] = svc.peak_rss()
        return out
    finally:
        svc.stop()
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--write-mbps", type=float, default=40.0, help="the slow disk's write rate")
    ap.add_argument("--memory", default="128MiB", help="the worker's memory budget")
    ap.add_argument("--heavy", default="512MiB", help="bytes the heavy application pushes")
    ap.add_argument("--light", default="32MiB", help="bytes the light application pushes")
    ap.add_argument("--light-after", type=float, default=3.0, help="seconds between the two starts")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    args = ap.parse_args()
    if not BINARY.exists():
        sys.exit(f"{BINARY} is missing: run `make build` first")
    ensure_fuse()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = ROOT / "bench-results" / f"congestion-{stamp}"
    work.mkdir(parents=True, exist_ok=True)
    disk = SlowDisk(work / "backing", work / "slow", args.write_mbps)
    runs: list[dict] = []
    try:
        order = list(MODES)
        for i in range(args.runs):
            seq = [None] + (order if i % 2 == 0 else order[::-1])
            for mode in seq:
                name = f"run{i}-{(mode or 'alone').replace('+', '-')}"
                r = one(mode, args, disk, work / name)
                r["run"] = i
                runs.append(r)
                light = r["light"]
                print(f"run {i} {r['mode']:14s} light p50 {light['push_p50_ms']:8.1f} ms  p99 {light['push_p99_ms']:8.1f} ms"
                      f"  push {light['push_s']:6.2f} s" + (f"  heavy push {r['heavy']['push_s']:6.2f} s" if "heavy" in r else "")
                      + f"  worker RSS {r['worker_peak_rss'] / 2**20:6.0f} MiB", flush=True)
    finally:
        disk.stop()
    budget = parse_bytes(args.memory) + (64 << 20)
    print(f"\nmedians over {args.runs} runs; slow disk {args.write_mbps:g} MB/s, worker {args.memory}, "
          f"heavy {args.heavy}, light {args.light} started {args.light_after:g} s later")
    print(f"{'mode':14s} {'light p50 ms':>12s} {'light p99 ms':>12s} {'light push s':>12s} {'heavy push s':>12s} "
          f"{'heavy p99 ms':>12s} {'peak RSS MiB':>12s} {'≤ budget+64':>11s}")
    summary = {}
    for mode in ["light alone"] + list(MODES):
        rs = [r for r in runs if r["mode"] == mode]
        med = lambda f: statistics.median(f(r) for r in rs)  # noqa: E731
        s = {"light_p50_ms": med(lambda r: r["light"]["push_p50_ms"]),
             "light_p99_ms": med(lambda r: r["light"]["push_p99_ms"]),
             "light_push_s": med(lambda r: r["light"]["push_s"]),
             "heavy_push_s": med(lambda r: r["heavy"]["push_s"]) if mode in MODES else None,
             "heavy_p99_ms": med(lambda r: r["heavy"]["push_p99_ms"]) if mode in MODES else None,
             "peak_rss": max(r["worker_peak_rss"] for r in rs)}
        summary[mode] = s
        heavy = (f"{s['heavy_push_s']:12.2f} {s['heavy_p99_ms']:12.1f}" if s["heavy_push_s"] is not None
                 else f"{'-':>12s} {'-':>12s}")
        print(f"{mode:14s} {s['light_p50_ms']:12.1f} {s['light_p99_ms']:12.1f} {s['light_push_s']:12.2f} {heavy} "
              f"{s['peak_rss'] / 2**20:12.0f} {'yes' if s['peak_rss'] <= budget else 'NO':>11s}")
    out = args.out or work / "congestion.json"
    out.write_text(json.dumps({"args": vars(args) | {"out": str(out)}, "date": stamp, "runs": runs,
                               "summary": summary}, indent=1, default=str))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
