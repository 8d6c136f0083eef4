#!/usr/bin/env python3
"""Where FSDP2 runs its collectives, observed (issue #17: `training.fsdp_streams`).

A model shaped like TorchTitan's MoE blocks in 2025 (experiments/llama4/infra/parallelize.py):
each block is an FSDP module, and its routed experts one of their own inside it; explicit
prefetch of [next block, its experts] forward and backward. One process, one GPU, a NCCL
process group of one rank: FSDP2 still issues every all-gather and reduce-scatter (NCCL copies
locally), so the profiler shows on which CUDA stream FSDP's work runs and when it is issued.
Reported: each GPU kernel or copy of one step launched inside an FSDP::* profiler range (whose
name carries the module), its stream and its start; then per block in backward, whether the
experts' reduction started before compute kernels of the same block still ran (reduced
mid-layer), and whether the two groups' reductions (and all-gathers) shared a stream.
Run with and without FSDP's private unshard_async_op (rung 12b).

What it cannot show on one rank: collectives take no time, so a wait for a peer or a stream
wait behind a slow collective is invisible; only streams and issue order are observed.

Usage (on a GPU machine with PyTorch):
  python3 calibrate/fsdp2_streams_probe.py --out fsdp2-streams.json [--layers 3]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile

try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
except ImportError:  # --help needs no PyTorch
    torch = None
    dist = None
    nn = None


def build_model(layers: int, dim: int, experts: int, hidden: int) -> "nn.Module":
    class Experts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Parameter(torch.randn(experts, dim, hidden) * 0.02)
            self.w2 = nn.Parameter(torch.randn(experts, hidden, dim) * 0.02)

        def forward(self, x: "torch.Tensor") -> "torch.Tensor":
            t = x.view(experts, -1, dim)
            return torch.bmm(torch.relu(torch.bmm(t, self.w1)), self.w2).view_as(x)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(dim, dim, bias=False)
            self.o = nn.Linear(dim, dim, bias=False)
            self.experts = Experts()

        def forward(self, x: "torch.Tensor") -> "torch.Tensor":
            x = x + self.o(torch.relu(self.q(x)))
            return x + self.experts(x)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Block() for _ in range(layers))

        def forward(self, x: "torch.Tensor") -> "torch.Tensor":
            for b in self.layers:
                x = b(x)
            return x

    return Model().cuda()


def shard(model: "nn.Module", async_unshard: bool) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    blocks = list(model.layers)
    for b in blocks:
        fully_shard(b.experts, mp_policy=mp)
        fully_shard(b, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    for b, nxt in zip(blocks, blocks[1:]):
        b.set_modules_to_forward_prefetch([nxt, nxt.experts])
    for b, prev in zip(blocks[1:], blocks):
        b.set_modules_to_backward_prefetch([prev, prev.experts])
    if async_unshard:
        for m in [*blocks, *(b.experts for b in blocks)]:
            m._set_unshard_async_op(True)


def fsdp_gpu_ops(trace: dict) -> list[dict]:
    """Each GPU kernel or copy launched inside an FSDP::* profiler range (the innermost), with
    that range (its name carries the module), its stream and its start."""
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    launches = {e["args"]["correlation"]: e for e in ev
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    ranges = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("FSDP::")]
    out = []
    for k in ev:
        if k.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = launches.get(k["args"].get("correlation"))
        inside = [r for r in ranges if launch and r["ts"] <= launch["ts"] <= r["ts"] + r["dur"]]
        if not inside:
            continue
        out.append({"op": k["name"][:60], "stream": k["args"].get("stream"), "start_us": k["ts"],
                    "end_us": k["ts"] + k["dur"],
                    "fsdp_range": min(inside, key=lambda r: r["dur"])["name"]})
    return sorted(out, key=lambda r: r["start_us"])


def compute_kernels(trace: dict, fsdp: list[dict]) -> list[tuple[float, float, int]]:
    """GPU kernels not launched by FSDP (the model's own), as (start, end, stream)."""
    mine = {(k["start_us"], k["stream"]) for k in fsdp}
    return sorted((e["ts"], e["ts"] + e["dur"], e["args"].get("stream"))
                  for e in trace["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") == "kernel"
                  and (e["ts"], e["args"].get("stream")) not in mine)


def summarize(ops: list[dict], compute: list[tuple[float, float, int]]) -> dict:
    """Streams of FSDP's reduce and all-gather work; per block in backward, the first GPU op of
    the experts' and of the block's post-backward reduction, and the compute kernels that
    started between them (the experts reduced mid-layer if any)."""
    rs = [k for k in ops if "post_backward" in k["fsdp_range"]]
    ag = [k for k in ops if "all_gather" in k["fsdp_range"] or "unshard" in k["fsdp_range"]
          or "prefetch" in k["fsdp_range"]]
    first: dict[str, dict] = {}
    for k in rs:
        first.setdefault(k["fsdp_range"], k)
    blocks = []
    for name, k in first.items():
        if ".experts)" not in name:
            continue
        mate = name.replace(".experts)", ")")
        if mate not in first:
            continue
        b = first[mate]
        between = [c for c in compute if k["start_us"] < c[0] < b["start_us"]]
        blocks.append({"experts": name, "block": mate, "experts_streams":
                       sorted({x["stream"] for x in rs if x["fsdp_range"] == name}),
                       "block_streams": sorted({x["stream"] for x in rs if x["fsdp_range"] == mate}),
                       "compute_kernels_between": len(between),
                       "compute_streams_between": sorted({c[2] for c in between})})
    return {"reduce_streams": sorted({k["stream"] for k in rs}),
            "all_gather_streams": sorted({k["stream"] for k in ag}),
            "fsdp_ranges": sorted({k["fsdp_range"].split(" (")[0] for k in ops}),
            "blocks": blocks}


def run(a: argparse.Namespace, async_unshard: bool) -> dict:
    model = build_model(a.layers, a.dim, a.experts, a.hidden)
    shard(model, async_unshard)
    x = torch.randn(a.tokens, a.dim, device="cuda")
    for _ in range(2):
        model(x).float().square().mean().backward()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model(x).float().square().mean().backward()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as fh:
            trace = json.load(fh)
    ops = fsdp_gpu_ops(trace)
    return {"unshard_async_op": async_unshard, "summary": summarize(ops, compute_kernels(trace, ops)),
            "fsdp_gpu_ops": ops}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="result JSON")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=8192)
    a = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("fsdp2_streams_probe: no PyTorch with a CUDA GPU here: nothing run", file=sys.stderr)
        return 3
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    cases = [run(a, False), run(a, True)]
    for c in cases:
        print(json.dumps({"unshard_async_op": c["unshard_async_op"], **c["summary"]}), flush=True)
    dist.destroy_process_group()
    doc = {"provenance": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                          "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                          "date": datetime.date.today().isoformat(), "argv": sys.argv[1:]},
           "cases": cases}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
