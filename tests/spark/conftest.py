"""Settings of the Spark test suite that the benchmarks, which share harness.py, must not get."""

import os
import sys

# Quicker JVMs for short test jobs (see harness.QUICK_JIT); set before harness is imported,
# and inherited by the Spark applications the tests start as child processes.
os.environ["CROSSDOCK_TEST_QUICK_JIT"] = "1"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jvm_archive  # noqa: E402


def pytest_configure(config):
    # `make test` leaves these out (-m "not long"); `make test-failures` runs them. Each has a
    # sibling in make test that goes through the same recovery path.
    config.addinivalue_line("markers", "long: a test that only the long make targets run")
    # Class-data archives for the applications' JVMs (jvm_archive.py): made once per Java
    # runtime and Spark build, about half a minute, then reused.
    jvm_archive.ensure()
