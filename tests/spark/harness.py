"""Starting Crossdock and Spark for the integration tests and the demo.

Everything runs for real: `crossdock standalone` as a child process on loopback, and
Spark in local-cluster mode (a master, two workers with one executor each, all separate
JVMs) from the pinned pyspark.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import pathlib
import queue
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jvm_archive  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
# The server binary: CROSSDOCK_BIN when set (make test sets the debug build its Rust tests
# already built), else the release build that `make build` makes.
BINARY = REPO / os.environ.get("CROSSDOCK_BIN", "target/release/crossdock")
# The Spark line of the pyspark running the tests: "4", or "3.5" for the Spark 3.5 run
# (`make test-spark-3.5`, with .venv-spark-3.5's pyspark).
SPARK_LINE = "3.5" if importlib.metadata.version("pyspark").startswith("3.5") else "4"
# The client jar built for that line (CROSSDOCK_SPARK_JAR names another).
CLIENT_JAR = pathlib.Path(os.environ.get(
    "CROSSDOCK_SPARK_JAR", REPO / "clients" / "spark" / "target" /
    ("spark-3.5/crossdock-spark-3.5.jar" if SPARK_LINE == "3.5" else "crossdock-spark.jar")))
SHUFFLE_MANAGER = "org.apache.spark.shuffle.crossdock.CrossdockShuffleManager"


# The Java jobs the tests and benchmarks run where PySpark cannot express the job (a
# shuffle with a key ordering: PySpark's own sortByKey sorts in Python).
JVM_JOBS = REPO / "bench" / "jvm"


def jvm_jobs_jar(out_dir: pathlib.Path, sources: pathlib.Path = JVM_JOBS) -> pathlib.Path:
    """The Java jobs under `sources` compiled against this interpreter's pyspark, as
    `out_dir`/crossdock-jobs.jar (compiled once per directory)."""
    jar = pathlib.Path(out_dir) / "crossdock-jobs.jar"
    if not jar.is_file():
        import pyspark
        jars = pathlib.Path(pyspark.__file__).parent / "jars"
        classes = pathlib.Path(out_dir) / "jobs-classes"
        files = sorted(str(p) for p in pathlib.Path(sources).rglob("*.java"))
        subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", f"{jars}/*", "-d", str(classes), *files],
                       check=True, capture_output=True)
        subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


class Standalone:
    """A `crossdock standalone` child process."""

    def __init__(self, workers: int = 2, memory: str = "512MiB", tls: bool = False,
                 extra_args: tuple[str, ...] = ()):
        """With `tls`, the cluster runs with TLS on certificates `crossdock tls-certs` makes
        for 127.0.0.1; `tls_ca` is then the authority clients must trust. `extra_args` go
        to `crossdock standalone` as they are."""
        if not BINARY.exists():
            raise RuntimeError(f"{BINARY} is missing: run `make build` first")
        self.dir = tempfile.TemporaryDirectory(prefix="crossdock-test-")
        self.tls_ca = None
        tls_args = []
        if tls:
            certs = pathlib.Path(self.dir.name, "tls")
            subprocess.run([str(BINARY), "tls-certs", "--out", str(certs), "--hosts", "127.0.0.1"],
                           check=True, capture_output=True)
            self.tls_ca = str(certs / "ca.pem")
            tls_args = ["--tls-cert", str(certs / "cert.pem"), "--tls-key", str(certs / "key.pem"),
                        "--tls-ca", self.tls_ca]
        self.proc = subprocess.Popen(
            [str(BINARY), "standalone", "--listen", "127.0.0.1:0", "--workers", str(workers),
             "--memory", memory, "--data-dir", self.dir.name, "--metrics-listen", "127.0.0.1:0",
             *tls_args, *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "CROSSDOCK_LOG": "warn"},
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in self.proc.stdout], daemon=True).start()
        deadline = time.monotonic() + 20
        self.address = None
        self.metrics_url = None
        while self.address is None or self.metrics_url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise RuntimeError("crossdock standalone did not print its address within 20 s")
            m = re.match(r"crossdock standalone listening on (\S+)", line)
            if m:
                self.address = m.group(1)
            m = re.match(r"metrics on (\S+)", line)
            if m:
                self.metrics_url = m.group(1)

    def metric(self, name: str) -> float:
        """Sum of a metric's samples over all workers (and the coordinator)."""
        text = urllib.request.urlopen(self.metrics_url, timeout=10).read().decode()
        return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                   if l.startswith(name + " ") or l.startswith(name + "{"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def crossdock_conf(coordinator: str, tls_ca: str | None = None) -> dict[str, str]:
    """The properties `crossdock spark-conf` prints, read from the binary itself."""
    tls = ["--tls-ca", tls_ca] if tls_ca else []
    out = subprocess.run([str(BINARY), "spark-conf", "--coordinator", coordinator, "--jar", str(CLIENT_JAR),
                          "--spark", SPARK_LINE, *tls],
                         check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


# Set for the test suite by tests/spark/conftest.py (and inherited by the jobs it starts as
# child processes), never by the benchmarks or the demo: JVMs that compile with C1 alone
# start and run a short test job sooner (two failure tests: 42 s -> 34 s of wall time and
# 77 s -> 52 s of CPU on this 2-core machine). Benchmarks keep the JIT Spark users run.
QUICK_JIT = os.environ.get("CROSSDOCK_TEST_QUICK_JIT") == "1"
QUICK_JIT_OPTION = "-XX:TieredStopAtLevel=1"


def base_conf(executors: int = 2, executor_memory_mb: int = 1024, executor_cores: int = 1) -> dict[str, str]:
    """Local-cluster: `executors` workers, each offering `executor_cores` cores and
    `executor_memory_mb` MB to its one executor."""
    conf = {
        "spark.master": f"local-cluster[{executors},{executor_cores},{executor_memory_mb}]",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "1g",
        "spark.sql.shuffle.partitions": "8",
        "spark.default.parallelism": "4",
        "spark.task.maxFailures": "4",
        "spark.network.timeout": "120s",
        "spark.executor.extraJavaOptions": "-XX:+UseParallelGC",
    }
    if executor_cores != 1:
        # Said, not inferred: the client sizes its per-task windows from the task slots.
        conf["spark.executor.cores"] = str(executor_cores)
    for kind in ("executor", "driver"):
        option = suite_java_options(kind)
        if option:
            key = f"spark.{kind}.extraJavaOptions"
            conf[key] = f"{conf.get(key, '')} {option}".strip()
    return conf


def suite_java_options(kind: str) -> str:
    """The JVM options the test suite gives `kind`'s ("driver" or "executor") JVMs and the
    benchmarks do not: C1 only (QUICK_JIT) and the class-data archive (jvm_archive.py), each
    when set for this process; "" for a benchmark."""
    options = [QUICK_JIT_OPTION] if QUICK_JIT else []
    options.append(jvm_archive.java_options(kind))
    return " ".join(o for o in options if o)


@contextlib.contextmanager
def spark_session(app_name: str, conf: dict[str, str]):
    """A SparkSession with `conf`, stopped (and its JVM gateway kept) on exit."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        yield spark
    finally:
        spark.stop()


class _Child:
    """A crossdock child process whose stdout lines are collected."""

    def __init__(self, args: list[str], ready: str, netns: str | None = None):
        prefix = ["ip", "netns", "exec", netns] if netns else []
        self.proc = subprocess.Popen([*prefix, str(BINARY), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "CROSSDOCK_LOG": "warn"})
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(l) for l in self.proc.stdout],
                         daemon=True).start()
        self.values: dict[str, str] = {}
        deadline = time.monotonic() + 20
        wants_metrics = "--metrics-listen" in args and args[args.index("--metrics-listen") + 1] != "off"
        while "addr" not in self.values or (wants_metrics and "metrics" not in self.values):
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise RuntimeError(f"crossdock {args[0]} did not start within 20 s")
            m = re.match(ready, line)
            if m:
                self.values["addr"] = m.group(1)
            m = re.match(r"metrics on (\S+)", line)
            if m:
                self.values["metrics"] = m.group(1)

    @property
    def addr(self) -> str:
        return self.values["addr"]

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(self.values["metrics"], timeout=10).read().decode()
        return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                   if l.startswith(name + " ") or l.startswith(name + "{"))

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, as a crashed machine."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def write_secret(directory: str) -> str:
    """Writes a fresh cluster secret (docs/security.md) into `directory`, readable by
    its owner only, and returns its path: the coordinator and workers of one test cluster
    share it."""
    path = os.path.join(directory, "cluster-secret")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path


class ProcessCluster:
    """A coordinator and N workers, each its own `crossdock` process, so that one of them
    can be killed with SIGKILL while a job runs."""

    def __init__(self, workers: int = 3, replication: int = 1, memory: str = "256MiB",
                 worker_timeout: str = "4s", durability: str = "memory",
                 object_store: str | None = None, small_disk: tuple[int, str] | None = None,
                 worker_hosts: list[str] | None = None, rebalance: bool = False):
        """`worker_hosts`: the loopback address each worker listens on (127.0.0.2, …: every
        127.x address is this machine, and each one a host of its own to Spark and to
        Crossdock); all on 127.0.0.1 by default. `rebalance`: the coordinator's --rebalance
        (re-placement once sizes are predicted)."""
        if not BINARY.exists():
            raise RuntimeError(f"{BINARY} is missing: run `make build` first")
        self.dir = tempfile.TemporaryDirectory(prefix="crossdock-cluster-")
        self._secret = ["--secret-file", write_secret(self.dir.name)]
        self._coordinator_args = [*self._secret, "--data-dir", f"{self.dir.name}/coordinator",
                                  "--worker-timeout", worker_timeout,
                                  "--replication", str(replication),
                                  "--durability", durability,
                                  "--rebalance", "true" if rebalance else "false",
                                  "--metrics-listen", "127.0.0.1:0"]
        self.coordinator = self._start_coordinator("127.0.0.1:0")
        self._memory = memory
        self._object_store = ["--object-store", object_store] if object_store else []
        # (worker, size): that worker's data directory is a tmpfs of that size (root).
        self._mounts = []
        if small_disk:
            i, size = small_disk
            path = f"{self.dir.name}/worker-{i}"
            os.makedirs(path)
            _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path)
            self._mounts.append(path)
        hosts = worker_hosts or ["127.0.0.1"] * workers
        self.workers = [self._start_worker(i, f"{hosts[i]}:0") for i in range(workers)]
        deadline = time.monotonic() + 20
        while self.coordinator.metric("crossdock_coordinator_workers_alive") < workers:
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("workers did not register within 20 s")
            time.sleep(0.05)

    def _start_worker(self, i: int, listen: str) -> _Child:
        return _Child(["worker", *self._secret, "--coordinator", self.coordinator.addr, "--listen", listen,
                       "--memory", self._memory, "--data-dir", f"{self.dir.name}/worker-{i}",
                       "--metrics-listen", "127.0.0.1:0", *self._object_store],
                      r"crossdock worker listening on (\S+)")

    def restart_worker(self, i: int) -> None:
        """SIGKILLs worker `i` and starts it again on the same address and data
        directory."""
        addr = self.workers[i].addr
        self.workers[i].kill()
        self.workers[i] = self._start_worker(i, addr)

    def _start_coordinator(self, listen: str) -> _Child:
        return _Child(["coordinator", "--listen", listen, *self._coordinator_args],
                      r"crossdock coordinator listening on (\S+)")

    def restart_coordinator(self) -> None:
        """SIGKILLs the coordinator and starts a new one on the same address and state
        directory."""
        addr = self.coordinator.addr
        self.coordinator.kill()
        self.coordinator = self._start_coordinator(addr)

    @property
    def address(self) -> str:
        return self.coordinator.addr

    def stop(self) -> None:
        for c in [*self.workers, self.coordinator]:
            c.kill()
        for path in self._mounts:
            subprocess.run(["umount", path], check=False, capture_output=True)
        self.dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


class NamespacedCluster:
    """A coordinator in this network namespace and N workers, each in a network namespace
    of its own attached by a veth pair to a bridge here (10.78.0.1 here, 10.78.0.<i+1>
    for worker i), so that one worker can be cut off the network while its process keeps
    running. Needs root; everything it creates is removed on exit, also after a failure."""

    PREFIX = "cdt"
    bridge = "cdt-br"

    def __init__(self, workers: int = 3, replication: int = 2, memory: str = "256MiB",
                 worker_timeout: str = "4s"):
        if not BINARY.exists():
            raise RuntimeError(f"{BINARY} is missing: run `make build` first")
        self.n = workers
        self.dir = tempfile.TemporaryDirectory(prefix="crossdock-netns-")
        secret = ["--secret-file", write_secret(self.dir.name)]
        self.workers: list[_Child] = []
        self.coordinator = None
        self.cleanup_network()
        try:
            # One bridge here; each worker's namespace hangs off it by a veth pair, so
            # workers reach each other (replication) and this namespace directly.
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", "10.78.0.1/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for i in range(1, workers + 1):
                ns, host, peer = self.names(i)
                _run("ip", "netns", "add", ns)
                _run("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
                _run("ip", "link", "set", peer, "netns", ns)
                _run("ip", "link", "set", host, "master", self.bridge)
                _run("ip", "link", "set", host, "up")
                _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"10.78.0.{i + 1}/24", "dev", peer)
                _run("ip", "netns", "exec", ns, "ip", "link", "set", peer, "up")
                _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            self.coordinator = _Child(
                ["coordinator", *secret, "--listen", "0.0.0.0:0", "--data-dir", f"{self.dir.name}/coordinator",
                 "--worker-timeout", worker_timeout, "--replication", str(replication),
                 "--metrics-listen", "127.0.0.1:0"],
                r"crossdock coordinator listening on (\S+)")
            port = self.coordinator.addr.rsplit(":", 1)[1]
            for i in range(1, workers + 1):
                ns, _, _ = self.names(i)
                # `ip netns exec` keeps the command's own pid, so SIGKILL reaches it.
                self.workers.append(_Child(
                    ["worker", *secret, "--coordinator", f"10.78.0.1:{port}", "--listen", f"10.78.0.{i + 1}:0",
                     "--memory", memory, "--data-dir", f"{self.dir.name}/worker-{i}",
                     "--metrics-listen", "off"],
                    r"crossdock worker listening on (\S+)", netns=ns))
            self.address = f"127.0.0.1:{port}"
            deadline = time.monotonic() + 20
            while self.coordinator.metric("crossdock_coordinator_workers_alive") < workers:
                if time.monotonic() > deadline:
                    raise RuntimeError("workers in namespaces did not register within 20 s")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    def names(self, i: int) -> tuple[str, str, str]:
        return f"{self.PREFIX}-w{i}", f"{self.PREFIX}-h{i}", f"{self.PREFIX}-p{i}"

    def cut(self, i: int) -> None:
        """Takes worker i (1-based) off the network; its process keeps running."""
        _run("ip", "link", "set", self.names(i)[1], "down")

    def cleanup_network(self) -> None:
        for i in range(1, 17):
            ns, host, _ = self.names(i)
            subprocess.run(["ip", "link", "del", host], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def stop(self) -> None:
        for c in self.workers + ([self.coordinator] if self.coordinator else []):
            c.kill()
        self.cleanup_network()
        self.dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class SparkStandalone:
    """A Spark standalone cluster from the pinned pyspark: a master on 127.0.0.1 and one
    1-core worker on each of `hosts` (loopback addresses such as 127.0.0.2), so that its
    executors run on distinct hosts as far as Spark's scheduler can tell, without root."""

    def __init__(self, hosts: list[str], worker_memory: str = "1g"):
        import pyspark

        sys.path.insert(0, str(REPO / "bench"))
        from services import Proc  # noqa: E402

        self.dir = tempfile.TemporaryDirectory(prefix="crossdock-spark-")
        home = pathlib.Path(pyspark.__file__).parent
        spark_class = str(home / "bin" / "spark-class")

        def env(ip: str, name: str) -> dict[str, str]:
            d = pathlib.Path(self.dir.name) / name
            (d / "local").mkdir(parents=True, exist_ok=True)
            return {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": ip, "SPARK_LOCAL_DIRS": str(d / "local"),
                    "SPARK_WORKER_DIR": str(d / "work"), "SPARK_LOG_DIR": str(d),
                    "SPARK_DAEMON_MEMORY": "256m", "PYSPARK_PYTHON": sys.executable}

        self.daemons = []
        try:
            master = Proc("Spark master", [spark_class, "org.apache.spark.deploy.master.Master",
                                           "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
                          r"Starting Spark master at (spark://\S+)", env=env("127.0.0.1", "master"),
                          timeout=90)
            self.daemons.append(master)
            self.url = master.match.group(1)
            for i, ip in enumerate(hosts):
                self.daemons.append(Proc(
                    f"Spark worker {ip}", [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", ip,
                                           "--cores", "1", "--memory", worker_memory, "--webui-port", "0",
                                           self.url],
                    r"Successfully registered with master", env=env(ip, f"worker-{i}"), timeout=90))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for d in reversed(self.daemons):
            d.stop()
        self.daemons = []
        self.dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

