# ctest driver (cmake -P): installs the build into a scratch prefix, checks
# the layout (libtent.so and libtent_shared.so -> .so.<major> ->
# .so.<version>, headers, CMake package, tent.pc), then builds the plain-C two_engines.c against the
# installed files twice (find_package and pkg-config) and runs both.
# Inputs: BUILD_DIR, WORK_DIR, CONSUMER_DIR, SOURCE, VERSION, SOVERSION,
# C_COMPILER, CXX_COMPILER, SAN_FLAGS (a consumer of a sanitized library
# is sanitized too: ASan must be the first library loaded).
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
    endif()
    message(STATUS "${out}")
endfunction()

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

foreach(f include/tent/transfer_engine.h include/tent/common/types.h
          lib/libtent.so.${VERSION} lib/cmake/tent/tentConfig.cmake
          lib/cmake/tent/tentConfigVersion.cmake
          lib/cmake/tent/tentTargets.cmake lib/pkgconfig/tent.pc)
    if(NOT EXISTS "${prefix}/${f}")
        message(FATAL_ERROR "missing ${prefix}/${f}")
    endif()
endforeach()
foreach(pair "libtent.so=libtent.so.${SOVERSION}"
             "libtent_shared.so=libtent.so.${SOVERSION}"
             "libtent.so.${SOVERSION}=libtent.so.${VERSION}")
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 link)
    list(GET pair 1 expected)
    if(NOT IS_SYMLINK "${prefix}/lib/${link}")
        message(FATAL_ERROR "lib/${link} is not a symlink")
    endif()
    file(READ_SYMLINK "${prefix}/lib/${link}" target)
    if(NOT target STREQUAL expected)
        message(FATAL_ERROR "lib/${link} -> ${target}, expected ${expected}")
    endif()
endforeach()
# The transports stay inside libtent: nothing else is installed
# (libtent_shared.so is upstream's name for it, a link).
file(GLOB libs RELATIVE "${prefix}/lib" "${prefix}/lib/*.so*")
list(SORT libs)
set(expected_libs libtent.so libtent.so.${SOVERSION} libtent.so.${VERSION}
                  libtent_shared.so)
if(NOT libs STREQUAL expected_libs)
    message(FATAL_ERROR "lib/ holds ${libs}, expected ${expected_libs}")
endif()

set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig")
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer"
    -DCMAKE_PREFIX_PATH=${prefix} -DTWO_ENGINES_SOURCE=${SOURCE}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    "-DCMAKE_C_FLAGS=${SAN_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SAN_FLAGS}"
    -DCMAKE_BUILD_RPATH=${prefix}/lib)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")

foreach(exe two_engines_cmake two_engines_pkgconfig)
    # Linked against the installed library, not the build tree's.
    execute_process(COMMAND ldd "${WORK_DIR}/consumer/${exe}"
                    OUTPUT_VARIABLE ldd_out)
    string(REGEX MATCH "libtent.so.${SOVERSION} => ([^ ]+)" _ "${ldd_out}")
    if(NOT CMAKE_MATCH_1 STREQUAL "${prefix}/lib/libtent.so.${SOVERSION}")
        message(FATAL_ERROR "${exe} loads libtent from '${CMAKE_MATCH_1}', "
                            "not from ${prefix}/lib")
    endif()
    run("${WORK_DIR}/consumer/${exe}")
endforeach()
message(STATUS "installed C API: layout, find_package and pkg-config OK")
