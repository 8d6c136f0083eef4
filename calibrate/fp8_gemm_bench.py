#!/usr/bin/env python3
"""FP8 (E4M3) against bf16 GEMMs through cuBLASLt (PyTorch's torch._scaled_mm and torch.mm) at
the model's shapes (issue #6, micro-benchmark 1): expert up/down projections over rows per
expert, the attention projections and 8192³. Scales: one per tensor, and one per row of A and
column of B (rowwise). Prints and writes TFLOP/s and the fp8/bf16 speed ratio per shape.

Timing: with --lead-us > 0 (the default) a GPU sleep of lead-us per launch goes ahead of the
launches, which the host enqueues behind it and the GPU runs back to back, so that the host's
enqueue (PyTorch's and cuBLASLt's host side, tens of µs, as long as a 1,024-row GEMM) is not timed;
--lead-us 0 times each launch on an idle GPU, the host's enqueue with it, as before 2026-12-05
(reports/calibration/gemm-alone/README.md).

Usage: python3 calibrate/fp8_gemm_bench.py --out fp8-gemm.json [--reps 20] [--lead-us 100]
"""
from __future__ import annotations

from collections.abc import Callable

import argparse
import datetime
import json
import statistics
import sys

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

SHAPES = [("square_8192", 8192, 8192, 8192), ("qkv_proj", 16384, 13568, 6144),
          ("o_proj", 16384, 6144, 8192)] + \
         [(f"expert_up_{m}", m, 3584, 6144) for m in (1024, 2048, 4096, 8192, 16384)] + \
         [(f"expert_down_{m}", m, 6144, 1792) for m in (1024, 2048, 4096, 8192, 16384)]


CLOCK_HZ = 1.98e9  # torch.cuda._sleep counts SM cycles; the H100's and H200's maximum clock


def median_ms(fn: Callable[[], object], reps: int, lead_us: float) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    if lead_us > 0:
        torch.cuda._sleep(int(lead_us * 1e-6 * reps * CLOCK_HZ))
    evs = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record()
        if lead_us <= 0:
            torch.cuda.synchronize()
        evs.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in evs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--lead-us", type=float, default=100,
                   help="GPU sleep per launch ahead of the launches (0: each on an idle GPU)")
    a = p.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("fp8_gemm_bench: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    rows, errors = [], []
    f8 = torch.float8_e4m3fn
    for name, m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)  # B = wᵀ, column-major
        flops = 2.0 * m * n * k
        row = dict(shape=name, m=m, n=n, k=k,
                   bf16_ms=median_ms(lambda: torch.mm(x, w.t()), a.reps, a.lead_us))
        xq, wq = x.to(f8), w.to(f8)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        cases = {"fp8_tensorwise": (one, one),
                 "fp8_rowwise": (torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda"))}
        for case, (sa, sb) in cases.items():
            try:
                row[f"{case}_ms"] = median_ms(
                    lambda: torch._scaled_mm(xq, wq.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), a.reps, a.lead_us)
            except Exception as e:  # noqa: BLE001 — reported, the other cases still run
                errors.append(f"{case} {name}: {e!r}"[:300])
        for key in [k2 for k2 in row if k2.endswith("_ms")]:
            row[key.replace("_ms", "_TFLOPs")] = flops / row[key] / 1e9
        rows.append(row)
        print(" ".join(f"{k2}={v:.1f}" if isinstance(v, float) else f"{k2}={v}" for k2, v in row.items()), flush=True)
    prov = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                command=" ".join(sys.argv))
    with open(a.out, "w") as f:
        json.dump(dict(provenance=prov, lead_us=a.lead_us, rows=rows, errors=errors), f, indent=1)
    for e in errors:
        print("error:", e, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
