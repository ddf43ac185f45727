# Shared build steps for the README commands; source it, don't run it.
#   ROOT            repository root
#   JOBS            parallel build jobs (default: nproc)
#   BUILD_OFF       USE_MPCOMM=OFF build dir      (default build)
#   BUILD_SOFT      softmpcomm build dir          (default build-softmpcomm)
#   SOFT_PREFIX     softmpcomm install prefix     (default .prefix/softmpcomm)
#   BUILD_ON        USE_MPCOMM=ON build dir       (default build-mpcomm)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc)}"
BUILD_OFF="${BUILD_OFF:-$ROOT/build}"
BUILD_SOFT="${BUILD_SOFT:-$ROOT/build-softmpcomm}"
SOFT_PREFIX="${SOFT_PREFIX:-$ROOT/.prefix/softmpcomm}"
BUILD_ON="${BUILD_ON:-$ROOT/build-mpcomm}"

# ccache, where installed (scripts/install_deps.sh installs it), compiles
# each translation unit once for the OFF, ON and CUDA builds of one run:
# most of them preprocess to the same text in all three. TENT_CCACHE=0
# turns it off. Paths are hashed relative to ROOT, so build dirs and
# checkouts under one ROOT share entries.
LAUNCHER_ARGS=()
if [ "${TENT_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  LAUNCHER_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi

# step NAME: a banner with the seconds since the first step, so that a CI
# log shows where the time goes.
TENT_STEP_T0="${TENT_STEP_T0:-$(date +%s)}"
export TENT_STEP_T0
step() { echo; echo "==> [$(($(date +%s) - TENT_STEP_T0))s] $*"; }

build_off() {
  step "configure + build USE_MPCOMM=OFF in $BUILD_OFF"
  cmake -S "$ROOT" -B "$BUILD_OFF" -DUSE_MPCOMM=OFF -DBUILD_UNIT_TESTS=ON \
    "${LAUNCHER_ARGS[@]}"
  cmake --build "$BUILD_OFF" -j"$JOBS"
}

build_softmpcomm() {
  step "build softmpcomm and install it into $SOFT_PREFIX"
  cmake -S "$ROOT/softmpcomm" -B "$BUILD_SOFT" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "${LAUNCHER_ARGS[@]}"
  cmake --build "$BUILD_SOFT" -j"$JOBS"
  cmake --install "$BUILD_SOFT" --prefix "$SOFT_PREFIX" >/dev/null
}

# build_on [target...]: everything by default, else just the named targets.
build_on() {
  step "configure + build USE_MPCOMM=ON against $SOFT_PREFIX in $BUILD_ON"
  cmake -S "$ROOT" -B "$BUILD_ON" -DUSE_MPCOMM=ON -DMPCOMM_ROOT="$SOFT_PREFIX" \
    -DBUILD_UNIT_TESTS=ON "${LAUNCHER_ARGS[@]}"
  cmake --build "$BUILD_ON" -j"$JOBS" ${1:+--target "$@"}
  export LD_LIBRARY_PATH="$SOFT_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# USE_CUDA=ON (the CUDA platform) with MPComm against softmpcomm built
# with CUDA (it stages device memory itself), in build dirs of their own:
#   BUILD_CUDA       USE_CUDA=ON build dir              (default build-cuda)
#   BUILD_SOFT_CUDA  softmpcomm with CUDA build dir     (default build-softmpcomm-cuda)
#   SOFT_CUDA_PREFIX its install prefix                 (default .prefix/softmpcomm-cuda)
BUILD_CUDA="${BUILD_CUDA:-$ROOT/build-cuda}"
BUILD_SOFT_CUDA="${BUILD_SOFT_CUDA:-$ROOT/build-softmpcomm-cuda}"
SOFT_CUDA_PREFIX="${SOFT_CUDA_PREFIX:-$ROOT/.prefix/softmpcomm-cuda}"

# cuda_toolkit_root: prints the toolkit CMake's FindCUDAToolkit would find
# (CUDAToolkit_ROOT, CUDA_PATH, nvcc on PATH, /usr/local/cuda); fails where
# there is none.
cuda_toolkit_root() {
  local dir
  for dir in "${CUDAToolkit_ROOT:-}" "${CUDA_PATH:-}"; do
    if [ -n "$dir" ] && [ -x "$dir/bin/nvcc" ]; then echo "$dir"; return 0; fi
  done
  if command -v nvcc >/dev/null 2>&1; then
    dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"
    return 0
  fi
  if [ -x /usr/local/cuda/bin/nvcc ]; then echo /usr/local/cuda; return 0; fi
  return 1
}

# build_softmpcomm_cuda: softmpcomm with SOFTMPCOMM_USE_CUDA=ON (its own
# suite is run by build_softmpcomm's configuration, so it is not built here).
build_softmpcomm_cuda() {
  local toolkit
  toolkit="$(cuda_toolkit_root)"
  step "build softmpcomm with CUDA (toolkit $toolkit) into $SOFT_CUDA_PREFIX"
  cmake -S "$ROOT/softmpcomm" -B "$BUILD_SOFT_CUDA" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTMPCOMM_BUILD_TESTS=OFF \
    -DSOFTMPCOMM_USE_CUDA=ON -DCUDAToolkit_ROOT="$toolkit" "${LAUNCHER_ARGS[@]}"
  cmake --build "$BUILD_SOFT_CUDA" -j"$JOBS"
  cmake --install "$BUILD_SOFT_CUDA" --prefix "$SOFT_CUDA_PREFIX" >/dev/null
}

# build_cuda [target...]: everything by default, else just the named targets.
build_cuda() {
  local toolkit
  toolkit="$(cuda_toolkit_root)"
  step "configure + build USE_CUDA=ON (toolkit $toolkit) against $SOFT_CUDA_PREFIX in $BUILD_CUDA"
  cmake -S "$ROOT" -B "$BUILD_CUDA" -DUSE_CUDA=ON -DCUDAToolkit_ROOT="$toolkit" \
    -DUSE_MPCOMM=ON -DMPCOMM_ROOT="$SOFT_CUDA_PREFIX" -DBUILD_UNIT_TESTS=ON \
    "${LAUNCHER_ARGS[@]}"
  cmake --build "$BUILD_CUDA" -j"$JOBS" ${1:+--target "$@"}
  export LD_LIBRARY_PATH="$SOFT_CUDA_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
