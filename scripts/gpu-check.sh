#!/usr/bin/env bash
# The GPU check: one command for the device machine (one NVIDIA H200; about 15 minutes of device time a session,
# so this is prepared here and run once). Before the run, HERE: scripts/gpu-deps.sh (fetches the Debian packages
# that machine lacks into .gpu-deps/); then, through the device tool:
#   run(command="scripts/gpu-check.sh", carry=[".gpu-deps"], timeout_s=600)
# It (1) builds with CUDA and without oneDNN and ONNX, (2) runs the tests that use the GPU (the cross-backend op
# table on cuda, cuda training against the reference, swap and recompute invariance on cuda), (3) trains resnet18 a
# few steps with none, tflms and auto under a small budget and compares the losses bit for bit with an
# unconstrained run, (4) benchmarks PyTorch capped at 16 GiB, plain and with save_on_cpu (bench/torch_capped.py,
# which also measures PyTorch's pinned copy bandwidth each way), (5) profiles resnet50 at batch 64 (node times;
# LMS's own copy rates through its pinned host arena and copy streams), (6) benchmarks resnet50 224x224 f32
# training at a 16 GiB budget: max batch and samples/s per strategy (auto planning with that profile), auto first
# and at PyTorch plain's max batch and 4x it (the goals), then tflms and none, (7) profiles resnet50 without a budget
# at 4x PyTorch's max batch (which cuDNN algorithm or gemm layout each node gets at that batch, the slowest nodes
# in the table), and (8) runs the rest of the test suite in the time left.
# Auto's run at 4x writes a measured trace beside the predicted one (lms plan --trace). Full results go to
# gpu-check-out/ and, packed, to $OUT (at most 8 files come back from a device run: summary.txt, gpu-tests.log,
# tests.log, results.tgz); a short table is printed last. Each stage has a time limit so the whole stays under
# 8 minutes; a stage that fails or runs out of time is reported in the table, and the script goes on (when the
# build fails, PyTorch's side is still measured).
#
# `scripts/gpu-check.sh --probe` is a shorter check of the default configuration after a change (about 4 minutes with
# the build): the GPU tests of the convolutions, the own kernels, buffer reuse and training, resnet50's node times at
# batch 64, and samples/s of none at batch 128 and of auto at 4x PyTorch plain's max batch (GPU_CHECK_TP, 192 by
# default), each beside its prediction, and the profile at that batch with each node's kernel.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=full
case "${1:-}" in
  "") ;;
  --probe) mode=probe ;;
  *) echo "gpu-check.sh: unknown option '$1' (expected nothing or --probe)" >&2; exit 2 ;;
esac
out=$PWD/gpu-check-out
rm -rf "$out"
mkdir -p "$out"
finish() {  # the summary table, and what comes back from the device machine
  echo
  echo "==================== GPU check summary ===================="
  printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
  if [ -n "${OUT:-}" ]; then
    cp "$out/summary.txt" "$OUT/"
    for f in gpu-tests.log tests.log build.log; do [ -f "$out/$f" ] && cp "$out/$f" "$OUT/"; done
    tar czf "$OUT/results.tgz" -C "$out" .
  fi
}
build=build-gpu
jobs=$(nproc)
summary=()
note() {  # a line of the summary; the summary so far also goes to $OUT, in case the run is cut off
  summary+=("$1")
  echo "== $1"
  [ -n "${OUT:-}" ] && printf '%s\n' "${summary[@]}" >"$OUT/summary.txt"
}
started=$(date +%s)
elapsed() { echo $(( $(date +%s) - started ))s; }
# The whole check stays under 8 minutes: every stage after the build has a time limit and starts only when that
# much is left before the deadline (470 s after the start; packing the results takes a few seconds more).
deadline=$(( started + 470 ))
have_time() { [ $(( deadline - $(date +%s) )) -ge "$1" ]; }
within() {  # seconds, command...: runs the command under that time limit if it can end by the deadline
  local limit=$1
  shift
  have_time "$limit" && timeout "$limit" "$@"
}

# --- the build ---------------------------------------------------------------------------------------------
prefix=$PWD/.gpu-deps/root
if [ -d .gpu-deps ] && ls .gpu-deps/*.deb >/dev/null 2>&1; then
  mkdir -p "$prefix"
  for f in .gpu-deps/*.deb; do dpkg -x "$f" "$prefix"; done
fi
# cuDNN: beside the toolkit, or else from PyTorch's nvidia-cudnn wheel (its loader finds its sub-libraries
# through LD_LIBRARY_PATH).
cudnn_root=""
if [ ! -f /usr/local/cuda/include/cudnn.h ]; then
  # the folder holding include/cudnn.h among Python's site-packages (nvidia/cudnn in the wheels; found by search
  # rather than by import, since the package may be a namespace package without __file__)
  header=$(find $(python3 -c "import site; print(' '.join(site.getsitepackages()))" 2>/dev/null) \
    -path '*include/cudnn.h' 2>/dev/null | head -1)
  [ -n "$header" ] && cudnn_root=$(dirname "$(dirname "$header")")
fi
if [ -n "$cudnn_root" ]; then
  export CUDNN_ROOT=$cudnn_root LD_LIBRARY_PATH=$cudnn_root/lib:${LD_LIBRARY_PATH:-}
fi
echo "cuDNN: ${cudnn_root:-/usr/local/cuda}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
echo "GPU: $(cat "$out/gpu.txt")"
# cuBLAS: beside the toolkit, or else from PyTorch's nvidia-cublas wheel (only the versioned names there)
cublas=()
if [ ! -e /usr/local/cuda/lib64/libcublas.so ]; then
  lib=$(find $(python3 -c "import site; print(' '.join(site.getsitepackages()))" 2>/dev/null) \
    -name 'libcublas.so.1*' 2>/dev/null | head -1)
  if [ -n "$lib" ]; then
    inc=$(dirname "$(dirname "$lib")")/include
    cublas=(-DCUDA_cublas_LIBRARY="$lib" -DCUDA_cublasLt_LIBRARY="$(ls "$(dirname "$lib")"/libcublasLt.so.1* | head -1)"
            -DCMAKE_CXX_FLAGS="-isystem $inc" -DCMAKE_CUDA_FLAGS="-isystem $inc")
    export LD_LIBRARY_PATH=$(dirname "$lib"):${LD_LIBRARY_PATH:-}
  fi
fi
echo "cuBLAS: ${cublas[*]:-/usr/local/cuda}"
built=0
if timeout 300 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMS_CUDA=ON -DLMS_CPU=OFF \
      -DLMS_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_CUDA_ARCHITECTURES=90 "${cublas[@]}" \
      >"$out/build.log" 2>&1 && timeout 300 ninja -C "$build" -j"$jobs" lms lms_tests >>"$out/build.log" 2>&1; then
  built=1
  note "build: ok ($(elapsed))"
else
  tail -40 "$out/build.log"
  note "build: FAILED ($(elapsed)); see build.log: $(grep -m1 -E 'error|Error' "$out/build.log" | cut -c1-200)"
fi
lms=$build/bin/lms
# The normalization nodes of a profile summed by op: time and effective bandwidth ((bytes read + written) / time),
# to compare the own batch_norm_grad kernel (since 2026-12-07; cuDNN's before) with cuDNN's batch_norm
norm_times() {
  python3 - "$1" <<'PY' 2>/dev/null || echo "no profile"
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
parts = []
for op in ("batch_norm", "batch_norm_grad"):
    mine = [n for n in nodes if n["op"] == op]
    t = sum(n["seconds"] for n in mine)
    b = sum(n["bytes_read"] + n["bytes_written"] for n in mine)
    parts.append(f"{op} {len(mine)} nodes {t * 1e3:.2f} ms ({b / t / 1e9 if t > 0 else 0:.0f} GB/s)")
print("; ".join(parts))
PY
}
# resnet50 profiled at batch $1 without a budget (about 60 GiB at 768), within $2 seconds: the kernel each node gets
# at that batch (the cuDNN algorithm, batch chunks, the gemm layout; docs/cli.md `lms profile`), its 5 slowest
# nodes in the table
kernels_at() {
  local txt=$out/profile_r50_b$1.txt
  if ! have_time "$2"; then
    note "lms profile resnet50 b$1: not run (no time left)"
  elif timeout "$2" "$lms" profile --device cuda --model resnet50 --image 224 --batch "$1" --steps 2 \
      --copy-bytes 0 --slowest 20 -o "$out/profile_r50_b$1.json" >"$txt" 2>&1; then
    note "lms profile resnet50 b$1 (node times, kernels): $(head -1 "$txt" | cut -c1-100); slowest:
$(grep -A5 '^slowest' "$txt" | tail -n +2 | cut -c1-230) ($(elapsed))"
  else
    note "lms profile resnet50 b$1: FAILED ($(tail -1 "$txt" | cut -c1-200)) ($(elapsed))"
  fi
}

# --- tests: first those that use the GPU; the rest of the suite runs last, in the time left ------------------
gpu_tests='Cuda|AutoTraining|TflmsTraining|BufferReuse'
run_tests() {  # log file, time limit, ctest's selection; notes the outcome
  local log=$1 limit=$2 rc tests_line skipped failed
  shift 2
  LMS_REQUIRE_GPU=1 timeout "$limit" ctest --test-dir "$build" -j "$jobs" --timeout 120 --output-on-failure "$@" \
    >"$out/$log" 2>&1
  rc=$?
  tests_line=$(grep -E "tests passed|tests failed" "$out/$log" | tail -1)
  [ -z "$tests_line" ] && tests_line="cut off after ${limit}s with $(grep -cE 'Test +#' "$out/$log") tests finished"
  skipped=$(grep -c "(Skipped)" "$out/$log")
  failed=$(grep -E '\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run' "$out/$log" | \
    sed -E 's/^.*Test +#[0-9]+: //; s/ +# GetParam.*//; s/ \.+.*$//')
  [ -n "$failed" ] && failed="$(echo "$failed" | head -12 | tr '\n' ' ')($(echo "$failed" | wc -l) in all)"
  note "tests ($*): rc=$rc; $tests_line; skipped $skipped; failed: ${failed:-none} ($(elapsed))"
}
if [ $mode = probe ]; then
  # The norm and loss gradients (own kernels, written over their dy or logits since 2026-12-07) on the GPU too.
  [ $built = 1 ] && run_tests gpu-tests.log 95 \
    -R 'CudaConvGemm|CudaOwnKernels|CudaTraining|AutoTraining|TflmsTraining|BufferReuse|CudaOps.*_(norm|entropy)'
  r50=(--model resnet50 --image 224 --device cuda --budget 16GiB --steps 4 --json)
  rate() {  # a train JSON file -> its samples/s and times
    python3 -c "import json,statistics,sys;r=json.load(open(sys.argv[1]));b=r['batch'];print(f\"{b/statistics.median(r['step_seconds'][1:]):.1f}/s (predicted {b/r['predicted_step_seconds']:.1f}/s), peak {r['peak_device_bytes']/2**30:.2f} GiB, planned in {r['plan_seconds']:.1f} s\")" "$1" 2>/dev/null || echo "FAILED ($(tail -1 "${1%.json}.err"))"
  }
  if [ $built = 1 ]; then
    timeout 40 "$lms" profile --device cuda --model resnet50 --image 224 --batch 64 --steps 3 --copy-bytes 0 \
      -o "$out/profile_r50.json" >"$out/profile_r50.txt" 2>&1
    note "lms profile resnet50 b64: $(head -1 "$out/profile_r50.txt" | cut -c1-120) ($(elapsed))"
    note "norm kernels b64: $(norm_times "$out/profile_r50.json")"
    timeout 40 "$lms" train "${r50[@]}" --batch 128 --device-model h200-pcie5 --profile "$out/profile_r50.json" \
      >"$out/r50_none_b128.json" 2>"$out/r50_none_b128.err"
    note "lms none b128: $(rate "$out/r50_none_b128.json") ($(elapsed))"
    tp=${GPU_CHECK_TP:-192}  # PyTorch plain's max batch at 16 GiB (192 on 2026-12-04)
    timeout 60 "$lms" train "${r50[@]}" --batch $(( 4 * tp )) --strategy auto --profile "$out/profile_r50.json" \
      --trace "$out/r50_auto_b$(( 4 * tp )).trace.json" >"$out/r50_auto_b$(( 4 * tp )).json" \
      2>"$out/r50_auto_b$(( 4 * tp )).err"
    note "lms auto b$(( 4 * tp )): $(rate "$out/r50_auto_b$(( 4 * tp )).json") ($(elapsed))"
    kernels_at $(( 4 * tp )) 40
  fi
  finish
  exit 0
fi
[ $built = 1 ] && run_tests gpu-tests.log 150 -R "$gpu_tests"

# --- resnet18 under a small budget: bit-identical losses --------------------------------------------------
r18=(--model resnet18 --small-stem --image 32 --batch 64 --classes 10 --device cuda --steps 4 --seed 1 --json)
[ $built = 1 ] && within 60 "$lms" train "${r18[@]}" >"$out/r18_none.json" 2>"$out/r18_none.err"
peak=$(python3 -c "import json;print(json.load(open('$out/r18_none.json'))['planned_peak_bytes'])" 2>/dev/null)
if [ -n "$peak" ]; then
  small=$(( peak * 2 / 3 ))
  for s in tflms auto; do
    within 60 "$lms" train "${r18[@]}" --strategy "$s" --budget "$small" >"$out/r18_$s.json" 2>"$out/r18_$s.err"
  done
  note "$(python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
base = json.load(open(f"{out}/r18_none.json"))
parts = []
for s in ("tflms", "auto"):
    try:
        r = json.load(open(f"{out}/r18_{s}.json"))
        same = r["losses"] == base["losses"]
        parts.append(f"{s}: losses {'bit-identical' if same else 'DIFFER'}, measured peak {r['peak_device_bytes']} "
                     f"<= budget {r['budget_bytes']}: {r['peak_device_bytes'] <= r['budget_bytes']}, "
                     f"swapped {r.get('swapped_tensors')}")
    except Exception as e:
        parts.append(f"{s}: FAILED ({e})")
print(f"resnet18 b64 32px, budget 2/3 of none's {base['planned_peak_bytes']}: " + "; ".join(parts))
EOF
)"
elif [ $built = 1 ]; then
  note "resnet18 unconstrained run FAILED: $(head -c 300 "$out/r18_none.err")"
fi

# --- PyTorch capped at 16 GiB (plain and save_on_cpu), copy bandwidth ---------------------------------------
# save_on_cpu's search stops at batch 768, 48 GiB of host memory or 15 s: its pinned copies of every saved tensor
# make each larger trial slow, and it is not what the goals compare with.
PYTHONUNBUFFERED=1 within 120 python3 bench/torch_capped.py --cap 16GiB --min-batch 32 \
  --max-batch 768 --host-cap 48GiB --max-seconds 15 --warmup 2 --steps 3 --copy-bandwidth --deterministic-too \
  --batches 128 \
  --json-out "$out/torch.json" >/dev/null 2>"$out/torch.err"
torch_plain=$(python3 -c "import json;print(json.load(open('$out/torch.json'))['modes']['plain']['max_batch'])" 2>/dev/null)
note "pytorch: $(python3 - "$out" <<'EOF'
import json, os, sys
try:
    t = json.load(open(f"{sys.argv[1]}/torch.json"))
except Exception as e:
    err = open(f"{sys.argv[1]}/torch.err").read().strip().splitlines() if os.path.exists(f"{sys.argv[1]}/torch.err") else []
    print(f"FAILED ({err[-1] if err else e})"); sys.exit()
bw = t.get("copy_bandwidth") or {}
print(" ".join(f"{k}: max batch {v['max_batch']}{' (the search bound)' if v['hit_max_batch_bound'] else ''}"
               f"{'' if v['search_complete'] else ' (search cut short)'} at {v['samples_per_second_at_max']} samples/s"
               f" ({v.get('samples_per_second_at_max_deterministic')} with cudnn.deterministic;"
               f" b128: {v['throughput'].get('128')}, {v.get('throughput_deterministic', {}).get('128')}"
               f" deterministic);"
               for k, v in t.get("modes", {}).items())
      + f" copies h2d {bw.get('h2d_gb_per_s')} GB/s, d2h {bw.get('d2h_gb_per_s')} GB/s")
EOF
) ($(elapsed))"

if [ $built = 1 ]; then
# --- lms profile: resnet50's node times at batch 64 on this GPU, and LMS's own copy rates (1 GiB swapped out ---
# --- and in through the cuda backend's pinned host arena and copy streams); auto plans with them below ----------
within 40 "$lms" profile --device cuda --model resnet50 --image 224 --batch 64 --steps 3 \
  --copy-bytes 1GiB -o "$out/profile_r50.json" >"$out/profile_r50.txt" 2>&1
note "lms profile: $(python3 -c "import json;p=json.load(open('$out/profile_r50.json'));c=p['copies'];print(f\"resnet50 b64 step {p['step_seconds']:.4f} s; copies d2h {c['d2h_bytes_per_s']/1e9:.1f} GB/s, h2d {c['h2d_bytes_per_s']/1e9:.1f} GB/s (1 GiB, pinned host arena, copy streams)\")" 2>/dev/null || echo "FAILED ($(tail -1 "$out/profile_r50.txt"))") ($(elapsed))"
note "norm kernels b64: $(norm_times "$out/profile_r50.json")"
profile=()
[ -s "$out/profile_r50.json" ] && profile=(--profile "$out/profile_r50.json")

# --- LMS resnet50 at 16 GiB: max batch per strategy, samples/s (auto plans with the measured profile) -------
# In the order of the goals: auto's max batch, auto at PyTorch plain's max batch and at 4x it; then tflms's max
# batch, and tflms at 1x and 4x PyTorch's and at its own max (the reference system beside auto); the kernels at 4x
# (kernels_at); none at its max batch and at 128 (beside PyTorch's 128); auto at 5x; none at 128 with every
# convolution on cuDNN (--cuda-conv-gemm off; with its node times at batch 64). What the deadline leaves out is
# reported as not run. On 2026-12-04 the stages before these ended at 284 s, and the runs took: maxbatch 1-6 s,
# batches up to 203 7-8 s, auto at 768 35 s (with its trace), auto at 960 47 s.
r50=(--model resnet50 --image 224 --device cuda --budget 16GiB)
tp=${torch_plain:-0}
strategy_args() { if [ "$1" = auto ]; then echo --strategy auto "${profile[@]}"; else echo --strategy "$1"; fi; }
# train: every strategy's run also reports the step predicted before it (on h200-pcie5 with the measured profile)
train_args() { if [ "$1" = auto ]; then strategy_args auto; else echo --strategy "$1" --device-model h200-pcie5 "${profile[@]}"; fi; }
maxbatch() {
  within 30 "$lms" maxbatch "${r50[@]}" $(strategy_args "$1") --json >"$out/r50_maxbatch_$1.json" \
    2>"$out/r50_maxbatch_$1.err"
}
maxbatch_of() { python3 -c "import json;print(json.load(open('$out/r50_maxbatch_$1.json'))['max_batch'])" 2>/dev/null; }
train() {  # strategy, batch[, file name suffix, more flags]: skipped when the batch is 0, above the strategy's max
           # batch, or already run
  local s=$1 b=${2:-0} suffix=${3:-} mb trace=()
  shift $(( $# < 3 ? $# : 3 ))
  mb=$(maxbatch_of "$s")
  local name=$out/r50_${s}${suffix}_b$b
  { [ "$b" -gt 0 ] && { [ -z "$mb" ] || [ "$b" -le "$mb" ]; } && [ ! -e "$name.json" ]; } || return 0
  # auto's run at 4x writes a measured trace, and its plan's predicted trace goes beside it (to compare them node by
  # node in Perfetto)
  [ "$s" = auto ] && [ -z "$suffix" ] && [ "$b" = $(( 4 * tp )) ] && trace=(--trace "$name.trace.json")
  # up to 30 s up to batch 256 (they took 7-8 s on the H200), else 75 s (or train_limit): at the largest batches
  # pinning the host arena (tens of GiB) alone takes a while
  within "${train_limit:-$(( b <= 256 ? 30 : 75 ))}" "$lms" train "${r50[@]}" $(train_args "$s") --batch "$b" --steps 4 --json \
    "${trace[@]}" "$@" >"$name.json" 2>"$name.err"
  if [ ${#trace[@]} -gt 0 ]; then
    within 30 "$lms" plan "${r50[@]}" $(strategy_args "$s") --batch "$b" --trace "$name.predicted.json" \
      >"$name.plan.txt" 2>&1
  fi
  return 0
}
maxbatch auto
train auto "$tp"
train auto $(( 4 * tp ))
maxbatch tflms
train tflms "$tp"
train tflms $(( 4 * tp ))
train tflms "$(maxbatch_of tflms)"
[ "$tp" -gt 0 ] && kernels_at $(( 4 * tp )) 40
maxbatch none
train none "$(maxbatch_of none)"
train none 128  # beside PyTorch's b128, plain and deterministic
# auto at 5x PyTorch's max batch (its own max batch, 1262 on 2026-12-04, did not start within 75 s: planning and
# pinning an 82 GB host arena), given longer
train_limit=120 train auto $(( 5 * tp ))
# every convolution on cuDNN (--cuda-conv-gemm off), against the default (1x1 ones on cuBLAS), with node times
train none 128 _gemmoff --cuda-conv-gemm off
within 40 "$lms" profile --device cuda --model resnet50 --image 224 --batch 64 --steps 3 \
  --copy-bytes 0 --cuda-conv-gemm off -o "$out/profile_r50_gemmoff.json" >"$out/profile_r50_gemmoff.txt" 2>&1
note "$(python3 - "$out" "$tp" <<'EOF'
import glob, json, re, statistics, sys
out, tp = sys.argv[1], int(sys.argv[2])
try:
    torch = json.load(open(f"{out}/torch.json"))["modes"]
except Exception:
    torch = {}
lines = ["resnet50 224 f32 at 16 GiB (samples/s: batch / the median step after the first; predicted on h200-pcie5 "
         "with the b64 profile when it was measured, which auto also plans with):"]
tp_sps = (torch.get("plain") or {}).get("samples_per_second_at_max")
rates, max_batch = {}, {}  # measured samples/s by (strategy, batch); max batch by strategy
for s in ("none", "tflms", "auto"):
    try:
        mb = json.load(open(f"{out}/r50_maxbatch_{s}.json"))["max_batch"]
    except Exception:
        try:
            err = open(f"{out}/r50_maxbatch_{s}.err").read().strip().splitlines()
            lines.append(f"  lms {s}: maxbatch FAILED ({err[-1] if err else 'no output'})")
        except OSError:
            lines.append(f"  lms {s}: maxbatch not run (no time left)")
        continue
    max_batch[s] = mb
    runs = []
    for f in sorted(glob.glob(f"{out}/r50_{s}_b*.json")):
        m = re.search(r"_b(\d+)\.json$", f)
        if not m:  # the plan's and the traces' files beside the run's
            continue
        b = int(m.group(1))
        try:
            r = json.load(open(f)); rates[s, b] = b / statistics.median(r['step_seconds'][1:])
            run = f"b{b} {rates[s, b]:.1f}/s"
        except Exception:
            runs.append(f"b{b} FAILED"); continue
        if r.get("predicted_step_seconds"):
            run += f" (predicted {b / r['predicted_step_seconds']:.1f}/s)"
        if r.get("peak_device_bytes"):
            run += f" peak {r['peak_device_bytes'] / 2**30:.2f} GiB"
        if r.get("swap_out_bytes"):
            run += (f", swapped {r.get('swapped_tensors')} ({r['swap_out_bytes'] / 2**30:.1f} GiB out,"
                    f" {r.get('swap_in_bytes', 0) / 2**30:.1f} GiB in), recomputed {r.get('recomputed_tensors')}")
        if r.get("tflms"):
            t = r["tflms"]
            run += (f", T={t['swapout_threshold']} A={t['swapin_ahead']} G={t['swapin_groupby']}"
                    f" sync_mode={t['sync_mode']}")
        if "feed_seconds_median" in r:
            run += (f" (batch write {r['feed_seconds_median'] * 1e3:.1f} ms{', pinned' if r.get('batch_pinned') else ''};"
                    f" planned in {r['plan_seconds']:.1f} s,"
                    f" started in {r['start_seconds']:.1f} s)")
        runs.append(run)
    lines.append(f"  lms {s}: max batch {mb}; " + ", ".join(runs))
for k, v in torch.items():
    lines.append(f"  pytorch {k}: max batch {v['max_batch']}; {v['samples_per_second_at_max']}/s at it "
                 f"({v.get('samples_per_second_at_max_deterministic')}/s with cudnn.deterministic); "
                 f"b128 {v['throughput'].get('128')}/s")
plain = torch.get("plain") or {}
if ("none", 128) in rates and isinstance(plain.get("throughput", {}).get("128"), (int, float)):
    det = plain.get("throughput_deterministic", {}).get("128")
    lines.append(f"  at b128: lms none {rates['none', 128]:.1f}/s = {rates['none', 128] / plain['throughput']['128']:.3f}"
                 f" x pytorch plain's" + (f", {rates['none', 128] / det:.3f} x its deterministic"
                                          if isinstance(det, (int, float)) else ""))
for v in ("off",):
    try:
        r = json.load(open(f"{out}/r50_none_gemm{v}_b128.json"))
        g = 128 / statistics.median(r["step_seconds"][1:])
        base = f"; the default (1x1) {rates['none', 128] / g:.3f} x that" if ("none", 128) in rates else ""
        p = json.load(open(f"{out}/profile_r50_gemm{v}.json"))
        d = json.load(open(f"{out}/profile_r50.json"))
        node = lambda q: sum(n["seconds"] for n in q["nodes"])
        lines.append(f"  lms none b128 with --cuda-conv-gemm {v}: {g:.1f}/s{base}; b64 node times {node(p) * 1e3:.1f} ms,"
                     f" default {node(d) * 1e3:.1f} ms")
    except Exception:
        lines.append(f"  lms none b128 with --cuda-conv-gemm {v}: not run or FAILED")
if tp:
    def verdict(ok):
        return "met" if ok else "NOT met"
    goals = [f"auto max batch {max_batch.get('auto', 'FAILED')} >= 5x pytorch plain's {tp} ({5 * tp}): "
             + verdict(max_batch.get("auto", 0) >= 5 * tp)]
    for mult, share in ((4, 0.8), (1, 0.9)):
        b = mult * tp
        if not isinstance(tp_sps, (int, float)) or ("auto", b) not in rates:
            goals.append(f"auto at b{b} >= {share} x pytorch plain's samples/s: not measured")
        else:
            ratio = rates["auto", b] / tp_sps
            goals.append(f"auto at b{b} {rates['auto', b]:.1f}/s = {ratio:.3f} x pytorch plain's {tp_sps}/s at b{tp} "
                         f"(goal >= {share}): {verdict(ratio >= share)}")
    lines.append("  goals: " + "; ".join(goals))
print("\n".join(lines))
EOF
) ($(elapsed))"
fi

# --- the rest of the test suite, in the time left -----------------------------------------------------------
if [ $built = 1 ] && have_time 20; then
  run_tests tests.log "$(( deadline - $(date +%s) ))" -E "$gpu_tests"
elif [ $built = 1 ]; then
  note "tests (-E $gpu_tests): not run, no time left"
fi
finish
