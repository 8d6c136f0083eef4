#!/usr/bin/env python3
"""How do u streaming SMs share HBM while the other SMs are held? (issue #15, small-row launches)

A small-row cuBLAS GEMM is a round of CTAs that each stream their weights once. Its slowdown
beside held SMs depends on the bandwidth u streaming SMs reach together: a queue (each CTA at
r / (1 + n·r / R), r a lone CTA's rate, n the CTAs streaming, R the chip's) read nvjet's rounds
best (README of reports/calibration/contention/, "A lone CTA's demand"); mechanism 3's soft
minimum with a sharp knee is the model's. This measures the law directly: a streaming kernel of u CTAs, one per SM, each copying its own
slice of HBM into shared memory with `cp.async` (S copies of 16 bytes in flight per thread, so
S sets the lone CTA's rate as nvjet's TMA pipeline depth sets its own), beside k = 132 − u
holder CTAs that fill the other SMs (200 KiB of shared memory each, as contention_bench.py's
holders; the streaming CTA asks as much, so none shares an SM with a holder or another CTA),
and without holders (u CTAs placed by the block scheduler alone). Per case: the launch's time
from its first CTA's start to its last CTA's end on the global timer, the bandwidth, the CTAs'
durations, and the SMs they ran on (checked disjoint from the holders'). Each repetition reads
a fresh region of a 2 GiB buffer, so no CTA finds its slice in L2. To read a small-row GEMM's
rounds: `--launch-ctas N` launches N CTAs on the u free SMs (rounds, as nvjet's 128 CTAs),
`--prologue-us` makes each CTA wait before it streams (a tile's set-up), `--shared-kib` has each
CTA also read one operand all CTAs share (a GEMM's activations, from L2), `--same-slice` has all
CTAs read one slice (the L2-to-SM bandwidth of u SMs). Needs CuPy and a GPU.

  python3 calibrate/stream_share_probe.py --out stream-share.json
  python3 calibrate/stream_share_probe.py --launch-ctas 128 --mib-per-cta 0.5 --prologue-us 2 \
      --shared-kib 256 --stages 2,4 --out rounds.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from stream_spread_probe import STAMP_CTA

COMMON = STAMP_CTA + r"""
extern "C" __global__ void hold(int* count, volatile int* release, int* smids) {
  extern __shared__ int smem[];
  if (threadIdx.x == 0) {
    unsigned smid;
    asm("mov.u32 %0, %%smid;" : "=r"(smid));
    smids[blockIdx.x] = smid;
    smem[0] = smid;
    __threadfence();
    atomicAdd(count, 1);
    while (release[0] == 0) __nanosleep(1000);
  }
}
extern "C" __global__ void wait_count(volatile int* count, int target) {
  while (count[0] < target) __nanosleep(200);
}
extern "C" __global__ void set_flag(int* flag) { flag[0] = 1; }
extern "C" __global__ void stream(const int4* __restrict__ src, long long per_cta,
                                  unsigned long long* out, const int4* __restrict__ shared_src,
                                  long long shared_every, long long prologue_ns, int same) {
  extern __shared__ int4 buf[];
  unsigned long long t0, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now < t0 + prologue_ns);
  const int4* p = src + (same ? 0 : blockIdx.x * per_cta);  // same: every CTA one slice (L2)
  const long long iters = per_cta / blockDim.x;
  for (long long it = 0; it < iters; ++it) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(
        buf + (it % STAGES) * blockDim.x + threadIdx.x);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s),
                 "l"(p + it * blockDim.x + threadIdx.x));
    if (shared_every > 0 && it % shared_every == 0)  // an operand every CTA reads (from L2)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s),
                   "l"(shared_src + it / shared_every * blockDim.x + threadIdx.x));
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1));
  }
  asm volatile("cp.async.wait_all;");
  __syncthreads();
  stamp_cta(out, t0);
}
"""
THREADS = 1024
HOLD_SMEM = 200 * 1024
STREAM_SMEM = 200 * 1024  # ≥ STAGES·THREADS·16 for STAGES ≤ 12; one CTA per SM
BUFFER = 2 << 30
SMS = 132  # H100/H200 SXM


def run_case(cp: object, k: dict, held: int, ctas: int, per_cta: int, reps: int,
             region: list[int], extra: tuple) -> dict:
    """One (held, CTAs) case: `reps` launches after two warm-ups; the median by launch time.
    `extra`: (shared operand, its copies' spacing in iterations or 0, prologue in ns, 1 if every
    CTA reads the same slice)."""
    count = cp.zeros(1, dtype=cp.int32)
    flag = cp.zeros(1, dtype=cp.int32)
    hold_sm = cp.zeros(max(1, held), dtype=cp.int32)
    out = cp.zeros(3 * ctas, dtype=cp.uint64)
    s_hold, s_run, s_rel = (cp.cuda.Stream(non_blocking=True) for _ in range(3))
    rows = []
    for r in range(reps + 2):
        count.fill(0)
        flag.fill(0)
        cp.cuda.Device().synchronize()
        span = ctas * per_cta
        if region[0] + span > BUFFER:
            region[0] = 0
        src = k["buf"][region[0] // 4:]
        region[0] += span
        if held:
            k["hold"]((held,), (32,), (count, flag, hold_sm), shared_mem=HOLD_SMEM, stream=s_hold)
            k["wait"]((1,), (1,), (count, cp.int32(held)), stream=s_run)
        k["stream"]((ctas,), (THREADS,), (src, cp.int64(per_cta // 16), out, extra[0], cp.int64(extra[1]),
                                       cp.int64(extra[2]), cp.int32(extra[3])),
                    shared_mem=STREAM_SMEM, stream=s_run)
        done = s_run.record()
        s_rel.wait_event(done)
        k["set"]((1,), (1,), (flag,), stream=s_rel)
        cp.cuda.Device().synchronize()
        if r < 2:
            continue
        rec = out.get().reshape(ctas, 3).tolist()
        t0 = min(x[0] for x in rec)
        span_s = (max(x[1] for x in rec) - t0) * 1e-9
        held_sms = set(hold_sm.get().tolist()) if held else set()
        run_sms = [int(x[2]) for x in rec]
        rows.append({"span_s": span_s, "durs": [(x[1] - x[0]) * 1e-9 for x in rec],
                     "overlap": len(held_sms & set(run_sms)), "distinct": len(set(run_sms)),
                     "held_distinct": len(held_sms), "sms": run_sms})
    rows.sort(key=lambda x: x["span_s"])
    m = rows[len(rows) // 2]
    return {"held_sms": held, "ctas": ctas, "free_sms": SMS - held, "bytes_per_cta": per_cta,
            "span_s": m["span_s"], "span_s_all": [x["span_s"] for x in rows],
            "GBps": ctas * per_cta / m["span_s"] / 1e9,
            "cta_duration_s": {"min": min(m["durs"]), "median": statistics.median(m["durs"]),
                               "max": max(m["durs"])},
            "cta_GBps_median": per_cta / statistics.median(m["durs"]) / 1e9,
            "distinct_sms": m["distinct"], "held_distinct": m["held_distinct"],
            "overlap_with_holders": m["overlap"], "sms": m["sms"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--stages", default="1,2,4,8,12")
    ap.add_argument("--ctas", default="1,2,4,8,12,16,24,32,40,48,64,80,96,112,128,132")
    ap.add_argument("--mib-per-cta", type=float, default=4.0)
    ap.add_argument("--no-holders", action="store_true", help="also without holders")
    ap.add_argument("--launch-ctas", type=int, default=0,
                    help="launch this many CTAs on the u free SMs (rounds), not u")
    ap.add_argument("--prologue-us", type=float, default=0.0,
                    help="each CTA waits this long before it streams (a GEMM tile's set-up)")
    ap.add_argument("--same-slice", action="store_true",
                    help="every CTA reads the same slice: after its first touch, from L2")
    ap.add_argument("--shared-kib", type=int, default=0,
                    help="each CTA also reads this much of one operand all CTAs share (L2)")
    a = ap.parse_args()
    import cupy as cp
    dev = cp.cuda.runtime.getDeviceProperties(0)
    assert dev["multiProcessorCount"] == SMS, f"the probe assumes {SMS} SMs (H100/H200 SXM)"
    buf = cp.ones(BUFFER // 4, dtype=cp.int32)
    per = int(a.mib_per_cta * (1 << 20)) // (16 * THREADS) * (16 * THREADS)
    doc = {"gpu": dev["name"].decode(), "sms": SMS, "threads": THREADS,
           "hold_smem_bytes": HOLD_SMEM, "stream_smem_bytes": STREAM_SMEM,
           "bytes_per_cta": per, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": "python3 calibrate/stream_share_probe.py " + " ".join(
               f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if v not in (None, False)),
           "cases": []}
    region = [0]
    iters = per // (16 * THREADS)
    shared_every = 0
    if a.shared_kib:
        chunks = a.shared_kib * 1024 // (16 * THREADS)
        assert 0 < chunks <= iters and iters % chunks == 0, "shared KiB must divide the slice"
        shared_every = iters // chunks
    shared = cp.ones(max(1, a.shared_kib) * 256, dtype=cp.int32)
    extra = (shared, shared_every, int(a.prologue_us * 1e3), int(a.same_slice))
    doc.update({"launch_ctas": a.launch_ctas, "prologue_us": a.prologue_us,
                "shared_kib": a.shared_kib, "same_slice": a.same_slice})
    for stages in (int(x) for x in a.stages.split(",")):
        assert stages * THREADS * 16 <= STREAM_SMEM
        mod = cp.RawModule(code=COMMON, options=(f"-DSTAGES={stages}",))
        k = {"buf": buf, "hold": mod.get_function("hold"), "wait": mod.get_function("wait_count"),
             "set": mod.get_function("set_flag"), "stream": mod.get_function("stream")}
        k["hold"].max_dynamic_shared_size_bytes = HOLD_SMEM
        k["stream"].max_dynamic_shared_size_bytes = STREAM_SMEM
        for u in (int(x) for x in a.ctas.split(",")):
            ctas = a.launch_ctas or u
            for held in ([SMS - u, 0] if a.no_holders and u < SMS else [SMS - u]):
                r = run_case(cp, k, held, ctas, per, a.reps, region, extra)
                r["stages"] = stages
                r["in_flight_bytes_per_cta"] = stages * THREADS * 16
                doc["cases"].append(r)
                print(f"S={stages} u={u:3d} CTAs={ctas:3d} held={held:3d}: {r['span_s'] * 1e6:8.1f} µs "
                      f"{r['GBps']:7.0f} GB/s, CTA median {r['cta_GBps_median']:6.1f} GB/s "
                      f"(CTA {r['cta_duration_s']['min'] * 1e6:.1f}/"
                      f"{r['cta_duration_s']['max'] * 1e6:.1f} µs), SMs {r['distinct_sms']}, "
                      f"overlap {r['overlap_with_holders']}", flush=True)
    with open(a.out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
