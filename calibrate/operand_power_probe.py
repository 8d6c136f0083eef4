#!/usr/bin/env python3
"""Does a GEMM's speed depend on its operands' values? (issue #15: the H200's expert GEMMs.)

On our H200 the micro-step's expert GEMMs (calibrate/micro_step.py: operands randn × 0.1) ran
5–6% faster than grouped_gemm_bench.py's fresh calls of the same shape (operands randn × 1):
96 experts × 2,736 rows, up projection 15.1–15.5 ms against 16.0–16.2 ms; on an H100 the two
agree (15.4 / 15.5 ms). A tensor core's switching power depends on the bits it multiplies, and
the H200 runs GEMMs near its 700 W cap, so operand values could move its clock and with it the
time — which would matter to the twin, whose profiles are calibrated on randn × 1 operands while a
training step's weights are ~0.02 and its activations normalised.

For each operand scale (both operands randn × s; s = 0: zeros) and each kernel — the micro-step's
expert up and down projections (torch._grouped_mm, 96 × 2,736 rows) and a cuBLAS GEMM of the
step's dense shape (16,384 × 3,584 × 6,144) — two states, interleaved over the scales in cycles so
that the GPU's drift over minutes falls on every scale alike:
  fresh      one call after 0.5 s of a bandwidth-bound kernel (the profiles' calibration state);
  sustained  the median of calls 21–30 of 30 back to back (the power cap's settled state).
Medians over cycles are written per (kernel, scale, state), with the ratio to scale 1.

Usage (GPU machine with PyTorch):
  python3 calibrate/operand_power_probe.py --out operand-power.json [--cycles 4] [--scales 1,0.1,0.01,0]
Without a GPU it exits 3, as the other harnesses.
"""
from __future__ import annotations

from collections.abc import Callable

import argparse
import datetime
import json
import os
import statistics
import sys

from power_transient_probe import keep_busy

try:
    import torch
except ImportError:
    torch = None

EXPERTS, ROWS = 96, 2736
GROUPED = {"grouped_up": (3584, 6144), "grouped_down": (6144, 1792)}  # n, k
DENSE = (16384, 3584, 6144)  # m, n, k


def operands(scale: float) -> dict:
    """Each kernel's operands at one scale (randn × scale; zeros at 0) and its call."""
    def rnd(*shape: int) -> object:
        t = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        return t.mul_(scale) if scale != 0 else t.zero_()
    calls = {}
    offs = torch.arange(ROWS, EXPERTS * ROWS + 1, ROWS, device="cuda", dtype=torch.int32)
    for name, (n, k) in GROUPED.items():
        a, b = rnd(EXPERTS * ROWS, k), rnd(EXPERTS, k, n)
        calls[name] = lambda a=a, b=b: torch._grouped_mm(a, b, offs=offs)
    m, n, k = DENSE
    a, b = rnd(m, k), rnd(k, n)
    calls["cublas_dense"] = lambda a=a, b=b: a @ b
    return calls


def timed(fn: Callable[[], object]) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record()
    e.synchronize()
    return s.elapsed_time(e)


def cycle(calls_by_scale: dict, light: Callable[[], object], fresh_s: float, sustained: int) -> dict:
    out = {}
    for scale, calls in calls_by_scale.items():
        for name, fn in calls.items():
            keep_busy(torch, light, fresh_s)
            fresh = timed(fn)
            series = [timed(fn) for _ in range(sustained)]
            out[(name, scale)] = (fresh, statistics.median(series[-10:]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument("--scales", default="1,0.1,0.01,0")
    ap.add_argument("--fresh-s", type=float, default=0.5)
    ap.add_argument("--sustained", type=int, default=30)
    a = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("operand_power_probe: no GPU (PyTorch with CUDA needed)", file=sys.stderr)
        return 3
    scales = [float(s) for s in a.scales.split(",")]
    calls_by_scale = {s: operands(s) for s in scales}
    buf = torch.empty(1 << 28, device="cuda", dtype=torch.bfloat16).fill_(1)
    light = buf.neg_
    for calls in calls_by_scale.values():  # warm-up: kernels chosen, workspaces allocated
        for fn in calls.values():
            fn()
    torch.cuda.synchronize()
    trials: dict = {}
    for c in range(a.cycles):
        for key, v in cycle(calls_by_scale, light, a.fresh_s, a.sustained).items():
            trials.setdefault(key, []).append(v)
        print(f"cycle {c + 1}/{a.cycles} done", flush=True)
    rows = []
    for (name, scale), vs in sorted(trials.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        fresh = statistics.median(v[0] for v in vs)
        sus = statistics.median(v[1] for v in vs)
        rows.append({"kernel": name, "scale": scale, "fresh_ms": fresh, "sustained_ms": sus,
                     "fresh_trials_ms": [v[0] for v in vs], "sustained_trials_ms": [v[1] for v in vs]})
    base = {r["kernel"]: r for r in rows if r["scale"] == 1.0}
    for r in rows:
        b = base.get(r["kernel"])
        if b:
            r["fresh_vs_scale_1"] = r["fresh_ms"] / b["fresh_ms"]
            r["sustained_vs_scale_1"] = r["sustained_ms"] / b["sustained_ms"]
        print(f"{r['kernel']:13s} scale {r['scale']:<5g} fresh {r['fresh_ms']:8.3f} ms "
              f"({r.get('fresh_vs_scale_1', float('nan')):.3f})  sustained {r['sustained_ms']:8.3f} ms "
              f"({r.get('sustained_vs_scale_1', float('nan')):.3f})", flush=True)
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": " ".join(sys.argv), "experts": EXPERTS, "rows_per_expert": ROWS,
           "grouped": GROUPED, "dense_mnk": DENSE, "fresh_s": a.fresh_s, "sustained_calls": a.sustained,
           "rows": rows}
    with open(a.out + ".tmp", "w") as f:  # whole or not at all
        json.dump(doc, f, indent=1)
    os.replace(a.out + ".tmp", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
