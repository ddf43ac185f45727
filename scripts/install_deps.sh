#!/usr/bin/env bash
# Installs the Debian packages this tree builds against, when missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libgoogle-glog-dev libgflags-dev libjsoncpp-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libasio-dev libibverbs-dev libnuma-dev libcpp-httplib-dev
  pybind11-dev python3-dev python3 python3-pytest python3-numpy
  binutils procps valgrind
  clang llvm libclang-rt-dev
  libhiredis-dev libcurl4-openssl-dev redis-server etcd-server python3-aiohttp
  prometheus ccache
  python3-build python3-wheel python3-setuptools python3-venv patchelf
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
