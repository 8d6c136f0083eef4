#!/usr/bin/env python3
"""Who gets an SM when two kernels of different streams want it? (issue #15, SM arbitration)

The twin's SMs (hardware/gpu.hpp) are held by NCCL CTAs and persistent kernels and shared by
grid kernels; how a kernel that arrives while another fills the GPU is served decides whether
it waits or runs beside. This measures it: a first kernel X is resident (its first CTA raises a
flag), then a second kernel Y arrives on another stream (queued behind a one-thread kernel that
waits for the flag, so Y reaches the GPU after X has started). Both kernels' CTAs only spin for
a set time on the global timer and stamp their start, end and SM, so no memory traffic or
clock effect enters; each kernel's footprint per CTA (threads, shared memory) sets how many of
its CTAs fit beside the other's on an SM. Y's stream runs at normal or at the highest priority
(FSDP2's all-gather and reduce-scatter streams are created at high priority). Per case, times
relative to X's first CTA: X's last end, Y's first start, Y's last end, and Y's CTAs that
started before X's last end. Needs CuPy and a GPU.

  python3 calibrate/sm_arbitration_probe.py --out arbitration.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from stream_spread_probe import STAMP_CTA

KERNELS = STAMP_CTA + r"""
extern "C" __global__ void spin(unsigned long long* out, long long spin_ns, int* started) {
  unsigned long long t0, now;  // the launch's dynamic shared memory only sets the occupancy
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if (threadIdx.x == 0 && blockIdx.x == 0) atomicExch(started, 1);
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now < t0 + spin_ns);
  stamp_cta(out, t0);
}
extern "C" __global__ void wait_flag(volatile int* started) {
  while (started[0] == 0) __nanosleep(100);
}
"""
SMS = 132  # H100/H200 SXM

# (name, X, Y): a kernel is (CTAs, threads, shared KiB, spin µs). 200 KiB or 1,024 threads: one
# CTA per SM (contention_bench.py's holders, a GEMM's CTA); 544 threads and 80 KiB: an NCCL CTA
# of the Simple protocol (the twin's `nccl.cta_threads`); 256 threads, no shared memory: an
# elementwise kernel's blocks (8 per SM by threads).
CASES = [
    ("holder_then_grid", (SMS, 1024, 200, 1000), (SMS * 8, 256, 0, 10)),
    ("light_holder_then_grid", (SMS, 128, 32, 1000), (SMS * 8, 256, 0, 10)),
    ("gemm_then_nccl", (SMS, 384, 200, 1000), (16, 544, 80, 100)),
    ("grid_then_holder", (SMS * 8 * 8, 256, 0, 50), (SMS, 1024, 200, 100)),
    ("grid_then_nccl", (SMS * 8 * 8, 256, 0, 50), (16, 544, 80, 100)),
    ("grid_then_grid", (SMS * 8 * 8, 256, 0, 50), (SMS * 8, 256, 0, 10)),
]
# Beside 16 NCCL-like CTAs resident first (2 ms): X's CTAs (two per SM fill its 2,048 threads)
# fit only once beside each NCCL-like one, so 16 wait; Y's blocks fit only beside the NCCL-like
# CTAs (480 threads left there). Does Y wait behind X's pending CTAs (head-of-line) or run there
# at once?
BESIDE_NCCL = ("x_pending_then_grid", (2 * SMS, 1024, 100, 1000), (SMS * 8, 256, 0, 10),
               (16, 544, 80, 2000))


def launch(cp: object, k: object, spec: tuple, out: object, started: object, stream: object) -> None:
    ctas, threads, smem_kib, spin_us = spec
    k((ctas,), (threads,), (out, cp.int64(int(spin_us * 1e3)), started),
      shared_mem=smem_kib * 1024, stream=stream)


def run_case(cp: object, k: object, wait: object, x: tuple, y: tuple, priority: str,
             reps: int, first: tuple | None = None) -> dict:
    """`first`: a kernel made resident before X (on its own stream), or None."""
    lo, hi = 0, -100  # CUDA clamps a priority to the device's range: 0 lowest, -100 the highest
    s_x = cp.cuda.Stream(non_blocking=True)
    prio = hi if priority == "high" else lo
    try:
        s_y = cp.cuda.Stream(non_blocking=True, priority=prio)
    except TypeError:  # CuPy before priorities: the runtime's own call
        s_y = cp.cuda.ExternalStream(cp.cuda.runtime.streamCreateWithPriority(1, prio))
    out_x, out_y = cp.zeros(3 * x[0], dtype=cp.uint64), cp.zeros(3 * y[0], dtype=cp.uint64)
    started = cp.zeros(1, dtype=cp.int32)
    s_first = cp.cuda.Stream(non_blocking=True)
    out_first, first_started = (cp.zeros(3 * first[0], dtype=cp.uint64),
                                cp.zeros(1, dtype=cp.int32)) if first else (None, None)
    rows = []
    for r in range(reps + 2):
        started.fill(0)
        cp.cuda.Device().synchronize()
        wait((1,), (1,), (started,), stream=s_y)  # resident before X fills the GPU
        if first:
            first_started.fill(0)
            launch(cp, k, first, out_first, first_started, s_first)
            wait((1,), (1,), (first_started,), stream=s_x)
        launch(cp, k, x, out_x, started, s_x)
        launch(cp, k, y, out_y, started, s_y)
        cp.cuda.Device().synchronize()
        if r < 2:
            continue
        rx, ry = out_x.get().reshape(-1, 3), out_y.get().reshape(-1, 3)
        t0 = int(rx[:, 0].min())
        x_end = int(rx[:, 1].max()) - t0
        y_starts = sorted(int(v) - t0 for v in ry[:, 0])
        rows.append({"x_end_us": x_end / 1e3, "y_first_start_us": y_starts[0] / 1e3,
                     "y_last_start_us": y_starts[-1] / 1e3,
                     "y_end_us": (int(ry[:, 1].max()) - t0) / 1e3,
                     "y_ctas_started_before_x_end": sum(1 for s in y_starts if s < x_end),
                     "y_sms": len(set(int(v) for v in ry[:, 2]))})
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]} | {"reps": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import cupy as cp
    dev = cp.cuda.runtime.getDeviceProperties(0)
    assert dev["multiProcessorCount"] == SMS, f"the probe assumes {SMS} SMs (H100/H200 SXM)"
    mod = cp.RawModule(code=KERNELS)
    k, wait = mod.get_function("spin"), mod.get_function("wait_flag")
    k.max_dynamic_shared_size_bytes = 200 * 1024
    doc = {"gpu": dev["name"].decode(), "sms": SMS,
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": f"python3 calibrate/sm_arbitration_probe.py --reps {a.reps} --out OUT",
           "kernel_fields": ["ctas", "threads", "shared_KiB", "spin_us"], "cases": []}
    for name, x, y, *first in CASES + [BESIDE_NCCL]:
        for priority in ("normal", "high"):
            r = run_case(cp, k, wait, x, y, priority, a.reps, first[0] if first else None)
            doc["cases"].append({"name": name, "x": x, "y": y, "y_priority": priority,
                                 "resident_first": first[0] if first else None, **r})
            print(f"{name:24s} Y {priority:6s}: X ends {r['x_end_us']:8.1f} µs, Y starts "
                  f"{r['y_first_start_us']:8.1f}…{r['y_last_start_us']:8.1f}, ends "
                  f"{r['y_end_us']:8.1f}; Y CTAs before X's end {r['y_ctas_started_before_x_end']}"
                  f"/{y[0]}, on {r['y_sms']} SMs", flush=True)
    with open(a.out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
