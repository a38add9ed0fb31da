# Installs the build in BUILD_DIR into WORK_DIR/prefix, builds the consumer
# project (tests/install) against it with find_package(Spool), and runs its
# quickstart. cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P run.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORK_DIR}")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${what}:\n${out}")
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${what} failed with ${code}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

step("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
if(NOT EXISTS "${WORK_DIR}/prefix/include/spool/spool.hpp")
  message(FATAL_ERROR "the install tree has no include/spool/spool.hpp")
endif()
step("configure the consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install" -B "${WORK_DIR}/consumer" -G Ninja
     -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
# The package must come from the install tree, not the build or source tree.
file(READ "${WORK_DIR}/consumer/CMakeCache.txt" cache)
if(NOT cache MATCHES "Spool_DIR:PATH=${WORK_DIR}/prefix/")
  message(FATAL_ERROR "find_package(Spool) did not use the install tree")
endif()
step("build the consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer" -j 2)
step("run the quickstart" "${WORK_DIR}/consumer/quickstart")
if(NOT output MATCHES "y: \\[8,64\\]")
  message(FATAL_ERROR "the quickstart did not print its output")
endif()
