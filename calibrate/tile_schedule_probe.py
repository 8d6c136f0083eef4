#!/usr/bin/env python3
"""Where a persistent clustered kernel's late CTAs go, made visible (issue #15).

cuBLAS's nvjet GEMMs run 132 CTAs in clusters of 2 and, with a few SMs held by NCCL-like
holders, slow in a staircase (the router GEMM with 256 tiles: x1.0 with 1 held, x1.44 with 2-3,
x1.83 with 4-16; reports/calibration/contention/README.md) that neither static tile lists nor
a shared counter, as the twin models them, place. This probe runs a kernel of the same shape —
132 CTAs in clusters of 2, one per SM (200 KiB of shared memory), `tiles` tiles of a fixed
50 us each — whose CTAs take tiles from static lists (mode 0), a shared counter (1) or a fixed
first tile and then the counter (2), or static lists numbered from the last CTA, so that the
longer lists are the last CTAs' (3), beside k held SMs (contention_bench.py's holder), and
records every tile's start, end and SM. Its span in tile times is the staircase of that
schedule on the real hardware scheduler: if one mode repeats nvjet's steps, the per-tile
record shows where the late clusters landed and when they started.

Usage, on a GPU machine with PyTorch and build-device/libtwin_kernels_c.so
(calibrate/build-device.sh --lib):
  python3 calibrate/tile_schedule_probe.py --lib build-device/libtwin_kernels_c.so --out tiles.json
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contention_bench import Holder, HolderTimeout, load_lib, nvidia_smi, ptr, stream_ptr  # noqa: E402

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

HOLDER_SHAPE = (200 * 1024, 640, 2)  # contention_bench.py's file -c holder (kernels/sm_hold.cu)
PROBE_SMEM = 200 * 1024
TILE_NS = 50_000
MODES = {0: "static", 1: "counter", 2: "first_static", 3: "static_last_long"}


def run(lib: ctypes.CDLL, holder: Holder, work: torch.cuda.Stream, ctas: int, cluster: int, tiles: int,
        mode: int, k: int, smem: int, policy: int = -1) -> dict:
    """One launch beside k held SMs: its span in tile times and every tile's record."""
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    start = torch.zeros(tiles, dtype=torch.int64, device="cuda")
    end = torch.zeros(tiles, dtype=torch.int64, device="cuda")
    sm = torch.full((tiles,), -1, dtype=torch.int32, device="cuda")
    holder.hold(k, work)
    rc = lib.twin_tile_schedule_probe(cluster, ctas, tiles, mode, TILE_NS, ptr(counter), ptr(start), ptr(end),
                                      ptr(sm), smem, policy, stream_ptr(work))
    try:
        held = holder.release(work)
    except HolderTimeout as e:  # the kernel could not start beside the holders (they gave up)
        return {"held_sms": k, "blocked": str(e)[:200], "held_smids": holder.smids[:k].tolist()}
    if rc != 0:
        raise RuntimeError(f"tile schedule probe: cudaError {rc}")
    s, e, m = start.tolist(), end.tolist(), sm.tolist()
    t0 = min(s)
    return {"held_sms": k, "held_distinct": held, "held_smids": holder.smids[:k].tolist() if k else [],
            "span_tiles": (max(e) - t0) / TILE_NS,
            "tiles": [[round((a - t0) / TILE_NS, 3), sm_] for a, sm_ in zip(s, m)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build-device/libtwin_kernels_c.so")
    ap.add_argument("--out", default="tiles.json")
    ap.add_argument("--tiles", default="128,256,320,384,512")
    ap.add_argument("--held", default="0,1,2,3,4,5,6,8,10,12,16,24,32")
    ap.add_argument("--modes", default="0,1,2,3", help="schedules: " + ", ".join(f"{k} {v}" for k, v in MODES.items()))
    ap.add_argument("--cluster", type=int, default=2)
    ap.add_argument("--policy", type=int, default=-1,
                    help="cluster scheduling policy: -1 not set, 0 default, 1 spread, 2 load-balancing")
    ap.add_argument("--ctas", type=int, default=0, help="CTAs (default: one per SM)")
    ap.add_argument("--smem-KiB", type=int, default=PROBE_SMEM // 1024, help="shared memory per CTA")
    ap.add_argument("--commit", default="unknown")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("tile_schedule_probe: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    lib = load_lib(args.lib)
    P, I, LL = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    lib.twin_tile_schedule_probe.argtypes = [I, I, I, I, LL, P, P, P, P, I, I, P]
    p = torch.cuda.get_device_properties(0)
    sms = p.multi_processor_count
    work = torch.cuda.Stream()
    holder = Holder(lib, sms, HOLDER_SHAPE)
    doc = {"provenance": {"gpu": p.name, "sm_count": sms, "torch": torch.__version__, "cuda": torch.version.cuda,
                          "driver": nvidia_smi("driver_version"), "host": os.uname().nodename,
                          "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "command": " ".join(sys.argv), "commit": args.commit, "holder_shape": list(HOLDER_SHAPE),
                          "probe_smem_bytes": args.smem_KiB * 1024, "tile_ns": TILE_NS,
                          "cluster": args.cluster, "ctas": args.ctas or sms,
                          "cluster_scheduling_policy": args.policy},
           "modes": MODES, "runs": []}
    for tiles in [int(x) for x in args.tiles.split(",")]:
        for mode in [int(x) for x in args.modes.split(",")]:
            row = {"tiles": tiles, "mode": MODES[mode], "points": []}
            for k in [int(x) for x in args.held.split(",")]:
                row["points"].append(run(lib, holder, work, args.ctas or sms, args.cluster, tiles, mode, k,
                                         args.smem_KiB * 1024, args.policy))
            doc["runs"].append(row)
            print(f"tiles {tiles:4d} {MODES[mode]:13s} span/tile: " +
                  " ".join(f"{q['held_sms']}:{q['span_tiles']:.2f}" if "span_tiles" in q else f"{q['held_sms']}:blocked"
                           for q in row["points"]), flush=True)
    with open(args.out, "w") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
