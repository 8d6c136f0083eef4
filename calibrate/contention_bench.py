#!/usr/bin/env python3
"""SM contention, kernel class by kernel class (issue #15, measurement).

For every kernel class the training step launches — bandwidth-bound elementwise work, cuBLAS
bf16 and FP8 GEMMs, torch._grouped_mm and the project's static/dynamic persistent grouped
GEMMs, attention forward/backward (cuDNN SDPA, FlexAttention), Newton–Schulz — at the model's
shapes and two or three other sizes, this times the kernel alone and while k SMs are held the way
NCCL holds them: one CTA per SM shaped like an NCCL CTA (640 threads × 96 registers, 80 KiB of
shared memory; JOB.md §8), spinning until told to stop — what cannot share an SM with an NCCL CTA
cannot share it with the holder. Each holder block writes its %smid and bumps a
counter; the measured stream first runs a one-thread kernel that waits for the counter to reach
k, so the kernel starts only when all k holders are resident, and the recorded SM ids prove that
k distinct SMs were held (`held_distinct` in every row).

Also, per case:
  - beside a copy-engine device-to-device copy stream (NCCL-like HBM traffic, no SM held):
    the kernel's slowdown and the copy's bandwidth (alone, beside the kernel);
  - the kernel's launch configuration from the PyTorch profiler (CUPTI): grid, block, registers,
    shared memory, blocks per SM — the inputs of the twin's wave model (hardware/contention.hpp).

Timing: CUDA events around each launch, a warm-up inside every hold, the median of `reps`
launches (reps chosen so that reps × time alone ≈ 60 ms, 3..25). Rows are written after each case,
so a run cut short keeps what it measured.

Usage, on a GPU machine with PyTorch and build-device/libtwin_kernels_c.so
(calibrate/build-device.sh --lib):
  python3 calibrate/contention_bench.py --lib build-device/libtwin_kernels_c.so \
      --out contention.json [--held 0,8,32] [--only gemm,elementwise] [--budget-s 480] [--clock]
      [--kernels add,mul] [--holder 81920,544,2] [--sustain-ms 300] [--launches-held 64,112]
"""
from __future__ import annotations

from collections.abc import Callable

import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import sys
import tempfile
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --help needs no PyTorch
    torch = None

HELD_DEFAULT = [0, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 100, 112, 124]
HIDDEN, EXPERT_HIDDEN, EXPERTS_PER_GPU, VOCAB = 6144, 1792, 96, 256000
Q_HEADS, KV_HEADS, QK_DIM, V_DIM = 64, 4, 192, 128
QKV_OUT = Q_HEADS * QK_DIM + KV_HEADS * (QK_DIM + V_DIM)  # 13,568
CLOCK_HZ = 1.98e9  # torch.cuda._sleep counts SM cycles; H200's maximum clock (nvidia-smi)


# --- the holder ---------------------------------------------------------------------------------
class Holder:
    """Holds k SMs (verified) while the measured stream runs."""

    MAX_NS = 3_000_000_000  # a lost stop (or a kernel that cannot start) ends it after 3 s

    def __init__(self, lib, sms, shape=None):
        self.lib = lib
        # (shared memory bytes, threads, 96 registers per thread?); None: the NCCL CTA's shape
        self.shape = shape
        self.sms = sms
        self.started = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.stop = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.smids = torch.full((sms,), -1, dtype=torch.int32, device="cuda")
        self.stream = torch.cuda.Stream()
        self.k = 0
        # Load the wait kernel now: under CUDA's lazy module loading its first launch would load
        # it while the holders spin, and loading waits for them (they time out after MAX_NS).
        ok = lib.twin_wait_count(ptr(self.started), 0, 1, stream_ptr(self.stream))
        if ok != 0:
            raise RuntimeError(f"wait launch failed: cudaError {ok}")
        torch.cuda.synchronize()

    def hold(self, k, work, wait=True, max_ns=None, stamp=None):
        """Holds k SMs; `work` waits until all are resident. The holders give up after max_ns
        from their start (default MAX_NS); `stamp` (a device pointer) receives the global time
        just before they launch."""
        self.k = k
        self.started.zero_(); self.stop.zero_(); self.smids.fill_(-1)
        torch.cuda.synchronize()
        if k == 0:
            return
        args = (k, ptr(self.started), ptr(self.smids), ptr(self.stop), max_ns or self.MAX_NS)
        if stamp is not None:
            checked(self.lib.twin_stamp(stamp, stream_ptr(self.stream)), "stamp")
        if self.shape is None:
            ok = self.lib.twin_sm_hold_until(*args, 0, stream_ptr(self.stream))
        else:
            ok = self.lib.twin_sm_hold_shaped(*args, *self.shape, stream_ptr(self.stream))
        if ok != 0:
            raise RuntimeError(f"holder launch failed: cudaError {ok}")
        if not wait:
            return
        ok = self.lib.twin_wait_count(ptr(self.started), k, self.MAX_NS, stream_ptr(work))
        if ok != 0:
            raise RuntimeError(f"wait launch failed: cudaError {ok}")

    def release(self, work):
        with torch.cuda.stream(work):
            self.stop.fill_(1)
        torch.cuda.synchronize()
        if self.k == 0:
            return 0
        ids = self.smids[: self.k].tolist()
        started = int(self.started.item())
        if started & 0xFFFF != self.k or min(ids) < 0:
            raise RuntimeError(f"holder: {started & 0xFFFF} of {self.k} blocks ran")
        if started >> 16:
            # The kernel could not start beside the holder (e.g. a thread-block cluster found no
            # GPC with enough free SMs) and ran only once the holder gave up: no valid point.
            raise HolderTimeout(f"{started >> 16} holder blocks timed out")
        return len(set(ids))


class HolderTimeout(RuntimeError):
    pass


class ClockObserver:
    """The SM clock over the timed launches (one warp on a stream of its own records global ns
    and SM cycles when the measured stream passes two marks): is mechanism 2 of the model, a
    power-capped clock that rises as fewer SMs are busy, real for this kernel? The warp takes a
    block slot: beside a kernel whose CTAs fill an SM's registers (CUTLASS's grouped GEMM, nvjet)
    it keeps one SM from the kernel, so times are never taken while it runs (measure_case reads
    the clock in a second pass)."""

    def __init__(self, lib: ctypes.CDLL, max_ns: int = 3_000_000_000, stream: torch.cuda.Stream | None = None):
        self.lib = lib
        self.max_ns = max_ns  # from its launch: a lost mark ends it
        self.mark = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.out = torch.zeros(4, dtype=torch.int64, device="cuda")
        self.stream = stream or torch.cuda.Stream()  # observers sharing one run one at a time

    def start(self, work):
        """Launch the observer; `work` (the measured stream) waits for the marks' reset. No
        synchronisation here: the holder is already spinning until the measured stream stops it."""
        with torch.cuda.stream(self.stream):
            self.mark.zero_(); self.out.zero_()
        work.wait_stream(self.stream)
        checked(self.lib.twin_clock_observe(ptr(self.mark), ptr(self.out), self.max_ns,
                                            stream_ptr(self.stream)), "clock observer")

    def MHz(self):
        """Mean SM clock between the marks; None when a mark was missed."""
        torch.cuda.synchronize()
        t0, c0, t1, c1 = self.out.tolist()
        return (c1 - c0) / (t1 - t0) * 1e3 if t0 and t1 > t0 else None


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def stream_ptr(s: torch.cuda.Stream) -> ctypes.c_void_p:
    return ctypes.c_void_p(s.cuda_stream)


def load_lib(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    P, I, LL, SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t
    lib.twin_sm_hold_until.argtypes = [I, P, P, P, LL, I, P]
    lib.twin_sm_hold_shaped.argtypes = [I, P, P, P, LL, I, I, I, P]
    lib.twin_wait_count.argtypes = [P, I, LL, P]
    lib.twin_clock_observe.argtypes = [P, P, LL, P]
    lib.twin_stamp.argtypes = [P, P]
    lib.twin_grouped_gemm.argtypes = [P, P, P, P, P, I, I, I, P, I, I, P]
    lib.twin_fp8_quantize.argtypes = [P, P, P, SZ, P]
    lib.twin_fp8_dequantize.argtypes = [P, P, P, SZ, P]
    lib.twin_bf16_sum_fp32.argtypes = [P, I, SZ, P, P]
    return lib


def checked(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: cudaError {rc}")


# (shared memory bytes, threads, mode), most NCCL-like first; mode (kernels/twin_kernels.cuh):
# 0 few registers, all threads dozing; 1 96 registers, all dozing; 2 96 registers, one thread
# polling and the rest at a barrier. The first shape that lets kernels run beside 124 holders is
# used; 2026-11-30's files used (200 KiB, 640, 1).
HOLDER_SHAPES = [
    None,  # an NCCL CTA: 80 KiB, 640 threads × 96 registers (JOB.md §8), mode 2
    (200 * 1024, 640, 2), (200 * 1024, 640, 1), (200 * 1024, 32, 0)]


def probe_holder(lib: ctypes.CDLL, sms: int, work: torch.cuda.Stream, copier: Copier | None = None) -> tuple:
    """For each holder shape: how many holders are resident 50 ms after launching one per SM,
    whether a one-block kernel then runs beside them (`shares`: an NCCL CTA leaves 4,096
    registers, so a tiny block may), whether a kernel runs on the SMs left free with 124 held
    (it must), and a copy engine's bandwidth with 124 held (a quiet holder leaves it as alone).
    Returns the first shape that passes the third test, and every result."""
    x = torch.zeros(1, device="cuda")
    results, chosen = [], False
    for shape in HOLDER_SHAPES:
        h = Holder(lib, sms, shape)
        h.hold(sms, work, wait=False, max_ns=400_000_000)
        time.sleep(0.05)
        resident = int(h.started.item()) & 0xFFFF
        with torch.cuda.stream(work):
            x.add_(1)
            done = torch.cuda.Event()
            done.record(work)
        time.sleep(0.1)
        shares = done.query()
        torch.cuda.synchronize()
        h.hold(sms - 8, work, max_ns=1_000_000_000)
        try:
            with torch.cuda.stream(work):
                x.add_(1)
            h.release(work)
            progresses = True
        except HolderTimeout:
            progresses = False
        row = {"shape": shape or "nccl_cta", "resident_of_all": resident,
               "tiny_kernel_ran_beside_all_held": shares, "kernel_ran_beside_124_held": progresses}
        if copier is not None:
            h.hold(sms - 8, work, max_ns=1_000_000_000)
            row["copy_alone_GBps"] = copier.GBps(copier.alone_ms)
            row["copy_with_124_held_GBps"] = copier.GBps(copier.time(4, after=work))
            try:
                h.release(work)
            except HolderTimeout:
                row["copy_with_124_held_GBps"] = None
        results.append(row)
        if progresses and chosen is False:
            chosen = shape
    return chosen, results


# --- timing -------------------------------------------------------------------------------------
# --flush-l2-mib: a buffer written before each timed launch, outside its events, so that the
# launch finds its operands in HBM rather than in L2 (50 MiB on the H200) from its previous run.
L2_FLUSH = None


def timed_launches(fn: Callable[[], object], work: torch.cuda.Stream, reps: int, lead_ms: float,
                   mark: torch.Tensor | None = None, sustain: int = 0, gap_us: float = 0,
                   one_span: bool = False) -> list[tuple]:
    """Events around `reps` launches of fn on `work` after one warm-up (and `sustain` more
    launches before it: the GPU's power state of a busy step). A sleep kernel of lead_ms
    goes first, so that the host enqueues every launch before the GPU reaches them: otherwise the
    host's launch gaps (tens of µs per PyTorch op) would be timed as kernel time. `mark` (a
    ClockObserver's) is set to 1 before the timed launches and to 2 after them. gap_us > 0 puts a
    GPU sleep of that length before each timed launch, outside its events: the launch then
    follows a one-thread kernel, not itself (whether back-to-back launches overlap, e.g. by
    programmatic dependent launch, shows as a difference). one_span: one event pair around all
    reps launches, nothing between them; the pair is returned `reps` times (median_ms then gives
    the span, to be divided by reps)."""
    evs = []
    with torch.cuda.stream(work):
        torch.cuda._sleep(int(lead_ms * 1e-3 * CLOCK_HZ))
        for _ in range(sustain):
            fn()
        fn()
        if mark is not None:
            mark.fill_(1)
        if one_span:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(work)
            for _ in range(reps):
                fn()
            b.record(work)
            evs = [(a, b)] * reps
        for _ in range(0 if one_span else reps):
            if gap_us > 0:
                torch.cuda._sleep(int(gap_us * 1e-6 * CLOCK_HZ))
            if L2_FLUSH is not None:
                L2_FLUSH.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(work); fn(); b.record(work)
            evs.append((a, b))
        if mark is not None:
            mark.fill_(2)
    return evs


def median_ms(evs: list[tuple]) -> float:
    evs[-1][1].synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in evs)


def host_ms_per_call(fn: Callable[[], object], work: torch.cuda.Stream, calls: int = 5) -> float:
    """Host time to enqueue one call of fn (no synchronisation inside)."""
    with torch.cuda.stream(work):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        t = (time.perf_counter() - t) * 1e3 / calls
    torch.cuda.synchronize()
    return t


class Copier:
    """A copy-engine device-to-device copy stream (cudaMemcpyAsync through Tensor.copy_)."""

    def __init__(self, mib=512):
        n = mib << 20
        self.src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
        self.dst = torch.empty_like(self.src)
        self.stream = torch.cuda.Stream()
        self.bytes = 2 * n  # read + write
        self.alone_ms = self.time(8)

    def launch(self, count):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            a.record(self.stream)
            for _ in range(count):
                self.dst.copy_(self.src)
            b.record(self.stream)
        return a, b

    def time(self, count, after=None):
        """ms per copy; waits only for its own stream (a holder may be spinning meanwhile)."""
        if after is not None:
            self.stream.wait_stream(after)
        self.launch(1)
        a, b = self.launch(count)
        b.synchronize()
        return a.elapsed_time(b) / count

    def GBps(self, ms):
        return self.bytes / (ms * 1e-3) / 1e9


# --- the kernels --------------------------------------------------------------------------------
BF16 = None


def rand(*shape: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    return (torch.randn(*shape, device="cuda") * 0.1).to(dtype or BF16)


class Case:
    """One kernel at one shape: `make()` returns a launch function; flops/bytes for the record."""

    def __init__(self, cls, kernel, shape, make, flops=0.0, bytes_=0.0):
        self.cls, self.kernel, self.shape, self.make = cls, kernel, shape, make
        self.flops, self.bytes = flops, bytes_

    @property
    def name(self):
        return self.kernel + "[" + ",".join(f"{k}={v}" for k, v in self.shape.items()) + "]"


def binary(op: Callable, rows: int, cols: int) -> Callable[[], Callable[[], object]]:
    """A same-dtype binary elementwise kernel (torch.add, torch.mul) over rows × cols bf16."""
    def make():
        a, b = rand(rows, cols), rand(rows, cols)
        out = torch.empty_like(a)
        return lambda: op(a, b, out=out)
    return make


def elementwise_cases() -> list[Case]:
    cs = []
    h = HIDDEN
    for T in (4096, 16384, 65536):
        cs.append(Case("elementwise", "add", {"tokens": T}, binary(torch.add, T, h), bytes_=3 * T * h * 2))

        def accum(T=T):
            acc, x = rand(T, h, dtype=torch.float32), rand(T, h)
            return lambda: acc.add_(x)
        cs.append(Case("elementwise", "fp32_accumulate_bf16", {"tokens": T}, accum, bytes_=T * h * (8 + 2)))

        def rms(T=T):
            x, w = rand(T, h), rand(h)
            return lambda: F.rms_norm(x, (h,), w, 1e-6)
        cs.append(Case("elementwise", "rmsnorm_fwd", {"tokens": T}, rms, bytes_=2 * T * h * 2))

        def rms_bwd(T=T):
            x, w = rand(T, h).requires_grad_(), rand(h).requires_grad_()
            y = F.rms_norm(x, (h,), w, 1e-6)
            g = torch.randn_like(y)
            return lambda: torch.autograd.grad(y, (x, w), g, retain_graph=True)
        cs.append(Case("elementwise", "rmsnorm_bwd", {"tokens": T}, rms_bwd, bytes_=3 * T * h * 2))
    for T in (4096, 65536):
        cs.append(Case("elementwise", "mul", {"tokens": T}, binary(torch.mul, T, h), bytes_=3 * T * h * 2))

        def up(T=T):
            x = rand(T, h)
            out = torch.empty(T, h, device="cuda", dtype=torch.float32)
            return lambda: out.copy_(x)
        cs.append(Case("elementwise", "cast_bf16_fp32", {"tokens": T}, up, bytes_=T * h * 6))

        def down(T=T):
            x = rand(T, h, dtype=torch.float32)
            out = torch.empty(T, h, device="cuda", dtype=BF16)
            return lambda: out.copy_(x)
        cs.append(Case("elementwise", "cast_fp32_bf16", {"tokens": T}, down, bytes_=T * h * 6))

        def strided(T=T):
            src = rand(T, h + 64)[:, :h]
            dst = torch.empty(T, h, device="cuda", dtype=BF16)
            return lambda: dst.copy_(src)
        cs.append(Case("elementwise", "copy_strided", {"tokens": T}, strided, bytes_=2 * T * h * 2))

        def memcpy(T=T):
            src = rand(T, h)
            dst = torch.empty_like(src)
            return lambda: dst.copy_(src)
        cs.append(Case("copy_engine", "copy_d2d_memcpy", {"tokens": T}, memcpy, bytes_=2 * T * h * 2))
    for T in (4096, 16384, 65536):
        rows = 2 * T  # token-expert pairs on a GPU: T·top_k / EP = 2T (JOB.md §3, §4)
        def swiglu(rows=rows):
            g, u = rand(rows, EXPERT_HIDDEN), rand(rows, EXPERT_HIDDEN)
            return lambda: F.silu(g) * u
        cs.append(Case("elementwise", "swiglu_fwd", {"rows": rows}, swiglu, bytes_=3 * rows * EXPERT_HIDDEN * 2))

        def swiglu_bwd(rows=rows):
            g, u = rand(rows, EXPERT_HIDDEN).requires_grad_(), rand(rows, EXPERT_HIDDEN).requires_grad_()
            y = F.silu(g) * u
            gy = torch.randn_like(y)
            return lambda: torch.autograd.grad(y, (g, u), gy, retain_graph=True)
        cs.append(Case("elementwise", "swiglu_bwd", {"rows": rows}, swiglu_bwd, bytes_=5 * rows * EXPERT_HIDDEN * 2))
    for T in (4096, 16384):
        rows = 2 * T
        def gather(T=T, rows=rows):
            x = rand(T, h)
            idx = torch.randint(0, T, (rows,), device="cuda")
            return lambda: x.index_select(0, idx)
        cs.append(Case("elementwise", "permute_gather", {"tokens": T}, gather, bytes_=2 * rows * h * 2))

        def index_add(T=T, rows=rows):
            out, src = rand(T, h), rand(rows, h)
            idx = torch.randint(0, T, (rows,), device="cuda")
            return lambda: out.index_add_(0, idx, src)
        cs.append(Case("elementwise", "unpermute_index_add", {"tokens": T}, index_add, bytes_=(rows + 2 * T) * h * 2))

        def sort(T=T):
            ids = torch.randint(0, 384, (T * 8,), device="cuda", dtype=torch.int32)
            return lambda: torch.sort(ids, stable=True)
        cs.append(Case("elementwise", "route_sort", {"tokens": T}, sort, bytes_=T * 8 * 4 * 4))
    for chunk in (512, 2048):
        def ce(chunk=chunk):
            logits = rand(chunk, VOCAB)
            tgt = torch.randint(0, VOCAB, (chunk,), device="cuda")
            return lambda: F.cross_entropy(logits, tgt)
        cs.append(Case("elementwise", "cross_entropy_fwd", {"tokens": chunk}, ce, bytes_=chunk * VOCAB * 2))

        def ce_bwd(chunk=chunk):
            logits = rand(chunk, VOCAB).requires_grad_()
            tgt = torch.randint(0, VOCAB, (chunk,), device="cuda")
            loss = F.cross_entropy(logits, tgt)
            return lambda: torch.autograd.grad(loss, logits, retain_graph=True)
        cs.append(Case("elementwise", "cross_entropy_bwd", {"tokens": chunk}, ce_bwd, bytes_=2 * chunk * VOCAB * 2))
    return cs


def fp8_block_cases(lib: ctypes.CDLL) -> list[Case]:
    cs = []
    for n in (1 << 24, 1 << 27, 1 << 29):
        def quant(n=n):
            x = rand(n)
            q = torch.empty(n, dtype=torch.uint8, device="cuda")
            s = torch.empty(n // 128, dtype=torch.float32, device="cuda")
            return lambda: checked(lib.twin_fp8_quantize(ptr(x), ptr(q), ptr(s), n,
                                                         stream_ptr(torch.cuda.current_stream())), "quantize")
        cs.append(Case("elementwise", "fp8_block_quantize", {"values": n}, quant, bytes_=n * 3 + n // 32))

        def dequant(n=n):
            q = torch.randint(0, 100, (n,), dtype=torch.uint8, device="cuda")
            s = torch.rand(n // 128, dtype=torch.float32, device="cuda")
            out = torch.empty(n, dtype=BF16, device="cuda")
            return lambda: checked(lib.twin_fp8_dequantize(ptr(q), ptr(s), ptr(out), n,
                                                           stream_ptr(torch.cuda.current_stream())), "dequantize")
        cs.append(Case("elementwise", "fp8_block_dequantize", {"values": n}, dequant, bytes_=n * 3 + n // 32))
    for n in (1 << 24, 1 << 26):
        def fsum(n=n):
            sl = rand(4 * n)
            out = torch.empty(n, dtype=torch.float32, device="cuda")
            return lambda: checked(lib.twin_bf16_sum_fp32(ptr(sl), 4, n, ptr(out),
                                                          stream_ptr(torch.cuda.current_stream())), "sum")
        cs.append(Case("elementwise", "bf16_sum_fp32", {"values": n, "slices": 4}, fsum, bytes_=n * (8 + 4)))
    return cs


def gemm_case(name: str, m: int, n: int, k: int, cls: str = "gemm") -> Case:
    def make():
        a, b = rand(m, k), rand(k, n)
        c = torch.empty(m, n, device="cuda", dtype=BF16)
        return lambda: torch.mm(a, b, out=c)
    return Case(cls, name, {"m": m, "n": n, "k": k}, make, flops=2.0 * m * n * k,
                bytes_=2.0 * (m * k + k * n + m * n))


def gemm_cases() -> list[Case]:
    cs = []
    for T in (4096, 16384, 65536):
        cs.append(gemm_case("qkv_proj", T, QKV_OUT, HIDDEN))
        cs.append(gemm_case("o_proj", T, HIDDEN, Q_HEADS * V_DIM))
    for T in (4096, 16384):
        cs.append(gemm_case("router", T, 384, HIDDEN))
    cs.append(gemm_case("qkv_dgrad", 16384, HIDDEN, QKV_OUT))
    cs.append(gemm_case("qkv_wgrad", QKV_OUT, HIDDEN, 16384))
    for rows in (128, 352, 1376):
        cs.append(gemm_case("expert_up", rows, 2 * EXPERT_HIDDEN, HIDDEN))
        cs.append(gemm_case("expert_down", rows, HIDDEN, EXPERT_HIDDEN))
    cs.append(gemm_case("square", 8192, 8192, 8192))
    return cs


def router_token_cases() -> list[Case]:
    """The router GEMM (tokens × 384 experts × hidden) at token counts from one to six of its
    128-row tiles per CTA: where its steps with a few SMs held fall (issue #15: the 16,384-token
    router slows ×1.87 with 4–16 held where the static tile lists give ×1.5)."""
    return [gemm_case("router", T, 384, HIDDEN) for T in (8192, 12288, 16384, 20480, 24576, 32768, 49152)]


def expert_row_cases() -> list[Case]:
    """The expert up and down projections at row counts between and below the fit's (128, 352,
    1,376): nvjet takes other tiles and clusters there, so their curves test a launch's load
    intensity (hardware/contention.hpp, mechanism 3) on launches the fit never saw."""
    cs = []
    for rows in (64, 96, 192, 256, 512, 768):
        cs.append(gemm_case("expert_up", rows, 2 * EXPERT_HIDDEN, HIDDEN))
        cs.append(gemm_case("expert_down", rows, HIDDEN, EXPERT_HIDDEN))
    return cs


def router_more_cases() -> list[Case]:
    """The router GEMM at token counts between and beyond router_token_cases' (2.5–5.2 of
    192×192 tiles per CTA, up to the step's 65,536 tokens): where cuBLAS's late CTAs stop
    waiting as static lists do (issue #15)."""
    return [gemm_case("router", T, 384, HIDDEN) for T in (28672, 36864, 40960, 45056, 57344, 65536)]


def square_rows_cases() -> list[Case]:
    """Newton–Schulz's B·X as one GEMM ((m×m)·(m×6,144) at m = 1,536–3,072; at 1,792 with 4,096
    and 8,192 columns): nvjet launches clusters of 8 at about 2–5 tiles per CTA there, where the
    twin keeps static lists below 4 tiles per CTA in clusters of 8 and switches clusters of 2 and 4
    at 2.4 (hardware/kernel_shapes.cpp): held-out launches for that switch (issue #15)."""
    shapes = [(m, HIDDEN, m) for m in (1536, 1792, 2048, 2560, 3072)]
    shapes += [(EXPERT_HIDDEN, n, EXPERT_HIDDEN) for n in (4096, 8192)]
    return [gemm_case("square_rows", m, n, k) for m, n, k in shapes]


def small_rows_cases() -> list[Case]:
    """GEMMs of 32–192 rows on weights of other shapes than the model's (28–112 MB of bf16):
    nvjet launches them in clusters of 4 (4×1) with one tile per CTA, or split-K, where file l's
    expert rows missed by 21–62% — held-out launches for a rule placed on file l (issue #15)."""
    weights = [(8192, 4096), (2048, 7168), (4096, 4096), (14336, 4096)]
    return [gemm_case("small_rows", m, n, k) for n, k in weights
            for m in (32, 48, 64, 80, 96, 128, 160, 192)]


def split_k_more_cases() -> list[Case]:
    """Small-row GEMMs on weights none of the fitted files used, long in k (nvjet splits k where
    its tiles are few): held-out launches for the split-K reduction's β and unstretched time
    fitted on file reduce (`--launches-held`; issue #15)."""
    weights = [(1024, 8192), (3072, 6144), (2048, 12288), (1536, 7168)]
    return [gemm_case("split_k_more", m, n, k) for n, k in weights for m in (32, 64, 96, 128, 192)]


def cluster_pad_cases() -> list[Case]:
    """Small-row GEMMs whose tiles do not fill whole clusters (3 rows of 32 or 64, columns not a
    multiple of the cluster's): the padded grid is placed cluster by cluster beside held SMs
    (kernel_shapes.hpp, padded_grid), predicted before the run (issue #15)."""
    return ([gemm_case("cluster_pad", 96, n, 4096) for n in (2560, 3072, 3584, 4608)]
            + [gemm_case("cluster_pad", 192, n, 4096) for n in (3584, 4096, 5120, 6144)]
            + [gemm_case("cluster_pad", 160, n, 4096) for n in (3584, 6144)])


def lone_cta_cases() -> list[Case]:
    """Small-row GEMMs at four lengths of k (1,024–8,192) for 32–192 rows of 8,192 and 14,336
    columns: with 124 SMs held (nvjet's pairs: two at a time) or 112 (clusters of 4: two at a
    time) a round is a few lone CTAs, so its time against k gives a lone CTA's set-up and
    streaming rate per nvjet tile — what the small-row launches' model lacks (issue #15)."""
    return [gemm_case("lone_cta", m, n, k) for n in (8192, 14336) for k in (1024, 2048, 4096, 8192)
            for m in (32, 64, 96, 128, 192)]


def lone_cta_wide_cases() -> list[Case]:
    """The tiles file p still misses by more than 15% (nvjet's 96×64 at 192 rows of 2,048 and
    4,096 columns, 64×96 at 160 rows of 4,096) at four lengths of k, timed as lone_cta is: with
    124 SMs held a round is a few lone CTAs, so a lone CTA of each tile against k (issue #15)."""
    return [gemm_case("lone_cta", m, n, k) for m, n in ((192, 2048), (192, 4096), (160, 4096))
            for k in (2048, 3072, 4096, 6144)]


def lone_cta_more_cases() -> list[Case]:
    """nvjet's small-row kernels without a lone line yet (2026-12-04: the model takes the form for
    them), at lengths of k no held-out file uses: 96×64 in 1×2 pairs (128 rows of 6,144), 96×64
    and 64×96 in clusters of 4 (file l's expert rows), 64×32 in 1×2 pairs (64 rows), 64×80 and
    128×80 in pairs, 128×48, 128×160 and 128×128 in clusters of 4 — timed as lone_cta is, with
    124 or 112 SMs held (issue #15). Which kernel cuBLAS picks at each k is its heuristic's: the
    profiler record says."""
    shapes = ((128, HIDDEN), (192, 2 * EXPERT_HIDDEN), (96, 2 * EXPERT_HIDDEN), (64, 4096),
              (80, 8192), (160, 8192), (48, 14336), (160, 14336), (128, 14336))
    return [gemm_case("lone_cta", m, n, k) for m, n in shapes for k in (2048, 3072, 5120)]


def fp8_gemm_cases() -> list[Case]:
    cs = []
    for m, n, k in ((8192, 8192, 8192), (16384, QKV_OUT, HIDDEN), (1376, 2 * EXPERT_HIDDEN, HIDDEN)):
        def make(m=m, n=n, k=k):
            a = rand(m, k).to(torch.float8_e4m3fn)
            b = rand(n, k).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
            sa = torch.rand(m, 1, device="cuda", dtype=torch.float32) + 0.5
            sb = torch.rand(1, n, device="cuda", dtype=torch.float32) + 0.5
            return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=BF16)
        cs.append(Case("gemm_fp8", "scaled_mm_rowwise", {"m": m, "n": n, "k": k}, make,
                       flops=2.0 * m * n * k, bytes_=m * k + k * n + 2.0 * m * n))
    return cs


def expert_rows(mean: int, groups: int, imbalance: float, seed: int = 0) -> list[int]:
    """Rows per expert, multiples of 16 (grouped_mm's alignment), mean ≈ `mean`; imbalanced:
    log-normal with coefficient of variation `imbalance`."""
    if imbalance <= 0:
        return [mean] * groups
    g = torch.Generator().manual_seed(seed)
    sigma = math.sqrt(math.log(1 + imbalance ** 2))
    x = torch.exp(torch.randn(groups, generator=g) * sigma - sigma ** 2 / 2) * mean
    return [max(16, 16 * int(round(v / 16))) for v in x.tolist()]


def grouped_cases(lib: ctypes.CDLL) -> list[Case]:
    cs = []
    for rows, imb in ((352, 0.0), (1376, 0.0), (1376, 0.3)):
        for proj, n, k in (("up", 2 * EXPERT_HIDDEN, HIDDEN), ("down", HIDDEN, EXPERT_HIDDEN)):
            counts = expert_rows(rows, EXPERTS_PER_GPU, imb)
            shape = {"rows_per_expert": rows, "imbalance_cv": imb, "n": n, "k": k, "experts": EXPERTS_PER_GPU}
            flops = 2.0 * sum(counts) * n * k

            def make(counts=counts, n=n, k=k):
                a = rand(sum(counts), k)
                b = rand(EXPERTS_PER_GPU, k, n)
                offs = torch.tensor(counts, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
                return lambda: torch._grouped_mm(a, b, offs=offs)
            cs.append(Case("grouped_gemm", f"grouped_mm_{proj}", shape, make, flops=flops))
            if proj == "up":
                for dynamic in (False, True):
                    cs.append(Case("grouped_gemm", "twin_grouped_" + ("dynamic" if dynamic else "static"),
                                   shape, lambda counts=counts, n=n, k=k, d=dynamic:
                                   twin_grouped(lib, counts, n, k, d), flops=flops))
    return cs


def twin_grouped(lib: ctypes.CDLL, counts: list[int], n: int, k: int, dynamic: bool) -> Callable[[], object]:
    tm, tn = 128, 128  # kernels/twin_kernels.cuh kTileM, kTileN
    tiles = [math.ceil(c / tm) * math.ceil(n / tn) for c in counts]
    a, b = rand(sum(counts), k), rand(len(counts), k, n)
    c = torch.empty(sum(counts), n, device="cuda", dtype=BF16)
    ro = torch.tensor([0] + counts, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    to = torch.tensor([0] + tiles, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")

    def run():
        counter.zero_()
        s = stream_ptr(torch.cuda.current_stream())
        checked(lib.twin_grouped_gemm(ptr(a), ptr(b), ptr(c), ptr(ro), ptr(to), len(counts), n, k,
                                      ptr(counter), int(dynamic), 132, s), "grouped gemm")
    return run


def attention_cases() -> list[Case]:
    cs = []
    for T in (4096, 16384):
        flops = 2.0 * Q_HEADS * (QK_DIM + V_DIM) * T * (T + 1) / 2
        for bwd in (False, True):
            def make(T=T, bwd=bwd):
                q = rand(1, Q_HEADS, T, QK_DIM).requires_grad_()
                k = rand(1, KV_HEADS, T, QK_DIM).requires_grad_()
                v = rand(1, KV_HEADS, T, V_DIM).requires_grad_()
                run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                if not bwd:
                    def fwd():
                        with torch.no_grad():
                            run()
                    return fwd
                y = run()
                gy = torch.randn_like(y)
                return lambda: torch.autograd.grad(y, (q, k, v), gy, retain_graph=True)
            cs.append(Case("attention", "sdpa_" + ("bwd" if bwd else "fwd"), {"tokens": T, "causal": 1}, make,
                           flops=flops * (2.5 if bwd else 1)))
    return cs


def flex_cases() -> list[Case]:
    cs = []
    T = 16384
    for window in (0, 128):
        for bwd in (False, True):
            def make(window=window, bwd=bwd):
                from torch.nn.attention.flex_attention import create_block_mask, flex_attention
                g = torch.Generator().manual_seed(0)
                docs, left = [], T
                while left > 0:  # the twin's default layout: log-normal, median 600, σ 1.6
                    d = max(1, min(left, int(round(600 * math.exp(1.6 * torch.randn(1, generator=g).item())))))
                    docs.append(d); left -= d
                doc = torch.repeat_interleave(torch.arange(len(docs), dtype=torch.int32),
                                              torch.tensor(docs)).cuda()
                win = window or T + 1

                def mask(b, h, qi, ki):
                    return (doc[qi] == doc[ki]) & (qi >= ki) & (qi - ki < win)
                bm = create_block_mask(mask, None, None, T, T, device="cuda")
                flex = torch.compile(flex_attention, dynamic=False)
                q = rand(1, Q_HEADS, T, QK_DIM).requires_grad_()
                k = rand(1, KV_HEADS, T, QK_DIM).requires_grad_()
                v = rand(1, KV_HEADS, T, V_DIM).requires_grad_()
                if not bwd:
                    def fwd():
                        with torch.no_grad():
                            flex(q, k, v, block_mask=bm, enable_gqa=True)
                    return fwd
                y = flex(q, k, v, block_mask=bm, enable_gqa=True)
                gy = torch.randn_like(y)
                return lambda: torch.autograd.grad(y, (q, k, v), gy, retain_graph=True)
            cs.append(Case("attention", "flex_" + ("bwd" if bwd else "fwd"),
                           {"tokens": T, "window": window, "docs": "lognormal_600_1.6"}, make))
    return cs


def newton_schulz_cases() -> list[Case]:
    cs = []
    for batch in (1, 16):
        def make(batch=batch):
            x = rand(batch, EXPERT_HIDDEN, HIDDEN)
            a, b, c = 3.4445, -4.7750, 2.0315  # Muon's quintic coefficients

            def ns():
                X = x
                for _ in range(5):
                    A = X @ X.mT
                    B = b * A + c * A @ A
                    X = a * X + B @ X
                return X
            return ns
        m, n = EXPERT_HIDDEN, HIDDEN
        cs.append(Case("newton_schulz", "newton_schulz_5", {"batch": batch, "m": m, "n": n}, make,
                       flops=batch * 5.0 * (4 * m * m * n + 2 * m ** 3)))
    return cs


# --- the driver ---------------------------------------------------------------------------------
def launch_config(fn: Callable[[], object], then: Callable[[], object] | None = None) -> list[dict]:
    """The kernels one call of fn launches, from the PyTorch profiler (CUPTI); `then` runs right
    after fn inside the profile (the holders' stop: the profiler ends with a device synchronize).
    The holder's own kernels are left out."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        if then is not None:
            then()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    out = []
    for e in trace.get("traceEvents", []):
        if e.get("cat") != "kernel" or any(h in e.get("name", "") for h in ("sm_hold", "wait_count")):
            continue
        a = e.get("args", {})
        out.append({"name": e.get("name", "")[:160], "dur_us": e.get("dur"), "grid": a.get("grid"),
                    "block": a.get("block"), "registers": a.get("registers per thread"),
                    "smem_bytes": a.get("shared memory"), "blocks_per_sm": a.get("blocks per SM"),
                    "warps_per_sm": a.get("warps per SM"),
                    "occupancy_pct": a.get("est. achieved occupancy %")})
    return out


def clock_pass(fn: Callable[[], object], holder: Holder, clock: ClockObserver, k: int, work: torch.cuda.Stream,
               reps: int, lead: float, sustain: int = 0) -> float | None:
    """The SM clock over the same launches as a point's timed pass, beside the same k holders,
    in a pass of its own (the observer's warp would take an SM from some kernels)."""
    holder.hold(k, work)
    try:
        clock.start(work)
        timed_launches(fn, work, reps, lead, clock.mark, sustain)
    finally:
        try:
            holder.release(work)
        except HolderTimeout:
            return None
    return clock.MHz()


def launches_beside(fn: Callable[[], object], holder: Holder, k: int, work: torch.cuda.Stream) -> list[dict]:
    """One call of fn under the profiler beside k holders, in a pass of its own: each kernel's
    duration there (e.g. cuBLASLt's split-K reduction apart from nvjet's slices, issue #15)."""
    holder.hold(k, work)
    try:
        with torch.cuda.stream(work):
            config = launch_config(fn, then=lambda: holder.stop.fill_(1))
    finally:
        holder.release(work)
    return config


def measure_case(case: Case, holder: Holder, copier: Copier | None, held: list[int], work: torch.cuda.Stream,
                 log: Callable[[str], None], clock: ClockObserver | None = None, sustain_ms: float = 0,
                 gap_us: float = 0, one_span: bool = False, launches_held: tuple[int, ...] = ()) -> dict:
    # Made on the measured stream: autograd runs a backward on the stream of its forward.
    with torch.cuda.stream(work):
        fn = case.make()
    torch.cuda.synchronize()
    t0 = time.time()
    host = host_ms_per_call(fn, work)
    alone = median_ms(timed_launches(fn, work, 5, 1 + 9 * host))
    reps = max(3, min(25, int(round(60.0 / max(alone, 1e-3)))))
    lead = min(200.0, 1 + 2 * (reps + 1) * host + reps * gap_us * 1e-3)
    sustain = int(math.ceil(sustain_ms / max(alone, 1e-3))) if sustain_ms > 0 else 0
    lead = min(200.0, lead + 2 * sustain * host)
    rows = []
    for k in held:
        holder.hold(k, work)
        try:
            evs = timed_launches(fn, work, reps, lead, sustain=sustain, gap_us=gap_us, one_span=one_span)
        except BaseException:
            holder.release(work)
            raise
        try:
            distinct = holder.release(work)
        except HolderTimeout as e:
            rows.append({"held_sms": k, "blocked": str(e)})
            continue
        ms = median_ms(evs) / (reps if one_span else 1)
        if k == 0:
            alone = ms
        row = {"held_sms": k, "held_distinct": distinct, "median_ms": ms, "slowdown": ms / alone, "reps": reps}
        if clock is not None:
            row["sm_clock_MHz"] = clock_pass(fn, holder, clock, k, work, reps, lead, sustain)
        if k in launches_held:
            row["launches"] = launches_beside(fn, holder, k, work)
        rows.append(row)
    t1 = time.time()
    beside = None
    if copier is not None:
        span_ms = lead + (reps + 1) * alone * 1.5 + 2
        count = max(2, int(math.ceil(span_ms / copier.alone_ms)))
        torch.cuda.synchronize()
        ca, cb = copier.launch(count)
        evs = timed_launches(fn, work, reps, lead)
        torch.cuda.synchronize()
        ms = median_ms(evs)
        beside = {"median_ms": ms, "slowdown": ms / alone, "copy_alone_GBps": copier.GBps(copier.alone_ms),
                  "copy_beside_GBps": copier.GBps(ca.elapsed_time(cb) / count)}
    try:
        with torch.cuda.stream(work):
            config = launch_config(fn)
    except Exception as e:  # noqa: BLE001 — the curve stands without it
        config = [{"error": repr(e)[:300]}]
    t2 = time.time()
    log(f"{case.cls:13s} {case.name:70s} alone {alone:9.3f} ms host {host:6.3f} ms "
        f"({t1 - t0:.1f}+{t2 - t1:.1f} s) " + " ".join(
            f"{r['held_sms']}:{r['slowdown']:.2f}" if "slowdown" in r else f"{r['held_sms']}:blocked" for r in rows))
    del fn
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return {"class": case.cls, "kernel": case.kernel, "shape": case.shape, "flops": case.flops,
            "bytes": case.bytes, "alone_ms": alone, "host_ms_per_call": host, "points": rows, "beside_copy": beside,
            "launches": config}


def provenance(args: argparse.Namespace) -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"gpu": p.name, "sm_count": p.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": os.uname().nodename, "command": " ".join(sys.argv), "commit": args.commit,
            "driver": nvidia_smi("driver_version"), "sm_clock_max_MHz": nvidia_smi("clocks.max.sm"),
            "holder": "kernels/sm_hold.cu sm_hold_until: 1 block/SM; shape (shared memory, threads, mode) in holder_shape"}


def nvidia_smi(field: str) -> str:
    import subprocess
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001 — provenance only
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build-device/libtwin_kernels_c.so")
    ap.add_argument("--out", default="contention.json")
    ap.add_argument("--held", default=",".join(map(str, HELD_DEFAULT)), help="SMs held, comma-separated")
    ap.add_argument("--only", default="", help="classes: elementwise,fp8_block,gemm,gemm_fp8,grouped,"
                                               "attention,flex,newton_schulz,router_tokens,"
                                               "expert_rows,router_more,square_rows,small_rows,split_k_more,cluster_pad,lone_cta,"
                                               "lone_cta_wide,"
                                               "lone_cta_more")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting cases after this")
    ap.add_argument("--no-copy", action="store_true", help="skip the beside-a-copy measurement")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--clock", action="store_true",
                    help="record the mean SM clock over each point's timed launches (sm_clock_MHz)")
    ap.add_argument("--kernels", default="", help="only the cases of these kernels, comma-separated")
    ap.add_argument("--holder", default="", help="force the holder: SHARED_BYTES,THREADS,MODE "
                                                 "(mode 0 light, 1/2 96 registers)")
    ap.add_argument("--gap-us", type=float, default=0,
                    help="a GPU sleep of this many µs before each timed launch (0: back to back)")
    ap.add_argument("--one-span", action="store_true",
                    help="time each point's launches back to back with one event pair (mean per launch)")
    ap.add_argument("--flush-l2-mib", type=int, default=0,
                    help="write this many MiB before each timed launch (outside its events): operands "
                         "from HBM, not from L2 (0: off)")
    ap.add_argument("--launches-held", default="",
                    help="also record each kernel's launch (profiler) beside these held counts, "
                         "comma-separated (each point's `launches`)")
    ap.add_argument("--sustain-ms", type=float, default=0,
                    help="run the kernel back to back this long before each point's timed launches")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("contention_bench: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    global BF16, L2_FLUSH
    BF16 = torch.bfloat16
    if args.flush_l2_mib > 0:
        L2_FLUSH = torch.empty(args.flush_l2_mib << 20, dtype=torch.uint8, device="cuda")
    torch.manual_seed(0)
    lib = load_lib(args.lib)
    held = [int(x) for x in args.held.split(",")]
    launches_held = tuple(int(x) for x in args.launches_held.split(",") if x)
    groups = {"elementwise": elementwise_cases, "fp8_block": lambda: fp8_block_cases(lib),
              "gemm": gemm_cases, "grouped": lambda: grouped_cases(lib), "attention": attention_cases,
              "newton_schulz": newton_schulz_cases, "gemm_fp8": fp8_gemm_cases, "flex": flex_cases,
              "router_tokens": router_token_cases, "expert_rows": expert_row_cases,
              "router_more": router_more_cases, "square_rows": square_rows_cases,
              "small_rows": small_rows_cases, "lone_cta": lone_cta_cases, "split_k_more": split_k_more_cases,
              "cluster_pad": cluster_pad_cases,
              "lone_cta_wide": lone_cta_wide_cases, "lone_cta_more": lone_cta_more_cases}
    only = [g for g in args.only.split(",") if g] or list(groups)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    work = torch.cuda.Stream()
    copier = None if args.no_copy else Copier()
    shape, probe = probe_holder(lib, sms, work, copier)
    if args.holder:
        shape = tuple(int(x) for x in args.holder.split(","))
    print("holder probe:", probe, flush=True)
    if shape is False:
        print("contention_bench: no holder shape lets kernels run beside 124 holders", file=sys.stderr)
        return 1
    holder = Holder(lib, sms, shape)
    clock = ClockObserver(lib) if args.clock else None
    doc = {"provenance": provenance(args), "held_sms": held, "holder_probe": probe,
           "holder_shape": shape or "nccl_cta", "sustain_ms": args.sustain_ms, "gap_us": args.gap_us,
           "one_span": args.one_span, "flush_l2_mib": args.flush_l2_mib,
           "cases": [], "errors": [], "skipped": []}
    if copier is not None:  # is the copy really on a copy engine? Its bandwidth with 124 SMs held:
        holder.hold(min(124, sms - 8), work)
        try:
            ms = copier.time(4, after=work)
        except BaseException:
            holder.release(work)
            raise
        try:
            holder.release(work)
            doc["copy_engine_check"] = {"alone_GBps": copier.GBps(copier.alone_ms),
                                        "with_124_held_GBps": copier.GBps(ms)}
        except HolderTimeout as e:
            doc["copy_engine_check"] = {"blocked": str(e)}
    t0 = time.time()
    log = lambda s: print(s, flush=True)

    def save():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)
    for g in only:
        for case in groups[g]():
            if args.kernels and case.kernel not in args.kernels.split(","):
                continue
            if time.time() - t0 > args.budget_s:
                doc["skipped"].append(case.name)
                continue
            try:
                doc["cases"].append(measure_case(case, holder, copier, held, work, log, clock, args.sustain_ms,
                                                    args.gap_us, args.one_span, launches_held))
            except Exception as e:  # noqa: BLE001 — reported; the other cases still run
                doc["errors"].append(f"{case.name}: {e!r}"[:500])
                log(f"ERROR {case.name}: {e!r}"[:300])
                torch.cuda.synchronize()
            save()
    save()
    log(f"{len(doc['cases'])} cases, {len(doc['errors'])} errors, {len(doc['skipped'])} skipped, "
        f"{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
