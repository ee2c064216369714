#!/usr/bin/env bash
# Sets up acrobat, builds it and runs the whole test suite (unit, golden, error and PyTorch tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
scripts/install-python.sh build
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 1200
