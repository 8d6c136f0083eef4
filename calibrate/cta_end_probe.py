#!/usr/bin/env python3
"""When does each CTA of a cuBLAS GEMM end? (issue #15: the small-row launches' late rounds)

The small-row GEMMs (32–192 rows) slow beside held SMs far less than whole rounds of their
CTAs predict: a second round of 4 CTAs behind a full one of 124 costs 0.16–0.20 of the full
round where a lone CTA takes 0.35–0.45 of it (reports/calibration/contention/, files r, y). Late
CTAs can only start early if the full round's CTAs end at spread times. This measures the
spread on nvjet's own kernels: the GEMM runs (PyTorch, cuBLAS), and right behind it, on another
stream, a probe kernel of one CTA per SM (200 KiB of shared memory: it fits only on an empty SM)
whose CTAs stamp their SM and the global timer as they start and then hold the SM (released 5 µs
after the GEMM's stream passes a flag just before the GEMM, so it arrives just after). Blocks are
served in arrival order (file sm-arbitration), so every probe CTA lands on an SM the moment the
GEMM's last CTA there exits: the probe's start times are the GEMM's CTA end times, SM by SM.
With k SMs held first (holders as NCCL's CTAs, contention_bench.py's shape), the same shows the
last round's ends. Per case and k: the GEMM's time (CUDA events) and every SM's stamp relative to
the last one, five repetitions. Needs PyTorch, CuPy and a GPU.

  python3 calibrate/cta_end_probe.py --out cta-ends.json [--held 0,4,64] [--reps 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

KERNELS = r"""
extern "C" __global__ void hold(long long spin_ns, int* count) {
  unsigned long long t0, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if (threadIdx.x == 0) atomicAdd(count, 1);
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now < t0 + spin_ns);
}
extern "C" __global__ void go(long long spin_ns, int* flag) {  // then the GEMM, on its stream
  unsigned long long t0, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now < t0 + spin_ns);
  atomicExch(flag, 1);
}
extern "C" __global__ void wait_go(volatile int* flag, long long extra_ns) {  // then the probe
  while (flag[0] == 0) __nanosleep(100);
  unsigned long long t0, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now < t0 + extra_ns);
}
extern "C" __global__ void land(unsigned long long* out, long long spin_ns) {
  unsigned long long t0, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  unsigned smid;
  asm("mov.u32 %0, %%smid;" : "=r"(smid));
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = t0;
    out[2 * blockIdx.x + 1] = smid;
  }
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now < t0 + spin_ns);
}
"""
SMS = 132  # H100/H200 SXM
SMEM = 200 * 1024  # one CTA per SM: no GEMM CTA fits beside it, nor it beside one
HIDDEN, EXPERT_HIDDEN = 6144, 1792  # contention_bench.py's model shapes (its HIDDEN, EXPERT_HIDDEN)

# (name, m, n, k): file p's small-row launches (weights n × k) at four row counts, the fitted
# 128-row expert projections and the 16,384-token router (file a), one large GEMM, and two
# launches of 1.7 tiles per CTA (`--only square_rows,router_20k`).
CASES = ([("small_rows", m, n, k) for n, k in ((8192, 4096), (2048, 7168), (4096, 4096), (14336, 4096))
          for m in (32, 64, 128, 192)]
         + [("expert_up", 128, 2 * EXPERT_HIDDEN, HIDDEN), ("expert_down", 128, HIDDEN, EXPERT_HIDDEN),
            ("router", 16384, 384, HIDDEN), ("square", 8192, 8192, 8192)]
         # 1.7 tiles per CTA (file o's 224 tiles on 132 CTAs, the 20,480-token router's 240): ×1.0
         # up to 8 SMs held, ×1.44 at 12–24, ×1.84 from 32, which no list order gives.
         + [("square_rows", 1792, 4096, 1792), ("router_20k", 20480, 384, HIDDEN)]
         # How unevenly a full round ends, kernel by kernel (`--only spread --held 0`): nvjet's
         # other small-row kernels — file l's expert rows (clusters of 4, split-K), file
         # lone-wide's 160- and 192-row tiles, file y's 1×2 pairs at 14,336 columns. One spread
         # for all (0.5–18% of file p's launches) was tried and not kept (README of
         # reports/calibration/contention/, "A lone CTA per nvjet kernel").
         + [("spread", m, 2 * EXPERT_HIDDEN, HIDDEN) for m in (64, 96, 192)]
         + [("spread", m, HIDDEN, EXPERT_HIDDEN) for m in (64, 96, 192)]
         + [("spread", m, n, k) for m, n in ((160, 4096), (192, 2048), (192, 4096)) for k in (2048, 3072)]
         + [("spread", m, 14336, k) for m in (96, 128) for k in (1024, 2048)]
         # What sets a launch's spread (`--only spread_grid --held 0`): the 160- and 192-row
         # launches file p still misses, over columns and k, one kernel at several of each.
         + [("spread_grid", m, n, k) for m in (160, 192) for n in (2048, 4096, 6144)
            for k in (1024, 2048, 4096, 6144)])
# torch._grouped_mm (CUTLASS's persistent grouped GEMM: static tile lists) over the GPU's 96
# experts at contention_bench.py's rows per expert (`--only grouped --held 0`): how unevenly a
# static list's blocks end on an idle GPU, what a dynamic scheduler could take back
# (static_dynamic_probe.py). (name, rows per expert, n, k); m in the output is the total rows.
GROUPED = [("grouped", rows, n, k) for rows in (352, 1376)
           for n, k in ((2 * EXPERT_HIDDEN, HIDDEN), (HIDDEN, EXPERT_HIDDEN))]
EXPERTS_PER_GPU = 96


def run(torch: object, cp: object, mod: object, gemm: object, held: int, reps: int,
        trace: bool, land_ns: int = 1_000_000) -> dict:
    hold, land = mod.get_function("hold"), mod.get_function("land")
    go, wait_go = mod.get_function("go"), mod.get_function("wait_go")
    s_h, s_g, s_p = (torch.cuda.Stream() for _ in range(3))
    p_h, p_g, p_p = (cp.cuda.ExternalStream(s.cuda_stream) for s in (s_h, s_g, s_p))
    count, flag = cp.zeros(1, dtype=cp.int32), cp.zeros(1, dtype=cp.int32)
    out = cp.zeros(2 * (SMS - held), dtype=cp.uint64)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def one() -> None:
        torch.cuda.synchronize()
        count.fill(0)
        flag.fill(0)
        out.fill(0)
        torch.cuda.synchronize()
        if held:
            hold((held,), (1024,), (cp.int64(5_000_000), count), shared_mem=SMEM, stream=p_h)
            while int(count.get()[0]) < held:  # resident before the GEMM arrives
                pass
        # The probe must reach the GPU after the GEMM's CTAs are dispatched and before the first
        # ends: the GEMM's stream releases it 2 ms on (all launches enqueued by then), and the
        # probe's follows 5 µs after that release.
        go((1,), (1,), (cp.int64(2_000_000), flag), stream=p_g)
        with torch.cuda.stream(s_g):
            e0.record()
            gemm()
            e1.record()
        wait_go((1,), (1,), (flag, cp.int64(5_000)), stream=p_p)
        land((SMS - held,), (32,), (out, cp.int64(land_ns)), shared_mem=SMEM, stream=p_p)
        torch.cuda.synchronize()

    rows = []
    for r in range(reps + 2):
        one()
        if r < 2:
            continue
        o = out.get().reshape(-1, 2)
        t_last = int(o[:, 0].max())
        rows.append({"gemm_us": e0.elapsed_time(e1) * 1e3,
                     "ends_us": [round((int(t) - t_last) / 1e3, 3) for t in o[:, 0]],
                     "sms": [int(s) for s in o[:, 1]]})
    if trace:  # once more under the profiler: the kernels' order on the GPU
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            one()
        ks = sorted((e for e in prof.events() if "CUDA" in str(e.device_type)),
                    key=lambda e: e.time_range.start)
        for e in ks:
            print(f"    {e.name[:60]:60s} {e.time_range.start - ks[0].time_range.start:9.1f} … "
                  f"{e.time_range.end - ks[0].time_range.start:9.1f} µs")
    assert all(len(set(r["sms"])) == SMS - held for r in rows), "a probe CTA shared an SM"
    return {"held_sms": held, "gemm_us": statistics.median(r["gemm_us"] for r in rows), "reps": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--held", default="0,4,64")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="", help="case names to run (comma-separated; default: all)")
    ap.add_argument("--trace", action="store_true", help="print each run's kernels (profiler)")
    a = ap.parse_args()
    import cupy as cp
    import torch
    assert torch.cuda.get_device_properties(0).multi_processor_count == SMS, f"assumes {SMS} SMs"
    mod = cp.RawModule(code=KERNELS)
    for f in ("hold", "land"):
        mod.get_function(f).max_dynamic_shared_size_bytes = SMEM
    held = [int(x) for x in a.held.split(",")]
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cublas": torch.backends.cuda.preferred_blas_library().name if hasattr(
               torch.backends.cuda, "preferred_blas_library") else "",
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": f"python3 calibrate/cta_end_probe.py --held {a.held} --reps {a.reps} --out OUT",
           "fields": "per repetition: gemm_us (CUDA events), per free SM its probe CTA's start "
                     "relative to the last one (µs) and its SM", "cases": []}
    only = set(a.only.split(",")) - {""}
    for name, m, n, k in CASES + GROUPED:
        if only and name not in only:
            continue
        if name == "grouped":
            m *= EXPERTS_PER_GPU
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(EXPERTS_PER_GPU, k, n, device="cuda", dtype=torch.bfloat16)
            offs = torch.arange(1, EXPERTS_PER_GPU + 1, device="cuda", dtype=torch.int32) * (
                m // EXPERTS_PER_GPU)
            gemm = lambda: torch._grouped_mm(x, w, offs=offs)  # noqa: E731
        else:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            gemm = lambda: torch.mm(x, w, out=c)  # noqa: E731 — contention_bench.py's gemm_case
        for _ in range(3):
            gemm()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            gemm()
            torch.cuda.synchronize()
        kernel = [e.name for e in prof.events() if "CUDA" in str(e.device_type)][:1]
        print(f"{name} {m}×{n}×{k}: {kernel}", flush=True)
        for h in held:
            # A probe CTA holds its SM until every other has landed (none may land twice):
            # longer than the ends' spread, which for the ~5–15 ms grouped GEMMs may pass 1 ms.
            r = run(torch, cp, mod, gemm, h, a.reps, a.trace,
                    30_000_000 if name == "grouped" else 1_000_000)
            doc["cases"].append({"name": name, "shape": {"m": m, "n": n, "k": k},
                                 "kernel": kernel[0][:120] if kernel else "", **r})
            ranked = [sorted(rep["ends_us"]) for rep in r["reps"]]
            ends = [statistics.median(e[i] for e in ranked) for i in range(SMS - h)]
            q = [ends[int(f * (len(ends) - 1))] for f in (0.05, 0.25, 0.5, 0.75)]
            print(f"{name:11s} {m:6d}×{n:5d}×{k:5d} held {h:3d}: {r['gemm_us']:7.1f} µs; ends before "
                  f"the last: 5% {q[0]:7.1f}  25% {q[1]:7.1f}  50% {q[2]:7.1f}  75% {q[3]:7.1f}",
                  flush=True)
    with open(a.out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
