# Runs one command as a test and checks what it did: its exit code and its
# output. ctest's own PASS_REGULAR_EXPRESSION ignores the exit code, so an
# error message alone would pass a run that crashed or exited 0; here both
# must hold.
#
#   cmake -DARGC=N -DARG0=PROGRAM -DARG1=... [options] -P expect.cmake
#
# ARGC, ARG0 ... ARG<ARGC-1>  the command, one variable per argument (so an
#                             argument may be empty or hold a ';')
# EXIT        the exit code it must return (default 0; a signal never matches)
# PASS        a regular expression its output (stdout and stderr, merged in the
#             order written) must match
# FAIL        a regular expression its output must not match

cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED ARGC OR ARGC LESS 1)
  message(FATAL_ERROR "expect.cmake: give the command as ARGC and ARG0, ARG1, ...")
endif()
if(NOT DEFINED EXIT)
  set(EXIT 0)
endif()

set(failures "")
function(expect_failed text)
  set(failures "${failures}  ${text}\n" PARENT_SCOPE)
endfunction()

# Each argument quoted on its own, so that empty ones are passed too.
math(EXPR last "${ARGC} - 1")
set(call "execute_process(COMMAND")
set(shown "")
foreach(i RANGE ${last})
  string(APPEND call " \"\${ARG${i}}\"")
  string(APPEND shown " '${ARG${i}}'")
endforeach()
string(APPEND call " RESULT_VARIABLE code OUTPUT_VARIABLE output ERROR_VARIABLE output)")
cmake_language(EVAL CODE "${call}")
message("command:${shown}\n${output}")

if(NOT code STREQUAL EXIT)
  expect_failed("exit code ${code}, expected ${EXIT}")
endif()
if(DEFINED PASS AND NOT output MATCHES "${PASS}")
  expect_failed("the output does not match '${PASS}'")
endif()
if(DEFINED FAIL AND NOT FAIL STREQUAL "" AND output MATCHES "${FAIL}")
  expect_failed("the output matches '${FAIL}' (\"${CMAKE_MATCH_0}\")")
endif()

if(failures)
  message(FATAL_ERROR "expected otherwise:\n${failures}")
endif()
