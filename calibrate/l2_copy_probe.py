#!/usr/bin/env python3
"""Device copies of 1 MiB to 512 MiB back to back (issue #15).

Where source and destination fit L2 the copy runs from L2; the bandwidth per size says what L2
serves against HBM (below ~8 MiB a copy is bound by its launch, ~5.5 µs on the H200).
"""
from __future__ import annotations

import argparse
import json

SIZES_MIB = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128, 512)


def run(out_path: str) -> None:
    import torch
    p = torch.cuda.get_device_properties(0)
    out = {"gpu": p.name, "L2_bytes": p.L2_cache_size, "sms": p.multi_processor_count, "copies": []}
    for mib in SIZES_MIB:
        n = mib << 20
        a = torch.empty(n, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        for _ in range(20):
            b.copy_(a)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        reps = max(20, 4096 // mib)
        torch.cuda.synchronize()
        s.record()
        for _ in range(reps):
            b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        t = s.elapsed_time(e) / reps * 1e-3
        out["copies"].append({"MiB_each": mib, "s": t, "read_plus_write_GBps": 2 * n / t / 1e9})
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out["copies"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="JSON to write")
    run(ap.parse_args().out)


if __name__ == "__main__":
    main()
