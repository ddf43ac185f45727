#!/usr/bin/env bash
# The test job: installs what it needs, then builds and tests both
# configurations:
#   1. USE_MPCOMM=OFF (the boundary suite against the mock adapter, the
#      runtime suites, the configure-time checks);
#   2. softmpcomm's own suite, then USE_MPCOMM=ON against the softmpcomm
#      prefix (boundary + functional suites, DT_NEEDED checks) and a short
#      tebench smoke over mpcomm with --check_consistency=true, and the
#      wheel test (tests/wheel/wheel_test.py);
#   3. where a CUDA toolkit is found, USE_CUDA=ON against softmpcomm in a
#      build dir of its own: the library, tebench and the suites whose code
#      differs under USE_CUDA (device tests skip without a GPU); elsewhere
#      one line says it was skipped;
#   4. the reliability checks (docs/reliability.md): the ASan+UBSan pass
#      and the TSan pass, each over softmpcomm's suites and every C++ suite
#      of the ON configuration (scripts/check.sh with CHECK_SCOPE=ci; any
#      sanitizer report fails, a child process's too), then the fuzz smoke
#      ctests (each libFuzzer target for a bounded number of executions).
# Env: JOBS; CHECKS=default (both sanitizer passes over every C++ suite of
# the ON configuration, and the fuzz smoke) | all (both passes over every suite: CHECK_SCOPE=all) |
# none; SKIP_CHECKS=1 is CHECKS=none (a quick local run; CI sets neither).
# Every step runs with TENT_TEST_REQUIRE_STORES=1: the store suites (C++,
# Python, the cluster smoke) fail when redis-server or etcd is missing
# instead of skipping, so no run here passes without them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"
source "$ROOT/scripts/lib_sanitize.sh"

CHECKS="${CHECKS:-default}"
[ "${SKIP_CHECKS:-0}" = 1 ] && CHECKS=none
case "$CHECKS" in
  default | all | none) ;;
  *)
    echo "run_tests: CHECKS must be default, all or none, got '$CHECKS'" >&2
    exit 2
    ;;
esac

"$ROOT/scripts/install_deps.sh"
step "links of README.md, docs/ and softmpcomm/README.md"
python3 "$ROOT/scripts/check_links.py"
# install_deps.sh has installed the servers: a store case that finds none
# fails, naming the binary (docs/reliability.md). Exported, so the
# sanitizer passes of scripts/check.sh run under it too.
export TENT_TEST_REQUIRE_STORES=1

build_off
step "ctest (USE_MPCOMM=OFF)"
ctest --test-dir "$BUILD_OFF" --output-on-failure -j"$JOBS"

build_softmpcomm
step "ctest (softmpcomm)"
ctest --test-dir "$BUILD_SOFT" --output-on-failure

build_on
step "DT_NEEDED on libmpcomm.so.1"
for bin in "$BUILD_ON/src/libtent.so" "$BUILD_ON/benchmark/tebench"; do
  if ! readelf -d "$bin" | grep -q 'NEEDED.*\[libmpcomm\.so\.1\]'; then
    echo "run_tests: $bin has no DT_NEEDED on libmpcomm.so.1" >&2
    exit 1
  fi
  echo "$(basename "$bin"): NEEDED libmpcomm.so.1"
done

step "tebench smoke over mpcomm"
"$ROOT/scripts/tebench_pair.sh" "$BUILD_ON/benchmark/tebench" mpcomm \
  --op_type=mix --check_consistency=true \
  --start_block_size=65536 --max_block_size=262144 \
  --start_batch_size=4 --max_batch_size=4 \
  --start_num_threads=2 --max_num_threads=2 --duration=1

step "ctest (USE_MPCOMM=ON, softmpcomm)"
# With a provider present the functional suite must run, not skip.
TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1 \
  ctest --test-dir "$BUILD_ON" --output-on-failure -j"$JOBS"

step "wheel: build_wheel.sh from the ON build, installed into a fresh venv"
BUILD_DIR="$BUILD_ON" MPCOMM_ROOT="$SOFT_PREFIX" python3 "$ROOT/tests/wheel/wheel_test.py"

if cuda_toolkit_root >/dev/null; then
  build_softmpcomm_cuda
  # The suites whose code differs under USE_CUDA (the CUDA platform, device
  # locations, staging through device memory, the MPComm transport's
  # device-buffer path, upstream's MPComm tests) and tebench; the rest run
  # the same code as the ON build above.
  CUDA_SUITES=(tent_platform_test tent_memory_location_test
    tent_engine_memory_test tent_policy_test tent_routing_test
    tent_tcp_staging_test tent_mpcomm_boundary_test tent_mpcomm_transport_test)
  build_cuda tent tebench "${CUDA_SUITES[@]}"
  step "ctest (USE_CUDA=ON, softmpcomm): ${CUDA_SUITES[*]}"
  # Suites that need a device skip with the reason printed (GTEST_SKIP).
  cuda_regex="^($(IFS='|'; echo "${CUDA_SUITES[*]}"))\$"
  ctest --test-dir "$BUILD_CUDA" --output-on-failure -j"$JOBS" -R "$cuda_regex" \
    --no-tests=error
else
  echo "run_tests: USE_CUDA=ON build skipped: no CUDA toolkit (no nvcc under CUDAToolkit_ROOT, CUDA_PATH, PATH or /usr/local/cuda)"
fi

step "upstream_check.sh: the units in Mooncake's tree, and Mooncake's own tests of them"
UPSTREAM="$ROOT/../shared/upstream/mooncake-3b5a594"
if [ -d "$UPSTREAM" ]; then
  "$ROOT/scripts/upstream_check.sh" "$UPSTREAM" --build "$BUILD_OFF" --build "$BUILD_ON"
else
  echo "run_tests: upstream_check.sh skipped: no Mooncake snapshot at $UPSTREAM (only the project's own machines keep one beside the checkout)"
fi

if [ "$CHECKS" = none ]; then
  step "CHECKS=none: sanitizer passes and fuzz smoke left out"
  exit 0
fi
scope=ci
if [ "$CHECKS" = all ]; then scope=all; fi
CHECK_SCOPE="$scope" bash "$ROOT/scripts/check.sh" asan
CHECK_SCOPE="$scope" bash "$ROOT/scripts/check.sh" tsan

build_fuzz
step "fuzz smoke (ctest -L fuzz)"
ctest --test-dir "$BUILD_FUZZ" --output-on-failure -L fuzz -j"$JOBS"
