#!/usr/bin/env bash
# Installs the Debian dependencies (if missing), configures and builds LMS into build/ (or $LMS_BUILD_DIR).
# Warnings are errors. Re-running is cheap: ccache and ninja only rebuild what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${LMS_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DLMS_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
