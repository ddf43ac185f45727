#!/usr/bin/env bash
# Builds the mooncake-transfer-engine wheel (docs/python.md, Install).
#
# CMake builds the Python extensions (everything under <build>/python:
# the mooncake package and any top-level module such as tent); they are
# staged with libtent bundled in mooncake_transfer_engine.libs/ and their
# RUNPATH set to $ORIGIN-relative paths, then setuptools packs the wheel
# with Debian's python3-build/-wheel/-setuptools (no isolation, nothing
# downloaded). libmpcomm is never bundled: with USE_MPCOMM=ON the engine
# extension keeps its DT_NEEDED on libmpcomm.so.<N>, found at run time.
# scripts/wheel_check.py then checks those guarantees (auditwheel's job,
# which Debian does not package) and prints the wheel's contents.
#
# Env:
#   BUILD_DIR    an existing CMake build dir to reuse (its USE_MPCOMM and
#                MPCOMM_ROOT are used); default: build-wheel, configured here
#   USE_MPCOMM   ON (default) or OFF, for a build dir configured here
#   MPCOMM_ROOT  MPComm prefix (include/mpcomm.h, lib/libmpcomm.so), needed
#                with USE_MPCOMM=ON for a build dir configured here
#   OUT_DIR      where the wheel goes (default <build>/wheel/dist)
#   PYTHON       interpreter that packs the wheel and whose tag it gets
#                (default /usr/bin/python3, Debian's)
#   STRIP        1 (default): strip debug info from the packed libraries
#   JOBS         parallel build jobs (default nproc)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc)}"
STRIP="${STRIP:-1}"
LIBS_DIR=mooncake_transfer_engine.libs

die() {
  echo "build_wheel: $*" >&2
  exit 1
}

if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  [ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
fi
"$PYTHON" -c 'import build, setuptools, wheel' 2>/dev/null ||
  die "$PYTHON lacks the build, setuptools or wheel module; install Debian's python3-build python3-setuptools python3-wheel (scripts/install_deps.sh), or set PYTHON"
for tool in patchelf readelf ldd; do
  command -v "$tool" >/dev/null || die "$tool not found; run scripts/install_deps.sh"
done

# The build dir: reuse one, or configure build-wheel.
cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt"; }
if [ -n "${BUILD_DIR:-}" ] && [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
  cached="$(cache_get USE_MPCOMM)"
  case "$cached" in ON | TRUE | 1) cached=ON ;; *) cached=OFF ;; esac
  if [ -n "${USE_MPCOMM:-}" ] && [ "$USE_MPCOMM" != "$cached" ]; then
    die "USE_MPCOMM=$USE_MPCOMM, but $BUILD_DIR was configured with USE_MPCOMM=$cached"
  fi
  USE_MPCOMM="$cached"
  MPCOMM_ROOT="$(cache_get MPCOMM_ROOT)"
  echo "==> reusing $BUILD_DIR (USE_MPCOMM=$USE_MPCOMM)"
else
  [ -n "${BUILD_DIR:-}" ] && die "BUILD_DIR=$BUILD_DIR has no CMakeCache.txt (configure it first, or leave BUILD_DIR unset)"
  BUILD_DIR="$ROOT/build-wheel"
  USE_MPCOMM="${USE_MPCOMM:-ON}"
  case "$USE_MPCOMM" in ON | OFF) ;; *) die "USE_MPCOMM must be ON or OFF, got '$USE_MPCOMM'" ;; esac
  if [ "$USE_MPCOMM" = ON ] && [ -z "${MPCOMM_ROOT:-}" ]; then
    die "USE_MPCOMM=ON needs MPCOMM_ROOT (the MPComm prefix with include/mpcomm.h and lib/libmpcomm.so)"
  fi
  echo "==> configure $BUILD_DIR (USE_MPCOMM=$USE_MPCOMM)"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBUILD_UNIT_TESTS=OFF -DBUILD_PYTHON=ON -DPython3_EXECUTABLE="$PYTHON" \
    -DUSE_MPCOMM="$USE_MPCOMM" ${MPCOMM_ROOT:+-DMPCOMM_ROOT="$MPCOMM_ROOT"}
fi
echo "==> build $BUILD_DIR"
cmake --build "$BUILD_DIR" -j"$JOBS"

PY_BUILD="$BUILD_DIR/python"
ls "$PY_BUILD"/mooncake/engine*.so >/dev/null 2>&1 ||
  die "no $PY_BUILD/mooncake/engine*.so: the Python module was not built (is pybind11-dev installed? BUILD_PYTHON=ON?)"
MPCOMM_SONAME=""
if [ "$USE_MPCOMM" = ON ]; then
  MPCOMM_SONAME="$(readelf -dW "$BUILD_DIR/src/libtent.so" |
    sed -n 's/.*(NEEDED).*\[\(libmpcomm\.so\.[0-9]*\)\]/\1/p')"
  [ -n "$MPCOMM_SONAME" ] || die "$BUILD_DIR/src/libtent.so has no DT_NEEDED on libmpcomm.so.<N>, although USE_MPCOMM=ON"
fi

# Stage: the Python files CMake laid out, then the libraries they load from
# the build tree, then RUNPATHs relative to $ORIGIN.
WHEEL_WORK="$BUILD_DIR/wheel"
STAGE="$WHEEL_WORK/stage"
PAYLOAD="$STAGE/payload"
rm -rf "$STAGE"
mkdir -p "$PAYLOAD/$LIBS_DIR"
(cd "$PY_BUILD" && find . \( -name CMakeFiles -o -name tests \) -prune -o -type f \
  \( -name '*.so' -o -name '*.py' -o -name '*.pyi' -o -name py.typed \) -print) |
  while read -r rel; do
    mkdir -p "$PAYLOAD/$(dirname "$rel")"
    cp "$PY_BUILD/$rel" "$PAYLOAD/$rel"
  done
if ls "$PAYLOAD"/mooncake/*.pyi >/dev/null 2>&1; then
  : >"$PAYLOAD/mooncake/py.typed" # PEP 561: the package ships its stubs
fi

mapfile -t extensions < <(cd "$PAYLOAD" && find . -path "./$LIBS_DIR" -prune -o -type f -name '*.so' -print)
# Libraries resolved into the build tree (libtent) are bundled; system
# libraries and libmpcomm are not.
for ext in "${extensions[@]}"; do
  env -u LD_LIBRARY_PATH ldd "$PY_BUILD/$ext" | awk '$2 == "=>" { print $1, $3 }'
done | sort -u | while read -r name path; do
  case "$name" in libmpcomm.so*) continue ;; esac
  real="$(readlink -f "$path" 2>/dev/null || true)"
  case "$real" in
    "$BUILD_DIR"/*) cp "$real" "$PAYLOAD/$LIBS_DIR/$name" ;;
  esac
done
[ -f "$PAYLOAD/$LIBS_DIR/libtent.so.0" ] ||
  die "libtent.so.0 was not found through the extensions' RUNPATH in $BUILD_DIR"

for lib in "$PAYLOAD/$LIBS_DIR"/*; do
  chmod u+w "$lib"
  [ "$STRIP" = 1 ] && strip --strip-debug "$lib"
  patchelf --set-rpath "\$ORIGIN" "$lib"
done
for ext in "${extensions[@]}"; do
  depth="$(dirname "${ext#./}")"
  up=""
  [ "$depth" = . ] || up="$(echo "$depth/" | sed 's|[^/]*/|../|g')"
  chmod u+w "$PAYLOAD/$ext"
  [ "$STRIP" = 1 ] && strip --strip-debug "$PAYLOAD/$ext"
  patchelf --set-rpath "\$ORIGIN/$up$LIBS_DIR" "$PAYLOAD/$ext"
done

# Pack with setuptools; the version is the CMake project's.
VERSION="$(sed -n 's/^project([^)]*VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")"
[ -n "$VERSION" ] || die "no project(... VERSION x.y.z) in $ROOT/CMakeLists.txt"
cp "$ROOT/python/pyproject.toml" "$ROOT/python/setup.py" "$STAGE/"
echo "==> pack mooncake-transfer-engine $VERSION with $PYTHON"
TENT_WHEEL_VERSION="$VERSION" "$PYTHON" -m build --no-isolation --wheel \
  --outdir "$STAGE/dist" "$STAGE" >"$WHEEL_WORK/pack.log" 2>&1 ||
  { cat "$WHEEL_WORK/pack.log" >&2; die "packing failed (log above)"; }
wheels=("$STAGE"/dist/*.whl)
if [ "${#wheels[@]}" != 1 ] || [ ! -f "${wheels[0]}" ]; then
  die "expected one wheel in $STAGE/dist, found: ${wheels[*]}"
fi

OUT_DIR="${OUT_DIR:-$WHEEL_WORK/dist}"
mkdir -p "$OUT_DIR"
WHEEL="$(cd "$OUT_DIR" && pwd)/$(basename "${wheels[0]}")"
mv -f "${wheels[0]}" "$WHEEL"

echo "==> check $WHEEL"
if [ "$USE_MPCOMM" = ON ]; then
  "$PYTHON" "$ROOT/scripts/wheel_check.py" "$WHEEL" --mpcomm-soname "$MPCOMM_SONAME"
else
  "$PYTHON" "$ROOT/scripts/wheel_check.py" "$WHEEL" --no-mpcomm
fi
echo "build_wheel: $WHEEL"
