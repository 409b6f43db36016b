#!/usr/bin/env bash
# The main job: train an MLP on Fashion-MNIST for one epoch on the reference backend (plain loops, the oracle
# backend; about a minute on 2 cores) and print the test accuracy. Later milestones move it to the fast cpu
# backend, a CNN, and a budget that needs LMS.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${LMS_BUILD_DIR:-build}
"$build/bin/lms" train --model mlp --data fashion-mnist --epochs 1 --device reference
