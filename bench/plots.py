"""PNG plots of a Spark benchmark result (the JSON that bench/spark_bench.py or
bench/cluster.py writes), one figure per group of metrics, written next to the JSON:

    <stem>-wall-ratio.png   action wall time of each mode / vanilla in the same run, per
                            workload: median of the runs' ratios, whiskers from the
                            smallest to the largest ratio, the goal as a dashed line
    <stem>-wall.png         action wall time per workload: median bar per mode, one dot per run
    <stem>-cpu.png          whole-machine CPU seconds and Spark task run time
    <stem>-shuffle-time.png shuffle write time, fetch wait time, JVM GC time
    <stem>-memory.png       peak executor heap, shuffle service peak RSS
    <stem>-bytes.png        shuffle bytes written (and, on the emulated cluster, bytes on the links)
    <stem>-ratios.png       every metric's median / vanilla median, per workload and mode

    .venv/bin/python bench/plots.py bench-results/spark-<timestamp>.json [...]

Works from any result file, so plots can be redrawn without rerunning anything.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys

# (key, label, unit divisor, unit)
METRIC_INFO = {
    "wall_s": ("action wall time", 1, "s"),
    "machine_cpu_s": ("whole-machine CPU", 1, "CPU s"),
    "executor_run_s": ("Spark task run time", 1, "s"),
    "shuffle_write_s": ("shuffle write time", 1, "s"),
    "fetch_wait_s": ("shuffle fetch wait time", 1, "s"),
    "gc_s": ("JVM GC time", 1, "s"),
    "peak_executor_heap": ("peak executor heap", 1e6, "MB"),
    "worker_peak_rss": ("shuffle service peak RSS", 1e6, "MB"),
    "shuffle_write_bytes": ("shuffle bytes written", 1e6, "MB"),
    "net_bytes": ("bytes sent over the shaped links", 1e6, "MB"),
}

GROUPS = [
    ("cpu", "CPU", ["machine_cpu_s", "executor_run_s"]),
    ("shuffle-time", "Shuffle and GC time (summed over tasks)", ["shuffle_write_s", "fetch_wait_s", "gc_s"]),
    ("memory", "Memory", ["peak_executor_heap", "worker_peak_rss"]),
    ("bytes", "Bytes", ["shuffle_write_bytes", "net_bytes"]),
]

COLORS = {"vanilla": "#7f7f7f", "crossdock": "#1f77b4"}
PEER_COLORS = ["#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def _modes(data: dict) -> list[str]:
    modes = data.get("meta", {}).get("modes")
    if modes:
        return [m["name"] if isinstance(m, dict) else m for m in modes]
    seen: list[str] = []
    for by_mode in data["runs"].values():
        for m in by_mode:
            if m not in seen:
                seen.append(m)
    return seen


def _color(mode: str, modes: list[str]) -> str:
    if mode in COLORS:
        return COLORS[mode]
    peers = [m for m in modes if m not in COLORS]
    return PEER_COLORS[peers.index(mode) % len(PEER_COLORS)]


def paired_ratios(runs: dict, mode: str, key: str = "wall_s") -> list[float]:
    """Ratios of run i of `mode` to run i of vanilla (both measured in round i)."""
    a, b = runs.get(mode, []), runs.get("vanilla", [])
    if all("round" in r for r in a + b):
        base = {r["round"]: r for r in b}
        pairs = [(x, base[x["round"]]) for x in a if x["round"] in base]
    else:
        pairs = list(zip(a, b))
    return [x[key] / y[key] for x, y in pairs if x.get(key) and y.get(key)]


def _title(data: dict, what: str) -> str:
    meta = data.get("meta", {})
    where = meta.get("backend", {}).get("kind", "single host")
    when = meta.get("date", "")
    runs = data.get("args", {}).get("runs", "?")
    scale = data.get("args", {}).get("scale", "?")
    return f"{what}\n{where}, {runs} runs per mode, scale {scale}" + (f", {when}" if when else "")


def _grouped_bars(ax, data, modes, workloads, key):
    import numpy as np
    div = METRIC_INFO[key][1]
    width = 0.8 / len(modes)
    x = np.arange(len(workloads))
    for i, mode in enumerate(modes):
        meds, dots_x, dots_y = [], [], []
        for j, wl in enumerate(workloads):
            vals = [r.get(key, 0) / div for r in data["runs"][wl].get(mode, []) if r.get(key) is not None]
            meds.append(statistics.median(vals) if vals else 0)
            dots_x += [x[j] + (i - (len(modes) - 1) / 2) * width] * len(vals)
            dots_y += vals
        pos = x + (i - (len(modes) - 1) / 2) * width
        ax.bar(pos, meds, width * 0.92, label=mode, color=_color(mode, modes), alpha=0.85)
        ax.scatter(dots_x, dots_y, s=9, color="black", zorder=3, linewidths=0)
    label, _, unit = METRIC_INFO[key]
    ax.set_ylabel(f"{label} ({unit})")
    ax.set_xticks(x)
    ax.set_xticklabels(workloads, rotation=30, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def plot(json_path: str | pathlib.Path) -> list[pathlib.Path]:
    """Draws every figure for one result file; returns the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    json_path = pathlib.Path(json_path)
    data = json.loads(json_path.read_text())
    modes = _modes(data)
    workloads = [wl for wl, by_mode in data["runs"].items() if any(by_mode.get(m) for m in modes)]
    if not workloads:
        raise ValueError(f"{json_path}: no runs to plot")
    others = [m for m in modes if m != "vanilla"]
    stem = json_path.with_suffix("")
    written = []
    figw = max(7.0, 1.0 + 0.9 * len(workloads) * max(1, len(modes)) / 2)

    def save(fig, name):
        path = pathlib.Path(f"{stem}-{name}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    # Wall-time ratio against vanilla, with the spread of the runs.
    if "vanilla" in modes and others:
        goal = data.get("meta", {}).get("backend", {}).get("goal_wall_ratio")
        fig, ax = plt.subplots(figsize=(figw, 4.2))
        width = 0.8 / len(others)
        x = np.arange(len(workloads))
        for i, mode in enumerate(others):
            for j, wl in enumerate(workloads):
                rs = paired_ratios(data["runs"][wl], mode)
                if not rs:
                    continue
                px = x[j] + (i - (len(others) - 1) / 2) * width
                med = statistics.median(rs)
                ax.bar(px, med, width * 0.9, color=_color(mode, modes), alpha=0.85, label=mode if j == 0 else None)
                ax.errorbar(px, med, yerr=[[med - min(rs)], [max(rs) - med]], color="black", capsize=3, lw=1)
                ax.annotate(f"{med:.2f}", (px, max(rs)), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
        ax.axhline(1.0, color="black", lw=0.8)
        if goal and goal != 1.0:
            ax.axhline(goal, color="red", lw=0.8, ls="--", label=f"goal {goal}")
        ax.set_ylabel("wall time / vanilla, same run (lower is better)")
        ax.set_xticks(x)
        ax.set_xticklabels(workloads, rotation=30, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(_title(data, "Action wall time against vanilla Spark (median, min-max of runs)"), fontsize=9)
        save(fig, "wall-ratio")

    # Medians per workload, one figure per group.
    fig, ax = plt.subplots(figsize=(figw, 4.2))
    _grouped_bars(ax, data, modes, workloads, "wall_s")
    ax.legend(fontsize=8)
    ax.set_title(_title(data, "Action wall time (bars: median; dots: runs)"), fontsize=9)
    save(fig, "wall")
    for name, title, keys in GROUPS:
        keys = [k for k in keys if any(r.get(k) for by_mode in data["runs"].values() for rs in by_mode.values() for r in rs)]
        if not keys:
            continue
        fig, axes = plt.subplots(len(keys), 1, figsize=(figw, 3.3 * len(keys)), squeeze=False)
        for ax, key in zip(axes[:, 0], keys):
            _grouped_bars(ax, data, modes, workloads, key)
        axes[0, 0].legend(fontsize=8)
        axes[0, 0].set_title(_title(data, f"{title} (bars: median; dots: runs)"), fontsize=9)
        save(fig, name)

    # Every metric's ratio of medians against vanilla.
    if "vanilla" in modes and others:
        keys = [k for k in METRIC_INFO if k != "worker_peak_rss"
                and any(r.get(k) for by_mode in data["runs"].values() for r in by_mode.get("vanilla", []))]
        fig, axes = plt.subplots(1, len(others), figsize=(max(6.0, 0.9 * len(keys)) * len(others), 0.45 * len(workloads) + 2.2),
                                 squeeze=False)
        for ax, mode in zip(axes[0], others):
            grid = np.full((len(workloads), len(keys)), np.nan)
            for j, wl in enumerate(workloads):
                for k, key in enumerate(keys):
                    a = [r[key] for r in data["runs"][wl].get(mode, []) if r.get(key) is not None]
                    b = [r[key] for r in data["runs"][wl].get("vanilla", []) if r.get(key) is not None]
                    if a and b and statistics.median(b):
                        grid[j, k] = statistics.median(a) / statistics.median(b)
            im = ax.imshow(np.log2(grid), cmap="RdYlGn_r", vmin=-1, vmax=1, aspect="auto")
            for j in range(len(workloads)):
                for k in range(len(keys)):
                    if not np.isnan(grid[j, k]):
                        ax.text(k, j, f"{grid[j, k]:.2f}", ha="center", va="center", fontsize=7)
            ax.set_xticks(range(len(keys)))
            ax.set_xticklabels([METRIC_INFO[k][0] for k in keys], rotation=35, ha="right", fontsize=7)
            ax.set_yticks(range(len(workloads)))
            ax.set_yticklabels(workloads if mode == others[0] else [], fontsize=8)
            ax.set_title(f"{mode} / vanilla (medians)", fontsize=9)
        fig.colorbar(im, ax=axes[0].tolist(), label="log2 ratio (green: lower than vanilla)", shrink=0.8)
        fig.suptitle(_title(data, "Ratios of medians against vanilla"), fontsize=9, y=1.04)
        path = pathlib.Path(f"{stem}-ratios.png")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    for f in argv:
        for p in plot(f):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
