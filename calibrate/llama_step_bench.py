#!/usr/bin/env python3
"""A whole training step of a small Llama 3 model on one GPU, for the twin to predict (issue #22).

The model is TorchTitan's Llama 3 (calibrate/llama_block_bench.py's block) with its embedding,
final norm and output layer: --layers blocks of the 8B's width by default. One step is what
FSDP2 with mixed precision runs on each rank, without the collectives (one GPU): forward and
backward in bf16 with TorchTitan's loss (cross-entropy over fp32 logits), the gradients cast to
fp32, the gradient norm and its clip, and a fused AdamW over fp32 master weights, which are cast
back to bf16. Timed with CUDA events over --reps steps after warm-up, eager and compiled; the
forward+backward and the optimizer part separately; peak memory from torch.cuda.

The twin predicts the same step with
  twin run scenarios/torchtitan/llama3-8b-h100x8.json --set hardware.profile=h200-measured \\
      --set hardware.node.gpus=1 --set parallel.replica_gpus=1 --set model.layers=2 \\
      --set training.activation_checkpointing=none [--set training.compile=true]
(reports/torchtitan/README.md compares them). Nothing is fitted to it.

Usage (on a GPU machine with PyTorch):
  python3 calibrate/llama_step_bench.py --out llama-step.json [--layers 2 --batch 2 --seq 8192]
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys

from llama_block_bench import build_block, record_case, shape_parser

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # --help needs no PyTorch
    torch = None
    nn = None
    F = None


def build_model(a: argparse.Namespace) -> "nn.Module":
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok_embeddings = nn.Embedding(a.vocab, a.dim)
            self.layers = nn.ModuleList(
                build_block(a.dim, a.heads, a.kv_heads, a.head_dim, a.ffn, a.seq, False)
                for _ in range(a.layers))
            self.norm = nn.RMSNorm(a.dim, eps=1e-5)
            self.output = nn.Linear(a.dim, a.vocab, bias=False)

        def forward(self, tokens: "torch.Tensor") -> "torch.Tensor":
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h)
            return self.output(self.norm(h))

    return Model().cuda().to(torch.bfloat16)


def run_case(a: argparse.Namespace, compiled: bool) -> dict:
    torch.manual_seed(0)
    model = build_model(a)
    params = [p for p in model.parameters()]
    master = [p.detach().float().clone() for p in params]
    opt = torch.optim.AdamW(master, lr=1e-4, fused=True)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda")
    labels = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda")

    def loss_fn(pred: "torch.Tensor") -> "torch.Tensor":
        return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))

    fwd = torch.compile(model) if compiled else model
    loss_c = torch.compile(loss_fn) if compiled else loss_fn

    def forward_backward() -> None:
        for p in params:
            p.grad = None
        loss_c(fwd(tokens)).backward()

    def optimizer() -> None:
        for m, p in zip(master, params):
            m.grad = p.grad.float()
        torch.nn.utils.clip_grad_norm_(master, 1.0, foreach=True)
        opt.step()
        with torch.no_grad():
            torch._foreach_copy_(params, master)

    for _ in range(3):
        forward_backward()
        optimizer()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fb, op = [], []
    for _ in range(a.reps):
        e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        e[0].record()
        forward_backward()
        e[1].record()
        optimizer()
        e[2].record()
        torch.cuda.synchronize()
        fb.append(e[0].elapsed_time(e[1]))
        op.append(e[1].elapsed_time(e[2]))
    return {"compiled": compiled, "forward_backward_ms": statistics.median(fb),
            "optimizer_ms": statistics.median(op),
            "step_ms": statistics.median(x + y for x, y in zip(fb, op)),
            "peak_allocated_GiB": torch.cuda.max_memory_allocated() / 2**30,
            "peak_reserved_GiB": torch.cuda.max_memory_reserved() / 2**30,
            "params": sum(p.numel() for p in params)}


def main(argv: list[str]) -> int:
    ap = shape_parser(__doc__)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=128256)
    args = ap.parse_args(argv)
    if torch is None or not torch.cuda.is_available():
        print("llama_step_bench: needs PyTorch and a GPU", file=sys.stderr)
        return 3
    p = torch.cuda.get_device_properties(0)
    result = {"provenance": {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": p.name, "torch": torch.__version__, "cuda": torch.version.cuda,
        "command": " ".join(["calibrate/llama_step_bench.py"] + argv)},
        "shape": vars(args), "cases": []}
    for compiled in (False, True):
        record_case(result, args.out, {"compiled": compiled}, lambda: run_case(args, compiled))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
