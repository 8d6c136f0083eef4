#!/usr/bin/env python3
"""Small-row cuBLAS launches as rounds of streaming CTAs: an analysis the model does not use (issue #15).

A GEMM of at most 192 rows streams its weights once from HBM (files u, v). Read as a fluid: the
launch's clusters start on the usable SMs of the profile's cluster table (mechanism 1); each
CTA spends a set-up t_s, then streams its compulsory bytes B (weights and activations over the
CTAs) at min(r, R / CTAs streaming), never faster than its multiply-adds at F; a cluster that
ends frees its SMs to the next. T(k) / T(0) against the measured slowdowns; the worst point per
launch as `test_calibrate` reads them (points below 0.6 of the highest left out). `--fit`
grid-searches t_s, r, F, R on the given files (median of the launches' worst |miss|), else the
given parameters are evaluated. `--unstretched-us`: time of every measured launch that held SMs do
not stretch (file q's flush write-back, README "What file q's flush adds").

  python3 calibrate/small_row_fluid.py --fit reports/calibration/contention/h200-2026-12-03-contention-p.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import statistics

NVJET = re.compile(r"nvjet_sm90_tst_(\d+)x(\d+)_\d+x\d+_(\d)x(\d)_")
GRID = {"ts": [2e-6, 3e-6, 4e-6, 5e-6], "r": [80e9, 100e9, 130e9, 160e9, 200e9],
        "F": [2e12, 3e12, 4e12], "R": [3.0e12, 3.4e12, 3.8e12]}


def usable_table(profile: str) -> dict[int, list[int]]:
    """Usable SMs per cluster size at every number of SMs held (mechanism 1: the profile's
    measured k, linear between them, in whole clusters, as ContentionModel::usable_sms)."""
    with open(profile) as f:
        c = json.load(f)["contention"]["clusters"]
    held = c["held_sms"]["value"]
    out = {1: [132 - k for k in range(132)]}
    for size in (2, 4, 8):
        u = c[f"c{size}_usable_sms"]["value"]
        row = []
        for k in range(132):
            i = next((j for j, h in enumerate(held) if h > k), len(held))
            if i == len(held):
                v = u[-1] * (132 - k) / max(1, 132 - held[-1])
            else:
                v = u[i - 1] + (u[i] - u[i - 1]) * (k - held[i - 1]) / (held[i] - held[i - 1])
            row.append(min((132 - k) // size * size, int(v + 1e-9) // size * size))
        out[size] = row
    return out


def launches(path: str) -> list[dict]:
    """The cuBLAS cases of ≤ 192 rows of a contention file, with their recorded launch."""
    with open(path) as f:
        doc = json.load(f)
    out = []
    for c in doc["cases"]:
        s = c["shape"]
        m, n, k = s.get("m", 0), s.get("n", 0), s.get("k", 0)
        if c["class"] != "gemm" or m > 192 or not c.get("launches"):
            continue
        big = max(c["launches"], key=lambda x: x["dur_us"])
        g = NVJET.search(big["name"])
        if not g:
            continue
        tile_n, tile_m, cx, cy = map(int, g.groups())  # nvjet: columns × rows
        ctas = math.prod(big["grid"])
        macs = math.ceil(m / tile_m) * tile_m * math.ceil(n / tile_n) * tile_n * k / ctas
        points = [(p["held_sms"], p["slowdown"]) for p in c["points"]
                  if "slowdown" in p and p["held_sms"] > 0]
        out.append({"name": f"{m}x{n}x{k}", "ctas": ctas, "cluster": cx * cy, "macs": macs,
                    "bytes": 2.0 * (m * k + k * n) / ctas, "alone_s": c["alone_ms"] * 1e-3,
                    "points": points})
    return out


def launch_time(c: dict, usable: int, ts: float, r: float, F: float, R: float,
                knee: float = 0) -> float:
    """The launch's time on `usable` SMs: clusters in rounds, streaming CTAs sharing R — as
    min(r, R / n) each (knee 0), or r / (1 + (n·r / R)^knee)^(1/knee), the model's mechanism 3
    with a_sat = R / r (knee 1: a queue, loads wait longer the more stream; the chip's, file z:
    a knee of 3–4)."""
    slots = usable // c["cluster"]
    if slots <= 0:
        return math.inf
    body = max(c["bytes"] / r, c["macs"] / F)  # a CTA alone
    waiting, t = math.ceil(c["ctas"] / c["cluster"]), 0.0
    running: list[list[float]] = []  # [phase (0 set-up, 1 streaming), set-up end or body left]
    while True:
        while waiting and len(running) < slots:
            running.append([0, t + ts])
            waiting -= 1
        if not running:
            return t
        streaming = sum(1 for x in running if x[0] == 1) * c["cluster"]
        rate = 0.0
        if streaming:
            ask = streaming * c["bytes"] / body  # what the streaming CTAs would move alone
            share = (1.0 + (ask / R) ** knee) ** (-1.0 / knee) if knee else min(1.0, R / ask)
            rate = share / body
        dt = min(x[1] - t if x[0] == 0 else x[1] / rate for x in running)
        t += dt
        for x in running:
            if x[0] == 0 and x[1] - t <= 1e-15:
                x[0], x[1] = 1, 1.0
            elif x[0] == 1:
                x[1] -= rate * dt
        running = [x for x in running if not (x[0] == 1 and x[1] <= 1e-12)]


def worst_misses(cases: list[dict], table: dict, prm: tuple, unstretched_s: float = 0,
                 knee: float = 0) -> list[float]:
    """Per launch, the signed miss of largest size over its points."""
    out = []
    for c in cases:
        cl = table[c["cluster"]]
        alone = launch_time(c, cl[0], *prm, knee)
        fixed = min(1.0, unstretched_s / c["alone_s"])
        most, w = 0.0, 0.0
        for k, y in c["points"]:
            most = max(most, y)
            t = launch_time(c, cl[k], *prm, knee)
            if y < 0.6 * most or math.isinf(t):
                continue
            e = (fixed + (1 - fixed) * t / alone) / y - 1
            w = e if abs(e) > abs(w) else w
        out.append(w)
    return out


def summary(misses: list[float]) -> str:
    a = [abs(x) for x in misses]
    return f"median {100 * statistics.median(a):.1f}%, worst {100 * max(a):.1f}% over {len(a)} launches"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="contention_bench.py results")
    ap.add_argument("--profile", default="hardware/profiles/h200.json", help="its cluster tables")
    ap.add_argument("--fit", action="store_true", help="grid-search the parameters on the files")
    ap.add_argument("--params", default="4e-6,130e9,3e12,3.0e12", help="t_s,r,F,R (s, B/s, MAC/s, B/s)")
    ap.add_argument("--unstretched-us", type=float, default=0.0)
    ap.add_argument("--queue", type=float, nargs="?", const=1.0, default=0.0,
                    help="streaming CTAs share with a soft knee P: r / (1 + (n·r / R)^P)^(1/P) "
                         "(P = 1 without a value: a queue); default: min(r, R / n)")
    a = ap.parse_args()
    table = usable_table(a.profile)
    cases = [c for f in a.files for c in launches(f)]
    prm = tuple(float(x) for x in a.params.split(","))
    if a.fit:
        scored = []
        for p in itertools.product(*GRID.values()):
            m = [abs(x) for x in worst_misses(cases, table, p, a.unstretched_us * 1e-6, a.queue)]
            scored.append((statistics.median(m), max(m), p))
        scored.sort()
        for s in scored[:5]:
            print(f"median {100 * s[0]:.1f}%, worst {100 * s[1]:.1f}%: t_s, r, F, R = {s[2]}")
        prm = scored[0][2]
    for f in a.files:
        print(f"{f}: {summary(worst_misses(launches(f), table, prm, a.unstretched_us * 1e-6, a.queue))}")
    for c, w in zip(cases, worst_misses(cases, table, prm, a.unstretched_us * 1e-6, a.queue)):
        print(f"  {c['name']:>16} {c['ctas']:4d} CTAs, clusters of {c['cluster']}: worst {100 * w:+.1f}%")


if __name__ == "__main__":
    main()
