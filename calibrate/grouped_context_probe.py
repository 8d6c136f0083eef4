#!/usr/bin/env python3
"""Does what runs before a grouped GEMM change its time? (issue #15: the H200's expert GEMMs.)

The micro-step's first H200 run (2026-11-30) timed its expert up projection (torch._grouped_mm,
96 × 2,736 rows, n 3,584, k 6,144) at 15.1 ms where grouped_gemm_bench.py's fresh calls take
16.0–16.3 ms. The bench's call follows 0.5 s of a bandwidth-bound kernel and a host
synchronisation; the micro-step's follows 2.3 ms of elementwise work queued behind it. This
probe times the same call (operands randn × 0.1, as micro_step.py makes them) after five
contexts, interleaved over six cycles, each after 0.5 s of the light kernel and a synchronisation:
  A  nothing more (the bench's state)
  B  2.3 ms of elementwise work queued before it (the micro-step's fp8_dequant)
  C  20 ms of empty GPU
  D  five 512 MiB negations queued (~1.3 ms)
  F  20 ms of empty GPU, then the 2.3 ms of elementwise work queued
(2026-12-06 on the device tool's H200 it ran as a scratch script of this code: the result,
reports/calibration/grouped-gemm/h200-2026-12-06-grouped-context.{json,log}, is within 2% for
every context — context does not explain the first run's speed.)

Usage (GPU machine with PyTorch): python3 calibrate/grouped_context_probe.py --out grouped-context.json
Without a GPU it exits 3, as the other harnesses.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from operand_power_probe import timed
from power_transient_probe import keep_busy

try:
    import torch
except ImportError:
    torch = None

E, M, N, K = 96, 2736, 3584, 6144
DESCRIPTION = {"A": "after 0.5 s light + sync (bench)", "B": "light+sync, then 2.3 ms elementwise queued",
               "C": "light+sync, 20 ms empty GPU", "D": "light+sync, 5 big neg_ queued (~1.3 ms)",
               "F": "light+sync, 20 ms empty, 2.3 ms elementwise queued"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="grouped-context.json")
    out = ap.parse_args().out
    if torch is None or not torch.cuda.is_available():
        print("grouped_context_probe: no GPU (PyTorch with CUDA needed)", file=sys.stderr)
        return 3
    bf = torch.bfloat16
    a = torch.randn(E * M, K, device="cuda", dtype=bf) * 0.1
    b = torch.randn(E, K, N, device="cuda", dtype=bf) * 0.1
    offs = torch.arange(M, E * M + 1, M, device="cuda", dtype=torch.int32)
    big = torch.empty(1 << 28, device="cuda", dtype=bf).fill_(1)
    small = torch.empty(int(2.3e-3 * 4.0e12 / 4), device="cuda", dtype=bf).fill_(1)  # ~2.3 ms of neg_

    grouped = lambda: torch._grouped_mm(a, b, offs=offs)

    def context(k: str) -> float:
        keep_busy(torch, big.neg_, 0.5)
        if k in "CF":
            time.sleep(0.02)
        if k in "BF":
            small.neg_()
        if k == "D":
            for _ in range(5):
                big.neg_()
        return timed(grouped)

    for k in DESCRIPTION:  # warm-up
        context(k)
    trials: dict[str, list[float]] = {k: [] for k in DESCRIPTION}
    for _ in range(6):
        for k in DESCRIPTION:
            trials[k].append(context(k))
    for k, v in trials.items():
        print(k, "%.3f ms" % statistics.median(v), ["%.2f" % x for x in v], DESCRIPTION[k])
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "kernel": f"grouped_mm {E}x{M} n{N} k{K} randn*0.1",
           "median_ms": {k: statistics.median(v) for k, v in trials.items()}, "trials_ms": trials,
           "contexts": DESCRIPTION}
    with open(out + ".tmp", "w") as f:  # whole or not at all
        json.dump(doc, f, indent=1)
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
