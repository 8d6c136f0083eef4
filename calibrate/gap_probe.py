#!/usr/bin/env python3
"""What lets a grouped GEMM run faster after idle time (reports/calibration/grouped-gemm/): the
micro-step's expert up-projection (torch._grouped_mm, 96 experts of 1,360 rows, n 3,584, k 6,144)
timed by CUDA events around each call, back to back and with something between calls: a tiny
kernel (breaks any overlap of consecutive launches), a GPU sleep of 20 µs, 200 µs or 1 ms (the
GPU kept "busy" by one spinning thread), new output buffers each call, a 2 ms host-side gap.
With --mix: what else between calls gives the fast call — host gaps of 50 µs to 2 ms (how
long the GPU must be empty), a 2 ms bandwidth-bound kernel or a 2 ms cuBLAS GEMM between calls
(the GPU busy, but not with this kernel), for the grouped GEMM and for a cuBLAS 8192³ GEMM;
interleaved in cycles (the GPU state drifts over minutes); --json writes the rows.
Usage, on a GPU machine:  python3 calibrate/gap_probe.py [--reps 40] [--mix [--cycles 6]] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

E, N, K, M = 96, 3584, 6144, 1360
CYCLES_PER_US = 2000  # torch.cuda._sleep counts SM cycles: ~2 GHz


def variant(g: Callable[[], object], name: str, reps: int, between: Callable[[], object] | None = None,
            gap_s: float = 0.0, keep: bool = False) -> dict:
    """Median, min and max ms of `reps` calls of g, each timed by its own event pair."""
    kept, ts = [], []
    for _ in range(3):
        g()
    torch.cuda.synchronize()
    for _ in range(reps):
        if gap_s:
            torch.cuda.synchronize()
            time.sleep(gap_s)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        y = g()
        e.record()
        if keep:
            kept = (kept + [y])[-8:]
        if between is not None:
            between()
        ts.append((s, e))
    torch.cuda.synchronize()
    v = [x.elapsed_time(y) for x, y in ts]
    row = {"name": name, "median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v), "all_ms": v}
    print(f"{name:40s} median {row['median_ms']:7.3f} ms  min {row['min_ms']:7.3f}  max {row['max_ms']:7.3f}",
          flush=True)
    return row


def sized(make: Callable[[int], Callable[[], object]], target_ms: float) -> Callable[[], object]:
    """make(n) with n doubled until one call takes about target_ms."""
    n = 1
    while True:
        f = make(n)
        f()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        if s.elapsed_time(e) >= target_ms or n > 1 << 12:
            return f
        n *= 2


def mix(grouped: Callable[[], object], args: argparse.Namespace) -> int:
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    big = torch.randn(1 << 28, device="cuda", dtype=torch.bfloat16)  # 512 MiB

    def gemm() -> object:
        return x @ x

    def stream_ew(n: int) -> Callable[[], object]:
        return lambda: [big.neg_() for _ in range(n)]

    def gemm_loop(n: int) -> Callable[[], object]:
        y = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
        return lambda: [y @ y for _ in range(n)]

    ew2, gemm2 = sized(stream_ew, 2.0), sized(gemm_loop, 2.0)
    small = torch.zeros(1024, device="cuda")
    # Variants interleaved in cycles (the GPU's state drifts over minutes: a block of one variant
    # after another's would measure the drift); each block's first two calls are dropped.
    variants = {"back-to-back": {}, "host gap 50 us": {"gap_s": 50e-6}, "host gap 500 us": {"gap_s": 500e-6},
                "host gap 2000 us": {"gap_s": 2e-3}, "tiny add between": {"between": lambda: small.add_(1)},
                "2 ms elementwise (bandwidth-bound) between": {"between": ew2},
                "2 ms of 2048^3 cuBLAS GEMMs between": {"between": gemm2}}
    rows = []
    for kname, k in (("grouped_mm_up", grouped), ("gemm_8192", gemm)):
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.cycles):
            for v, kw in variants.items():
                times[v] += variant(k, f"{kname}: {v}", args.reps, **kw)["all_ms"][2:]
        for v, t in times.items():
            row = {"kernel": kname, "between": v, "median_ms": statistics.median(t), "min_ms": min(t),
                   "max_ms": max(t), "calls": len(t)}
            print(f"SUMMARY {kname:14s} {v:44s} median {row['median_ms']:7.3f} ms  min {row['min_ms']:7.3f}"
                  f"  calls {len(t)}", flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "reps": args.reps, "cycles": args.cycles, "rows": rows}, f, indent=1)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--mix", action="store_true", help="host gaps of 50 us - 2 ms, other kernels between")
    ap.add_argument("--json", help="write the rows (with --mix)")
    ap.add_argument("--cycles", type=int, default=6, help="--mix: rounds over the variants")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("gap_probe: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    a = torch.randn(E * M, K, device="cuda", dtype=torch.bfloat16) * 0.1
    b = torch.randn(E, K, N, device="cuda", dtype=torch.bfloat16) * 0.1
    offs = torch.arange(M, E * M + 1, M, device="cuda", dtype=torch.int32)
    small = torch.zeros(1024, device="cuda")

    def g() -> object:
        return torch._grouped_mm(a, b, offs=offs)

    def sleep_us(us: int) -> Callable[[], object]:
        return lambda: torch.cuda._sleep(us * CYCLES_PER_US)

    if args.mix:
        return mix(g, args)
    variant(g, "back-to-back", args.reps)
    variant(g, "tiny add between", args.reps, between=lambda: small.add_(1))
    for us in (20, 200, 1000):
        variant(g, f"GPU sleep {us} us between", args.reps, between=sleep_us(us))
    variant(g, "new outputs each call", args.reps, keep=True)
    variant(g, "host gap 2 ms", max(1, args.reps // 2), gap_s=0.002)
    variant(g, "back-to-back again", args.reps)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(args.reps):
        g()
    e.record()
    torch.cuda.synchronize()
    print(f"{'back-to-back, one event pair':40s} per call {s.elapsed_time(e) / args.reps:7.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
