#!/usr/bin/env bash
# Set-up plus the whole test suite: installs dependencies, builds, runs every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build=${LMS_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
