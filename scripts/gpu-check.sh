#!/usr/bin/env bash
# The GPU check: one command for the device machine (one NVIDIA H200; about 15 minutes of device time a session,
# so this is prepared here and run once). Before the run, HERE: scripts/gpu-deps.sh (fetches the Debian packages
# that machine lacks into .gpu-deps/); then, through the device tool:
#   run(command="scripts/gpu-check.sh", carry=[".gpu-deps"], timeout_s=600)
# It (1) builds with CUDA and without oneDNN and ONNX, (2) runs the whole test suite there (the cross-backend op
# table on cuda, the swap and recompute invariance on cuda, cuda training against the reference), (3) trains
# resnet18 a few steps with none, tflms and auto under a small budget and compares the losses bit for bit with an
# unconstrained run, (4) profiles resnet50 at batch 64 (node times; LMS's own copy rates through its pinned host
# arena and copy streams), (5) benchmarks resnet50 224x224 f32 training at a 16 GiB budget: max batch and
# samples/s per strategy (auto planning with that profile), against PyTorch capped at the same memory, plain and
# with save_on_cpu (bench/torch_capped.py, which also measures PyTorch's pinned copy bandwidth each way); auto's
# runs write a measured trace beside the predicted one (lms plan --trace) and the summary gives both rates. Full
# results go to gpu-check-out/ and, packed, to $OUT (at most 8 files come back from a device run: summary.txt,
# tests.log, results.tgz); a short table is printed last. Each stage has a time limit so the whole stays under
# about 8 minutes; a stage that fails or runs out of time is reported in the table, and the script goes on.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$PWD/gpu-check-out
rm -rf "$out"
mkdir -p "$out"
finish() {  # the summary table, and what comes back from the device machine
  echo
  echo "==================== GPU check summary ===================="
  printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
  if [ -n "${OUT:-}" ]; then
    cp "$out/summary.txt" "$OUT/"
    [ -f "$out/tests.log" ] && cp "$out/tests.log" "$OUT/"
    tar czf "$OUT/results.tgz" -C "$out" .
  fi
}
build=build-gpu
jobs=$(nproc)
summary=()
note() { summary+=("$1"); echo "== $1"; }
started=$(date +%s)
elapsed() { echo $(( $(date +%s) - started ))s; }
# The whole check stays under 8 minutes: a stage starts only with at least `need` seconds of the 460 left.
deadline=$(( started + 460 ))
have_time() { [ $(( deadline - $(date +%s) )) -ge "$1" ]; }

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
if ! timeout 300 bash -c "cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMS_CUDA=ON -DLMS_CPU=OFF \
      -DLMS_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH=$prefix/usr -DCMAKE_CUDA_ARCHITECTURES=90 && \
      ninja -C $build -j$jobs lms lms_tests" >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  note "build: FAILED ($(elapsed)); see build.log"
  finish
  exit 1
fi
note "build: ok ($(elapsed))"
lms=$build/bin/lms

# --- the test suite ----------------------------------------------------------------------------------------
LMS_REQUIRE_GPU=1 timeout 180 ctest --test-dir "$build" -j "$jobs" --timeout 120 --output-on-failure >"$out/tests.log" 2>&1
rc=$?
tests_line=$(grep -E "tests passed|tests failed" "$out/tests.log" | tail -1)
skipped=$(grep -c "(Skipped)" "$out/tests.log")
failed=$(sed -n '/The following tests FAILED/,$p' "$out/tests.log" | grep -E "^\s+[0-9]+ - " | head -20 | \
  sed -E 's/^\s+[0-9]+ - //; s/ *#.*//' | tr '\n' ' ')
note "tests: rc=$rc; $tests_line; skipped $skipped; failed: ${failed:-none} ($(elapsed))"

# --- resnet18 under a small budget: bit-identical losses --------------------------------------------------
r18=(--model resnet18 --small-stem --image 32 --batch 64 --classes 10 --device cuda --steps 4 --seed 1 --json)
have_time 120 && timeout 60 "$lms" train "${r18[@]}" >"$out/r18_none.json" 2>"$out/r18_none.err"
peak=$(python3 -c "import json;print(json.load(open('$out/r18_none.json'))['planned_peak_bytes'])" 2>/dev/null)
if [ -n "$peak" ]; then
  small=$(( peak * 2 / 3 ))
  for s in tflms auto; do
    timeout 60 "$lms" train "${r18[@]}" --strategy "$s" --budget "$small" >"$out/r18_$s.json" 2>"$out/r18_$s.err"
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
else
  note "resnet18 unconstrained run FAILED: $(head -c 300 "$out/r18_none.err")"
fi

# --- PyTorch capped at 16 GiB (plain and save_on_cpu), copy bandwidth ---------------------------------------
have_time 150 && PYTHONUNBUFFERED=1 timeout 150 python3 bench/torch_capped.py --cap 16GiB --max-seconds 35 --steps 3 --copy-bandwidth \
  --json-out "$out/torch.json" >/dev/null 2>"$out/torch.err"
torch_plain=$(python3 -c "import json;print(json.load(open('$out/torch.json'))['modes']['plain']['max_batch'])" 2>/dev/null)
note "pytorch: $(python3 - "$out" <<'EOF'
import json, os, sys
try:
    t = json.load(open(f"{sys.argv[1]}/torch.json"))
except Exception as e:
    err = open(f"{sys.argv[1]}/torch.err").read().strip().splitlines() if os.path.exists(f"{sys.argv[1]}/torch.err") else []
    print(f"FAILED ({err[-1] if err else e})"); sys.exit()
m = t["modes"]
bw = t.get("copy_bandwidth") or {}
print(" ".join(f"{k}: max batch {v['max_batch']} at {v['samples_per_second_at_max']} samples/s;" for k, v in m.items())
      + f" copies h2d {bw.get('h2d_gb_per_s')} GB/s, d2h {bw.get('d2h_gb_per_s')} GB/s")
EOF
) ($(elapsed))"

# --- lms profile: resnet50's node times at batch 64 on this GPU, and LMS's own copy rates (1 GiB swapped out ---
# --- and in through the cuda backend's pinned host arena and copy streams); auto plans with them below ----------
have_time 60 && timeout 45 "$lms" profile --device cuda --model resnet50 --image 224 --batch 64 --steps 3 \
  --copy-bytes 1GiB -o "$out/profile_r50.json" >"$out/profile_r50.txt" 2>&1
note "lms profile: $(python3 -c "import json;p=json.load(open('$out/profile_r50.json'));c=p['copies'];print(f\"resnet50 b64 step {p['step_seconds']:.4f} s; copies d2h {c['d2h_bytes_per_s']/1e9:.1f} GB/s, h2d {c['h2d_bytes_per_s']/1e9:.1f} GB/s (1 GiB, pinned host arena, copy streams)\")" 2>/dev/null || echo "FAILED ($(tail -1 "$out/profile_r50.txt"))") ($(elapsed))"
profile=()
[ -s "$out/profile_r50.json" ] && profile=(--profile "$out/profile_r50.json")

# --- LMS resnet50 at 16 GiB: max batch per strategy, samples/s (auto plans with the measured profile) -------
r50=(--model resnet50 --image 224 --device cuda --budget 16GiB)
strategy_args() { if [ "$1" = auto ]; then echo --strategy auto "${profile[@]}"; else echo --strategy "$1"; fi; }
# train: every strategy's run also reports the step predicted before it (on h200-pcie5 with the measured profile)
train_args() { if [ "$1" = auto ]; then strategy_args auto; else echo --strategy "$1" --device-model h200-pcie5 "${profile[@]}"; fi; }
for s in auto tflms none; do
  have_time 60 && timeout 60 "$lms" maxbatch "${r50[@]}" $(strategy_args "$s") --json >"$out/r50_maxbatch_$s.json" 2>"$out/r50_maxbatch_$s.err"
done
batches() {  # the batches each strategy trains at: its max, PyTorch plain's max, and 4x that
  python3 - "$out" "$1" "${torch_plain:-0}" <<'EOF'
import json, sys
out, s, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    mb = json.load(open(f"{out}/r50_maxbatch_{s}.json"))["max_batch"]
except Exception:
    sys.exit()
want = {mb}
if s != "none" and tp > 0:
    want |= {b for b in (tp, 4 * tp) if b <= mb}
print(" ".join(str(b) for b in sorted(want)))
EOF
}
for s in auto tflms none; do
  for b in $(batches "$s"); do
    # auto's runs also write a trace, and its plan's predicted trace (lms plan --trace) goes beside it, to compare
    # prediction and measurement node by node in Perfetto
    trace=()
    [ "$s" = auto ] && trace=(--trace "$out/r50_auto_b$b.trace.json")
    # up to 75 s: at the largest batches pinning the host arena (tens of GiB) alone takes a while
    have_time 60 && timeout 75 "$lms" train "${r50[@]}" $(train_args "$s") --batch "$b" --steps 4 --json \
      "${trace[@]}" >"$out/r50_${s}_b$b.json" 2>"$out/r50_${s}_b$b.err"
    [ "$s" = auto ] && have_time 40 && timeout 30 "$lms" plan "${r50[@]}" $(strategy_args "$s") --batch "$b" \
      --trace "$out/r50_auto_b$b.predicted.json" >"$out/r50_auto_b$b.plan.txt" 2>&1
  done
done
note "$(python3 - "$out" "${torch_plain:-0}" <<'EOF'
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
        err = open(f"{out}/r50_maxbatch_{s}.err").read().strip().splitlines()
        lines.append(f"  lms {s}: maxbatch FAILED ({err[-1] if err else 'no output'})"); continue
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
        runs.append(run)
    lines.append(f"  lms {s}: max batch {mb}; " + ", ".join(runs))
for k, v in torch.items():
    lines.append(f"  pytorch {k}: max batch {v['max_batch']}; {v['samples_per_second_at_max']}/s at it")
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

finish
