"""Spark benchmark driver: Crossdock (and any peer shuffle manager) against vanilla
Spark, measured in the same run.

Each (workload, mode) run is a separate Spark application in a process of its own; the
modes alternate A B C, C B A, … so drift on the machine hits all of them alike. The
report gives medians over the runs and ratios against vanilla from the same run: action
wall time, whole-machine CPU (from /proc/stat, so a push client's background threads and
the shuffle service count too), Spark task run time, shuffle write time and fetch wait
time, shuffle bytes, JVM GC time, peak executor heap, the shuffle service's peak RSS,
per-stage times, and (on the emulated cluster, bench/cluster.py) the bytes sent over the
shaped links.

    .venv/bin/python bench/spark_bench.py [--workloads a,b] [--runs 3] [--scale 1.0]
        [--peer name=NAME,jars=A.jar,conf=k=v;k=v | --peer peer.toml] [--build NAME=DIR]
        [--executor-cores N] [--plot-only FILE]

Single host: Spark in local-cluster mode (a standalone master and 2 workers with one
1-core executor each, separate JVMs; N cores each with --executor-cores), a fresh
`crossdock standalone` (2 workers of 1 GiB) for each Crossdock run. Writes
bench-results/spark-<timestamp>.json, PNG plots next to it (bench/plots.py) and prints a
table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

# The applications run from a copy of this file and of the test harness taken when the
# suite starts (see Build), so that ROOT comes from the environment there.
HERE = pathlib.Path(__file__).resolve().parent
ROOT = pathlib.Path(os.environ.get("CROSSDOCK_BENCH_ROOT") or HERE.parent)
sys.path.insert(0, str(ROOT / "tests" / "spark"))
sys.path.insert(0, str(HERE))
from harness import BINARY, CLIENT_JAR, base_conf, jvm_jobs_jar, spark_session  # noqa: E402
from services import CrossdockService, Proc  # noqa: E402,F401  (cluster.py uses both through this module)

# ---- workloads (bench/spark_workloads.py; not `workloads`: tests/spark has a module of that name) ----
from spark_workloads import JVM_WORKLOADS, WORKLOAD_CONF, WORKLOADS, ZIPF_ALPHA  # noqa: E402

# ---- modes: vanilla, crossdock, and peers ----

BUILTIN_MODES = ("vanilla", "crossdock", "crossdock-static", "crossdock-forced", "crossdock-tls", "crossdock-unplaced",
                 "crossdock-rebalance", "crossdock-checked-fetch")
# Crossdock modes other than "crossdock" itself: Crossdock with these properties on top.
CROSSDOCK_VARIANTS = {"crossdock-static": {"spark.crossdock.fetch.policy": "static"},
                      "crossdock-forced": {"spark.crossdock.route": "crossdock"},
                      "crossdock-tls": {"spark.crossdock.route": "crossdock"},
                      # Without the SQL extension: reduce tasks where Spark puts them and
                      # coalesced reads as AQE made them (what Crossdock did before issue 13).
                      "crossdock-unplaced": {"spark.crossdock.locality": "false"},
                      "crossdock-rebalance": {},
                      "crossdock-checked-fetch": {}}
# Crossdock modes whose service runs with these arguments on top of the suite's: the
# re-placement of shuffles once their sizes are predicted (issue 13), off by default; the
# workers reading and checking every fetched batch instead of sending what is on disk with
# sendfile (issue 16), to measure what the zero-copy path gives.
COORDINATOR_ARGS = {"crossdock-rebalance": ["--rebalance", "true"],
                    "crossdock-checked-fetch": ["--zero-copy-fetch", "false"]}
# Modes whose Crossdock service runs with TLS (its certificates made per run): compared
# with crossdock-forced, what TLS costs.
TLS_MODES = ("crossdock-tls",)


def is_crossdock(mode) -> bool:
    """Whether a mode runs through a Crossdock service started for each run (this build's,
    or, for a --build mode, another build's)."""
    return (mode.name == "crossdock" or mode.name in CROSSDOCK_VARIANTS
            or getattr(mode, "build", None) is not None)
_PEER_KEYS = ("name", "jars", "conf", "start", "stop")


@dataclasses.dataclass
class Mode:
    """One way of running the shuffle. Peers bring their jars and Spark properties, and
    optionally shell commands run before (`start`) and after (`stop`) each of their runs,
    e.g. to start and stop their own shuffle servers. A mode with a `build` is Crossdock
    from another build (--build): its service and client jar, started and configured
    exactly as the suite's own crossdock mode is."""
    name: str
    conf: dict = dataclasses.field(default_factory=dict)
    jars: list = dataclasses.field(default_factory=list)
    start: str | None = None
    stop: str | None = None
    build: "Build | None" = dataclasses.field(default=None, repr=False, compare=False)

    def describe(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "build"}
        if self.build is not None:
            sha = self.build.sha256
            d["build"] = {"from": str(self.build.source),
                          "sha256": {k: sha[k] for k in ("crossdock", "crossdock-spark.jar")}}
        return {k: v for k, v in d.items() if v}


def _peer_from_dict(d: dict, origin: str) -> Mode:
    unknown = set(d) - set(_PEER_KEYS)
    if unknown:
        raise ValueError(f"{origin}: unknown peer keys {sorted(unknown)} (known: {', '.join(_PEER_KEYS)})")
    name = str(d.get("name", ""))
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"{origin}: a peer needs a name of letters, digits, '.', '_' or '-'")
    if name in BUILTIN_MODES:
        raise ValueError(f"{origin}: '{name}' is a built-in mode; give the peer another name")
    jars = d.get("jars", [])
    if isinstance(jars, str):
        jars = [j for j in re.split(r"[,:]", jars) if j]
    for j in jars:
        if not pathlib.Path(j).is_file():
            raise ValueError(f"{origin}: peer {name}: jar {j} does not exist")
    conf = d.get("conf", {})
    if isinstance(conf, str):
        items = [kv for kv in conf.split(";") if kv.strip()]
        if any("=" not in kv for kv in items):
            raise ValueError(f"{origin}: peer {name}: conf must be k=v;k=v")
        conf = dict(kv.strip().split("=", 1) for kv in items)
    return Mode(name=name, conf={str(k): str(v) for k, v in conf.items()}, jars=[str(pathlib.Path(j).resolve()) for j in jars],
                start=d.get("start"), stop=d.get("stop"))


def parse_peer(spec: str) -> list[Mode]:
    """`name=N,jars=a.jar,b.jar,conf=k=v;k=v[,start=CMD][,stop=CMD]`, or a .toml/.json file
    holding one peer (the same keys, `conf` a table) or several (`[[peer]]`)."""
    path = pathlib.Path(spec)
    if path.suffix in (".toml", ".json") and path.is_file():
        if path.suffix == ".toml":
            import tomllib
            d = tomllib.loads(path.read_text())
        else:
            d = json.loads(path.read_text())
        items = d["peer"] if isinstance(d.get("peer"), list) else [d]
        return [_peer_from_dict(x, str(path)) for x in items]
    fields = re.split(r",(?=(?:%s)=)" % "|".join(_PEER_KEYS), spec)
    d = {}
    for f in fields:
        if "=" not in f or f.split("=", 1)[0] not in _PEER_KEYS:
            raise ValueError(f"--peer {spec!r}: expected name=…,jars=…,conf=k=v;k=v (or a .toml/.json file)")
        k, v = f.split("=", 1)
        d[k] = v
    return [_peer_from_dict(d, "--peer")]


def parse_build(spec: str, workdir: pathlib.Path) -> Mode:
    """`NAME=DIR`: Crossdock from another build as one more mode. DIR holds that build's
    `crossdock` binary and `crossdock-spark.jar` (what bench/peers/crossdock-at.sh REV
    makes); the applications, the backend and the service's settings are the suite's own."""
    name, sep, d = spec.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or not d:
        raise SystemExit(f"--build {spec!r}: expected NAME=DIR (NAME of letters, digits, '.', '_' or '-')")
    if name in BUILTIN_MODES:
        raise SystemExit(f"--build {spec!r}: '{name}' is a built-in mode; give the build another name")
    src = pathlib.Path(d).resolve()
    missing = [p for p in (src / "crossdock", src / "crossdock-spark.jar") if not p.is_file()]
    if missing:
        raise SystemExit(f"--build {spec!r}: {', '.join(map(str, missing))} missing "
                         "(bench/peers/crossdock-at.sh REV DIR builds both)")
    build = Build(workdir / f"build-{name}", binary=src / "crossdock", jar=src / "crossdock-spark.jar")
    return Mode(name, build=build)


# ---- the Crossdock build every run of one suite uses ----

class Build:
    """A copy of the binary, the Spark client jar, and the code the applications run (this
    file, its workloads and the test harness), taken when the suite starts, so that a rebuild or an edit
    during a long run cannot mix two versions into one result."""

    def __init__(self, workdir: pathlib.Path, binary: pathlib.Path = BINARY, jar: pathlib.Path = CLIENT_JAR,
                 script: pathlib.Path | None = None):
        for p in (binary, jar):
            if not p.is_file():
                raise RuntimeError(f"{p} is missing: run `make build` first")
        workdir.mkdir(parents=True, exist_ok=True)
        self.source = binary.resolve().parent
        self.binary = workdir / "crossdock"
        self.jar = workdir / "crossdock-spark.jar"
        # The applications run `script` (this file unless another suite's driver, which imports this one).
        script = script or pathlib.Path(__file__).resolve()
        self.script = workdir / script.name
        shutil.copy2(binary, self.binary)
        shutil.copy2(jar, self.jar)
        shutil.copy2(pathlib.Path(__file__).resolve(), workdir / "spark_bench.py")
        if self.script.name != "spark_bench.py":
            shutil.copy2(script, self.script)
        shutil.copy2(HERE / "services.py", workdir / "services.py")
        shutil.copy2(HERE / "spark_workloads.py", workdir / "spark_workloads.py")
        shutil.copy2(ROOT / "tests" / "spark" / "harness.py", workdir / "harness.py")
        shutil.copy2(ROOT / "tests" / "spark" / "jvm_archive.py", workdir / "jvm_archive.py")
        self.sha256 = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16]
                       for p in (self.binary, self.jar, self.script, workdir / "spark_workloads.py")}

    def jvm_jobs_jar(self) -> pathlib.Path:
        """The Java jobs of bench/jvm, compiled once per suite into its directory."""
        return jvm_jobs_jar(self.binary.parent, HERE / "jvm")

    def spark_conf(self, coordinator: str) -> dict[str, str]:
        """The properties `crossdock spark-conf` prints."""
        out = subprocess.run([str(self.binary), "spark-conf", "--coordinator", coordinator, "--jar", str(self.jar)],
                             check=True, capture_output=True, text=True).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


# ---- where the applications run ----

class LocalBackend:
    """One host: Spark's local-cluster mode (a master and 2 workers, one executor of
    `executor_cores` cores each, all separate JVMs) and `crossdock standalone` with 2
    workers of 1 GiB."""

    kind = "single host"
    executors = 2

    def __init__(self, workdir: pathlib.Path, replication: int = 1, worker_memory: str = "1GiB",
                 split_size: str | None = None, executor_cores: int = 1):
        self.workdir = workdir
        self.executor_cores = executor_cores
        self.replication = replication
        self.worker_memory = worker_memory
        self.split_size = split_size

    def describe(self) -> dict:
        split = f", split size {self.split_size}" if self.split_size else ""
        c = self.executor_cores
        return {"kind": self.kind,
                "spark": f"local-cluster[2,{c},2048]: 2 executors x {c} core{'s' if c > 1 else ''}, 1 GiB heap",
                "crossdock": f"crossdock standalone, 2 workers x {self.worker_memory}, replication "
                             f"{self.replication}{split}, per run",
                "goal_wall_ratio": 1.0}

    def spark_conf(self) -> dict[str, str]:
        return base_conf(executors=self.executors, executor_memory_mb=2048,
                         executor_cores=self.executor_cores)

    def start_crossdock(self, build: Build, run_dir: pathlib.Path, tls: bool = False,
                        coordinator_args: list[str] | None = None) -> CrossdockService:
        tls_args, ca = [], None
        if tls:
            certs = run_dir / "tls"
            subprocess.run([str(build.binary), "tls-certs", "--out", str(certs), "--hosts", "127.0.0.1"],
                           check=True, stdout=subprocess.DEVNULL)
            ca = certs / "ca.pem"
            tls_args = ["--tls-cert", str(certs / "cert.pem"), "--tls-key", str(certs / "key.pem"), "--tls-ca", str(ca)]
        p = Proc("crossdock standalone",
                 [str(build.binary), "standalone", "--listen", "127.0.0.1:0", "--workers", "2",
                  "--memory", self.worker_memory,
                  "--data-dir", str(run_dir / "crossdock"), "--metrics-listen", "127.0.0.1:0",
                  "--replication", str(self.replication), *tls_args, *(coordinator_args or []),
                  *(["--split-size", self.split_size] if self.split_size else [])],
                 r"metrics on (\S+)", env={"CROSSDOCK_LOG": "warn"}, log=run_dir / "crossdock.log")
        address = next(m.group(1) for m in (re.search(r"crossdock standalone listening on (\S+)", ln) for ln in p.output) if m)
        service = CrossdockService(address, [p], metrics_url=p.match.group(1))
        service.tls_ca = ca
        return service

    def child_prefix(self) -> list[str]:
        return []

    def peer_env(self) -> dict[str, str]:
        return {"CROSSDOCK_BENCH_HOSTS": "127.0.0.1", "CROSSDOCK_BENCH_NETNS": "", "CROSSDOCK_BENCH_DRIVER_HOST": "127.0.0.1"}

    def counters(self) -> dict[str, int]:
        return {}

    def check(self) -> None:
        """Raises if the environment broke (the cluster backend checks its daemons)."""


# ---- one run, in a child process ----

def _rest(spark, path):
    sc = spark.sparkContext
    return json.load(urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{path}", timeout=30))


def _ms(ts: str | None) -> float | None:
    if not ts:
        return None
    return datetime.datetime.strptime(ts.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1e3


def child(workload: str, scale: float, conf_path: str) -> None:
    conf = json.loads(pathlib.Path(conf_path).read_text())
    with spark_session(conf.pop("__app_name__"), conf) as spark:
        spark.range(1000).repartition(4).count()  # warm the executors' JVMs alike in every mode
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        before = {s["stageId"] for s in _rest(spark, "stages")}
        t0 = time.monotonic()
        digest = WORKLOADS[workload](spark, scale)
        wall = time.monotonic() - t0
        time.sleep(1.5)  # one more heartbeat carries the executors' final peaks
        stages = sorted((s for s in _rest(spark, "stages?status=complete") if s["stageId"] not in before), key=lambda s: s["stageId"])
        peak_heap = max((s.get("peakExecutorMetrics", {}).get("JVMHeapMemory", 0) for s in stages), default=0)
        # Crossdock's readers report their largest fetch buffer in a named accumulator.
        fetch_peak = max((int(a.get("value", 0)) for s in stages for a in s.get("accumulatorUpdates", [])
                          if a.get("name") == "crossdock fetch peak buffered bytes"), default=0)
        sums = lambda k: sum(s.get(k, 0) for s in stages)  # noqa: E731
        # Frames Spark's memory manager granted no room (the map task's share held by its
        # sorter or another consumer), and how long they waited for acknowledgements.
        acc = lambda name: sum(int(a.get("value", 0)) for s in stages  # noqa: E731
                               for a in s.get("accumulatorUpdates", []) if a.get("name") == name)

        def stage(s):
            t0, t1 = _ms(s.get("submissionTime")), _ms(s.get("completionTime"))
            return {"id": s["stageId"], "name": s["name"][:60], "tasks": s.get("numTasks", 0),
                    "wall_s": (t1 - t0) / 1e3 if t0 and t1 else None, "run_s": s.get("executorRunTime", 0) / 1e3,
                    "gc_s": s.get("jvmGcTime", 0) / 1e3, "shuffle_write_bytes": s.get("shuffleWriteBytes", 0),
                    "shuffle_read_bytes": s.get("shuffleReadBytes", 0), "shuffle_write_s": s.get("shuffleWriteTime", 0) / 1e9,
                    "fetch_wait_s": s.get("shuffleFetchWaitTime", 0) / 1e3,
                    "spill_disk_bytes": s.get("diskBytesSpilled", 0)}
        # Reduce tasks (of stages that read a shuffle) that ran on a host Spark was told
        # to prefer: with Crossdock's SQL exchange, the host of their partition's worker.
        reduce_tasks = reduce_local = 0
        for s in stages:
            if s.get("shuffleReadBytes", 0) > 0:
                for t in _rest(spark, f"stages/{s['stageId']}/{s['attemptId']}/taskList?length=1000000"):
                    if t.get("status") == "SUCCESS":
                        reduce_tasks += 1
                        reduce_local += t.get("taskLocality") in ("PROCESS_LOCAL", "NODE_LOCAL")
        print("RESULT " + json.dumps({
            "reduce_tasks": reduce_tasks,
            "reduce_local_share": reduce_local / reduce_tasks if reduce_tasks else 0.0,
            "digest": [str(x) for x in digest],
            "wall_s": wall,
            "executors": executors,
            "stages": [stage(s) for s in stages],
            "executor_run_s": sums("executorRunTime") / 1e3,
            "gc_s": sums("jvmGcTime") / 1e3,
            "shuffle_write_bytes": sums("shuffleWriteBytes"),
            "shuffle_write_s": sums("shuffleWriteTime") / 1e9,
            "fetch_wait_s": sums("shuffleFetchWaitTime") / 1e3,
            "spill_disk_bytes": sums("diskBytesSpilled"),
            "peak_execution_memory": max((s.get("peakExecutionMemory", 0) for s in stages), default=0),
            "peak_executor_heap": peak_heap,
            "fetch_peak_bytes": fetch_peak,
            "push_frames_refused": acc("crossdock push frames refused memory"),
            "push_refused_wait_s": acc("crossdock push refused-frame wait ms") / 1e3,
            # The adaptive readers' limit changes (grows far above shrinks: it follows noise).
            "fetch_limit_grown": acc("crossdock fetch limit grown"),
            "fetch_limit_shrunk": acc("crossdock fetch limit shrunk"),
            "app_id": spark.sparkContext.applicationId,
        }), flush=True)


def _cpu_jiffies() -> int:
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    return sum(vals) - vals[3] - vals[4]  # all but idle and iowait


def _shell(cmd: str, env: dict, what: str) -> None:
    r = subprocess.run(cmd, shell=True, env={**os.environ, **env}, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{what} `{cmd}` failed (exit {r.returncode}):\n{(r.stdout + r.stderr)[-2000:]}")


def app_conf(backend, workload: str, mode: Mode, coordinator: str | None, build: Build) -> dict[str, str]:
    conf = {**backend.spark_conf(), "spark.ui.enabled": "true", "spark.ui.port": "0",
            "spark.sql.shuffle.partitions": "64",
            # Peak memory is reported with executor heartbeats: make them frequent enough
            # for runs of a few seconds.
            "spark.executor.heartbeatInterval": "1s", "spark.executor.metrics.pollingInterval": "100ms",
            # Start only once every executor is there, in every mode alike.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s"}
    conf.update(WORKLOAD_CONF.get(workload, {}))
    if is_crossdock(mode):
        conf.update((mode.build or build).spark_conf(coordinator))
        conf.update(CROSSDOCK_VARIANTS.get(mode.name, {}))
    conf.update(mode.conf)
    jars = list(mode.jars)
    if workload in JVM_WORKLOADS:
        jars.append(str(build.jvm_jobs_jar()))
    if jars:
        conf["spark.jars"] = ",".join([j for j in conf.get("spark.jars", "").split(",") if j] + jars)
    conf["__app_name__"] = f"bench-{workload}-{mode.name}"
    return conf


def _local_cluster_work() -> pathlib.Path | None:
    """Where local-cluster's workers put their executors' directories (logs, jars):
    SPARK_HOME/work, SPARK_HOME being pyspark's package unless set (they ignore
    SPARK_WORKER_DIR, which only a standalone worker's own start reads)."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        import importlib.util
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            return None
        home = str(pathlib.Path(spec.origin).parent)
    return pathlib.Path(home) / "work"


def _local_cluster_apps() -> set[str]:
    work = _local_cluster_work()
    return {p.name for p in work.iterdir()} if work and work.is_dir() else set()


def _keep_executor_logs(before: set[str], dest: pathlib.Path) -> None:
    """Moves the executor directories of the applications started since `before` into `dest`
    (the run's directory), so that they go or stay with the run's other logs instead of
    piling up in the Python environment."""
    move_executor_dirs(sorted(_local_cluster_apps() - before), dest)


def move_executor_dirs(app_ids: list[str], dest: pathlib.Path) -> None:
    """Moves local-cluster's executor directories of the applications `app_ids` into `dest`."""
    work = _local_cluster_work()
    if not work or not work.is_dir():
        return
    for name in app_ids:
        if (work / name).is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.move(str(work / name), str(dest / name))


def one_run(backend, build: Build, workload: str, mode: Mode, scale: float, run_dir: pathlib.Path,
            app_timeout: float = 1200, child_args: list[str] | None = None, jfr: bool = False) -> dict:
    """One application of `workload` in `mode`; with `jfr`, every executor JVM records a
    Java Flight Recording (the JDK's `profile` settings: CPU and allocation samples) into
    `run_dir/jfr/` (one file per JVM; `bench/jfr_summary.py` reads them)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    service = None
    env = backend.peer_env()
    try:
        if mode.start:
            _shell(mode.start, env, f"peer {mode.name} start")
        if is_crossdock(mode):
            service = backend.start_crossdock(mode.build or build, run_dir, tls=mode.name in TLS_MODES,
                                              coordinator_args=COORDINATOR_ARGS.get(mode.name))
        conf = app_conf(backend, workload, mode, service.address if service else None, build)
        if jfr:
            (run_dir / "jfr").mkdir(exist_ok=True)
            # A directory: the JVM names each file by its pid (JDK 17 does not expand %p).
            conf["spark.executor.extraJavaOptions"] = " ".join(filter(None, [
                conf.get("spark.executor.extraJavaOptions"),
                f"-XX:StartFlightRecording=settings=profile,dumponexit=true,filename={run_dir / 'jfr'}/"]))
        if service is not None and service.tls_ca is not None:
            conf["spark.crossdock.tls.ca"] = str(service.tls_ca)
        conf_path = run_dir / "conf.json"
        conf_path.write_text(json.dumps(conf))
        cmd = backend.child_prefix() + [sys.executable, str(build.script), "--conf-file", str(conf_path)] + (
            child_args if child_args is not None else ["--child", workload, "--scale", str(scale)])
        apps_before = _local_cluster_apps()
        c0 = backend.counters()
        busy0, t0 = _cpu_jiffies(), time.monotonic()
        # Its own process group, so that the driver JVM and (local-cluster) its executors
        # go with it when the run times out or the suite is interrupted.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYSPARK_PYTHON": sys.executable, "CROSSDOCK_BENCH_ROOT": str(ROOT)},
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=app_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            stderr += f"\nkilled after --app-timeout {app_timeout:.0f} s"
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        busy1, t1 = _cpu_jiffies(), time.monotonic()
        c1 = backend.counters()
        _keep_executor_logs(apps_before, run_dir / "spark-work")
        (run_dir / "driver.log").write_text(stderr)
        line = next((ln for ln in stdout.splitlines() if ln.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            raise RuntimeError(f"{workload}/{mode.name} failed (exit {proc.returncode}); log {run_dir / 'driver.log'}:\n"
                               + "\n".join(stderr.splitlines()[-25:]))
        r = json.loads(line[len("RESULT "):])
        # Whole machine, for the whole application including its start and stop (the same in every mode).
        r["machine_cpu_s"] = (busy1 - busy0) / os.sysconf("SC_CLK_TCK")
        r["app_s"] = t1 - t0
        r["worker_peak_rss"] = service.peak_rss() if service else 0
        r.update(service.commit_latency() if service else {})
        for k in c1:
            r[k] = c1[k] - c0.get(k, 0)
        return r
    finally:
        if service:
            service.stop()
        if mode.stop:
            _shell(mode.stop, env, f"peer {mode.name} stop")


# ---- the report ----

METRICS = [("wall_s", "action wall s"), ("machine_cpu_s", "machine CPU s"), ("executor_run_s", "task run s"),
           ("shuffle_write_s", "shuffle write s"), ("fetch_wait_s", "fetch wait s"), ("gc_s", "GC s"),
           ("shuffle_write_bytes", "shuffle bytes"), ("spill_disk_bytes", "spilled to disk"),
           ("net_bytes", "bytes on links"), ("peak_executor_heap", "peak exec heap"),
           ("fetch_peak_bytes", "peak fetch buf"), ("reduce_local_share", "reduce local"),
           ("worker_peak_rss", "service RSS"), ("commits", "map commits"), ("commit_p50_ms", "commit p50 ms"),
           ("commit_p99_ms", "commit p99 ms"), ("splits", "partition splits"),
           ("fetch_first_frame_p50_ms", "1st frame p50 ms"), ("push_ack_p50_ms", "push ack p50 ms")]


def _paired_wall_ratios(by_mode: dict, mode: str) -> list[float]:
    base = {r["round"]: r["wall_s"] for r in by_mode.get("vanilla", [])}
    return [r["wall_s"] / base[r["round"]] for r in by_mode.get(mode, []) if base.get(r["round"])]


def _stage_medians(runs: list[dict]) -> list[float] | None:
    """Median wall time of each stage position, if every run had the same stages."""
    shapes = {len(r.get("stages", [])) for r in runs}
    if len(shapes) != 1 or not runs:
        return None
    n = shapes.pop()
    out = []
    for i in range(n):
        vals = [r["stages"][i].get("wall_s") for r in runs if r["stages"][i].get("wall_s") is not None]
        out.append(statistics.median(vals) if vals else 0.0)
    return out


def report(results: dict, modes: list[str], failures: list[dict]) -> dict:
    summary = {}
    for wl, by_mode in results.items():
        summary[wl] = {}
        for mode in modes:
            runs = by_mode.get(mode, [])
            summary[wl][mode] = {k: statistics.median(r.get(k, 0) for r in runs) for k, _ in METRICS} if runs else {}
            if runs:
                summary[wl][mode]["runs"] = len(runs)
                summary[wl][mode]["stage_wall_s"] = _stage_medians(runs)
            if mode != "vanilla" and runs:
                rs = _paired_wall_ratios(by_mode, mode)
                summary[wl][mode]["wall_ratio_runs"] = rs
        digests = {tuple(r["digest"]) for mode in modes for r in by_mode.get(mode, [])}
        summary[wl]["results_equal"] = len(digests) == 1 if digests else None
        summary[wl]["failed_runs"] = sum(1 for f in failures if f["workload"] == wl)
    print()
    others = [m for m in modes if m != "vanilla"]
    w = {m: max(14, len(m) + 2) for m in modes}
    rw = {m: max(20, len(m) + 10) for m in others}
    head = f"{'workload':<20}{'metric':<17}" + "".join(f"{m:>{w[m]}}" for m in modes) + "".join(f"{m + '/vanilla':>{rw[m]}}" for m in others)
    print(head)
    print("-" * len(head))
    for wl, s in summary.items():
        for k, label in METRICS:
            vals = [s[m].get(k) for m in modes]
            if all(v in (None, 0) for v in vals):
                continue
            is_bytes = "bytes" in k or "heap" in k or "rss" in k
            row = f"{wl:<20}{label:<17}"
            for m, v in zip(modes, vals):
                row += f"{'-':>{w[m]}}" if v is None else (f"{v / 1e6:>{w[m] - 2}.1f}MB" if is_bytes else f"{v:>{w[m]}.2f}")
            base = s.get("vanilla", {}).get(k)
            for m in others:
                v = s[m].get(k)
                row += f"{(v / base):>{rw[m] - 1}.2f}x" if base and v is not None else f"{'-':>{rw[m]}}"
            print(row)
        for m in others:
            rs = s[m].get("wall_ratio_runs")
            if rs:
                print(f"{wl:<20}{'wall/vanilla':<17}{m}: per-run " + " ".join(f"{x:.2f}" for x in rs)
                      + f" (median {statistics.median(rs):.2f})")
        for m in modes:
            st = s[m].get("stage_wall_s") if s[m] else None
            if st:
                print(f"{wl:<20}{'stage wall s':<17}{m}: " + " ".join(f"{x:.2f}" for x in st))
        print(f"{wl:<20}{'results equal':<17}{str(s['results_equal']):>{w[modes[0]]}}"
              + (f"   FAILED RUNS: {s['failed_runs']}" if s["failed_runs"] else ""))
    return summary


def _machine() -> dict:
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = 0
    try:
        mem = int(next(ln.split()[1] for ln in open("/proc/meminfo") if ln.startswith("MemTotal"))) * 1024
    except (OSError, StopIteration):
        pass
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_bytes": mem, "kernel": platform.release(),
            "hostname": platform.node()}


def _git() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except OSError:
        return ""


def _fmt_s(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run_suite(args, backend, workdir: pathlib.Path, prefix: str = "spark") -> int:
    """Runs every workload in every mode, alternating, and writes the JSON and plots."""
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}")
    try:
        wscale = {w: float(f) for w, f in (x.split("=", 1) for x in args.workload_scale.split(",") if x)}
    except ValueError:
        raise SystemExit(f"--workload-scale {args.workload_scale!r}: expected workload=factor,…")
    unknown = [w for w in wscale if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"--workload-scale: unknown workloads {unknown}")
    names = [m for m in args.modes.split(",") if m]
    bad = [m for m in names if m not in BUILTIN_MODES]
    if bad:
        raise SystemExit(f"unknown modes {bad}: --modes takes {', '.join(BUILTIN_MODES)}; add others with --peer")
    modes = ([Mode(m) for m in names] + [p for spec in (args.peer or []) for p in parse_peer(spec)]
             + [parse_build(spec, workdir) for spec in (args.build or [])])
    if len({m.name for m in modes}) != len(modes):
        raise SystemExit("two modes have the same name")
    build = Build(workdir / "build")
    stamp = f"{prefix}-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    out = pathlib.Path(args.out) if args.out else ROOT / "bench-results" / stamp
    if out.is_dir():
        # A directory: the report goes in it, under the name it would have had.
        out = out / stamp
    # Found out now, not when the report is written after the whole suite.
    out.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(out.parent, os.W_OK):
        raise SystemExit(f"--out {args.out}: cannot write in {out.parent}")
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "machine": _machine(),
            "command": " ".join(shlex.quote(a) for a in sys.argv), "git": _git(), "build_sha256": build.sha256,
            "backend": backend.describe(), "modes": [{"name": m.name, **m.describe()} for m in modes],
            "zipf_alpha": ZIPF_ALPHA}
    results: dict = {w: {m.name: [] for m in modes} for w in workloads}
    failures: list[dict] = []
    total = len(workloads) * len(modes) * args.runs
    done = 0
    started = time.monotonic()
    app_times: dict[str, list[float]] = {}
    print(f"{backend.kind}: {len(workloads)} workloads x {len(modes)} modes ({', '.join(m.name for m in modes)}) x "
          f"{args.runs} runs = {total} Spark applications, scale {args.scale}"
          + "".join(f", {w} x{f}" for w, f in wscale.items()), flush=True)

    def eta(wl_index: int) -> float:
        every = [t for ts in app_times.values() for t in ts]
        mean_all = statistics.mean(every) if every else 0.0
        left = 0.0
        for i, w in enumerate(workloads):
            per = statistics.mean(app_times[w]) if app_times.get(w) else mean_all
            n_done = len(app_times.get(w, [])) + sum(1 for f in failures if f["workload"] == w)
            left += per * (len(modes) * args.runs - n_done) if i >= wl_index else 0
        return left

    try:
        for wi, wl in enumerate(workloads):
            for run in range(args.runs):
                for mode in (modes if run % 2 == 0 else list(reversed(modes))):
                    backend.check()
                    a0 = time.monotonic()
                    try:
                        r = one_run(backend, build, wl, mode, args.scale * wscale.get(wl, 1.0), workdir / "runs" / f"{wl}-{mode.name}-{run + 1}",
                                    args.app_timeout, jfr=args.jfr)
                        r["round"] = run
                        results[wl][mode.name].append(r)
                        msg = f"{r['wall_s']:.1f} s, {r['shuffle_write_bytes'] / 1e6:.0f} MB shuffled"
                    except RuntimeError as e:
                        failures.append({"workload": wl, "mode": mode.name, "round": run, "error": str(e)[-4000:]})
                        msg = f"FAILED: {str(e).splitlines()[0]}"
                        print(str(e), file=sys.stderr, flush=True)
                    app_times.setdefault(wl, []).append(time.monotonic() - a0)
                    done += 1
                    print(f"[{done}/{total}, {_fmt_s(time.monotonic() - started)} elapsed, ETA {_fmt_s(eta(wi))}] "
                          f"{wl} {mode.name} run {run + 1}: {msg}", flush=True)
    except KeyboardInterrupt:
        print("\ninterrupted: reporting the runs so far", file=sys.stderr)
        meta["interrupted"] = True
    meta["elapsed_s"] = time.monotonic() - started
    summary = report(results, [m.name for m in modes], failures)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "args": {k: v for k, v in vars(args).items() if k not in ("child", "conf_file", "plot_only")},
                               "summary": summary, "runs": results, "failures": failures}, indent=1, default=str))
    print(f"\nwrote {out} ({_fmt_s(meta['elapsed_s'])})")
    _plots(out)
    ok = not failures and not meta.get("interrupted") and all(s["results_equal"] for s in summary.values())
    return 0 if ok else 1


def _plots(path: pathlib.Path) -> None:
    try:
        import plots
        for p in plots.plot(path):
            print(f"wrote {p}")
    except ImportError as e:
        print(f"no plots ({e}): run `make setup` to install matplotlib", file=sys.stderr)
    except ValueError as e:
        print(f"no plots: {e}", file=sys.stderr)


@contextlib.contextmanager
def work_dir(prefix: str, keep: bool):
    """A fresh directory for a suite's builds, runs and logs: deleted at the end, or kept
    (and its path printed) with --keep-logs."""
    path = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            print(f"logs kept in {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def add_suite_args(ap: argparse.ArgumentParser, default_workloads: str, default_scale: float) -> None:
    ap.add_argument("--workloads", default=default_workloads, help="comma-separated, from: " + ", ".join(WORKLOADS)
                    + f" [{default_workloads}]")
    ap.add_argument("--runs", type=int, default=3, help="runs per workload and mode [3]")
    ap.add_argument("--scale", type=float, default=default_scale, help=f"multiplies every workload's data size [{default_scale}]")
    ap.add_argument("--workload-scale", default="", metavar="W=F,…",
                    help="multiplies single workloads' sizes further, e.g. many-small-blocks=2 (2000 x 2000 blocks)")
    ap.add_argument("--modes", default="vanilla,crossdock",
                    help="built-in modes: vanilla, crossdock, crossdock-static (its reader planned as Spark's own: "
                         "fixed 48 MiB in flight, requests in random order to the primary), crossdock-forced (every shuffle "
                         "through Crossdock, none routed to Spark's own), crossdock-tls (as crossdock-forced, over TLS "
                         "with certificates made per run), crossdock-unplaced (spark.crossdock.locality=false: reduce "
                         "tasks where Spark puts them), crossdock-rebalance (the coordinator re-places shuffles once their "
                         "sizes are predicted: --rebalance true), crossdock-checked-fetch (the workers read and check "
                         "every fetched batch instead of sending batches on disk with sendfile: --zero-copy-fetch false) "
                         "[vanilla,crossdock]")
    ap.add_argument("--replication", type=int, default=1, help="copies of every Crossdock partition, 1 or 2 [1]")
    ap.add_argument("--worker-memory", default="1GiB", help="memory budget of each Crossdock worker (one host) [1GiB]")
    ap.add_argument("--split-size", default=None,
                    help="the Crossdock workers' --split-size (one host) [the service's default, 1GiB]")
    ap.add_argument("--peer", action="append", metavar="SPEC",
                    help="another shuffle manager as one more mode: name=N,jars=a.jar,b.jar,conf=k=v;k=v[,start=CMD][,stop=CMD] "
                         "or a .toml/.json file (see bench/peers/); repeatable")
    ap.add_argument("--build", action="append", metavar="NAME=DIR",
                    help="Crossdock from another build as one more mode, run exactly as the crossdock mode: DIR holds its "
                         "`crossdock` binary and `crossdock-spark.jar` (bench/peers/crossdock-at.sh REV makes them); repeatable")
    ap.add_argument("--out", default=None, help="JSON file, or a directory to write it in under its default name [bench-results/<kind>-<timestamp>.json]; plots go next to it")
    ap.add_argument("--plot-only", metavar="FILE", help="draw the plots of an existing result JSON and exit")
    ap.add_argument("--app-timeout", type=float, default=1200, help="seconds before one application is killed and counted failed [1200]")
    ap.add_argument("--keep-logs", action="store_true", help="keep every run's driver and service logs (printed path)")
    ap.add_argument("--jfr", action="store_true",
                    help="record every executor with Java Flight Recorder into each run's jfr/ directory (implies "
                         "--keep-logs; summarize with bench/jfr_summary.py). Profiling costs a few percent: "
                         "compare runs made with it only to each other")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_suite_args(ap, ",".join(WORKLOADS), 1.0)
    ap.add_argument("--executor-cores", type=int, default=1,
                    help="tasks each of the 2 executors runs at once (more than the machine's cores "
                         "oversubscribes it) [1]")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--conf-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.scale, args.conf_file)
        return 0
    if args.executor_cores < 1:
        raise SystemExit("--executor-cores must be at least 1")
    if args.plot_only:
        _plots(pathlib.Path(args.plot_only))
        return 0
    with work_dir("crossdock-bench-", args.keep_logs or args.jfr) as workdir:
        return run_suite(args, LocalBackend(workdir, replication=args.replication,
                                        worker_memory=args.worker_memory, split_size=args.split_size,
                                        executor_cores=args.executor_cores), workdir)


if __name__ == "__main__":
    sys.exit(main())
