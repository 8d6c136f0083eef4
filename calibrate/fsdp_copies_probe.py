#!/usr/bin/env python3
"""FSDP2's copy kernels at EUROPA's shapes, timed on one GPU beside a device copy of the same bytes.

The twin prices FSDP2's all-gather copy-out and reduce-scatter copy-in (training.fsdp_copies,
model/step_graph.hpp) as elementwise kernels of their bytes read + written, at the measured
bandwidth of a vectorized copy (family ew_add, hbm_fraction 1.042 of a device copy on the H200)
or of a bf16 -> fp32 cast (ew_widen, 0.541). This probe runs the ops FSDP2 itself calls
(torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py):

  copy-out   torch.ops.fsdp.split_with_sizes_copy(all_gather_output, split_sizes, dim=1, out=...)
  copy-in    torch._chunk_cat(unsharded_grads, dim=0, num_chunks=world, out=reduce_input)

on one EP rank's expert block (96 experts x three 1,792 x 6,144 matrices, bf16, 6.3 GB) sharded
96 ways, and on one layer's dense attention weights sharded 384 ways, and reports each one's
bandwidth (bytes read + written per second) over a device copy's (Tensor.copy_ of the block).

Usage (GPU machine): python3 calibrate/fsdp_copies_probe.py --out fsdp-copies.json
"""
import argparse
import datetime
import json
import platform
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--reps", type=int, default=10, help="timed launches per case")
    ap.add_argument("--commit", default="", help="the tree's commit, for the provenance")
    a = ap.parse_args()
    try:
        import importlib

        import torch
        # Registers torch.ops.fsdp.split_with_sizes_copy.
        importlib.import_module("torch.distributed.fsdp._fully_shard._fsdp_collectives")
    except ImportError as e:
        print(f"fsdp_copies_probe: needs PyTorch with FSDP2: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("fsdp_copies_probe: no GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")

    def time_ms(fn):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(a.reps):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        return times[len(times) // 2]

    def params_of(shapes, dtype):
        return [torch.randn(s, device=dev, dtype=torch.float32).to(dtype) for s in shapes]

    # (name, world size, unsharded parameter shapes): FSDP2 shards dim 0.
    experts = [(96, 1792, 6144), (96, 6144, 1792), (96, 1792, 6144)]
    dense = [(12288, 6144), (768, 6144), (512, 6144), (6144, 8192)]  # q, k, v, o
    cases = []
    for name, world, shapes in (("expert_block", 96, experts), ("dense_attention", 384, dense)):
        params = params_of(shapes, torch.bfloat16)
        numels = [p.numel() for p in params]
        block_bytes = 2 * sum(numels)
        split = [n // world for n in numels]
        gathered = torch.empty((world, sum(split)), device=dev, dtype=torch.bfloat16)
        outs = [p.view(world, -1) for p in params]
        copy_out = time_ms(
            lambda: torch.ops.fsdp.split_with_sizes_copy(gathered, split, dim=1, out=outs))
        ref_src = torch.empty(block_bytes // 2, device=dev, dtype=torch.bfloat16)
        ref_dst = torch.empty_like(ref_src)
        device_copy = time_ms(lambda: ref_dst.copy_(ref_src))
        row = {"case": name, "world": world, "block_bytes": block_bytes,
               "device_copy_ms": device_copy, "copy_out_ms": copy_out}
        for dtype, key in ((torch.float32, "copy_in_fp32_ms"), (torch.bfloat16, "copy_in_bf16_ms")):
            reduce_input = torch.empty((world, sum(numels) // world), device=dev, dtype=dtype)
            row[key] = time_ms(lambda r=reduce_input, ps=params: torch._chunk_cat(
                ps, dim=0, num_chunks=world, out=r))
        # Bandwidth as bytes read + written per second, over the device copy's (2 x block).
        copy_GBps = 2 * block_bytes / device_copy / 1e6
        row["device_copy_GBps"] = copy_GBps
        row["copy_out_fraction"] = 2 * block_bytes / row["copy_out_ms"] / 1e6 / copy_GBps
        row["copy_in_bf16_fraction"] = 2 * block_bytes / row["copy_in_bf16_ms"] / 1e6 / copy_GBps
        row["copy_in_fp32_fraction"] = 3 * block_bytes / row["copy_in_fp32_ms"] / 1e6 / copy_GBps
        cases.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    out = {
        "provenance": {
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "commit": a.commit,
            "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "host": platform.node(),
        },
        "twin_assumes": {"copy_out": "ew_add, hbm_fraction 1.042",
                         "copy_in_bf16": "ew_add, hbm_fraction 1.042",
                         "copy_in_fp32": "ew_widen, hbm_fraction 0.541"},
        "cases": cases,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
