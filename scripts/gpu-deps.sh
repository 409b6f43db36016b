#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with apt), before a device run: downloads the Debian packages the build needs
# that the GPU machine lacks (it has CUDA, cmake, ninja and a compiler, but no Debian -dev packages) into
# .gpu-deps/ (ignored by git; name it in the device run's `carry`). scripts/gpu-check.sh unpacks them into a
# prefix there. oneDNN and ONNX are deliberately not among them: the CUDA build must not need them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu-deps
cd .gpu-deps
rm -f ./*.deb
apt-get download libfmt-dev libfmt9 nlohmann-json3-dev libgtest-dev libcli11-dev zlib1g-dev zlib1g >/dev/null
ls -1 ./*.deb
du -sh .
