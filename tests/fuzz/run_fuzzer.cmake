# One ctest run of a libFuzzer target:
#
#   cmake -DFUZZER=EXE -DCORPUS=DIR -DFRESH=ON|OFF -DARTIFACTS=DIR
#         -P run_fuzzer.cmake -- FUZZER_OPTIONS... INPUT_DIRS...
#
# CORPUS is the only directory libFuzzer writes new inputs into (emptied
# first when FRESH); INPUT_DIRS (seeds, committed regressions) are only read,
# and those that do not exist are left out. A crash is written to
# ARTIFACTS (a directory in the build tree) and fails the test.

set(options "")
set(dirs "")
set(after_separator OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  set(arg "${CMAKE_ARGV${i}}")
  if(after_separator)
    if(arg MATCHES "^-")
      list(APPEND options "${arg}")
    elseif(IS_DIRECTORY "${arg}")
      list(APPEND dirs "${arg}")
    endif()
  elseif(arg STREQUAL "--")
    set(after_separator ON)
  endif()
endforeach()

if(FRESH)
  file(REMOVE_RECURSE "${CORPUS}")
endif()
file(MAKE_DIRECTORY "${CORPUS}")
file(MAKE_DIRECTORY "${ARTIFACTS}")

execute_process(COMMAND "${FUZZER}" ${options} "-artifact_prefix=${ARTIFACTS}/" "${CORPUS}" ${dirs}
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${FUZZER} exited with ${status}; the input that failed is in ${ARTIFACTS}")
endif()
