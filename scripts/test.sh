#!/usr/bin/env bash
# Runs every test of the repository and ends with one line that totals them:
# "tests: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=$(mktemp -t crossdock-test-XXXXXX.log)
trap 'rm -f "$LOG"' EXIT
status=0

run() {
  echo "== $*"
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  [[ $rc -eq 0 ]] || status=$rc
}

run cargo fmt --all -- --check
run cargo clippy --workspace --all-targets --locked -- -D warnings
run cargo test --workspace --locked

# Totals over every runner's summary lines.
passed=0; failed=0
while read -r p f; do passed=$((passed + p)); failed=$((failed + f)); done < <(
  sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' "$LOG"
)
echo
echo "tests: $passed passed, $failed failed"
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  echo "a step failed before or outside the tests (see above)" >&2
fi
exit $status
