#!/usr/bin/env bash
# Configure-time checks for USE_MPCOMM / MPCOMM_ROOT.
#
#   mpcomm_configure_test.sh <case> <source dir> <work dir>
#
# Builds a fake MPComm prefix for <case>, configures the tree against it and
# checks both the outcome (success or failure) and the exact message.
set -uo pipefail

CASE="$1"
SRC="$2"
WORK="$3"
rm -rf "$WORK"
mkdir -p "$WORK"
PREFIX="$WORK/prefix"

make_header() { mkdir -p "$PREFIX/include"; echo "// fake" >"$PREFIX/include/mpcomm.h"; }
make_library() { # $1: lib or lib64
  mkdir -p "$PREFIX/$1"
  : >"$PREFIX/$1/libmpcomm.so.1.4.0"
  ln -sf libmpcomm.so.1.4.0 "$PREFIX/$1/libmpcomm.so.1"
  ln -sf libmpcomm.so.1 "$PREFIX/$1/libmpcomm.so"
}
make_version() { # $1: version
  mkdir -p "$PREFIX/lib/cmake/MPComm"
  cat >"$PREFIX/lib/cmake/MPComm/MPCommConfigVersion.cmake" <<EOV
set(PACKAGE_VERSION "$1")
if(PACKAGE_FIND_VERSION)
  string(REGEX MATCH "^[0-9]+" _found_major "\${PACKAGE_VERSION}")
  if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION
     OR NOT _found_major STREQUAL PACKAGE_FIND_VERSION_MAJOR)
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
endif()
EOV
  echo "set(MPComm_FOUND TRUE)" >"$PREFIX/lib/cmake/MPComm/MPCommConfig.cmake"
}

ARGS=(-DUSE_MPCOMM=ON -DBUILD_UNIT_TESTS=OFF -DBUILD_PYTHON=OFF)
EXPECT_RC=1
EXPECT=()
case "$CASE" in
  missing_root)
    EXPECT=("USE_MPCOMM=ON requires MPCOMM_ROOT to point at the MPComm install prefix")
    ;;
  missing_prefix)
    ARGS+=(-DMPCOMM_ROOT="$WORK/does-not-exist")
    EXPECT=("MPComm not found under MPCOMM_ROOT=$WORK/does-not-exist")
    ;;
  headers_only)
    make_header
    ARGS+=(-DMPCOMM_ROOT="$PREFIX")
    EXPECT=("MPComm not found under MPCOMM_ROOT=$PREFIX")
    ;;
  v1_3)
    make_header; make_library lib; make_version 1.3.0
    ARGS+=(-DMPCOMM_ROOT="$PREFIX")
    EXPECT=("MPComm version 1.3.0 found under MPCOMM_ROOT=$PREFIX" "required >= 1.4 with major")
    ;;
  v2_0)
    make_header; make_library lib; make_version 2.0.0
    ARGS+=(-DMPCOMM_ROOT="$PREFIX")
    EXPECT=("MPComm version 2.0.0 found under MPCOMM_ROOT=$PREFIX" "required >= 1.4 with major")
    ;;
  unknown)
    # Header and library copied in without the package config (lib64).
    make_header; make_library lib64
    ARGS+=(-DMPCOMM_ROOT="$PREFIX")
    EXPECT_RC=0
    EXPECT=("-- MPComm version: unknown" "-- MPComm transport is enabled"
            "--   MPComm include: $PREFIX/include"
            "--   MPComm library: $PREFIX/lib64/libmpcomm.so")
    ;;
  good)
    make_header; make_library lib; make_version 1.4.0
    ARGS+=(-DMPCOMM_ROOT="$PREFIX")
    EXPECT_RC=0
    EXPECT=("-- MPComm version: 1.4.0" "-- MPComm transport is enabled"
            "--   MPComm include: $PREFIX/include"
            "--   MPComm library: $PREFIX/lib/libmpcomm.so")
    ;;
  *)
    echo "unknown case '$CASE'" >&2
    exit 2
    ;;
esac

cmake -S "$SRC" -B "$WORK/build" "${ARGS[@]}" >"$WORK/log" 2>&1
RC=$?
# CMake wraps long messages; join the lines before matching.
JOINED="$(tr -s ' \n' '  ' <"$WORK/log")"
FAIL=0
if { [ $EXPECT_RC -eq 0 ] && [ $RC -ne 0 ]; } || { [ $EXPECT_RC -ne 0 ] && [ $RC -eq 0 ]; }; then
  echo "case $CASE: cmake exited $RC, expected $([ $EXPECT_RC -eq 0 ] && echo success || echo failure)"
  FAIL=1
fi
for line in "${EXPECT[@]}"; do
  if [ $EXPECT_RC -eq 0 ]; then
    grep -qxF -- "$line" "$WORK/log" || { echo "case $CASE: missing line: $line"; FAIL=1; }
  else
    case "$JOINED" in
      *"$line"*) ;;
      *) echo "case $CASE: missing message: $line"; FAIL=1 ;;
    esac
  fi
done
if [ $FAIL -ne 0 ]; then
  echo "---- cmake output ----"
  cat "$WORK/log"
  exit 1
fi
echo "case $CASE: ok (cmake exited $RC)"
