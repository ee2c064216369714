#!/usr/bin/env bash
# Sets up acrobat, trains the Tree-LSTM sentiment model briefly on the bundled SST training trees
# and runs the trained model over the SST test trees: batched, then one instance at a time for
# comparison; then the H=256 model's throughput the same two ways.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
scripts/install-python.sh build
echo
mkdir -p build/demo
echo "== train a Tree-LSTM (H=64) on the 8544 SST training trees: 5 epochs of Adam in batches of 25, AOT engine =="
build/tools/acrobat train models/treelstm.acr --input sst:data/sst/train.txt --dev sst:data/sst/dev.txt \
  --test sst:data/sst/test.txt --set H=64 --epochs 5 --engine aot --out build/demo/treelstm_h64.safetensors \
  --log build/demo/train.json --plot build/demo/train.png
echo "(curves: build/demo/train.png)"
echo
echo "== the trained model on the 2210 SST test trees, batched engine, batches of 64 =="
build/tools/acrobat run models/treelstm.acr --set H=64 --params build/demo/treelstm_h64.safetensors \
  --input sst:data/sst/test.txt --show 5
echo
echo "== the same, reference engine (one instance at a time) =="
build/tools/acrobat run models/treelstm.acr --set H=64 --params build/demo/treelstm_h64.safetensors \
  --input sst:data/sst/test.txt --engine reference --show 0
echo
echo "== Tree-LSTM at H=256 (random weights, seed 0): batched, then one instance at a time =="
build/tools/acrobat run models/treelstm.acr --input sst:data/sst/test.txt --show 0
build/tools/acrobat run models/treelstm.acr --input sst:data/sst/test.txt --engine reference --show 0
