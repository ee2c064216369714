#!/usr/bin/env bash
# Sets up acrobat and runs the Tree-LSTM sentiment model over the bundled SST test trees.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
echo
echo "== Tree-LSTM (H=256) over the 2210 SST test trees, reference engine, random weights (seed 0) =="
build/tools/acrobat run models/treelstm.acr --input sst:data/sst/test.txt --show 5
