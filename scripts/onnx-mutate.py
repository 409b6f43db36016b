#!/usr/bin/python3
"""Corrupts the ONNX fixtures at random bytes and runs `lms` on each result: every run must exit 0 or print one
error line and exit 1 (never a crash, a hang, another exit code or a second line). A cheap check of the protobuf
reader, the importer and, with `plan`, autodiff and the planners on whatever a corrupted file still imports.
Not a test (its cases are random); docs/fuzzing.md says what it found.

    /usr/bin/python3 scripts/onnx-mutate.py [--lms build/bin/lms] [--runs 300] [--seed 1] [--command stats|plan]
                                            [--budgets 1GiB[,32KiB,...]]

Writes each failing file as onnx-mutate-bad-N.onnx in the current directory. Needs no packages beyond Python.
"""
import argparse
import os
import random
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# Each fixture with the options it imports with.
FIXTURES = {"onnx_cnn": [], "onnx_gpt": [], "onnx_vit": [], "onnx_swin": [], "onnx_llama": ["--frozen", "*_cached"],
            "onnx_upsample": [], "onnx_explog": [],
            "onnx_bert": ["--dim", "seq=8", "--input-value", "attention_mask=1,token_type_ids=0"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lms", default="build/bin/lms", help="the lms binary")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--command", choices=["stats", "plan"], default="stats")
    parser.add_argument("--budgets", default="1GiB",
                        help="plan: device budgets, comma-separated, one drawn per run (several: tight ones exercise "
                             "swapping, recomputation and the does-not-fit errors)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    budgets = args.budgets.split(",")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mutated.onnx")
        for run in range(args.runs):
            name = rng.choice(sorted(FIXTURES))
            with open(os.path.join(HERE, "..", "tests", "fixtures", name + ".onnx"), "rb") as f:
                data = bytearray(f.read())
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            with open(path, "wb") as f:
                f.write(data)
            cmd = [args.lms, args.command, path, "--batch", "2"]
            if args.command == "plan":
                budget = budgets[0] if len(budgets) == 1 else rng.choice(budgets)  # one: the draws of earlier runs
                cmd += ["--budget", budget, "--strategy", rng.choice(["none", "tflms", "auto"])]
            cmd += FIXTURES[name]
            try:
                r = subprocess.run(cmd, capture_output=True, timeout=60)
                ok = r.returncode == 0 or (r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"\r" not in r.stderr)
                why = f"exit {r.returncode}: {r.stderr[-200:]!r}"
            except subprocess.TimeoutExpired:
                ok, why = False, "no answer within 60 s"
            if not ok:
                bad += 1
                with open(f"onnx-mutate-bad-{run}.onnx", "wb") as f:
                    f.write(data)
                print(f"run {run} ({name}): {why}")
    print(f"{args.runs} runs of `lms {args.command}` on corrupted fixtures: {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
