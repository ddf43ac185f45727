# MPComm discovery (USE_MPCOMM=ON).
#
# Resolves include/mpcomm.h and lib/libmpcomm.so (lib64 too) under
# MPCOMM_ROOT, checks the package version when the prefix ships MPComm's
# CMake package config (>= 1.4, major 1: MPComm declares SameMajorVersion,
# so another major is an ABI break), and exports:
#   MPCOMM_INCLUDE_DIR, MPCOMM_LIBRARY (absolute path), TENT_HAVE_MPCOMM.
set(TENT_HAVE_MPCOMM OFF)
if(NOT USE_MPCOMM)
  return()
endif()

set(TENT_MPCOMM_MIN_VERSION 1.4)
set(TENT_MPCOMM_REQUIRED_MAJOR 1)

if(NOT MPCOMM_ROOT)
  message(FATAL_ERROR
    "USE_MPCOMM=ON requires MPCOMM_ROOT to point at the MPComm install prefix")
endif()

find_path(MPCOMM_INCLUDE_DIR mpcomm.h
  PATHS ${MPCOMM_ROOT}/include NO_DEFAULT_PATH)
find_library(MPCOMM_LIBRARY NAMES mpcomm
  PATHS ${MPCOMM_ROOT}/lib ${MPCOMM_ROOT}/lib64 NO_DEFAULT_PATH)
if(NOT MPCOMM_INCLUDE_DIR OR NOT MPCOMM_LIBRARY)
  message(FATAL_ERROR
    "MPComm not found under MPCOMM_ROOT=${MPCOMM_ROOT} "
    "(need include/mpcomm.h and lib/libmpcomm.so or lib64/libmpcomm.so; "
    "CMake caches these results: re-run with -UMPCOMM_LIBRARY -UMPCOMM_INCLUDE_DIR)")
endif()

# The package config is optional: a prefix with only the header and the
# library copied into it reports "unknown" and is not checked.
set(TENT_MPCOMM_VERSION "unknown")
set(_mpcomm_config_dir "")
foreach(_libdir lib lib64)
  if(EXISTS "${MPCOMM_ROOT}/${_libdir}/cmake/MPComm/MPCommConfigVersion.cmake")
    set(_mpcomm_config_dir "${MPCOMM_ROOT}/${_libdir}/cmake/MPComm")
    break()
  endif()
endforeach()
if(_mpcomm_config_dir)
  # Ask the version file itself, without a requested version, so that an
  # incompatible install is reported with both numbers rather than
  # rejected by find_package as "not found".
  set(PACKAGE_FIND_VERSION "")
  include("${_mpcomm_config_dir}/MPCommConfigVersion.cmake")
  set(TENT_MPCOMM_VERSION "${PACKAGE_VERSION}")
  string(REGEX MATCH "^[0-9]+" _mpcomm_major "${TENT_MPCOMM_VERSION}")
  if(NOT _mpcomm_major STREQUAL "${TENT_MPCOMM_REQUIRED_MAJOR}"
     OR TENT_MPCOMM_VERSION VERSION_LESS TENT_MPCOMM_MIN_VERSION)
    message(FATAL_ERROR
      "MPComm version ${TENT_MPCOMM_VERSION} found under MPCOMM_ROOT=${MPCOMM_ROOT} "
      "is not supported: required >= ${TENT_MPCOMM_MIN_VERSION} with major "
      "version ${TENT_MPCOMM_REQUIRED_MAJOR}")
  endif()
endif()

set(TENT_HAVE_MPCOMM ON)
message(STATUS "MPComm version: ${TENT_MPCOMM_VERSION}")
message(STATUS "MPComm transport is enabled")
message(STATUS "  MPComm include: ${MPCOMM_INCLUDE_DIR}")
message(STATUS "  MPComm library: ${MPCOMM_LIBRARY}")
