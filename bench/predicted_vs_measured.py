#!/usr/bin/env python3
"""Predicted vs measured step time and peak of a strategy's plans on a real backend (the auto issue, item 9).

For each model: `lms profile` measures every node of the unconstrained training step on the backend and the
backend's copy rates each way; then, at the unconstrained budget and at budgets 2/3 and 1/3 of
the way from the hard limit (min_budget_bytes) to the no-LMS peak, `lms plan --profile` predicts the step time
of the strategy's plan (three-stream simulation with the measured node times) and `lms train` with the same
options runs it: median step time of the steps after the first two, and the measured peak (the highest arena
byte written). Prints a Markdown table: budget, swapped/recomputed tensors, planned and measured peak, predicted
and measured step, measured/predicted.

    bench/predicted_vs_measured.py [--lms build/bin/lms] [--device cpu] [--strategy auto] [--steps 8]

Run on an otherwise idle machine: the measurement is wall-clock time.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile

MODELS = {
    "resnet18 32x32 b64": ["--model", "resnet18", "--small-stem", "--image", "32", "--batch", "64"],
    "unet3d 32^3 b2 (depth 3, 8 filters)": ["--model", "unet3d", "--image", "32", "--depth", "3",
                                            "--base-filters", "8", "--batch", "2"],
}


def run_json(cmd):
    """Runs an lms command with --json; returns its object, or exits naming the command and its error line."""
    r = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"predicted_vs_measured: {' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lms", default="build/bin/lms")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--steps", type=int, default=8, help="training steps per budget (the first two are warm-up)")
    args = ap.parse_args()
    if args.steps < 3:
        ap.error("--steps must be at least 3")
    for name, model in MODELS.items():
        with tempfile.NamedTemporaryFile(suffix=".json") as prof:
            subprocess.run([args.lms, "profile", "--device", args.device, *model, "--steps", "5", "-o", prof.name],
                           check=True, capture_output=True)
            base = run_json([args.lms, "plan", *model, "--budget", "1TiB", "--device", args.device])
            lo, hi = base["min_budget_bytes"], base["peak_bytes_none"]
            budgets = [("unconstrained", 1 << 40), ("2/3", lo + (hi - lo) * 2 // 3), ("1/3", lo + (hi - lo) // 3)]
            print(f"\n{name} on {args.device}, strategy {args.strategy} (none's peak {hi:,} B, hard limit {lo:,} B)\n")
            print("| budget | swapped / recomputed | planned peak | measured peak | predicted step | measured step "
                  "| measured/predicted |")
            print("|---|---|---|---|---|---|---|")
            for label, budget in budgets:
                common = [*model, "--budget", str(budget), "--strategy", args.strategy, "--device", args.device,
                          "--profile", prof.name]
                plan = run_json([args.lms, "plan", *common])
                train = run_json([args.lms, "train", *common, "--steps", str(args.steps)])
                measured = statistics.median(train["step_seconds"][2:])
                predicted = plan["predicted_step_seconds"]
                recomputed = (plan.get("auto") or {}).get("recomputed", 0)
                print(f"| {label} ({budget:,} B) | {plan.get('swapped_tensors', 0)} / {recomputed} "
                      f"| {plan['peak_bytes']:,} B | {train['peak_device_bytes']:,} B | {predicted:.3f} s "
                      f"| {measured:.3f} s | {measured / predicted:.3f} |", flush=True)


if __name__ == "__main__":
    main()
