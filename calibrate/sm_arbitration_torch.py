#!/usr/bin/env python3
"""Who gets an SM, with the step's real kernels (issue #15; sm_arbitration_probe.py's rules).

sm_arbitration_probe.py measures the block scheduler with spinning CTAs. This checks its rules
on the kernels the twin applies them to: a cuBLAS bf16 GEMM (nvjet: one CTA per SM, the register
file and shared memory full) and PyTorch's vectorized add (a grid of many short blocks), on a
normal- and a high-priority stream as FSDP2 creates them (`torch.cuda.Stream(priority=-1)`).
Each case launches X, then Y on another stream while X runs, under the PyTorch profiler; times
of Y's kernel relative to X's start come from the profiler's trace (µs). Needs PyTorch and a GPU.

  python3 calibrate/sm_arbitration_torch.py --out arbitration-torch.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

CASES = [  # (name, X, Y's kind, Y's priority)
    ("add_beside_gemm", "gemm", "add", "high"),
    ("add_after_add", "add", "add", "normal"),
    ("add_before_add_high", "add", "add", "high"),
    ("gemm_after_add", "add", "gemm", "normal"),
    ("gemm_after_add_high", "add", "gemm", "high"),
]


def kernels(trace_path: str) -> list[dict]:
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    ks = [e for e in events if e.get("cat") == "kernel"]
    return sorted(ks, key=lambda e: e["ts"])


def run_case(torch: object, ops: dict, x: str, y: str, priority: str, reps: int) -> dict:
    s_x = torch.cuda.Stream(priority=0)
    s_y = torch.cuda.Stream(priority=-1 if priority == "high" else 0)
    rows = []
    for r in range(reps + 1):
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            with torch.cuda.stream(s_x):
                ops[x]()
            with torch.cuda.stream(s_y):
                ops[y]()
            torch.cuda.synchronize()
        if r == 0:
            continue
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            prof.export_chrome_trace(path)
            ks = kernels(path)
        assert len(ks) == 2, f"expected two kernels, found {[k['name'] for k in ks]}"
        kx, ky = sorted(ks, key=lambda k: k["args"]["correlation"])  # X was launched first
        t0 = kx["ts"]
        rows.append({"x_end_us": kx["dur"], "y_start_us": ky["ts"] - t0,
                     "y_end_us": ky["ts"] + ky["dur"] - t0, "y_alone_us": ops[y + "_alone"],
                     "x_name": kx["name"][:80], "y_name": ky["name"][:80]})
    med = {k: statistics.median(r[k] for r in rows) for k in ("x_end_us", "y_start_us", "y_end_us")}
    return med | {"y_alone_us": rows[0]["y_alone_us"], "x_name": rows[0]["x_name"],
                  "y_name": rows[0]["y_name"], "reps": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import torch
    dev = torch.device("cuda")
    m = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    big = [torch.randn(1 << 29, device=dev, dtype=torch.bfloat16) for _ in range(3)]  # 1 GiB each
    ops = {"gemm": lambda: torch.mm(m, m), "add": lambda: torch.add(big[0], big[1], out=big[2])}
    for k in ("gemm", "add"):  # warm, then each alone (CUDA events)
        ops[k]()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            ops[k]()
        e1.record()
        torch.cuda.synchronize()
        ops[k + "_alone"] = e0.elapsed_time(e1) * 100  # µs per launch
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": f"python3 calibrate/sm_arbitration_torch.py --reps {a.reps} --out OUT",
           "alone_us": {k: ops[k + "_alone"] for k in ("gemm", "add")}, "cases": []}
    for name, x, y, priority in CASES:
        r = run_case(torch, ops, x, y, priority, a.reps)
        doc["cases"].append({"name": name, "x": x, "y": y, "y_priority": priority, **r})
        print(f"{name:22s} X {x:4s} ends {r['x_end_us']:8.1f} µs; Y {y:4s} ({priority:6s}) starts "
              f"{r['y_start_us']:8.1f}, ends {r['y_end_us']:8.1f} (alone {r['y_alone_us']:.1f})",
              flush=True)
    with open(a.out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
