#!/usr/bin/env bash
# Builds bench/peers/TestPeerShuffleManager.java (Spark's sort shuffle under another class
# name) into a jar against the pinned pyspark's jars, and prints the --peer option that
# adds it as a mode: a check of the peer slot's jar path with nothing to download.
#   bench/peers/build-test-peer.sh [OUT_DIR]      (default: /tmp/crossdock-test-peer)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/crossdock-test-peer}
jars=$("$here/../../.venv/bin/python" -c 'import pyspark, pathlib; print(pathlib.Path(pyspark.__file__).parent / "jars")')
rm -rf "$out/classes" && mkdir -p "$out/classes"
javac -nowarn --release 17 -cp "$jars/*" -d "$out/classes" "$here/TestPeerShuffleManager.java"
jar --create --file "$out/test-peer.jar" -C "$out/classes" .
echo "--peer name=test-peer,jars=$out/test-peer.jar,conf=spark.shuffle.manager=bench.peer.TestPeerShuffleManager"
