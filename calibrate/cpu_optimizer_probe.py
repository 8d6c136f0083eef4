#!/usr/bin/env python3
"""The CPU optimizer's passes, byte for byte: clip_grad_norm_'s norm and clip against AdamW (#17).

The twin prices every pass of the CPU optimizer (model/step_optimizer.cpp) at one streaming rate
(efficiency.cpu_stream_fraction, fitted to rung 4): the gradient norm reads 4 B/param, the clip
8 B/param, a fused AdamW 28 B/param, Muon's momentum and update 12 B/param each. At rung 10 that
gives the norm and clip 0.348 s where JOB.md §6.11a says ~0.43 s. This probe times the passes as
TorchTitan runs them on FSDP2's gradients — DTensors (Shard(0) on a one-rank gloo mesh), on the
CPU — beside plain tensors, and reports each pass's bytes per second: if the norm and clip run
slower per byte than AdamW, one rate cannot give both; --threads says whether a pass scales with
the cores (compute-bound) or saturates (memory-bound).

Usage (any machine with PyTorch; no GPU used):
  python3 calibrate/cpu_optimizer_probe.py --params 4 --tensors 64 --reps 5 [--threads 1,2,4,8,16] \
      --out cpu-opt.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from gloo_probe import host_provenance

try:
    import torch
    import torch.distributed as dist
except ImportError:  # --help needs no PyTorch
    torch = None


def timed(fn: object, reps: int) -> float:
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def passes(params: list, reps: int, elems: int) -> dict:
    from torch.nn.utils import clip_grads_with_norm_, get_total_norm

    grads = [p.grad for p in params]
    norm = timed(lambda: get_total_norm(grads, 2.0, foreach=None), reps)
    total = get_total_norm(grads, 2.0, foreach=None)
    clip = timed(lambda: clip_grads_with_norm_(params, 1e9, total, foreach=None), reps)
    both = timed(lambda: torch.nn.utils.clip_grad_norm_(params, 1e9, foreach=None), reps)
    opt = torch.optim.AdamW(params, lr=1e-9, fused=True)
    adamw = timed(opt.step, reps)
    out = {"norm_s": norm, "clip_s": clip, "clip_grad_norm_s": both, "adamw_fused_s": adamw}
    for k, b in (("norm", 4), ("clip", 8), ("clip_grad_norm", 12), ("adamw_fused", 28)):
        out[k + "_GBps"] = b * elems / out[k + "_s"] / 1e9
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--params", type=float, default=4, help="GB of fp32 parameters")
    ap.add_argument("--tensors", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", default="", help="also plain tensors at these thread counts, e.g. 1,4,16")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if torch is None:
        print("cpu_optimizer_probe.py: needs PyTorch", file=sys.stderr)
        return 3
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("gloo", rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))
    rows = 1792
    cols = int(args.params * 1e9 / 4 / args.tensors / rows)
    elems = rows * cols * args.tensors
    result = {}
    for kind in ("dtensor", "tensor"):
        params = []
        for _ in range(args.tensors):
            w = torch.randn(rows, cols) * 0.01
            g = torch.randn(rows, cols) * 0.01
            if kind == "dtensor":
                p = torch.nn.Parameter(distribute_tensor(w, mesh, [Shard(0)]))
                p.grad = distribute_tensor(g, mesh, [Shard(0)])
            else:
                p = torch.nn.Parameter(w)
                p.grad = g
            params.append(p)
        result[kind] = passes(params, args.reps, elems)
        print(kind, json.dumps(result[kind]), flush=True)
        if kind == "tensor" and args.threads:
            full = torch.get_num_threads()
            by_threads = {}
            for n in (int(v) for v in args.threads.split(",")):
                torch.set_num_threads(n)
                by_threads[str(n)] = passes(params, args.reps, elems)
                print(n, "threads", json.dumps(by_threads[str(n)]), flush=True)
            torch.set_num_threads(full)
            result["tensor_by_threads"] = by_threads
        del params
    out = {
        **host_provenance("calibrate/cpu_optimizer_probe.py"),
        "threads": torch.get_num_threads(),
        "params": elems,
        "tensors": args.tensors,
        "passes": result,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
