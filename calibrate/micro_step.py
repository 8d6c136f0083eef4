#!/usr/bin/env python3
"""The micro-training step (issue #6): executes a launch plan written by
`twin run SCENARIO --plan plan.json` for real on one GPU and compares it with the twin.

The plan is one rank's forward and backward passes (scenarios/plan.hpp): tasks on the twin's
streams, each waiting for the tasks it names, each launching real kernels of the plan's shapes:
  gemm          torch.mm (cuBLAS), bf16
  grouped_gemm  torch._grouped_mm (CUTLASS persistent grouped GEMM), bf16, the plan's rows per
                expert (rounded to 16) — or, for a plain MoE kernel, one torch.mm per expert;
                "backward": the input and weight gradients of that GEMM, two calls
  attention     FlexAttention over the rank's documents (causal, the layer's window, GQA)
  elementwise   a bf16 elementwise kernel on the SMs (torch.neg) moving the plan's bytes
                (--elementwise memcpy: a device copy, which runs on a copy engine, no SM:
                calibrate/contention_bench.py measured it untouched by 124 held SMs) (read + write)
  copy_h2d/d2h  pinned host <-> device copies of the plan's bytes
  collective    an SM-holding kernel (kernels/sm_hold.cu) with the collective's CTAs for the
                twin's duration of that collective: there is no peer on one GPU
Each stream of the plan is a CUDA stream; cross-stream dependencies are events. The plan is run
twice to warm up (compiling FlexAttention, cuBLAS heuristics), then --reps times; every task's
start and end and every launch are timed with CUDA events; the median run is reported.

Compared (the twin's figures come from the plan itself):
  step: first task start to last task end, twin vs measured;
  per category: summed launch times against the plan's `twin_s` per launch (a fused twin task's
  time split by its parts' times alone, as `twin run` reports GPU time).

Usage, on a GPU machine with PyTorch and the library built by calibrate/build-device.sh:
  python3 calibrate/micro_step.py --plan plan.json --lib build-device/libtwin_kernels_c.so \
      --out micro-step.json [--reps 3] [--trace micro-step.trace.json.gz]
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import sys

from chrome_trace import write_chrome_trace

try:
    import torch
except ImportError:  # --help needs no PyTorch
    torch = None

BF16 = torch.bfloat16 if torch is not None else None  # set when PyTorch is there


class Kernels:
    """Real kernels for the plan's launches; buffers are made once per shape, before timing."""

    def __init__(self, plan, lib, elementwise_kind="kernel"):
        self.plan = plan
        self.elementwise_kind = elementwise_kind
        self.lib = ctypes.CDLL(lib)
        self.lib.twin_sm_hold.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p]
        self.buffers = {}
        self.attn = {}
        self.persistent = plan["moe"]["kernel"] == "sonicmoe"
        # One pair of elementwise buffers and one device/pinned pair for copies, sliced per launch.
        ls = [l for t in plan["tasks"] for l in t["launches"]]
        ew = max([int(l["bytes"] / 4) for l in ls if l["kind"] == "elementwise"] + [1])
        cp = max([int(l["bytes"]) for l in ls if l["kind"].startswith("copy")] + [1])
        self.ew = (torch.empty(ew, device="cuda", dtype=BF16), torch.empty(ew, device="cuda", dtype=BF16))
        self.dev = torch.empty(cp, device="cuda", dtype=torch.uint8)
        self.host = torch.empty(cp, dtype=torch.uint8, pin_memory=True)

    def buf(self, key, make):
        if key not in self.buffers:
            self.buffers[key] = make()
        return self.buffers[key]

    def rand(self, *shape):
        return torch.randn(*shape, device="cuda", dtype=BF16) * 0.1

    # --- launches -------------------------------------------------------------------------
    def gemm(self, l):
        m, n, k = int(round(l["m"])), int(l["n"]), int(l["k"])
        a = self.buf(("A", m, k), lambda: self.rand(m, k))
        b = self.buf(("B", k, n), lambda: self.rand(k, n))
        c = self.buf(("C", m, n), lambda: torch.empty(m, n, device="cuda", dtype=BF16))
        return lambda: torch.mm(a, b, out=c)

    def grouped(self, l):
        g, n, k = int(l["groups"]), int(l["n"]), int(l["k"])
        rows = max(16, 16 * int(round(l["rows_per_group"] / 16)))
        a = self.buf(("GA", g * rows, k), lambda: self.rand(g * rows, k))
        b = self.buf(("GB", g, k, n), lambda: self.rand(g, k, n))
        # "backward": the forward's input and weight gradients (training.expert_backward), as
        # autograd runs them (calibrate/grouped_backward_bench.py): dY·Wᵀ and Xᵀ·dY per expert.
        backward = bool(l.get("backward", False))
        dy = self.buf(("GDY", g * rows, n), lambda: self.rand(g * rows, n)) if backward else None
        if self.persistent:
            offs = self.buf(("offs", g, rows), lambda: torch.arange(1, g + 1, device="cuda",
                                                                  dtype=torch.int32) * rows)
            if backward:
                return lambda: (torch._grouped_mm(dy, b.transpose(-2, -1), offs=offs),
                                torch._grouped_mm(a.t(), dy, offs=offs))
            return lambda: torch._grouped_mm(a, b, offs=offs)
        c = self.buf(("GC", g * rows, n), lambda: torch.empty(g * rows, n, device="cuda", dtype=BF16))

        def loop():
            for e in range(g):
                r = slice(e * rows, (e + 1) * rows)
                if backward:
                    torch.mm(dy[r], b[e].t())
                    torch.mm(a[r].t(), dy[r])
                else:
                    torch.mm(a[r], b[e], out=c[r])
        return loop

    def elementwise(self, l):
        n = max(1, int(l["bytes"] / 4))  # bf16 read + write
        src, dst = self.ew[0][:n], self.ew[1][:n]
        if self.elementwise_kind == "memcpy":
            return lambda: dst.copy_(src)
        return lambda: torch.neg(src, out=dst)

    def copy(self, l, to_host):
        n = int(l["bytes"])
        dev, host = self.dev[:n], self.host[:n]
        if to_host:
            return lambda: host.copy_(dev, non_blocking=True)
        return lambda: dev.copy_(host, non_blocking=True)

    def hold(self, l, stream):
        ctas, ns = int(l["ctas"]), int(l["seconds"] * 1e9)

        def run():
            err = self.lib.twin_sm_hold(ctas, ns, ctypes.c_void_p(stream.cuda_stream))
            if err != 0:
                raise RuntimeError(f"sm_hold launch failed: cudaError {err}")
        return run

    def attention(self, l, stream):
        key = (l["sliding"], l["backward"])
        if key not in self.attn:
            self.attn[key] = self._make_attention(l, stream)
        return self.attn[key]

    def _make_attention(self, l, stream):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        spec = self.plan["attention"]["sliding" if l["sliding"] else "full"]
        docs = [int(d) for d in self.plan["documents"]]
        T = sum(docs)
        win = int(spec["window_tokens"]) or T + 1
        doc = torch.repeat_interleave(torch.arange(len(docs), device="cuda", dtype=torch.int32),
                                      torch.tensor(docs, device="cuda"))

        def mask(b, h, qi, ki):
            return (doc[qi] == doc[ki]) & (qi >= ki) & (qi - ki < win)
        bm = create_block_mask(mask, None, None, T, T, device="cuda")
        flex = self.buf(("flex",), lambda: torch.compile(flex_attention, dynamic=False))
        q = self.rand(1, spec["q_heads"], T, spec["qk_head_dim"]).requires_grad_()
        k = self.rand(1, spec["kv_heads"], T, spec["qk_head_dim"]).requires_grad_()
        v = self.rand(1, spec["kv_heads"], T, spec["v_head_dim"]).requires_grad_()
        if not l["backward"]:
            def fwd():
                with torch.no_grad():
                    flex(q, k, v, block_mask=bm, enable_gqa=True)
            return fwd
        # Backward runs on the stream of its forward: make the graph on the compute stream.
        with torch.cuda.stream(stream):
            y = flex(q, k, v, block_mask=bm, enable_gqa=True)
            gy = torch.randn_like(y)
        return lambda: torch.autograd.grad(y, (q, k, v), gy, retain_graph=True)

    def make(self, l, stream):
        kind = l["kind"]
        reps = l.get("repeat", 1)
        if kind == "gemm":
            f = self.gemm(l)
        elif kind == "grouped_gemm":
            f = self.grouped(l)
        elif kind == "elementwise":
            f = self.elementwise(l)
        elif kind == "attention":
            f = self.attention(l, stream)
        elif kind in ("copy_h2d", "copy_d2h"):
            f = self.copy(l, kind == "copy_d2h")
        elif kind == "collective":
            f = self.hold(l, stream)
        elif kind == "alloc_retry":
            raise ValueError("plan: the twin predicts allocator retries here; a retry (synchronise, "
                             "free cached blocks) has no stand-in yet — pick a setting without them")
        else:
            raise ValueError(f"plan: unknown launch kind {kind!r}")
        whole = int(reps)
        if reps != whole:
            raise ValueError(f"plan: {kind} repeated {reps} times (only whole repeats run)")
        return [f] * whole


def build(plan: dict, kernels: Kernels) -> list:
    streams = {}
    tasks = []
    for t in plan["tasks"]:
        s = streams.setdefault(t["stream"], torch.cuda.Stream())
        fns = [(l, kernels.make(l, s)) for l in t["launches"]]
        tasks.append((t, s, fns))
    torch.cuda.synchronize()
    return tasks


def run_once(tasks: list) -> list[tuple[float, float]]:
    """Issues every task in plan order; returns per task (start, end events) and per launch
    (start, end events)."""
    ends, marks = [], []
    ev = lambda: torch.cuda.Event(enable_timing=True)
    t0 = ev()
    t0.record(torch.cuda.current_stream())
    for t, s, fns in tasks:
        s.wait_event(t0)
        for p in t["after"]:
            if tasks[p][1] is not s:
                s.wait_event(ends[p])
        start = ev()
        start.record(s)
        launches = []
        with torch.cuda.stream(s):
            for l, fs in fns:
                a = ev()
                a.record(s)
                for f in fs:
                    f()
                b = ev()
                b.record(s)
                launches.append((a, b))
        end = ev()
        end.record(s)
        ends.append(end)
        marks.append((start, end, launches))
    torch.cuda.synchronize()
    return [(t0.elapsed_time(a) * 1e-3, t0.elapsed_time(b) * 1e-3,
             [ta.elapsed_time(tb) * 1e-3 for ta, tb in ls]) for a, b, ls in marks]


def compare(plan: dict, runs: list) -> dict:
    steps = [max(e for _, e, _ in r) - min(s for s, _, _ in r) for r in runs]
    median = sorted(range(len(runs)), key=lambda i: steps[i])[len(runs) // 2]
    real = runs[median]
    tw_start = min(t["start_s"] for t in plan["tasks"])
    tw_step = max(t["end_s"] for t in plan["tasks"]) - tw_start
    cats = {}
    for t, (s, e, ls) in zip(plan["tasks"], real):
        for l, real_s in zip(t["launches"], ls):
            c = cats.setdefault(l["category"], {"twin_s": 0.0, "measured_s": 0.0, "launches": 0})
            c["twin_s"] += l["twin_s"]
            c["measured_s"] += real_s
            c["launches"] += 1
    for c in cats.values():
        c["error"] = c["twin_s"] / c["measured_s"] - 1 if c["measured_s"] > 0 else None
    tasks = [dict(id=t["id"], name=t["name"], stream=t["stream"], twin_start_s=t["start_s"] - tw_start,
                  twin_end_s=t["end_s"] - tw_start, measured_start_s=s, measured_end_s=e,
                  measured_launch_s=ls)
             for t, (s, e, ls) in zip(plan["tasks"], real)]
    return dict(step=dict(twin_s=tw_step, measured_s=steps[median], measured_runs_s=steps,
                          error=tw_step / steps[median] - 1),
                categories=cats, tasks=tasks)


def profile_run(tasks: list, path: str) -> None:
    """One more run of the plan under torch.profiler, marked ProfilerStep#0, as a Chrome trace."""
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("ProfilerStep#0"):
            run_once(tasks)
    write_chrome_trace(prof, path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", required=True)
    p.add_argument("--lib", required=True, help="libtwin_kernels_c.so (SM holder)")
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--elementwise", choices=("kernel", "memcpy"), default="kernel",
                   help="stand-in for elementwise work: an SM kernel (torch.neg) or a copy-engine copy")
    p.add_argument("--trace", default="", help="also profile one more run with torch.profiler and write its "
                                               "Chrome trace here (.json or .json.gz; twin compare --kineto)")
    a = p.parse_args()
    if torch is None or not torch.cuda.is_available():
        print("micro_step: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    with open(a.plan) as f:
        plan = json.load(f)
    tasks = build(plan, Kernels(plan, a.lib, a.elementwise))
    for _ in range(2):
        run_once(tasks)
    runs = [run_once(tasks) for _ in range(a.reps)]
    result = compare(plan, runs)
    if a.trace:
        profile_run(tasks, a.trace)
    result["provenance"] = dict(
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=" ".join(sys.argv), scenario=plan["scenario"], profile=plan["profile"],
        rank=plan["rank"], elementwise=a.elementwise)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    st = result["step"]
    print(f"step: twin {st['twin_s'] * 1e3:.1f} ms, measured {st['measured_s'] * 1e3:.1f} ms "
          f"(runs {', '.join(f'{x * 1e3:.1f}' for x in st['measured_runs_s'])}), error {100 * st['error']:+.1f}%")
    for name, c in sorted(result["categories"].items()):
        err = f"{100 * c['error']:+.1f}%" if c["error"] is not None else "-"
        print(f"  {name:24s} twin {c['twin_s'] * 1e3:9.2f} ms  measured {c['measured_s'] * 1e3:9.2f} ms  {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
