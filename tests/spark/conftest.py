"""Settings of the Spark test suite that the benchmarks, which share harness.py, must not get."""

import os

# Quicker JVMs for short test jobs (see harness.QUICK_JIT); set before harness is imported,
# and inherited by the Spark applications the tests start as child processes.
os.environ["CROSSDOCK_TEST_QUICK_JIT"] = "1"
