"""Class-data-sharing archives for the Spark test suite's JVMs.

Most of a short test job's time is its JVMs starting: a local-cluster application starts a
driver and two executors, each loading and verifying several thousand of Spark's classes
before it does anything, and the suite starts about sixty applications on a 2-core machine.
The JDK can map the classes it loaded once from an archive (CDS, `-XX:SharedArchiveFile`)
instead of loading them again: measured on this machine, a local-cluster application with
C1 only came up in 7.2-7.8 s instead of 13.5-14.9 s, and ran its first jobs in 7.0-7.7 s
instead of 10.9-12.5 s.

`ensure()` (called once per test session by conftest.py) records the archives with one small
training application, a driver's and an executor's, in `target/spark-cds/KEY`, where KEY
is a hash of the Java runtime and of Spark's jars, so another JDK or pyspark gets its own
pair and a stale pair is never used; making a new pair removes the other keys' pairs
(about 230 MB each: a runtime or pyspark that changed leaves its old pair unused) and any
training directory a killed run left over an hour ago. It then names the directory
in CROSSDOCK_TEST_JVM_ARCHIVES, which the applications the tests start through
`harness.base_conf` (in-process or as child processes) read through `java_options`. An
archive the JVM finds unusable is ignored by the JVM (`-Xshare:auto`): the application
starts as it would without it, only slower; and no failure to make them fails a test. The
Spark 3.5 run makes none (see `ensure`). The
benchmarks and the demo never set the variable: they measure the JVMs Spark users run.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ENV = "CROSSDOCK_TEST_JVM_ARCHIVES"
REPO = pathlib.Path(__file__).resolve().parents[2]
FILES = {"driver": "driver.jsa", "executor": "executor.jsa"}


def java_options(kind: str) -> str:
    """The JVM option that maps `kind`'s ("driver" or "executor") archive, or "" when this
    process was not given archives."""
    directory = os.environ.get(ENV)
    if not directory:
        return ""
    path = pathlib.Path(directory, FILES[kind])
    return f"-XX:SharedArchiveFile={path}" if path.is_file() else ""


def _java() -> str:
    """The `java` Spark's launcher runs: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else "java"


def _key() -> str:
    """What the archives depend on: the Java runtime (its version, and the JVM library and
    base archive the JVM checks a dynamic archive against) and every jar on Spark's class
    path (names, sizes and times; the JVM itself refuses an archive whose class path
    changed)."""
    import pyspark

    java = subprocess.run([_java(), "-XshowSettings:properties", "-version"],
                          capture_output=True, text=True, timeout=60).stderr
    h = hashlib.sha256(java.encode())
    home = next((line.split("=", 1)[1].strip() for line in java.splitlines()
                 if line.strip().startswith("java.home =")), None)
    runtime = [pathlib.Path(home, "lib", "server", f) for f in ("libjvm.so", "classes.jsa")] if home else []
    jars = pathlib.Path(pyspark.__file__).parent / "jars"
    for f in [*runtime, *sorted(jars.iterdir())]:
        st = f.stat() if f.exists() else None
        h.update(f"{f}\0{st and st.st_size}\0{st and st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def ensure() -> pathlib.Path | None:
    """Records this runtime's archives unless they exist, and names them in the environment
    for the applications this process and its children start. Returns their directory, or
    None (with the reason on stderr) when there are none: the tests then run without them,
    only slower. Never raises."""
    import pyspark

    if pyspark.__version__.startswith("3."):
        # Spark 3.5 puts the client jar first on the JVMs' class path (extraClassPath), and
        # the JVM takes a dynamic archive only where the class path it was recorded with
        # starts the one it runs with; the jar is rebuilt by every test run, so an archive
        # recorded with it would be stale each time. Without archives there.
        return None
    try:
        final = _make()
    except Exception as e:  # noqa: BLE001 - the archives only save time
        print(f"jvm_archive: no class-data archives ({e!r}); the Spark tests run without them",
              file=sys.stderr)
        return None
    if final is not None:
        os.environ[ENV] = str(final)
    return final


def _whole(directory: pathlib.Path) -> bool:
    return all((directory / f).is_file() for f in FILES.values())


def _make() -> pathlib.Path | None:
    final = REPO / "target" / "spark-cds" / _key()
    if _whole(final):
        return final
    # Half of a pair (a file deleted by hand): made again.
    shutil.rmtree(final, ignore_errors=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="training-", dir=final.parent))
    try:
        env = {k: v for k, v in os.environ.items() if k != ENV}
        run = subprocess.run([sys.executable, __file__, "train", str(work)], env=env,
                             capture_output=True, text=True, timeout=300)
        missing = [f for f in FILES.values() if not (work / f).is_file()]
        if run.returncode != 0 or missing:
            print(f"jvm_archive: no class-data archives (training exit {run.returncode}, missing "
                  f"{missing}); the Spark tests run without them:\n{run.stderr[-2000:]}",
                  file=sys.stderr)
            return None
        work.chmod(0o755)
        try:
            work.rename(final)
        except OSError:
            # Another session made them in the meantime: use theirs.
            if not _whole(final):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _prune(final)
    return final


def _prune(keep: pathlib.Path) -> None:
    """Removes the pairs of other keys beside `keep` (a JVM that mapped one keeps reading it;
    one started later runs without it) and training directories over an hour old (a session
    still training has touched its own within minutes)."""
    for d in keep.parent.iterdir():
        try:
            if d == keep or not d.is_dir():
                continue
            if d.name.startswith("training-") and time.time() - d.stat().st_mtime < 3600:
                continue
            shutil.rmtree(d, ignore_errors=True)
        except OSError:
            # Renamed or removed by another session meanwhile: nothing to prune.
            continue


def _train(out: pathlib.Path) -> None:
    """A local-cluster application with one executor (so one JVM writes its archive) that
    runs the kinds of work the tests run: RDD shuffles (hash, sorted, joined, grouped) and
    SQL (aggregation, ordering, a join, AQE). Each JVM writes what it loaded when it exits."""
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from harness import base_conf, spark_session

    conf = base_conf(executors=1)
    conf["spark.executor.extraJavaOptions"] += f" -XX:ArchiveClassesAtExit={out / FILES['executor']}"
    conf["spark.driver.extraJavaOptions"] = (conf.get("spark.driver.extraJavaOptions", "") +
                                             f" -XX:ArchiveClassesAtExit={out / FILES['driver']}")
    with spark_session("crossdock-cds-training", conf) as spark:
        sc = spark.sparkContext
        pairs = sc.parallelize(range(20_000), 4).map(lambda x: (x % 97, x))
        pairs.reduceByKey(lambda a, b: a + b).collect()
        pairs.groupByKey().mapValues(len).collect()
        pairs.sortByKey().count()
        pairs.join(pairs.mapValues(str)).count()
        df = spark.range(0, 50_000).selectExpr("id % 101 AS k", "id AS v")
        df.groupBy("k").count().collect()
        df.orderBy("v").limit(3).collect()
        df.join(df.groupBy("k").sum("v"), "k").count()
        df.repartition(8, "k").selectExpr("sum(v)").collect()
        gateway = sc._gateway
    # The driver JVM writes its archive as it exits, which it does when its stdin closes
    # (pyspark's gateway); wait for it, so the archive is whole when this process ends.
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=120)
    # The executor writes its archive as it exits too, stopped by the local-cluster worker
    # in the driver: wait until no JVM is still writing into `out`.
    deadline = time.monotonic() + 120
    while _writers(out):
        if time.monotonic() > deadline:
            raise SystemExit(f"a JVM is still writing its archive into {out}")
        time.sleep(0.2)


def _writers(out: pathlib.Path) -> list[int]:
    """The processes whose command line names `out` (the training's JVMs until they exit)."""
    pids = []
    for d in pathlib.Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if str(out).encode() in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:
        _train(pathlib.Path(sys.argv[2]))
    else:
        print(ensure())
