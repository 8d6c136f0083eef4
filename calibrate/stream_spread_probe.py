#!/usr/bin/env python3
"""When do CTAs that stream from HBM together finish? (issue #15, small-row launches)

The small-row cuBLAS launches' second round costs less than a lone CTA's time (file r: 0.17 of
the first round at 4 SMs held, where a lone round is ~0.35): late CTAs must start before the
saturated first round ends. This launches a plain streaming kernel — one CTA per SM (its shared
memory keeps a second CTA off), each CTA reading its own slice of a buffer in HBM with 16-byte
loads, eight in flight per thread — and records, per CTA, its SM (%smid) and its start and end
on the global timer. Cases: C CTAs of B bytes each, C from a lone few to two rounds of the SMs.
Per case: the launch's time, the CTAs' durations (min, median, max), when the first and last CTA
of the first wave end, and the bandwidth. Needs CuPy and a GPU.

  python3 calibrate/stream_spread_probe.py --out stream-spread.json
"""
from __future__ import annotations

import argparse
import json
import statistics

# Each CTA's start (t0), end and SM, as out[3·block …] (shared with stream_share_probe.py).
STAMP_CTA = r"""
__device__ void stamp_cta(unsigned long long* out, unsigned long long t0) {
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  unsigned smid;
  asm("mov.u32 %0, %%smid;" : "=r"(smid));
  if (threadIdx.x == 0) {
    out[3 * blockIdx.x] = t0;
    out[3 * blockIdx.x + 1] = t1;
    out[3 * blockIdx.x + 2] = smid;
  }
}
"""
KERNEL = STAMP_CTA + r"""
extern "C" __global__ void stream(const int4* __restrict__ src, long long per_cta,
                                  unsigned long long* out, int* sink) {
  extern __shared__ int smem[];
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const int4* p = src + blockIdx.x * per_cta;
  int acc = 0;
  const long long step = 8LL * blockDim.x;
  for (long long i = threadIdx.x; i < per_cta; i += step) {
    int4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = (i + u * blockDim.x < per_cta) ? __ldcs(p + i + u * blockDim.x) : make_int4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  smem[threadIdx.x] = acc;
  __syncthreads();
  stamp_cta(out, t0);
  if (acc == 0x7fffffff) sink[0] = smem[0];
}
"""
THREADS = 512
SMEM = 200 * 1024  # one CTA per SM


def run_case(cp: object, kern: object, buf: object, ctas: int, per_cta_bytes: int, reps: int) -> dict:
    per = per_cta_bytes // 16
    out = cp.zeros(3 * ctas, dtype=cp.uint64)
    sink = cp.zeros(1, dtype=cp.int32)
    times, records = [], []
    for r in range(reps + 2):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        kern((ctas,), (THREADS,), (buf, cp.int64(per), out, sink), shared_mem=SMEM)
        e.record()
        e.synchronize()
        if r >= 2:
            times.append(cp.cuda.get_elapsed_time(s, e) * 1e-3)
            records.append(out.get().reshape(ctas, 3).tolist())
    i = sorted(range(reps), key=lambda j: times[j])[reps // 2]  # the median launch
    rec = records[i]
    t0 = min(x[0] for x in rec)
    starts = [(x[0] - t0) * 1e-9 for x in rec]
    ends = [(x[1] - t0) * 1e-9 for x in rec]
    durs = [b - a for a, b in zip(starts, ends)]
    first = [j for j, st in enumerate(starts) if st < 1e-6]  # CTAs of the first wave
    return {"ctas": ctas, "bytes_per_cta": per_cta_bytes, "launch_s": times[i],
            "launch_s_all": times, "GBps": ctas * per_cta_bytes / times[i] / 1e9,
            "cta_duration_s": {"min": min(durs), "median": statistics.median(durs), "max": max(durs)},
            "first_wave": len(first),
            "first_wave_end_s": {"first": min(ends[j] for j in first), "last": max(ends[j] for j in first)},
            "last_end_s": max(ends),
            "ctas_start_end_sm": [[round(a * 1e9), round(b * 1e9), int(x[2])]
                                  for a, b, x in zip(starts, ends, rec)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--bytes-per-cta", default="262144,524288,1048576")
    ap.add_argument("--ctas", default="1,4,8,16,32,64,96,128,132,136,160,196,264")
    a = ap.parse_args()
    import cupy as cp
    kern = cp.RawKernel(KERNEL, "stream")
    kern.max_dynamic_shared_size_bytes = SMEM
    sizes = [int(x) for x in a.bytes_per_cta.split(",")]
    counts = [int(x) for x in a.ctas.split(",")]
    buf = cp.ones(max(sizes) * max(counts) // 4, dtype=cp.int32)
    dev = cp.cuda.runtime.getDeviceProperties(0)
    doc = {"gpu": dev["name"].decode(), "sms": dev["multiProcessorCount"], "threads": THREADS,
           "smem_bytes": SMEM, "cases": []}
    for b in sizes:
        for c in counts:
            r = run_case(cp, kern, buf, c, b, a.reps)
            doc["cases"].append(r)
            print(f"{c:4d} CTAs × {b >> 10:5d} KiB: {r['launch_s'] * 1e6:8.1f} µs {r['GBps']:7.0f} GB/s; "
                  f"CTA {r['cta_duration_s']['min'] * 1e6:.1f}/{r['cta_duration_s']['median'] * 1e6:.1f}/"
                  f"{r['cta_duration_s']['max'] * 1e6:.1f} µs; first wave ({r['first_wave']}) ends "
                  f"{r['first_wave_end_s']['first'] * 1e6:.1f}–{r['first_wave_end_s']['last'] * 1e6:.1f} µs",
                  flush=True)
    with open(a.out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
