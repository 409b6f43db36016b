#!/usr/bin/env python3
"""auto vs tflms by planning (issue 6 item 7): for each model, at 16 GiB and at budgets a quarter, a half and
three quarters of the way from the hard limit to the peak without LMS, on every device-model preset, the
predicted step time of each strategy's plan (`lms plan --json`: three-stream time simulation with the plan's
buffer-reuse waits, roofline op times). Prints a markdown table and, with --svg FILE, a scatter plot of planned
peak vs predicted step time. Usage: bench/auto_vs_tflms.py [--lms build/bin/lms] [--svg F] [--json F]."""
import argparse
import json
import subprocess
import sys

PRESETS = ["v100-nvlink2", "v100-pcie3", "a100-pcie4", "h100-pcie5", "h200-pcie5", "gh200-c2c"]
MODELS = {
    "resnet50 b256": ["--model", "resnet50", "--batch", "256"],
    "resnet152 b128": ["--model", "resnet152", "--batch", "128"],
    "unet3d 96^3 b2": ["--model", "unet3d", "--image", "96", "--batch", "2"],
    "gpt 24x1024 b8": ["--model", "gpt", "--layers", "24", "--hidden-size", "1024", "--heads", "16", "--seq",
                       "1024", "--batch", "8"],
}
GIB = 1 << 30


def plan(lms, model, strategy, budget, preset):
    cmd = [lms, "plan", *model, "--strategy", strategy, "--budget", str(budget), "--json"]
    if preset:
        cmd += ["--device-model", preset]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lms", default="build/bin/lms")
    ap.add_argument("--svg", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = []
    for name, model in MODELS.items():
        none = plan(a.lms, model, "none", 1 << 50, None)
        peak, hard = none["peak_bytes"], none["min_budget_bytes"]
        budgets = sorted({16 * GIB} | {hard + (peak - hard) * k // 4 for k in (1, 2, 3)})
        for budget in budgets:
            if budget >= peak:
                continue
            for preset in PRESETS:
                t = plan(a.lms, model, "tflms", budget, preset)
                u = plan(a.lms, model, "auto", budget, preset)
                row = {"model": name, "budget": budget, "preset": preset, "none_peak": peak, "hard": hard,
                       "tflms_fits": t["fits"], "tflms_s": t["predicted_step_seconds"] if t["fits"] else None,
                       "tflms_peak": t["peak_bytes"], "auto_fits": u["fits"],
                       "auto_s": u["predicted_step_seconds"] if u["fits"] else None, "auto_peak": u["peak_bytes"],
                       "auto_source": u.get("auto", {}).get("source", ""),
                       "auto_swapped": u.get("auto", {}).get("swapped", 0),
                       "auto_recomputed": u.get("auto", {}).get("recomputed", 0),
                       "recompute_gflop": u["recompute_flops"] / 1e9}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print("| model | budget GiB | device | tflms s | auto s | auto/tflms | auto: swapped / recomputed (GFLOP) | took |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ts = f"{r['tflms_s']:.4g}" if r["tflms_s"] is not None else "does not fit"
        us = f"{r['auto_s']:.4g}" if r["auto_s"] is not None else "does not fit"
        ratio = f"{r['auto_s'] / r['tflms_s']:.3f}" if r["auto_s"] and r["tflms_s"] else "-"
        took = r["auto_source"].split(" ")[0] if r["auto_source"] else "-"
        print(f"| {r['model']} | {r['budget'] / GIB:.2f} | {r['preset']} | {ts} | {us} | {ratio} | "
              f"{r['auto_swapped']} / {r['auto_recomputed']} ({r['recompute_gflop']:.0f}) | {took} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.svg:
        write_svg(a.svg, rows)


def write_svg(path, rows):
    """Planned peak (x, fraction of the none peak) vs predicted step time relative to the fastest plan of that
    model and device (y), one dot per plan: tflms orange, auto blue."""
    W, H, M = 720, 420, 60
    pts = []
    for r in rows:
        best = min(x for x in (r["tflms_s"], r["auto_s"]) if x is not None) if (r["tflms_s"] or r["auto_s"]) else None
        if best is None:
            continue
        for key, peak, color in (("tflms_s", "tflms_peak", "#d08020"), ("auto_s", "auto_peak", "#1f5fbf")):
            if r[key] is not None:
                pts.append((r[peak] / r["none_peak"], r[key] / best, color))
    ymax = max(p[1] for p in pts) if pts else 2
    X = lambda x: M + x * (W - 2 * M)
    Y = lambda y: H - M - (y - 1) / max(ymax - 1, 1e-9) * (H - 2 * M)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{M}" y="24">planned peak vs predicted step time: tflms (orange), auto (blue); every model, budget, device preset</text>',
           f'<line x1="{M}" y1="{H - M}" x2="{W - M}" y2="{H - M}" stroke="black"/>',
           f'<line x1="{M}" y1="{M}" x2="{M}" y2="{H - M}" stroke="black"/>',
           f'<text x="{W / 2 - 120}" y="{H - 20}">planned peak / peak without LMS</text>',
           f'<text x="8" y="{M - 10}">step time / the better plan\'s</text>']
    for t in (0, 0.25, 0.5, 0.75, 1):
        out.append(f'<text x="{X(t) - 10:.1f}" y="{H - M + 16}">{t}</text>')
    for k in range(5):
        y = 1 + (ymax - 1) * k / 4
        out.append(f'<text x="{M - 40}" y="{Y(y) + 4:.1f}">{y:.2f}</text>')
    for x, y, c in pts:
        out.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}" fill-opacity="0.7"/>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
