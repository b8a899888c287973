"""The services a benchmark run starts: child processes that announce readiness on a
line of their output, and a Crossdock deployment made of them."""

from __future__ import annotations

import os
import pathlib
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.request


def histogram_quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The q quantile of a Prometheus histogram given as (upper bound, cumulative count)
    pairs in order, interpolated linearly within the bucket it falls in."""
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = q * buckets[-1][1]
    lo, below = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank and cumulative > below:
            if bound == float("inf"):
                return lo
            return lo + (bound - lo) * (rank - below) / (cumulative - below)
        lo, below = bound, cumulative
    return lo


def histogram_summary(text: str, name: str, prefix: str) -> dict[str, float]:
    """`{prefix}s`, `{prefix}_p50_ms`, `{prefix}_p99_ms` of histogram `name` in a
    Prometheus text page, its series summed over their labels (a standalone service's
    workers each have one); empty if the page has no such histogram or it is empty."""
    summed: dict[float, float] = {}
    for le, v in re.findall(rf'^{name}_bucket{{(?:[^}}]*,)?le="([^"]+)"}} (\S+)$', text, re.M):
        summed[float(le)] = summed.get(float(le), 0.0) + float(v)
    buckets = sorted(summed.items())
    if not buckets or buckets[-1][1] == 0:
        return {}
    return {f"{prefix}s": buckets[-1][1], f"{prefix}_p50_ms": histogram_quantile(buckets, 0.5) * 1e3,
            f"{prefix}_p99_ms": histogram_quantile(buckets, 0.99) * 1e3}


class Proc:
    """A service started as a child process in its own process group (optionally inside a
    network namespace); waits for a line matching `ready` on stdout or stderr."""

    def __init__(self, name: str, cmd: list[str], ready: str, env: dict | None = None, netns: str | None = None,
                 log: pathlib.Path | None = None, timeout: float = 60):
        self.name = name
        if netns:
            cmd = ["ip", "netns", "exec", netns] + cmd
        self.log = open(log, "w") if log else None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        lines: queue.Queue = queue.Queue()

        def pump():
            for line in self.proc.stdout:
                if self.log:
                    self.log.write(line)
                    self.log.flush()
                lines.put(line)
            lines.put(None)
        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        self.match = None
        tail: list[str] = []
        while self.match is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line is None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} did not become ready ({ready!r}) within {timeout:.0f} s; last output:\n" + "".join(tail[-20:]))
            tail.append(line)
            self.match = re.search(ready, line)
        self.output = tail  # every line up to and including the ready line
        # The lines after it, as they come (None once the output ends).
        self.lines = lines
        self.pid = self.proc.pid

    def peak_rss(self) -> int:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self, timeout: float = 15) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        else:
            # The leader is gone; children in its group (e.g. executors) may not be.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.log:
            self.log.close()
            self.log = None


class CrossdockService:
    """Crossdock for one run: processes, the coordinator's address, and their peak RSS."""

    def __init__(self, address: str, workers: list[Proc], others: list[Proc] = (), metrics_url: str | None = None):
        # The authorities a client checks the servers against, when they run with TLS.
        self.tls_ca: pathlib.Path | None = None
        self.address = address
        self.workers = workers
        self.procs = list(others) + list(workers)
        self.metrics_url = metrics_url

    def commit_latency(self) -> dict[str, float]:
        """The coordinator's commits so far and their p50 and p99 latency in ms (from its
        `crossdock_coordinator_commit_seconds` histogram, interpolated within buckets as
        Prometheus' histogram_quantile does), its partition splits, and where the page has
        the workers' histograms, their fetches' first-frame and pushes' acknowledgement
        latency the same way; empty without a metrics endpoint."""
        if not self.metrics_url:
            return {}
        text = urllib.request.urlopen(self.metrics_url, timeout=10).read().decode()
        out = histogram_summary(text, "crossdock_coordinator_commit_seconds", "commit")
        # The workers' side of a fetch's first wait and of a push (a standalone service's
        # page has its workers'; a coordinator's alone has none).
        out.update(histogram_summary(text, "crossdock_worker_fetch_first_frame_seconds", "fetch_first_frame"))
        out.update(histogram_summary(text, "crossdock_worker_push_ack_seconds", "push_ack"))
        # Hot partitions continued on another worker (docs/architecture.md, "A hot partition, split").
        out["splits"] = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                            if l.startswith("crossdock_coordinator_splits_total"))
        return out

    def peak_rss(self) -> int:
        """Sum over the worker processes of each one's peak resident set."""
        return sum(p.peak_rss() for p in self.workers)

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()
