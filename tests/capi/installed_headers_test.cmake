# ctest driver (cmake -P): installs the build into a scratch prefix and
# checks the installed headers the way a client's build probes them:
# - the set under include/ is exactly EXPECTED (a header installed by
#   mistake, or one missing, fails here);
# - each header compiles alone, as its own C++17 translation unit, with only
#   -I<prefix>/include; each of C_HEADERS also as C11;
# - no header reaches glog, gflags or jsoncpp, even through a header the
#   compiler would find in /usr/include anyway (the dependency lists of
#   those compilations are searched).
# Inputs: BUILD_DIR, WORK_DIR, C_COMPILER, CXX_COMPILER, EXPECTED and
# C_HEADERS (','-separated paths relative to include/).
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}"
                        --prefix "${prefix}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install failed (${rc}):\n${out}\n${err}")
endif()

file(GLOB_RECURSE installed RELATIVE "${prefix}/include"
     LIST_DIRECTORIES false "${prefix}/include/*")
list(SORT installed)
string(REPLACE "," ";" expected "${EXPECTED}")
string(REPLACE "," ";" c_headers "${C_HEADERS}")
list(SORT expected)
if(NOT installed STREQUAL expected)
    message(FATAL_ERROR "include/ holds '${installed}', expected "
                        "'${expected}'")
endif()

set(checked 0)
# compile(<compiler> <lang flag> <std> <header>): one TU that includes the
# header and nothing else; fails on an error or on a dependency that is a
# glog, gflags or jsoncpp header.
function(compile compiler lang std header)
    string(MAKE_C_IDENTIFIER "${header}_${lang}" stem)
    set(tu "${WORK_DIR}/${stem}.${lang}")
    file(WRITE "${tu}" "#include <${header}>\n")
    execute_process(
        COMMAND "${compiler}" -std=${std} -Wall -Wextra -Werror -pedantic
                -fsyntax-only -MD -MF "${WORK_DIR}/${stem}.d"
                -I "${prefix}/include" "${tu}"
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "<${header}> does not compile alone as ${std} "
                            "with only -I${prefix}/include:\n${out}${err}")
    endif()
    file(READ "${WORK_DIR}/${stem}.d" deps)
    if(deps MATCHES "[^ ]*/(glog|gflags|json|jsoncpp)/[^ ]*")
        message(FATAL_ERROR "<${header}> (${std}) includes "
                            "${CMAKE_MATCH_0}: an installed header needs "
                            "only the standard library")
    endif()
    math(EXPR n "${checked} + 1")
    set(checked ${n} PARENT_SCOPE)
endfunction()

foreach(header ${installed})
    compile("${CXX_COMPILER}" cpp c++17 "${header}")
endforeach()
foreach(header ${c_headers})
    compile("${C_COMPILER}" c c11 "${header}")
endforeach()
list(LENGTH installed n_headers)
message(STATUS "installed headers: ${n_headers} headers, ${checked} "
               "stand-alone compilations, none reaches glog/gflags/jsoncpp")
