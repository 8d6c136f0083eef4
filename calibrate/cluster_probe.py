#!/usr/bin/env python3
"""Thread-block clusters beside held SMs (issue #15, contention.hpp mechanism 1), measured.

A kernel launched in clusters of c SMs needs c free SMs inside one GPC for each cluster; SMs held
by other kernels (NCCL's CTAs) strand free SMs in GPCs left with a remainder. For c in
{1, 2, 4, 8, 16} and k held SMs (the holder of contention_bench.py's file -c: 640 threads,
200 KiB of shared memory, one thread polling), this launches 2 × S CTAs of a probe kernel in
clusters of c, one per SM (120 KiB of shared memory each: none fits beside a holder or a second
probe CTA), each staying 200 µs: the CTAs that start within the first 100 µs ran at once —
the SMs the kernel can use with k held. Three repeats; the SM ids of holders and probe CTAs are
kept (the probe's clusters show which SMs share a GPC).

Usage, on a GPU machine with PyTorch and build-device/libtwin_kernels_c.so
(calibrate/build-device.sh --lib):
  python3 calibrate/cluster_probe.py --lib build-device/libtwin_kernels_c.so --out clusters.json
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contention_bench import HELD_DEFAULT, Holder, HolderTimeout, load_lib, nvidia_smi, ptr, stream_ptr  # noqa: E402

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

HOLDER_SHAPE = (200 * 1024, 640, 2)  # shared memory, threads, mode 2 (kernels/sm_hold.cu)
PROBE_SMEM = 120 * 1024
SPIN_NS = 200_000
CLUSTERS = [1, 2, 4, 8, 16]


def probe(lib: ctypes.CDLL, holder: Holder, work: torch.cuda.Stream, sms: int, c: int, k: int) -> dict:
    """CTAs of the probe resident at once with k SMs held, and the SM ids involved."""
    n = 2 * sms // c * c
    starts = torch.zeros(n, dtype=torch.int64, device="cuda")
    smids = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    holder.hold(k, work)
    rc = lib.twin_cluster_probe(c, n, ptr(starts), ptr(smids), SPIN_NS, PROBE_SMEM, stream_ptr(work))
    held = holder.release(work)
    if rc != 0:
        raise RuntimeError(f"cluster probe c={c}: cudaError {rc}")
    t = starts.tolist()
    t0 = min(t)
    first = [i for i, x in enumerate(t) if x - t0 < SPIN_NS // 2]
    ids = smids.tolist()
    return {"resident_ctas": len(first), "held_distinct": held,
            "held_smids": holder.smids[:k].tolist() if k else [],
            "first_wave_smids": [ids[i] for i in first]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build-device/libtwin_kernels_c.so")
    ap.add_argument("--out", default="clusters.json")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--commit", default="unknown")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("cluster_probe: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    lib = load_lib(args.lib)
    lib.twin_cluster_probe.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p]
    p = torch.cuda.get_device_properties(0)
    sms = p.multi_processor_count
    work = torch.cuda.Stream()
    holder = Holder(lib, sms, HOLDER_SHAPE)
    held = [k for k in HELD_DEFAULT if k < sms]
    doc = {"provenance": {"gpu": p.name, "sm_count": sms, "torch": torch.__version__, "cuda": torch.version.cuda,
                          "driver": nvidia_smi("driver_version"), "host": os.uname().nodename,
                          "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "command": " ".join(sys.argv), "commit": args.commit,
                          "holder_shape": list(HOLDER_SHAPE), "probe_smem_bytes": PROBE_SMEM, "spin_ns": SPIN_NS},
           "held_sms": held, "clusters": {}}
    for c in CLUSTERS:
        rows = []
        for k in held:
            try:
                runs = [probe(lib, holder, work, sms, c, k) for _ in range(args.repeats)]
            except (HolderTimeout, RuntimeError) as e:
                # No cluster could start beside the holders (they gave up first), or no launch:
                # more SMs held cannot do better.
                rows.append({"held_sms": k, "blocked": str(e)[:200]})
                print(f"c={c:2d} k={k:3d} blocked: {e}", flush=True)
                torch.cuda.synchronize()
                break
            rows.append({"held_sms": k, "resident_ctas": [r["resident_ctas"] for r in runs],
                         "held_distinct": [r["held_distinct"] for r in runs],
                         "held_smids": runs[0]["held_smids"], "first_wave_smids": runs[0]["first_wave_smids"]})
            print(f"c={c:2d} k={k:3d} resident {rows[-1]['resident_ctas']}", flush=True)
        doc["clusters"][str(c)] = rows
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
