"""The Spark benchmark on an emulated multi-host cluster: network namespaces on one
machine, joined by veth pairs to a bridge, every link shaped with `tc`.

    sudo .venv/bin/python bench/cluster.py [--hosts 3] [--rate 1gbit] [--delay 0.2ms]
        [--workloads a,b] [--runs 3] [--scale S] [--peer SPEC] [--plot-only FILE]
        [--replication 2] [--slow-worker 1 --slow-rate 100mbit]
    sudo .venv/bin/python bench/cluster.py --cleanup     # remove what a killed run left

Topology (subnet 10.77.0.0/24, every name starts with `cdb-`):

    cdb-ctl  10.77.0.2    Spark standalone master, Crossdock coordinator, the Spark driver
    cdb-h1   10.77.0.11   Spark worker (one 1-core executor per application) + Crossdock worker
    cdb-h2   10.77.0.12   …
    bridge cdb-br0 (10.77.0.1 in the root namespace, used by nothing but a curious user)

Each namespace has one veth pair to the bridge. Both ends of every pair are shaped with
an HTB class at --rate (the host's NIC and its switch port), and the namespace end adds
--delay with netem when the kernel has it, so two hosts are --delay apart one way. Every
byte between two hosts (vanilla Spark's shuffle fetches between executors, Crossdock's
pushes and fetches, the driver's traffic) crosses two shaped links.

`--slow-worker H --slow-rate R` slows one Crossdock worker: the traffic of host H's
worker port (and only it: its Spark executor keeps the full rate) goes through an HTB
class of rate R on both ends of its link.

Spark comes from the pinned pyspark in .venv (SPARK_HOME = the pyspark package), the
Crossdock binary and client jar from `make build`. Vanilla, Crossdock and any --peer
alternate run by run; the driver, report, JSON and plots are bench/spark_bench.py's.
Everything is torn down at the end, on failure and on Ctrl-C or SIGTERM; a run killed
with SIGKILL is cleaned up by the next run or by --cleanup. Needs root (namespaces, tc).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import spark_bench as sb  # noqa: E402

PREFIX = "cdb-"
BRIDGE = "cdb-br0"
CTL = "cdb-ctl"
SUBNET = "10.77.0"
BRIDGE_IP = f"{SUBNET}.1"
CTL_IP = f"{SUBNET}.2"
LOCK = pathlib.Path("/run/lock/crossdock-bench-cluster.lock") if pathlib.Path("/run/lock").is_dir() \
    else pathlib.Path(tempfile.gettempdir()) / "crossdock-bench-cluster.lock"
SPARK_PORT = 7077
COORDINATOR_PORT = 7337
WORKER_PORT = 7338

# The smaller set the emulated cluster runs by default, and its scale.
DEFAULT_WORKLOADS = "df-repartition,df-join,rdd-groupbykey,terasort"
DEFAULT_SCALE = 0.5


def host_ip(i: int) -> str:
    return f"{SUBNET}.{10 + i}"


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {r.stderr.strip()}")
    return r


def _our_namespaces() -> list[str]:
    out = _run("ip", "netns", "list", check=False).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.split() and ln.split()[0].startswith(PREFIX)]


def cleanup(verbose: bool = True) -> bool:
    """Kills every process in a cdb- namespace, deletes the namespaces and the bridge.
    Returns whether anything was there."""
    found = False
    namespaces = _our_namespaces()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [int(p) for ns in namespaces for p in _run("ip", "netns", "pids", ns, check=False).stdout.split()]
        for pid in pids:
            found = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if pathlib.Path(f"/proc/{p}").exists()]
            time.sleep(0.2)
    for ns in namespaces:
        found = True
        _run("ip", "netns", "del", ns, check=False)
    if _run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        found = True
        _run("ip", "link", "del", BRIDGE, check=False)
    if found and verbose:
        print(f"removed the emulated cluster's namespaces ({', '.join(namespaces) or 'none'}), processes and bridge", flush=True)
    return found


class EmulatedCluster:
    """N hosts in network namespaces plus a control namespace, behind shaped links; a Spark
    standalone master and workers kept for the whole suite; Crossdock started per run.
    Also the backend bench/spark_bench.py runs its applications through."""

    kind = "emulated cluster"

    def __init__(self, workdir: pathlib.Path, hosts: int = 3, rate: str = "1gbit", delay: str = "0.2ms",
                 crossdock_memory: str = "1GiB", worker_memory: str = "2g", replication: int = 1,
                 slow_worker: int | None = None, slow_rate: str = "100mbit"):
        if not 1 <= hosts <= 200:
            raise ValueError("--hosts must be 1..200")
        self.workdir = workdir
        self.n = hosts
        self.rate = rate
        self.delay = delay if delay not in ("", "0", "0ms") else None
        self.netem = None  # known after the first link
        self.replication = replication
        if slow_worker is not None and not 1 <= slow_worker <= hosts:
            raise ValueError(f"--slow-worker must be 1..{hosts}")
        self.slow_worker = slow_worker
        self.slow_rate = slow_rate
        self.crossdock_memory = crossdock_memory
        self.worker_memory = worker_memory
        self.hosts = [f"{PREFIX}h{i + 1}" for i in range(hosts)]
        self.nodes = [(CTL, CTL_IP)] + [(ns, host_ip(i + 1)) for i, ns in enumerate(self.hosts)]
        self.spark_home = self._spark_home()
        self.daemons: list[sb.Proc] = []
        self.lock = None

    @staticmethod
    def _spark_home() -> str:
        import pyspark
        home = pathlib.Path(pyspark.__file__).resolve().parent
        if not (home / "bin" / "spark-class").exists():
            raise RuntimeError(f"{home}/bin/spark-class is missing: pyspark is not a full Spark distribution")
        return str(home)

    # -- network --

    def _shape(self, dev: str, netns: str | None, delay: str | None) -> None:
        tc = (["ip", "netns", "exec", netns] if netns else []) + ["tc"]
        _run(*tc, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
        _run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", self.rate,
             "ceil", self.rate, "quantum", "200000")
        if delay and self.netem is not False:
            r = _run(*tc, "qdisc", "add", "dev", dev, "parent", "1:10", "handle", "10:", "netem", "delay", delay,
                     "limit", "100000", check=False)
            if r.returncode == 0:
                self.netem = True
            elif "unknown" in r.stderr.lower() or "no such file" in r.stderr.lower():
                self.netem = False
                print(f"WARNING: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): links are rate-limited to "
                      f"{self.rate} but get no added delay ({delay} asked)", file=sys.stderr, flush=True)
            else:
                raise RuntimeError(f"netem on {dev}: {r.stderr.strip()}")

    def _network_up(self) -> None:
        in_use = _run("ip", "-o", "addr", "show", check=False).stdout
        if f" {SUBNET}." in in_use:
            raise RuntimeError(f"{SUBNET}.0/24 is already in use on this machine:\n"
                               + "\n".join(ln for ln in in_use.splitlines() if f" {SUBNET}." in ln))
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        for ns, ip in self.nodes:
            outer, inner = f"{ns}-br", f"{ns}-eth"
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            _run("ip", "link", "set", inner, "netns", ns)
            _run("ip", "link", "set", outer, "master", BRIDGE)
            _run("ip", "link", "set", outer, "up")
            _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", inner)
            _run("ip", "-n", ns, "link", "set", inner, "up")
            self._shape(outer, None, None)   # switch port -> host
            self._shape(inner, ns, self.delay)  # host -> switch, with the one-way delay
        if self.slow_worker is not None:
            ns = self.hosts[self.slow_worker - 1]
            self._slow_port(f"{ns}-eth", ns, "sport")  # the worker's answers and forwards
            self._slow_port(f"{ns}-br", None, "dport")  # what is sent to the worker

    def _slow_port(self, dev: str, netns: str | None, match: str) -> None:
        """Sends the Crossdock worker port's traffic on `dev` through a class of --slow-rate."""
        tc = (["ip", "netns", "exec", netns] if netns else []) + ["tc"]
        _run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", self.slow_rate,
             "ceil", self.slow_rate, "quantum", "200000")
        _run(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
             "match", "ip", match, str(WORKER_PORT), "0xffff", "flowid", "1:20")

    def counters(self) -> dict[str, int]:
        """Bytes every namespace sent onto the network, and how often a shaper held packets back."""
        sent = over = 0
        for ns, _ in self.nodes:
            link = json.loads(_run("ip", "-n", ns, "-s", "-j", "link", "show", f"{ns}-eth").stdout)
            sent += link[0]["stats64"]["tx"]["bytes"]
            for q in json.loads(_run("ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show", "dev", f"{ns}-eth").stdout):
                over += q.get("overlimits", 0) if q.get("kind") == "htb" else 0
            for q in json.loads(_run("tc", "-s", "-j", "qdisc", "show", "dev", f"{ns}-br").stdout):
                over += q.get("overlimits", 0) if q.get("kind") == "htb" else 0
        return {"net_bytes": sent, "net_overlimits": over}

    # -- Spark standalone --

    def _spark_env(self, node: str, ip: str) -> dict[str, str]:
        d = self.workdir / node
        (d / "local").mkdir(parents=True, exist_ok=True)
        (self.workdir / "spark-conf").mkdir(exist_ok=True)
        return {"SPARK_HOME": self.spark_home, "SPARK_CONF_DIR": str(self.workdir / "spark-conf"),
                "SPARK_LOCAL_IP": ip, "SPARK_LOCAL_DIRS": str(d / "local"), "SPARK_LOG_DIR": str(d),
                "SPARK_WORKER_DIR": str(d / "work"), "SPARK_DAEMON_MEMORY": "512m", "SPARK_PUBLIC_DNS": ip,
                "PYSPARK_PYTHON": sys.executable}

    def _spark_up(self) -> None:
        spark_class = str(pathlib.Path(self.spark_home) / "bin" / "spark-class")
        self.daemons.append(sb.Proc(
            "Spark master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", CTL_IP,
                             "--port", str(SPARK_PORT), "--webui-port", "0"],
            r"I have been elected leader|Starting Spark master at", env=self._spark_env(CTL, CTL_IP), netns=CTL,
            log=self.workdir / "spark-master.log", timeout=90))
        for i, ns in enumerate(self.hosts):
            ip = host_ip(i + 1)
            self.daemons.append(sb.Proc(
                f"Spark worker {ns}", [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", ip,
                                       "--cores", "1", "--memory", self.worker_memory, "--webui-port", "0",
                                       "--work-dir", str(self.workdir / ns / "work"), f"spark://{CTL_IP}:{SPARK_PORT}"],
                r"Successfully registered with master", env=self._spark_env(ns, ip), netns=ns,
                log=self.workdir / f"spark-worker-{ns}.log", timeout=120))

    # -- lifecycle --

    def __enter__(self):
        if os.geteuid() != 0:
            raise SystemExit("bench/cluster.py needs root (network namespaces, veth, tc)")
        self.lock = open(LOCK, "w")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another emulated cluster is running (lock {LOCK})")
        if cleanup(verbose=False):
            print("removed an emulated cluster a killed run had left behind", flush=True)
        try:
            t0 = time.monotonic()
            self._network_up()
            self._spark_up()
            print(f"emulated cluster up in {time.monotonic() - t0:.0f} s: {self.n} hosts ({', '.join(self.hosts)}) and {CTL}, "
                  f"links {self.rate}" + (f", {self.delay} one way" if self.delay and self.netem else ", no added delay"),
                  flush=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for p in reversed(self.daemons):
            with contextlib.suppress(Exception):
                p.stop()
        self.daemons = []
        cleanup(verbose=False)
        left = _our_namespaces()
        print("emulated cluster torn down" + (f" (namespaces left: {left})" if left else ""), flush=True)
        if self.lock:
            self.lock.close()
            self.lock = None

    # -- the backend interface of spark_bench.run_suite --

    def describe(self) -> dict:
        return {"kind": self.kind, "hosts": self.n, "rate": self.rate,
                "delay_one_way": self.delay if self.netem else None,
                "delay_asked": self.delay, "netem": bool(self.netem),
                "spark": f"standalone master in {CTL}, {self.n} workers x 1 core, one executor each (1 GiB heap)",
                "crossdock": f"coordinator in {CTL}, one worker per host with {self.crossdock_memory}, "
                             f"replication {self.replication}, per run",
                "slow_worker": (f"{self.hosts[self.slow_worker - 1]} at {self.slow_rate}"
                                if self.slow_worker is not None else None),
                "driver": f"{CTL} ({CTL_IP})", "goal_wall_ratio": 0.8}

    def spark_conf(self) -> dict[str, str]:
        conf = sb.base_conf(executors=self.n)
        conf.update({"spark.master": f"spark://{CTL_IP}:{SPARK_PORT}", "spark.driver.host": CTL_IP,
                     "spark.driver.bindAddress": CTL_IP, "spark.executor.cores": "1", "spark.cores.max": str(self.n)})
        return conf

    def start_crossdock(self, build: sb.Build, run_dir: pathlib.Path, tls: bool = False,
                        coordinator_args: list[str] | None = None) -> sb.CrossdockService:
        if tls:
            raise SystemExit("the TLS mode runs on one host only (bench/spark_bench.py)")
        procs: list[sb.Proc] = []
        # The cluster secret the coordinator and the workers share (docs/security.md).
        secret_file = run_dir / "crossdock-secret"
        secret_file.write_text(secrets.token_hex(32) + "\n")
        secret_file.chmod(0o600)
        secret = ["--secret-file", str(secret_file)]
        try:
            coord = sb.Proc("crossdock coordinator",
                            [str(build.binary), "coordinator", *secret, "--listen", f"{CTL_IP}:{COORDINATOR_PORT}",
                             "--data-dir", str(run_dir / "crossdock-coordinator"), "--metrics-listen", "off",
                             "--replication", str(self.replication), *(coordinator_args or [])],
                            r"crossdock coordinator listening on (\S+)", env={"CROSSDOCK_LOG": "info"}, netns=CTL,
                            log=run_dir / "crossdock-coordinator.log")
            procs.append(coord)
            workers = []
            for i, ns in enumerate(self.hosts):
                w = sb.Proc(f"crossdock worker {ns}",
                            [str(build.binary), "worker", *secret, "--coordinator", coord.match.group(1),
                             "--listen", f"{host_ip(i + 1)}:{WORKER_PORT}", "--memory", self.crossdock_memory,
                             "--data-dir", str(run_dir / f"crossdock-{ns}"), "--metrics-listen", "off"],
                            r"registered with the coordinator", env={"CROSSDOCK_LOG": "info"}, netns=ns,
                            log=run_dir / f"crossdock-worker-{ns}.log")
                procs.append(w)
                workers.append(w)
            return sb.CrossdockService(coord.match.group(1), workers, [coord])
        except BaseException:
            for p in reversed(procs):
                p.stop()
            raise

    def child_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", CTL]

    def peer_env(self) -> dict[str, str]:
        return {"CROSSDOCK_BENCH_HOSTS": " ".join(host_ip(i + 1) for i in range(self.n)),
                "CROSSDOCK_BENCH_NETNS": " ".join(self.hosts), "CROSSDOCK_BENCH_DRIVER_HOST": CTL_IP,
                "CROSSDOCK_BENCH_CONTROL_NETNS": CTL}

    def check(self) -> None:
        dead = [p.name for p in self.daemons if p.proc.poll() is not None]
        if dead:
            raise RuntimeError(f"emulated cluster: {', '.join(dead)} exited; logs in {self.workdir}")


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sb.add_suite_args(ap, DEFAULT_WORKLOADS, DEFAULT_SCALE)
    ap.add_argument("--hosts", type=int, default=3, help="hosts (network namespaces with a Spark and a Crossdock worker) [3]")
    ap.add_argument("--rate", default="1gbit", help="every link's rate, each direction, in tc's units [1gbit]")
    ap.add_argument("--delay", default="0.2ms", help="one-way delay between two hosts, netem (0 for none) [0.2ms]")
    ap.add_argument("--crossdock-memory", default="1GiB", help="each Crossdock worker's memory budget [1GiB]")
    ap.add_argument("--slow-worker", type=int, default=None, metavar="H",
                    help="slow host H's Crossdock worker (its port's traffic) to --slow-rate")
    ap.add_argument("--slow-rate", default="100mbit", help="the slowed worker's rate [100mbit]")
    ap.add_argument("--cleanup", action="store_true", help="remove what a killed run left (namespaces, processes, bridge) and exit")
    args = ap.parse_args()
    if args.plot_only:
        sb._plots(pathlib.Path(args.plot_only))
        return 0
    if os.geteuid() != 0:
        print("bench/cluster.py needs root (network namespaces, veth, tc)", file=sys.stderr)
        return 2
    if args.cleanup:
        if not cleanup():
            print("nothing to clean up")
        return 0
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    try:
        with sb.work_dir("crossdock-bench-cluster-", args.keep_logs) as workdir, EmulatedCluster(
                workdir, hosts=args.hosts, rate=args.rate, delay=args.delay, crossdock_memory=args.crossdock_memory,
                replication=args.replication, slow_worker=args.slow_worker, slow_rate=args.slow_rate) as cluster:
            return sb.run_suite(args, cluster, workdir, prefix="cluster")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
