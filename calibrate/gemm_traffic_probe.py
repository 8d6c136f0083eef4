#!/usr/bin/env python3
"""What each cuBLAS GEMM of the contention runs loads, read off the hardware counters (issue #15).

The contention model saturates a GEMM's memory side at a_sat·I/128 SMs, I its load intensity:
multiply-adds per element its CTAs load from L2, after the thread-block cluster's multicast
(hardware/contention.hpp, mechanism 3; kernel_shapes.cpp computes I from nvjet's tile and cluster).
That formula is the model's, not a measurement: the small-row launches of file l (nvjet's 4x1
clusters, one tile per CTA) slow as if their I were 28-35 where it gives 51-70. This runs every
cuBLAS GEMM shape the contention files measured (contention_bench.py's case lists, same operands
and layout, so nvjet picks the same kernels) once under Nsight Compute and records, per kernel:
L2 read sectors (what L2 served: a multicast read counts once), the bytes the SMs received from
the crossbar (each multicast copy counted), DRAM bytes read, and the L2, DRAM and SM throughput
as a fraction of peak. The measured intensity is m·n·k / (L2 bytes read / 2).

Run through ncu (the device machine's Firecracker runtime reads the counters; clocks left alone):
  ncu --clock-control none --nvtx --nvtx-include "probe/" --metrics <METRICS> --csv \
      python3 calibrate/gemm_traffic_probe.py --cases > raw.csv 2> cases.log
  python3 calibrate/gemm_traffic_probe.py --parse raw.csv --cases-log cases.log --out traffic.json
`--metrics-list` prints the metric names this probe asks for (ncu's --metrics argument).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

METRICS = [
    "gpu__time_duration.sum",
    "launch__grid_size",
    "launch__cluster_dim_x",
    "launch__cluster_dim_y",
    "lts__t_sectors_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "l1tex__m_xbar2l1tex_read_bytes.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
]
GROUPS = ("gemm", "router_tokens", "expert_rows", "router_more", "small_rows")
DEFAULT_GROUPS = GROUPS[:4]  # file n's


def run_cases(groups: tuple[str, ...]) -> None:
    """Every GEMM case once inside an NVTX range named "probe" (after a warm-up outside it).
    Under `ncu --cache-control none` the probed launch finds what its three warm-ups left in L2
    (contention_bench.py's default, files p and a); under ncu's default (`all`) L2 is flushed
    before it (as `contention_bench.py --flush-l2-mib`, file q)."""
    import torch
    import contention_bench as cb
    cb.BF16 = torch.bfloat16
    lists = {"gemm": cb.gemm_cases, "router_tokens": cb.router_token_cases,
             "expert_rows": cb.expert_row_cases, "router_more": cb.router_more_cases,
             "small_rows": cb.small_rows_cases}
    index = []
    for g in groups:
        for c in lists[g]():
            fn = c.make()
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("probe")
            fn()
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            index.append({"group": g, "kernel": c.kernel, "shape": c.shape})
    # The case list on stderr (ncu's CSV goes to stdout): the parser matches ranges to it.
    print("CASES " + json.dumps(index), file=sys.stderr)


def number(s: str) -> float | str:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return s


def parse(raw: str, cases_log: str, out: str, ncu_command: str) -> None:
    """ncu's CSV (one row per kernel and metric) and the case list → one record per case."""
    with open(cases_log) as f:
        line = next(ln for ln in f if ln.startswith("CASES "))
    cases = json.loads(line[len("CASES "):])
    with open(raw) as f:
        text = f.read()
    start = text.find('"ID"')
    if start < 0:
        raise SystemExit(f"{raw}: no ncu CSV header (\"ID\",...) found")
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    kernels: dict[str, dict] = {}
    order: list[str] = []
    for r in rows:
        kid = r["ID"]
        if kid not in kernels:
            kernels[kid] = {"name": r["Kernel Name"], "metrics": {}}
            order.append(kid)
        kernels[kid]["metrics"][r["Metric Name"]] = {"unit": r.get("Metric Unit", ""),
                                                     "value": number(r["Metric Value"])}
    # ncu profiles the kernels of the NVTX ranges in launch order; a case launches one nvjet
    # kernel, plus cuBLASLt's split-K reduction where it splits k.
    recs, i = [], 0
    for c in cases:
        launches = []
        while i < len(order):
            k = kernels[order[i]]
            if launches and k["name"].startswith("nvjet"):
                break
            launches.append(k)
            i += 1
        recs.append({**c, "launches": launches})
    doc = {"provenance": {"date": datetime.date.today().isoformat(),
                          "method": "calibrate/gemm_traffic_probe.py under ncu --clock-control none",
                          "ncu": ncu_command,
                          "metrics": METRICS},
           "cases": recs}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{len(recs)} cases, {len(order)} kernels → {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", action="store_true", help="run the cases (under ncu)")
    ap.add_argument("--metrics-list", action="store_true", help="print ncu's --metrics argument")
    ap.add_argument("--groups", default=",".join(DEFAULT_GROUPS),
                    help=f"case groups to run, comma-separated, of {','.join(GROUPS)}")
    ap.add_argument("--parse", metavar="RAW_CSV", help="ncu's CSV output to turn into JSON")
    ap.add_argument("--cases-log", help="the stderr of the --cases run (its CASES line)")
    ap.add_argument("--out", help="JSON to write (with --parse)")
    ap.add_argument("--ncu-command", default="", help="the ncu command line that made RAW_CSV (provenance)")
    a = ap.parse_args()
    if a.metrics_list:
        print(",".join(METRICS))
    elif a.cases:
        groups = tuple(g for g in a.groups.split(",") if g)
        unknown = [g for g in groups if g not in GROUPS]
        if unknown:
            ap.error(f"--groups: unknown {', '.join(unknown)} (known: {', '.join(GROUPS)})")
        run_cases(groups)
    elif a.parse:
        if not a.cases_log or not a.out:
            ap.error("--parse needs --cases-log and --out")
        parse(a.parse, a.cases_log, a.out, a.ncu_command)
    else:
        ap.error("one of --cases, --metrics-list, --parse")


if __name__ == "__main__":
    main()
