# lit configuration of Spool's per-stage text tests (tests/lit/<stage>/).
# Each test is an input file whose `# RUN:` line runs a `spool` command and
# pipes the result into FileCheck against the file's `# CHECK` lines;
# scripts/update-lit-checks regenerates those lines from the current output.
# ctest runs the suite (tests/lit/CMakeLists.txt) with the parameters below.
import os

import lit.formats

config.name = "spool"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".hlir", ".npu"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = lit_config.params.get("exec_root", os.path.dirname(__file__))

spool = lit_config.params["spool"]
tools = lit_config.params["tools"]  # the directory holding FileCheck and not
config.substitutions.append(("%spool", spool))
config.substitutions.append(("%rules", lit_config.params["rules"]))
config.environment["PATH"] = tools + os.pathsep + config.environment.get("PATH", os.environ.get("PATH", ""))
