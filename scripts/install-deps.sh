#!/usr/bin/env bash
# Installs everything acrobat needs to build, test and benchmark on Debian 12 (bookworm).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config   # toolchain
  libopenblas-dev libxsmm-dev                     # GEMM: OpenBLAS and libxsmm JIT kernels
  libfmt-dev nlohmann-json3-dev libcli11-dev      # formatting, JSON, command line
  libcpp-httplib-dev                              # acrobat serve
  libboost-context-dev                            # fibers for tensor-dependent control flow
  libabsl-dev                                     # flat hash tables on the host path
  libgtest-dev libgmock-dev                       # tests
  python3 python3-torch python3-numpy             # the PyTorch oracle (tests/reference)
  python3-dev pybind11-dev python3-pytest         # the Python package (python/) and its tests
  python3-distributed                             # acrobat.dask
  python3-mypy                                    # the package's type information, checked by its tests
  python3-matplotlib                              # bench --all's plot
  clang libclang-rt-14-dev                        # scripts/fuzz.sh, sanitize.sh: libFuzzer, ASan, UBSan, TSan
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
