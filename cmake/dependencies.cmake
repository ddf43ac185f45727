# Third-party dependencies, all from Debian packages
# (scripts/install_deps.sh installs them).
find_package(Threads REQUIRED)
find_package(gflags REQUIRED)
find_package(glog REQUIRED)
find_package(jsoncpp REQUIRED)
# The cluster token's HMAC-SHA256 and nonces (src/net/auth_handshake.cpp).
find_package(OpenSSL REQUIRED)
if(TARGET jsoncpp_lib)
  set(TENT_JSONCPP_TARGET jsoncpp_lib)
else()
  set(TENT_JSONCPP_TARGET jsoncpp_static)
endif()
find_path(ASIO_INCLUDE_DIR asio.hpp REQUIRED)
find_library(IBVERBS_LIBRARY ibverbs REQUIRED)
find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h REQUIRED)
find_library(NUMA_LIBRARY numa REQUIRED)
find_path(NUMA_INCLUDE_DIR numa.h REQUIRED)
# With the tests on, the module is required: its suite (tent_python_test)
# must not vanish because pybind11 is missing. Configure with
# -DBUILD_PYTHON=OFF to build without it.
if(BUILD_PYTHON)
  if(BUILD_UNIT_TESTS)
    set(_tent_python_mode REQUIRED)
  else()
    set(_tent_python_mode QUIET)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development ${_tent_python_mode})
  find_package(pybind11 CONFIG ${_tent_python_mode})
endif()

# The metrics HTTP endpoint (src/metrics/metrics_http_server.cpp) serves
# through Debian's cpp-httplib; its pkg-config flags match how it was built.
find_package(PkgConfig REQUIRED)
pkg_check_modules(TENT_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
