"""Failures during real Spark jobs: Crossdock workers killed with SIGKILL during the map
stage and after it, with one copy of each partition and with two. Every run must give
exactly the clean answer; the tests also pin down how many map tasks had to be rerun.

Each scenario is one Spark application (local-cluster, 2 executors) against a
coordinator and three workers, each a separate `crossdock` process.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import NamespacedCluster, ProcessCluster  # noqa: E402

JOB = pathlib.Path(__file__).with_name("failure_job.py")
MAPS = 8
REPORTS: dict[str, dict] = {}


def drive_job(coordinator: str | None, block: str, ready, inject, what: str,
              must_succeed: bool = True, mixed: bool = False, sorted_job: bool = False) -> dict:
    """Runs failure_job.py with `block` tasks held back; once `ready(gate)` is true,
    calls `inject(gate)` (the fault), lets the held tasks go on, and returns the job's
    report. `what` names the wait in a timeout message. Unless `must_succeed`, a failed
    job returns {"failed": True, "stderr": ...} instead of failing the test."""
    with tempfile.TemporaryDirectory() as gate:
        out = os.path.join(gate, "report.json")
        cmd = [sys.executable, str(JOB), out, gate, "--block", block]
        if coordinator:
            cmd += ["--coordinator", coordinator]
        if mixed:
            cmd.append("--mixed")
        if sorted_job:
            cmd.append("--sorted")
        job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 240
            while not ready(gate):
                assert job.poll() is None, f"job ended early: {job.stderr.read()[-3000:]}"
                assert time.monotonic() < deadline, f"{what} did not happen in time"
                time.sleep(0.1)
            inject(gate)
            pathlib.Path(gate, "go").touch()
            _, err = job.communicate(timeout=300)
        finally:
            if job.poll() is None:
                job.kill()
        if job.returncode != 0 and not must_succeed:
            return {"failed": True, "stderr": err}
        assert job.returncode == 0, f"job failed:\n{err[-5000:]}"
        with open(out) as f:
            return {"failed": False, **json.load(f)}


def commits(cluster) -> float:
    return cluster.coordinator.metric("crossdock_coordinator_commits_total")


def object_store_url() -> str:
    """The S3 server the test scripts started (a prefix of this run's own), or, when
    none was started and none is required, a directory store."""
    url = os.environ.get("CROSSDOCK_TEST_S3")
    if url is None:
        assert not os.environ.get("CROSSDOCK_REQUIRE_S3"), "CROSSDOCK_TEST_S3 is not set"
        return "file://" + tempfile.mkdtemp(prefix="crossdock-store-")
    base, _, query = url.partition("?")
    return f"{base}/spark-{os.getpid()}-{time.time_ns()}?{query}"


def run_with_fault(replication: int, block: str, commits_before_kill: int,
                   fault: str = "kill-worker", durability: str = "memory",
                   object_store: str | None = None, sorted_job: bool = False) -> dict:
    """Runs the job; once `commits_before_kill` maps committed, injects the fault on the
    worker holding the most partitions (kill it, restart it, corrupt or delete its files) or
    restarts the coordinator, then lets the blocked tasks go on."""
    # A restarted worker must register again before the coordinator's deadline, or its
    # partitions count as lost: the debug build's start on a loaded CI machine can take
    # seconds, so that case gets a longer deadline than the others' 4 s.
    timeout = "10s" if fault == "restart-worker" else "4s"
    with ProcessCluster(workers=3, replication=replication, durability=durability,
                        object_store=object_store, worker_timeout=timeout) as cluster:
        seen = {}

        def inject(_gate):
            seen["commits"] = commits(cluster)
            busiest = max(range(len(cluster.workers)),
                          key=lambda i: cluster.workers[i].metric("crossdock_worker_partitions"))
            if fault == "kill-worker":
                cluster.workers[busiest].kill()
            elif fault == "restart-worker":
                cluster.restart_worker(busiest)
            elif fault == "delete-files":
                # Delete every partition file of one worker under it (it keeps running).
                files = sorted(pathlib.Path(cluster.dir.name, f"worker-{busiest}").rglob("*.data"))
                assert files, "durability disk: the committed data is on disk"
                for f in files:
                    f.unlink()
            elif fault == "corrupt-file":
                # Flip a payload byte of every partition file of one worker.
                files = sorted(pathlib.Path(cluster.dir.name, f"worker-{busiest}").rglob("*.data"))
                assert files, "durability disk: the committed data is on disk"
                for f in files:
                    raw = bytearray(f.read_bytes())
                    raw[-5] ^= 0xFF
                    f.write_bytes(bytes(raw))
            else:
                cluster.restart_coordinator()

        report = drive_job(cluster.address, block,
                           lambda _gate: commits(cluster) >= commits_before_kill, inject,
                           f"{commits_before_kill} commits", sorted_job=sorted_job)
        report["commits_before_fault"] = seen["commits"]
        report["lost_partitions"] = cluster.coordinator.metric("crossdock_coordinator_lost_partitions_total")
        report["revoked_maps"] = cluster.coordinator.metric("crossdock_coordinator_revoked_maps_total")
        report["adopted_partitions"] = cluster.coordinator.metric(
            "crossdock_coordinator_adopted_partitions_total")
        return report


def executor_pids(app_id: str) -> list[int]:
    """The executor JVMs of a Spark application (local-cluster runs them as processes)."""
    pids = []
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app_id.encode() in cmd:
            pids.append(int(d.name))
    return sorted(pids)


def run_executor_kill(coordinator: str | None, mixed: bool = False) -> dict:
    """Runs the job with its reducers held back, SIGKILLs one executor once a reducer
    started (the map stage is complete), then lets the reducers go on."""
    def kill_an_executor(gate):
        app_id = pathlib.Path(gate, "app_id").read_text()
        pids = executor_pids(app_id)
        assert len(pids) == 2, f"expected 2 executors of {app_id}, found {pids}"
        os.kill(pids[0], 9)
        time.sleep(1)

    return drive_job(coordinator, "reducers",
                     lambda gate: any(n.startswith("reducer-started") for n in os.listdir(gate)),
                     kill_an_executor, "a reducer start", mixed=mixed)


def show(name: str, r: dict) -> None:
    REPORTS[name] = r
    print(f"\n{name}: {json.dumps(r)}")


def test_worker_killed_during_map_stage_with_one_copy():
    r = run_with_fault(replication=1, block="maps", commits_before_kill=MAPS // 2)
    show("kill during maps, replication 1", r)
    assert r["equal"], r
    assert r["lost_partitions"] >= 1, "the victim held partitions"


def test_worker_killed_during_map_stage_with_two_copies_recomputes_no_committed_map():
    r = run_with_fault(replication=2, block="maps", commits_before_kill=MAPS // 2)
    show("kill during maps, replication 2", r)
    assert r["equal"], r
    assert r["lost_partitions"] == 0 and r["revoked_maps"] == 0, r
    assert r["map_stage_attempts"] == 1, "no fetch failure, no stage rerun"


def test_worker_killed_after_map_stage_with_one_copy_reruns_the_lost_maps():
    r = run_with_fault(replication=1, block="reducers", commits_before_kill=MAPS)
    show("kill after maps, replication 1", r)
    assert r["equal"], r
    assert r["revoked_maps"] >= 1, r
    assert r["map_tasks_recomputed"] >= 1, "lost outputs were recomputed"


def test_worker_killed_after_map_stage_with_two_copies_recomputes_nothing():
    r = run_with_fault(replication=2, block="reducers", commits_before_kill=MAPS)
    show("kill after maps, replication 2", r)
    assert r["equal"], r
    assert r["map_tasks_recomputed"] == 0, r
    assert r["map_stage_attempts"] == 1, r


# Long: the sorted shuffle's failover is also run by the kill before its merge, and a kill
# during the map stage with two copies by the unsorted test.
@pytest.mark.long
def test_sorted_shuffle_with_a_worker_killed_during_its_map_stage_and_two_copies_is_exact():
    # The maps push sorted runs to two copies; half of them commit, a worker dies, the rest
    # push to the survivors; the reducers merge the runs, in key order, every record once.
    r = run_with_fault(replication=2, block="maps", commits_before_kill=MAPS // 2, sorted_job=True)
    show("sorted shuffle, kill during maps, replication 2", r)
    assert r["equal"], r
    assert r["merged_runs"] >= MAPS * 4, "every reducer merged a run of every map"
    assert r["lost_partitions"] == 0 and r["revoked_maps"] == 0, r
    assert r["map_stage_attempts"] == 1, r


def test_sorted_shuffle_with_a_worker_killed_before_its_merge_and_two_copies_recomputes_nothing():
    # Every reducer's runs on the dead worker are read from their other copy.
    r = run_with_fault(replication=2, block="reducers", commits_before_kill=MAPS, sorted_job=True)
    show("sorted shuffle, kill before the merge, replication 2", r)
    assert r["equal"], r
    assert r["merged_runs"] >= MAPS * 4, "every reducer merged a run of every map"
    assert r["map_tasks_recomputed"] == 0 and r["map_stage_attempts"] == 1, r


# Long: reads from the object store after a loss are also run by the full disk's eviction
# test, and by the Rust object-tier tests.
@pytest.mark.long
def test_worker_killed_after_map_stage_with_one_copy_in_the_object_store_recomputes_nothing():
    r = run_with_fault(replication=1, block="reducers", commits_before_kill=MAPS,
                       durability="object-store", object_store=object_store_url())
    show("kill after maps, replication 1, durability object-store (S3)", r)
    assert r["equal"], r
    assert r["lost_partitions"] >= 1 and r["adopted_partitions"] == r["lost_partitions"], r
    assert r["revoked_maps"] == 0 and r["map_tasks_recomputed"] == 0, r
    assert r["map_stage_attempts"] == 1, r


def test_worker_restarted_on_its_disk_after_map_stage_recomputes_nothing():
    r = run_with_fault(replication=1, block="reducers", commits_before_kill=MAPS,
                       fault="restart-worker", durability="disk")
    show("worker SIGKILLed and restarted after maps, durability disk", r)
    assert r["equal"], r
    assert r["revoked_maps"] == 0 and r["lost_partitions"] == 0, r
    assert r["map_tasks_recomputed"] == 0, r


def test_corrupt_partition_files_are_caught_and_the_replicas_read():
    r = run_with_fault(replication=2, block="reducers", commits_before_kill=MAPS,
                       fault="corrupt-file", durability="disk")
    show("partition files corrupted on one worker, replication 2", r)
    assert r["equal"], r
    assert r["map_tasks_recomputed"] == 0, r


# Long: lost data without a replica is recomputed also in the deleted files' test.
@pytest.mark.long
def test_corrupt_partition_files_without_a_replica_are_recomputed():
    r = run_with_fault(replication=1, block="reducers", commits_before_kill=MAPS,
                       fault="corrupt-file", durability="disk")
    show("partition files corrupted on one worker, replication 1", r)
    assert r["equal"], r
    assert r["map_tasks_recomputed"] >= 1, r


def test_deleted_partition_files_are_reported_and_their_maps_recomputed():
    r = run_with_fault(replication=1, block="reducers", commits_before_kill=MAPS,
                       fault="delete-files", durability="disk")
    show("partition files deleted under a running worker, replication 1", r)
    assert r["equal"], r
    # The worker reported its copies as lost, so the coordinator revoked the maps that
    # wrote into them and Spark reran those maps (not a stage retried on the same files).
    assert r["revoked_maps"] >= 1 and r["map_tasks_recomputed"] >= 1, r


def run_on_a_small_disk(size: str, durability: str,
                        object_store: str | None = None) -> tuple[dict, float]:
    """Runs the job with worker 0's data directory on a tmpfs of `size`, less than its
    share of the shuffle (about 17 KB a partition, one or two partitions a worker).
    Returns the report and worker 0's evicted bytes."""
    with ProcessCluster(workers=3, durability=durability, object_store=object_store,
                        small_disk=(0, size)) as cluster:
        r = drive_job(cluster.address, "none", lambda _gate: True, lambda _gate: None,
                      "the start", must_succeed=False)
        return r, cluster.workers[0].metric("crossdock_worker_evicted_bytes_total")


def test_a_full_disk_fails_the_job_with_a_precise_message():
    r, _ = run_on_a_small_disk("8k", "disk")
    assert r["failed"], "the commits to the full disk cannot succeed"
    tail = r["stderr"][-20000:]
    assert "disk full: this worker cannot write to" in tail, tail[-3000:]
    show("a worker's disk fills up, durability disk", {"failed": True})


def test_a_full_disk_with_an_object_store_evicts_and_the_job_succeeds():
    # 16 KiB: shuffle.meta takes a page, each flush of a partition at most two.
    r, evicted = run_on_a_small_disk("16k", "object-store", object_store_url())
    assert not r["failed"], r.get("stderr", "")[-5000:]
    show("a worker's disk fills up, durability object-store", {**r, "evicted_bytes": evicted})
    assert r["equal"], r
    assert evicted > 0, "room was made by evicting uploaded files"


def test_coordinator_restarted_in_the_middle_of_the_map_stage():
    r = run_with_fault(replication=1, block="maps", commits_before_kill=MAPS // 2,
                       fault="restart-coordinator")
    show("coordinator restart during maps", r)
    assert r["equal"], r
    assert r["map_tasks_recomputed"] == 0, r
    assert r["map_stage_attempts"] == 1, r


def test_coordinator_restarted_before_the_reducers_read():
    r = run_with_fault(replication=2, block="reducers", commits_before_kill=MAPS,
                       fault="restart-coordinator")
    show("coordinator restart after maps", r)
    assert r["equal"], r
    assert r["map_tasks_recomputed"] == 0, r


def test_executor_killed_during_reduce_stage_recomputes_no_map():
    with ProcessCluster(workers=2, replication=1) as cluster:
        crossdock = run_executor_kill(cluster.address)
    vanilla = run_executor_kill(None)
    show("executor killed during reduce, crossdock", crossdock)
    show("executor killed during reduce, vanilla", vanilla)
    assert crossdock["equal"] and vanilla["equal"], (crossdock, vanilla)
    assert crossdock["map_tasks_recomputed"] == 0, crossdock
    assert crossdock["map_stage_attempts"] == 1, crossdock
    # The contrast: vanilla Spark lost the map outputs the killed executor held (both
    # executors ran maps) and ran those maps again.
    assert vanilla["map_tasks_recomputed"] >= 1, vanilla


def test_executor_killed_with_a_routed_and_a_crossdock_shuffle_in_one_job():
    """The first shuffle (a small file) goes through Spark's own shuffle, the second
    through Crossdock; an executor dies while the routed shuffle is being read. Its routed
    map outputs are gone with it: the reducers' fetch failures make Spark recompute them,
    and the answer is exact."""
    with ProcessCluster(workers=2, replication=1) as cluster:
        r = run_executor_kill(cluster.address, mixed=True)
        committed = commits(cluster)
    show("executor killed, routed + crossdock shuffles", r)
    assert r["equal"], r
    assert r["routes"] == {"spark": 1, "crossdock": 1}, r
    assert committed >= 6, "the second shuffle's maps committed to Crossdock"


def test_dynamic_allocation_releases_executors_that_wrote_shuffle_data():
    with ProcessCluster(workers=2, replication=1) as cluster, \
            tempfile.TemporaryDirectory() as gate:
        out = os.path.join(gate, "report.json")
        job = subprocess.run([sys.executable, str(JOB), out, gate, "--coordinator",
                              cluster.address, "--dynamic"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             timeout=300)
        assert job.returncode == 0, f"job failed:\n{job.stderr[-5000:]}"
        with open(out) as f:
            r = json.load(f)
    show("dynamic allocation, executors released between jobs", r)
    assert r["equal"], r
    assert r["executors_released"], "every executor was released while idle"
    assert r["map_tasks_recomputed"] == 0, "the second read found the map outputs"


def test_worker_cut_off_the_network_after_map_stage_with_two_copies():
    """Workers in network namespaces; one is cut off (its link goes down, its process
    keeps running) after the map stage. Reducers fall back to the replicas."""
    with NamespacedCluster(workers=3, replication=2) as cluster:
        r = drive_job(cluster.address, "reducers", lambda _gate: commits(cluster) >= MAPS,
                      lambda _gate: cluster.cut(1), f"{MAPS} commits")
        lost = cluster.coordinator.metric("crossdock_coordinator_workers_lost")
    show("worker cut off the network after maps, replication 2", r)
    assert r["equal"], r
    assert r["map_tasks_recomputed"] == 0, r
    assert lost == 1, "the cut-off worker was found out"
