#!/usr/bin/env python3
"""What FSDP2's CPU offload pins, and what PyTorch's pinned host allocator keeps (issue #17).

JOB.md §7: the real job lost 14-28 GiB of Grace memory per rank to the pinned (host) caching
allocator's power-of-two rounding; the twin counts one pinned allocation per parameter shard and
one per gradient shard (model/host_memory.cpp), which gives 9.6 GiB and cannot give more than
their size. This runs FSDP2 (fully_shard, CPUOffloadPolicy(pin_memory=True), bf16 parameters,
fp32 reductions) on one GPU over blocks of the twin's per-rank shard shapes, a few training steps
with a CPU optimizer, and records after each step what the host allocator holds
(torch.cuda.host_memory_stats) beside what the twin's rule predicts: the parameters and the
gradients, each rounded up to a power of two. Also per tensor: is the parameter pinned, is its
gradient, and the gradient's storage address from step to step (a new pinned block per step, or
the same one).

--optimizer ns_gpu stands in for Muon with Newton–Schulz on the GPU as the twin's optimizer
step runs it (model/step_optimizer.cpp): every matrix's fp32 gradient shard to the GPU, a result
computed there, every result home with .to("cpu", non_blocking=True) before one synchronize,
then the update on the CPU. PyTorch allocates such a copy's destination pinned (_to_copy's
pin_out), so the twin counts the results as a third pinned set (model/host_memory.cpp,
training.ns_results=pinned_copies): each step records what the allocator holds with the results
home, and whether they are pinned. Run it with PYTORCH_CUDA_ALLOC_CONF=pinned_max_round_threshold_mb:1
as well to see the sizes unrounded.

Usage, on a GPU machine with PyTorch:
  python3 calibrate/pinned_offload_probe.py --out pinned.json [--layers 4] [--steps 3]
      [--shapes 1792x6144,1792x6144,6144x1792,6144x1] [--optimizer adamw|sgd|none|ns_gpu]
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os

try:
    import torch
    import torch.distributed as dist
    from torch import nn
except ImportError:  # --help needs no PyTorch
    torch = None
    nn = None


def pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(n))) if n > 0 else 0


def host_stats() -> dict:
    """The pinned host allocator's counters (PyTorch ≥ 2.6), bytes and counts only."""
    fn = getattr(torch.cuda, "host_memory_stats", None)
    if fn is None:
        return {}
    return {k: v for k, v in fn().items() if isinstance(v, (int, float))}


def build(shapes: list[tuple[int, int]], layers: int) -> "nn.Module":
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            # nn.Linear(in, out) holds an [out, in] weight: the shard shapes as given (rows, cols).
            self.mats = nn.ParameterList(
                [nn.Parameter(torch.randn(r, c) * 0.01) for r, c in shapes])

        def forward(self, x):
            # Each matrix touches the activation so that every gradient is produced; the shapes
            # need not chain.
            y = x
            for w in self.mats:
                y = y + (x[:, : w.shape[1]] @ w.t()).sum(dim=1, keepdim=True).to(y.dtype) * 0
            return y * 1.0001

    return nn.Sequential(*[Block() for _ in range(layers)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="pinned.json")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--optimizer", choices=("adamw", "sgd", "none", "ns_gpu"), default="adamw",
                    help="none: zero_grad only (no optimizer step); ns_gpu: results computed on "
                         "the GPU and brought home non-blocking (the module's docstring)")
    ap.add_argument("--shapes", default="1792x6144,1792x6144,6144x1792,6144x1",
                    help="per block: parameter shapes ROWSxCOLS (default: one rank's expert shards "
                         "and a norm)")
    a = ap.parse_args()
    if torch is None:
        raise SystemExit("needs PyTorch")
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    torch.manual_seed(0)
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    model = build(shapes, a.layers)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    off = CPUOffloadPolicy(pin_memory=True)
    for blk in model:
        fully_shard(blk, mp_policy=mp, offload_policy=off)
    fully_shard(model, mp_policy=mp, offload_policy=off)
    params = list(model.parameters())
    opt = (torch.optim.AdamW(params, lr=1e-4, foreach=False) if a.optimizer == "adamw"
           else torch.optim.SGD(params, lr=1e-4, foreach=False))
    width = max(c for _, c in shapes)

    def local(t):
        return t.to_local() if hasattr(t, "to_local") else t

    def ns_gpu_step() -> dict:
        """The round trip of a GPU Newton–Schulz step; what the allocator holds with the results home."""
        with torch.no_grad():
            on_gpu = [local(p.grad).to("cuda", non_blocking=True) for p in params]
            results = [g * 0.5 for g in on_gpu]  # a new tensor per matrix, as Newton–Schulz's
            home = [r.to("cpu", non_blocking=True) for r in results]
            torch.cuda.synchronize()
            held = {"host": host_stats(), "results_pinned": [bool(h.is_pinned()) for h in home]}
            for p, h in zip(params, home):
                local(p).add_(h, alpha=-1e-4)
            del on_gpu, results, home
        return held

    before = host_stats()
    steps = []
    grad_ptrs = []
    for step in range(a.steps):
        x = torch.randn(a.tokens, width, device="cuda", dtype=torch.bfloat16)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        torch.cuda.synchronize()
        # Addresses only: a list of the gradients themselves would keep this step's pinned
        # blocks alive through the next step's backward (the 2026-12-03 run did, and measured
        # a third set of gradient blocks that was the probe's own reference).
        grad_ptrs.append([local(p.grad).data_ptr() for p in params])
        at_backward = host_stats()
        record = {"after_backward": at_backward}
        if a.optimizer == "ns_gpu":
            record["with_ns_results_home"] = ns_gpu_step()
        elif a.optimizer != "none":
            opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        record["after_step"] = host_stats()
        steps.append(record)

    tensors = []
    for p in params:
        lp = local(p)
        tensors.append({"shape": list(lp.shape), "dtype": str(lp.dtype), "bytes": lp.numel() * lp.element_size(),
                        "device": str(lp.device), "pinned": bool(lp.is_pinned())})
    exact = sum(t["bytes"] for t in tensors)
    rounded = sum(pow2(t["bytes"]) for t in tensors)
    doc = {
        "provenance": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                       "command": "calibrate/pinned_offload_probe.py " + " ".join(
                           f"--{k} {v}" for k, v in vars(a).items() if k != "out")},
        "tensors": tensors,
        "twin_rule_bytes": {"params_exact": exact, "params_pinned": rounded,
                            "params_and_grads_pinned": 2 * rounded,
                            "with_ns_results_pinned": 3 * rounded},
        "pinned_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        # The allocator's free lists hand a freed block to any request of its size class, so
        # same-sized gradients may swap blocks between steps: compare per parameter and as sets.
        "grad_storage_same_per_parameter": [grad_ptrs[i] == grad_ptrs[i - 1] for i in range(1, len(grad_ptrs))],
        "grad_blocks_reused_between_steps": [sorted(grad_ptrs[i]) == sorted(grad_ptrs[i - 1])
                                             for i in range(1, len(grad_ptrs))],
        "host_stats_before": before,
        "steps": steps,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    last = steps[-1]["after_backward"]
    keys = [k for k in last if "bytes" in k and ("current" in k or "peak" in k)]
    print(f"params exact {exact / 2**20:.1f} MiB, pow2 {rounded / 2**20:.1f} MiB (twin: params+grads "
          f"{2 * rounded / 2**20:.1f} MiB)")
    for k in sorted(keys):
        print(f"  {k}: {last[k] / 2**20:.1f} MiB")
    if a.optimizer == "ns_gpu":
        for i, st in enumerate(steps):
            held = st["with_ns_results_home"]
            print(f"step {i + 1}, results home: allocated "
                  f"{held['host'].get('allocated_bytes.current', 0) / 2**20:.1f} MiB "
                  f"(twin: {3 * rounded / 2**20:.1f} rounded, {3 * exact / 2**20:.1f} exact), "
                  f"results pinned: {all(held['results_pinned'])}")
    print("gradient blocks reused between steps (as a set):", doc["grad_blocks_reused_between_steps"])
    print("  the same block per parameter:", doc["grad_storage_same_per_parameter"])
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
