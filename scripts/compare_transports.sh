#!/usr/bin/env bash
# Runs the same tebench cases over mpcomm (softmpcomm) and tcp, back to back
# in one run, so that the two tables can be compared as ratios.
#   scripts/compare_transports.sh [tebench flags...]
# Expects the USE_MPCOMM=ON build of scripts/run_main.sh (builds it if absent).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"

if [ ! -x "$BUILD_ON/benchmark/tebench" ]; then
  "$ROOT/scripts/install_deps.sh"
  build_softmpcomm
  build_on
fi
export LD_LIBRARY_PATH="$SOFT_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

FLAGS=(--op_type=read --start_block_size=65536 --max_block_size=1048576
       --start_batch_size=16 --max_batch_size=16
       --start_num_threads=2 --max_num_threads=2 --duration="${DURATION:-3}")
for xport in mpcomm tcp; do
  step "tebench over $xport"
  "$ROOT/scripts/tebench_pair.sh" "$BUILD_ON/benchmark/tebench" "$xport" \
    "${FLAGS[@]}" "$@"
done
