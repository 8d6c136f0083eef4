#!/usr/bin/env python3
"""Persistent grouped GEMMs alone over rows per expert (issue #15: the micro-step's expert GEMMs).

Times `torch._grouped_mm` (CUTLASS's persistent grouped GEMM, the kernel calibrate/micro_step.py
runs for the expert GEMMs) for the model's expert projections — up (n 3,584, k 6,144) and down
(n 6,144, k 1,792) over 96 experts of equal rows — at rows per expert from 64 to 5,456 (multiples of
16, grouped_mm's alignment; the real job's 65,536 tokens × top-8 / 96 ≈ 5,461). Measured on our H200 (2026-12-01): time is a staircase
in rows — 64 to 256 rows per expert cost the same, 352 twice that — each expert's rows run as
whole tiles — and the down projection (k 1,792) runs ~12% less efficiently than the up (k 6,144).
The twin's grouped GEMM time (hardware/kernel_cost.hpp) is
  t = overhead + groups · 2·rows_padded·n·(k + k½) / (peak · f_g),
rows padded to whole tiles of Mt rows (⌈m/Mt⌉·Mt for equal rows, m + Mt/2 on average when
experts' rows differ), k½ a tile's fixed cost in K-steps. The fit chooses Mt, k½ and f_g by least
squares of log time over the rows of even index (both projections), held out on the odd ones; the
residuals of both halves are written. `--profile FILE` writes efficiency.grouped_gemm_peak_fraction,
_tile_rows and _half_k into a profile.

Usage (on a GPU machine with PyTorch):
  python3 calibrate/grouped_gemm_bench.py --out grouped.json [--profile P.json] [--peak-TFLOPs 989] [--fresh 0.5 --reps 3]
  python3 calibrate/grouped_gemm_bench.py --refit grouped.json --out grouped.json   # no GPU
"""
from __future__ import annotations

from collections.abc import Callable

import argparse
import datetime
import json
import math
import os
import statistics
import sys

from power_transient_probe import keep_busy
from profile_json import update_efficiency

try:
    import torch
except ImportError:  # --refit and --help need no PyTorch
    torch = None

EXPERTS = 96
PROJECTIONS = {"up": (3584, 6144), "down": (6144, 1792)}  # n, k
ROWS = [64, 128, 176, 256, 352, 512, 688, 1024, 1376, 2048, 2736, 4096, 5456]  # multiples of 16


def time_ms(fn: Callable[[], object], reps: int, fresh_s: float = 0.0, light: object = None,
            behind_one: bool = False) -> float:
    """Median of reps calls: back to back after 3 warm-ups (the capped state once the GPU has run
    GEMMs for ~0.1–1 s), or with fresh_s > 0 each call after fresh_s of `light`, a bandwidth-bound
    kernel that keeps the clocks up and the power under the cap (the fresh state:
    reports/calibration/grouped-gemm/README.md, "The power cap's slow controller"); behind_one:
    the timed call queued behind one untimed call of itself, not right behind the light kernel
    (where every kernel ran 2–13% slower: README, "How long heavy load lasts")."""
    for _ in range(1 if fresh_s else 3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if fresh_s:
            keep_busy(torch, light, fresh_s)
            if behind_one:
                fn()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def measure(reps: int, fresh_s: float = 0.0, behind_one: bool = False, scale: float = 1.0) -> list[dict]:
    rows = []
    light = torch.empty(1 << 28, device="cuda", dtype=torch.bfloat16).fill_(1).neg_ if fresh_s else None
    for proj, (n, k) in PROJECTIONS.items():
        b = torch.randn(EXPERTS, k, n, device="cuda", dtype=torch.bfloat16).mul_(scale)
        for m in ROWS:
            a = torch.randn(EXPERTS * m, k, device="cuda", dtype=torch.bfloat16).mul_(scale)
            offs = torch.arange(m, EXPERTS * m + 1, m, device="cuda", dtype=torch.int32)
            ms = time_ms(lambda a=a, b=b, offs=offs: torch._grouped_mm(a, b, offs=offs), reps, fresh_s, light,
                         behind_one)
            flops = 2.0 * EXPERTS * m * n * k
            rows.append({"projection": proj, "rows_per_expert": m, "n": n, "k": k, "experts": EXPERTS,
                         "median_ms": ms, "TFLOPs": flops / (ms * 1e-3) / 1e12})
            print(f"{proj:5s} rows {m:5d}: {ms:8.3f} ms  {rows[-1]['TFLOPs']:6.1f} TFLOP/s", flush=True)
            del a
        del b
    return rows


def fit(rows: list[dict], peak_TFLOPs: float) -> dict:
    """Tile padding and a per-tile fixed cost: each expert's rows run as whole tiles of Mt rows,
    and each tile pays k½ K-steps' worth beyond its k (prologue, epilogue), so the time of equal
    rows m per expert is groups · 2·⌈m/Mt⌉·Mt·n·(k + k½) / (peak · f). Mt from {64, 128, 192,
    256}, k½ on a grid and f by least squares of log time on the rows of even index; residuals on
    every row."""
    index = {m: i for i, m in enumerate(ROWS)}
    fitted = lambda r: index.get(r["rows_per_expert"], 1) % 2 == 0
    padded = lambda m, mt: -(-m // mt) * mt
    # log(work at peak / t) = log f − log(padding · (k + k½)/k): the best log f is the mean.
    loss = lambda r, mt, kh: math.log(r["rows_per_expert"] / padded(r["rows_per_expert"], mt) * r["k"] / (r["k"] + kh)
                                      * peak_TFLOPs / r["TFLOPs"])
    best = None
    for mt in (64, 128, 192, 256):
        for kh in range(0, 1001, 25):
            logs = [loss(r, mt, kh) for r in rows if fitted(r)]
            log_f = -sum(logs) / len(logs)
            err = sum((l + log_f) ** 2 for l in logs)
            if best is None or err < best[0]:
                best = (err, mt, kh, math.exp(log_f), len(logs))
    _, mt, kh, f, n = best
    res = []
    for r in rows:
        m, k = r["rows_per_expert"], r["k"]
        model_TFLOPs = peak_TFLOPs * f * m / padded(m, mt) * k / (k + kh)
        res.append({"projection": r["projection"], "rows_per_expert": m, "fitted": fitted(r),
                    "error": r["TFLOPs"] / model_TFLOPs - 1})  # twin time / measured − 1
    held = [abs(e["error"]) for e in res if not e["fitted"]]
    held_big = [abs(e["error"]) for e in res if not e["fitted"] and e["rows_per_expert"] >= 256]
    return {"peak_fraction": f, "tile_rows": mt, "half_k": kh, "points": n,
            "held_out_worst_error": max(held), "held_out_worst_error_256_rows_up": max(held_big),
            "residuals": res}


def write_profile(path: str, fr: dict, note: str) -> None:
    src = (f"[meas] {note}: torch._grouped_mm over equal rows per expert, least squares of log time with "
           f"rows padded to whole tiles on {fr['points']} points (held-out worst error "
           f"{100 * fr['held_out_worst_error']:.0f}%)")
    update_efficiency(path, {"grouped_gemm_peak_fraction": (round(fr["peak_fraction"], 4), src),
                             "grouped_gemm_tile_rows": (fr["tile_rows"], src),
                             "grouped_gemm_half_k": (fr["half_k"], src)})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--peak-TFLOPs", type=float, default=989.0)
    p.add_argument("--refit", help="fit the rows of an earlier --out file again (no GPU needed)")
    p.add_argument("--profile", help="hardware profile JSON to write the fitted efficiency into")
    p.add_argument("--note", default="calibrate/grouped_gemm_bench.py")
    p.add_argument("--fresh", type=float, default=0.0,
                   help="seconds of light load before each timed call (the fresh, uncapped state); "
                        "0: back to back (the power-capped state)")
    p.add_argument("--behind-one", action="store_true",
                   help="with --fresh: time each call behind one untimed call of itself")
    p.add_argument("--operand-scale", type=float, default=1.0,
                   help="operands randn × this (1: every file before the operands step of 2026-12-06; calibrate/micro_step.py "
                        "and contention_bench.py use 0.1: operand_power_probe.py measures the difference)")
    a = p.parse_args()
    if a.refit:
        with open(a.refit) as fh:
            old = json.load(fh)
        rows, prov = old["rows"], old["provenance"]
        prov["refit"] = " ".join(sys.argv)
    elif torch is None or not torch.cuda.is_available():
        print("grouped_gemm_bench: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    else:
        torch.manual_seed(0)
        rows = measure(a.reps, a.fresh, a.behind_one, a.operand_scale)
        prov = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                    date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    command=" ".join(sys.argv), operand_scale=a.operand_scale)
    fr = fit(rows, a.peak_TFLOPs)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(dict(provenance=prov, peak_TFLOPs=a.peak_TFLOPs, rows=rows, fit=fr), fh, indent=1)
    os.replace(tmp, a.out)
    print(f"fit: peak fraction {fr['peak_fraction']:.4f}, tile rows {fr['tile_rows']}, half k {fr['half_k']}, "
          f"held-out worst error {100 * fr['held_out_worst_error']:.1f}% "
          f"({100 * fr['held_out_worst_error_256_rows_up']:.1f}% from 256 rows per expert up)")
    if a.profile:
        write_profile(a.profile, fr, a.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
