#!/usr/bin/env bash
# One command for the cpu-backend vs PyTorch benchmark (bench/cpu_vs_torch.py does the work): runs resnet50
# (224x224, batch 16), resnet18 with the small stem (32x32, batch 64), unet3d (64^3, batch 1) and GPT-2 small
# (4 sequences of 128 tokens), or the ones chosen with --config, each as a training step on LMS's cpu backend
# and then on PyTorch with the same model, batch, optimizer and threads (2 by default), and prints config,
# parameters, both median step times (warm-up excluded) and ours/torch. Options (all passed through): --config
# NAME (repeatable: resnet50, resnet18-32, unet3d-64, gpt2-128), --steps K, --warmup W, --threads T, --batch N,
# --image S (not for gpt2-128), --smoke (small shapes, a quick check, not a measurement), --json FILE, --lms
# PATH (default $LMS, then build/bin/lms), --lms-arg ARG (an extra `lms train` argument, repeatable, e.g.
# --lms-arg=--cpu-layouts=plain), --torch-blas DIR (a BLAS for the torch side only). Needs Debian's
# python3-torch, python3-torchvision and an optimized BLAS for torch's matmuls and im2col convolutions
# (scripts/install-deps.sh --bench); the OpenBLAS kernel family torch ran is printed, with a note where
# OPENBLAS_CORETYPE chose it rather than OpenBLAS's CPU detection. Run it on an otherwise idle machine.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec /usr/bin/python3 "$here/cpu_vs_torch.py" "$@"
