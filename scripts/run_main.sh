#!/usr/bin/env bash
# The main job: a tebench target and initiator on this host over MPComm
# (softmpcomm, the MPComm API over TCP), printing bandwidth.
#
#   scripts/run_main.sh [--transport=mpcomm|tcp] [extra tebench flags...]
#
# Installs what it needs, builds softmpcomm and the USE_MPCOMM=ON tree, runs
# one verification pass with --check_consistency=true, then a throughput
# sweep. Env: JOBS, DURATION (seconds per case, default 3).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"

XPORT=mpcomm
if [[ "${1:-}" == --transport=* ]]; then
  XPORT="${1#--transport=}"
  shift
fi
DURATION="${DURATION:-3}"

"$ROOT/scripts/install_deps.sh"
build_softmpcomm
build_on tebench

step "tebench over $XPORT: consistency pass (write then read back every block)"
"$ROOT/scripts/tebench_pair.sh" "$BUILD_ON/benchmark/tebench" "$XPORT" \
  --op_type=write --check_consistency=true \
  --start_block_size=65536 --max_block_size=1048576 \
  --start_batch_size=8 --max_batch_size=8 \
  --start_num_threads=2 --max_num_threads=2 --duration=1 "$@"

step "tebench over $XPORT: bandwidth"
"$ROOT/scripts/tebench_pair.sh" "$BUILD_ON/benchmark/tebench" "$XPORT" \
  --op_type=read --start_block_size=65536 --max_block_size=1048576 \
  --start_batch_size=16 --max_batch_size=16 \
  --start_num_threads=2 --max_num_threads=2 --duration="$DURATION" "$@"
