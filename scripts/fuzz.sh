#!/usr/bin/env bash
# The long fuzzing pass: builds the libFuzzer targets in tests/fuzz/ (clang,
# TENT_FUZZ=ON) and runs each for FUZZ_RUNS executions over its committed
# seed corpus (new inputs go to a scratch folder in the build tree); then
# softmpcomm's wire-decoder fuzzer the same way when softmpcomm/fuzz/
# exists. Prints one line per target: executions, seconds, coverage, and
# the corpus it grew. A crash stops the pass with the input saved under
# <build>/fuzz/artifacts/.
# Env: FUZZ_RUNS (default 1000000), JOBS, BUILD_FUZZ (default build-fuzz),
#      BUILD_FUZZ_SOFT (default build-fuzz-softmpcomm), SOFTMPCOMM_SRC
#      (default softmpcomm: another checkout's can be fuzzed too).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"
source "$ROOT/scripts/lib_sanitize.sh"

FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
TARGETS=(mpcomm_port mpcomm_endpoint config_loader segment_decoder rpc_frame
         tcp_wire notification_record)
SUMMARY=()

# run_one <name> <binary> <corpus> <scratch> <artifact dir>
run_one() {
  local name="$1" bin="$2" corpus="$3" scratch="$4" artifacts="$5"
  local log="$scratch.log"
  mkdir -p "$scratch" "$artifacts"
  step "fuzz $name: $FUZZ_RUNS runs"
  local dict=()
  [ -f "$ROOT/tests/fuzz/$name.dict" ] && dict=(-dict="$ROOT/tests/fuzz/$name.dict")
  "$bin" -runs="$FUZZ_RUNS" -print_final_stats=1 "${dict[@]}" \
    -artifact_prefix="$artifacts/$name-" "$scratch" "$corpus" >"$log" 2>&1 || {
    tail -40 "$log"
    echo "fuzz: $name failed; input saved under $artifacts" >&2
    exit 1
  }
  local execs secs cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  SUMMARY+=("$(printf '%-22s %10s execs %6s s  cov %5s  corpus %s+%s' \
    "$name" "$execs" "$secs" "$cov" "$(ls "$corpus" | wc -l)" \
    "$(ls "$scratch" | wc -l)")")
}

build_fuzz
for t in "${TARGETS[@]}"; do
  run_one "$t" "$BUILD_FUZZ/fuzz/fuzz_$t" "$ROOT/tests/fuzz/corpus/$t" \
    "$BUILD_FUZZ/fuzz/found/$t" "$BUILD_FUZZ/fuzz/artifacts"
done

if [ -d "$SOFTMPCOMM_SRC/fuzz" ]; then
  build_fuzz_softmpcomm
  bin=$(find "$BUILD_FUZZ_SOFT" -type f -perm -u+x -name 'softmpcomm_*fuzz' |
        head -1)
  if [ -z "$bin" ]; then
    echo "fuzz: no softmpcomm fuzzer built in $BUILD_FUZZ_SOFT" >&2
    exit 1
  fi
  corpus=$(find "$SOFTMPCOMM_SRC/fuzz/corpus" -mindepth 1 -maxdepth 1 \
             -type d | head -1)
  run_one "softmpcomm_$(basename "$corpus")" "$bin" "$corpus" \
    "$BUILD_FUZZ_SOFT/fuzz/found" "$BUILD_FUZZ_SOFT/fuzz/artifacts"
else
  echo "fuzz: $SOFTMPCOMM_SRC/fuzz/ absent, softmpcomm fuzzer skipped"
fi

step "fuzz summary ($FUZZ_RUNS runs each)"
printf '%s\n' "${SUMMARY[@]}"
