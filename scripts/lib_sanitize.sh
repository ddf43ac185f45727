# Sanitizer and fuzzing builds for scripts/check.sh, scripts/fuzz.sh and
# scripts/run_tests.sh; source it after lib_build.sh, don't run it.
#   BUILD_FUZZ       libFuzzer targets (clang)    (default build-fuzz)
#   BUILD_FUZZ_SOFT  softmpcomm's fuzzer (clang)  (default build-fuzz-softmpcomm)
#   BUILD_SAN_PREFIX sanitizer build dirs: <prefix>-<asan|tsan>-{off,soft,on}
#                    and .prefix/softmpcomm-<asan|tsan>   (default build-san)
BUILD_FUZZ="${BUILD_FUZZ:-$ROOT/build-fuzz}"
BUILD_FUZZ_SOFT="${BUILD_FUZZ_SOFT:-$ROOT/build-fuzz-softmpcomm}"
BUILD_SAN_PREFIX="${BUILD_SAN_PREFIX:-$ROOT/build-san}"
SOFTMPCOMM_SRC="${SOFTMPCOMM_SRC:-$ROOT/softmpcomm}"

FUZZ_TARGETS=(fuzz_mpcomm_port fuzz_mpcomm_endpoint fuzz_config_loader
              fuzz_segment_decoder fuzz_rpc_frame fuzz_tcp_wire
              fuzz_notification_record)

build_fuzz() {
  step "configure + build the fuzz targets (clang, TENT_FUZZ=ON) in $BUILD_FUZZ"
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD_FUZZ" -DTENT_FUZZ=ON \
    -DBUILD_UNIT_TESTS=OFF -DBUILD_PYTHON=OFF "${LAUNCHER_ARGS[@]}" >/dev/null
  cmake --build "$BUILD_FUZZ" -j"$JOBS" --target "${FUZZ_TARGETS[@]}"
}

build_fuzz_softmpcomm() {
  step "configure + build softmpcomm's fuzzer (clang) in $BUILD_FUZZ_SOFT"
  CC=clang CXX=clang++ cmake -S "$SOFTMPCOMM_SRC" -B "$BUILD_FUZZ_SOFT" \
    -DSOFTMPCOMM_FUZZ=ON "${LAUNCHER_ARGS[@]}" >/dev/null
  cmake --build "$BUILD_FUZZ_SOFT" -j"$JOBS"
}
