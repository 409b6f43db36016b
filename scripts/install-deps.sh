#!/usr/bin/env bash
# Installs every Debian package LMS needs to build and test. Idempotent: safe to run again; it installs only
# what is missing. Run as root on Debian 12. Nothing is downloaded from anywhere but Debian's repositories.
# --bench also installs what bench/cpu_vs_torch.sh compares against: PyTorch, torchvision and an optimized BLAS
# (torch's CPU convolutions go through BLAS; with Debian's reference BLAS it would be needlessly slow).
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev googletest libbenchmark-dev   # tests and benchmarks
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev  # command line, JSON, formatting, gzip
  libdnnl-dev ocl-icd-opencl-dev                         # oneDNN 2.x, cpu backend kernels (its CMake config needs OpenCL)
  libonnx-dev libprotobuf-dev                            # reading .onnx models (ONNX import)
  dataset-fashion-mnist                                  # the real data set used by `lms train`
  clang-14 libclang-rt-14-dev                            # libFuzzer target for the IR parser
  python3-numpy                                          # the test that numpy reads the .npz files we write
)
if [ "${1:-}" = "--bench" ]; then
  packages+=(python3-torch python3-torchvision libopenblas0-pthread)
elif [ $# -gt 0 ]; then
  echo "install-deps: unknown option '$1' (options: --bench)" >&2
  exit 2
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
