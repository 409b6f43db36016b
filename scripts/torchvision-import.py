#!/usr/bin/python3
"""Exports torchvision's classification, segmentation and video models as a user would for LMS (training mode,
opset 14, no constant folding, a symbolic batch; their Dropouts export in training mode and import as LMS's
dropout; stochastic depth, whose Bernoulli PyTorch 1.13 cannot export, is switched off) and imports each with
`lms stats`, printing one line per model: imported (with its parameter count) or the import's error line.
A survey of what the ONNX importer covers, not a test: CI has no torchvision.

    /usr/bin/python3 scripts/torchvision-import.py [--lms build/bin/lms] [--image 64] [model ...]

Needs Debian's python3-torch and python3-torchvision (1.13 / 0.14).
"""
import argparse
import json
import os
import subprocess
import tempfile
import warnings

import torch
import torchvision.models as models
import torchvision.models.segmentation as segmentation
import torchvision.models.video as video
import torchvision.ops as ops

DEFAULT_MODELS = ["resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "mobilenet_v2", "mobilenet_v3_small",
                  "mobilenet_v3_large", "densenet121", "shufflenet_v2_x1_0", "regnet_y_400mf", "mnasnet0_5",
                  "squeezenet1_0", "googlenet", "efficientnet_b0", "convnext_tiny", "vgg11_bn", "alexnet", "vit_b_16",
                  "swin_t"]
SEGMENTATION_MODELS = ["fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large",
                       "lraspp_mobilenet_v3_large"]
VIDEO_MODELS = ["r3d_18", "mc3_18", "r2plus1d_18"]  # 3-D convolutions over [N, 3, 8 frames, side, side]
DEFAULT_MODELS += SEGMENTATION_MODELS + VIDEO_MODELS
FIXED_SIZE = {"vit_b_16": 224}  # models whose input size is part of the architecture


class SegmentationOutput(torch.nn.Module):
    """torchvision's segmentation models return {"out": logits}: the logits alone, one output."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def export(name, path, image):
    image = FIXED_SIZE.get(name, image)
    shape = (2, 3, 8, image, image) if name in VIDEO_MODELS else (2, 3, image, image)
    if name in VIDEO_MODELS:
        model = getattr(video, name)(num_classes=10)
    elif name in SEGMENTATION_MODELS:
        model = SegmentationOutput(getattr(segmentation, name)(
            weights=None, weights_backbone=None, num_classes=5,
            **({} if name.startswith("lraspp") else {"aux_loss": False})))
    else:
        model = getattr(models, name)(num_classes=10, **({"aux_logits": False, "init_weights": True}
                                                         if name == "googlenet" else {}))
    model.train()
    for module in model.modules():  # efficientnet's and convnext's: no ONNX form of torch.bernoulli in training mode
        if isinstance(module, ops.StochasticDepth):
            module.p = 0.0
    torch.onnx.export(model, (torch.randn(*shape),), path, input_names=["input"],
                      output_names=["logits"], opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lms", default="build/bin/lms", help="the lms binary")
    parser.add_argument("--image", type=int, default=64, help="input side at export")
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            path = os.path.join(tmp, name + ".onnx")
            try:
                export(name, path, args.image)
            except Exception as e:  # the exporter's own refusals (e.g. stochastic depth's Bernoulli)
                print(f"{name:22} export failed: {str(e).splitlines()[0][:150]}")
                continue
            r = subprocess.run([args.lms, "stats", path, "--batch", "2", "--json"], capture_output=True, text=True)
            if r.returncode == 0:
                print(f"{name:22} imported: {json.loads(r.stdout)['params']:,} parameters")
            else:
                print(f"{name:22} {r.stderr.strip().replace(path + ': ', '')[:200]}")


if __name__ == "__main__":
    main()
