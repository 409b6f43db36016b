#!/usr/bin/env bash
# The main job. For now: the statistics of a ResNet-50 graph at batch 32 (training lands with the next issue).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${LMS_BUILD_DIR:-build}
"$build/bin/lms" stats --model resnet50 --batch 32
