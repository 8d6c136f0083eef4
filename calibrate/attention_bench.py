#!/usr/bin/env python3
"""Attention forward and backward on one GPU (issue #6, micro-benchmark 4).

Runs the model's attention (64 query heads, 4 KV heads, q/k head dim 192, v head dim 128; full
causal and a 128-token sliding window) over document layouts of one packed row: documents of
one length, and the twin's default log-normal layout (median 600 tokens, sigma 1.6). Kernels:
PyTorch FlexAttention (document mask + causal + window, compiled through Triton), and SDPA
(cuDNN / flash, whichever PyTorch picks) for layouts of equal documents without a window.

The work of a layout is counted the twin's way (model/data.cpp causal_pairs, model/step_costs.cpp):
  forward FLOPs  = 2 · pairs · q_heads · (qk_dim + v_dim),   backward FLOPs = 2.5 × forward,
and the efficiency is FLOPs / (time · peak). `--profile FILE` writes the fitted
attention_{fwd,bwd}_fraction and _half_tokens of the chosen backend into a hardware profile:
per pass, least squares (relative) of time = Σ_documents FLOPs·(L + h)/L / (peak · f), L the
document's length or the window if shorter — short documents fill causal tiles poorly.

Usage (on a GPU machine with PyTorch):
  python3 calibrate/attention_bench.py --tokens 16384 65536 --out attention.json \
      [--profile hardware/profiles/h200-measured.json --peak-TFLOPs 989]
"""
from __future__ import annotations

from collections.abc import Callable

import argparse
import datetime
import json
import math
import random
import statistics
import sys

from profile_json import update_efficiency

try:
    import torch
except ImportError:  # --refit needs no GPU and no PyTorch
    torch = None


def causal_pairs(n: int, window: int) -> float:
    if window <= 0 or window >= n:
        return n * (n + 1) / 2
    return window * (window + 1) / 2 + (n - window) * window


FLEX_BLOCK = 128  # FlexAttention's default sparse block (torch.nn.attention.flex_attention)


def mask_blocks(docs: list[int], window: int, block: int = FLEX_BLOCK) -> int:
    """(query block, key block) pairs of a packed sequence that hold at least one pair a causal
    document mask (and window) allows: query block i reaches back to the block of the first
    key its first query may see (model/data.cpp, the same count)."""
    starts, at = [], 0
    for d in docs:
        starts.append(at)
        at += d
    total, doc = 0, 0
    for i in range((at + block - 1) // block):
        q = i * block
        while doc + 1 < len(starts) and starts[doc + 1] <= q:
            doc += 1
        lo = starts[doc] if window <= 0 else max(starts[doc], q - window + 1)
        total += i - lo // block + 1
    return total


def lognormal_docs(tokens: int, median: float, sigma: float, seed: int) -> list[int]:
    rng = random.Random(seed)
    docs, left = [], tokens
    while left > 0:
        d = max(1, min(left, int(round(median * math.exp(sigma * rng.gauss(0, 1))))))
        docs.append(d)
        left -= d
    return docs


def layouts(tokens: int, seed: int) -> dict[str, list[int]]:
    out = {}
    for d in (512, 2048, 8192, tokens):
        if d <= tokens and tokens % d == 0:
            out[f"docs_{d}"] = [d] * (tokens // d)
    out["lognormal_600_1.6"] = lognormal_docs(tokens, 600, 1.6, seed)
    return out


CLOCK_HZ = 1.98e9  # torch.cuda._sleep counts SM cycles; the H100's and H200's maximum clock


def timed(fn: Callable[[], object], reps: int, lead_us: float) -> float:
    """Median milliseconds of fn() over reps, after two warm-ups; fn returns (start, end) events.
    lead_us > 0: a GPU sleep that long goes ahead of each call, so that the host has enqueued the
    call's kernels (FlexAttention's and autograd's host side) before the GPU reaches its first
    event; 0 times that enqueue too, as before 2026-12-05 (reports/calibration/gemm-alone/)."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        if lead_us > 0:
            torch.cuda._sleep(int(lead_us * 1e-6 * CLOCK_HZ))
        s, e = fn()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


class Shapes:
    q_heads, kv_heads, qk_dim, v_dim = 64, 4, 192, 128


def make_qkv(tokens: int, batch: int = 1, seq: int | None = None) -> tuple:
    seq = seq or tokens
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda h, d: (torch.randn(batch, h, seq, d, device="cuda", dtype=torch.bfloat16,
                                   generator=g) * 0.5).requires_grad_()
    return mk(Shapes.q_heads, Shapes.qk_dim), mk(Shapes.kv_heads, Shapes.qk_dim), mk(Shapes.kv_heads, Shapes.v_dim)


def fwd_bwd_ms(run: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, reps: int,
               lead_us: float) -> tuple[float, float]:
    def fwd():
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            s.record(); run(q, k, v); e.record()
        return s, e
    grad = None

    def bwd():
        nonlocal grad
        y = run(q, k, v)
        if grad is None:
            grad = torch.randn_like(y)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); y.backward(grad); e.record()
        q.grad = k.grad = v.grad = None
        return s, e
    return timed(fwd, reps, lead_us), timed(bwd, reps, lead_us)


class Flex:
    """FlexAttention with a document mask; one compiled kernel per row length."""
    def __init__(self, tokens):
        from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        self.create_block_mask = create_block_mask
        self.doc = torch.zeros(tokens, dtype=torch.int32, device="cuda")
        self.win = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.flex = torch.compile(flex_attention, dynamic=False)
        self.tokens = tokens
        doc, win = self.doc, self.win

        def mask(b, h, qi, ki):
            return (doc[qi] == doc[ki]) & (qi >= ki) & (qi - ki < win[0])
        self.mask = mask

    def runner(self, docs, window):
        ids = torch.repeat_interleave(torch.arange(len(docs), dtype=torch.int32),
                                      torch.tensor(docs)).to("cuda")
        self.doc.copy_(ids)
        self.win.fill_(window if window > 0 else self.tokens + 1)
        bm = self.create_block_mask(self.mask, None, None, self.tokens, self.tokens, device="cuda")
        return lambda q, k, v: self.flex(q, k, v, block_mask=bm, enable_gqa=True)


def sdpa_runner(docs: list[int]) -> Callable:
    import torch.nn.functional as F
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def measure(args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    rows, errors = [], []
    flops_per_pair = 2 * Shapes.q_heads * (Shapes.qk_dim + Shapes.v_dim)
    for tokens in args.tokens:
        flex = None
        try:
            flex = Flex(tokens)
        except Exception as e:  # noqa: BLE001 — reported, the other backend still runs
            errors.append(f"flex_attention unavailable: {e!r}")
        for name, docs in layouts(tokens, args.seed).items():
            for window in (0, 128):
                pairs = sum(causal_pairs(d, window) for d in docs)
                cases = []
                if flex:
                    cases.append(("flex", lambda: (flex.runner(docs, window), make_qkv(tokens))))
                if window == 0 and len(set(docs)) == 1:
                    d = docs[0]
                    cases.append(("sdpa", lambda: (sdpa_runner(docs), make_qkv(tokens, len(docs), d))))
                for backend, setup in cases:
                    try:
                        run, (q, k, v) = setup()
                        fwd, bwd = fwd_bwd_ms(run, q, k, v, args.reps, args.lead_us)
                    except Exception as e:  # noqa: BLE001
                        errors.append(f"{backend} {name} window {window}: {e!r}"[:400])
                        continue
                    f = pairs * flops_per_pair
                    row = dict(backend=backend, tokens=tokens, layout=name, documents=len(docs),
                               window=window, pairs=pairs, fwd_flops=f, fwd_ms=fwd, bwd_ms=bwd,
                               fwd_TFLOPs=f / fwd / 1e9, bwd_TFLOPs=2.5 * f / bwd / 1e9)
                    rows.append(row)
                    print(f"{backend:5s} T={tokens:6d} {name:18s} w={window:4d} fwd {fwd:8.3f} ms "
                          f"{row['fwd_TFLOPs']:6.1f} TF/s  bwd {bwd:8.3f} ms {row['bwd_TFLOPs']:6.1f} TF/s",
                          flush=True)
                    del q, k, v
                    torch.cuda.empty_cache()
    return rows, errors


def relative_lstsq(A: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(a, b) minimising Σ (a·x + b·y − 1)² over the rows (x, y) = (u/t, v/t) — the relative error
    of t ≈ a·u + b·v —, by the 2×2 normal equations; and the worst |a·x + b·y − 1|."""
    s11 = sum(x * x for x, _ in A); s12 = sum(x * y for x, y in A); s22 = sum(y * y for _, y in A)
    r1 = sum(x for x, _ in A); r2 = sum(y for _, y in A)
    det = s11 * s22 - s12 * s12
    a = (r1 * s22 - r2 * s12) / det
    b = (s11 * r2 - s12 * r1) / det
    return a, b, max(abs(a * x + b * y - 1) for x, y in A)


def fit(rows: list[dict], backend: str, peak: float, docs_of: dict) -> dict:
    """Per pass: time = FLOPs·(L + h)/L / (peak·f) summed over documents (model/workload.hpp);
    linear least squares in (1/f, h/f) of the relative error; returns f, h and the errors."""
    out = {}
    flops_per_pair = 2 * Shapes.q_heads * (Shapes.qk_dim + Shapes.v_dim)
    for key, mult in (("fwd", 1.0), ("bwd", 2.5)):
        A = []
        for r in rows:
            if r["backend"] != backend:
                continue
            t = r[f"{key}_ms"] * 1e-3 * peak
            docs = docs_of(r)
            F = sum(causal_pairs(d, r["window"]) for d in docs) * flops_per_pair * mult
            G = sum(causal_pairs(d, r["window"]) / (min(d, r["window"]) if r["window"] > 0 else d)
                    for d in docs) * flops_per_pair * mult
            A.append((F / t, G / t))
        if len(A) < 2:
            continue
        a, b, worst = relative_lstsq(A)
        out[key] = dict(fraction=1 / a, half_tokens=b / a, points=len(A), worst_relative_error=worst)
    return out


def fit_blocks(rows: list[dict], backend: str, peak: float, docs_of: Callable[[dict], list[int]]) -> dict:
    """Per pass, a block-sparse kernel (FlexAttention): time = blocks·F_b / (peak·f_b) +
    query blocks·heads·t_q, F_b the FLOPs of a full 128×128 block of every head, t_q a query
    block's fixed cost per head; linear least squares of the relative error in (1/f_b, t_q)."""
    out = {}
    block_flops = 2 * Shapes.q_heads * (Shapes.qk_dim + Shapes.v_dim) * FLEX_BLOCK * FLEX_BLOCK
    for key, mult in (("fwd", 1.0), ("bwd", 2.5)):
        A = []
        for r in rows:
            if r["backend"] != backend:
                continue
            t = r[f"{key}_ms"] * 1e-3
            docs = docs_of(r)
            qblock_heads = -(-sum(docs) // FLEX_BLOCK) * Shapes.q_heads
            A.append((mask_blocks(docs, r["window"]) * block_flops * mult / peak / t, qblock_heads / t))
        if len(A) < 2:
            continue
        a, b, worst = relative_lstsq(A)
        out[key] = dict(block_fraction=1 / a, qblock_us=b * 1e6, points=len(A), worst_relative_error=worst)
    return out


def write_profile(path: str, backend: str, fits: dict, source_note: str) -> None:
    values = {}
    for key in ("fwd", "bwd"):
        if key in fits:
            fr = fits[key]
            src = (f"[meas] {source_note}: {backend} attention {key}, least squares of "
                   f"t = sum over documents of FLOPs (L + h)/L / (peak f) over {fr['points']} "
                   f"layouts (worst error {100 * fr['worst_relative_error']:.0f}%)")
            values[f"attention_{key}_fraction"] = (fr["fraction"], src)
            values[f"attention_{key}_half_tokens"] = (fr["half_tokens"], src)
        if key in fits.get("blocks", {}):
            fb = fits["blocks"][key]
            src = (f"[meas] {source_note}: {backend} attention {key} as a block-sparse kernel, least squares "
                   f"of t = mask blocks (128x128) x block FLOPs / (peak f_b) + query blocks x heads x t_q over "
                   f"{fb['points']} layouts (worst error {100 * fb['worst_relative_error']:.0f}%)")
            values[f"attention_{key}_block_fraction"] = (fb["block_fraction"], src)
            values[f"attention_{key}_qblock_us"] = (fb["qblock_us"], src)
    update_efficiency(path, values)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[16384])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--lead-us", type=float, default=1000,
                   help="GPU sleep ahead of each timed call (0: the host's enqueue timed too)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--peak-TFLOPs", type=float, default=989.0)
    p.add_argument("--backend", default="flex", help="backend whose fit goes into --profile")
    p.add_argument("--out", required=True)
    p.add_argument("--refit", help="fit the rows of an earlier --out file again (no GPU needed)")
    p.add_argument("--profile", help="hardware profile JSON to write the fitted fractions into")
    p.add_argument("--note", default="calibrate/attention_bench.py")
    a = p.parse_args()
    if a.refit:
        with open(a.refit) as f:
            old = json.load(f)
        rows, errors, prov = old["rows"], old["errors"], old["provenance"]
        prov["refit"] = " ".join(sys.argv)
    elif torch is None or not torch.cuda.is_available():
        print("attention_bench: no GPU visible, skipped", file=sys.stderr)
        return 0
    else:
        rows, errors = measure(a)
        prov = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    command=" ".join(sys.argv))
    docs_of = lambda r: layouts(r["tokens"], a.seed)[r["layout"]]
    fits = {b: fit(rows, b, a.peak_TFLOPs * 1e12, docs_of) for b in sorted({r["backend"] for r in rows})}
    if "flex" in fits:  # FlexAttention runs a block mask: its cost by the blocks it visits
        fits["flex"]["blocks"] = fit_blocks(rows, "flex", a.peak_TFLOPs * 1e12, docs_of)
    with open(a.out, "w") as f:
        json.dump(dict(provenance=prov, lead_us=old.get("lead_us", 0) if a.refit else a.lead_us,
                       peak_TFLOPs=a.peak_TFLOPs, rows=rows, fits=fits,
                       errors=errors), f, indent=2)
    print(json.dumps(fits, indent=2))
    for e in errors:
        print("error:", e, file=sys.stderr)
    if a.profile and a.backend in fits:
        write_profile(a.profile, a.backend, fits[a.backend], a.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
