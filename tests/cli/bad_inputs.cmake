# The bad-input table: every case of a bad input or a silently wrong answer
# reported against `spool`, as the command a user ran and the line it must
# now print. Each ends with exit 1 (an error it reports) or 2 (bad usage),
# or, for a case that was a wrong internal error on valid input, succeeds;
# none may end by a signal. Included by tests/cli/CMakeLists.txt (which
# defines spool_cli_test, OUT and GOLDEN_MODELS); each case runs in well
# under two seconds.

set(BAD_RULES ${CMAKE_CURRENT_SOURCE_DIR}/inputs/rules)
set(BAD_TOKENS 1,17,42,255,3,99,128,7)
set(BAD_MOE_TOKENS 5,200,31,64,9,150,2,77)

# ---- silently wrong: NaN compared as equal to NaN ----------------------------------
# Checkpoints whose config.json sets rms_norm_eps to -1: rsqrt of a negative
# mean square makes every output NaN (written here at configure time from
# the golden folders).
foreach(model llama qwen3_moe)
  set(dir ${OUT}/bad_eps_${model})
  file(READ ${GOLDEN_MODELS}/${model}/config.json config)
  string(JSON config SET "${config}" rms_norm_eps "-1")
  file(WRITE ${dir}/config.json "${config}")
  file(COPY ${GOLDEN_MODELS}/${model}/model.safetensors ${GOLDEN_MODELS}/${model}/logits.npy DESTINATION ${dir})
endforeach()
# The simulated NaN outputs "match" the interpreter's NaN outputs: not a pass.
spool_cli_test(bad_eps_npu_check ARGS run llama --weights ${OUT}/bad_eps_llama --dtype f32 --tokens ${BAD_TOKENS}
  EXIT 1 PASS "check +[0-9]+ values NaN or infinite \\(first in [a-z_.0-9]+\\): NOT FINITE.*spool: error: the check cannot pass: [0-9]+ values of the simulated outputs or the interpreter's are NaN or infinite")
# --check-logits against a good reference, the logits NaN.
spool_cli_test(bad_eps_check_logits ARGS run llama --weights ${OUT}/bad_eps_llama --dtype f32 --tokens ${BAD_TOKENS} --interp
  --check-logits ${OUT}/bad_eps_llama/logits.npy EXIT 1
  PASS "check +2048 logits or reference values are NaN or infinite: NOT FINITE.*: FAILED.*spool: error: logits differ from .*2048 values not finite")
# --check-logits against a NaN reference.
spool_cli_test(bad_nan_reference ARGS run llama --weights ${GOLDEN_MODELS}/llama --dtype f32 --tokens ${BAD_TOKENS} --interp
  --check-logits ${CMAKE_CURRENT_SOURCE_DIR}/inputs/nan_logits.npy EXIT 1
  PASS "check +2048 logits or reference values are NaN or infinite: NOT FINITE.*: FAILED.*spool: error: logits differ from .*nan_logits.npy by inf relative to scale, 2048 values not finite")
# NaN router scores (the MoE router reads the NaN hidden state): the lowered
# top-k ranks NaN as the interpreter does, so the program runs to the end
# (no internal DMA index error) and the check reports the NaN.
spool_cli_test(bad_eps_moe_router ARGS run qwen3_moe --weights ${OUT}/bad_eps_qwen3_moe --dtype f32 --tokens ${BAD_MOE_TOKENS}
  EXIT 1 PASS "TTFT .*NOT FINITE.*spool: error: the check cannot pass: [0-9]+ values of the simulated outputs or the interpreter's are NaN or infinite")
spool_cli_test(bad_eps_moe_router_decode ARGS run qwen3_moe --weights ${OUT}/bad_eps_qwen3_moe --dtype f32 --phase decode
  --tokens ${BAD_MOE_TOKENS} EXIT 1 PASS "TPOT .*spool: error: the check cannot pass: ")

# ---- silently wrong: unsound rules that `spool rules check` passed ------------------
spool_cli_test(bad_rule_mul_zero ARGS rules check ${BAD_RULES}/mul_zero.rules EXIT 1
  PASS "mul_zero.rules:2:10: error: rule 'mul-zero' is unsound: the sides differ at element 0 of f32\\[\\]: left -0 vs right 0 \\(\\?a : f32\\[\\]\\); inputs:\n    \\?a : f32\\[\\] = \\[-0\\]")
spool_cli_test(bad_rule_add_zero ARGS rules check ${BAD_RULES}/add_zero.rules EXIT 1
  PASS "add_zero.rules:2:10: error: rule 'add-zero' is unsound: the sides differ at element 0 of f32\\[\\]: left 0 vs right -0 \\(\\?a : f32\\[\\]\\); inputs:\n    \\?a : f32\\[\\] = \\[-0\\]")
spool_cli_test(bad_rule_reassociate ARGS rules check ${BAD_RULES}/reassociate.rules EXIT 1
  PASS "reassociate.rules:2:10: error: rule 'add-assoc' is unsound: the sides differ at element 0 of f32\\[\\]: left -1.9473023414611816 vs right -1.9473024606704712")
spool_cli_test(bad_rule_recip_recip ARGS rules check ${BAD_RULES}/recip_recip.rules EXIT 1
  PASS "recip_recip.rules:2:10: error: rule 'recip-recip' is unsound: the sides differ at element 0 of f32\\[\\]: left 0 vs right 1.401298464324817e-45 \\(\\?x : f32\\[\\]\\)")
spool_cli_test(bad_rule_neg_on_bool ARGS rules check ${BAD_RULES}/neg_neg_intro.rules EXIT 1
  PASS "neg_neg_intro.rules:2:10: error: rule 'neg-neg-intro' is unsound: the right side does not type-check where the left does \\(\\?x : bool\\[[0-9,]*\\]\\): neg: not defined on bool")
spool_cli_test(bad_rule_wrapping_constant ARGS rules check ${BAD_RULES}/wrapping_constant.rules EXIT 1
  PASS "wrapping_constant.rules:2:24: error: constant 4294967296 does not fit in i32")
# Declared approximate, with its tolerance: reported as approximate, never as exact.
spool_cli_test(rule_declared_approximate ARGS rules check ${BAD_RULES}/reassociate_approx.rules
  PASS "note: rule 'add-assoc' is approximate, not exact: within its declared tolerance \\(f32 1e-06, bf16 0.02, f16 0.004\\).*1 rules: 0 exact, 1 approximate, 0 unsound")

# ---- silently wrong: --rules files never checked ------------------------------------
foreach(cmd "run;llama" "run;llama;--no-roll" "compile;llama" "fuzz;llama;--genomes;2")
  string(REPLACE ";" "_" cmd_name "${cmd}")
  string(REPLACE "-" "" cmd_name "${cmd_name}")
  spool_cli_test(bad_rules_file_${cmd_name} ARGS ${cmd} --rules ${BAD_RULES}/drop_add.rules EXIT 1
    PASS "drop_add.rules:3:10: error: rule 'drop-add' is unsound: .*spool: error: --rules: 1 error\\(s\\) in .*drop_add.rules \\(above\\); --no-check-rules skips the random-tensor check")
endforeach()
spool_cli_test(bad_rules_file_opt ARGS opt ${CMAKE_CURRENT_SOURCE_DIR}/inputs/bad_op.hlir --rules ${BAD_RULES}/drop_add.rules
  EXIT 1 PASS "drop_add.rules:3:10: error: rule 'drop-add' is unsound: .*spool: error: --rules: 1 error\\(s\\) in ")
spool_cli_test(bad_rules_file_constant ARGS run llama --rules ${BAD_RULES}/wrapping_constant.rules EXIT 1
  PASS "wrapping_constant.rules:2:24: error: constant 4294967296 does not fit in i32.*spool: error: --rules: 1 error\\(s\\) in [^;]*$")
# Told not to check on tensors, the functional check still catches the wrong program.
spool_cli_test(bad_rules_file_unchecked ARGS run llama --rules ${BAD_RULES}/drop_add.rules --no-check-rules EXIT 1
  PASS "spool: error: the simulated program differs from the interpreter: ")
# Timing only (real shapes), nothing compares values: the wrong rule breaks a
# loop invariant, and the error names the unchecked files.
spool_cli_test(bad_rules_file_unchecked_real ARGS run llama --size real --rules ${BAD_RULES}/drop_add.rules --no-check-rules
  EXIT 1 PASS "spool: error: [^\n]+\n  note: the --rules files were not checked on tensors \\(--no-check-rules\\); an unsound rule in them can cause this: `spool rules check [^`]*drop_add.rules` checks them")
spool_cli_test(bad_no_check_rules_alone ARGS run llama --no-check-rules EXIT 1
  PASS "spool: error: --no-check-rules needs --rules FILE")

# ---- flags that silently fell back or made a check unfailable -----------------------
spool_cli_test(bad_spad_budget_zero ARGS sim gemm:8x8x8 --spad-budget 0 EXIT 2
  PASS "--spad-budget: '0' is not a whole number from 1024 to 1099511627776")
spool_cli_test(bad_spad_budget_negative ARGS sim gemm:8x8x8 --spad-budget -1 EXIT 2
  PASS "--spad-budget: '-1' is not a whole number from 1024 to 1099511627776")
spool_cli_test(bad_rules_trials ARGS rules check ${PROJECT_SOURCE_DIR}/rules/algebra.rules --trials 1000000000 EXIT 2
  PASS "--trials: '1000000000' is not a whole number from 1 to 256")
foreach(tol -1 nan inf)
  spool_cli_test(bad_fuzz_tolerance_${tol} ARGS fuzz llama --tolerance ${tol} EXIT 2
    PASS "--tolerance: '${tol}' is not a finite number >= 0")
endforeach()
spool_cli_test(bad_empty_tokens ARGS run llama --tokens "" --interp EXIT 1 PASS "spool: error: --tokens: the list is empty")
spool_cli_test(bad_interp_with_rules ARGS run llama --interp --rules ${PROJECT_SOURCE_DIR}/rules/default.rules EXIT 1
  PASS "spool: error: --rules does not apply to --interp, which runs the reference interpreter alone")

# ---- malformed checkpoints: every length checked before anything is allocated ---------
# (tests/cli/inputs/safetensors: a header length of 2^62, data offsets past
# the end of the file, a shape whose element count wraps; each put next to
# the golden llama's config.json at configure time.)
foreach(case huge_header offsets_past_end wrapping_shape)
  set(dir ${OUT}/bad_safetensors_${case})
  file(MAKE_DIRECTORY ${dir})
  file(COPY_FILE ${GOLDEN_MODELS}/llama/config.json ${dir}/config.json)
  file(COPY_FILE ${CMAKE_CURRENT_SOURCE_DIR}/inputs/safetensors/${case}.safetensors ${dir}/model.safetensors)
endforeach()
spool_cli_test(bad_safetensors_huge_header ARGS run llama --weights ${OUT}/bad_safetensors_huge_header --interp EXIT 1
  PASS "spool: error: .*model.safetensors: header length 4611686018427387904 exceeds the file's 10 bytes")
spool_cli_test(bad_safetensors_offsets ARGS run llama --weights ${OUT}/bad_safetensors_offsets_past_end --interp EXIT 1
  PASS "spool: error: .*model.safetensors: tensor 'lm_head.weight': data_offsets \\[0, 1000000000000\\] are outside the 8 data bytes")
spool_cli_test(bad_safetensors_shape ARGS run llama --weights ${OUT}/bad_safetensors_wrapping_shape --interp EXIT 1
  PASS "spool: error: .*model.safetensors: tensor 'lm_head.weight': shape \\[1099511627776,1099511627776\\] has too many elements")
# Malformed npy files: every length is checked against the file before
# anything is allocated (a negative dimension, a shape whose byte count
# wraps, a header of 4 GB).
set(NPY_DIR ${CMAKE_CURRENT_SOURCE_DIR}/inputs)
spool_cli_test(bad_npy_negative_dim ARGS run llama --check-logits ${NPY_DIR}/negative_dim.npy EXIT 1
  PASS "spool: error: .*negative_dim.npy: npy shape \\(-3, 256\\) has a dimension '-3' that is not a non-negative integer")
spool_cli_test(bad_npy_wrapping_shape ARGS run llama --check-logits ${NPY_DIR}/wrapping_shape.npy EXIT 1
  PASS "spool: error: .*wrapping_shape.npy: truncated npy data \\(shape \\(4611686018427387920,\\) needs more than")
spool_cli_test(bad_npy_huge_header ARGS run llama --check-logits ${NPY_DIR}/huge_header.npy EXIT 1
  PASS "spool: error: .*huge_header.npy: truncated npy header \\(4294967280 bytes declared, the file has 131\\)")
# An output file that cannot be written is an error, not a silently short file.
spool_cli_test(bad_full_disk_json ARGS run llama --json /dev/full EXIT 1
  PASS "spool: error: (failed to write '?/dev/full'?|/dev/full: write failed)")

# 2,000 tokens through the interpreter would take minutes: refused up front,
# naming the flag that raises the budget (and the default runs well inside it).
spool_cli_test(bad_interp_too_long ARGS run llama --seq 2000 --interp EXIT 1
  PASS "spool: error: the reference interpreter would compute about 1.47e\\+09 values for llama \\(214 hlir nodes\\), above --interp-budget 1e\\+08")
spool_cli_test(interp_budget_raised ARGS run llama --seq 16 --interp --interp-budget 1e7 PASS "interp +[0-9.]+ ms")
# Every other command that runs the interpreter has the same budget.
spool_cli_test(bad_interp_sim_functional ARGS sim gemm:1024x1024x1024 --functional EXIT 1
  PASS "spool: error: the reference interpreter would compute about 1.08e\\+09 values for gemm:1024x1024x1024 .*raise --interp-budget, or drop --functional")
spool_cli_test(bad_interp_compile_check ARGS compile llama --check --seq 4096 EXIT 1
  PASS "spool: error: the reference interpreter would compute about 5.76e\\+09 values for llama .*raise --interp-budget, or drop --check")
spool_cli_test(bad_interp_fuzz ARGS fuzz llama --seq 4096 EXIT 1
  PASS "spool: error: the reference interpreter would compute about 5.76e\\+09 values for llama .*above --interp-budget 1e\\+08")
# The budget is meaningless where the interpreter does not run.
spool_cli_test(bad_interp_budget_unused ARGS sim gemm:64x64x64 --interp-budget 1e9 EXIT 2 PASS "--interp-budget requires --functional")
spool_cli_test(bad_interp_budget_timing ARGS run llama --timing-only --interp-budget 1e9 EXIT 2
  PASS "--timing-only excludes --interp-budget")

# ---- internal errors on valid input -------------------------------------------------
# Norms and softmax over a length-1 axis lower and simulate.
foreach(workload layernorm:4x1 softmax:8x1)
  string(REPLACE ":" "_" workload_name "${workload}")
  spool_cli_test(len1_axis_${workload_name} ARGS sim ${workload} PASS "dram footprint .*: fits")
  spool_cli_test(len1_axis_${workload_name}_functional ARGS sim ${workload} --functional
    PASS "check +simulated vs interpreter: .*: ok")
endforeach()

# ---- Ctrl-C ---------------------------------------------------------------------------
# A long search interrupted after a second: exit status 130 (not a signal
# death), the step it was in and the steps it had completed. (Interrupted
# once the search runs, the step is followed by ", at N genomes in Ts,
# best C cycles (greedy G, xR)": search::SearchOptions::on_progress.)
find_program(SPOOL_TIMEOUT timeout)
if(SPOOL_TIMEOUT)
  set(interrupt_args --preserve-status -s INT 1 $<TARGET_FILE:spool_cli> run llama --size real --search 1000000)
  set(defs "")
  set(argc 1)
  foreach(arg IN LISTS interrupt_args)
    list(APPEND defs "-DARG${argc}=${arg}")
    math(EXPR argc "${argc} + 1")
  endforeach()
  add_test(NAME cli_bad_interrupted_search COMMAND ${CMAKE_COMMAND} -DARG0=${SPOOL_TIMEOUT} -DARGC=${argc} ${defs}
    -DEXIT=130
    "-DPASS=spool: interrupted \\(Ctrl-C\\) after [0-9.]+s during: compile, search extractions over 1000000 genomes, lower and simulate llama \\(3489 hlir nodes, timing only\\) \\(for [0-9.]+s\\)(, at [0-9]+ genomes in [0-9.]+s, best [0-9]+ cycles \\(greedy [0-9]+, x[0-9.]+\\))?; completed: build llama \\([0-9.]+s\\)"
    -P ${SPOOL_CLI_EXPECT})
  set_tests_properties(cli_bad_interrupted_search PROPERTIES TIMEOUT 30)
endif()
