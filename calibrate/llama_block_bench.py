#!/usr/bin/env python3
"""One Llama 3 transformer block, forward and backward, eager and torch.compile'd (issue #22).

Builds the block as TorchTitan's Llama 3 model writes it (torchtitan/models/llama3): nn.RMSNorm
before attention and before the feed-forward block, q/k/v/o projections without bias, RoPE by
complex multiplication with a precomputed `freqs_cis`, GQA keys and values repeated to the query
heads (repeat_kv), SDPA with is_causal (no document mask), the residual adds, and a SwiGLU
feed-forward w2(silu(w1 x) * w3 x). Times forward + backward with CUDA events, eager and
compiled (torch.compile of the block, as TorchTitan's [compile] compiles each block), and sums
the kernels the PyTorch profiler records by class: GEMMs, attention, elementwise (everything
else), with their launch counts. `--fp8` adds the block with its linear layers in FP8 as torchao's
Float8Linear runs them (dynamic tensorwise scaling: amax, scale, cast of input and weight, then
torch._scaled_mm; in backward the gradient is cast too), eager and compiled — written here with
torch._scaled_mm so that it runs without torchao.

What the twin reads from it (model/step_costs.cpp): the elementwise time of a block per token
eager against compiled (its pointwise_fusion switch), and GEMM and attention times at Llama
shapes against its H200 cost model. Nothing is fitted to a published throughput.

Usage (on a GPU machine with PyTorch):
  python3 calibrate/llama_block_bench.py --out llama-block.json \
      [--dim 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 14336 --batch 2 --seq 8192] [--fp8]
A tensor-parallel rank's share of a block: --heads, --kv-heads and --ffn divided by the TP degree
(its norms then run on all tokens, where sequence parallelism gives them 1/TP).
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections.abc import Callable

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # --help needs no PyTorch
    torch = None
    nn = None
    F = None

E4M3_MAX = 448.0


def kernel_class(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("flash", "fmha", "cudnn", "attention", "sdpa")):
        return "attention"
    if any(k in n for k in ("gemm", "nvjet", "cutlass", "xmma", "matmul", "sm90_", "scaled_mm")):
        return "gemm"
    return "elementwise"


def fp8_cast(x: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
    """Dynamic tensorwise scaling: amax over the tensor, scale to E4M3's range, cast."""
    amax = x.abs().max().float().clamp(min=1e-12)
    scale = E4M3_MAX / amax
    return (x.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale


def make_fp8_linear() -> type:
    class Fp8Matmul(torch.autograd.Function):
        """y = x·wᵀ in FP8 (forward), dx = dy·w and dw = dyᵀ·x in FP8 (backward), as torchao's
        Float8Linear with tensorwise dynamic scaling: E4M3 everywhere for simplicity."""

        @staticmethod
        def forward(ctx, x: "torch.Tensor", w: "torch.Tensor") -> "torch.Tensor":
            ctx.save_for_backward(x, w)
            x2 = x.reshape(-1, x.shape[-1])
            x8, sx = fp8_cast(x2)
            w8, sw = fp8_cast(w)
            y = torch._scaled_mm(x8, w8.t(), scale_a=sx.reciprocal(), scale_b=sw.reciprocal(),
                                 out_dtype=torch.bfloat16)
            return y.reshape(*x.shape[:-1], w.shape[0])

        @staticmethod
        def backward(ctx, dy: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
            x, w = ctx.saved_tensors
            dy2 = dy.reshape(-1, dy.shape[-1])
            x2 = x.reshape(-1, x.shape[-1])
            dy8, sdy = fp8_cast(dy2)
            wt8, sw = fp8_cast(w.t().contiguous())
            dx = torch._scaled_mm(dy8, wt8.t(), scale_a=sdy.reciprocal(),
                                  scale_b=sw.reciprocal(), out_dtype=torch.bfloat16)
            dyt8, sdyt = fp8_cast(dy2.t().contiguous())
            xt8, sxt = fp8_cast(x2.t().contiguous())
            dw = torch._scaled_mm(dyt8, xt8.t(), scale_a=sdyt.reciprocal(),
                                  scale_b=sxt.reciprocal(), out_dtype=torch.bfloat16)
            return dx.reshape(x.shape), dw

    class Fp8Linear(nn.Linear):
        def forward(self, x: "torch.Tensor") -> "torch.Tensor":
            return Fp8Matmul.apply(x, self.weight)

    return Fp8Linear


def build_block(dim: int, heads: int, kv_heads: int, hd: int, ffn: int, seq: int,
                fp8: bool) -> "nn.Module":
    linear = make_fp8_linear() if fp8 else nn.Linear

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
            self.ffn_norm = nn.RMSNorm(dim, eps=1e-5)
            self.wq = linear(dim, heads * hd, bias=False)
            self.wk = linear(dim, kv_heads * hd, bias=False)
            self.wv = linear(dim, kv_heads * hd, bias=False)
            self.wo = linear(heads * hd, dim, bias=False)
            self.w1 = linear(dim, ffn, bias=False)
            self.w2 = linear(ffn, dim, bias=False)
            self.w3 = linear(dim, ffn, bias=False)
            freqs = 1.0 / (500000.0 ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
            t = torch.arange(seq, dtype=torch.float32)
            self.register_buffer("freqs_cis", torch.polar(torch.ones(seq, hd // 2),
                                                          torch.outer(t, freqs)))

        def rope(self, x: "torch.Tensor") -> "torch.Tensor":
            xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            f = self.freqs_cis[: x.shape[1]].view(1, x.shape[1], 1, xc.shape[-1])
            return torch.view_as_real(xc * f).flatten(3).type_as(x)

        def attention(self, x: "torch.Tensor") -> "torch.Tensor":
            b, s, _ = x.shape
            q = self.rope(self.wq(x).view(b, s, heads, hd))
            k = self.rope(self.wk(x).view(b, s, kv_heads, hd))
            v = self.wv(x).view(b, s, kv_heads, hd)
            rep = heads // kv_heads  # repeat_kv: expand and copy to the query heads
            k = k[:, :, :, None, :].expand(b, s, kv_heads, rep, hd).reshape(b, s, heads, hd)
            v = v[:, :, :, None, :].expand(b, s, kv_heads, rep, hd).reshape(b, s, heads, hd)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            return self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))

        def forward(self, x: "torch.Tensor") -> "torch.Tensor":
            h = x + self.attention(self.attention_norm(x))
            z = self.ffn_norm(h)
            return h + self.w2(F.silu(self.w1(z)) * self.w3(z))

    return Block().cuda().to(torch.bfloat16)


def time_block(block: "nn.Module", x: "torch.Tensor", grad: "torch.Tensor", reps: int,
               top: int = 0) -> dict:
    def step() -> None:
        block(x).backward(grad)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    by_class: dict = {}
    by_name: dict = {}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        ms = e.device_time_total / 1000 if hasattr(e, "device_time_total") else 0
        c = by_class.setdefault(kernel_class(e.name), {"ms": 0.0, "kernels": 0})
        c["ms"] += ms
        c["kernels"] += 1
        k = by_name.setdefault(e.name, {"kernel": e.name, "ms": 0.0, "launches": 0})
        k["ms"] += ms
        k["launches"] += 1
    out = {"median_ms": statistics.median(times), "min_ms": min(times), "by_class": by_class}
    if top > 0:  # the kernels that take longest: which ones, and how long each ran
        out["top_kernels"] = sorted(by_name.values(), key=lambda k: -k["ms"])[:top]
    return out


def run_case(args: argparse.Namespace, fp8: bool, compiled: bool) -> dict:
    torch.manual_seed(0)
    block = build_block(args.dim, args.heads, args.kv_heads, args.head_dim, args.ffn, args.seq,
                        fp8)
    if compiled:
        block = torch.compile(block)
    x = torch.randn(args.batch, args.seq, args.dim, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    grad = torch.randn_like(x)
    out = time_block(block, x, grad, args.reps, args.top_kernels)
    out.update({"fp8": fp8, "compiled": compiled})
    return out


def record_case(result: dict, out: str, labels: dict, run: "Callable[[], dict]") -> None:
    """Runs one case and rewrites the output file with it, so that what was measured is kept
    if a later case fails (its error is recorded instead)."""
    try:
        case = run()
    except Exception as e:  # keep what was measured; say what failed
        case = dict(labels, error=repr(e)[:400])
    result["cases"].append(case)
    print(json.dumps(case), flush=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    torch.cuda.empty_cache()


def provenance(argv: list[str]) -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu": p.name, "sm_count": p.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "command": " ".join(["calibrate/llama_block_bench.py"] +
                                                            argv)}


def shape_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a Llama 3 block's shape and the timing (this script's and
    llama_step_bench.py's): the 8B's by default, batch 2 x 8,192 tokens."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=doc.split("\n\n", 1)[1])
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", required=True)
    return ap


def main(argv: list[str]) -> int:
    ap = shape_parser(__doc__)
    ap.add_argument("--fp8", action="store_true", help="also the FP8 linear layers")
    ap.add_argument("--top-kernels", type=int, default=0,
                    help="also list the N longest kernels of each case (name, ms, launches)")
    args = ap.parse_args(argv)
    if torch is None or not torch.cuda.is_available():
        print("llama_block_bench: needs PyTorch and a GPU", file=sys.stderr)
        return 3
    result = {"provenance": provenance(argv),
              "shape": {k: getattr(args, k) for k in ("dim", "heads", "kv_heads", "head_dim", "ffn",
                                                        "batch", "seq")},
              "cases": []}
    for fp8 in ([False, True] if args.fp8 else [False]):
        for compiled in (False, True):
            record_case(result, args.out, {"fp8": fp8, "compiled": compiled},
                        lambda: run_case(args, fp8, compiled))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
