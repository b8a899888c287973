# Crossdock: the two commands a new machine needs are `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
MVN ?= mvn
BIN := target/release/crossdock
# The one place Spark's version is pinned: the Maven build and the pyspark package use it.
export SPARK_VERSION := 4.2.0
# The Spark 3.5 release the client is also built and tested for (its Maven artifacts and
# the pyspark of .venv-spark-3.5).
export SPARK_35_VERSION := 3.5.8
JAR := clients/spark/target/crossdock-spark.jar
MVN_FLAGS := -B -q -T 1 -Dspark.version=$(SPARK_VERSION)

.PHONY: all setup build build-spark-3.5 build-mapreduce demo-mapreduce bench-mapreduce test test-sql test-failures test-spark-3.5 fuzz demo demo-native bench bench-spark bench-sql bench-cluster bench-prediction bench-native bench-alltoall bench-placement bench-durability bench-multi-app bench-congestion clean

all: build

## setup: install what the build needs (Rust components, JDK 17, Maven, .venv with pyspark)
setup:
	@scripts/setup.sh

## build: the release binary, the Spark client jar and the Python environment
build: setup
	$(CARGO) build --release --locked -p crossdock
	$(MVN) $(MVN_FLAGS) -f clients/spark/pom.xml -DskipTests package

## build-spark-3.5: the Spark client built for Spark 3.5 (clients/spark/target/spark-3.5/)
build-spark-3.5: setup
	$(MVN) -B -q -T 1 -P spark-3.5 -Dspark.version=$(SPARK_35_VERSION) -f clients/spark/pom.xml -DskipTests package

## build-mapreduce: the Hadoop MapReduce client jar (clients/mapreduce/target/crossdock-mapreduce.jar)
build-mapreduce: setup
	$(MVN) -B -q -T 1 -f clients/mapreduce/pom.xml -DskipTests package

## test: formatting, lints (warnings are errors) and every test; ends with a total line
## (the Spark tests run on Spark 4.2 and, a representative part, on Spark 3.5)
test: setup
	@scripts/test.sh

## test-sql: the TPC-H test with all 22 queries (make test runs one query of each shape)
test-sql: build
	CROSSDOCK_TEST_TPCH_QUERIES=1-22 .venv/bin/python -m pytest -q -p no:cacheprovider tests/spark/test_tpch.py

## test-failures: every Spark failure test, with those make test leaves out (marked long)
test-failures: build
	.venv/bin/python -m pytest -q -p no:cacheprovider tests/spark/test_failures.py

## test-spark-3.5: every Spark test on Spark 3.5 (make test runs a part of them)
test-spark-3.5: build build-spark-3.5
	.venv-spark-3.5/bin/python -m pytest -q -p no:cacheprovider tests/spark

## fuzz: the long fuzzing run (docs/security.md#fuzzing): every decoder under AFL++ to 10 million
## executions (FUZZ_EXECS), two at a time (FUZZ_JOBS), then the Java decoder under Jazzer
## (FUZZ_JAVA_SECONDS); figures in target/fuzz/summary.md, the kept corpus in crates/fuzz/corpus/
fuzz: setup
	@scripts/fuzz.sh

## demo: a shuffle-heavy Spark job (over 1 GB shuffled) with Spark's own shuffle and through Crossdock
demo: build
	.venv/bin/python scripts/demo.py

## demo-mapreduce: TeraGen (200 MB) → TeraSort through MapReduce's own shuffle and through
## Crossdock → TeraValidate, and WordCount both ways, in the local job runner; outputs compared
demo-mapreduce: setup
	@scripts/mapreduce-bench.sh --rows 2000000 --runs 1

## bench-mapreduce: TeraSort of 2 GB, 3 runs each way, medians and ratio, counters
## (bench-results/mapreduce.json); MR_BENCH_ARGS overrides the arguments
bench-mapreduce: setup
	@mkdir -p bench-results
	@scripts/mapreduce-bench.sh $(or $(MR_BENCH_ARGS),--rows 20000000 --runs 3 --warmup 1 --reduces 4 --json bench-results/mapreduce.json)

## demo-native: `crossdock standalone` and a verified 1 GiB push-fetch through it (no Spark)
demo-native: build
	@scripts/demo.sh

## bench: the benchmark suite (docs/benchmarks.md): every Spark workload on one host, TPC-H's
## 22 queries at scale 1, then a smaller set on a 3-host emulated cluster (root); tables,
## JSON and plots in bench-results/
bench: build
	@rc=0; .venv/bin/python bench/spark_bench.py $(BENCH_ARGS) || rc=1; \
	.venv/bin/python bench/tpch.py $(SQL_BENCH_ARGS) || rc=1; \
	.venv/bin/python bench/cluster.py $(BENCH_ARGS) || rc=1; exit $$rc

## bench-spark: the single-host part of `make bench` (BENCH_ARGS="--runs 5 --workloads a,b ...")
bench-spark: build
	.venv/bin/python bench/spark_bench.py $(BENCH_ARGS)

## bench-sql: TPC-H's 22 queries, vanilla against Crossdock with routing on and forced
## (SQL_BENCH_ARGS="--scale-factor 10 --runs 3 --queries 1-22")
bench-sql: build
	.venv/bin/python bench/tpch.py $(SQL_BENCH_ARGS)

## bench-cluster: the emulated-cluster part of `make bench` (root: network namespaces and tc)
bench-cluster: build
	.venv/bin/python bench/cluster.py $(BENCH_ARGS)

## bench-prediction: the coordinator's partition-size predictions scored on four shuffles (hash and
## range partitioners, uniform, skewed and ordered keys), 3 runs (PREDICTION_ARGS="--runs 5 ...")
bench-prediction: build
	.venv/bin/python bench/prediction.py $(PREDICTION_ARGS)

## bench-native: the push-fetch benchmark at 4 GiB against raw loopback TCP in the same run (no Spark),
## over plain TCP and over TLS, alternating run by run
bench-native: build
	$(BIN) bench push-fetch --bytes 4GiB --baseline --runs 3 --compare-tls --json

## bench-alltoall: the skew paper's all-to-all (CSA, DSA, SMS) through 8 memory-only worker processes,
## Zipf alpha 0 to 3, 3 runs each (ALLTOALL_ARGS="--runs 5 ...")
bench-alltoall: build
	$(BIN) bench alltoall --json $(ALLTOALL_ARGS)

## bench-placement: SCache's placement on a skewed shuffle (Zipf 1.3) through 3 worker processes labelled as
## hosts: the hosts' load with the placement at registration and with re-placement on the prediction, 3 runs
## (PLACEMENT_ARGS="--alpha 2 ...")
bench-placement: build
	$(BIN) bench placement --json $(PLACEMENT_ARGS)

## bench-multi-app: a large Spark application and three small ones started during it, each against its
## time alone: vanilla, one Crossdock service in FIFO order, and in fair completion order (MULTI_APP_ARGS="--runs 3")
bench-multi-app: build
	.venv/bin/python bench/multi_app.py $(MULTI_APP_ARGS)

## bench-congestion: one worker on a slow disk (FUSE, scripts/slowfs.py; needs root) shared by a heavy and a
## light application: the light one's push latency in FIFO, fair and fair + throttling order, and with a memory share
bench-congestion: build
	.venv/bin/python bench/congestion.py $(CONGESTION_ARGS)

## bench-durability: what each commit rule costs (memory, disk, object store: directory and S3)
bench-durability: build
	.venv/bin/python bench/durability.py $(BENCH_ARGS)

clean:
	$(CARGO) clean
