# The `spool` tool, run as a user runs it. Each test runs it through
# expect.cmake, which checks its exit code and its output together (ctest's
# pass regular expressions alone ignore the exit code) and reads back every
# file it writes.
#
# spool_cli_test(NAME ARGS ARG... [EXIT CODE] PASS REGEX [FAIL REGEX]
#                [JSON FILE PATH=REGEX... [FILE PATH=REGEX...]] [NPY FILE HEADER-REGEX]
#                [DOT FILE...] [TEXT FILE REGEX [FILE REGEX...]] [LABELS LABEL...] [TIMEOUT SECONDS])
#
# EXIT is the exit code spool must return: 0 (the default), 1 for an error it
# reports (`spool: error: ...`), 2 for bad command-line usage (src/cli/main.cpp).
# The output of a run that exits 0 must not match FAIL, by default a check
# that failed or found values that are not finite. JSON, NPY, DOT and TEXT
# name the files the run writes and what each must hold (see expect.cmake).
find_program(SPOOL_DOT dot)
set(SPOOL_CLI_EXPECT ${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
set(SPOOL_CLI_SUCCESS_FAIL "NOT FINITE|FAILED|spool: error")
# Adds -DVAR=VALUE to the list `defs`: one argument of the test's command,
# whatever ';' it holds.
function(spool_cli_define var value)
  string(REPLACE ";" "\\;" escaped "${value}")
  list(APPEND defs "-D${var}=${escaped}")
  set(defs "${defs}" PARENT_SCOPE)
endfunction()

function(spool_cli_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "EXIT;PASS;FAIL;TIMEOUT" "ARGS;JSON;NPY;DOT;TEXT;LABELS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "spool_cli_test(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT DEFINED ARG_PASS)
    message(FATAL_ERROR "spool_cli_test(${name}): no PASS regex")
  endif()
  if(NOT DEFINED ARG_EXIT)
    set(ARG_EXIT 0)
  endif()
  if(ARG_EXIT EQUAL 0 AND NOT DEFINED ARG_FAIL)
    set(ARG_FAIL "${SPOOL_CLI_SUCCESS_FAIL}")
  endif()
  set(defs "")
  spool_cli_define(EXIT "${ARG_EXIT}")
  spool_cli_define(PASS "${ARG_PASS}")
  if(DEFINED ARG_FAIL)
    spool_cli_define(FAIL "${ARG_FAIL}")
  endif()

  set(argc 1)
  foreach(arg IN LISTS ARG_ARGS)
    spool_cli_define(ARG${argc} "${arg}")
    math(EXPR argc "${argc} + 1")
  endforeach()
  spool_cli_define(ARGC ${argc})
  spool_cli_define(ARG0 "$<TARGET_FILE:spool_cli>")

  # JSON: a file, then its PATH=REGEX checks; the next entry without '='
  # starts another file.
  set(json_files "")
  set(json_index -1)
  foreach(entry IN LISTS ARG_JSON)
    if(entry MATCHES "=")
      if(json_index LESS 0)
        message(FATAL_ERROR "spool_cli_test(${name}): JSON starts with a check, not a file: ${entry}")
      endif()
      list(APPEND json_keys_${json_index} "${entry}")
    else()
      math(EXPR json_index "${json_index} + 1")
      list(APPEND json_files "${entry}")
      set(json_keys_${json_index} "")
    endif()
  endforeach()
  if(json_files)
    spool_cli_define(JSON_FILES "${json_files}")
    foreach(i RANGE ${json_index})
      spool_cli_define(JSON${i}_KEYS "${json_keys_${i}}")
    endforeach()
  endif()

  if(ARG_NPY)
    list(LENGTH ARG_NPY npy_length)
    if(NOT npy_length EQUAL 2)
      message(FATAL_ERROR "spool_cli_test(${name}): NPY takes a file and a header regex")
    endif()
    list(GET ARG_NPY 0 npy_file)
    list(GET ARG_NPY 1 npy_header)
    spool_cli_define(NPY_FILE "${npy_file}")
    spool_cli_define(NPY_HEADER "${npy_header}")
  endif()

  if(ARG_DOT)
    if(NOT SPOOL_DOT)
      message(FATAL_ERROR "spool_cli_test(${name}): reading a .dot file back needs Graphviz's dot (scripts/test installs graphviz)")
    endif()
    spool_cli_define(DOT "${SPOOL_DOT}")
    spool_cli_define(DOT_FILES "${ARG_DOT}")
  endif()

  # TEXT: pairs of a file and the regular expression it must match.
  set(text_files "")
  set(text_index 0)
  list(LENGTH ARG_TEXT text_length)
  math(EXPR text_odd "${text_length} % 2")
  if(text_odd)
    message(FATAL_ERROR "spool_cli_test(${name}): TEXT takes pairs of a file and a regex")
  endif()
  while(text_index LESS text_length)
    list(GET ARG_TEXT ${text_index} text_file)
    math(EXPR regex_index "${text_index} + 1")
    list(GET ARG_TEXT ${regex_index} text_regex)
    math(EXPR text_n "${text_index} / 2")
    list(APPEND text_files "${text_file}")
    spool_cli_define(TEXT${text_n} "${text_regex}")
    math(EXPR text_index "${text_index} + 2")
  endwhile()
  if(text_files)
    spool_cli_define(TEXT_FILES "${text_files}")
  endif()

  add_test(NAME cli_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${SPOOL_CLI_EXPECT})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # The tile cache of the tests' runs is the build tree's, not the user's.
  set_tests_properties(cli_${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "SPOOL_CACHE_DIR=${CMAKE_BINARY_DIR}/tile-cache")
  if(ARG_LABELS)
    set_tests_properties(cli_${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
