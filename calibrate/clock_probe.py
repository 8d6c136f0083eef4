#!/usr/bin/env python3
"""One grouped GEMM (torch._grouped_mm, the micro-step's expert up-projection: 96 experts of
1,360 rows, n 3,584, k 6,144) timed back to back and after idle gaps of 2, 10 and 50 ms: a GPU
kept busy runs its GEMMs at its power-capped clock, one that idled between them faster
(reports/calibration/grouped-gemm/README.md). Usage, on a GPU machine:
  python3 calibrate/clock_probe.py
"""
import time, torch, statistics, subprocess, threading
E, n, k, m = 96, 3584, 6144, 1360
a = torch.randn(E*m, k, device="cuda", dtype=torch.bfloat16) * 0.1
b = torch.randn(E, k, n, device="cuda", dtype=torch.bfloat16) * 0.1
offs = torch.arange(m, E*m+1, m, device="cuda", dtype=torch.int32)
f = lambda: torch._grouped_mm(a, b, offs=offs)
def clock():
    return subprocess.run(["nvidia-smi","--query-gpu=clocks.sm,power.draw","--format=csv,noheader"],capture_output=True,text=True).stdout.strip()
def run(gap_s, reps=20):
    ts=[]; clks=[]
    for i in range(reps):
        if gap_s: torch.cuda.synchronize(); time.sleep(gap_s)
        s,e=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record()
        if not gap_s and i == reps//2: clks.append(clock())
        ts.append((s,e))
    torch.cuda.synchronize()
    return statistics.median(x.elapsed_time(y) for x,y in ts), clks
for _ in range(3): f()
torch.cuda.synchronize()
print("back-to-back", run(0, 60))
print("gap 2 ms", run(0.002))
print("gap 10 ms", run(0.010))
print("gap 50 ms", run(0.050))
print("back-to-back again", run(0, 60))
print("idle clock", clock())
