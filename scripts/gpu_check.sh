#!/usr/bin/env bash
# For a machine with a GPU (not run in CI): builds USE_CUDA=ON against
# softmpcomm, runs tebench over tcp and mpcomm for each DRAM/VRAM pairing
# (initiator DRAM, VRAM or --seg_type_mix=dram,vram x target DRAM or VRAM) with --check_consistency=true, and prints one table
# of GB/s beside the platform's own cudaMemcpy figures (H2D, D2H, D2D).
# A cell that fails prints FAIL and the script goes on; the exit status is
# 1 when any did. Budget: under 8 minutes on a 16-core machine.
# Env: JOBS, DURATION (seconds per tebench case, default 3), BLOCK (bytes,
# default 4194304), LOGDIR (default: a temp dir), GPU_CHECK_BIN (a folder
# holding a USE_CUDA=ON tebench and tent_platform_copy_bw built elsewhere,
# with their libraries on LD_LIBRARY_PATH: nothing is built).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"

DURATION="${DURATION:-3}"
BLOCK="${BLOCK:-4194304}"
LOGDIR="${LOGDIR:-$(mktemp -d /tmp/gpu_check.XXXXXX)}"
mkdir -p "$LOGDIR"

if [ -n "${GPU_CHECK_BIN:-}" ]; then
  TEBENCH="$GPU_CHECK_BIN/tebench"
  COPY_BW="$GPU_CHECK_BIN/tent_platform_copy_bw"
else
  if ! cuda_toolkit_root >/dev/null; then
    echo "gpu_check: no CUDA toolkit (set CUDAToolkit_ROOT)" >&2
    exit 2
  fi
  set -e
  build_softmpcomm_cuda >"$LOGDIR/build.log" 2>&1
  build_cuda tebench tent_platform_copy_bw >>"$LOGDIR/build.log" 2>&1
  set +e
  TEBENCH="$BUILD_CUDA/benchmark/tebench"
  COPY_BW="$BUILD_CUDA/benchmark/tent_platform_copy_bw"
fi

step "platform copy bandwidth (cudaMemcpy through the CUDA platform)"
"$COPY_BW" --block_size=$((64 << 20)) \
  --duration=1 | tee "$LOGDIR/copy.txt"
copy_gbps() { awk -v d="$1" '$1 == "copy" && $2 == d { print $4 }' "$LOGDIR/copy.txt"; }

failed=0
declare -A CELL
for xport in tcp mpcomm; do
  for local in DRAM VRAM MIX; do
    for remote in DRAM VRAM; do
      # MIX: --seg_type_mix=dram,vram, threads alternating between the two.
      if [ "$local" = MIX ]; then seg="--seg_type_mix=dram,vram"; else seg="--seg_type=$local"; fi
      log="$LOGDIR/$xport-$local-$remote.txt"
      step "$xport: initiator $local -> target $remote"
      TARGET_SEG_TYPE=$remote LOGDIR="$LOGDIR/$xport-$local-$remote" \
        timeout 60 "$ROOT/scripts/tebench_pair.sh" "$TEBENCH" "$xport" \
        "$seg" --op_type=write --check_consistency=true \
        --start_block_size="$BLOCK" --max_block_size="$BLOCK" \
        --start_batch_size=4 --max_batch_size=4 \
        --start_num_threads=4 --max_num_threads=4 \
        --duration="$DURATION" >"$log" 2>&1
      rc=$?
      # The BW (GB/s) column of the one result row.
      gbps="$(awk '$1 ~ /^[0-9]+$/ && NF >= 10 { v = $4 } END { print v }' "$log")"
      if [ $rc -ne 0 ] || [ -z "$gbps" ]; then
        gbps=FAIL
        failed=1
        tail -n 5 "$log"
      fi
      CELL[$xport-$local-$remote]="$gbps"
    done
  done
done

step "GB/s, WRITE of $BLOCK-byte blocks, batch 4, 4 threads, consistency checked"
printf '%-10s %-10s %10s %10s\n' transport initiator "to DRAM" "to VRAM"
for xport in tcp mpcomm; do
  for local in DRAM VRAM MIX; do
    printf '%-10s %-10s %10s %10s\n' "$xport" "$local" \
      "${CELL[$xport-$local-DRAM]}" "${CELL[$xport-$local-VRAM]}"
  done
done
printf 'cudaMemcpy: H2D %s  D2H %s  D2D %s GB/s (pinned host, %s-byte copies)\n' \
  "$(copy_gbps h2d)" "$(copy_gbps d2h)" "$(copy_gbps d2d)" $((64 << 20))
echo "gpu_check: logs in $LOGDIR"
exit $failed
