#!/usr/bin/env python3
"""Where cuBLAS's nvjet GEMM runs its CTAs beside held SMs, seen from outside (issue #15).

The router GEMM (tokens x 384 x 6,144) slows in a staircase beside a few held SMs (x1.0 with 1
held, x1.44 with 2-3, x1.83 with 4-16 at 16,384 tokens) that no schedule of the tile-schedule
probe places (reports/calibration/clusters/README.md). nvjet cannot be instrumented, so this
probe watches the SMs it leaves free: beside k held SMs (contention_bench.py's holder) the GEMM
runs on a high-priority stream and a low-priority stream of spy CTAs (kernels/cluster_probe.cu
`sm_spy`: 120 KiB of shared memory, so none fits beside a GEMM CTA or a holder; 1 us each, in
clusters of 1 or 2) fills every SM the GEMM leaves free, recording SM, start and end. The block
scheduler serves the higher-priority GEMM's pending clusters first, so a spy runs on an SM only
while no pending GEMM cluster can use it; from the first spy on each SM after the GEMM's last
cluster has been placed, the record shows when each SM's last GEMM CTA ended — hence how many
tiles the late clusters carried and when they started. Each point is also timed without spies
(their effect on the GEMM: `span_us` with and without).

Usage, on a GPU machine with PyTorch and build-device/libtwin_kernels_c.so
(calibrate/build-device.sh --lib):
  python3 calibrate/nvjet_schedule_probe.py --lib build-device/libtwin_kernels_c.so --out spy.json
"""
from __future__ import annotations

from collections.abc import Callable

import argparse
import ctypes
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contention_bench import (HIDDEN, Q_HEADS, V_DIM, Holder, HolderTimeout, gemm_case,  # noqa: E402
                              launch_config, load_lib, nvidia_smi, ptr, stream_ptr)

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

HOLDER_SHAPE = (200 * 1024, 640, 2)  # contention_bench.py's file -c holder (kernels/sm_hold.cu)
SPY_SMEM = 120 * 1024
SPY_NS = 1000
SPY_CTAS = 1 << 16
MERGE_US = 2.0  # spy records closer than this on one SM are one free interval


def cases() -> list:
    out = [gemm_case("router", T, 384, HIDDEN) for T in (8192, 16384, 20480, 24576, 32768, 49152)]
    out.append(gemm_case("o_proj", 4096, HIDDEN, Q_HEADS * V_DIM))
    return out


class Spy:
    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.stream = torch.cuda.Stream(priority=0)  # the lowest priority
        self.start = torch.zeros(SPY_CTAS, dtype=torch.int64, device="cuda")
        self.end = torch.zeros(SPY_CTAS, dtype=torch.int64, device="cuda")
        self.sm = torch.full((SPY_CTAS,), -1, dtype=torch.int32, device="cuda")

    def launch(self, cluster: int, after: torch.cuda.Event, done: torch.Tensor) -> None:
        self.start.zero_(); self.end.zero_(); self.sm.fill_(-1)
        torch.cuda.synchronize()
        self.stream.wait_event(after)
        rc = self.lib.twin_sm_spy(cluster, SPY_CTAS, ptr(self.start), ptr(self.end), ptr(self.sm), SPY_NS,
                                  ptr(done), SPY_SMEM, stream_ptr(self.stream))
        if rc != 0:
            raise RuntimeError(f"spy launch: cudaError {rc}")

    def intervals(self, t0: int) -> dict:
        """Per SM, the merged intervals (us from t0) its spies ran."""
        s, e, m = self.start.tolist(), self.end.tolist(), self.sm.tolist()
        per: dict = {}
        for a, b, sm in sorted(zip(s, e, m)):
            if a == 0 or sm < 0:
                continue
            a_us, b_us = (a - t0) / 1e3, (b - t0) / 1e3
            iv = per.setdefault(sm, [])
            if iv and a_us - iv[-1][1] < MERGE_US:
                iv[-1][1] = max(iv[-1][1], b_us)
            else:
                iv.append([a_us, b_us])
        return {str(sm): [[round(a, 1), round(b, 1)] for a, b in iv] for sm, iv in sorted(per.items())}


def point(lib: ctypes.CDLL, holder: Holder, spy: Spy | None, spy_cluster: int, work: torch.cuda.Stream,
          fn: Callable[[], object], k: int) -> dict:
    stamps = torch.zeros(2, dtype=torch.int64, device="cuda")
    done = torch.zeros(1, dtype=torch.int32, device="cuda")
    holder.hold(k, work)
    lib.twin_stamp(ptr(stamps), None, stream_ptr(work))
    ev = torch.cuda.Event()
    ev.record(work)
    with torch.cuda.stream(work):
        fn()  # enqueued before the spies: both wait for the stamp, the GEMM at higher priority
    if spy is not None:
        spy.launch(spy_cluster, ev, done)
    lib.twin_stamp(ctypes.c_void_p(stamps.data_ptr() + 8), ptr(done), stream_ptr(work))
    try:
        held = holder.release(work)
    except HolderTimeout as e:
        return {"blocked": str(e)[:200]}
    t0, t1 = stamps.tolist()
    out = {"span_us": round((t1 - t0) / 1e3, 2), "held_distinct": held,
           "held_smids": holder.smids[:k].tolist() if k else []}
    if spy is not None:
        out["spy"] = spy.intervals(t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build-device/libtwin_kernels_c.so")
    ap.add_argument("--out", default="spy.json")
    ap.add_argument("--held", default="0,1,2,3,4,6,8,10,12,16")
    ap.add_argument("--spy-clusters", default="2,1")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--commit", default="unknown")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("nvjet_schedule_probe: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    lib = load_lib(args.lib)
    P, I, LL = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    lib.twin_sm_spy.argtypes = [I, I, P, P, P, LL, P, I, P]
    lib.twin_stamp.argtypes = [P, P, P]
    p = torch.cuda.get_device_properties(0)
    work = torch.cuda.Stream(priority=-1)  # above the spies' 0 (lower is higher)
    holder = Holder(lib, p.multi_processor_count, HOLDER_SHAPE)
    spy = Spy(lib)
    held = [int(x) for x in args.held.split(",")]
    doc = {"provenance": {"gpu": p.name, "sm_count": p.multi_processor_count, "torch": torch.__version__,
                          "cuda": torch.version.cuda, "driver": nvidia_smi("driver_version"),
                          "host": os.uname().nodename, "commit": args.commit, "command": " ".join(sys.argv),
                          "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "holder_shape": list(HOLDER_SHAPE), "spy_smem_bytes": SPY_SMEM, "spy_ns": SPY_NS},
           "cases": []}
    for case in cases():
        fn = case.make()
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        row = {"name": case.name, "shape": case.shape, "launch": launch_config(fn), "points": []}
        for k in held:
            pt = {"held_sms": k}
            alone = [point(lib, holder, None, 0, work, fn, k) for _ in range(args.reps)]
            if any("blocked" in a for a in alone):
                pt["blocked"] = True
                row["points"].append(pt)
                continue
            pt["span_us"] = statistics.median(a["span_us"] for a in alone)
            pt["held_smids"] = alone[0]["held_smids"]
            for c in [int(x) for x in args.spy_clusters.split(",")]:
                runs = [point(lib, holder, spy, c, work, fn, k) for _ in range(args.reps)]
                pt[f"spy_c{c}"] = runs
            row["points"].append(pt)
        doc["cases"].append(row)
        base = row["points"][0].get("span_us")
        print(f"{case.name} {case.shape}: " + " ".join(
            f"{q['held_sms']}:{q['span_us'] / base:.2f}" + "".join(
                f"/{statistics.median(r['span_us'] for r in q[key]) / base:.2f}"
                for key in sorted(q) if key.startswith("spy_c") and all("span_us" in r for r in q[key]))
            if "span_us" in q else f"{q['held_sms']}:blocked" for q in row["points"]), flush=True)
    with open(args.out, "w") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
