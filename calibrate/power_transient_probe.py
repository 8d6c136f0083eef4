#!/usr/bin/env python3
"""Why a grouped GEMM runs faster after a pause than back to back (issue #15, the micro-step's
expert GEMMs; reports/calibration/grouped-gemm/, "What the idle gap changes").

Measured before: torch._grouped_mm's up projection takes 9.5 ms back to back, 8.6 ms after 2 ms
of empty GPU and 9.0 ms after 2 ms of other kernels, but not faster after 50–500 µs gaps or a
1 ms GPU-side sleep; a cuBLAS 8,192³ GEMM (1.4 ms) does not gain; the SM clock read by an
observer warp explains 2–3% of it. Two questions this probe answers:
 1. Is it the grouped GEMM or any long tensor-core kernel? The same contexts for a cuBLAS GEMM
    of about the same length (16,384 × 16,384 × 12,288, ~9 ms), beside the grouped GEMM.
 2. Does the speed change inside a launch, and is it the SM clock? Two kernels of fixed work
    that record, in every CTA at 16 checkpoints, the global timer and the SM's cycle counter:
    `mma_loop` (warp-level bf16 tensor-core MMAs on registers, no memory: as power-hungry as a GEMM's
    mainloop) and `fma_loop` (fp32 FMAs on registers). Per checkpoint: ns and SM cycles; if the work
    per cycle is fixed, cycles per checkpoint stay constant and only the clock (cycles/ns)
    moves; if they grow, the SMs do less per cycle (throttling that the clock does not show).
Contexts, interleaved in cycles (the GPU's state drifts over minutes): back to back; after a
host gap of 0.5, 1, 2, 5 ms (GPU empty); after 2 ms of 2,048³ cuBLAS GEMMs; after 2 ms of a
bandwidth-bound elementwise kernel. Needs PyTorch and CuPy on a GPU.

  python3 calibrate/power_transient_probe.py --out power-transient.json [--cycles 4] [--reps 6]
  python3 calibrate/power_transient_probe.py --sustained 400 --out sustained.json
  python3 calibrate/power_transient_probe.py --duty 0.25,0.5,0.75,1,0.5 --out duty.json
  python3 calibrate/power_transient_probe.py --states --out states.json
  python3 calibrate/power_transient_probe.py --states --plan PLAN --lib LIB --out states.json   # + the plan's FlexAttention
  python3 calibrate/power_transient_probe.py --recovery 0,2,10,30,100,300 [--plan PLAN --lib LIB] --out recovery.json
  python3 calibrate/power_transient_probe.py --bursts 0,1,2,4,7,12,20,40 [--plan PLAN --lib LIB] --out bursts.json
  python3 calibrate/power_transient_probe.py --classes --seconds 3 --out classes.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

KERNELS = r"""
__device__ __forceinline__ void stamp(unsigned long long* out, int k) {
  unsigned long long t, c;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  c = clock64();
  out[2 * k] = t;
  out[2 * k + 1] = c;
}

// Tensor cores only: each warp runs m16n8k16 bf16 MMAs on register fragments, 4 accumulators.
extern "C" __global__ void mma_loop(int per, int checkpoints, unsigned long long* stamps, float* sink) {
  unsigned a0 = 0x3f803f80u ^ threadIdx.x, a1 = 0x3f813f81u, a2 = 0x3f823f82u, a3 = 0x3f833f83u;
  unsigned b0 = 0x3c003c00u, b1 = 0x3c013c01u;
  float d[4][4] = {};
  unsigned long long* out = stamps + 2 * (checkpoints + 1) * blockIdx.x;
  for (int k = 0; k < checkpoints; ++k) {
    if (threadIdx.x == 0) stamp(out, k);
    for (int i = 0; i < per; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) stamp(out, checkpoints);
  float s = 0;
  for (int j = 0; j < 4; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  if (s == 1234.5f) sink[0] = s;
}

// CUDA cores only: eight fp32 FMA chains per thread.
extern "C" __global__ void fma_loop(int per, int checkpoints, unsigned long long* stamps, float* sink) {
  float x[8];
  for (int j = 0; j < 8; ++j) x[j] = threadIdx.x * 1e-3f + j;
  unsigned long long* out = stamps + 2 * (checkpoints + 1) * blockIdx.x;
  for (int k = 0; k < checkpoints; ++k) {
    if (threadIdx.x == 0) stamp(out, k);
    for (int i = 0; i < per; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] = fmaf(x[j], 0.99999f, 1e-6f);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) stamp(out, checkpoints);
  float s = 0;
  for (int j = 0; j < 8; ++j) s += x[j];
  if (s == 1234.5f) sink[0] = s;
}
"""
CHECKPOINTS = 16
THREADS = 256
BLOCKS_PER_SM = 4  # 1,024 threads an SM: every CTA resident at once


def timed(torch: object, f: Callable[[], object]) -> float:
    """ms of one call of f, by CUDA events."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    f()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e)


def sized(torch: object, make: Callable[[int], Callable[[], object]], target_ms: float) -> Callable[[], object]:
    """make(n) with n doubled until one call takes at least target_ms."""
    n = 1
    while True:
        f = make(n)
        f()
        if timed(torch, f) >= target_ms or n > 1 << 16:
            return f
        n *= 2


def traced(cp: object, torch: object, kern: object, sms: int, target_ms: float,
           buffers: int) -> tuple[Callable[[int], object], list]:
    """A launch of kern on every SM with work for about target_ms, writing its stamps into the
    i-th of `buffers` stamp buffers (so that no call waits for the host to read the last)."""
    blocks = sms * BLOCKS_PER_SM
    bufs = [cp.zeros(2 * (CHECKPOINTS + 1) * blocks, dtype=cp.uint64) for _ in range(buffers)]
    sink = cp.zeros(1, dtype=cp.float32)
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def launch(per: int, i: int) -> None:
        with stream:
            kern((blocks,), (THREADS,), (cp.int32(per), cp.int32(CHECKPOINTS), bufs[i], sink))
    per = 1
    while timed(torch, lambda: launch(per, 0)) < target_ms / 4 and per < 1 << 24:
        per *= 2
    per = max(1, round(per * target_ms / timed(torch, lambda: launch(per, 0))))
    return (lambda i: launch(per, i)), bufs


def trace_summary(cp: object, stamps: object) -> dict:
    """Per checkpoint, over the CTAs: median ns and SM cycles spent, and the clock (cycles/ns)."""
    import numpy as np
    s = cp.asnumpy(stamps).reshape(-1, CHECKPOINTS + 1, 2).astype(np.int64)
    ns = np.median(np.diff(s[:, :, 0], axis=1), axis=0).tolist()
    cyc = np.median(np.diff(s[:, :, 1], axis=1), axis=0).tolist()
    return {"ns": ns, "cycles": cyc, "MHz": [1e3 * c / t for c, t in zip(cyc, ns)]}


def keep_busy(torch: object, k: Callable[[], object], seconds: float) -> None:
    """k over and over for `seconds` (in batches of ten between synchronisations): a bandwidth-
    bound k keeps the clocks up under the cap (the fresh state), a GEMM drives the GPU into it."""
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            k()
        torch.cuda.synchronize()


def settle(torch: object, light: Callable[[], object] | None, seconds: float) -> None:
    """The state before a trial: `light` over and over for `seconds` (clocks up, power under the
    cap), or an empty GPU (None)."""
    if light is None:
        torch.cuda.synchronize()
        time.sleep(seconds)
    else:
        keep_busy(torch, light, seconds)


def behind_gemms(torch: object, k: Callable[[], object], heavy: Callable[[], object],
                 light: Callable[[], object] | None, light_s: float, gap_ms: float = 0.0,
                 count: int = 7) -> float:
    """ms of one call of k after light_s of `light` (clocks up, power under the cap; None: an
    empty GPU) and `count` `heavy` grouped up projections (seven: ~60 ms at the power cap, as the
    micro-step's expert GEMMs before its attention backward), then gap_ms of empty GPU (0: k
    queued right behind them, its start event following them on the GPU)."""
    settle(torch, light, light_s)
    for _ in range(count):
        heavy()
    if gap_ms > 0:
        torch.cuda.synchronize()
        time.sleep(gap_ms * 1e-3)
    return timed(torch, k)


def behind_gemms_setup(torch: object, extra: dict[str, Callable[[], object]] | None) -> tuple:
    """What --recovery and --bursts run: the light kernel (a bandwidth-bound negation of 512 MiB),
    the heavy one (the grouped up projection) and the kernels timed behind it (the 65,536-row
    cuBLAS up projection, and `extra`)."""
    bf = torch.bfloat16
    big = torch.randn(1 << 28, device="cuda", dtype=bf)
    x = torch.randn(65536, 6144, device="cuda", dtype=bf) * 0.1
    w = torch.randn(6144, 3584, device="cuda", dtype=bf) * 0.1
    kernels: dict[str, Callable[[], object]] = {"cublas_65536x3584x6144": lambda: x @ w}
    kernels.update(extra or {})
    return big, grouped_up(torch), kernels


def write_rows(torch: object, out: str, rows: list, **settings: float) -> None:
    """The result file of --states and --recovery: the device, PyTorch, the command that ran,
    the settings and the rows, in that order."""
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "command": " ".join(["calibrate/power_transient_probe.py"] + sys.argv[1:]),
                   **settings, "rows": rows}, f, indent=1)


def gpu_modules(prog: str, cupy: bool = False) -> tuple | None:
    """(torch, cupy or None), or None with the reason printed when they or a GPU are missing."""
    try:
        import torch
        cp = __import__("cupy") if cupy else None
    except ImportError as e:
        print(f"{prog}: needs PyTorch{' and CuPy' if cupy else ''} ({e}): nothing measured", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{prog}: no CUDA GPU here: nothing measured", file=sys.stderr)
        return None
    return torch, cp


def record_calls(torch: object, k: Callable[[], object], n: int) -> list[tuple]:
    """n calls of k back to back, each between its own pair of CUDA events (not waited on)."""
    ev = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        k()
        e.record()
        ev.append((s, e))
    return ev


def grouped_up(torch: object) -> Callable[[], object]:
    """The micro-step's expert up projection (gap_probe.py): 96 experts of 1,360 rows."""
    E, N, K, M = 96, 3584, 6144, 1360
    bf = torch.bfloat16
    ga = torch.randn(E * M, K, device="cuda", dtype=bf) * 0.1
    gb = torch.randn(E, K, N, device="cuda", dtype=bf) * 0.1
    offs = torch.arange(M, E * M + 1, M, device="cuda", dtype=torch.int32)
    return lambda: torch._grouped_mm(ga, gb, offs=offs)


def sustained(torch: object, calls: int, out: str) -> int:
    """`calls` grouped GEMMs back to back; each call's ms and its end in Unix seconds (for lining
    up with nvidia-smi's samples of power and clock)."""
    g = grouped_up(torch)
    g()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.time()
    ev = record_calls(torch, g, calls)
    torch.cuda.synchronize()
    rows = [{"ms": s.elapsed_time(e), "end_unix_s": t0 + start.elapsed_time(e) * 1e-3} for s, e in ev]
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": rows}, f, indent=1)
    print(f"{calls} calls: first {rows[0]['ms']:.3f} ms, median {statistics.median(r['ms'] for r in rows):.3f}, "
          f"last {rows[-1]['ms']:.3f}", flush=True)
    return 0


def duty_cycles(cp: object, torch: object, mod: object, sms: int, duties: list[float], seconds: float,
                target_ms: float, out: str) -> int:
    """The tensor-core loop at duty d (each launch of target_ms followed by a host sleep of
    target_ms·(1/d − 1)) for `seconds` per duty, light to heavy and back: per launch its
    in-kernel clock (median over the CTAs of cycles / ns over the whole launch), its ms and its
    end on the host's clock (to line up with nvidia-smi's power samples). The steady clock under
    the power cap against the duty is the law a step-level power model needs."""
    import numpy as np
    launch, bufs = traced(cp, torch, mod.get_function("mma_loop"), sms, target_ms, 1)
    rows = []
    for d in duties:
        t_end = time.time() + seconds
        while time.time() < t_end:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            launch(0)
            e.record()
            e.synchronize()
            st = cp.asnumpy(bufs[0]).reshape(-1, CHECKPOINTS + 1, 2).astype(np.int64)
            mhz = float(np.median((st[:, -1, 1] - st[:, 0, 1]) / (st[:, -1, 0] - st[:, 0, 0]) * 1e3))
            ms = s.elapsed_time(e)
            rows.append({"duty": d, "ms": ms, "MHz": mhz, "end_unix_s": time.time()})
            if d < 1:
                time.sleep(ms * 1e-3 * (1 / d - 1))
        tail = [r for r in rows if r["duty"] == d][-20:]
        print(f"duty {d:4.2f}: last 20 launches {statistics.median(r['ms'] for r in tail):7.3f} ms, "
              f"{statistics.median(r['MHz'] for r in tail):6.0f} MHz", flush=True)
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "seconds": seconds,
                   "launches": rows}, f, indent=1)
    return 0


def plan_attention(torch: object, plan_file: str, lib: str) -> dict[str, Callable[[], object]]:
    """The FlexAttention launches of a micro-step plan (forward and backward, full and sliding),
    made as calibrate/micro_step.py makes them, on the current stream."""
    import micro_step
    with open(plan_file) as f:
        plan = json.load(f)
    # Only the attention launches: Kernels sizes its copy and elementwise buffers from the plan's
    # launches (the step's 6 GB of pinned host memory otherwise).
    launches = [l for t in plan["tasks"] for l in t["launches"] if l["kind"] == "attention"]
    kern = micro_step.Kernels(dict(plan, tasks=[{"launches": launches}]), lib)
    stream = torch.cuda.current_stream()
    out = {}
    for l in launches:
        name = f"flex_{'sliding' if l['sliding'] else 'full'}_{'bwd' if l['backward'] else 'fwd'}"
        out.setdefault(name, kern.attention(l, stream))
    return out


def states(torch: object, out: str, light_s: float = 0.5, sustain_s: float = 1.5,
           extra: dict[str, Callable[[], object]] | None = None) -> int:
    """Each calibration kernel in three power states: fresh (one call after light_s of a
    bandwidth-bound kernel, which keeps the clocks up and the power under the cap; three times —
    after an empty GPU a short kernel would meet clocks still ramping up from idle), after GEMMs
    (the same, but queued right behind seven grouped expert GEMMs, ~60 ms at the power cap, as the
    micro-step's full-layer attention backward is) and sustained (20 calls after sustain_s of the
    same kernel back to back). Which state a profile's fitted time matches says which state its
    calibration ran in."""
    bf = torch.bfloat16
    big = torch.randn(1 << 28, device="cuda", dtype=bf)
    w_up = torch.randn(6144, 3584, device="cuda", dtype=bf) * 0.1
    heavy = grouped_up(torch)
    kernels: dict[str, Callable[[], object]] = {"grouped_mm_up_96x1360": heavy}
    for m in (1024, 4096, 16384, 65536):
        x = torch.randn(m, 6144, device="cuda", dtype=bf) * 0.1
        kernels[f"cublas_{m}x3584x6144"] = (lambda x=x: x @ w_up)
    kernels.update(extra or {})
    rows = []
    for name, k in kernels.items():
        k()
        torch.cuda.synchronize()
        fresh = []
        for _ in range(3):
            keep_busy(torch, big.neg_, light_s)
            fresh.append(timed(torch, k))
        after = [behind_gemms(torch, k, heavy, big.neg_, light_s) for _ in range(3)]
        keep_busy(torch, k, sustain_s)
        ev = record_calls(torch, k, 20)
        torch.cuda.synchronize()
        sus = [s.elapsed_time(e) for s, e in ev]
        row = {"kernel": name, "fresh_ms": fresh, "after_gemms_ms": after, "sustained_ms": sus,
               "ratio": statistics.median(sus) / statistics.median(fresh)}
        rows.append(row)
        print(f"{name:28s} fresh {statistics.median(fresh):8.3f} ms  after GEMMs {statistics.median(after):8.3f} ms"
              f"  sustained {statistics.median(sus):8.3f} ms"
              f"  x{row['ratio']:.3f}", flush=True)
    write_rows(torch, out, rows, light_s=light_s, sustain_s=sustain_s)
    return 0


def recovery(torch: object, out: str, gaps_ms: list[float], light_s: float = 0.5,
             extra: dict[str, Callable[[], object]] | None = None) -> int:
    """How soon the clock comes back after the expert GEMMs: each kernel timed once after light_s
    of a bandwidth-bound kernel and seven grouped up projections (~60 ms at the power cap), then
    an empty GPU for each gap (0: queued right behind them, as `--states`' after GEMMs), three
    times per gap. The kernel's time against the gap is the controller's recovery, which a
    step-level power model needs besides the steady power per class (`--classes`, `--duty`)."""
    big, heavy, kernels = behind_gemms_setup(torch, extra)
    rows = []
    for name, k in kernels.items():
        k()
        torch.cuda.synchronize()
        for gap in gaps_ms:
            ms = [behind_gemms(torch, k, heavy, big.neg_, light_s, gap) for _ in range(3)]
            rows.append({"kernel": name, "gap_ms": gap, "ms": ms})
            print(f"{name:28s} gap {gap:6.1f} ms: {statistics.median(ms):8.3f} ms", flush=True)
    write_rows(torch, out, rows, light_s=light_s)
    return 0


def bursts(torch: object, out: str, counts: list[int], light_s: float = 0.5,
           extra: dict[str, Callable[[], object]] | None = None, idle_before: bool = False) -> int:
    """How long heavy load must last before the clock falls: each kernel queued right behind
    `count` grouped up projections (~8.5 ms each fresh) after light_s of a bandwidth-bound kernel
    (idle_before: of an empty GPU), three times per count, with the projections' own times. The
    kernel's time against the burst's length is the controller's onset and overshoot (the
    grouped-gemm README's behaviours 3 and 4)."""
    big, heavy, kernels = behind_gemms_setup(torch, extra)
    light = None if idle_before else big.neg_
    rows = []
    for name, k in kernels.items():
        k()
        torch.cuda.synchronize()
        for n in counts:
            ms = [behind_gemms(torch, k, heavy, light, light_s, count=n) for _ in range(3)]
            rows.append({"kernel": name, "gemms_before": n, "ms": ms})
            print(f"{name:28s} behind {n:3d} GEMMs: {statistics.median(ms):8.3f} ms", flush=True)
    # The projections themselves, back to back from fresh, call by call: where in a burst they slow.
    settle(torch, light, light_s)
    ev = record_calls(torch, heavy, max(counts))
    torch.cuda.synchronize()
    rows.append({"kernel": "grouped_mm_up_96x1360", "burst_calls_ms": [s.elapsed_time(e) for s, e in ev]})
    write_rows(torch, out, rows, light_s=light_s, idle_before=float(idle_before))
    return 0


def classes(torch: object, out: str, seconds: float) -> int:
    """Each kernel class back to back for `seconds`, after 2 s of empty GPU, with the host-clock
    window of each (for nvidia-smi's power samples beside it) and every call's ms: the steady
    power of each class, capped or not, and how much it slows — what a step-level power model
    needs per class."""
    bf = torch.bfloat16
    x = torch.randn(65536, 6144, device="cuda", dtype=bf) * 0.1
    w = torch.randn(6144, 3584, device="cuda", dtype=bf) * 0.1
    q = torch.randn(1, 64, 16384, 192, device="cuda", dtype=bf)
    kv = torch.randn(1, 64, 16384, 192, device="cuda", dtype=bf)
    v = torch.randn(1, 64, 16384, 128, device="cuda", dtype=bf)
    big = torch.randn(1 << 28, device="cuda", dtype=bf)
    host = torch.empty(1 << 29, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(1 << 29, dtype=torch.uint8, device="cuda")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    kernels: dict[str, Callable[[], object]] = {
        "grouped_mm_up_96x1360": grouped_up(torch),
        "cublas_65536x3584x6144": lambda: x @ w,
        "sdpa_causal_16384_64h_192d": lambda: sdpa(q, kv, v, is_causal=True),
        "elementwise_neg_512MiB": lambda: big.neg_(),
        "copy_d2h_512MiB": lambda: host.copy_(dev, non_blocking=True),
    }
    rows = []
    for name, k in kernels.items():
        k()
        torch.cuda.synchronize()
        time.sleep(2.0)
        t0, ev = time.time(), []
        while time.time() - t0 < seconds:
            ev += record_calls(torch, k, 4)
            ev[-1][1].synchronize()
        torch.cuda.synchronize()
        ms = [s.elapsed_time(e) for s, e in ev]
        rows.append({"kernel": name, "start_unix_s": t0, "end_unix_s": time.time(), "ms": ms})
        print(f"{name:28s} {len(ms):5d} calls: first {ms[0]:8.3f} ms, last quarter median "
              f"{statistics.median(ms[3 * len(ms) // 4:]):8.3f}", flush=True)
    time.sleep(2.0)
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "seconds": seconds,
                   "rows": rows}, f, indent=1)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON of every call")
    ap.add_argument("--cycles", type=int, default=4, help="rounds over the contexts")
    ap.add_argument("--reps", type=int, default=6, help="calls per context and round (the first dropped)")
    ap.add_argument("--target-ms", type=float, default=9.0, help="length of each kernel alone")
    ap.add_argument("--sustained", type=int, default=0,
                    help="instead: N calls of the grouped GEMM back to back, each call's end on the host's clock")
    ap.add_argument("--duty", default="",
                    help="instead: the tensor-core loop at these duty cycles, e.g. 0.25,0.5,0.75,1,0.5")
    ap.add_argument("--seconds", type=float, default=3.0, help="--duty: seconds per duty")
    ap.add_argument("--classes", action="store_true",
                    help="instead: each kernel class back to back for --seconds after 2 s idle (steady power per class)")
    ap.add_argument("--states", action="store_true",
                    help="instead: each calibration GEMM fresh (after 0.5 s of light load), right behind ~60 ms of "
                         "grouped GEMMs, and sustained (after 1.5 s of itself)")
    ap.add_argument("--recovery", default="",
                    help="instead: a GEMM (and --plan's FlexAttention) after ~60 ms of grouped GEMMs and "
                         "these empty gaps in ms, e.g. 0,2,10,30,100,300 (the clock's recovery)")
    ap.add_argument("--bursts", default="",
                    help="instead: a GEMM (and --plan's FlexAttention) right behind these numbers of grouped "
                         "GEMMs, e.g. 0,1,2,4,7,12,20,40 (how long heavy load lasts before the clock falls)")
    ap.add_argument("--idle-before", action="store_true",
                    help="--bursts: an empty GPU before each burst instead of the bandwidth-bound kernel")
    ap.add_argument("--plan", default="",
                    help="--states, --recovery, --bursts: also the FlexAttention launches of this micro-step plan (needs --lib)")
    ap.add_argument("--lib", default="build-device/libtwin_kernels_c.so",
                    help="--plan: calibrate/build-device.sh --lib's library (micro_step.py's kernels)")
    a = ap.parse_args()
    mods = gpu_modules("power_transient_probe", cupy=True)
    if mods is None:
        return 3
    torch, cp = mods
    if a.sustained:
        return sustained(torch, a.sustained, a.out)
    extra = plan_attention(torch, a.plan, a.lib) if a.plan else None
    if a.states:
        return states(torch, a.out, extra=extra)
    if a.recovery:
        full = {n: k for n, k in (extra or {}).items() if n.startswith("flex_full")}
        return recovery(torch, a.out, [float(g) for g in a.recovery.split(",")], extra=full)
    if a.bursts:
        full = {n: k for n, k in (extra or {}).items() if n.startswith("flex_full")}
        return bursts(torch, a.out, [int(g) for g in a.bursts.split(",")], extra=full,
                      idle_before=a.idle_before)
    if a.classes:
        return classes(torch, a.out, a.seconds)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    mod = cp.RawModule(code=KERNELS, options=("-std=c++17",))
    if a.duty:
        return duty_cycles(cp, torch, mod, sms, [float(x) for x in a.duty.split(",")], a.seconds,
                           a.target_ms, a.out)
    bf = torch.bfloat16
    # The micro-step's expert up projection, and a cuBLAS GEMM of about its length.
    grouped = grouped_up(torch)
    x = torch.randn(16384, 12288, device="cuda", dtype=bf) * 0.1
    w = torch.randn(12288, 16384, device="cuda", dtype=bf) * 0.1
    kernels: dict[str, Callable[[int], object]] = {
        "grouped_mm_up": lambda i: grouped(),
        "cublas_16384x16384x12288": lambda i: x @ w,
    }
    stamps = {}
    for name in ("mma_loop", "fma_loop"):
        kernels[name], stamps[name] = traced(cp, torch, mod.get_function(name), sms, a.target_ms, a.reps)
    big = torch.randn(1 << 28, device="cuda", dtype=bf)
    y = torch.randn(2048, 2048, device="cuda", dtype=bf)
    between = {
        "2 ms of 2048^3 cuBLAS GEMMs": sized(torch, lambda n: lambda: [y @ y for _ in range(n)], 2.0),
        "2 ms bandwidth-bound elementwise": sized(torch, lambda n: lambda: [big.neg_() for _ in range(n)], 2.0),
    }
    contexts: dict[str, dict] = {"back-to-back": {}}
    for gap in (0.5, 1.0, 2.0, 5.0):
        contexts[f"host gap {gap:g} ms"] = {"gap_s": gap * 1e-3}
    for name, f in between.items():
        contexts[name] = {"between": f}
    calls = []
    for cycle in range(a.cycles):
        for kname, k in kernels.items():
            for cname, c in contexts.items():
                for rep in range(a.reps):
                    if c.get("gap_s"):
                        torch.cuda.synchronize()
                        time.sleep(c["gap_s"])
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    k(rep)
                    e.record()
                    if c.get("between"):
                        c["between"]()
                    calls.append({"kernel": kname, "context": cname, "cycle": cycle, "rep": rep,
                                  "event": (s, e)})
                torch.cuda.synchronize()
                if kname in stamps:  # read after the context's calls: no host wait between them
                    for r in calls[-a.reps:]:
                        r["trace"] = trace_summary(cp, stamps[kname][r["rep"]])
    torch.cuda.synchronize()
    for r in calls:
        s, e = r.pop("event")
        r["ms"] = s.elapsed_time(e)
    kept = [r for r in calls if r["rep"] > 0]
    summary = []
    for kname in kernels:
        for cname in contexts:
            rs = [r for r in kept if r["kernel"] == kname and r["context"] == cname]
            row = {"kernel": kname, "context": cname, "calls": len(rs),
                   "median_ms": statistics.median(r["ms"] for r in rs)}
            if "trace" in rs[0]:
                for part, ks in (("first", range(0, 2)), ("last", range(CHECKPOINTS - 2, CHECKPOINTS))):
                    row[f"{part}_MHz"] = statistics.median(r["trace"]["MHz"][k] for r in rs for k in ks)
                    row[f"{part}_cycles"] = statistics.median(r["trace"]["cycles"][k] for r in rs for k in ks)
            summary.append(row)
            extra = "".join(f"  {p}: {row[p + '_MHz']:6.0f} MHz, {row[p + '_cycles']:9.0f} cycles"
                            for p in ("first", "last") if p + "_MHz" in row)
            print(f"{kname:26s} {cname:34s} {row['median_ms']:7.3f} ms{extra}", flush=True)
    with open(a.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cupy": cp.__version__,
                   "sms": sms, "checkpoints": CHECKPOINTS, "cycles": a.cycles, "reps": a.reps,
                   "summary": summary, "calls": calls}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
