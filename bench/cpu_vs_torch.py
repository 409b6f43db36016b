#!/usr/bin/python3
# The cpu-backend vs PyTorch benchmark (issue 4, item 8): for each configuration it times a training step of
# the same network, on the same batch shape, with the same optimizer and thread count, first on LMS's cpu
# backend (`lms train --device cpu --data synthetic --json`, a subprocess) and then on PyTorch (a subprocess
# of this script in `--torch-worker` mode, so that the thread environment is set before torch is imported and
# each side's memory is gone before the other starts), and prints a table of both median step times and their
# ratio (ours / torch; the goal is <= 1.0). Before timing anything it checks that both sides build the same
# model: every parameter, by PyTorch module name and shape (LMS names `x.w`/`x.gamma` map to `x.weight`,
# `x.b`/`x.beta` to `x.bias`), and the total count from `lms stats --json`; any difference stops the run with
# exit status 1. Warm-up steps are excluded from both medians (from LMS's only when `lms train --json` lists
# per-step times, `step_seconds`; otherwise its all-step median is used and the table marks it).
# bench/cpu_vs_torch.sh is the one-command entry; docs/results.md says how to run it and how to read it.
#
# The networks on the torch side mirror src/lms/models exactly: torchvision's resnet50; torchvision's resnet18
# with the small stem of `--small-stem` (3x3 stride-1 pad-1 conv1, no max-pool); UNet3D below, a line-for-line
# copy of src/lms/models/unet3d.cc; and GPT below, src/lms/models/gpt.cc (GPT-2: pre-layer-norm blocks, fused
# qkv, exact-erf gelu, tied output embedding), whose attention is written out as LMS runs it (matmul, scale,
# causal softmax, matmul; Debian's torch 1.13 has no fused scaled_dot_product_attention). Both sides end in
# cross-entropy averaged over every labelled position (the batch; every voxel for unet3d; every token for gpt),
# train batch norm in training mode (eps 1e-5, momentum 0.1, running statistics updated), and update with
# momentum SGD at LMS's defaults (src/lms/autodiff/optimizer.h: lr 0.01, momentum 0.9, no dampening, weight
# decay 0, no Nesterov), which is torch.optim.SGD's rule. Inputs are standard-normal images (gpt: uniform token
# ids) with uniform labels on both sides, made outside the timed region (torch reuses one batch; LMS's
# synthetic source serves a fresh one per step, fed inside its timed step: a copy of at most about 10 MB).
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

# Each configuration: the `lms` model options (the same on `lms stats`, `lms model` and `lms train`) and what
# the torch worker builds. `smoke` shrinks it for a quick end-to-end check (the shapes change, the code paths
# do not). resnet18 at 32x32 uses 10 classes, CIFAR-10's shape; the issue names no class count for it.
CONFIGS = {
    "resnet50": {
        "model": "resnet50", "batch": 16, "image": 224, "classes": 1000, "small_stem": False,
        "smoke": {"batch": 2, "image": 64},
    },
    "resnet18-32": {
        "model": "resnet18", "batch": 64, "image": 32, "classes": 10, "small_stem": True,
        "smoke": {"batch": 4, "image": 32},
    },
    "unet3d-64": {
        "model": "unet3d", "batch": 1, "image": 64, "classes": 3, "small_stem": False,
        "channels": 4, "depth": 4, "base_filters": 32,
        "smoke": {"batch": 1, "image": 16},
    },
    # GPT-2 small (124M parameters, 12 layers, width 768, 12 heads, vocabulary 50257) on 4 sequences of 128.
    "gpt2-128": {
        "model": "gpt", "batch": 4, "seq": 128, "layers": 12, "hidden_size": 768, "heads": 12, "vocab": 50257,
        "smoke": {"batch": 2, "seq": 16, "layers": 2, "hidden_size": 64, "heads": 4, "vocab": 512},
    },
}

# LMS's optimizer defaults (src/lms/autodiff/optimizer.h, tools/lms/cmd_train.cc), passed explicitly to both
# sides so that a change of default on either side cannot silently make the comparison unequal.
LR = 0.01
MOMENTUM = 0.9
WEIGHT_DECAY = 0.0

# LMS parameter-name suffixes and the PyTorch attribute each corresponds to (a name without a dot, like gpt's
# wte and wpe, is a bare nn.Parameter of the same name on the torch side).
SUFFIXES = {"w": "weight", "b": "bias", "gamma": "weight", "beta": "bias"}
PARAM_LINE = re.compile(r"^\s*%([^\s=]+) = param\(\)(?: \{[^}]*\})? : \w+\[([0-9,]*)\]")


def die(msg):
    print(f"cpu_vs_torch: error: {msg}", file=sys.stderr)
    sys.exit(1)


def thread_env(threads):
    # oneDNN in Debian's libdnnl (ours) and ATen/mkldnn in Debian's torch both use GNU OpenMP; OpenBLAS (torch's
    # BLAS) reads its own variable. Set them all for both sides.
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


# ---------------------------------------------------------------------------------------------------------
# The torch side (runs in the worker subprocess; torch is imported only there).

def build_torch_model(cfg):
    import torch.nn as nn
    import torchvision

    if cfg["model"] in ("resnet18", "resnet50"):
        m = getattr(torchvision.models, cfg["model"])(weights=None, num_classes=cfg["classes"])
        if cfg["small_stem"]:
            # LMS's small stem: conv_bn(x, 64, kernel 3, stride 1) with pad kernel/2, then relu, no max-pool.
            m.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
            m.maxpool = nn.Identity()
        return m
    if cfg["model"] == "unet3d":
        return UNet3D(cfg["channels"], cfg["classes"], cfg["depth"], cfg["base_filters"])
    if cfg["model"] == "gpt":
        return GPT(cfg["layers"], cfg["hidden_size"], cfg["heads"], cfg["seq"], cfg["vocab"])
    raise ValueError(cfg["model"])


def GPT(layers, hidden, heads, seq, vocab):  # noqa: N802 (a class factory, named as the class it returns)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)  # True above the diagonal: the future, masked out

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = (s.view(b, t, heads, hidden // heads).transpose(1, 2) for s in self.qkv(x).split(hidden, 2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hidden // heads))
            att = F.softmax(att.masked_fill(mask[:t, :t], float("-inf")), dim=-1)
            y = att @ v
            return self.proj(y.transpose(1, 2).reshape(b, t, hidden))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            return self.proj(F.gelu(self.fc(x)))  # exact (erf) gelu, as LMS's

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(hidden)
            self.mlp = Mlp()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Parameter(torch.randn(vocab, hidden) * 0.02)
            self.wpe = nn.Parameter(torch.randn(seq, hidden) * 0.02)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)

        def forward(self, ids):
            x = F.embedding(ids, self.wte) + self.wpe
            for block in self.h:
                x = block(x)
            return self.ln_f(x.reshape(-1, hidden)) @ self.wte.t()  # flattened, then the tied output embedding

    return Net()


def UNet3D(channels, classes, depth, base):  # noqa: N802 (a class factory, named as the class it returns)
    import torch
    import torch.nn as nn

    class DoubleConv(nn.Module):
        # Two (3x3x3 conv pad 1, no bias + batch norm + relu): unet3d.cc's double_conv.
        def __init__(self, cin, filters):
            super().__init__()
            self.conv1 = nn.Conv3d(cin, filters, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm3d(filters)
            self.conv2 = nn.Conv3d(filters, filters, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm3d(filters)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(x)))

    class Up(DoubleConv):
        # A decoder level: `up` (2x2x2 stride-2 transposed conv with bias), concat(skip, up) on channels, then
        # the two convs. Module names match LMS's dec<l>.up, dec<l>.conv1, ...
        def __init__(self, filters):
            super().__init__(2 * filters, filters)
            self.up = nn.ConvTranspose3d(2 * filters, filters, 2, stride=2, bias=True)

        def forward(self, x, skip):
            return super().forward(torch.cat([skip, self.up(x)], dim=1))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.depth = depth
            for level in range(depth):
                cin = channels if level == 0 else base << (level - 1)
                setattr(self, f"enc{level}", DoubleConv(cin, base << level))
            for level in range(depth - 2, -1, -1):
                setattr(self, f"dec{level}", Up(base << level))
            self.pool = nn.MaxPool3d(2)
            self.out = nn.Conv3d(base, classes, 1, bias=True)

        def forward(self, x):
            skips = []
            for level in range(self.depth):
                if level > 0:
                    x = self.pool(x)
                x = getattr(self, f"enc{level}")(x)
                skips.append(x)
            for level in range(self.depth - 2, -1, -1):
                x = getattr(self, f"dec{level}")(x, skips[level])
            return self.out(x)

    return Net()


def torch_worker(args):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = json.loads(args.torch_worker)
    model = build_torch_model(cfg)
    params = {name: list(p.shape) for name, p in model.named_parameters()}
    out = {"params": params, "torch": torch.__version__, "threads": torch.get_num_threads()}
    if args.describe:
        print(json.dumps(out))
        return
    model.train()
    if cfg["model"] == "gpt":
        x = torch.randint(0, cfg["vocab"], [cfg["batch"], cfg["seq"]], dtype=torch.int64)
        labels = torch.randint(0, cfg["vocab"], [cfg["batch"] * cfg["seq"]], dtype=torch.int64)
    else:
        spatial = [cfg["image"]] * (3 if cfg["model"] == "unet3d" else 2)
        channels = cfg.get("channels", 3)
        x = torch.randn([cfg["batch"], channels] + spatial)
        label_shape = [cfg["batch"]] + (spatial if cfg["model"] == "unet3d" else [])
        labels = torch.randint(0, cfg["classes"], label_shape, dtype=torch.int64)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, dampening=0, weight_decay=WEIGHT_DECAY,
                          nesterov=False)
    # Which kernel family PyTorch picks for each convolution (Mkldnn, or Slow2d/Slow3d/SlowTranspose3d:
    # im2col + BLAS), recorded on the first step only, and which BLAS library the process loaded: both decide
    # what "PyTorch's speed" means here and are printed next to the result.
    backends = {}
    select = getattr(torch._C, "_select_conv_backend", None)

    def record(mod, inputs):
        if select is None:
            return
        transposed = isinstance(mod, torch.nn.modules.conv._ConvTransposeNd)
        b = select(inputs[0], mod.weight, mod.bias, list(mod.stride), list(mod.padding), list(mod.dilation),
                   transposed, list(mod.output_padding) if transposed else [0] * len(mod.stride), mod.groups)
        key = str(b).rsplit(".", 1)[-1]
        backends[key] = backends.get(key, 0) + 1

    hooks = [m.register_forward_pre_hook(record) for m in model.modules()
             if isinstance(m, torch.nn.modules.conv._ConvNd)]
    seconds, losses = [], []
    for step in range(args.warmup + args.steps):
        if step == 1:
            for h in hooks:
                h.remove()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), labels)  # mean over every labelled position, as LMS's cross_entropy
        loss.backward()
        opt.step()
        losses.append(loss.item())  # CPU ops are synchronous; item() is the same read-back LMS does
        seconds.append(time.perf_counter() - start)
    with open("/proc/self/maps") as maps:
        blas = sorted({line.split()[-1] for line in maps if "blas" in line.split()[-1].rsplit("/", 1)[-1]})
    out.update(step_seconds=seconds, losses=losses, conv_backends=backends, blas=blas, blas_core=openblas_core(blas))
    print(json.dumps(out))


def openblas_core(blas):
    # The kernel family OpenBLAS picked (its run-time CPU detection, or OPENBLAS_CORETYPE), or "" when the
    # process did not load OpenBLAS.
    import ctypes

    for path in blas:
        if "openblas" in path.rsplit("/", 1)[-1]:
            get = ctypes.CDLL(path).openblas_get_corename
            get.restype = ctypes.c_char_p
            return get().decode()
    return ""


# ---------------------------------------------------------------------------------------------------------
# The driver.

def lms_model_args(cfg):
    if cfg["model"] == "gpt":
        return ["--model", "gpt", "--batch", str(cfg["batch"]), "--seq", str(cfg["seq"]), "--layers",
                str(cfg["layers"]), "--hidden-size", str(cfg["hidden_size"]), "--heads", str(cfg["heads"]),
                "--vocab", str(cfg["vocab"])]
    a = ["--model", cfg["model"], "--batch", str(cfg["batch"]), "--image", str(cfg["image"]),
         "--classes", str(cfg["classes"])]
    if cfg.get("small_stem"):
        a.append("--small-stem")
    if cfg["model"] == "unet3d":
        a += ["--channels", str(cfg["channels"]), "--depth", str(cfg["depth"]),
              "--base-filters", str(cfg["base_filters"])]
    return a


def run(cmd, env=None):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        die(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr.strip()}")
    return p.stdout


def lms_params(lms, cfg):
    # Name -> shape from the forward graph's param lines, renamed to PyTorch's convention.
    params = {}
    # `lms model` takes the name as an operand; stats and train take --model NAME.
    for line in run([lms, "model", cfg["model"]] + lms_model_args(cfg)[2:]).splitlines():
        m = PARAM_LINE.match(line)
        if not m:
            continue
        base, _, suffix = m.group(1).rpartition(".")
        if not base:
            params[suffix] = [int(d) for d in m.group(2).split(",")] if m.group(2) else []
            continue
        if suffix not in SUFFIXES:
            die(f"lms parameter %{m.group(1)} has no PyTorch counterpart (suffix '{suffix}')")
        shape = [int(d) for d in m.group(2).split(",")] if m.group(2) else []
        params[f"{base}.{SUFFIXES[suffix]}"] = shape
    total = json.loads(run([lms, "stats"] + lms_model_args(cfg) + ["--json"]))["params"]
    return params, total


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def check_same_model(name, ours, ours_total, theirs):
    # Fails loudly on any difference: a missing or extra parameter, a shape, or the total count.
    problems = []
    for k in sorted(set(ours) | set(theirs)):
        if k not in theirs:
            problems.append(f"only in lms: {k} {ours[k]}")
        elif k not in ours:
            problems.append(f"only in torch: {k} {theirs[k]}")
        elif ours[k] != theirs[k]:
            problems.append(f"{k}: lms {ours[k]} torch {theirs[k]}")
    torch_total = sum(numel(s) for s in theirs.values())
    if ours_total != torch_total:
        problems.append(f"parameter count: lms {ours_total}, torch {torch_total}")
    if sum(numel(s) for s in ours.values()) != ours_total:
        problems.append(f"lms model's param lines do not add up to lms stats' {ours_total}")
    if problems:
        die(f"{name}: the two sides do not build the same model:\n  " + "\n  ".join(problems[:20]))
    return torch_total


def worker_cmd(args, cfg, describe):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", json.dumps(cfg),
           "--threads", str(args.threads), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    return cmd + (["--describe"] if describe else [])


def bench_config(args, name):
    cfg = {k: v for k, v in CONFIGS[name].items() if k != "smoke"}
    if args.smoke:
        cfg.update(CONFIGS[name]["smoke"])
    if args.batch:
        cfg["batch"] = args.batch
    if args.image:
        if "image" not in cfg:
            die(f"--image does not apply to {name} (a {cfg['model']} has no image)")
        cfg["image"] = args.image
    env = thread_env(args.threads)

    ours_params, ours_total = lms_params(args.lms, cfg)
    described = json.loads(run(worker_cmd(args, cfg, describe=True), env=env))
    params = check_same_model(name, ours_params, ours_total, described["params"])
    print(f"[{name}] same model on both sides: {params:,} parameters in {len(ours_params)} tensors; "
          f"batch {cfg['batch']}, " + (f"seq {cfg['seq']}" if "seq" in cfg else f"image {cfg['image']}")
          + f", {args.threads} threads, "
          f"{args.warmup} warm-up + {args.steps} timed steps", file=sys.stderr, flush=True)

    started = time.monotonic()
    lms_cmd = [args.lms, "train"] + lms_model_args(cfg) + [
        "--device", "cpu", "--steps", str(args.warmup + args.steps), "--data", "synthetic", "--seed", "0",
        "--optimizer", "momentum", "--lr", str(LR), "--momentum", str(MOMENTUM),
        "--weight-decay", str(WEIGHT_DECAY), "--json"] + args.lms_arg
    ours = json.loads(run(lms_cmd, env=env))
    ours_wall = time.monotonic() - started
    if "step_seconds" in ours:  # per-step times: drop the warm-up steps exactly as on the torch side
        ours_median = statistics.median(ours["step_seconds"][args.warmup:])
        ours_includes_warmup = False
    else:  # older lms: only the median over every step, step 1 included (biased against us, never for us)
        ours_median = ours["step_seconds_median"]
        ours_includes_warmup = True
    print(f"[{name}] lms:   median {ours_median:.4f} s/step ({ours_wall:.0f} s wall)", file=sys.stderr, flush=True)

    started = time.monotonic()
    torch_env = dict(env)
    if args.torch_blas:  # a BLAS for the torch side only, e.g. an unpacked libopenblas0-pthread
        torch_env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [args.torch_blas, env.get("LD_LIBRARY_PATH")]))
    theirs = json.loads(run(worker_cmd(args, cfg, describe=False), env=torch_env))
    torch_wall = time.monotonic() - started
    torch_median = statistics.median(theirs["step_seconds"][args.warmup:])
    print(f"[{name}] torch: median {torch_median:.4f} s/step ({torch_wall:.0f} s wall); convolutions: "
          + (", ".join(f"{k} x{v}" for k, v in sorted(theirs["conv_backends"].items())) or "none") + "; BLAS: "
          + ", ".join(theirs["blas"]) + (f" (OpenBLAS core {theirs['blas_core']})" if theirs["blas_core"] else ""),
          file=sys.stderr, flush=True)
    slow = sum(v for k, v in theirs["conv_backends"].items() if k.startswith("Slow"))
    if slow and any("/blas/" in path for path in theirs["blas"]):
        print(f"[{name}] WARNING: {slow} torch convolutions run im2col + BLAS, and torch loaded Debian's "
              "unoptimized reference BLAS (libblas3): install libopenblas0-pthread (scripts/install-deps.sh "
              "--bench) or pass --torch-blas DIR, else the torch time is not PyTorch's real speed",
              file=sys.stderr, flush=True)
    if theirs["blas_core"] and env.get("OPENBLAS_CORETYPE"):
        print(f"[{name}] NOTE: OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} in the environment chose torch's BLAS "
              "kernels, not OpenBLAS's CPU detection: unset it for PyTorch's speed on this CPU (e.g. an AVX2 core "
              "on an AVX-512 CPU runs matmuls at half the vector width)", file=sys.stderr, flush=True)

    return {
        "config": name, "model": cfg["model"], "batch": cfg["batch"], "image": cfg.get("image"),
        "classes": cfg.get("classes"), "small_stem": cfg.get("small_stem"), "seq": cfg.get("seq"),
        "params": params, "threads": args.threads,
        "warmup_steps": args.warmup, "timed_steps": args.steps,
        "ours_step_seconds_median": ours_median, "ours_median_includes_warmup": ours_includes_warmup,
        "ours_step_seconds": ours.get("step_seconds"), "ours_losses": ours["losses"],
        "ours_wall_seconds": ours_wall,
        "torch_step_seconds_median": torch_median, "torch_step_seconds": theirs["step_seconds"],
        "torch_losses": theirs["losses"], "torch_version": theirs["torch"], "torch_threads": theirs["threads"],
        "torch_conv_backends": theirs["conv_backends"], "torch_blas": theirs["blas"],
        "torch_blas_core": theirs["blas_core"],
        "torch_wall_seconds": torch_wall,
        "ratio": ours_median / torch_median,
    }


def print_table(rows):
    print(f"{'config':<14} {'params':>12} {'ours s/step':>12} {'torch s/step':>13} {'ours/torch':>11}")
    for r in rows:
        mark = "*" if r["ours_median_includes_warmup"] else ""
        print(f"{r['config']:<14} {r['params']:>12,} {r['ours_step_seconds_median']:>11.4f}{mark:<1} "
              f"{r['torch_step_seconds_median']:>13.4f} {r['ratio']:>11.3f}")
    if any(r["ours_median_includes_warmup"] for r in rows):
        print("* this lms prints no per-step times: its median is over every step, the first (warm-up) included")


def main():
    p = argparse.ArgumentParser(description="Training step time: LMS cpu backend vs PyTorch, side by side.")
    p.add_argument("--config", action="append", choices=sorted(CONFIGS),
                   help="configuration to run (repeatable; default: all)")
    p.add_argument("--lms", default=os.environ.get("LMS", ""), help="the lms binary (default $LMS, then "
                   "build/bin/lms next to this script's repository)")
    p.add_argument("--lms-arg", action="append", default=[], metavar="ARG",
                   help="an extra argument for `lms train` (repeatable), e.g. --lms-arg=--cpu-layouts=plain")
    p.add_argument("--steps", type=int, default=10, help="timed steps per side (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps per side (default 3)")
    p.add_argument("--threads", type=int, default=2, help="threads on both sides (default 2)")
    p.add_argument("--batch", type=int, help="override every chosen configuration's batch")
    p.add_argument("--image", type=int, help="override every chosen configuration's image side")
    p.add_argument("--smoke", action="store_true", help="small shapes for a quick end-to-end check "
                   "(not a measurement)")
    p.add_argument("--torch-blas", metavar="DIR", help="put DIR first on the torch side's LD_LIBRARY_PATH "
                   "(a directory holding libblas.so.3, e.g. /usr/lib/x86_64-linux-gnu/openblas-pthread)")
    p.add_argument("--json", metavar="FILE", help="also write the results (all step times) to FILE")
    p.add_argument("--torch-worker", metavar="CFG", help=argparse.SUPPRESS)
    p.add_argument("--describe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        die("--steps must be >= 1, --warmup >= 0, --threads >= 1")
    if args.torch_worker:
        torch_worker(args)
        return
    if not args.lms:
        args.lms = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bin", "lms")
    if not (os.path.isfile(args.lms) and os.access(args.lms, os.X_OK)) and not shutil.which(args.lms):
        die(f"no lms binary at {args.lms} (build it, or pass --lms PATH / set LMS)")
    args.lms = os.path.abspath(args.lms) if os.path.isfile(args.lms) else shutil.which(args.lms)
    probe = subprocess.run([sys.executable, "-c", "import torch, torchvision"], capture_output=True, text=True)
    if probe.returncode != 0:
        die("PyTorch with torchvision is needed (Debian: apt-get install python3-torch python3-torchvision, "
            "or scripts/install-deps.sh --bench):\n" + probe.stderr.strip().splitlines()[-1])

    rows = [bench_config(args, name) for name in (args.config or list(CONFIGS))]
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"lms": args.lms, "results": rows}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
