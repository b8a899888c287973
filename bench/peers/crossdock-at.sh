#!/usr/bin/env bash
# Builds Crossdock as it was at another commit (its `crossdock` binary and Spark 4 client jar,
# in a git worktree of its own, removed afterwards) into OUT_DIR, and prints the option that
# adds it to a suite as one more mode:
#   bench/peers/crossdock-at.sh REV [OUT_DIR]     (default OUT_DIR: /tmp/crossdock-at-<short sha>)
#   .venv/bin/python bench/spark_bench.py --workloads df-groupby --runs 6 --build crossdock-REV=OUT_DIR
# Why: on a shared 2-core machine the same application's time drifts by 1.5x within an hour,
# so a build measured today cannot be held against a table from yesterday; side by side, the
# drift hits both builds alike. The suite runs the other build exactly as its own crossdock
# mode (service started per run with the suite's settings, on one host or the emulated
# cluster); only the binary and the jar differ.
set -euo pipefail
rev=${1:?usage: bench/peers/crossdock-at.sh REV [OUT_DIR]}
root=$(cd "$(dirname "$0")/../.." && pwd)
sha=$(git -C "$root" rev-parse --short "$rev^{commit}")
out=$(mkdir -p "${2:-/tmp/crossdock-at-$sha}" && cd "${2:-/tmp/crossdock-at-$sha}" && pwd)
src="$out/src"

# A fresh worktree each time (a left-over one may hold another commit), removed however the
# build ends.
git -C "$root" worktree prune
if [ -e "$src" ]; then
  git -C "$root" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
fi
git -C "$root" worktree add --detach "$src" "$sha" >/dev/null
trap 'git -C "$root" worktree remove --force "$src"' EXIT
echo "building $sha in $src (release binary and Spark 4 jar; a few minutes)" >&2
(cd "$src" && CARGO_TARGET_DIR="$out/target" cargo build -q --release -p crossdock --locked)
mvn -B -q -T 1 -Dspark.version=4.2.0 -f "$src/clients/spark/pom.xml" -DskipTests package >&2
cp "$out/target/release/crossdock" "$out/crossdock"
cp "$src/clients/spark/target/crossdock-spark.jar" "$out/crossdock-spark.jar"
echo "--build crossdock-$sha=$out"
