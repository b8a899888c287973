"""Many applications on one shuffle service: a large application running while three small
ones start during it, each application's time against its time alone (the fair completion
experiment of Wang 2014, Chapter 4, on the live service).

    .venv/bin/python bench/multi_app.py [--runs 2] [--large-scale 2] [--small-scale 1]

Per run and mode, on one host (Spark local-cluster, each application 2 executors x 1 core
of its own, 1 GiB heap each):

    alone     the large application (df-repartition at --large-scale) by itself, then one
              small application (df-groupby at --small-scale) by itself
    together  the large application starts; --first-after seconds later the first small one
              starts, and the next two --stagger seconds apart

Modes: `vanilla` (Spark's own sort shuffle, each application its own), `fifo` and `fair`:
every shuffle of every application through one Crossdock service (`crossdock standalone`,
2 workers x --memory; the SQL exchange's routing forced to Crossdock so that small
shuffles are not sent to Spark's own) whose workers serve waiting pushes and fetches in
arrival order (`--scheduling fifo`, what Crossdock did before) or by fair completion
(`--scheduling fair`). One application alone is the same under both orders, so both
compare with the same solo runs (run with `--scheduling fair`).

An application's time is its workload's wall time inside the driver (after its session
started), as the dissertation's slowdown = time in the mix / time alone. Every result is
checked against the same application's result alone. Printed: the medians over --runs of
each application's time and slowdown, the mean completion time, and FAIR against FIFO.
The 2-core machine runs eight executors at once in `together`, so CPU is shared by all
modes alike; only the shuffle service's sharing differs between fifo and fair.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import spark_bench as sb  # noqa: E402
from services import CrossdockService, Proc  # noqa: E402

LARGE, SMALL = "df-repartition", "df-groupby"
MODES = ("vanilla", "fifo", "fair")


def start_service(build: sb.Build, run_dir: pathlib.Path, scheduling: str, memory: str) -> CrossdockService:
    run_dir.mkdir(parents=True, exist_ok=True)
    p = Proc("crossdock standalone",
             [str(build.binary), "standalone", "--listen", "127.0.0.1:0", "--workers", "2", "--memory", memory,
              "--data-dir", str(run_dir / "crossdock"), "--metrics-listen", "127.0.0.1:0", "--scheduling", scheduling],
             r"metrics on (\S+)", env={"CROSSDOCK_LOG": "warn"}, log=run_dir / "crossdock.log")
    address = next(m.group(1) for m in (re.search(r"crossdock standalone listening on (\S+)", ln) for ln in p.output) if m)
    return CrossdockService(address, [p], metrics_url=p.match.group(1))


class App:
    """One Spark application started as a child process (its own process group)."""

    def __init__(self, build, backend, workload: str, scale: float, mode: str, coordinator: str | None,
                 run_dir: pathlib.Path, tag: str):
        run_dir.mkdir(parents=True, exist_ok=True)
        m = sb.Mode("crossdock" if coordinator else "vanilla",
                    conf={"spark.crossdock.route": "crossdock"} if coordinator else {})
        conf = sb.app_conf(backend, workload, m, coordinator, build)
        conf["__app_name__"] = f"multi-app-{tag}-{mode}"
        conf_path = run_dir / f"{tag}.conf.json"
        conf_path.write_text(json.dumps(conf))
        self.tag, self.run_dir, self.started = tag, run_dir, time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, str(build.script), "--conf-file", str(conf_path), "--child", workload, "--scale", str(scale)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable, "CROSSDOCK_BENCH_ROOT": str(sb.ROOT)})

    def result(self, timeout: float) -> dict:
        try:
            stdout, stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            stdout, stderr = self.proc.communicate()
            stderr += f"\nkilled after {timeout:.0f} s"
        (self.run_dir / f"{self.tag}.driver.log").write_text(stderr)
        line = next((ln for ln in stdout.splitlines() if ln.startswith("RESULT ")), None)
        if self.proc.returncode != 0 or line is None:
            raise RuntimeError(f"{self.tag} failed (exit {self.proc.returncode}):\n" + "\n".join(stderr.splitlines()[-20:]))
        r = json.loads(line[len("RESULT "):])
        # Its executors' directories (logs, jars) go with the run's other logs (applications
        # run side by side here, so they are picked by the application's id).
        sb.move_executor_dirs([r["app_id"]], self.run_dir / f"{self.tag}-executors")
        return {"wall_s": r["wall_s"], "digest": r["digest"], "app_s": time.monotonic() - self.started}

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_apps(build, backend, mode: str, plan: list[tuple[str, str, float, float]], run_dir: pathlib.Path,
             memory: str, timeout: float) -> dict[str, dict]:
    """Runs `plan` [(tag, workload, scale, start after s)] against one service (none for
    vanilla); returns each tag's result."""
    service = None if mode == "vanilla" else start_service(build, run_dir / "service", mode, memory)
    apps: list[App] = []
    try:
        t0 = time.monotonic()
        for tag, workload, scale, after in plan:
            time.sleep(max(0.0, t0 + after - time.monotonic()))
            apps.append(App(build, backend, workload, scale, mode, service.address if service else None, run_dir, tag))
        return {a.tag: a.result(timeout) for a in apps}
    finally:
        for a in apps:
            a.kill()
        if service:
            service.stop()


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2, help="repetitions of the whole experiment [2]")
    ap.add_argument("--large-scale", type=float, default=2.0, help=f"{LARGE}'s --scale [2]")
    ap.add_argument("--small-scale", type=float, default=1.0, help=f"{SMALL}'s --scale [1]")
    ap.add_argument("--first-after", type=float, default=20.0, help="seconds from the large app's start to the first small one's [20]")
    ap.add_argument("--stagger", type=float, default=5.0, help="seconds between the small apps' starts [5]")
    ap.add_argument("--memory", default="512MiB", help="each Crossdock worker's memory budget [512MiB]")
    ap.add_argument("--modes", default=",".join(MODES), help=f"from: {', '.join(MODES)} [all]")
    ap.add_argument("--app-timeout", type=float, default=1200)
    ap.add_argument("--out", default=None, help="JSON file [bench-results/multi-app-<timestamp>.json]")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        ap.error(f"--modes: from {', '.join(MODES)}")
    smalls = [f"small{i}" for i in (1, 2, 3)]
    together = [("large", LARGE, args.large_scale, 0.0)] + [
        (s, SMALL, args.small_scale, args.first_after + i * args.stagger) for i, s in enumerate(smalls)]
    runs: list[dict] = []
    with sb.work_dir("crossdock-multi-app-", args.keep_logs) as workdir:
        build = sb.Build(workdir / "build")
        backend = sb.LocalBackend(workdir)
        for run in range(args.runs):
            one: dict = {"alone": {}, "together": {}}
            # Alone: vanilla, and Crossdock once (the order does not matter to one app).
            for solo in ["vanilla"] + (["fair"] if any(m != "vanilla" for m in modes) else []):
                for tag, workload, scale in (("large", LARGE, args.large_scale), ("small", SMALL, args.small_scale)):
                    r = run_apps(build, backend, solo, [(tag, workload, scale, 0.0)],
                                 workdir / f"run{run}-alone-{solo}-{tag}", args.memory, args.app_timeout)[tag]
                    one["alone"].setdefault(solo, {})[tag] = r
                    print(f"run {run + 1}: {tag} alone, {solo}: {r['wall_s']:.1f} s", flush=True)
            for mode in modes:
                res = run_apps(build, backend, mode, together, workdir / f"run{run}-together-{mode}", args.memory,
                               args.app_timeout)
                solo = one["alone"]["vanilla" if mode == "vanilla" else "fair"]
                for tag, r in res.items():
                    want = solo["large" if tag == "large" else "small"]["digest"]
                    if r["digest"] != want:
                        raise RuntimeError(f"{tag} under {mode}: result {r['digest']} differs from alone {want}")
                one["together"][mode] = res
                print(f"run {run + 1}: together, {mode}: " + ", ".join(f"{t} {r['wall_s']:.1f} s" for t, r in res.items()),
                      flush=True)
            runs.append(one)
    # Report: medians over runs.
    summary: dict = {}
    print(f"\n{args.runs} run(s); medians. slowdown = time together / time alone (same service)")
    print(f"{'mode':8} {'large s':>8} {'x alone':>8} {'small s (each)':>22} {'x alone (max)':>14} {'mean s':>8}")
    for mode in modes:
        solo_key = "vanilla" if mode == "vanilla" else "fair"
        large = [r["together"][mode]["large"]["wall_s"] for r in runs]
        large_x = [r["together"][mode]["large"]["wall_s"] / r["alone"][solo_key]["large"]["wall_s"] for r in runs]
        small = {s: [r["together"][mode][s]["wall_s"] for r in runs] for s in smalls}
        small_x = {s: [r["together"][mode][s]["wall_s"] / r["alone"][solo_key]["small"]["wall_s"] for r in runs] for s in smalls}
        mean = [statistics.mean(a["wall_s"] for a in r["together"][mode].values()) for r in runs]
        summary[mode] = {"large_s": median(large), "large_x": median(large_x),
                         "small_s": {s: median(v) for s, v in small.items()},
                         "small_x": {s: median(v) for s, v in small_x.items()},
                         "small_x_max": max(median(v) for v in small_x.values()), "mean_s": median(mean)}
        sm = summary[mode]
        print(f"{mode:8} {sm['large_s']:8.1f} {sm['large_x']:8.2f} "
              f"{' '.join(f'{v:6.1f}' for v in sm['small_s'].values()):>22} "
              f"{' '.join(f'{v:4.2f}' for v in sm['small_x'].values())} ({sm['small_x_max']:.2f}) {sm['mean_s']:8.1f}")
    alone = {k: {t: median([r["alone"][k][t]["wall_s"] for r in runs]) for t in ("large", "small")}
             for k in runs[0]["alone"]}
    print("alone: " + "; ".join(f"{k}: large {v['large']:.1f} s, small {v['small']:.1f} s" for k, v in alone.items()))
    if "fifo" in summary and "fair" in summary:
        f, q = summary["fifo"], summary["fair"]
        print(f"fair against fifo: large {q['large_s'] / f['large_s']:.2f}x, mean completion "
              f"{q['mean_s'] / f['mean_s']:.2f}x, worst small slowdown {q['small_x_max']:.2f} vs {f['small_x_max']:.2f}")
        print(f"targets: small apps <= 1.3x alone with fair ({q['small_x_max']:.2f}) and better than fifo; "
              f"large <= 1.1x its fifo time ({q['large_s'] / f['large_s']:.2f}); mean below fifo "
              f"({q['mean_s'] / f['mean_s']:.2f}x; the paper: 0.69x)")
    out = pathlib.Path(args.out or sb.ROOT / "bench-results" / f"multi-app-{datetime.datetime.now():%Y%m%d-%H%M%S}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "runs": runs, "summary": summary, "alone": alone,
                               "machine": sb._machine(), "git": sb._git()}, indent=1))
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
