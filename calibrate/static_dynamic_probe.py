#!/usr/bin/env python3
"""Static against dynamic tile lists in one persistent grouped GEMM, idle and beside held SMs.

JOB.md §6.5: SonicMoE's persistent expert GEMMs give each of 132 blocks a static list of tiles;
a dynamic scheduler (blocks take the next tile from an atomic counter) made single GEMMs 17–45%
faster with 40 SMs held by a dummy kernel, and 3–32% faster on an idle GPU (the layer 11%). The
twin's static lists carry equal work, so on an idle GPU it gives the two the same time (README,
"SonicMoE on one GH200"). What could make static lists lose on an idle GPU: SMs that run the
same tiles at different rates (a static list ends with its SM; a counter lets fast SMs take
more), tiles of unequal cost, blocks that start late. This measures it on a tensor-core
persistent grouped GEMM written in Triton (bf16, tl.dot → WGMMA on Hopper; 128×128×64 tiles,
four stages: 128 KiB of shared memory, one block per SM), the same kernel with either scheduler,
over the expert projections' shapes (contention_bench.py's rows per expert, balanced and
log-normal imbalanced), with k SMs held (holders as cta_end_probe.py's: one 200 KiB block per
SM, released by a kernel on the GEMM's stream after it ends). Every block stamps its SM, its
start and its end (global timer) and the tiles it ran: per case, both schedulers' times (CUDA
events, median of --reps), the spread of the blocks' ends, and the rates of the SMs (tiles per
µs of each block's busy time). torch._grouped_mm (CUTLASS's persistent grouped GEMM, a static
scheduler) is timed beside it at the same shapes. Needs PyTorch (with Triton), CuPy and a GPU.

  python3 calibrate/static_dynamic_probe.py --out static-dynamic.json [--held 0,40] [--reps 5]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time

from contention_bench import EXPERT_HIDDEN, EXPERTS_PER_GPU, HIDDEN, expert_rows  # model shapes

try:  # --help without Triton (the development machine)
    import triton
    import triton.language as tl
except ImportError:
    triton = None

SMS = 132  # H100/H200 SXM
BM, BN, BK, STAGES = 128, 128, 64, 4
HOLD_SMEM = 200 * 1024  # a holder fits only on an empty SM, and no GEMM block beside it

HOLDERS = r"""
extern "C" __global__ void hold(int* count, volatile int* flag) {
  if (threadIdx.x == 0) atomicAdd(count, 1);
  while (flag[0] == 0) __nanosleep(200);
}
extern "C" __global__ void release(int* flag) { atomicExch(flag, 1); }
"""

if triton is not None:
    @triton.jit
    def _stamp():
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                         is_pure=False, pack=1)

    @triton.jit
    def _smid():
        return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                         is_pure=False, pack=1)

    @triton.jit
    def _grouped_persistent(a, b, c, tile_e, tile_m0, tile_mend, tile_n0, total, counter, log,
                            K: tl.constexpr, N: tl.constexpr, DYNAMIC: tl.constexpr,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                            STAGES: tl.constexpr):
        pid = tl.program_id(0)
        t0 = _stamp()
        if DYNAMIC:
            t = tl.atomic_add(counter, 1)
        else:
            t = pid
        done = 0
        while t < total:
            e = tl.load(tile_e + t)
            m0 = tl.load(tile_m0 + t)
            mend = tl.load(tile_mend + t)
            n0 = tl.load(tile_n0 + t)
            rows = m0 + tl.arange(0, BM)
            cols = n0 + tl.arange(0, BN)
            ks = tl.arange(0, BK)
            pa = a + rows[:, None].to(tl.int64) * K + ks[None, :]
            pb = b + e.to(tl.int64) * K * N + ks[:, None] * N + cols[None, :]
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for _ in tl.range(0, K, BK, num_stages=STAGES):
                x = tl.load(pa, mask=rows[:, None] < mend, other=0.0)
                w = tl.load(pb)
                acc = tl.dot(x, w, acc)
                pa += BK
                pb += BK * N
            pc = c + rows[:, None].to(tl.int64) * N + cols[None, :]
            tl.store(pc, acc.to(tl.bfloat16), mask=rows[:, None] < mend)
            done += 1
            if DYNAMIC:
                t = tl.atomic_add(counter, 1)
            else:
                t += tl.num_programs(0)
        t1 = _stamp()
        tl.store(log + 4 * pid, t0)
        tl.store(log + 4 * pid + 1, t1)
        tl.store(log + 4 * pid + 2, _smid().to(tl.int64))
        tl.store(log + 4 * pid + 3, done.to(tl.int64))


def tile_table(counts: list[int], n: int) -> list[list[int]]:
    """Tiles in the order both schedulers hand them out: expert by expert, in groups of 8
    row tiles swept along the columns (row tiles fastest: a group shares its weight columns in
    L2), as CUTLASS's and QuACK's rasterizations do. Returns [expert], [row0], [row end], [col0]."""
    te, tm, tend, tn = [], [], [], []
    start = 0
    for e, rows in enumerate(counts):
        mt = math.ceil(rows / BM)
        for g0 in range(0, mt, 8):
            for j in range(n // BN):
                for i in range(g0, min(mt, g0 + 8)):
                    te.append(e)
                    tm.append(start + i * BM)
                    tend.append(start + rows)
                    tn.append(j * BN)
        start += rows
    return [te, tm, tend, tn]


def ends_summary(log: list[list[int]]) -> dict:
    """Blocks' start/end (µs from the first start), the spread of their ends and each SM's rate
    (tiles per µs of its block's busy time), from one run's log rows (t0, t1, smid, tiles)."""
    t_first = min(r[0] for r in log)
    ends = sorted((r[1] - t_first) / 1e3 for r in log)
    rates = [r[3] / ((r[1] - r[0]) / 1e3) for r in log if r[3] > 0 and r[1] > r[0]]
    mean_rate = statistics.fmean(rates)
    return {"last_end_us": ends[-1], "mean_end_us": statistics.fmean(ends),
            "first_end_us": ends[0], "late_starts": sum(1 for r in log if (r[0] - t_first) > 5e3),
            "rate_cv": statistics.pstdev(rates) / mean_rate,
            "rate_min_over_mean": min(rates) / mean_rate}


def run_case(torch: object, cp: object, holders: object, counts: list[int], n: int, k: int,
             held: list[int], reps: int) -> dict:
    """Both schedulers and torch._grouped_mm at one shape, at every held count."""
    tiles = tile_table(counts, n)
    tab = [torch.tensor(x, device="cuda", dtype=torch.int32) for x in tiles]
    total = len(tiles[0])
    a = torch.randn(sum(counts), k, device="cuda", dtype=torch.bfloat16) * 0.1
    b = torch.randn(len(counts), k, n, device="cuda", dtype=torch.bfloat16) * 0.1
    c = torch.empty(sum(counts), n, device="cuda", dtype=torch.bfloat16)
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    log = torch.zeros(SMS * 4, device="cuda", dtype=torch.int64)
    offs = torch.tensor(counts, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
    ref = torch._grouped_mm(a, b, offs=offs)

    smem = {}

    def ours(dynamic: bool):  # a launcher of our kernel with one scheduler
        def go() -> None:
            counter.zero_()
            ck = _grouped_persistent[(SMS,)](a, b, c, *tab, total, counter, log, K=k, N=n,
                                             DYNAMIC=dynamic, BM=BM, BN=BN, BK=BK, STAGES=STAGES,
                                             num_warps=8)
            smem[dynamic] = getattr(getattr(ck, "metadata", None), "shared", None)
        return go
    kernels = {"static": ours(False), "dynamic": ours(True),
               "grouped_mm": lambda: torch._grouped_mm(a, b, offs=offs)}
    for name in ("static", "dynamic"):
        kernels[name]()
        err = (c.float() - ref.float()).abs().max().item() / ref.float().abs().max().item()
        assert err < 2e-2, f"{name}: relative error {err:.3g} against torch._grouped_mm"
    hold, release = holders.get_function("hold"), holders.get_function("release")
    s_h, s_g = torch.cuda.Stream(), torch.cuda.Stream()
    p_h, p_g = (cp.cuda.ExternalStream(s.cuda_stream) for s in (s_h, s_g))
    count, flag = cp.zeros(1, dtype=cp.int32), cp.zeros(1, dtype=cp.int32)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = {"tiles": total, "smem_bytes": smem.get(False), "points": []}
    print(f"  {total} tiles; our kernel's shared memory: {smem.get(False)} bytes", flush=True)
    for h in held:
        for name, fn in kernels.items():
            times, logs = [], []
            for r in range(reps + 2):  # two warm-ups
                torch.cuda.synchronize()
                count.fill(0)
                flag.fill(0)
                torch.cuda.synchronize()
                if h:
                    hold((h,), (32,), (count, flag), shared_mem=HOLD_SMEM, stream=p_h)
                    while int(count.get()[0]) < h:  # resident before the GEMM arrives
                        pass
                with torch.cuda.stream(s_g):
                    e0.record()
                    fn()
                    e1.record()
                release((1,), (1,), (flag,), stream=p_g)
                torch.cuda.synchronize()
                if r >= 2:
                    times.append(e0.elapsed_time(e1))
                    if name != "grouped_mm":
                        logs.append(ends_summary(log.view(SMS, 4).tolist()))
            p = {"kernel": name, "held_sms": h, "ms": statistics.median(times), "reps_ms": times}
            if logs:
                p["blocks"] = {key: statistics.median(x[key] for x in logs) for key in logs[0]}
            out["points"].append(p)
            print(f"  held {h:3d} {name:10s} {p['ms']:8.3f} ms"
                  + (f"  ends: first {p['blocks']['first_end_us']:8.1f} mean "
                     f"{p['blocks']['mean_end_us']:8.1f} last {p['blocks']['last_end_us']:8.1f} µs;"
                     f" SM rate cv {p['blocks']['rate_cv']:.3f}" if logs else ""), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--held", default="0,40")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import cupy as cp
    import torch
    if triton is None:
        raise SystemExit("static_dynamic_probe.py: needs Triton (PyTorch's CUDA wheels bring it)")
    if not torch.cuda.is_available():
        raise SystemExit(3)
    assert torch.cuda.get_device_properties(0).multi_processor_count == SMS, f"assumes {SMS} SMs"
    holders = cp.RawModule(code=HOLDERS)
    holders.get_function("hold").max_dynamic_shared_size_bytes = HOLD_SMEM
    held = [int(x) for x in a.held.split(",")]
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__,
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": f"python3 calibrate/static_dynamic_probe.py --held {a.held} --reps {a.reps} "
                      "--out OUT",
           "tile": [BM, BN, BK], "stages": STAGES, "blocks": SMS,
           "fields": "per case and held count: each kernel's time (CUDA events, median of reps); "
                     "for ours, medians over reps of the blocks' first/mean/last end (µs from the "
                     "first block's start), blocks starting > 5 µs late, and the SMs' tiles per µs "
                     "(cv, min over mean)", "cases": []}
    for rows, imb in ((352, 0.0), (1376, 0.0), (1376, 0.3)):
        for proj, n, k in (("up", 2 * EXPERT_HIDDEN, HIDDEN), ("down", HIDDEN, EXPERT_HIDDEN)):
            counts = expert_rows(rows, EXPERTS_PER_GPU, imb)
            print(f"{proj} rows/expert {rows} cv {imb}: {sum(counts)} rows × {n} × {k}", flush=True)
            r = run_case(torch, cp, holders, counts, n, k, held, a.reps)
            doc["cases"].append({"proj": proj, "rows_per_expert": rows, "imbalance_cv": imb,
                                 "n": n, "k": k, "experts": EXPERTS_PER_GPU, **r})
    with open(a.out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
