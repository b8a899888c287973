#!/usr/bin/env bash
# The demo: a Crossdock standalone cluster and a verified push-fetch through it.
# (Once the Spark client lands, this runs a real Spark job against vanilla Spark.)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/crossdock
DATA=$(mktemp -d -t crossdock-demo-XXXXXX)
LOG="$DATA/standalone.log"
cleanup() {
  if [[ -n "${PID:-}" ]] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID"; wait "$PID" || true
  fi
  rm -rf "$DATA"
}
trap cleanup EXIT

"$BIN" standalone --listen 127.0.0.1:0 --workers 2 --memory 512MiB --data-dir "$DATA" \
  --metrics-listen 127.0.0.1:0 >"$LOG" 2>&1 &
PID=$!
for _ in $(seq 100); do
  ADDR=$(sed -n 's/^crossdock standalone listening on //p' "$LOG")
  [[ -n "$ADDR" ]] && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.1
done
[[ -n "$ADDR" ]] || { echo "standalone did not start"; cat "$LOG"; exit 1; }
METRICS=$(sed -n 's/^metrics on //p' "$LOG")
echo "== crossdock standalone on $ADDR (2 workers, 512 MiB each), metrics at $METRICS"
echo "== pushing 1 GiB from 16 maps into 32 partitions, committing, fetching and verifying every byte"
"$BIN" bench push-fetch --coordinator "$ADDR" --bytes 1GiB --runs 3 --baseline
echo "== worker metrics"
curl -s "$METRICS" 2>/dev/null | grep -E '^crossdock_worker_(pushed|fetched)_bytes_total|^crossdock_worker_peak_buffered' || true
