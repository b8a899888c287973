"""Runs every workload in one Spark application and pickles the results to a file.

A separate process per application: the driver JVM that pyspark starts keeps the
classpath it was launched with, so a Crossdock application cannot share a Python
process with a vanilla one.

    python run_workloads.py OUT.pickle [--coordinator HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import base_conf, crossdock_conf, jvm_jobs_jar, spark_session  # noqa: E402
from workloads import SESSION_CONF, WORKLOADS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--coordinator")
    args = ap.parse_args()
    conf = {**base_conf(), **SESSION_CONF}
    if args.coordinator:
        conf.update(crossdock_conf(args.coordinator))
    # The Java jobs (jvm_sort_by_key), compiled next to the output.
    jobs = str(jvm_jobs_jar(pathlib.Path(args.out).resolve().parent))
    conf["spark.jars"] = ",".join(j for j in (conf.get("spark.jars"), jobs) if j)
    results = {}
    with spark_session("crossdock" if args.coordinator else "vanilla", conf) as spark:
        results["__shuffle_manager__"] = spark.sparkContext.getConf().get("spark.shuffle.manager", "sort")
        for name, fn in WORKLOADS.items():
            try:
                results[name] = ("ok", fn(spark))
            except Exception as e:  # a failure is a result too; the test reports it
                results[name] = ("error", f"{type(e).__name__}: {str(e)[:3000]}")
    with open(args.out, "wb") as f:
        pickle.dump(results, f)


if __name__ == "__main__":
    main()
