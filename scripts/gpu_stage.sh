#!/usr/bin/env bash
# For a GPU machine without this tree's build dependencies: builds the
# USE_CUDA=ON configuration here (softmpcomm with CUDA, tebench,
# tent_platform_copy_bw and the suites run_tests.sh runs on that build),
# then copies each program, debug info stripped, into DIR/bin, and every
# library they load but glibc's own into DIR/lib. On the GPU machine, from
# a checkout of the same tree:
#   export LD_LIBRARY_PATH=$PWD/DIR/lib
#   for t in DIR/bin/tent_*_test; do $t; done     # device cases run there
#   GPU_CHECK_BIN=$PWD/DIR/bin bash scripts/gpu_check.sh
# The machine needs a glibc at least as new as this host's and a driver
# for the toolkit built against (its libcudart is staged).
# Usage: scripts/gpu_stage.sh [DIR]   (default .gpu, which git ignores)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"

DIR="${1:-$ROOT/.gpu}"
SUITES=(tent_platform_test tent_memory_location_test tent_engine_memory_test
  tent_policy_test tent_routing_test tent_tcp_staging_test
  tent_mpcomm_boundary_test tent_mpcomm_transport_test)
if ! cuda_toolkit_root >/dev/null; then
  echo "gpu_stage: no CUDA toolkit (set CUDAToolkit_ROOT)" >&2
  exit 2
fi
build_softmpcomm_cuda
build_cuda tent tebench tent_platform_copy_bw "${SUITES[@]}"

step "stage into $DIR"
rm -rf "$DIR/bin" "$DIR/lib"
mkdir -p "$DIR/bin" "$DIR/lib"
for t in "${SUITES[@]}"; do
  strip --strip-debug -o "$DIR/bin/$t" "$BUILD_CUDA/tests/$t"
done
for b in tebench tent_platform_copy_bw; do
  strip --strip-debug -o "$DIR/bin/$b" "$BUILD_CUDA/benchmark/$b"
done
strip --strip-debug -o "$DIR/lib/libtent.so.0" "$BUILD_CUDA/src/libtent.so.0"
strip --strip-debug -o "$DIR/lib/libmpcomm.so.1" "$SOFT_CUDA_PREFIX/lib/libmpcomm.so.1"
# What the programs load, found here; glibc's libraries stay the machine's.
for lib in $(for f in "$DIR"/bin/*; do LD_LIBRARY_PATH="$DIR/lib" ldd "$f"; done |
             awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
    libtent.so.0|libmpcomm.so.1) ;;
    *) cp -L "$lib" "$DIR/lib/" ;;
  esac
done
du -sh "$DIR"
