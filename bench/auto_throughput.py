#!/usr/bin/env python3
"""Predicted throughput past the unconstrained max batch (the cuda issue's goals, by planning): for a model at a
budget on a device model, the largest batch strategy none fits (`lms maxbatch`), then for multiples of it the
predicted samples/s of tflms's and auto's plans (`lms plan --json`: three-stream time simulation with the plan's
buffer-reuse waits, roofline op times), and each as a fraction of none's samples/s at its own max batch. The
goal on the GPU is >= 0.8 at 4x. Planning only: nothing runs on a GPU.

Usage: bench/auto_throughput.py [--lms build/bin/lms] [--model resnet50] [--budget 16GiB]
       [--device-model h200-pcie5] [--multiples 1,2,3,4,5] [--json F]"""
import argparse
import json
import subprocess
import sys


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 and not r.stdout.strip():
        sys.exit(f"auto_throughput: {' '.join(cmd)} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lms", default="build/bin/lms")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--budget", default="16GiB")
    ap.add_argument("--device-model", default="h200-pcie5")
    ap.add_argument("--multiples", default="1,2,3,4,5")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    common = ["--model", a.model, "--budget", a.budget, "--device-model", a.device_model]
    base = run_json([a.lms, "maxbatch", *common, "--strategy", "none", "--json"])["max_batch"]
    none = run_json([a.lms, "plan", *common, "--batch", str(base), "--strategy", "none", "--json"])
    base_rate = base / none["predicted_step_seconds"]
    rows = [{"batch": base, "strategy": "none", "fits": True, "step_s": none["predicted_step_seconds"],
             "samples_per_s": base_rate, "vs_none": 1.0}]
    for m in [int(x) for x in a.multiples.split(",")]:
        batch = base * m
        for strategy in ["tflms", "auto"]:
            p = run_json([a.lms, "plan", *common, "--batch", str(batch), "--strategy", strategy, "--json"])
            row = {"batch": batch, "multiple": m, "strategy": strategy, "fits": p["fits"]}
            if p["fits"]:
                step = p["predicted_step_seconds"]
                row.update(step_s=step, samples_per_s=batch / step, vs_none=batch / step / base_rate,
                           swapped_gib=p["swap_out_bytes"] / 2**30, recompute_gflop=p.get("recompute_flops", 0) / 1e9)
            rows.append(row)
    print(f"{a.model} at {a.budget} on {a.device_model}: none's max batch {base}, "
          f"{base_rate:.0f} samples/s predicted")
    print("| batch | strategy | step s | samples/s | / none at its max batch | swapped GiB | recomputed GFLOP |")
    print("|---|---|---|---|---|---|---|")
    for r in rows[1:]:
        if not r["fits"]:
            print(f"| {r['batch']} ({r['multiple']}x) | {r['strategy']} | does not fit | | | | |")
            continue
        print(f"| {r['batch']} ({r['multiple']}x) | {r['strategy']} | {r['step_s']:.4g} | {r['samples_per_s']:.0f} | "
              f"{r['vs_none']:.3f} | {r['swapped_gib']:.1f} | {r['recompute_gflop']:.0f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
