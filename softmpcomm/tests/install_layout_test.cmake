# ctest driver (cmake -P): installs the build into a scratch prefix, checks
# the layout the real libmpcomm has, then builds and runs a consumer through
# find_package and checks that another major version is refused.
# Inputs: BUILD_DIR, WORK_DIR, CONSUMER_DIR, CONSUMER_CXX_FLAGS (the build's
# own flags: a consumer of a sanitized library must be sanitized too).
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
    endif()
endfunction()

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

foreach(f include/mpcomm.h lib/libmpcomm.so.1.4.0
          lib/cmake/MPComm/MPCommConfig.cmake
          lib/cmake/MPComm/MPCommConfigVersion.cmake)
    if(NOT EXISTS "${prefix}/${f}")
        message(FATAL_ERROR "missing ${prefix}/${f}")
    endif()
endforeach()
foreach(pair "libmpcomm.so=libmpcomm.so.1" "libmpcomm.so.1=libmpcomm.so.1.4.0")
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

run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer"
    -DCMAKE_PREFIX_PATH=${prefix} -DREQUESTED_VERSION=1.4
    "-DCMAKE_CXX_FLAGS=${CONSUMER_CXX_FLAGS}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("${WORK_DIR}/consumer/mpcomm_consumer")

execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_DIR}"
                -B "${WORK_DIR}/consumer2" -DCMAKE_PREFIX_PATH=${prefix}
                -DREQUESTED_VERSION=2.0
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "version: 1.4.0")
    message(FATAL_ERROR "find_package(MPComm 2.0) should fail naming 1.4.0:\n${err}")
endif()
message(STATUS "install layout and package config OK")
