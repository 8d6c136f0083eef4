#!/usr/bin/env python3
"""When cuBLAS's nvjet GEMM starts its late clusters, and how much work they carry (issue #15).

The router GEMM (tokens x 384 x 6,144) slows in a staircase beside a few held SMs (x1.0 with 1
held, x1.44 with 2-3, x1.83 with 4-16 at 16,384 tokens) that no schedule of the tile-schedule
probe places (reports/calibration/clusters/README.md). nvjet cannot be instrumented, so this
probe lets the k holders (contention_bench.py's) go at a chosen time t_r after the GEMM starts
and times the GEMM: clusters that could not start beside the holders start at the latest when
they go, so the span as a function of t_r shows when the late clusters would start by
themselves (where the span stops depending on t_r) and how long they run once started (the slope
and offset of span = t_r + w). Times come from one-thread stamp kernels in stream order: one on
the holders' stream just before they launch (each holder gives up max_ns after its start), one
before and one after the GEMM on the measured stream.

A first version watched the free SMs with low-priority spy CTAs; it could not work: spies on
freed SMs kept the GEMM's late clusters from ever finding a free pair (the holders timed out).
Priority matters here: with the GEMM's stream above the holders' (`--priority -1`) the block
scheduler places clusters otherwise (the 8,192-token router slows x1.83 with 2 held, where at
equal priority it does not slow); NCCL's and the compute stream have equal priority by default,
as this probe's do unless asked.

Usage, on a GPU machine with PyTorch and build-device/libtwin_kernels_c.so
(calibrate/build-device.sh --lib):
  python3 calibrate/nvjet_schedule_probe.py --lib build-device/libtwin_kernels_c.so --out release.json
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
import contention_bench  # noqa: E402
from contention_bench import (HIDDEN, Holder, HolderTimeout, gemm_case, launch_config, load_lib,  # noqa: E402
                              nvidia_smi, stream_ptr)

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

HOLDER_SHAPE = (200 * 1024, 640, 2)  # contention_bench.py's file -c holder (kernels/sm_hold.cu)
NEVER_NS = 3_000_000_000
LEAD_NS = 50_000  # a GPU sleep ahead of the stamps, so that the host has enqueued the GEMM


def point(lib: ctypes.CDLL, holder: Holder, work: torch.cuda.Stream, fn: Callable[[], object], k: int,
          release_us: float | None) -> dict:
    """One GEMM beside k holders that go release_us after the GEMM's start (None: after it)."""
    st = torch.zeros(3, dtype=torch.int64, device="cuda")  # holders launched, GEMM start, GEMM end
    at = [ctypes.c_void_p(st.data_ptr() + 8 * i) for i in range(3)]
    # The holders start a few us before the GEMM: max_ns is set from a first estimate of that lead
    # and the release time is reported as measured.
    lead_ns = getattr(point, "lead_ns", 20_000)
    max_ns = NEVER_NS if release_us is None else max(1_000, int(release_us * 1e3 + lead_ns))
    holder.hold(k, work, max_ns=max_ns, stamp=at[0] if k else None)
    lib.twin_sm_hold(1, LEAD_NS, stream_ptr(work))
    lib.twin_stamp(at[1], stream_ptr(work))
    with torch.cuda.stream(work):
        fn()
    lib.twin_stamp(at[2], stream_ptr(work))
    timed_out = False
    try:
        holder.release(work)
    except HolderTimeout:
        timed_out = True  # the holders went at max_ns, as asked
    h, s, e = st.tolist()
    out = {"span_us": round((e - s) / 1e3, 2)}
    if k:
        lead = s - h
        out["released_us"] = round((max_ns - lead) / 1e3, 2) if timed_out else None
        if release_us is None:
            point.lead_ns = lead
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build-device/libtwin_kernels_c.so")
    ap.add_argument("--out", default="release.json")
    ap.add_argument("--tokens", default="16384,24576,20480,32768,49152")
    ap.add_argument("--held", default="1,2,4,10,16")
    ap.add_argument("--steps", type=int, default=24, help="release times from 0 to 1.2 x the held span")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--priority", type=int, default=0, help="the GEMM stream's priority (holders: 0)")
    ap.add_argument("--commit", default="unknown")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("nvjet_schedule_probe: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    lib = load_lib(args.lib)
    lib.twin_sm_hold.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p]
    contention_bench.BF16 = torch.bfloat16
    p = torch.cuda.get_device_properties(0)
    work = torch.cuda.Stream(priority=args.priority)
    holder = Holder(lib, p.multi_processor_count, HOLDER_SHAPE)
    doc = {"provenance": {"gpu": p.name, "sm_count": p.multi_processor_count, "torch": torch.__version__,
                          "cuda": torch.version.cuda, "driver": nvidia_smi("driver_version"),
                          "host": os.uname().nodename, "commit": args.commit, "command": " ".join(sys.argv),
                          "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "holder_shape": list(HOLDER_SHAPE), "gemm_stream_priority": args.priority},
           "cases": []}
    med = statistics.median
    for T in [int(x) for x in args.tokens.split(",")]:
        case = gemm_case("router", T, 384, HIDDEN)
        fn = case.make()
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        alone = med(point(lib, holder, work, fn, 0, None)["span_us"] for _ in range(args.reps))
        row = {"name": case.name, "shape": case.shape, "launch": launch_config(fn), "alone_us": alone,
               "held": []}
        print(f"{case.name}: " + ", ".join(f"{q['name'][:48]} grid {q['grid']}" for q in row["launch"]), flush=True)
        for k in [int(x) for x in args.held.split(",")]:
            spans = [point(lib, holder, work, fn, k, None) for _ in range(args.reps)]
            held_span = med(q["span_us"] for q in spans)
            curve = []
            for i in range(args.steps + 1 if args.steps else 0):
                r = 1.2 * held_span * i / args.steps
                qs = [point(lib, holder, work, fn, k, r) for _ in range(args.reps)]
                rel = [q["released_us"] for q in qs if q["released_us"] is not None]
                curve.append({"release_us": round(med(rel), 2) if rel else None,
                              "span_us": med(q["span_us"] for q in qs)})
            row["held"].append({"held_sms": k, "span_us": held_span, "release_curve": curve})
            print(f"{case.name} k={k}: alone {alone:.1f} us, held {held_span:.1f} (x{held_span / alone:.2f}); "
                  "released at -> span: " + " ".join(
                      f"{c['release_us']:.0f}->{c['span_us']:.0f}" if c["release_us"] is not None else
                      f"none->{c['span_us']:.0f}" for c in curve), flush=True)
        doc["cases"].append(row)
    with open(args.out, "w") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
