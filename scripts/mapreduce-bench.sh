#!/usr/bin/env bash
# `make demo-mapreduce` and `make bench-mapreduce`: real MapReduce jobs from
# hadoop-mapreduce-examples (TeraGen, TeraSort, TeraValidate, WordCount) in the local job runner,
# through MapReduce's own shuffle and through a real `crossdock standalone`, outputs compared
# byte for byte (clients/mapreduce/src/test/java/org/crossdock/mapreduce/MapReduceBench.java).
# Arguments go to MapReduceBench (--rows, --runs, --reduces, --split-mb, --word-lines,
# --worker-memory, --json); MR_HEAP sets the JVM's heap (every task runs in it).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p crossdock
MR=clients/mapreduce
mvn -B -q -T 1 -f $MR/pom.xml -DskipTests package
mvn -B -q -f $MR/pom.xml dependency:build-classpath -Dmdep.includeScope=test \
  -Dmdep.outputFile=target/test-classpath.txt
exec java -Xmx"${MR_HEAP:-3g}" \
  -cp "$MR/target/classes:$MR/target/test-classes:$(cat $MR/target/test-classpath.txt)" \
  org.crossdock.mapreduce.MapReduceBench "$@"
