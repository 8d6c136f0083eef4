#!/usr/bin/env python3
"""What a written L2 costs the next GEMM (issue #15).

Small-row cuBLAS GEMMs timed with CUDA events after (a) nothing but their own previous launch,
(b) a fill_ of B MiB (L2 left full of dirty lines), (c) a read of B MiB (L2 left clean, holding
other data), the extra work outside the events. Variants are interleaved in cycles (the GPU's
state drifts over seconds) and a GPU sleep leads each block, so that the host has enqueued every
launch before the GPU reaches them.
"""
from __future__ import annotations

import argparse
import json
import statistics

SHAPES = [(32, 14336, 4096), (32, 2048, 7168), (192, 4096, 4096), (128, 3584, 6144), (8192, 8192, 8192)]
CLOCK_HZ = 1.98e9  # the sleep kernel counts SM cycles
VARIANTS = [("none", None)] + [(f"{op}_{mib}MiB", (op, mib)) for op in ("write", "read") for mib in (32, 64, 256)]


def run(out_path: str, cycles: int, block: int) -> None:
    import torch
    bf16 = torch.bfloat16
    buf = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    sink = torch.empty(1, dtype=torch.int64, device="cuda")

    def before(v: tuple[str, int] | None) -> None:
        if v is None:
            return
        op, mib = v
        part = buf[: mib << 20]
        if op == "write":
            part.fill_(1)
        else:
            sink.copy_(part.view(torch.int64).sum().view(1))

    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": []}
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=bf16)
        b = torch.randn(k, n, device="cuda", dtype=bf16)
        c = torch.empty(m, n, device="cuda", dtype=bf16)
        for _ in range(5):
            torch.mm(a, b, out=c)
        times: dict[str, list[float]] = {}
        for _ in range(cycles):
            for name, v in VARIANTS:
                evs = []
                torch.cuda._sleep(int(3e-3 * CLOCK_HZ))
                for _ in range(block):
                    before(v)
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    torch.mm(a, b, out=c)
                    e.record()
                    evs.append((s, e))
                torch.cuda.synchronize()
                times.setdefault(name, []).extend(s.elapsed_time(e) * 1e3 for s, e in evs[2:])
        rec = {"shape": [m, n, k], "median_us": {name: statistics.median(t) for name, t in times.items()}}
        out["cases"].append(rec)
        print(rec, flush=True)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="JSON to write")
    ap.add_argument("--cycles", type=int, default=6, help="interleaved cycles over the variants")
    ap.add_argument("--block", type=int, default=10, help="launches per variant and cycle (the first two dropped)")
    a = ap.parse_args()
    run(a.out, a.cycles, a.block)


if __name__ == "__main__":
    main()
