#!/usr/bin/env python3
"""The expert GEMMs' backward against their forward: input and weight gradients of
`torch._grouped_mm` over rows per expert (issue #17: what the twin's backward expert GEMMs cost).

The twin prices a layer's backward expert GEMMs as twice its forward ones (model/step_costs.cpp
moe_backward: the input gradient is the forward's shape transposed, and the weight gradient is
taken to cost the same), and calibrate/micro_step.py ran them so, as two more forward GEMMs. The
weight gradient is another GEMM: per expert dW_e = X_eᵀ·dY_e, a fixed grid of k × n output tiles
whose depth is the expert's rows (a "varlen-K" grouped GEMM), where the forward's depth is the
fixed k and its rows vary. With few rows per expert each output tile runs few K-steps for its
fixed prologue and epilogue. This times, for the model's expert projections over 96 experts of
equal rows (grouped_gemm_bench.py's rows and timing: back to back after warm-ups, the capped
power state, the four calls interleaved; operands randn × 0.1 as micro_step.py's): the forward, the input gradient
(`_grouped_mm(dY, Wᵀ, offs)`), the weight gradient (`_grouped_mm(Xᵀ, dY, offs)`, 2-D × 2-D) and
autograd's whole backward of the forward, with each call's kernels (profiler). Needs PyTorch and
a GPU.

  python3 calibrate/grouped_backward_bench.py --out grouped-backward.json [--reps 10]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

from grouped_gemm_bench import EXPERTS, PROJECTIONS, ROWS, time_ms

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None


def kernels(fn: object) -> list[str]:
    """The CUDA kernels one call of fn launches, in order (names cut to 100 characters)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ks = sorted((e for e in prof.events() if "CUDA" in str(e.device_type)),
                key=lambda e: e.time_range.start)
    return [e.name[:100] for e in ks]


def one(proj: str, n: int, k: int, w: object, m: int, reps: int, scale: float) -> dict:
    """Forward, input gradient, weight gradient and autograd's backward at m rows per expert, in
    ms (median of reps), with the kernels of each at the first and last rows; the explicit
    gradients checked against autograd's at the first rows."""
    x = (torch.randn(EXPERTS * m, k, device="cuda", dtype=torch.bfloat16) * scale).requires_grad_()
    dy = torch.randn(EXPERTS * m, n, device="cuda", dtype=torch.bfloat16) * scale
    offs = torch.arange(m, EXPERTS * m + 1, m, device="cuda", dtype=torch.int32)
    y = torch._grouped_mm(x, w, offs=offs)
    calls = {
        "forward": lambda: torch._grouped_mm(x, w, offs=offs),
        "input_grad": lambda: torch._grouped_mm(dy, w.transpose(-2, -1), offs=offs),
        "weight_grad": lambda: torch._grouped_mm(x.t(), dy, offs=offs),
        "autograd_backward": lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True),
    }
    if m == ROWS[0]:
        for got, ref in zip((calls["input_grad"](), calls["weight_grad"]()), calls["autograd_backward"]()):
            err = (got.float() - ref.float()).abs().max().item() / ref.float().abs().max().item()
            assert err < 1e-2, f"an explicit gradient differs from autograd's by {err:.3g}"
    r = {"projection": proj, "rows_per_expert": m, "n": n, "k": k, "experts": EXPERTS}
    # Interleaved, call by call (after grouped_gemm_bench.py's three warm-ups of each): the power
    # cap's state drifts over a run, and ratios of calls timed apart carried it (±10%).
    for fn in calls.values():
        time_ms(fn, 1)
    times = {name: [] for name in calls}
    for _ in range(reps):
        for name, fn in calls.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e))
    for name, ts in times.items():
        r[name + "_ms"] = statistics.median(ts)
    if m in (ROWS[0], ROWS[-1]):
        r["kernels"] = {name: kernels(fn) for name, fn in calls.items()}
    r["backward_over_2_forward"] = (r["input_grad_ms"] + r["weight_grad_ms"]) / (2 * r["forward_ms"])
    return r


def measure(reps: int, scale: float) -> list[dict]:
    """Every projection at every rows per expert (one())."""
    out = []
    for proj, (n, k) in PROJECTIONS.items():
        w = (torch.randn(EXPERTS, k, n, device="cuda", dtype=torch.bfloat16) * scale).requires_grad_()
        for m in ROWS:
            r = one(proj, n, k, w, m, reps, scale)
            out.append(r)
            print(f"{proj:5s} rows {m:5d}: forward {r['forward_ms']:8.3f}  input grad "
                  f"{r['input_grad_ms']:8.3f}  weight grad {r['weight_grad_ms']:8.3f}  autograd "
                  f"{r['autograd_backward_ms']:8.3f} ms; (input + weight) / 2 forward "
                  f"{r['backward_over_2_forward']:.3f}", flush=True)
            torch.cuda.empty_cache()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--operand-scale", type=float, default=0.1)
    a = p.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("grouped_backward_bench: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    torch.manual_seed(0)
    rows = measure(a.reps, a.operand_scale)
    prov = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                command=" ".join(sys.argv), operand_scale=a.operand_scale)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(dict(provenance=prov, rows=rows), fh, indent=1)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
