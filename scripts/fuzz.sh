#!/usr/bin/env bash
# `make fuzz`: the long fuzzing run of every decoder (docs/security.md, "Fuzzing").
#
# Each target of crates/fuzz runs under AFL++ (afl.rs, on the stable toolchain) until it
# has done FUZZ_EXECS executions, FUZZ_JOBS targets at a time (one per core), seeded from
# the shared protocol vectors, the real encoders' output and the corpus the last run
# kept; then the Java decoder runs under Jazzer (the pseudo-target `java`). Installs what
# it needs from crates.io and Maven Central: cargo-afl, which builds AFL++ from the source
# it ships, and Jazzer through the Maven build.
#
# Writes target/fuzz/<target>/ (AFL++'s output: queue, crashes, hangs, fuzzer_stats),
# target/fuzz/summary.md (executions, executions per second, duration, crashes and hangs
# per target) and, unless FUZZ_KEEP=0, the minimized queue of each target back into
# crates/fuzz/corpus/, which the short run of `make test` replays. Fails if a target
# crashed, hung or fell short of FUZZ_EXECS.
#
#   FUZZ_EXECS          executions per Rust target (default 10000000)
#   FUZZ_JOBS           targets fuzzed at a time (default 2)
#   FUZZ_TARGETS        which targets (default: all, then java)
#   FUZZ_JAVA_SECONDS   how long Jazzer runs (default 900)
#   FUZZ_TIMEOUT_MS     an execution slower than this is a hang (default 200)
#   FUZZ_KEEP           1: write the minimized corpus into crates/fuzz/corpus (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

EXECS=${FUZZ_EXECS:-10000000}
JOBS=${FUZZ_JOBS:-2}
RUST_TARGETS="frame message stream record journal-record journal shuffle-meta"
ALL_TARGETS="$RUST_TARGETS java"
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}
JAVA_SECONDS=${FUZZ_JAVA_SECONDS:-900}
TIMEOUT_MS=${FUZZ_TIMEOUT_MS:-200}
KEEP=${FUZZ_KEEP:-1}
OUT=$ROOT/target/fuzz
# The instrumented build has its own target directory: its flags differ from every
# other build's, and sharing one would rebuild both each time.
AFL_TARGET_DIR=${FUZZ_TARGET_DIR:-$ROOT/target/afl}
CARGO_TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SPARK_VERSION=${SPARK_VERSION:-4.2.0}
AFL_RS=0.18.2 # = the afl crate's version in Cargo.toml

mkdir -p "$OUT"
rust_targets=()
java=0
for t in $TARGETS; do
  if [[ $t == java ]]; then java=1; else rust_targets+=("$t"); fi
done

# AFL++ and the harness, to fuzz or to minimize what a run (this one or an earlier) kept.
if [[ ${#rust_targets[@]} -gt 0 || $KEEP == 1 ]]; then
  # cargo-afl, and AFL++ built from the source it ships (once per toolchain).
  if ! cargo afl --version 2>/dev/null | grep -q "cargo-afl $AFL_RS"; then
    cargo install cargo-afl --locked --version "$AFL_RS"
  fi
  afl_help=$(cargo afl fuzz -h 2>&1 || true)
  if [[ $afl_help != *afl-fuzz* ]]; then
    cargo afl config --build
    afl_help=$(cargo afl fuzz -h 2>&1 || true)
  fi
  # AFL++'s own tools, for afl-cmin.bash (the Python afl-cmin that `cargo afl cmin` runs
  # finds no edges in a persistent-mode target).
  AFL_BIN_DIR=$(dirname "$(grep -o '/[^ ]*/afl-fuzz' <<<"$afl_help" | head -1)")
  CARGO_TARGET_DIR=$AFL_TARGET_DIR cargo afl build --release --locked \
    -p crossdock-fuzz --features afl --bin crossdock-afl
  # The helper only writes seeds and keeps the corpus: a debug build (shared with the tests').
  cargo build --locked -p crossdock-fuzz --bin crossdock-fuzz
  BIN=$AFL_TARGET_DIR/release/crossdock-afl
  HELPER=$CARGO_TARGET/debug/crossdock-fuzz
fi
if [[ ${#rust_targets[@]} -gt 0 ]]; then
  rm -rf "$OUT/seeds"
  "$HELPER" seeds "$OUT/seeds"
fi

# AFL++ without a screen, without CPU pinning (other work may share the cores), and
# without asking for the system's crash reporting to be switched off.
export AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1

# One target to FUZZ_EXECS executions. -m: a second bound on memory, the address space
# (the targets' own limit, crates/fuzz/src/alloc.rs, is the tight one).
fuzz_one() {
  local t=$1
  rm -rf "${OUT:?}/$t" "$OUT/$t.summary"
  echo "fuzz: $t: AFL++ to $EXECS executions"
  cargo afl fuzz -i "$OUT/seeds/$t" -o "$OUT/$t" -t "$TIMEOUT_MS" -m 4096 -E "$EXECS" \
    -- "$BIN" "$t" >"$OUT/$t.log" 2>&1 || echo "fuzz: $t: afl-fuzz failed (see $OUT/$t.log)"
  summarize "$t"
}

# A line of the summary table from AFL++'s fuzzer_stats.
summarize() {
  local t=$1 stats=$OUT/$1/default/fuzzer_stats
  [[ -f $stats ]] || { echo "| $t | - | - | - | - | - | afl-fuzz did not run |" >"$OUT/$t.summary"; return; }
  stat() { sed -n "s/^$1 *: *//p" "$stats"; }
  local execs secs crashes hangs
  execs=$(stat execs_done); secs=$(stat run_time); crashes=$(stat saved_crashes); hangs=$(stat saved_hangs)
  echo "| $t | $execs | $((execs / (secs > 0 ? secs : 1))) | ${secs}s | $crashes | $hangs | $(stat corpus_count) inputs, edge coverage $(stat bitmap_cvg) |" \
    >"$OUT/$t.summary"
}

# Jazzer (libFuzzer in the JVM) on the Java decoder: the @FuzzTest of
# clients/common/src/test/java/org/crossdock/protocol/DecoderFuzzTest.java in fuzzing
# mode (JAZZER_FUZZ=1); the regression mode of the same test runs in `make test`. Its
# corpus (clients/spark/.cifuzz-corpus/) starts from the shared vectors' frames. JUnit's
# own timeouts are off: Jazzer hands the test's @Timeout to libFuzzer, per input.
fuzz_java() {
  rm -f "$OUT/java.summary"
  echo "fuzz: java: Jazzer for ${JAVA_SECONDS}s"
  local corpus=clients/spark/.cifuzz-corpus/org.crossdock.protocol.DecoderFuzzTest/decodeFrame
  mkdir -p "$corpus"
  python3 - "$corpus" <<'PY'
import json, sys
v = json.load(open("testdata/protocol/vectors.json"))
for i, f in enumerate(v["frames"] + v["invalid"]):
    open(f"{sys.argv[1]}/vector-{i:03d}", "wb").write(bytes.fromhex(f["hex"]))
PY
  local log=$OUT/java.log start=$SECONDS
  JAZZER_FUZZ=1 mvn -B -T 1 -Dspark.version="$SPARK_VERSION" -f clients/spark/pom.xml \
    -Dtest='DecoderFuzzTest#decodeFrame' -Dsurefire.failIfNoSpecifiedTests=false \
    -Djunit.jupiter.execution.timeout.mode=disabled \
    -Djazzer.max_duration="${JAVA_SECONDS}s" test >"$log" 2>&1 || echo "fuzz: java: failed (see $log)"
  # libFuzzer's last status line ("#N DONE ... exec/s: R"), Surefire's last count.
  local execs rate secs=$((SECONDS - start)) found
  execs=$(grep -aoE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  rate=$(grep -aoE 'exec/s: [0-9]+' "$log" | tail -1 | sed 's/exec\/s: //')
  found=$(sed -n 's/.*Tests run: [0-9]*, Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2/p' "$log" |
    tail -1 | awk '{ print $1 + $2 }')
  echo "| java (Jazzer) | ${execs:-0} | ${rate:-0} | ${secs}s (with the Maven build) | ${found:-1} | - | libFuzzer in the JVM, $(grep -aoE 'corp: [0-9]+' "$log" | tail -1 | sed 's/corp: //') inputs kept |" >"$OUT/java.summary"
}

running=0
for t in "${rust_targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= JOBS)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
if ((java)); then fuzz_java; fi

# The corpus to keep: each target's latest queue (this run's or an earlier one's),
# minimized to the inputs that reach distinct edges.
if [[ $KEEP == 1 ]]; then
  for t in $RUST_TARGETS; do
    queue=$OUT/$t/default/queue
    [[ -d $queue ]] || continue
    rm -rf "$OUT/$t.cmin"
    # -e: edges only, not their hit counts, so the kept corpus stays small.
    AFL_PATH=$AFL_BIN_DIR PATH=$AFL_BIN_DIR:$PATH "$AFL_BIN_DIR/afl-cmin.bash" -e \
      -i "$queue" -o "$OUT/$t.cmin" -t "$TIMEOUT_MS" -m 4096 -- "$BIN" "$t" >"$OUT/$t.cmin.log" 2>&1 &&
      "$HELPER" keep "$t" "$OUT/$t.cmin" || echo "fuzz: $t: afl-cmin failed (see $OUT/$t.cmin.log)"
  done
fi

# The table holds every target's latest result, from this run or an earlier one.
{
  echo "| target | executions | exec/s | duration | crashes | hangs | notes |"
  echo "|---|---|---|---|---|---|---|"
  for t in $ALL_TARGETS; do cat "$OUT/$t.summary" 2>/dev/null || echo "| $t | - | - | - | - | - | not run |"; done
} >"$OUT/summary.md"
cat "$OUT/summary.md"

# Every Rust target reached FUZZ_EXECS with no crash and no hang; Java found nothing.
bad=0
for t in "${rust_targets[@]}"; do
  IFS='|' read -r _ _ execs _ _ crashes hangs _ <"$OUT/$t.summary" || true
  if [[ ${execs// /} != [0-9]* ]] || ((${execs// /} < EXECS || ${crashes// /} > 0 || ${hangs// /} > 0)); then
    echo "fuzz: $t: short of $EXECS executions, or crashes or hangs (see $OUT/$t/default/)" >&2
    bad=1
  fi
done
if ((java)); then
  IFS='|' read -r _ _ _ _ _ found _ <"$OUT/java.summary" || true
  if [[ ${found// /} != 0 ]]; then echo "fuzz: java: Jazzer found a failure (see $OUT/java.log)" >&2; bad=1; fi
fi
exit $bad
