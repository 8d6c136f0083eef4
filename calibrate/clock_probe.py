#!/usr/bin/env python3
"""One grouped GEMM (torch._grouped_mm, the micro-step's expert up-projection: 96 experts of
1,360 rows, n 3,584, k 6,144) timed back to back and after idle gaps of 2, 10 and 50 ms: a GPU
kept busy runs its GEMMs at its power-capped clock, one that idled between them faster
(reports/calibration/grouped-gemm/README.md). With --lib (build-device/libtwin_kernels_c.so) it
also reads the SM clock over the launches themselves (the clock observer of
calibrate/contention_bench.py: SM cycles against global time), and over 5 s of back-to-back
launches in 100 ms windows (how the power limiter settles). With --smi it samples nvidia-smi
every 20 ms during each phase (SM and memory clocks, power, the clock-event reasons: why the
driver holds the clocks down) and reports them per phase. Usage, on a GPU machine:
  python3 calibrate/clock_probe.py [--lib build-device/libtwin_kernels_c.so] [--smi] [--out clock.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

E, N, K, M = 96, 3584, 6144, 1360


def clock() -> str:
    """The SM clock and power draw nvidia-smi reports now."""
    return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()


SMI_FIELDS = "clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active"


class SmiSampler:
    """nvidia-smi sampling every 20 ms in the background; samples() splits them by wall time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,{SMI_FIELDS}", "--format=csv,noheader,nounits",
                                      "-lms", "20"], stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []

    def stop(self) -> None:
        self.proc.terminate()
        out, _ = self.proc.communicate()
        self.lines = [line for line in out.splitlines() if line.strip()]

    def phase(self, t0: float, t1: float) -> dict:
        """Medians of the samples taken between wall times t0 and t1, and every reason seen."""
        import datetime
        rows = []
        for line in self.lines:
            f = [x.strip() for x in line.split(",")]
            try:
                t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                rows.append((t, float(f[1]), float(f[2]), float(f[3]), f[4]))
            except (ValueError, IndexError):
                continue
        rows = [r for r in rows if t0 <= r[0] <= t1]
        if not rows:
            return {"samples": 0}
        return {"samples": len(rows), "sm_clock_MHz": statistics.median(r[1] for r in rows),
                "mem_clock_MHz": statistics.median(r[2] for r in rows),
                "power_W": statistics.median(r[3] for r in rows),
                "reasons": sorted({r[4] for r in rows})}


def run(f: Callable[[], object], gap_s: float, reps: int = 20, observer: object = None) -> dict:
    """Median ms of `reps` launches of f, each after an idle gap of gap_s (0: back to back), and
    with an observer, the mean SM clock over the same launches in a second pass (its warp takes a
    block slot, which would keep one SM from the grouped GEMM's CTAs)."""
    out = {"gap_s": gap_s, "median_ms": timed(f, gap_s, reps)[0]}
    if observer is not None:
        out["sm_clock_MHz"] = timed(f, gap_s, reps, observer)[1]
    return out


def timed(f: Callable[[], object], gap_s: float, reps: int, observer: object = None) -> tuple:
    """(median ms, median SM clock or None) of reps launches."""
    ts, mhz = [], []
    work = torch.cuda.current_stream()
    if observer is not None and not gap_s:
        observer.start(work)
        observer.mark.fill_(1)
    for i in range(reps):
        if gap_s:
            torch.cuda.synchronize()
            time.sleep(gap_s)
            if observer is not None:
                observer.start(work)
                observer.mark.fill_(1)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        if gap_s and observer is not None:
            observer.mark.fill_(2)
            mhz.append(observer.MHz())
        ts.append((s, e))
    if observer is not None and not gap_s:
        observer.mark.fill_(2)
        mhz.append(observer.MHz())
    torch.cuda.synchronize()
    ok = mhz and all(m is not None for m in mhz)
    return statistics.median(x.elapsed_time(y) for x, y in ts), statistics.median(mhz) if ok else None


def sustained(f: Callable[[], object], lib: object, seconds: float = 5.0, window_ms: float = 100.0) -> list[dict]:
    """The SM clock in windows of ~window_ms over `seconds` of back-to-back launches, with nothing
    idle between windows (one observer per window, one at a time, read at the end; its warp takes
    an SM slot, so these launches are slower than alone: the clock is the figure here)."""
    from contention_bench import ClockObserver
    per_call = run(f, 0, 5)["median_ms"]
    calls = max(1, int(window_ms / per_call))
    work = torch.cuda.current_stream()
    shared = torch.cuda.Stream()  # one observer at a time: each takes one SM slot
    observers = [ClockObserver(lib, int((seconds + 10) * 1e9), shared) for _ in range(int(seconds * 1e3 / window_ms))]
    for o in observers:
        o.start(work)
        o.mark.fill_(1)
        for _ in range(calls):
            f()
        o.mark.fill_(2)
    torch.cuda.synchronize()
    rows, t0 = [], None
    for o in observers:
        a, _, b, _ = o.out.tolist()
        t0 = a if t0 is None else t0
        rows.append({"t_s": round((a - t0) * 1e-9, 4), "window_s": round((b - a) * 1e-9, 4), "sm_clock_MHz": o.MHz()})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", help="libtwin_kernels_c.so: read the SM clock over the launches")
    ap.add_argument("--out", help="write the results here (JSON)")
    ap.add_argument("--smi", action="store_true", help="sample nvidia-smi during each phase")
    args = ap.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("clock_probe: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    observer, lib = None, None
    if args.lib:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from contention_bench import ClockObserver, load_lib
        lib = load_lib(args.lib)
        observer = ClockObserver(lib)
    a = torch.randn(E * M, K, device="cuda", dtype=torch.bfloat16) * 0.1
    b = torch.randn(E, K, N, device="cuda", dtype=torch.bfloat16) * 0.1
    offs = torch.arange(M, E * M + 1, M, device="cuda", dtype=torch.int32)

    def f() -> object:
        return torch._grouped_mm(a, b, offs=offs)

    for _ in range(3):
        f()
    torch.cuda.synchronize()
    doc = {"kernel": f"torch._grouped_mm {E} x {M} rows, n {N}, k {K}", "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0), "command": " ".join(sys.argv), "runs": []}
    smi = SmiSampler() if args.smi else None
    walls = []
    for name, gap, reps in [("back-to-back", 0, 60), ("gap 2 ms", 0.002, 20), ("gap 10 ms", 0.010, 20),
                            ("gap 50 ms", 0.050, 20), ("back-to-back again", 0, 60)]:
        t0 = time.time()
        r = run(f, gap, reps, observer)
        walls.append((t0, time.time()))
        print(name, r, flush=True)
        doc["runs"].append({"name": name, **r})
    if smi is not None:
        time.sleep(0.2)
        smi.stop()
        for run_doc, (t0, t1) in zip(doc["runs"], walls):
            run_doc["nvidia_smi"] = smi.phase(t0, t1)
            print(run_doc["name"], "nvidia-smi:", run_doc["nvidia_smi"], flush=True)
    doc["idle_nvidia_smi"] = clock()
    if lib is not None:
        doc["sustained"] = sustained(f, lib)
        print("sustained:", [(r["t_s"], round(r["sm_clock_MHz"] or 0)) for r in doc["sustained"]], flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
