# Runs one command as a test and checks what it did: its exit code, its
# output and the files it wrote. ctest's own PASS_REGULAR_EXPRESSION ignores
# the exit code, so an error message alone would pass a run that crashed or
# exited 0; here both must hold.
#
#   cmake -DARGC=N -DARG0=PROGRAM -DARG1=... [options] -P expect.cmake
#
# ARGC, ARG0 ... ARG<ARGC-1>  the command, one variable per argument (so an
#                             argument may be empty or hold a ';')
# EXIT        the exit code it must return (default 0; a signal never matches)
# PASS        a regular expression its output (stdout and stderr, merged in the
#             order written) must match
# FAIL        a regular expression its output must not match
# JSON_FILES  JSON files the command writes: each must parse, and each
#             PATH=REGEX in JSON<i>_KEYS must hold for the i-th: the value at
#             PATH (keys and array indices joined by '.'; true and false read
#             as ON and OFF) matches REGEX
# NPY_FILE    a .npy file the command writes: the magic, version 1, a header
#             numpy can read, and as many data bytes as its shape and dtype say
# NPY_HEADER  a regular expression its header must match (dtype, shape)
# DOT_FILES   Graphviz files the command writes; DOT (Graphviz's dot program)
#             must render each to SVG without a message
# TEXT_FILES  text files the command writes; TEXT<i> is a regular expression
#             the i-th must match
#
# Every file named is deleted before the command runs, so a file left by an
# earlier run cannot pass for this one's.

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

set(written ${JSON_FILES} ${NPY_FILE} ${DOT_FILES} ${TEXT_FILES})
foreach(file IN LISTS written)
  file(REMOVE "${file}")
endforeach()

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

foreach(file IN LISTS written)
  if(NOT EXISTS "${file}")
    expect_failed("${file} was not written")
  endif()
endforeach()

set(i 0)
foreach(file IN LISTS JSON_FILES)
  if(EXISTS "${file}")
    file(READ "${file}" json)
    string(JSON type ERROR_VARIABLE error TYPE "${json}")
    if(error)
      expect_failed("${file}: not JSON: ${error}")
    else()
      foreach(check IN LISTS JSON${i}_KEYS)
        if(NOT check MATCHES "^([^=]+)=(.*)$")
          message(FATAL_ERROR "expect.cmake: '${check}' is not PATH=REGEX")
        endif()
        set(path "${CMAKE_MATCH_1}")
        set(regex "${CMAKE_MATCH_2}")
        string(REPLACE "." ";" keys "${path}")
        string(JSON value ERROR_VARIABLE error GET "${json}" ${keys})
        if(error)
          expect_failed("${file}: no ${path}: ${error}")
        elseif(NOT value MATCHES "${regex}")
          expect_failed("${file}: ${path} is '${value}', which does not match '${regex}'")
        endif()
      endforeach()
    endif()
  endif()
  math(EXPR i "${i} + 1")
endforeach()

if(DEFINED NPY_FILE AND EXISTS "${NPY_FILE}")
  file(SIZE "${NPY_FILE}" size)
  file(READ "${NPY_FILE}" preamble LIMIT 10 HEX)
  # "\x93NUMPY", version 1.0, then the header's length (2 bytes, little-endian).
  if(NOT preamble MATCHES "^934e554d50590100([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])$")
    expect_failed("${NPY_FILE}: not a version 1.0 .npy file (starts with ${preamble})")
  else()
    math(EXPR header_length "0x${CMAKE_MATCH_2}${CMAKE_MATCH_1}")
    file(READ "${NPY_FILE}" header OFFSET 10 LIMIT ${header_length})
    if(NOT header MATCHES "^{'descr': '[<>|][fiub]([0-9]+)', 'fortran_order': False, 'shape': \\(([0-9, ]*)\\), } *\n$")
      expect_failed("${NPY_FILE}: the header '${header}' is not one numpy reads")
    else()
      set(bytes ${CMAKE_MATCH_1})
      string(REGEX MATCHALL "[0-9]+" dims "${CMAKE_MATCH_2}")
      foreach(dim IN LISTS dims)
        math(EXPR bytes "${bytes} * ${dim}")
      endforeach()
      math(EXPR expected_size "10 + ${header_length} + ${bytes}")
      if(NOT size EQUAL expected_size)
        expect_failed("${NPY_FILE}: ${size} bytes, but its header says ${expected_size}")
      endif()
      math(EXPR data_start "10 + ${header_length}")
      math(EXPR misaligned "${data_start} % 64")
      if(NOT misaligned EQUAL 0)
        expect_failed("${NPY_FILE}: the data starts at byte ${data_start}, not a multiple of 64")
      endif()
      if(DEFINED NPY_HEADER AND NOT header MATCHES "${NPY_HEADER}")
        expect_failed("${NPY_FILE}: the header '${header}' does not match '${NPY_HEADER}'")
      endif()
    endif()
  endif()
endif()

foreach(file IN LISTS DOT_FILES)
  if(NOT EXISTS "${file}")
    continue()
  endif()
  if(NOT DOT)
    message(FATAL_ERROR "expect.cmake: DOT_FILES needs DOT, Graphviz's dot program")
  endif()
  execute_process(COMMAND "${DOT}" -Tsvg -o /dev/null "${file}" RESULT_VARIABLE dot_code
                  OUTPUT_VARIABLE dot_output ERROR_VARIABLE dot_output)
  if(NOT dot_code STREQUAL "0" OR NOT dot_output STREQUAL "")
    expect_failed("${file}: dot -Tsvg exited with ${dot_code}: ${dot_output}")
  endif()
endforeach()

set(i 0)
foreach(file IN LISTS TEXT_FILES)
  if(EXISTS "${file}")
    file(READ "${file}" text)
    if(NOT text MATCHES "${TEXT${i}}")
      expect_failed("${file} does not match '${TEXT${i}}'")
    endif()
  endif()
  math(EXPR i "${i} + 1")
endforeach()

if(failures)
  message(FATAL_ERROR "expected otherwise:\n${failures}")
endif()
