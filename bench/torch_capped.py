#!/usr/bin/env python3
"""PyTorch's side of the capped-memory comparison: ResNet-50 max batch and samples/s under a GPU memory cap.

What it is: a stand-alone PyTorch benchmark (no torchvision, nothing but torch) that trains ResNet-50 (defined
below, exactly torchvision's resnet50: bottleneck blocks [3, 4, 6, 3], width 64, 1000 classes, batch norm,
25,557,032 parameters) at 224x224 in float32 on synthetic data (random images made once on the device, random
labels), one step = forward + cross-entropy + backward + SGD(lr 0.1, momentum 0.9), model in train mode, with
the caching allocator capped by torch.cuda.set_per_process_memory_fraction(cap / device total). For each mode
    plain        ordinary training, every saved activation stays on the GPU;
    save_on_cpu  forward+loss inside torch.autograd.graph.save_on_cpu(pin_memory=True): PyTorch's own
                 swapping, every tensor saved for backward goes to pinned host memory and comes back on use;
it finds the largest batch that completes 2 steps without running out of memory (doubling, then bisection,
within --max-seconds) and times samples/s at that batch and at any --batches (and with --deterministic-too those
batches again with cudnn.deterministic, the algorithms our engine is limited to). --copy-bandwidth adds
pinned host<->device copy rates, the ceiling for any swapping scheme on this machine. TF32 is off by default and
cudnn.benchmark too, as in our engine. The cap covers the caching allocator only, not the CUDA context.
Host RAM is guarded too (--host-cap): save_on_cpu's pinned memory grows with the batch, and running out of
host memory kills the process instead of raising, so batches predicted to pass the cap count as failures.

How it runs: scripts/gpu-check.sh calls it on the GPU machine, e.g.
    python3 bench/torch_capped.py --cap 16GiB --batches B --copy-bandwidth --json-out $OUT/torch_capped.json
(B: the batch our engine ran) and reads the JSON object it prints on stdout; progress goes to stderr.
`--cpu-smoke` runs every code path on the CPU (no cap, no pinning) for testing without a GPU.

What it is compared with: our engine's max batch (`lms maxbatch --model resnet50 --budget 16GiB ...`) and its
measured samples/s (`lms train ... --budget 16GiB`) at the same cap, against `plain` (what PyTorch fits
unaided) and `save_on_cpu` (PyTorch's built-in offload); and its swap traffic against copy_bandwidth.
Exit status: 0 done, 2 bad options, 3 no CUDA device (without --cpu-smoke).
"""
import argparse
import copy
import gc
import json
import os
import re
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

RESNET50_PARAMS = 25_557_032
MODES = ("plain", "save_on_cpu")
# Units as src/lms/support/size.cc accepts them (binary KiB.., short K/M/G binary, decimal kB..).
UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6,
         "gb": 10**9, "tb": 10**12, "k": 2**10, "m": 2**20, "g": 2**30}


def parse_size(text):
    """'16GiB', '512MiB', '2GB', '17179869184' -> bytes (argparse type: bad text is a usage error)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in UNITS or ("." in m.group(1) and m.group(2).lower() in ("", "b")):
        raise argparse.ArgumentTypeError(f"bad size '{text}' (expected bytes or e.g. 512MiB, 16GiB, 2GB)")
    return int(round(float(m.group(1)) * UNITS[m.group(2).lower()]))


def batch_list(text):
    out = [int(t) for t in text.split(",") if t.strip()] if re.fullmatch(r"[\d,\s]*", text) else None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"bad batch list '{text}' (expected e.g. 64,128)")
    return out


# ---- ResNet-50, line for line torchvision.models.resnet50 (v1.5: stride on the 3x3 conv) ----
class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != width * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False),
                                            nn.BatchNorm2d(width * 4))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += x if self.downsample is None else self.downsample(x)  # in place, as torchvision
        return self.relu(out)


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1, self.relu, self.maxpool = nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        cin, layers = 64, []
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layers.append(nn.Sequential(*[Bottleneck(cin if i == 0 else width * 4, width, stride if i == 0 else 1)
                                          for i in range(blocks)]))
            cin = width * 4
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(2048, classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight), nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---- measurement machinery ----
class Bench:
    def __init__(self, args):
        self.args, self.cuda = args, not args.cpu_smoke
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        self.template = ResNet50()  # every trial starts from a copy of these weights, so no state leaks
        n = sum(p.numel() for p in self.template.parameters())
        assert n == RESNET50_PARAMS, f"ResNet-50 has {n} parameters, expected {RESNET50_PARAMS}"
        # Host guard: per mode, (batch, peak host RSS growth) of the largest batch that ran. Scaling the growth
        # of the largest run (not the worst bytes/sample) keeps one-off costs (lazily loaded cuDNN kernels,
        # the model copy) from inflating the estimate at small batches; it only ever overestimates.
        self.host_probe = {m: (1, 0) for m in MODES}

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def release(self):
        """Return freed memory to the device (and pinned host blocks to the OS) so trials do not interact."""
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
            getattr(torch._C, "_host_emptyCache", lambda: None)()

    def guarded(self, fn):
        """(True, fn()) or (False, None) when fn runs out of device (or pinned host) memory. fn's tensors are
        its locals, so they are garbage once the exception (and its traceback) is gone, before release()."""
        try:
            return True, fn()
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
            oom_types = getattr(torch.cuda, "OutOfMemoryError", ())  # cuBLAS/cuDNN report allocation failures
            if not (isinstance(e, oom_types) or "out of memory" in str(e) or "ALLOC_FAILED" in str(e)):
                raise
        finally:
            self.release()
        return False, None

    def step_times(self, mode, batch, warmup, steps):
        """Seconds of each of `steps` training steps after `warmup` untimed ones, from a fresh model and
        optimizer; synchronized around every step so each time covers all of that step's device work."""
        model = copy.deepcopy(self.template).to(self.dev).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(batch, 3, self.args.image, self.args.image, device=self.dev)
        y = torch.randint(0, 1000, (batch,), device=self.dev)
        times = []
        for i in range(warmup + steps):
            self.sync()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            if mode == "save_on_cpu":
                with torch.autograd.graph.save_on_cpu(pin_memory=self.cuda):
                    loss = F.cross_entropy(model(x), y)
            else:
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            self.sync()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        return times

    def run(self, mode, batch, warmup, steps):
        """Guarded step_times, refusing batches whose predicted host memory would pass --host-cap (a host
        out-of-memory kills the process instead of raising). Returns ('ok', times), ('oom'|'host-limit', None)."""
        cap, (probe_batch, growth) = self.args.host_cap, self.host_probe[mode]
        if cap and proc_bytes("VmRSS") + growth * batch / probe_batch > cap:
            return "host-limit", None
        clear_peak_rss()
        base = proc_bytes("VmRSS")
        ok, times = self.guarded(lambda: self.step_times(mode, batch, warmup, steps))
        if ok and batch >= probe_batch:
            self.host_probe[mode] = (batch, max(0, proc_bytes("VmHWM") - base))
        return ("ok", times) if ok else ("oom", None)

    def max_batch(self, mode):
        """Largest batch in [--min-batch, --max-batch] that completes 2 steps: double until a failure, then
        bisect between the last success and the first failure, stopping when --max-seconds has run out."""
        a, start, trials = self.args, time.monotonic(), []

        def fits(b):
            t0 = time.monotonic()
            result, _ = self.run(mode, b, 0, 2)
            trials.append({"batch": b, "result": result, "seconds": round(time.monotonic() - t0, 2)})
            log(f"{mode} batch={b} {result} {trials[-1]['seconds']}s")
            return result == "ok"

        budget_left = lambda: time.monotonic() - start < a.max_seconds  # noqa: E731
        lo, hi, b = a.min_batch - 1, None, a.min_batch  # lo: largest that ran; hi: smallest that failed
        while hi is None and budget_left():
            if not fits(b):
                hi = b
            elif b == a.max_batch:
                lo, hi = b, b + 1
            else:
                lo, b = b, min(2 * b, a.max_batch)
        while hi is not None and hi - lo > 1 and budget_left():
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        complete = hi is not None and hi - lo <= 1
        out = {"max_batch": lo if lo >= a.min_batch else 0, "search_complete": complete,
               "hit_max_batch_bound": lo == a.max_batch,
               "host_limited": any(t["result"] == "host-limit" for t in trials),
               "search_seconds": round(time.monotonic() - start, 1), "trials": trials}
        if not complete:
            out["note"] = f"--max-seconds {a.max_seconds} ran out; max_batch is the best found so far"
            log(f"{mode}: {out['note']}")
        return out

    def throughput(self, mode, batch):
        """Samples/s at `batch`: median of --steps timed steps after --warmup; 'oom' or 'host-limit' if it
        does not run. Also the run's peak device memory: allocated (tensors), reserved (what the cap limits)."""
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.monotonic()
        result, times = self.run(mode, batch, self.args.warmup, self.args.steps)
        sps = round(batch / statistics.median(times), 2) if result == "ok" else result
        log(f"{mode} throughput batch={batch} {sps} samples/s {time.monotonic() - t0:.1f}s")
        ok = self.cuda and result == "ok"
        return sps, (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()) if ok else (None, None)

    def copy_bandwidth(self):
        """Host->device and device->host rates (GB/s, 1e9 bytes) for one --copy-bytes buffer in pinned host
        memory: median of --copy-repeats copies after one warm-up, each synchronized."""
        n, reps = self.args.copy_bytes, self.args.copy_repeats

        def measure():
            host = torch.empty(n, dtype=torch.uint8, pin_memory=self.cuda).fill_(1)
            devbuf = torch.empty(n, dtype=torch.uint8, device=self.dev)
            rates = {}
            for name, dst, src in (("h2d", devbuf, host), ("d2h", host, devbuf)):
                times = []
                for i in range(reps + 1):
                    self.sync()
                    t0 = time.perf_counter()
                    dst.copy_(src, non_blocking=True)
                    self.sync()
                    times.append(time.perf_counter() - t0)
                rates[f"{name}_gb_per_s"] = round(n / statistics.median(times[1:]) / 1e9, 2)
            return rates

        ok, rates = self.guarded(measure)
        out = {"bytes": n, "repeats": reps, "pinned": self.cuda, **(rates if ok else {"result": "oom"})}
        log(f"copy bandwidth {out}")
        return out


def proc_bytes(field, path="/proc/self/status"):
    """A kB field of a /proc file in bytes (VmRSS: current, VmHWM: peak since clear_peak_rss; MemTotal); 0 if
    unavailable (not Linux), which turns the host guard off."""
    try:
        with open(path) as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration):
        return 0


def clear_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        pass


def log(msg):
    print(f"torch_capped: {msg}", file=sys.stderr, flush=True)


def set_tf32(on):
    """TF32 on or off for matmuls and cuDNN convolutions: the fp32_precision settings where they exist (PyTorch
    >= 2.9 warns about the allow_tf32 flags), the allow_tf32 flags otherwise."""
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        mode = "tf32" if on else "ieee"
        torch.backends.cuda.matmul.fp32_precision = torch.backends.cudnn.conv.fp32_precision = mode
    else:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"torch_capped.py: error: {message}", file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    p = Parser(description="ResNet-50 max batch and samples/s in PyTorch under a GPU memory cap.")
    p.add_argument("--cap", type=parse_size, default=16 * 2**30, help="device memory cap (default 16GiB)")
    p.add_argument("--modes", default="plain,save_on_cpu", help="comma list of plain, save_on_cpu (default both)")
    p.add_argument("--batches", type=batch_list, default=[], help="extra batches to time, e.g. 1191,256")
    p.add_argument("--image", type=int, default=None, help="image side (default 224; 32 with --cpu-smoke)")
    p.add_argument("--min-batch", type=int, default=None,
                   help="search lower bound (default 1; 2 below --image 64, where layer4 is 1x1 and BN needs 2)")
    p.add_argument("--max-batch", type=int, default=4096, help="search upper bound (default 4096)")
    p.add_argument("--max-seconds", type=float, default=90, help="search time budget per mode (default 90)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before timing (default 3)")
    p.add_argument("--steps", type=int, default=5, help="timed steps, median reported (default 5)")
    p.add_argument("--tf32", action="store_true", help="allow TF32 in matmuls and convolutions (default off)")
    p.add_argument("--cudnn-benchmark", action="store_true", help="set cudnn.benchmark (default off)")
    p.add_argument("--deterministic-too", action="store_true",
                   help="also time each mode's max batch and --batches with cudnn.deterministic (deterministic "
                        "convolution algorithms only, as our engine runs)")
    p.add_argument("--copy-bandwidth", action="store_true", help="also measure pinned host<->device copies")
    p.add_argument("--copy-bytes", type=parse_size, default=None, help="copy buffer (default 1GiB; 64MiB smoke)")
    p.add_argument("--copy-repeats", type=int, default=5, help="timed copies each way (default 5)")
    p.add_argument("--host-cap", type=parse_size, default=None,
                   help="skip batches predicted to pass this host RSS (default 75%% of RAM; 0: no guard)")
    p.add_argument("--json-out", metavar="FILE", help="also write the JSON object to FILE (updated after each mode)")
    p.add_argument("--cpu-smoke", action="store_true", help="run on the CPU, no cap, no pinning (for tests)")
    a = p.parse_args(argv)
    a.modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if not a.modes or set(a.modes) - set(MODES):
        p.error(f"--modes: expected a comma list of {', '.join(MODES)}, got '{','.join(a.modes)}'")
    a.image = a.image or (32 if a.cpu_smoke else 224)
    a.min_batch = a.min_batch if a.min_batch is not None else (1 if a.image >= 64 else 2)
    a.copy_bytes = a.copy_bytes or (64 * 2**20 if a.cpu_smoke else 2**30)
    for name in ("image", "min_batch", "max_batch", "steps", "copy_repeats", "cap", "copy_bytes"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if a.max_batch < a.min_batch or a.warmup < 0 or a.max_seconds <= 0:
        p.error("need --min-batch <= --max-batch, --warmup >= 0 and --max-seconds > 0")
    if a.host_cap is None:
        a.host_cap = int(0.75 * proc_bytes("MemTotal", "/proc/meminfo"))
    return a, p


def main(argv):
    args, parser = parse_args(argv)
    if not args.cpu_smoke and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 3
    torch.manual_seed(0)
    result = {"benchmark": "torch_capped", "model": "resnet50", "image": args.image, "dtype": "float32",
              "optimizer": "SGD lr 0.1 momentum 0.9", "torch_version": torch.__version__,
              "cpu_smoke": args.cpu_smoke, "tf32": args.tf32, "cudnn_benchmark": args.cudnn_benchmark,
              "host_cap_bytes": args.host_cap, "warmup": args.warmup, "steps": args.steps}
    if args.cpu_smoke:
        result.update(device="cpu", device_total_bytes=None, cap_bytes=None)
    else:
        total = torch.cuda.get_device_properties(0).total_memory
        if args.cap > total:
            parser.error(f"--cap {args.cap} exceeds the device's {total} bytes")
        set_tf32(args.tf32)
        torch.backends.cudnn.benchmark = args.cudnn_benchmark
        torch.cuda.set_per_process_memory_fraction(args.cap / total)
        result.update(device=torch.cuda.get_device_name(0), device_total_bytes=total, cap_bytes=args.cap)
    bench = Bench(args)
    result["parameters"] = RESNET50_PARAMS
    if args.copy_bandwidth:
        result["copy_bandwidth"] = bench.copy_bandwidth()
        write_json_out(args.json_out, result)
    result["modes"] = {}
    for mode in args.modes:
        r = bench.max_batch(mode)
        r.update(throughput={}, samples_per_second_at_max=None, peak_allocated_bytes_at_max=None,
                 peak_reserved_bytes_at_max=None)
        for b in dict.fromkeys(([r["max_batch"]] if r["max_batch"] else []) + args.batches):
            r["throughput"][str(b)], peaks = bench.throughput(mode, b)
            if b == r["max_batch"]:
                r["samples_per_second_at_max"] = r["throughput"][str(b)]
                r["peak_allocated_bytes_at_max"], r["peak_reserved_bytes_at_max"] = peaks
        if args.deterministic_too:
            torch.backends.cudnn.deterministic = True
            r["throughput_deterministic"] = {b: bench.throughput(mode, int(b))[0] for b in r["throughput"]}
            torch.backends.cudnn.deterministic = False
            r["samples_per_second_at_max_deterministic"] = r["throughput_deterministic"].get(str(r["max_batch"]))
        probe_batch, growth = bench.host_probe[mode]
        r["host_peak_growth_bytes"] = {"batch": probe_batch, "bytes": growth}
        result["modes"][mode] = r
        write_json_out(args.json_out, result)  # after each mode, so a run cut short keeps what it measured
    print(json.dumps(result, indent=2))
    return 0


def write_json_out(path, result):
    """The result so far to --json-out (replaced whole, through a temporary file, so it is never half-written)."""
    if path:
        with open(path + ".tmp", "w") as f:
            f.write(json.dumps(result, indent=2) + "\n")
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
