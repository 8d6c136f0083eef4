#!/usr/bin/env python3
"""One grouped GEMM (torch._grouped_mm, the micro-step's expert up-projection: 96 experts of
1,360 rows, n 3,584, k 6,144) timed back to back and after idle gaps of 2, 10 and 50 ms: a GPU
kept busy runs its GEMMs at its power-capped clock, one that idled between them faster
(reports/calibration/grouped-gemm/README.md). Usage, on a GPU machine:
  python3 calibrate/clock_probe.py
"""
from collections.abc import Callable
import argparse
import statistics
import subprocess
import sys
import time

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

E, N, K, M = 96, 3584, 6144, 1360


def clock() -> str:
    """The SM clock and power draw nvidia-smi reports now."""
    return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()


def run(f: Callable[[], object], gap_s: float, reps: int = 20) -> tuple:
    """Median ms of `reps` launches of f, each after an idle gap of gap_s (0: back to back)."""
    ts, clks = [], []
    for i in range(reps):
        if gap_s:
            torch.cuda.synchronize()
            time.sleep(gap_s)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        if not gap_s and i == reps // 2:
            clks.append(clock())
        ts.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(x.elapsed_time(y) for x, y in ts), clks


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    if torch is None or not torch.cuda.is_available():
        print("clock_probe: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    a = torch.randn(E * M, K, device="cuda", dtype=torch.bfloat16) * 0.1
    b = torch.randn(E, K, N, device="cuda", dtype=torch.bfloat16) * 0.1
    offs = torch.arange(M, E * M + 1, M, device="cuda", dtype=torch.int32)

    def f():
        return torch._grouped_mm(a, b, offs=offs)

    for _ in range(3):
        f()
    torch.cuda.synchronize()
    print("back-to-back", run(f, 0, 60))
    print("gap 2 ms", run(f, 0.002))
    print("gap 10 ms", run(f, 0.010))
    print("gap 50 ms", run(f, 0.050))
    print("back-to-back again", run(f, 0, 60))
    print("idle clock", clock())
    return 0


if __name__ == "__main__":
    sys.exit(main())
