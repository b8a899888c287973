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
is a hash of the Java runtime and of Spark's jars, so another pyspark (the Spark 3.5 run) or
JDK gets its own pair and a stale pair is never used. It then names the directory in
CROSSDOCK_TEST_JVM_ARCHIVES, which the applications the tests start (in-process or as child
processes) read through `java_options`. An archive the JVM finds unusable is ignored by the
JVM (`-Xshare:auto`): the application starts as it would without it, only slower. The
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


def _key() -> str:
    """What the archives depend on: the Java runtime's build and every jar on Spark's class
    path (names, sizes and times; the JVM itself refuses an archive whose class path
    changed)."""
    import pyspark

    version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    h = hashlib.sha256(version.encode())
    jars = pathlib.Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.iterdir()):
        st = jar.stat()
        h.update(f"{jar.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def ensure() -> pathlib.Path | None:
    """Records this runtime's archives unless they exist, and names them in the environment
    for the applications this process and its children start. Returns their directory, or
    None (with the reason on stderr) when they could not be made: the tests then run
    without them."""
    final = REPO / "target" / "spark-cds" / _key()
    if not all((final / f).is_file() for f in FILES.values()):
        final.parent.mkdir(parents=True, exist_ok=True)
        work = pathlib.Path(tempfile.mkdtemp(prefix="training-", dir=final.parent))
        try:
            run = subprocess.run([sys.executable, __file__, "train", str(work)],
                                 capture_output=True, text=True, timeout=600)
            missing = [f for f in FILES.values() if not (work / f).is_file()]
            if run.returncode != 0 or missing:
                print(f"jvm_archive: no class-data archives (exit {run.returncode}, missing "
                      f"{missing}); the Spark tests run without them:\n{run.stderr[-2000:]}",
                      file=sys.stderr)
                return None
            try:
                work.rename(final)
            except OSError:
                # Another session made them in the meantime: use theirs.
                if not all((final / f).is_file() for f in FILES.values()):
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    os.environ[ENV] = str(final)
    return final


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
    gateway.proc.wait(timeout=300)


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:
        _train(pathlib.Path(sys.argv[2]))
    else:
        print(ensure())
