#!/usr/bin/env python3
"""A small real MoE training step on one GPU, under the PyTorch profiler (issue #20, item 2).

Written independently of the twin's plan format, so that `twin compare --kineto` is tested on a
trace the twin did not lay out: two transformer layers at EUROPA's widths (hidden 6,144; 64 query
and 4 key/value heads of 192/128; one rank's 96 experts of 1,792, top-8), 16,384 tokens, bf16:
  attention block  RMSNorm, fused QKV projection (cuBLAS), causal SDPA with GQA, output projection
  MoE block        RMSNorm, router (cuBLAS), softmax + top-8, permute (sort, index_select) into
                   expert groups padded to 16 rows, torch._grouped_mm up (gate and up fused),
                   SwiGLU, torch._grouped_mm down, weighted index_add_ back (unpermute)
  loss             RMSNorm, vocabulary projection (32,000), cross-entropy
then backward and a fused AdamW step. With --fsdp (default), each layer is wrapped by FSDP2's
fully_shard over a one-rank process group: on one GPU there is no peer, but FSDP2's copy-in /
copy-out kernels and its streams run as in a real job. Two warm-up steps, then one step
profiled (marked ProfilerStep#N by torch.profiler's schedule) and written as a Chrome trace.

Usage, on a GPU machine with PyTorch:
  python3 calibrate/moe_step.py --trace moe-step.trace.json.gz [--tokens 16384] [--no-fsdp]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

from chrome_trace import write_chrome_trace

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --help needs no PyTorch
    torch = None

HIDDEN, Q_HEADS, KV_HEADS, QK_DIM, V_DIM = 6144, 64, 4, 192, 128
EXPERTS, TOP_K, EXPERT_HIDDEN, VOCAB, LAYERS, ALIGN = 96, 8, 1792, 32000, 2, 16
Module = torch.nn.Module if torch is not None else object  # --help needs no PyTorch


def param(*shape: int) -> "torch.nn.Parameter":
    return torch.nn.Parameter(torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * shape[-2] ** -0.5)


class Layer(Module):
    def __init__(self) -> None:
        super().__init__()
        qkv = Q_HEADS * QK_DIM + KV_HEADS * (QK_DIM + V_DIM)
        self.norm1 = torch.nn.Parameter(torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16))
        self.norm2 = torch.nn.Parameter(torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16))
        self.wqkv = param(HIDDEN, qkv)
        self.wo = param(Q_HEADS * V_DIM, HIDDEN)
        self.router = param(HIDDEN, EXPERTS)
        self.w_up = param(EXPERTS, HIDDEN, 2 * EXPERT_HIDDEN)
        self.w_down = param(EXPERTS, EXPERT_HIDDEN, HIDDEN)

    def attention(self, x: "torch.Tensor") -> "torch.Tensor":
        t = x.shape[0]
        h = F.rms_norm(x, (HIDDEN,), self.norm1) @ self.wqkv
        q, k, v = h.split([Q_HEADS * QK_DIM, KV_HEADS * QK_DIM, KV_HEADS * V_DIM], dim=-1)
        q = q.view(1, t, Q_HEADS, QK_DIM).transpose(1, 2)
        k = k.view(1, t, KV_HEADS, QK_DIM).transpose(1, 2)
        v = v.view(1, t, KV_HEADS, V_DIM).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return x + o.transpose(1, 2).reshape(t, Q_HEADS * V_DIM) @ self.wo

    def moe(self, x: "torch.Tensor") -> "torch.Tensor":
        h = F.rms_norm(x, (HIDDEN,), self.norm2)
        weights, experts = torch.topk(torch.softmax((h @ self.router).float(), dim=-1), TOP_K, dim=-1)
        flat = experts.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=EXPERTS)
        padded = (counts + ALIGN - 1) // ALIGN * ALIGN
        starts = torch.cumsum(padded, 0) - padded
        # Row of each sorted pair inside its expert's padded group.
        sorted_experts = flat[order]
        rank_in_group = torch.arange(order.numel(), device="cuda") - (torch.cumsum(counts, 0) - counts)[sorted_experts]
        dest = starts[sorted_experts] + rank_in_group
        rows = int(padded.sum().item())
        xp = h.new_zeros(rows, HIDDEN).index_copy(0, dest, h.index_select(0, order // TOP_K))
        offs = torch.cumsum(padded, 0).to(torch.int32)
        up = torch._grouped_mm(xp, self.w_up, offs=offs)
        gate, lin = up.chunk(2, dim=-1)
        down = torch._grouped_mm(F.silu(gate) * lin, self.w_down, offs=offs)
        out = down.index_select(0, dest) * weights.reshape(-1)[order].unsqueeze(1).to(down.dtype)
        return x + torch.zeros_like(x).index_add_(0, order // TOP_K, out)

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return self.moe(self.attention(x))


class Model(Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = torch.nn.Parameter(torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16))
        self.head = param(HIDDEN, VOCAB)

    def forward(self, x: "torch.Tensor", labels: "torch.Tensor") -> "torch.Tensor":
        for layer in self.layers:
            x = layer(x)
        logits = F.rms_norm(x, (HIDDEN,), self.norm) @ self.head
        return F.cross_entropy(logits.float(), labels)


def shard(model: "torch.nn.Module") -> str:
    """FSDP2 over a one-rank process group; returns what was done."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1)
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    return "fully_shard per layer and the model, one rank"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True, help="Chrome trace to write (.json or .json.gz)")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--no-fsdp", action="store_true", help="plain module, no FSDP2")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("moe_step: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    torch.manual_seed(a.seed)
    model = Model()
    fsdp = "none"
    if not a.no_fsdp:
        try:
            fsdp = shard(model)
        except Exception as e:  # noqa: BLE001 — recorded; the step still runs unsharded
            fsdp = f"failed, ran without: {e!r}"[:300]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(a.tokens, HIDDEN, device="cuda", dtype=torch.bfloat16)
    labels = torch.randint(0, VOCAB, (a.tokens,), device="cuda")

    def step() -> None:
        loss = model(x, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    from torch.profiler import ProfilerActivity, profile, schedule
    times = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=2, active=1, repeat=1)) as prof:
        for _ in range(3):
            torch.cuda.synchronize()
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
            prof.step()
    write_chrome_trace(prof, a.trace)
    meta = {"tokens": a.tokens, "layers": LAYERS, "experts": EXPERTS, "top_k": TOP_K, "fsdp": fsdp,
            "step_s": times, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(sys.argv)}
    with open(a.trace + ".meta.json", "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
