#!/usr/bin/env bash
# Runs every test of the repository and ends with one line that totals them:
# "tests: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=$(mktemp -t crossdock-test-XXXXXX.log)
status=0

# Each step prints its wall time, so a slow CI run shows which step grew.
run() {
  echo "== $*"
  local start=$SECONDS
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  [[ $rc -eq 0 ]] || status=$rc
  local step="$((SECONDS - start)) s  $*"
  echo "== took ${step:0:160} (exit $rc)"
  STEP_TIMES+=("$step")
}
STEP_TIMES=()

SPARK_VERSION=${SPARK_VERSION:-4.2.0}

# A real S3 server on loopback for the object-store tests (installed by setup.sh): the
# Rust and Spark tests find it through CROSSDOCK_TEST_S3, and with CROSSDOCK_REQUIRE_S3
# they fail rather than skip it when it is missing.
S3_DIR=$(mktemp -d -t crossdock-s3-XXXXXX)
S3_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export AWS_ACCESS_KEY_ID=crossdock-test AWS_SECRET_ACCESS_KEY=crossdock-test-secret
.tools/s3s-fs/bin/s3s-fs --host 127.0.0.1 --port "$S3_PORT" \
  --access-key "$AWS_ACCESS_KEY_ID" --secret-key "$AWS_SECRET_ACCESS_KEY" "$S3_DIR" \
  >"$S3_DIR.log" 2>&1 &
S3_PID=$!
trap 'rm -f "$LOG"; kill $S3_PID 2>/dev/null; rm -rf "$S3_DIR" "$S3_DIR.log"' EXIT
mkdir -p "$S3_DIR/crossdock-test"   # the bucket
# Its first client may come within seconds (a warm cargo cache): wait until it accepts.
for _ in $(seq 300); do
  (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null && break
  if ! kill -0 "$S3_PID" 2>/dev/null; then
    echo "s3s-fs exited at start (the object-store tests will fail):" >&2
    cat "$S3_DIR.log" >&2
    break
  fi
  sleep 0.1
done
export CROSSDOCK_TEST_S3="s3://crossdock-test?endpoint=http://127.0.0.1:$S3_PORT"
export CROSSDOCK_REQUIRE_S3=1
# The web UI's test loads its pages in Chromium (installed by setup.sh): missing, it fails.
export CROSSDOCK_REQUIRE_CHROMIUM=1

run cargo fmt --all -- --check
run cargo clippy --workspace --all-targets --locked -- -D warnings
run cargo test --workspace --locked
# The Java and Spark tests talk to a real `crossdock standalone`: unless CROSSDOCK_BIN names
# another, the debug build that `cargo test` has just built for its CLI tests
# (CARGO_BIN_EXE_crossdock), with overflow checks and debug assertions on. Building the
# release binary as well took ~480 s of the CI's ~38 minutes, and the Spark tests took as
# long with the debug build (test_spark_shuffle.py: 171 s against 172 s): their time is
# Spark's. A `cargo build` here would build it again (55 s: cargo test's build unifies the
# dev-dependencies' features, e.g. tokio's test-util, which the server never calls). If
# `cargo test` failed to compile, the binary may be an older one: the run fails anyway.
# `make demo` and the benchmarks use the release build.
if [[ -z ${CROSSDOCK_BIN:-} ]]; then
  export CROSSDOCK_BIN=target/debug/crossdock
  [[ -x $CROSSDOCK_BIN ]] || run cargo build --locked -p crossdock
fi
rm -rf clients/spark/target/surefire-reports
run mvn -B -q -T 1 -Dspark.version="$SPARK_VERSION" -f clients/spark/pom.xml package
# The MapReduce client: real jobs from hadoop-mapreduce-examples in the local job runner,
# through a real `crossdock standalone` and through MapReduce's own shuffle.
rm -rf clients/mapreduce/target/surefire-reports
run mvn -B -q -T 1 -f clients/mapreduce/pom.xml package
# Real Spark (local-cluster mode) through a real `crossdock standalone`, against vanilla Spark.
rm -f target/pytest-spark.xml
# Tests marked long (each with a sibling here) are left to `make test-failures`.
run .venv/bin/python -m pytest -q -p no:cacheprovider -m "not long" --durations=25 --junitxml=target/pytest-spark.xml tests/spark
# Spark 3.5: the client built from the same sources (Maven profile spark-3.5) with its
# Spark-level Java tests (the protocol and policy ones do not depend on Spark), and the core
# of the Spark tests on pyspark 3.5 (`make test-spark-3.5` runs them all).
SPARK_35_VERSION=${SPARK_35_VERSION:-3.5.8}
rm -rf clients/spark/target/spark-3.5/surefire-reports
run mvn -B -q -T 1 -P spark-3.5 -Dspark.version="$SPARK_35_VERSION" -f clients/spark/pom.xml \
  -Dtest='SparkLocalTest,SparkLocalKryoTest,SparkRoutingTest,RealServerTest' package
# On 3.5 the workloads that go through code compiled per Spark line (SparkCompat: map
# statuses, the map and reduce sorters, the run-pushing sorter) and Spark's SQL planning
# (AQE's skew and local reads, compressed map statuses), plus retried and speculative maps.
SPARK_35_WORKLOADS=rdd_group_by_key,rdd_reduce_by_key,jvm_sort_by_key,rdd_join,df_group_by_agg
SPARK_35_WORKLOADS+=,df_order_by,df_sort_merge_join,df_aqe_skew_join,df_aqe_local_shuffle_reader
SPARK_35_WORKLOADS+=,many_reduce_partitions,empty_partitions_and_maps,retried_task,speculative_maps
rm -f target/pytest-spark-3.5.xml
# And two placement tests: PySpark 3.5 applies the SQL extension only when spark-conf names
# it, and the range sample reads Spark's exchange internals, which differ by line.
CROSSDOCK_TEST_WORKLOADS=$SPARK_35_WORKLOADS run .venv-spark-3.5/bin/python -m pytest -q -p no:cacheprovider --junitxml=target/pytest-spark-3.5.xml \
  tests/spark/test_spark_shuffle.py tests/spark/test_spark_ui.py \
  tests/spark/test_locality.py::test_each_reduce_task_runs_on_its_partitions_host \
  tests/spark/test_locality.py::test_a_range_sort_registers_with_a_sample_and_is_predicted_from_it
# The container image definition and the Helm chart, linted and validated offline.
run scripts/deploy-check.sh

# Totals over every runner: cargo's summary lines and Surefire's XML reports.
passed=0; failed=0
while read -r p f; do passed=$((passed + p)); failed=$((failed + f)); done < <(
  sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' "$LOG"
  sed -n 's/^deploy-check: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$LOG"
  python3 - <<'PY'
import glob, xml.etree.ElementTree as ET
t = f = 0
for path in glob.glob("clients/spark/target/surefire-reports/TEST-*.xml") + glob.glob("clients/mapreduce/target/surefire-reports/TEST-*.xml") + glob.glob("clients/spark/target/spark-3.5/surefire-reports/TEST-*.xml") + glob.glob("target/pytest-spark*.xml"):
    root = ET.parse(path).getroot()
    for r in ([root] if root.tag == "testsuite" else root.findall("testsuite")):
        n = int(r.get("tests", 0)); bad = int(r.get("failures", 0)) + int(r.get("errors", 0))
        t += n - int(r.get("skipped", 0)) - bad; f += bad
print(t, f)
PY
)
echo
echo "time per step:"
printf '  %s\n' "${STEP_TIMES[@]}" | cut -c1-160
echo "tests: $passed passed, $failed failed"
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  echo "a step failed before or outside the tests (see above)" >&2
fi
exit $status
