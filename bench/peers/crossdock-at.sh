#!/usr/bin/env bash
# Builds Crossdock as it was at another commit (its `crossdock` binary and Spark 4 client jar,
# in a git worktree of its own) and writes a peer mode that runs it, so that two builds are
# compared in one suite, their runs alternating with vanilla's:
#   bench/peers/crossdock-at.sh REV [OUT_DIR]     (default OUT_DIR: /tmp/crossdock-at-REV)
#   .venv/bin/python bench/spark_bench.py --workloads df-groupby --runs 6 --peer OUT_DIR/peer.toml
# Why: on a shared 2-core machine the same application's time drifts by 1.5x within an hour,
# so a build measured today cannot be held against a table from yesterday; side by side, the
# drift hits both builds alike. The peer mode starts its own `crossdock standalone` before each
# of its runs and stops it after, with the suite's defaults only (2 workers of 1 GiB,
# replication 1, no split size, data under OUT_DIR): a suite run with --worker-memory,
# --replication or --split-size would compare unlike setups. One host only: the emulated
# cluster (bench/cluster.py) starts its services in network namespaces, which this peer does not.
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

# The coordinator's port is fixed when the peer is written (its Spark properties are static),
# and taken below the kernel's range for outgoing connections, which could take it between runs.
port=$(python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for p in random.sample(range(10000, low), min(200, low - 10000)):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
        print(p)
        break
else:
    raise SystemExit("no free port below the ephemeral range")
PY
)

cat > "$out/start.sh" <<EOF
#!/usr/bin/env bash
# Starts the $sha build's standalone service for one run of the peer mode.
set -euo pipefail
if [ -n "\${CROSSDOCK_BENCH_NETNS:-}" ]; then
  echo "the crossdock-$sha peer runs on one host only (bench/spark_bench.py), not on the emulated cluster" >&2
  exit 1
fi
rm -rf "$out/data" "$out/service.log" && mkdir -p "$out/data"
CROSSDOCK_LOG=warn setsid "$out/crossdock" standalone --listen 127.0.0.1:$port --workers 2 \\
  --memory 1GiB --data-dir "$out/data" --metrics-listen 127.0.0.1:0 --replication 1 \\
  > "$out/service.log" 2>&1 &
echo \$! > "$out/pid"
for _ in \$(seq 100); do
  grep -q "crossdock standalone listening on" "$out/service.log" 2>/dev/null && exit 0
  kill -0 "\$(cat "$out/pid")" 2>/dev/null || break
  sleep 0.1
done
echo "the $sha service did not start:" >&2
cat "$out/service.log" >&2
exit 1
EOF

cat > "$out/stop.sh" <<EOF
#!/usr/bin/env bash
# Stops what start.sh started (SIGTERM, then SIGKILL after 5 s) and drops its data.
pid=\$(cat "$out/pid" 2>/dev/null) || exit 0
# Only if that pid is still this build's service (not a process that took the number since).
if ! tr '\\0' ' ' < "/proc/\$pid/cmdline" 2>/dev/null | grep -q "^$out/crossdock "; then
  rm -f "$out/pid"
  exit 0
fi
kill "\$pid" 2>/dev/null
for _ in \$(seq 50); do kill -0 "\$pid" 2>/dev/null || break; sleep 0.1; done
kill -9 "\$pid" 2>/dev/null
rm -rf "$out/data" "$out/pid"
exit 0
EOF
chmod +x "$out/start.sh" "$out/stop.sh"

cat > "$out/peer.toml" <<EOF
# Crossdock at $sha, written by bench/peers/crossdock-at.sh.
name = "crossdock-$sha"
jars = ["$out/crossdock-spark.jar"]
start = "$out/start.sh"
stop = "$out/stop.sh"

[conf]
"spark.shuffle.manager" = "org.apache.spark.shuffle.crossdock.CrossdockShuffleManager"
"spark.crossdock.coordinator" = "127.0.0.1:$port"
EOF
echo "--peer $out/peer.toml"
