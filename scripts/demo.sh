#!/usr/bin/env bash
# The main job: an MLP (five hidden layers of 512, batch 1024) on Fashion-MNIST, on the cpu backend, under a
# device budget its training step does not fit without LMS. First `lms plan` shows the no-LMS plan failing
# (exit status 1, expected), then `lms train --strategy tflms` trains under the budget and prints the peak
# without LMS, the budget, the plan chosen (TFLMS parameters, tensors swapped) and the test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${LMS_BUILD_DIR:-build}
model=(--model mlp --hidden 512,512,512,512,512 --batch 1024)
budget=24MiB
echo "== without LMS: does the training step fit $budget?"
"$build/bin/lms" plan "${model[@]}" --budget "$budget" --device cpu || true
echo
echo "== with TFLMS under $budget"
"$build/bin/lms" train "${model[@]}" --data fashion-mnist --epochs 3 --lr 0.05 --device cpu \
  --strategy tflms --budget "$budget"
