"""Spark through Crossdock gives exactly the results of Spark's own shuffle.

Every workload of `workloads.py` runs once in a vanilla local-cluster application and
once in one whose shuffles go through a real `crossdock standalone` that splits every
partition past 128 KiB across its workers; the results must be identical. Further tests: two applications at once against one Crossdock, a job against
a cluster that runs with TLS, and a coordinator that cannot be reached.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from harness import SPARK_LINE, Standalone, crossdock_conf  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


RUNNER = os.path.join(os.path.dirname(__file__), "run_workloads.py")


def _run_all(tmp_dir, coordinator=None):
    """Runs every workload in a Spark application of its own process."""
    out = os.path.join(tmp_dir, "crossdock.pickle" if coordinator else "vanilla.pickle")
    cmd = [sys.executable, RUNNER, out] + (["--coordinator", coordinator] if coordinator else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "CROSSDOCK_TEST_TMP": str(tmp_dir)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    with open(out, "rb") as f:
        return pickle.load(f)


@pytest.fixture(scope="module")
def tmp_env(tmp_path_factory):
    return tmp_path_factory.mktemp("spark")


@pytest.fixture(scope="module")
def vanilla(tmp_env):
    return _run_all(tmp_env)


@pytest.fixture(scope="module")
def crossdock_cluster():
    # Partitions split at 128 KiB: every workload's larger partitions are pushed, committed
    # and read across workers (AQE's skew reads, merged sorted runs and joins included).
    with Standalone(workers=2, memory="512MiB", extra_args=("--split-size", "128KiB")) as sa:
        yield sa


@pytest.fixture(scope="module")
def through_crossdock(tmp_env, crossdock_cluster):
    results = _run_all(tmp_env, crossdock_cluster.address)
    assert results["__shuffle_manager__"].endswith("CrossdockShuffleManager"), results["__shuffle_manager__"]
    return results


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_same_result_as_vanilla(name, vanilla, through_crossdock):
    status, expected = vanilla[name]
    assert status == "ok", f"vanilla Spark failed on {name}: {expected}"
    got_status, got = through_crossdock[name]
    assert got_status == "ok", f"{name} failed through Crossdock: {got}"
    assert got == expected


def test_the_shuffles_really_went_through_crossdock(through_crossdock, crossdock_cluster):
    # Spark's own shuffle would leave these at zero.
    assert crossdock_cluster.metric("crossdock_coordinator_registered_shuffles_total") >= len(WORKLOADS)
    assert crossdock_cluster.metric("crossdock_worker_pushed_bytes_total") > 1_000_000
    assert crossdock_cluster.metric("crossdock_worker_fetched_bytes_total") > 1_000_000
    assert crossdock_cluster.metric("crossdock_coordinator_commits_total") > 100
    # And the partitions past the split size went on in splits on the other worker.
    assert crossdock_cluster.metric("crossdock_coordinator_splits_total") > 0


TWO_APPS_JOB = textwrap.dedent("""
    import sys
    sys.path.insert(0, {harness!r})
    from harness import base_conf, crossdock_conf, spark_session
    conf = {{**base_conf(executors=1), **crossdock_conf({coordinator!r})}}
    with spark_session("app-" + sys.argv[1], conf) as spark:
        seed = int(sys.argv[1])
        r = spark.sparkContext.parallelize(range(20000), 4).map(lambda i: ((i * seed) % 101, i)).reduceByKey(lambda a, b: a + b, 5)
        print("RESULT", sorted(r.collect()))
""")


def test_two_apps_at_once(crossdock_cluster, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(TWO_APPS_JOB.format(harness=os.path.dirname(__file__), coordinator=crossdock_cluster.address))
    procs = [subprocess.Popen([sys.executable, str(script), str(seed)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for seed in (3, 7)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for seed, (p, out) in zip((3, 7), zip(procs, outs)):
        assert p.returncode == 0, out
        expected = {}
        for i in range(20000):
            expected[(i * seed) % 101] = expected.get((i * seed) % 101, 0) + i
        line = next(l for l in out.splitlines() if l.startswith("RESULT "))
        assert line == "RESULT " + str(sorted(expected.items()))


TLS_JOB = textwrap.dedent("""
    import sys
    sys.path.insert(0, {harness!r})
    from harness import base_conf, crossdock_conf, spark_session
    conf = {{**base_conf(executors=2), **crossdock_conf({coordinator!r}, {tls_ca!r}),
             "spark.crossdock.route": "crossdock"}}
    with spark_session("over-tls", conf) as spark:
        r = spark.sparkContext.parallelize(range(200000), 4).map(lambda i: (i % 997, i)).reduceByKey(lambda a, b: a + b, 6)
        print("RESULT", sorted(r.collect()))
""")


def test_a_job_over_tls_gives_the_exact_result(tmp_path):
    """Driver and executors reach a cluster that runs with TLS through `spark.crossdock.tls.ca`
    (printed by `crossdock spark-conf --tls-ca`); every shuffle goes through it."""
    with Standalone(workers=2, memory="256MiB", tls=True) as sa:
        script = tmp_path / "tls_job.py"
        script.write_text(TLS_JOB.format(harness=os.path.dirname(__file__), coordinator=sa.address,
                                         tls_ca=sa.tls_ca))
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        expected = {}
        for i in range(200000):
            expected[i % 997] = expected.get(i % 997, 0) + i
        line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
        assert line == "RESULT " + str(sorted(expected.items()))
        assert sa.metric("crossdock_worker_fetched_bytes_total") > 10_000


UNREACHABLE_JOB = textwrap.dedent("""
    import sys
    sys.path.insert(0, {harness!r})
    from harness import base_conf, crossdock_conf, spark_session
    conf = {{**base_conf(executors=1), **crossdock_conf("127.0.0.1:1")}}
    try:
        with spark_session("unreachable", conf) as spark:
            spark.sparkContext.parallelize(range(100), 2).map(lambda i: (i, i)).groupByKey().collect()
    except Exception as e:
        print("FAILED:", " ".join(str(e).split())[:4000])
        sys.exit(3)
    print("SUCCEEDED")
""")


def test_unreachable_coordinator_fails_fast_with_a_clear_message(tmp_path):
    script = tmp_path / "unreachable.py"
    script.write_text(UNREACHABLE_JOB.format(harness=os.path.dirname(__file__)))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - start
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert elapsed < 120, f"took {elapsed:.0f} s to fail"
    out = proc.stdout
    assert "127.0.0.1:1" in out and "spark.crossdock.coordinator" in out, out[-2000:]


DATA_IO_JOB = textwrap.dedent("""
    import sys
    sys.path.insert(0, {harness!r})
    from harness import base_conf, crossdock_conf, spark_session
    conf = {{**base_conf(executors=1), **crossdock_conf({coordinator!r}), "spark.crossdock.route": "crossdock"}}
    if len(sys.argv) > 1:
        conf["spark.shuffle.sort.io.plugin.class"] = sys.argv[1]
    with spark_session("data-io", conf) as spark:
        sc = spark.sparkContext
        print("PLUGIN", sc.getConf().get("spark.shuffle.sort.io.plugin.class", "unset"))
        print("RELIABLE", sc._jsc.sc().shuffleDriverComponents().supportsReliableStorage())
        r = sc.parallelize(range(10000), 3).map(lambda i: (i % 7, i)).reduceByKey(lambda a, b: a + b, 4)
        print("RESULT", sorted(r.collect()))
""")


def _data_io_run(tmp_path, coordinator: str, *plugin: str) -> dict[str, str]:
    script = tmp_path / "data_io.py"
    script.write_text(DATA_IO_JOB.format(harness=os.path.dirname(__file__), coordinator=coordinator))
    proc = subprocess.run([sys.executable, str(script), *plugin], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = dict(l.split(" ", 1) for l in proc.stdout.splitlines() if l.split(" ", 1)[0] in ("PLUGIN", "RELIABLE", "RESULT"))
    expected = {}
    for i in range(10000):
        expected[i % 7] = expected.get(i % 7, 0) + i
    assert out["RESULT"] == str(sorted(expected.items()))
    return out


def test_two_properties_enable_crossdock_and_its_data_io_plugin(crossdock_cluster, tmp_path):
    """`crossdock spark-conf` prints the manager and the coordinator (and the jar); the
    manager installs the shuffle-data-IO plug-in that tells Spark's scheduler the shuffle
    data outlives executors (the executor-loss and dynamic-allocation tests in
    test_failures.py depend on it and get it this way)."""
    conf = crossdock_conf(crossdock_cluster.address)
    # Spark 3.5 needs the jar on the class path and the SQL extension named
    # (`crossdock spark-conf --spark 3.5`).
    jar = ({"spark.driver.extraClassPath", "spark.executor.extraClassPath", "spark.sql.extensions"}
           if SPARK_LINE == "3.5" else {"spark.jars"})
    assert set(conf) == {"spark.shuffle.manager", "spark.crossdock.coordinator"} | jar, conf
    out = _data_io_run(tmp_path, crossdock_cluster.address)
    assert out["PLUGIN"] == "org.apache.spark.shuffle.crossdock.CrossdockShuffleDataIO", out
    assert out["RELIABLE"] == "True", out


def test_a_data_io_plugin_the_application_names_is_kept(crossdock_cluster, tmp_path):
    local = "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO"
    out = _data_io_run(tmp_path, crossdock_cluster.address, local)
    assert out["PLUGIN"] == local, out
    assert out["RELIABLE"] == "False", out
