"""Crossdock's figures in the Spark UI and the event log.

One application (UI on, event log on) runs an RDD shuffle and a SQL aggregation through a
real `crossdock standalone`. Its stage pages (through the UI's REST API, which is what the
pages render) and its event log must show Crossdock's named accumulators — pushed bytes,
push wait, commit time, fetch peak, fetch connections — with values that agree with
Spark's own shuffle metrics of the same tasks, and Spark's read metrics must count every
byte read as local or remote, with the fetch wait reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from harness import Standalone  # noqa: E402

PUSHED = "crossdock pushed bytes"
PUSH_WAIT = "crossdock push wait ms"
COMMIT = "crossdock commit ms"
PEAK = "crossdock fetch peak buffered bytes"
OPENED = "crossdock fetch connections opened"
REUSED = "crossdock fetch connections reused"
GROWN = "crossdock fetch limit grown"
SHRUNK = "crossdock fetch limit shrunk"

JOB = textwrap.dedent("""
    import json, sys, urllib.request
    sys.path.insert(0, {harness!r})
    from harness import base_conf, crossdock_conf, spark_session
    conf = {{**base_conf(executors=2), **crossdock_conf({coordinator!r}),
             "spark.crossdock.route": "crossdock",
             "spark.ui.enabled": "true", "spark.ui.port": "0",
             "spark.eventLog.enabled": "true", "spark.eventLog.dir": {event_dir!r},
             "spark.eventLog.compress": "false"}}
    with spark_session("spark-ui", conf) as spark:
        sc = spark.sparkContext
        r = sc.parallelize(range(200000), 4).map(lambda i: (i % 997, i)).reduceByKey(lambda a, b: a + b, 6)
        assert len(r.collect()) == 997
        df = spark.range(0, 300000, numPartitions=4).selectExpr("id % 101 as k", "id as v")
        assert df.groupBy("k").count().count() == 101
        base = f"{{sc.uiWebUrl}}/api/v1/applications/{{sc.applicationId}}"
        stages = json.load(urllib.request.urlopen(base + "/stages?status=complete&details=true", timeout=30))
        print("STAGES", json.dumps(stages))
        print("APP", sc.applicationId)
""")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-ui")
    event_dir = tmp / "events"
    event_dir.mkdir()
    with Standalone(workers=2, memory="256MiB") as sa:
        script = tmp / "job.py"
        script.write_text(JOB.format(harness=os.path.dirname(__file__), coordinator=sa.address,
                                     event_dir=f"file://{event_dir}"))
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    lines = dict(l.split(" ", 1) for l in proc.stdout.splitlines() if l.split(" ", 1)[0] in ("STAGES", "APP"))
    stages = json.loads(lines["STAGES"])
    logs = list(event_dir.iterdir())
    assert len(logs) == 1, logs
    # Spark 4 writes a directory of rolled files (events_1_<app>, events_2_<app>, …).
    files = [logs[0]] if logs[0].is_file() else sorted(
        (f for f in logs[0].iterdir() if f.name.startswith("events_")),
        key=lambda f: int(f.name.split("_")[1]))
    events = [json.loads(l) for f in files for l in f.read_text().splitlines() if l.strip()]
    return stages, events


def _accumulator(stage, name):
    """The stage's total of a named accumulator as its page shows it (None if absent)."""
    for a in stage.get("accumulatorUpdates", []):
        if a.get("name") == name:
            return int(a["value"])
    return None


def _task_ends(events):
    return [e for e in events if e.get("Event") == "SparkListenerTaskEnd"
            and e.get("Task End Reason", {}).get("Reason") == "Success"]


def _updates(task_end):
    """A successful task's accumulator updates, by name."""
    return {a["Name"]: int(a["Update"]) for a in task_end["Task Info"].get("Accumulables", [])
            if "Name" in a and "Update" in a}


def test_stage_pages_show_crossdocks_accumulators(run):
    stages, _ = run
    writing = [s for s in stages if s.get("shuffleWriteBytes", 0) > 0]
    reading = [s for s in stages if s.get("shuffleReadBytes", 0) > 0]
    assert len(writing) >= 2 and len(reading) >= 2, [(s["stageId"], s["name"]) for s in stages]
    for s in writing:
        # What the maps pushed is what Spark counts as written, byte for byte.
        assert _accumulator(s, PUSHED) == s["shuffleWriteBytes"], s["stageId"]
        assert _accumulator(s, PUSH_WAIT) is not None and _accumulator(s, COMMIT) is not None
        # Waiting and committing are part of the write time (ns), never more than it.
        assert (_accumulator(s, PUSH_WAIT) + _accumulator(s, COMMIT)) * 1_000_000 <= s["shuffleWriteTime"]
    for s in reading:
        assert _accumulator(s, PEAK) > 0, s["stageId"]
        assert s["shuffleLocalBytesRead"] + s["shuffleRemoteBytesRead"] == s["shuffleReadBytes"]
        assert "shuffleFetchWaitTime" in s


def test_event_log_carries_them_per_task(run):
    _, events = run
    ends = _task_ends(events)
    maps = [e for e in ends if e["Task Metrics"]["Shuffle Write Metrics"]["Shuffle Bytes Written"] > 0]
    reduces = [e for e in ends if (e["Task Metrics"]["Shuffle Read Metrics"]["Remote Bytes Read"]
                                   + e["Task Metrics"]["Shuffle Read Metrics"]["Local Bytes Read"]) > 0]
    assert len(maps) >= 8 and reduces, (len(maps), len(reduces))
    for e in maps:
        u = _updates(e)
        written = e["Task Metrics"]["Shuffle Write Metrics"]
        assert u.get(PUSHED) == written["Shuffle Bytes Written"], (u, written)
        assert PUSH_WAIT in u and COMMIT in u, u
    for e in reduces:
        u = _updates(e)
        assert u.get(PEAK, 0) > 0, u
        # Neither shuffle is key-ordered: every read is the adaptive one, with a limit.
        assert GROWN in u and SHRUNK in u, u
        read = e["Task Metrics"]["Shuffle Read Metrics"]
        assert "Fetch Wait Time" in read
    # The SQL aggregation's exchange: its plan's metric "shuffle bytes written" (the SQL
    # page's) is fed by the same reporter, so it equals the pushed bytes task by task.
    sql_maps = [e for e in maps if "shuffle bytes written" in _updates(e)]
    assert sql_maps, "the SQL exchange's map tasks report its plan metrics"
    for e in sql_maps:
        u = _updates(e)
        assert u["shuffle bytes written"] == u[PUSHED], u


def test_reduce_tasks_of_an_executor_share_its_fetch_connections(run):
    """Every reduce task that read bytes took a connection per worker it read, opened or idle;
    an executor (one core, so one task at a time) opens at most one per worker for the whole
    app, its later tasks, of this stage and of later ones, taking it idle."""
    _, events = run
    reads = [_updates(e) for e in _task_ends(events) if PEAK in _updates(e)]
    assert len(reads) >= 6, len(reads)
    for u in reads:
        assert u.get(OPENED, 0) + u.get(REUSED, 0) >= 1, u
    opened = sum(u.get(OPENED, 0) for u in reads)
    reused = sum(u.get(REUSED, 0) for u in reads)
    executors, workers = 2, 2
    assert 1 <= opened <= executors * workers, (opened, reused)
