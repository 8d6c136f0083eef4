#!/usr/bin/env python3
"""Replays allocation sequences through PyTorch's real CUDA caching allocator.

Each sequence (the format `twin memory --events FILE` writes) lists allocations with a pool
(one CUDA stream per pool) and frees, in order. The allocator's capacity is limited to the
sequence's `capacity_bytes` with torch.cuda.set_per_process_memory_fraction, so retries and
out-of-memory happen where they would on the simulated GPU. For each sequence this writes
PyTorch's own figures (torch.cuda.memory_stats) so that the twin's emulation
(model/caching_allocator.hpp) can be checked against them without a GPU
(tests/model_memory_test.cpp).

It also times the unit of a retry's cost: torch.cuda.empty_cache() (cudaFree of every cached
segment, which synchronizes the device) over k segments of several sizes.

Usage: allocator_replay.py OUT.json SEQUENCES.json...   (a file holds one sequence, or
{"sequences": [...]}); `--tight F` also replays every sequence at F x its capacity; `--steps N`
replays each sequence N times in a row without emptying the cache, as a training loop does (a
buffer never freed stays allocated), and reports the last time through (its peaks and retries):
the twin's `training.allocator_warm_steps` = N - 1 (model/memory_replay.hpp).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None


def sequences(path: str) -> list[dict]:
    with open(path) as f:
        d = json.load(f)
    return d["sequences"] if "sequences" in d else [d]


def replay(seq: dict, capacity: float, steps: int = 1) -> dict:
    dev = torch.cuda.current_device()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(dev).total_memory
    torch.cuda.set_per_process_memory_fraction(capacity / total, dev)
    streams = [torch.cuda.Stream(dev) for _ in seq["pools"]]
    freed = {e[1] for e in seq["events"] if e[0] == "free"}
    ptrs = {}
    for step in range(steps):  # the last time through is reported
        torch.cuda.reset_peak_memory_stats(dev)
        torch.cuda.reset_accumulated_memory_stats(dev)
        failed = None
        for e in seq["events"]:
            if e[0] == "alloc":
                _, i, nbytes, pool = e[:4]
                if step > 0 and i not in freed:
                    continue  # kept from the step before
                try:
                    ptrs[i] = torch.cuda.caching_allocator_alloc(int(nbytes), dev, streams[pool])
                except torch.OutOfMemoryError:
                    failed = failed or (e[4] if len(e) > 4 else str(i))
            elif e[1] in ptrs:
                torch.cuda.caching_allocator_delete(ptrs.pop(e[1]))
        if failed:
            break  # a job stops at its out-of-memory
    st = torch.cuda.memory_stats(dev)
    out = {
        "allowed_bytes": int(capacity / total * total),
        "peak_reserved_bytes": st["reserved_bytes.all.peak"],
        "peak_allocated_bytes": st["allocated_bytes.all.peak"],
        "end_reserved_bytes": st["reserved_bytes.all.current"],
        "num_alloc_retries": st["num_alloc_retries"],
        "num_ooms": st["num_ooms"],
        "first_failed": failed,
    }
    for p in list(ptrs.values()):
        torch.cuda.caching_allocator_delete(p)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    return out


def time_empty_cache() -> list[dict]:
    rows = []
    for seg_mib in (2, 20, 256, 1024):
        for k in (1, 8, 32):
            xs = [torch.empty(seg_mib << 20, dtype=torch.uint8, device="cuda") for _ in range(k)]
            del xs
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.cuda.empty_cache()
            rows.append({"segment_MiB": seg_mib, "segments": k,
                         "ms": (time.perf_counter() - t0) * 1e3})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="result JSON")
    ap.add_argument("sequences", nargs="+", help="allocation sequences (twin memory --events)")
    ap.add_argument("--tight", type=float, default=None,
                    help="also replay every sequence at this fraction of its capacity")
    ap.add_argument("--steps", type=int, default=1,
                    help="replay each sequence this many times without emptying the cache; report the last")
    a = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("allocator_replay: no PyTorch with a CUDA GPU here: nothing replayed", file=sys.stderr)
        return 3
    tight = a.tight
    out_path, files = a.out, a.sequences
    results = []
    for f in files:
        for seq in sequences(f):
            caps = [seq["capacity_bytes"]] + ([int(seq["capacity_bytes"] * tight)] if tight else [])
            for cap in caps:
                r = replay(seq, cap, a.steps)
                r.update({"file": f.split("/")[-1], "sequence": seq["scenario"], "capacity_bytes": cap,
                          "steps": a.steps})
                results.append(r)
                print(json.dumps(r), flush=True)
    props = torch.cuda.get_device_properties(0)
    doc = {
        "provenance": {
            "gpu": props.name, "total_memory_bytes": props.total_memory,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": "python3 calibrate/allocator_replay.py " + " ".join(sys.argv[1:]),
        },
        "results": results,
        "empty_cache_ms": time_empty_cache(),
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
