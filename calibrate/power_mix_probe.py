#!/usr/bin/env python3
"""How much a long GEMM slows under the power cap when other work shares the GPU's time (issue
#15; reports/calibration/grouped-gemm/README.md, "The power cap's slow controller").

A step-level power model would predict a tensor-core kernel's clock from the mix of work around
it (each class's power, measured by power_transient_probe.py --classes). This is its test set: a
cuBLAS 65,536 × 3,584 × 6,144 GEMM (~3.7 ms fresh, ×1.13 back to back) alternated with other work
of r times its length — an empty GPU (host sleep), a bandwidth-bound kernel, or a device-to-host
copy — for a few seconds after an idle GPU, the GEMM's calls timed by CUDA events. Per mix: the
median GEMM time over the second half (the controller's steady state) and its ratio to the fresh
time. Needs PyTorch and a GPU.

  python3 calibrate/power_mix_probe.py --out power-mix.json [--seconds 2.5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

from power_transient_probe import gpu_modules, record_calls, sized, timed

RATIOS = (0.5, 1.0, 2.0)


def run_mix(torch: object, gemm: Callable[[], object], other: Callable[[], object] | None,
            sleep_s: float, seconds: float) -> list[float]:
    """The GEMM then the other work (or a host sleep of sleep_s), over and over for `seconds`
    after 1.5 s of empty GPU; every GEMM call's ms."""
    torch.cuda.synchronize()
    time.sleep(1.5)
    ev, t0 = [], time.time()
    while time.time() - t0 < seconds:
        ev += record_calls(torch, gemm, 1)
        if other is not None:
            other()
        else:
            ev[-1][1].synchronize()
            time.sleep(sleep_s)
        if len(ev) % 8 == 0:
            ev[-1][1].synchronize()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in ev]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=2.5, help="per mix")
    a = ap.parse_args()
    mods = gpu_modules("power_mix_probe")
    if mods is None:
        return 3
    torch = mods[0]
    bf = torch.bfloat16
    x = torch.randn(65536, 6144, device="cuda", dtype=bf) * 0.1
    w = torch.randn(6144, 3584, device="cuda", dtype=bf) * 0.1
    big = torch.randn(1 << 26, device="cuda", dtype=bf)  # 128 MiB: ~60 µs a pass
    host = torch.empty(1 << 26, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(1 << 26, dtype=torch.uint8, device="cuda")

    def gemm() -> object:
        return x @ w
    gemm()
    torch.cuda.synchronize()
    time.sleep(1.5)
    fresh = statistics.median(timed(torch, gemm) for _ in range(3))
    rows = [{"other": "none", "ratio": 0.0, "ms": run_mix(torch, gemm, None, 0.0, a.seconds)}]
    # A host sleep after a synchronize, not an empty GPU loop: what the GPU does then is nothing.
    for r in RATIOS:
        rows.append({"other": "empty GPU", "ratio": r,
                     "ms": run_mix(torch, gemm, None, r * fresh * 1e-3, a.seconds)})
    makers = {"bandwidth-bound kernel": lambda n: lambda: [big.neg_() for _ in range(n)],
              "device-to-host copy": lambda n: lambda: [host.copy_(dev, non_blocking=True) for _ in range(n)]}
    for name, make in makers.items():
        for r in RATIOS:
            other = sized(torch, make, r * fresh)
            rows.append({"other": name, "ratio": r, "other_ms": timed(torch, other),
                         "ms": run_mix(torch, gemm, other, 0.0, a.seconds)})
    for row in rows:
        half = row["ms"][len(row["ms"]) // 2:]
        row["steady_ms"] = statistics.median(half)
        row["slowdown"] = row["steady_ms"] / fresh
        print(f"{row['other']:24s} r {row['ratio']:3.1f}: {len(row['ms']):4d} GEMMs, steady "
              f"{row['steady_ms']:.3f} ms, x{row['slowdown']:.3f} of fresh {fresh:.3f}", flush=True)
    with open(a.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "fresh_ms": fresh, "seconds": a.seconds, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
