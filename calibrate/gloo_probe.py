#!/usr/bin/env python3
"""How PyTorch's gloo collectives scale with the ranks on one host (issue #17).

The twin prices the optimizer's gloo collectives on CPU tensors (hardware/collective.hpp): an
all-reduce as gloo's ring, 2(n - 1) hops one after another for a scalar, and an all-to-all as
every peer's part posted at once, one hop plus the bytes. On JUPITER the hop latency (248 us) and
the rate (0.33 GB/s a rank) are fitted to JOB.md's figures. This probe checks the shape of the
mechanism where it can be run: n processes of one host over loopback TCP (no GPU needed), for
n = 2, 3, 4, 6, 8, 12, 16, the median time of an all-reduce of one float and of an all_to_all_single of
--a2a-MB per rank. If the ring holds, the all-reduce grows like 2(n - 1) (recursive doubling
would grow like log2 n); the fitted slope is loopback's hop, a floor for a network's.

Usage (any machine with PyTorch; the device machine's 16 cores for up to 16 ranks):
  python3 calibrate/gloo_probe.py --ranks 2,3,4,6,8,12,16 --reps 200 --a2a-MB 103 --out gloo.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:  # --help needs no PyTorch
    torch = None


def worker(rank: int, n: int, port: int, reps: int, a2a_bytes: int, queue: object) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    x = torch.ones(1)
    times = []
    for i in range(reps + 10):  # 10 warm-up
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(x)
        if i >= 10:
            times.append(time.perf_counter() - t)
    elems = a2a_bytes // 4 // n * n
    src, dst = torch.ones(elems), torch.empty(elems)
    a2a = []
    for i in range(6):  # 1 warm-up
        dist.barrier()
        t = time.perf_counter()
        dist.all_to_all_single(dst, src)
        if i >= 1:
            a2a.append(time.perf_counter() - t)
    if rank == 0:
        queue.put({"ranks": n, "all_reduce_median_s": statistics.median(times),
                   "all_reduce_p10_s": sorted(times)[len(times) // 10],
                   "all_to_all_bytes_per_rank": elems * 4,
                   "all_to_all_median_s": statistics.median(a2a)})
    dist.destroy_process_group()


def host_provenance(probe: str) -> dict:
    """What a host-side probe's file records of its run (also cpu_optimizer_probe.py's)."""
    return {"probe": probe, "command": " ".join(sys.argv),
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "torch": torch.__version__, "cpus": os.cpu_count()}


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ranks", default="2,3,4,6,8,12,16")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--a2a-MB", type=float, default=103)
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if torch is None:
        print("gloo_probe.py: needs PyTorch", file=sys.stderr)
        return 3
    rows = []
    ctx = mp.get_context("spawn")
    for k, n in enumerate(int(v) for v in args.ranks.split(",")):
        q = ctx.SimpleQueue()
        procs = [ctx.Process(target=worker, args=(r, n, args.port + k, args.reps,
                                                  int(args.a2a_MB * 1e6), q)) for r in range(n)]
        for p in procs:
            p.start()
        row = q.get()
        for p in procs:
            p.join()
        rows.append(row)
        print(json.dumps(row), flush=True)
    ys = [r["all_reduce_median_s"] for r in rows]
    ring = slope([2.0 * (r["ranks"] - 1) for r in rows], ys)
    rd = slope([2.0 * math.ceil(math.log2(r["ranks"])) for r in rows], ys)

    def rms(fit, xs):
        return math.sqrt(statistics.mean((fit[0] + fit[1] * x - y) ** 2 for x, y in zip(xs, ys)))

    out = {
        **host_provenance("calibrate/gloo_probe.py"),
        "rows": rows,
        "ring_fit": {"fixed_s": ring[0], "hop_s": ring[1],
                     "rms_s": rms(ring, [2.0 * (r["ranks"] - 1) for r in rows])},
        "recursive_doubling_fit": {"fixed_s": rd[0], "step_s": rd[1],
                                   "rms_s": rms(rd, [2.0 * math.ceil(math.log2(r["ranks"]))
                                                     for r in rows])},
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: out[k] for k in ("ring_fit", "recursive_doubling_fit")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
