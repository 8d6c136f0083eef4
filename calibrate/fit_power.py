#!/usr/bin/env python3
"""Fits the power cap's controller (hardware/power.hpp, issue #15) to the burst, recovery and
states files of power_transient_probe.py, tick for tick the model the twin runs. Standard library
only.

The data, one card's (reports/calibration/grouped-gemm/README.md, "How long heavy load lasts"):
  --bursts FILE     kernels queued behind N grouped up projections after half a second of a
                    bandwidth-bound kernel, and the projections themselves call by call
  --bursts-idle FILE  the same after half a second of an empty GPU
  --recovery FILE   kernels behind seven projections and a gap of empty GPU
  --states FILE     each kernel fresh and after 1.5 s of itself back to back (--states): which
                    classes the cap catches when alone (cuBLAS and the grouped GEMM slow,
                    FlexAttention does not) — what pins each class's demand
  --mix FILE        power_mix_probe.py: a cuBLAS GEMM alternated for 2.5 s with empty GPU, a
                    bandwidth-bound kernel or a copy (a copy draws as an idle GPU here), its
                    median over the second half — what the average power of a mix does
The card's measured powers (--idle-W, --bandwidth-W: power_transient_probe.py --classes) and its
limit are given; the rest is fitted by Nelder–Mead on the log error of every median and every
call (each trial's kernel starts from its measured time behind one projection: fresh):
the filter's and delay's time constants, the controller's gains down (above the limit) and up
(below it), each tensor-core class's demand at the full clock and its clock sensitivity.

  python3 calibrate/fit_power.py --bursts B.json --bursts-idle BI.json --recovery R.json \\
      --states S.json --idle-W 71 --bandwidth-W 491 [--iterations 600 --restarts 3] [--out power.json]
  python3 calibrate/fit_power.py ... --params power.json      # the table for given parameters
  python3 calibrate/fit_power.py --recovery R.json --states S.json --idle-W 82 --bandwidth-W 614 \\
      --params power.json      # a card with no burst files: the fit held out on its others
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable

# The probe's kernels and the profile's classes (power.hpp's PowerModel).
CLASS_OF = {"grouped_mm_up_96x1360": "grouped_gemm", "cublas_65536x3584x6144": "gemm",
            "flex_full_fwd": "attention_fwd", "flex_full_bwd": "attention_bwd"}
CLASSES = ["gemm", "grouped_gemm", "attention_fwd", "attention_bwd"]
# cuBLAS's demand is tied to the grouped GEMM's: both are tensor-core GEMMs (both capped when
# sustained, --classes), and in these files only the grouped GEMM runs long enough to set it.
FITTED = ["filter_s", "delay_s", "gain_up_per_s", "gain_down_per_s"] + \
    [f"{c}.{k}" for c in CLASSES for k in ("demand_W", "clock_sensitivity")
     if f"{c}.{k}" != "gemm.demand_W"]
STEP_S = 0.25e-3  # the controller's tick here (finer than the data resolve)
# Where the search starts: a first fit's values (2026-12-06, 400 iterations × 2 runs from round
# guesses: filter 35 ms, delay 33 ms, gains 5/s, the step law's class values; rms 0.0426).
START = {"filter_s": 0.001, "delay_s": 0.024, "gain_up_per_s": 4.6, "gain_down_per_s": 12.8,
         "gemm.clock_sensitivity": 0.447, "grouped_gemm.demand_W": 1049,
         "grouped_gemm.clock_sensitivity": 0.292, "attention_fwd.demand_W": 645,
         "attention_fwd.clock_sensitivity": 1.109, "attention_bwd.demand_W": 678,
         "attention_bwd.clock_sensitivity": 0.689}
SCALE = {"filter_s": 0.005, "delay_s": 0.008, "gain_up_per_s": 2.0, "gain_down_per_s": 4.0}
# The clock never falls below this: a floor the data never reach (the H200's sustained GEMM
# settles near 0.72), so that a runaway integral cannot stop a kernel (hardware/power.hpp).
MIN_CLOCK = 0.3
# A class's clock sensitivity stays within the profile's range (hardware/profile_power.cpp):
# beyond twice the clock's own effect a fit is compensating for something the law lacks.
MAX_SENSITIVITY = 2.0


class State:
    """power.hpp's PowerState, line for line; starts at rest in `prior_W` (half a second of it)."""

    def __init__(self, p: dict, prior_W: float) -> None:
        self.p = p
        self.filtered = prior_W
        self.delayed = [prior_W] * max(1, round(p["delay_s"] / p["step_s"]))
        self.head = 0
        self.clock = 1.0
        self.tick_s = 0.0
        self.pending_s = 0.0
        self.pending_J = 0.0

    def tick(self, power: float) -> None:
        p = self.p
        self.filtered += (power - self.filtered) * p["step_s"] / p["filter_s"]
        seen = self.delayed[self.head]
        self.delayed[self.head] = self.filtered
        self.head = (self.head + 1) % len(self.delayed)
        err = (p["limit_W"] - seen) / p["limit_W"]
        gain = p["gain_up_per_s"] if err > 0 else p["gain_down_per_s"]
        self.clock = min(1.0, max(MIN_CLOCK, self.clock + gain * err * p["step_s"]))
        self.tick_s += p["step_s"]

    def advance(self, dt: float, power: float) -> None:
        step = self.p["step_s"]
        while dt > 0:
            take = min(dt, step - self.pending_s)
            self.pending_J += power * take
            self.pending_s += take
            dt -= take
            if self.pending_s >= step * (1 - 1e-9):
                self.tick(self.pending_J / self.pending_s)
                self.pending_s = self.pending_J = 0.0

    def run(self, cls: str, alone_s: float) -> float:
        """Seconds a kernel of class cls (None: bandwidth-bound) takes; alone_s at full clock."""
        p = self.p
        done = took = 0.0
        while True:  # to the next tick (the clock changes only there) or the kernel's end
            s = p[f"{cls}.clock_sensitivity"] if cls else 0.0
            rate = 1 / (1 + s * (1 / self.clock - 1))
            power = (p["idle_W"] + (p[f"{cls}.demand_W"] - p["idle_W"]) * self.clock ** 2
                     if cls else p["bandwidth_W"])
            to_tick, left = p["step_s"] - self.pending_s, (alone_s - done) / rate
            if left <= to_tick:
                self.advance(left, power)
                return took + left
            done += rate * to_tick
            took += to_tick
            self.advance(to_tick, power)


SUSTAIN_S = 1.5  # power_transient_probe.py --states: back to back this long before the timed calls


def fresh_times(bursts: dict | None, recovery: dict | None, states: dict | None) -> dict:
    """Each kernel's fresh seconds: behind one projection in the bursts file (the projection's
    own: the fastest of its first three calls), or, without bursts (a card that has only
    --recovery and --states files), after the recovery file's longest gap and the states file's
    fresh projection."""
    fresh = {}
    if bursts:
        for r in bursts["rows"]:
            if r.get("gemms_before") == 1:
                fresh[r["kernel"]] = statistics.median(r["ms"]) * 1e-3
        calls = [r for r in bursts["rows"] if "burst_calls_ms" in r]
        fresh["grouped_mm_up_96x1360"] = min(calls[0]["burst_calls_ms"][:3]) * 1e-3
        return fresh
    longest = max(r["gap_ms"] for r in recovery["rows"])
    for r in recovery["rows"]:
        if r["gap_ms"] == longest:
            fresh[r["kernel"]] = statistics.median(r["ms"]) * 1e-3
    for r in states["rows"]:
        if r["kernel"] == "grouped_mm_up_96x1360":
            fresh[r["kernel"]] = statistics.median(r["fresh_ms"]) * 1e-3
    return fresh


def observations(bursts: dict | None, idle: dict | None, recovery: dict | None,
                 states: dict | None) -> list:
    """(prior, [(class, fresh_s) or ('gap', s)], measured ms of the last kernel or of each call)."""
    fresh = fresh_times(bursts, recovery, states)
    up = (CLASS_OF["grouped_mm_up_96x1360"], fresh["grouped_mm_up_96x1360"])
    obs = []
    for data, prior in ((bursts, "bandwidth"), (idle, "idle")) if bursts else ():
        for r in data["rows"]:
            if "burst_calls_ms" in r:
                obs.append((prior, [up] * len(r["burst_calls_ms"]), r["burst_calls_ms"]))
            elif r["gemms_before"] > 0:  # right behind the light kernel: not explained (README)
                k = (CLASS_OF[r["kernel"]], fresh[r["kernel"]])
                obs.append((prior, [up] * r["gemms_before"] + [k], [statistics.median(r["ms"])]))
    longest = max((r["gap_ms"] for r in recovery["rows"]), default=0) if recovery else 0
    for r in recovery["rows"] if recovery else []:
        if not bursts and r["gap_ms"] == longest:
            continue  # its fresh time
        gap = [("gap", r["gap_ms"] * 1e-3)] if r["gap_ms"] > 0 else []
        k = (CLASS_OF[r["kernel"]], fresh[r["kernel"]])
        obs.append(("bandwidth", [up] * 7 + gap + [k], [statistics.median(r["ms"])]))
    for r in states["rows"] if states else []:
        if r["kernel"] not in fresh:
            continue
        # Its sustained time over fresh, both from this file, applied to the bursts' fresh time.
        ratio = statistics.median(r["sustained_ms"][1:]) / statistics.median(r["fresh_ms"])
        k = (CLASS_OF[r["kernel"]], fresh[r["kernel"]])
        obs.append(("bandwidth", [k] * round(SUSTAIN_S / k[1]) + [k], [fresh[r["kernel"]] * 1e3 * ratio]))
    return obs


def tied(p: dict) -> dict:
    return {**p, "gemm.demand_W": p["grouped_gemm.demand_W"]}


def predict(p: dict, prior: str, seq: list) -> list:
    """ms of each kernel of seq after half a second of the prior state."""
    p = tied(p)
    st = State(p, p["bandwidth_W"] if prior == "bandwidth" else p["idle_W"])
    out = []
    for cls, s in seq:
        if cls == "gap":
            st.advance(s, p["idle_W"])
        else:
            out.append(st.run(cls, s) * 1e3)
    return out


def mix_observations(mix: dict) -> list:
    """power_mix_probe.py's rows: ('mix', sequence, [measured median ms of its second half])."""
    fresh = mix["fresh_ms"] * 1e-3
    obs = []
    for r in mix["rows"]:
        other_s = r.get("other_ms", r["ratio"] * mix["fresh_ms"]) * 1e-3
        other = [] if r["ratio"] == 0 else \
            [(None, other_s)] if r["other"] == "bandwidth-bound kernel" else [("gap", other_s)]
        seq = ([("gemm", fresh)] + other) * len(r["ms"])
        obs.append(("mix", seq, [r["slowdown"] * mix["fresh_ms"]]))
    return obs


def errors(p: dict, obs: list) -> list:
    """(prior, what, index, twin ms, measured ms) for every point."""
    rows = []
    for prior, seq, measured in obs:
        if prior == "mix":  # after an idle GPU; the GEMMs' median over the second half
            kernels = [cls for cls, _ in seq if cls != "gap"]
            got = [g for g, cls in zip(predict(p, "idle", seq), kernels) if cls == "gemm"]
            beside = {"gap": "empty GPU or a copy", None: "a bandwidth-bound kernel"}
            what = f"gemm, {len(got)} calls beside " + (beside[seq[1][0]] if seq[1][0] != "gemm" else "nothing")
            rows.append((prior, what, 0, statistics.median(got[len(got) // 2:]), measured[0]))
            continue
        got = predict(p, prior, seq)
        if len(measured) == 1:
            gap = sum(s for c, s in seq if c == "gap") * 1e3
            behind = "itself" if seq[0] == seq[-1] else "projections"
            what = f"{seq[-1][0]} behind {len(got) - 1} {behind}" + (f", {gap:g} ms gap" if gap else "")
            rows.append((prior, what, 0, got[-1], measured[0]))
        else:
            rows += [(prior, "grouped_gemm call", i + 1, g, m)
                     for i, (g, m) in enumerate(zip(got, measured))]
    return rows


def admissible(p: dict) -> bool:
    """Where the search may go: positive time constants and gains, and a tensor-core class
    drawing at least what a bandwidth-bound kernel does (every one measured did: --classes, the
    H200's SDPA and GEMMs capped at ~690 W, its elementwise kernel 614 W). Without that floor the
    search drifts where attention's demand, under the limit, barely matters: to the idle floor
    and below, for <0.1 point of rms. Sensitivities stay within the profile's [0, 2] (the H200's
    files alone took FlexAttention's forward to 2.02)."""
    return min(p["filter_s"], p["delay_s"]) >= p["step_s"] and \
        min(p["gain_up_per_s"], p["gain_down_per_s"]) > 0 and \
        min(p[f"{c}.demand_W"] for c in CLASSES if c != "gemm") >= p["bandwidth_W"] and \
        all(0 <= p[f"{c}.clock_sensitivity"] <= MAX_SENSITIVITY for c in CLASSES)


def rms(p: dict, obs: list) -> float:
    e = [math.log(g / m) for *_, g, m in errors(p, obs)]
    return math.sqrt(sum(x * x for x in e) / len(e))


def nelder_mead(f: Callable[[list], float], x0: list, steps: list, iterations: int) -> list:
    pts = [x0] + [[x + (steps[j] if j == i else 0) for j, x in enumerate(x0)]
                  for i in range(len(x0))]
    vals = [f(x) for x in pts]
    for it in range(iterations):
        order = sorted(range(len(pts)), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        cen = [sum(pt[j] for pt in pts[:-1]) / (len(pts) - 1) for j in range(len(x0))]
        xr = [c + (c - w) for c, w in zip(cen, pts[-1])]
        fr = f(xr)
        if fr < vals[0]:
            xe = [c + 2 * (c - w) for c, w in zip(cen, pts[-1])]
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [c + 0.5 * (w - c) for c, w in zip(cen, pts[-1])]
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [[b + 0.5 * (x - b) for b, x in zip(pts[0], pt)] for pt in pts[1:]]
                vals = [vals[0]] + [f(x) for x in pts[1:]]
        if it % 100 == 0:
            print(f"iteration {it}: rms log error {vals[0]:.4f}", file=sys.stderr, flush=True)
    return pts[min(range(len(pts)), key=lambda i: vals[i])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bursts", help="(with --bursts-idle; without them, --recovery and --states)")
    ap.add_argument("--bursts-idle")
    ap.add_argument("--recovery", help="(optional: without it, the bursts alone)")
    ap.add_argument("--states", help="(optional) a --states file of the same card")
    ap.add_argument("--mix", help="(optional) a power_mix_probe.py file of the same card")
    ap.add_argument("--idle-W", type=float, required=True)
    ap.add_argument("--bandwidth-W", type=float, required=True)
    ap.add_argument("--limit-W", type=float, default=700.0)
    ap.add_argument("--iterations", type=int, default=600)
    ap.add_argument("--restarts", type=int, default=3,
                    help="Nelder–Mead runs, each from the last one's best (escapes a collapsed simplex)")
    ap.add_argument("--params", help="evaluate these parameters (a --out file) instead of fitting")
    ap.add_argument("--start", help="start the search from these parameters (a --out file)")
    ap.add_argument("--fixed", default="",
                    help="comma-separated parameters held at their start values (a card whose "
                         "files do not pin them)")
    ap.add_argument("--out", help="write the parameters here (JSON)")
    a = ap.parse_args()
    load = lambda path: json.load(open(path))  # noqa: E731
    maybe = lambda path: load(path) if path else None  # noqa: E731
    if not (a.bursts and a.bursts_idle) and not (a.recovery and a.states):
        ap.error("give --bursts and --bursts-idle, or --recovery and --states")
    obs = observations(maybe(a.bursts), maybe(a.bursts_idle), maybe(a.recovery), maybe(a.states))
    obs += mix_observations(load(a.mix)) if a.mix else []
    fixed = {"step_s": STEP_S, "idle_W": a.idle_W, "bandwidth_W": a.bandwidth_W,
             "limit_W": a.limit_W}
    if a.params:
        p = {**load(a.params), **fixed}
    else:
        start = {**START, **(load(a.start) if a.start else {})}
        # Another card's fit may start below this card's floor (admissible): raise it there.
        for c in CLASSES:
            start[f"{c}.demand_W"] = max(start.get(f"{c}.demand_W", 0), a.bandwidth_W)
            start[f"{c}.clock_sensitivity"] = min(start[f"{c}.clock_sensitivity"], MAX_SENSITIVITY)
        held = {k: start[k] for k in a.fixed.split(",") if k}
        free = [k for k in FITTED if k not in held]
        steps = [SCALE.get(k, 100 if k.endswith("_W") else 0.2) for k in free]
        best = [start[k] for k in free]

        def objective(x: list) -> float:
            p = tied({**fixed, **held, **dict(zip(free, x))})
            return rms(p, obs) if admissible(p) else 1e9
        for _ in range(a.restarts):
            best = nelder_mead(objective, best, steps, a.iterations)
        p = tied({**fixed, **held, **dict(zip(free, best))})
    for prior, what, i, g, m in errors(p, obs):
        print(f"{prior:9s} {what:40s} {i:3d} twin {g:7.3f} ms measured {m:7.3f} ms "
              f"{100 * (g / m - 1):+6.1f}%")
    print(f"rms log error {rms(p, obs):.4f}")
    print(json.dumps({k: round(v, 6) for k, v in p.items()}, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({k: round(v, 6) for k, v in p.items()}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
