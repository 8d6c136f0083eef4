#!/usr/bin/env python3
"""The micro-training step with real collectives (issue #24): executes every rank's launch plan
(`twin run SCENARIO --plan DIR --plan-ranks all`) on one GPU per rank, with real NCCL collectives
where calibrate/micro_step.py holds SMs for the twin's durations, and compares each rank with the
twin.

One process per plan (torch.multiprocessing; rank r on GPU r). Every process group of the plans
(a collective's "comm", "group" and "group_ranks") becomes one NCCL communicator, created in the
same order on every process, its CTAs capped at the most its collectives use in the plan
(ProcessGroupNCCL's config.max_ctas: NCCL_MAX_CTAS per communicator). A collective runs on the
stream its task names, as FSDP2 issues them (async_op=False: NCCL's internal stream waits for it
and it waits for NCCL), bf16 buffers of the plan's bytes:
  all_gather      all_gather_into_tensor, output `bytes`
  reduce_scatter  reduce_scatter_tensor, input `bytes` (sum)
  all_reduce      all_reduce of `bytes`
  all_to_all      all_to_all_single of `bytes`, equal splits
so a collective's measured time includes its wait for late peers, and its CTAs share the SMs
with the rank's kernels. Kernels, copies and dependencies are calibrate/micro_step.py's. NVLink
multicast stays off (NCCL_NVLS_ENABLE=0). Each run starts after a barrier; every task is timed
with CUDA events from the run's start on its rank.

Written per rank to --out DIR/rank-N.json: micro_step.py's comparison (step, categories, tasks)
plus each collective's twin and measured durations; DIR/summary.json: per rank step and compute
stream end, twin and measured.

Usage, on a machine with N GPUs, PyTorch and the library built by calibrate/build-device.sh:
  build/twin run scenarios/micro-step.json --set parallel.replica_gpus=4 --plan plans --plan-ranks all
  python3 calibrate/micro_step_multi.py --plans plans --lib build-device/libtwin_kernels_c.so \\
      --out measured [--reps 3]
`--predicted FILE` writes the plans' own prediction (per rank step, compute-stream end, every
collective's duration) without a GPU.
(A single-GPU machine runs a one-rank plan: `--set parallel.replica_gpus=1 --set parallel.ep=1
--set hardware.node.gpus=1` — every communicator of one rank, a check of the harness only.)
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import sys

import micro_step

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:  # --help needs no PyTorch
    torch = dist = mp = None


def read_plans(folder: str) -> list:
    """Every rank-N.json of the folder, in rank order (N = 0 … n−1, none missing)."""
    files = glob.glob(os.path.join(folder, "rank-*.json"))
    plans = []
    for i in range(len(files)):
        path = os.path.join(folder, f"rank-{i}.json")
        if not os.path.exists(path):
            raise SystemExit(f"{folder}: rank-{i}.json missing among {len(files)} plans")
        with open(path) as f:
            plans.append(json.load(f))
    if not plans:
        raise SystemExit(f"{folder}: no rank-N.json (twin run ... --plan {folder} --plan-ranks all)")
    return plans


def process_groups(plans: list) -> dict:
    """(comm, group) → (member ranks, most CTAs of its collectives), over every rank's plan, in
    a fixed order (every process creates the communicators in this order)."""
    groups = {}
    for p in plans:
        for t in p["tasks"]:
            for l in t["launches"]:
                if l["kind"] != "collective":
                    continue
                key = (l["comm"], l["group"])
                ranks, ctas = groups.get(key, (tuple(l["group_ranks"]), 0))
                if ranks != tuple(l["group_ranks"]):
                    raise SystemExit(f"plans disagree on the members of {key}")
                groups[key] = (ranks, max(ctas, int(l["ctas"])))
    return dict(sorted(groups.items()))


class CollectiveKernels(micro_step.Kernels):
    """micro_step's kernels, with real NCCL collectives in place of SM holders."""

    def __init__(self, plan: dict, lib: str, elementwise_kind: str, pgs: dict) -> None:
        super().__init__(plan, lib, elementwise_kind)
        self.pgs = pgs
        # One input and one output buffer for every collective, sliced per launch (bf16 elements
        # of the largest): collectives that overlap share them, as timing only needs the bytes.
        most = max([int(l["bytes"] / 2) + len(l["group_ranks"]) for t in plan["tasks"]
                    for l in t["launches"] if l["kind"] == "collective"] + [1])
        self.coll = (self.rand(most), torch.empty(most, device="cuda", dtype=micro_step.BF16))

    def hold(self, l: dict, stream: object) -> object:
        """The plan's collective for real, on the task's stream (NCCL's own stream waits for it)."""
        pg, size = self.pgs[(l["comm"], l["group"])], len(l["group_ranks"])
        n = max(size, int(l["bytes"] / 2) // size * size)  # bf16 elements, a multiple of the group
        inp, out = self.coll
        kind = l["collective"]
        if kind == "all_gather":
            i, o = inp[:n // size], out[:n]
            return lambda: dist.all_gather_into_tensor(o, i, group=pg)
        if kind == "reduce_scatter":
            i, o = inp[:n], out[:n // size]
            return lambda: dist.reduce_scatter_tensor(o, i, group=pg)
        if kind == "all_reduce":
            i = inp[:n]
            return lambda: dist.all_reduce(i, group=pg)
        if kind == "all_to_all":
            i, o = inp[:n], out[:n]
            return lambda: dist.all_to_all_single(o, i, group=pg)
        raise ValueError(f"plan: unknown collective {kind!r}")


def make_groups(groups: dict) -> dict:
    """One NCCL communicator per process group, CTAs capped as the plan's collectives use them."""
    pgs = {}
    for key, (ranks, ctas) in groups.items():
        opts = dist.ProcessGroupNCCL.Options()
        opts.config.max_ctas = ctas
        pgs[key] = dist.new_group(list(ranks), pg_options=opts)
    return pgs


def rank_main(rank: int, world: int, a: argparse.Namespace) -> None:
    """One rank: its plan with real collectives, timed; writes DIR/rank-N.json."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(a.port))
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    plans = read_plans(a.plans)
    plan = plans[rank]
    pgs = make_groups(process_groups(plans))
    tasks = micro_step.build(plan, CollectiveKernels(plan, a.lib, a.elementwise, pgs))
    runs = []
    for i in range(2 + a.reps):  # two to warm up
        dist.barrier()
        torch.cuda.synchronize()
        r = micro_step.run_once(tasks)
        if i >= 2:
            runs.append(r)
    result = micro_step.compare(plan, runs)
    compute_end = [t for t in result["tasks"] if t["stream"] == "compute"]
    result["compute_end"] = dict(twin_s=max(t["twin_end_s"] for t in compute_end),
                                 measured_s=max(t["measured_end_s"] for t in compute_end))
    result["collectives"] = [
        dict(name=t["name"], comm=l["comm"], collective=l["collective"], bytes=l["bytes"],
             ctas=l["ctas"], twin_s=l["twin_s"], measured_s=m)
        for t, r in zip(plan["tasks"], result["tasks"])
        for l, m in zip(t["launches"], r["measured_launch_s"]) if l["kind"] == "collective"]
    result["provenance"] = dict(
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
        nccl=".".join(map(str, torch.cuda.nccl.version())), world=world, rank=rank,
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=" ".join(sys.argv), scenario=plan["scenario"], profile=plan["profile"])
    with open(os.path.join(a.out, f"rank-{rank}.json"), "w") as f:
        json.dump(result, f, indent=1)
    dist.destroy_process_group()


def summary(out: str, world: int) -> dict:
    """Per rank: step and compute-stream end, twin and measured, with errors."""
    rows = []
    for r in range(world):
        with open(os.path.join(out, f"rank-{r}.json")) as f:
            res = json.load(f)
        st, ce = res["step"], res["compute_end"]
        rows.append(dict(rank=r, step_twin_s=st["twin_s"], step_measured_s=st["measured_s"],
                         step_error=st["error"], compute_end_twin_s=ce["twin_s"],
                         compute_end_measured_s=ce["measured_s"],
                         compute_end_error=ce["twin_s"] / ce["measured_s"] - 1))
    return dict(ranks=rows)


def predicted(plans: list) -> dict:
    """The twin's side alone, from the plans (no GPU): per rank the step (first start to last
    end) and the compute stream's end, and each collective's duration — the prediction to set
    against a later measurement."""
    rows = []
    for r, plan in enumerate(plans):
        tasks = plan["tasks"]
        begin = min(t["start_s"] for t in tasks)
        colls = [dict(name=t["name"], comm=l["comm"], collective=l["collective"], bytes=l["bytes"],
                      ctas=l["ctas"], twin_s=l["twin_s"])
                 for t in tasks for l in t["launches"] if l["kind"] == "collective"]
        rows.append(dict(rank=r, step_twin_s=max(t["end_s"] for t in tasks) - begin,
                         compute_end_twin_s=max(t["end_s"] for t in tasks if t["stream"] == "compute") - begin,
                         collectives=colls))
    return dict(scenario=plans[0]["scenario"], profile=plans[0]["profile"], ranks=rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plans", required=True, help="folder of rank-N.json (twin run --plan-ranks all)")
    p.add_argument("--lib", help="libtwin_kernels_c.so (micro_step.py's kernels)")
    p.add_argument("--out", help="folder for rank-N.json and summary.json")
    p.add_argument("--predicted", help="instead: write the plans' own prediction to this JSON file (no GPU)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--port", type=int, default=29511)
    p.add_argument("--elementwise", choices=("kernel", "memcpy"), default="kernel")
    a = p.parse_args()
    if a.predicted:
        pred = predicted(read_plans(a.plans))
        with open(a.predicted, "w") as f:
            json.dump(pred, f, indent=1)
        for r in pred["ranks"]:
            print(f"rank {r['rank']}: step {1e3 * r['step_twin_s']:.1f} ms, compute stream end "
                  f"{1e3 * r['compute_end_twin_s']:.1f} ms, {len(r['collectives'])} collectives")
        return 0
    if not a.lib or not a.out:
        p.error("--lib and --out are needed to measure (or --predicted FILE)")
    if torch is None or not torch.cuda.is_available():
        print("micro_step_multi: no PyTorch with a CUDA GPU here: nothing measured", file=sys.stderr)
        return 3
    world = len(read_plans(a.plans))
    if torch.cuda.device_count() < world:
        print(f"micro_step_multi: {world} plans need {world} GPUs, {torch.cuda.device_count()} here",
              file=sys.stderr)
        return 3
    os.makedirs(a.out, exist_ok=True)
    mp.spawn(rank_main, args=(world, a), nprocs=world, join=True)
    s = summary(a.out, world)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    for r in s["ranks"]:
        print(f"rank {r['rank']}: step twin {r['step_twin_s'] * 1e3:.1f} ms, measured "
              f"{r['step_measured_s'] * 1e3:.1f} ms ({100 * r['step_error']:+.1f}%); compute end "
              f"{100 * r['compute_end_error']:+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
