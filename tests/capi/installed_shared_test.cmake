# ctest driver (cmake -P): a client that probes for upstream's install.
# Installs the build into a scratch prefix, checks libtent_shared.so is the
# second name of libtent (a link to libtent.so.<major>), then builds the C
# program two_engines.c and the C++ program two_engines.cpp with nothing but
# -I<prefix>/include -L<prefix>/lib -ltent_shared (no pkg-config, no CMake
# package, no jsoncpp/glog include path, no LD_LIBRARY_PATH while linking),
# checks both record DT_NEEDED libtent.so.<major> exactly as -ltent does,
# and runs both: two processes each, bytes moved and checked.
# Inputs: BUILD_DIR, WORK_DIR, C_SOURCE, CXX_SOURCE, SOVERSION, C_COMPILER,
# CXX_COMPILER, SAN_FLAGS (a consumer of a sanitized library is sanitized
# too: ASan must be the first library loaded).
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(soname "libtent.so.${SOVERSION}")
separate_arguments(san UNIX_COMMAND "${SAN_FLAGS}")

# run(<what> <command...>): the command's stdout; fails the test naming
# <what> when the command fails. The environment carries no
# LD_LIBRARY_PATH: the installed RUNPATH has to be enough.
function(run out_var what)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
                            ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}\n${out}\n${err}")
    endif()
    set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

run(_ "install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

if(NOT IS_SYMLINK "${prefix}/lib/libtent_shared.so")
    message(FATAL_ERROR "lib/libtent_shared.so is missing or not a symlink")
endif()
file(READ_SYMLINK "${prefix}/lib/libtent_shared.so" target)
if(NOT target STREQUAL soname)
    message(FATAL_ERROR "lib/libtent_shared.so -> ${target}, expected "
                        "${soname}")
endif()

set(inc -I "${prefix}/include")
set(lib -L "${prefix}/lib")
run(_ "C client, -ltent_shared" "${C_COMPILER}" ${san} ${inc} "${C_SOURCE}"
    ${lib} -ltent_shared -o "${WORK_DIR}/two_engines_c")
run(_ "C++ client, -ltent_shared" "${CXX_COMPILER}" -std=c++17 ${san} ${inc}
    "${CXX_SOURCE}" ${lib} -ltent_shared -o "${WORK_DIR}/two_engines_cxx")
run(_ "C client, -ltent" "${C_COMPILER}" ${san} ${inc} "${C_SOURCE}" ${lib}
    -ltent -o "${WORK_DIR}/two_engines_c_ltent")

# One library under two names: every client needs the SONAME, none the
# link name it was linked through.
foreach(exe two_engines_c two_engines_cxx two_engines_c_ltent)
    run(dyn "readelf ${exe}" readelf -d "${WORK_DIR}/${exe}")
    string(REGEX MATCHALL "Shared library: \\[libtent[^]]*\\]" needed
           "${dyn}")
    if(NOT needed STREQUAL "Shared library: [${soname}]")
        message(FATAL_ERROR "${exe} needs '${needed}', expected exactly "
                            "${soname}")
    endif()
endforeach()

# Run from the prefix alone: libtent found there, its own dependencies
# (libmpcomm included) through its RUNPATH.
foreach(exe two_engines_c two_engines_cxx)
    run(deps "ldd ${exe}" ${CMAKE_COMMAND} -E env
        "LD_LIBRARY_PATH=${prefix}/lib" ldd "${WORK_DIR}/${exe}")
    string(REGEX MATCH "${soname} => ([^ ]+)" _ "${deps}")
    if(NOT CMAKE_MATCH_1 STREQUAL "${prefix}/lib/${soname}")
        message(FATAL_ERROR "${exe} loads libtent from '${CMAKE_MATCH_1}', "
                            "not from ${prefix}/lib")
    endif()
    if(deps MATCHES "([^\n]*not found)")
        message(FATAL_ERROR "${exe}: ${CMAKE_MATCH_1}")
    endif()
    run(out "${exe}" ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${prefix}/lib"
        "${WORK_DIR}/${exe}")
    if(NOT out MATCHES "OK \\(1048576 bytes written, read, checked\\)")
        message(FATAL_ERROR "${exe} printed '${out}'")
    endif()
    message(STATUS "${out}")
endforeach()
message(STATUS "libtent_shared: one library, C and C++ clients built with "
               "-ltent_shared alone ran between two processes")
