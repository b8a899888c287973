"""Reduce tasks run where their partitions live (issue 13, part 4), on a real Spark
standalone cluster whose two workers are two hosts: 127.0.0.2 and 127.0.0.3, each with a
Spark worker (one 1-core executor) and a Crossdock worker. Every 127.x address is this
machine's loopback, so no root and no namespaces are needed, yet Spark's scheduler and
Crossdock's placement see two hosts.

Spark is free to run a reduce task anywhere; only the preferred locations that Crossdock's
SQL exchange gives (the host of the partition's worker) make it run on that host. The test
reads back, from Spark's own status store, the host every reduce task ran on and compares it
with the coordinator's placement of the partition it read."""

from __future__ import annotations

import sys
import time
import pathlib

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from harness import (  # noqa: E402
    ProcessCluster,
    SparkStandalone,
    crossdock_conf,
    spark_session,
    suite_java_options,
)

HOSTS = ["127.0.0.2", "127.0.0.3"]


@pytest.fixture(scope="module")
def hosts():
    with ProcessCluster(workers=2, worker_hosts=HOSTS) as crossdock, SparkStandalone(HOSTS) as spark:
        yield crossdock, spark


def _conf(crossdock, spark, **extra) -> dict[str, str]:
    return {
        **crossdock_conf(crossdock.address),
        "spark.master": spark.url,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.crossdock.route": "crossdock",
        # Long enough that a task waits for its host's core on a loaded machine, so the
        # test sees the preference and never a timing accident.
        "spark.locality.wait": "30s",
        # The suite's JVM options (C1 only, the class-data archives), as harness.base_conf
        # sets them (conftest.py).
        **{f"spark.{kind}.extraJavaOptions": o for kind in ("driver", "executor")
           if (o := suite_java_options(kind))},
        **extra,
    }


def test_each_reduce_task_runs_on_its_partitions_host(hosts):
    crossdock, spark = hosts
    # Adaptive execution on, but no coalescing: task i reads exactly partition i.
    conf = _conf(crossdock, spark, **{"spark.sql.adaptive.coalescePartitions.enabled": "false"})
    with spark_session("locality", conf) as session:
        from pyspark.sql import functions as F
        df = session.range(0, 400_000, numPartitions=4).withColumn("k", F.col("id") % 997)
        out = df.repartition(8, "k").select(F.spark_partition_id().alias("p"), "k").groupBy("p").agg(
            F.count("*").alias("n"), F.sum("k").alias("s")).collect()
        assert sum(r["n"] for r in out) == 400_000
        manager = session._jvm.org.apache.spark.SparkEnv.get().shuffleManager()
        assert manager.shufflesThroughCrossdock() >= 1
        placement = manager.currentPlacement(0)
        hosts_of = [placement.hostOf(p) for p in range(placement.numPartitions())]
        assert sorted(set(hosts_of)) == HOSTS, hosts_of
        # The stage that read shuffle 0: the job's second-to-last stage reads it and
        # aggregates; find it as the stage whose 8 tasks ran, by index, where we expect.
        tasks = _reduce_tasks(session.sparkContext, shuffle_partitions=8)
        assert len(tasks) == 8, tasks
        wrong = [(i, host, hosts_of[i]) for i, host, _ in tasks if host != hosts_of[i]]
        assert not wrong, f"reduce tasks ran away from their partitions' hosts: {wrong}"
        assert all(loc in ("NODE_LOCAL", "PROCESS_LOCAL") for _, _, loc in tasks), tasks
        assert manager.placedTasks() >= 8


@pytest.fixture(scope="module")
def rebalancing_hosts(hosts):
    """`hosts`' Spark cluster with Crossdock services of their own whose coordinator re-places
    shuffles once their sizes are predicted (`--rebalance true`)."""
    _, spark = hosts
    with ProcessCluster(workers=2, worker_hosts=HOSTS, rebalance=True) as crossdock:
        yield crossdock, spark


def test_a_partition_re_placed_after_prediction_is_reduced_on_its_new_host(rebalancing_hosts):
    """Half the partitions (the first host's block) get three times the rows: once the
    first maps' commits predict that, the coordinator continues one of them on the other
    host (issue 13's re-placement), the remaining maps push it there, and its reduce task
    runs there, the host holding most of its bytes."""
    crossdock, spark = rebalancing_hosts
    before = crossdock.coordinator.metric("crossdock_coordinator_rebalanced_partitions_total")
    conf = _conf(crossdock, spark, **{"spark.sql.adaptive.coalescePartitions.enabled": "false"})
    with spark_session("re-placed", conf) as session:
        from pyspark.sql import functions as F
        # 20 maps (the prediction comes with the second's commit), each with three copies of
        # the rows whose key's hash puts them in partitions 0 to 3.
        base = session.range(0, 600_000, numPartitions=20).withColumn("k", F.col("id") % 997)
        heavy = F.pmod(F.hash("k"), F.lit(8)) < 4
        df = base.withColumn("copy", F.explode(F.array_repeat(F.lit(1), F.when(heavy, 3).otherwise(1))))
        out = df.repartition(8, "k").select(F.spark_partition_id().alias("p"), "k").groupBy("p").agg(
            F.count("*").alias("n")).collect()
        rows = {r["p"]: r["n"] for r in out}
        assert sum(rows.values()) == base.count() + 2 * base.where(heavy).count()
        moved = crossdock.coordinator.metric("crossdock_coordinator_rebalanced_partitions_total") - before
        assert moved >= 1, "the hot host's block was not re-placed"
        manager = session._jvm.org.apache.spark.SparkEnv.get().shuffleManager()
        # The repartition(8, "k") shuffle: the one of 8 partitions.
        shuffle = next(i for i in range(4) if manager.currentPlacement(i).numPartitions() == 8)
        placement = manager.currentPlacement(shuffle)
        re_placed = [p for p in range(8) if len(placement.slotsOf(p)) > 1
                     and placement.hostOf(p) != placement.addrOf(p).rsplit(":", 1)[0]]
        assert re_placed, [(p, list(placement.slotsOf(p)), placement.hostOf(p)) for p in range(8)]
        tasks = _reduce_tasks(session.sparkContext, shuffle_partitions=8)
        assert len(tasks) == 8, tasks
        wrong = [(i, host, placement.hostOf(i)) for i, host, _ in tasks if host != placement.hostOf(i)]
        assert not wrong, f"reduce tasks ran away from where their partitions' bytes are: {wrong}"


def _read_tasks(sc) -> list[dict]:
    """Every successful task of the session's jobs that read shuffled records, from Spark's
    status store: its stage, the stage's task count, its index, host and locality, and its
    local and remote bytes read. The store is filled by Spark's listener bus, so the last
    job's tasks may land a moment after an action returns: it is read until two readings
    agree."""
    tracker = sc.statusTracker()
    store = sc._jsc.sc().statusStore()
    seen: list[dict] = []
    for _ in range(50):
        stages = sorted({s for j in tracker.getJobIdsForGroup() for s in tracker.getJobInfo(j).stageIds})
        now = []
        for stage in stages:
            seq = store.taskList(stage, 0, 10_000)
            tasks = [seq.apply(i) for i in range(seq.size())]
            for t in tasks:
                if t.status() != "SUCCESS" or t.taskMetrics().isEmpty():
                    continue
                read = t.taskMetrics().get().shuffleReadMetrics()
                if read.recordsRead() > 0:
                    now.append({"stage": stage, "stage_tasks": len(tasks), "index": t.index(),
                                "host": t.host(), "locality": t.taskLocality(),
                                "local": read.localBytesRead(), "remote": read.remoteBytesRead()})
        if now and now == seen:
            return now
        seen = now
        time.sleep(0.2)
    return seen


def _sampling_tasks(sc) -> list[tuple[int, int, int]]:
    """(stage, rows kept, shuffle bytes written) of every successful task that added to the
    range sample's accumulator ("crossdock range sample rows"), from Spark's status store,
    read until two readings agree (as `_read_tasks`)."""
    tracker = sc.statusTracker()
    store = sc._jsc.sc().statusStore()
    seen: list[tuple[int, int, int]] = []
    for _ in range(50):
        now = []
        for stage in sorted({s for j in tracker.getJobIdsForGroup() for s in tracker.getJobInfo(j).stageIds}):
            seq = store.taskList(stage, 0, 10_000)
            for t in (seq.apply(i) for i in range(seq.size())):
                if t.status() != "SUCCESS" or t.taskMetrics().isEmpty():
                    continue
                updates = t.accumulatorUpdates()
                for a in (updates.apply(i) for i in range(updates.size())):
                    if a.name() == "crossdock range sample rows":
                        wrote = t.taskMetrics().get().shuffleWriteMetrics().bytesWritten()
                        now.append((stage, int(a.update().get()), wrote))
        if now and now == seen:
            return now
        seen = now
        time.sleep(0.2)
    return seen


def _reduce_tasks(sc, shuffle_partitions: int) -> list[tuple[int, str, str]]:
    """(index, host, locality) of the tasks of the stage whose `shuffle_partitions` tasks
    all read shuffled records."""
    by_stage: dict[int, list[dict]] = {}
    for t in _read_tasks(sc):
        by_stage.setdefault(t["stage"], []).append(t)
    for tasks in by_stage.values():
        if len(tasks) == shuffle_partitions == tasks[0]["stage_tasks"]:
            return [(t["index"], t["host"], t["locality"]) for t in tasks]
    return []


def _join_count(session) -> int:
    from pyspark.sql import functions as F
    left = session.range(0, 200_000, numPartitions=4).withColumn("k", F.col("id") % 1000)
    right = session.range(0, 50_000, numPartitions=4).withColumn("k", F.col("id") % 1000)
    return left.join(right.withColumnRenamed("id", "rid"), "k").count()


# A join small enough that adaptive execution coalesces each side's 8 partitions into one
# task (sizes first, not parallelism), reading both hosts' blocks; a broadcast is ruled out.
# Every property is set: a session started after another in one process keeps the SQL
# properties the earlier one set (the first test turns coalescing off).
_COALESCING = {
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}


def test_a_coalesced_read_is_cut_at_the_hosts_boundary(hosts):
    """AQE would read the join's 8 partitions in one task, half of them from the other host;
    Crossdock cuts the range where the host changes, so each piece runs where it lives and no
    reduce task reads a byte across hosts."""
    crossdock, spark = hosts
    with spark_session("split-reads", _conf(crossdock, spark, **_COALESCING)) as session:
        assert _join_count(session) == 1000 * 200 * 50
        tasks = _read_tasks(session.sparkContext)
        remote = [t for t in tasks if t["remote"] > 0]
        assert not remote, f"reduce tasks read across hosts: {remote} (all: {tasks})"
        assert sum(t["local"] for t in tasks) > 0, tasks
        # The join's stage ran one task per host, where Spark alone would run one in all.
        by_stage: dict[int, list[str]] = {}
        for t in tasks:
            by_stage.setdefault(t["stage"], []).append(t["host"])
        assert any(sorted(h) == HOSTS for h in by_stage.values()), by_stage


def test_an_unplaced_coalesced_read_crosses_hosts(hosts):
    """The control for the test above: with placement off the same join reads remote bytes,
    so "no remote bytes" there is the placement's doing, not the test's blindness."""
    crossdock, spark = hosts
    conf = _conf(crossdock, spark, **{**_COALESCING, "spark.crossdock.locality": "false"})
    with spark_session("unsplit-reads", conf) as session:
        assert _join_count(session) == 1000 * 200 * 50
        tasks = _read_tasks(session.sparkContext)
        assert sum(t["remote"] for t in tasks) > 0, tasks


def test_without_placement_spark_chooses_by_map_output(hosts):
    """With `spark.crossdock.locality` off the exchange is Spark's own: nothing is placed."""
    crossdock, spark = hosts
    conf = _conf(crossdock, spark, **{"spark.crossdock.locality": "false",
                                      "spark.sql.adaptive.coalescePartitions.enabled": "false"})
    with spark_session("no-locality", conf) as session:
        df = session.range(0, 100_000, numPartitions=4)
        assert df.repartition(8, "id").count() == 100_000
        manager = session._jvm.org.apache.spark.SparkEnv.get().shuffleManager()
        assert manager.placedTasks() == 0
        plan = df.repartition(8, "id")._jdf.queryExecution().executedPlan().toString()
        assert "Crossdock placed" not in plan


def test_without_adaptive_execution_reduce_tasks_still_run_on_their_hosts(hosts):
    """Placement does not depend on adaptive execution: without it the exchange sits under
    other nodes when Crossdock's rule replaces it (with it, each exchange is the root of a
    query stage). It once stayed Spark's own there, because Spark keeps a child that equals
    the new one and a placed exchange compared equal to Spark's."""
    crossdock, spark = hosts
    conf = _conf(crossdock, spark, **{"spark.sql.adaptive.enabled": "false",
                                      "spark.sql.shuffle.partitions": "8"})
    with spark_session("locality-no-aqe", conf) as session:
        from pyspark.sql import functions as F
        df = session.range(0, 400_000, numPartitions=4).withColumn("k", F.col("id") % 997)
        query = df.repartition(8, "k").select(F.spark_partition_id().alias("p"), "k").groupBy("p").agg(
            F.count("*").alias("n"))
        assert sum(r["n"] for r in query.collect()) == 400_000
        assert "Crossdock placed" in query._jdf.queryExecution().executedPlan().toString()
        manager = session._jvm.org.apache.spark.SparkEnv.get().shuffleManager()
        placement = manager.currentPlacement(0)
        hosts_of = [placement.hostOf(p) for p in range(placement.numPartitions())]
        tasks = _reduce_tasks(session.sparkContext, shuffle_partitions=8)
        assert len(tasks) == 8, tasks
        wrong = [(i, host, hosts_of[i]) for i, host, _ in tasks if host != hosts_of[i]]
        assert not wrong, f"reduce tasks ran away from their partitions' hosts: {wrong}"


def test_a_range_sort_registers_with_a_sample_and_is_predicted_from_it(hosts):
    """A sort of input already ordered by key: its first maps to commit hold only the lowest
    ranges, so extrapolating them predicts the whole shuffle into a few partitions. The
    exchange samples its input while Spark's range partitioner reads it for its bounds, the
    shuffle registers with that sample, and the coordinator's prediction follows it (issue
    13, part 1: range partitioners from a sample)."""
    crossdock, spark = hosts
    coordinator = crossdock.coordinator
    names = ["crossdock_coordinator_sampled_shuffles_total", "crossdock_coordinator_prediction_error_sum",
             "crossdock_coordinator_prediction_error_count"]
    before = [coordinator.metric(n) for n in names]
    conf = _conf(crossdock, spark, **{"spark.sql.adaptive.enabled": "true",
                                      "spark.sql.adaptive.coalescePartitions.enabled": "false",
                                      "spark.sql.shuffle.partitions": "16"})
    with spark_session("range-sample", conf) as session:
        from pyspark.sql import functions as F
        # id * 7, not id: Spark knows a range's ids are sorted and would skip the shuffle.
        df = session.range(0, 160_000, numPartitions=16).select((F.col("id") * 7).alias("k"))
        assert [r["k"] for r in df.sort("k").collect()] == [7 * i for i in range(160_000)]
        # Sampled once, while Spark's partitioner read the input (16 tasks writing no shuffle
        # output), 3 x 16 rows per input partition; the map stage ran without sampling.
        sampling = _sampling_tasks(session.sparkContext)
        assert len(sampling) == 16 and all(wrote == 0 for _, _, wrote in sampling), sampling
        assert len({stage for stage, _, _ in sampling}) == 1, sampling
        assert sum(kept for _, kept, _ in sampling) == 16 * 48, sampling
    sampled, error_sum, scored = (coordinator.metric(n) - b for n, b in zip(names, before))
    assert sampled == 1, "the sort's shuffle registered without a sample"
    assert scored == 1, scored
    # The share std times the partition count, relative to the mean share: extrapolating the
    # first 2 maps' commits (all in 2 of the 16 partitions) would give about 2.6.
    assert error_sum * 16 < 0.6, error_sum * 16
