#!/usr/bin/env python3
"""What a written L2 costs the next GEMM (issue #15): small-row cuBLAS GEMMs timed with CUDA
events after (a) nothing but their own previous launch, (b) a fill_ of B MiB (L2 left dirty),
(c) a read of B MiB (L2 left clean, holding other data), outside the events.
Usage: python3 calibrate/dirty_l2_probe.py OUT.json"""
import json, statistics, sys
import torch

BF16 = torch.bfloat16
CLOCK_HZ = 1.98e9  # the sleep kernel counts SM cycles
shapes = [(32, 14336, 4096), (32, 2048, 7168), (192, 4096, 4096), (128, 3584, 6144), (8192, 8192, 8192)]
buf = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
sink = torch.empty(1, dtype=torch.int64, device="cuda")
variants = [("none", 0)] + [(f"{op}_{mib}MiB", (op, mib)) for op in ("write", "read") for mib in (32, 64, 256)]


def pre(v):
    if v == 0:
        return
    op, mib = v
    part = buf[: mib << 20]
    if op == "write":
        part.fill_(1)
    else:
        sink.copy_(part.view(torch.int64).sum().view(1))


out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": []}
for m, n, k in shapes:
    a = torch.randn(m, k, device="cuda", dtype=BF16)
    b = torch.randn(k, n, device="cuda", dtype=BF16)
    c = torch.empty(m, n, device="cuda", dtype=BF16)
    for _ in range(5):
        torch.mm(a, b, out=c)
    rec = {"shape": [m, n, k], "median_us": {}}
    for cycle in range(6):  # variants interleaved: the GPU's state drifts over seconds
        for name, v in variants:
            ts = []
            # A GPU sleep first, so that the host has enqueued every launch before the GPU reaches
            # them (else the host's launch gaps are timed as kernel time; contention_bench.py).
            torch.cuda._sleep(int(3e-3 * CLOCK_HZ))
            for _ in range(10):
                pre(v)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); torch.mm(a, b, out=c); e.record()
                ts.append((s, e))
            torch.cuda.synchronize()
            rec["median_us"].setdefault(name, []).extend(s.elapsed_time(e) * 1e3 for s, e in ts[2:])
    rec["median_us"] = {k: statistics.median(v) for k, v in rec["median_us"].items()}
    out["cases"].append(rec)
    print(rec, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
