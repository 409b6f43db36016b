#!/usr/bin/env python3
"""How fast can a 1x1 convolution's three passes run as f32 gemms on this GPU, against cuDNN?

What it is: a stand-alone PyTorch microbenchmark (nothing but torch) over the stride-1 1x1 convolutions of
ResNet-50 at 224x224 (shapes our engine runs on cuBLAS by default, --cuda-conv-gemm 1x1), in float32 with TF32 off.
For each shape [N, Ci, P] -> [N, Co, P] (P = H*W, NCHW as our engine lays tensors out) it times, median of --reps
runs each, with CUDA events:
    cudnn_det      cuDNN through PyTorch with cudnn.deterministic (the algorithm set our engine is limited to)
    cudnn          cuDNN through PyTorch's defaults (nondeterministic algorithms allowed: PyTorch plain)
    fwd_bmm        forward as one strided-batched gemm per sample, the weight shared (our engine's forward)
    bwd_data_bmm   backward-data likewise
    fwd_t          forward as one gemm over [Ci, N*P]: x regrouped first, y regrouped back after
    bwd_data_t     backward-data likewise
    wgrad_bmm      backward-filter as per-sample gemms into partials, then their sum (our engine's, group = N)
    wgrad_t{c}     backward-filter with the batch regrouped: groups of c samples copied into [C, c*P] layout
                   (one transpose of dy and of x), one strided-batched gemm over the N/c groups with K = c*P,
                   then the sum of the N/c partials; c = N is one gemm over K = N*P and no sum
The gemm variants count the copies and sums they need. TF32 is off, cudnn.benchmark off.

How it runs, on a GPU machine (it chose the formulations of backends/cuda/conv_gemm.cc; docs/results.md):
    python3 bench/conv1x1_gemm.py --batch 64 --json-out OUT.json
It prints one line per shape (milliseconds per pass and variant; TFLOP/s in the JSON). `--cpu-smoke` runs every variant on the CPU at
a tiny batch and checks each against cuDNN's (here: PyTorch's CPU) result, for testing without a GPU.
Exit status: 0 done, 2 bad options, 3 no CUDA device (without --cpu-smoke), 4 a variant computed a wrong result.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

# ResNet-50's stride-1 1x1 convolutions at 224x224: (Ci, Co, H) and how many of each the network has.
SHAPES = [
    (64, 64, 56, 1), (256, 64, 56, 2), (64, 256, 56, 4),          # layer1 (its downsample is stride 1)
    (256, 128, 56, 1), (128, 512, 28, 4), (512, 128, 28, 3),      # layer2
    (512, 256, 28, 1), (256, 1024, 14, 6), (1024, 256, 14, 5),    # layer3
    (1024, 512, 14, 1), (512, 2048, 7, 3), (2048, 512, 7, 2),     # layer4
]


def timed(fn, reps, device):
    """Median milliseconds of fn() over reps runs after one warm-up (CUDA events on a GPU)."""
    fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            fn()
            times.append(0.0)
    return statistics.median(times)


def regroup(t, c):
    """[N, C, P] -> [N/c, C, c*P]: each group of c samples laid out as one [C, c*P] matrix (a copy)."""
    n, ch, p = t.shape
    return t.view(n // c, c, ch, p).transpose(1, 2).reshape(n // c, ch, c * p)


def variants(n):
    """The backward-filter regroupings to time at batch n: c = 2, 4, ... up to n (powers of two dividing n)."""
    out, c = [], 2
    while c <= n:
        if n % c == 0:
            out.append(c)
        c *= 2
    if n not in out:
        out.append(n)
    return out


def bench_shape(ci, co, h, n, reps, device, check):
    p = h * h
    g = torch.Generator(device="cpu").manual_seed(ci * 7 + co * 13 + h)
    x = torch.randn(n, ci, h, h, generator=g).to(device)
    w = torch.randn(co, ci, 1, 1, generator=g).to(device) / ci ** 0.5
    dy = torch.randn(n, co, h, h, generator=g).to(device)
    flops = 2.0 * n * ci * co * p
    rows = []

    def conv_passes():
        y = F.conv2d(x, w)
        dx, dw, _ = torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                        [True, True, False])
        return y, dx, dw

    def cudnn_times(det):
        torch.backends.cudnn.deterministic = det
        t_fwd = timed(lambda: F.conv2d(x, w), reps, device)
        t_bd = timed(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [0, 0], [1, 1], False,
                                                                 [0, 0], 1, [True, False, False]), reps, device)
        t_bf = timed(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [0, 0], [1, 1], False,
                                                                 [0, 0], 1, [False, True, False]), reps, device)
        torch.backends.cudnn.deterministic = False
        return t_fwd, t_bd, t_bf

    y_ref, dx_ref, dw_ref = conv_passes()
    det = cudnn_times(True)
    nondet = cudnn_times(False)
    xs, dys, w2 = x.view(n, ci, p), dy.view(n, co, p), w.view(co, ci)
    # the weight shared through a batch stride of 0 (torch.matmul would copy it per sample)
    fwd = lambda: torch.bmm(w2.expand(n, co, ci), xs)
    bwd_data = lambda: torch.bmm(w2.t().expand(n, ci, co), dys)
    # one gemm over the whole batch in [C, N*P] layout: the input regrouped, the output regrouped back
    fwd_t = lambda: torch.mm(w2, regroup(xs, n)[0]).view(co, n, p).transpose(0, 1).contiguous()
    bwd_data_t = lambda: torch.mm(w2.t(), regroup(dys, n)[0]).view(ci, n, p).transpose(0, 1).contiguous()
    wgrad_bmm = lambda: torch.bmm(dys, xs.transpose(1, 2)).sum(0)

    def wgrad_t(c):
        return lambda: torch.bmm(regroup(dys, c), regroup(xs, c).transpose(1, 2)).sum(0)

    results = {"fwd_bmm": (fwd, y_ref.view(n, co, p)), "bwd_data_bmm": (bwd_data, dx_ref.view(n, ci, p)),
               "fwd_t": (fwd_t, y_ref.view(n, co, p)), "bwd_data_t": (bwd_data_t, dx_ref.view(n, ci, p)),
               "wgrad_bmm": (wgrad_bmm, dw_ref.view(co, ci))}
    for c in variants(n):
        results[f"wgrad_t{c}"] = (wgrad_t(c), dw_ref.view(co, ci))
    bad = []
    for name, (fn, ref) in results.items():
        if check:
            got = fn()
            if not torch.allclose(got, ref, rtol=1e-3, atol=1e-3 * max(1.0, ref.abs().max().item())):
                bad.append(name)
    base = {"ci": ci, "co": co, "hw": h, "batch": n, "gflop": flops / 1e9}
    for label, (t_fwd, t_bd, t_bf) in (("cudnn_det", det), ("cudnn", nondet)):
        for pas, t in (("forward", t_fwd), ("backward_data", t_bd), ("backward_filter", t_bf)):
            rows.append({**base, "pass": pas, "variant": label, "ms": t})
    for name, (fn, _) in results.items():
        pas = "forward" if name.startswith("fwd") else "backward_data" if name.startswith("bwd") else "backward_filter"
        rows.append({**base, "pass": pas, "variant": name, "ms": timed(fn, reps, device)})
    for r in rows:
        r["tflops"] = flops / (r["ms"] * 1e-3) / 1e12 if r["ms"] > 0 else None
    return rows, bad


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        sys.stderr.write(f"conv1x1_gemm.py: {message}\n")
        sys.exit(2)


def main(argv):
    p = Parser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64, help="samples per convolution (default 64, as lms profile)")
    p.add_argument("--reps", type=int, default=10, help="timed runs per variant (median; default 10)")
    p.add_argument("--json-out", help="also write every row to this file")
    p.add_argument("--cpu-smoke", action="store_true", help="run on the CPU at batch 4 and check the results")
    args = p.parse_args(argv)
    if args.batch < 1 or args.reps < 1:
        p.error("--batch and --reps must be at least 1")
    if args.cpu_smoke:
        device, n, reps, shapes = torch.device("cpu"), 4, 1, [(8, 16, 5, 1), (16, 8, 3, 1)]
    else:
        if not torch.cuda.is_available():
            sys.stderr.write("conv1x1_gemm.py: no CUDA device (use --cpu-smoke to test on the CPU)\n")
            return 3
        device, n, reps, shapes = torch.device("cuda"), args.batch, args.reps, SHAPES
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
    all_rows, failures = [], []
    for ci, co, h, count in shapes:
        rows, bad = bench_shape(ci, co, h, n, reps, device, check=True)
        failures += [f"{name} at {ci}->{co} {h}x{h}" for name in bad]
        for r in rows:
            r["count"] = count
        all_rows += rows
        best = {}
        for r in rows:
            if r["pass"] not in best or r["ms"] < best[r["pass"]]["ms"]:
                best[r["pass"]] = r
        print(f"{ci:5d}->{co:<5d} {h:2d}x{h:<2d} x{count}: "
              + "; ".join(f"{pas} " + ", ".join(f"{r['variant']} {r['ms']:.3f}" for r in rows if r["pass"] == pas)
                          + f" (best {best[pas]['variant']})" for pas in ("forward", "backward_data", "backward_filter")),
              flush=True)
    # per pass: the network's total milliseconds for each variant (shapes weighted by their count); wgrad_t*: the
    # best regrouping per shape
    summary = {}
    for pas in ("forward", "backward_data", "backward_filter"):
        by_variant = {}
        for r in all_rows:
            if r["pass"] != pas:
                continue
            v = "wgrad_t(best c)" if r["variant"].startswith("wgrad_t") else r["variant"]
            by_variant.setdefault(v, {}).setdefault((r["ci"], r["co"], r["hw"]), []).append(r["ms"] * r["count"])
        summary[pas] = {v: round(sum(min(ts) for ts in shapes_.values()), 4) for v, shapes_ in by_variant.items()}
        print(f"total {pas} ms: " + ", ".join(f"{v} {t:.3f}" for v, t in summary[pas].items()))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"benchmark": "conv1x1_gemm", "batch": n, "device": str(device),
                       "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
                       "torch": torch.__version__, "rows": all_rows, "totals_ms": summary,
                       "failures": failures}, f, indent=1)
    if failures:
        sys.stderr.write("conv1x1_gemm.py: wrong results: " + "; ".join(failures) + "\n")
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
