# Shared by scripts/demo and scripts/test: install what is missing, configure
# and build incrementally. Sourced, not run.

set -euo pipefail

SPOOL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages the build needs. Keep in step with README.md. clang and
# its runtime libraries (libFuzzer, ASan, UBSan: libclang-rt-dev, only a
# recommendation of clang's) build the fuzz targets (tests/fuzz). The ONNX
# importer reads models with libonnx-dev's protobuf classes; libonnx-testdata
# holds ONNX's backend test data, which the conformance test runs. Open MPI
# spreads a search's measurements over ranks (`mpirun -np N spool run
# ... --search G`; the test search_mpi_two_ranks runs two).
SPOOL_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libboost-dev libboost-graph-dev libtbb-dev
  doctest-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev
  graphviz llvm-15-tools python3
  clang libclang-rt-dev
  libonnx-dev libprotobuf-dev libonnx-testdata
  openmpi-bin libopenmpi-dev
)

spool_log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Installs the packages that are not installed yet (apt-get update only then).
spool_install_deps() {
  local missing=()
  for pkg in "${SPOOL_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  spool_log "installing ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "error: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
      exit 1
    fi
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# spool_build DIR BUILD_TYPE [cmake args...] -- [targets...]
spool_build() {
  local dir="$1" type="$2"
  shift 2
  local cmake_args=() targets=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmake_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targets=("$@")
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    spool_log "configuring $dir ($type)"
    cmake -S "$SPOOL_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" "${cmake_args[@]}" >/dev/null
  fi
  spool_log "building $dir"
  local target_args=()
  for t in "${targets[@]}"; do target_args+=(--target "$t"); done
  cmake --build "$dir" --parallel "$(nproc)" "${target_args[@]}"
}
