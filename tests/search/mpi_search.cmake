# A search spread over MPI ranks gives exactly the one-process result.
#
# Runs `spool run MODEL --timing-only --search GENOMES --json` three ways:
# as one process without mpirun, under `mpirun -np 1` and under
# `mpirun -np 2`, and requires the same greedy and best cycles, the same
# changed genes and the same simulated cycles of the program that runs, with
# the JSON naming 1, 1 and 2 ranks. Skipped (a "SKIPPED:" line, which the
# test's SKIP_REGULAR_EXPRESSION matches) when mpirun is not installed or
# the tool was built without MPI.
#
# Defines: SPOOL (the tool), MPIRUN (may be empty), HAVE_MPI (ON/OFF), OUT,
# MODEL, GENOMES.

if(NOT HAVE_MPI)
  message("SKIPPED: spool was built without MPI (install openmpi-bin and libopenmpi-dev, then reconfigure)")
  return()
endif()
if(NOT MPIRUN OR NOT EXISTS "${MPIRUN}")
  find_program(MPIRUN_FOUND mpirun)
  if(NOT MPIRUN_FOUND)
    message("SKIPPED: mpirun is not installed (Debian: openmpi-bin)")
    return()
  endif()
  set(MPIRUN "${MPIRUN_FOUND}")
endif()

file(MAKE_DIRECTORY "${OUT}")
# Open MPI refuses root without these, and a two-core machine needs
# --oversubscribe for two ranks.
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
set(ENV{OMPI_MCA_rmaps_base_oversubscribe} 1)
set(common run ${MODEL} --timing-only --search ${GENOMES})

function(run_one tag)
  execute_process(COMMAND ${ARGN} ${common} --json "${OUT}/${tag}.json"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 600)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${tag}: exit ${rc}\n${out}\n${err}")
  endif()
  file(READ "${OUT}/${tag}.json" json)
  foreach(key greedy_cycles best_cycles genomes ranks)
    string(JSON v GET "${json}" search ${key})
    set(${tag}_${key} "${v}" PARENT_SCOPE)
  endforeach()
  string(JSON v GET "${json}" search changed_genes)
  set(${tag}_changed "${v}" PARENT_SCOPE)
  string(JSON v GET "${json}" sim cycles)
  set(${tag}_cycles "${v}" PARENT_SCOPE)
  message("${tag}: ${out}")
endfunction()

run_one(plain "${SPOOL}")
run_one(np1 "${MPIRUN}" -np 1 --oversubscribe "${SPOOL}")
run_one(np2 "${MPIRUN}" -np 2 --oversubscribe "${SPOOL}")

foreach(tag np1 np2)
  foreach(what greedy_cycles best_cycles genomes changed cycles)
    if(NOT "${${tag}_${what}}" STREQUAL "${plain_${what}}")
      message(FATAL_ERROR "${tag}: search ${what} is ${${tag}_${what}}, one process without mpirun gives ${plain_${what}}")
    endif()
  endforeach()
endforeach()
if(NOT plain_ranks EQUAL 1 OR NOT np1_ranks EQUAL 1 OR NOT np2_ranks EQUAL 2)
  message(FATAL_ERROR "ranks reported: ${plain_ranks}, ${np1_ranks}, ${np2_ranks} (expected 1, 1, 2)")
endif()
message("same result on 1 and 2 ranks: greedy ${plain_greedy_cycles}, best ${plain_best_cycles} cycles, "
        "${plain_genomes} genomes, changed ${plain_changed}")
