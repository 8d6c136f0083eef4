#!/usr/bin/env python3
"""Device copies of 1 MiB to 512 MiB back to back (issue #15): where source and destination fit
L2 the copy runs from L2; the bandwidth per size says what L2 serves against HBM.
Usage: python3 calibrate/l2_copy_probe.py OUT.json"""
import torch, json, sys
p = torch.cuda.get_device_properties(0)
out = {"gpu": p.name, "L2_bytes": p.L2_cache_size, "sms": p.multi_processor_count, "copies": []}
for mib in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128, 512):
    n = mib << 20
    a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
    for _ in range(20): b.copy_(a)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = max(20, int(4096 / mib))
    torch.cuda.synchronize(); s.record()
    for _ in range(reps): b.copy_(a)
    e.record(); torch.cuda.synchronize()
    t = s.elapsed_time(e) / reps * 1e-3
    out["copies"].append({"MiB_each": mib, "s": t, "read_plus_write_GBps": 2 * n / t / 1e9})
json.dump(out, open(sys.argv[1], "w"), indent=1); print(json.dumps(out["copies"]))
