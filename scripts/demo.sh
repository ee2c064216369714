#!/usr/bin/env bash
# Sets up acrobat and runs the Tree-LSTM sentiment model over the bundled SST test trees: batched,
# then one instance at a time for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
echo
echo "== Tree-LSTM (H=256), 2210 SST test trees, random weights (seed 0), batched engine, batches of 64 =="
build/tools/acrobat run models/treelstm.acr --input sst:data/sst/test.txt --show 5
echo
echo "== the same, reference engine (one instance at a time) =="
build/tools/acrobat run models/treelstm.acr --input sst:data/sst/test.txt --engine reference --show 0
