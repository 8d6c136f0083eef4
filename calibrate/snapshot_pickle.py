#!/usr/bin/env python3
"""`twin memory --snapshot` JSON -> the pickle PyTorch's memory viewers read.

torch.cuda.memory._dump_snapshot() writes a pickle of plain dicts and lists; the twin writes the
same structure as JSON (scenarios/memory_snapshot.hpp), so pickling it needs only the standard
library. Drop the pickle on https://pytorch.org/memory_viz, or, with PyTorch installed:

    python3 calibrate/snapshot_pickle.py snap.json snap.pickle --check --html timeline.html

--check runs PyTorch's own readers on it: torch.cuda._memory_viz.segsum (which asserts that every
segment's blocks add up) and trace_plot (the "Active Memory Timeline" page), and prints the peak
of active memory over the trace beside the twin's figure in the file.
"""
import argparse
import json
import pickle
import sys


def peak_active_bytes(snapshot: dict) -> int:
    """Active bytes at the trace's start (the end state walked back), then the running peak."""
    active = sum(b["size"] for s in snapshot["segments"] for b in s["blocks"]
                 if b["state"] == "active_allocated")
    trace = snapshot["device_traces"][0]

    def delta(e: dict) -> int:
        return e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0

    now = active - sum(delta(e) for e in trace)
    peak = now
    for e in trace:
        now += delta(e)
        peak = max(peak, now)
    return peak


def load(path: str) -> dict:
    """The JSON, with the segment pool ids as the tuples PyTorch writes."""
    with open(path) as f:
        snap = json.load(f)
    for key in ("segments", "device_traces"):
        if key not in snap:
            sys.exit(f"{path}: $.{key} missing: not a `twin memory --snapshot` file")
    for s in snap["segments"]:
        s["segment_pool_id"] = tuple(s.get("segment_pool_id", (0, 0)))
    return snap


def check(snap: dict, html: str) -> None:
    """PyTorch's readers over the snapshot."""
    from torch.cuda import _memory_viz as viz  # only here: the conversion needs no PyTorch
    summary = viz.segsum(snap)
    print("\n".join(line for line in summary.splitlines() if line.startswith(("segments", "total_"))))
    page = viz.trace_plot(snap)
    if html:
        with open(html, "w") as f:
            f.write(page)
    print(f"trace_plot: {len(page)} bytes of HTML")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot_json")
    ap.add_argument("out_pickle")
    ap.add_argument("--check", action="store_true", help="run PyTorch's segsum and trace_plot on it")
    ap.add_argument("--html", default="", help="with --check: write trace_plot's page here")
    a = ap.parse_args()
    snap = load(a.snapshot_json)
    with open(a.out_pickle, "wb") as f:
        pickle.dump(snap, f)
    twin = snap.get("twin", {})
    print(f"{a.out_pickle}: rank {twin.get('rank', '?')} of {twin.get('scenario', '?')}, "
          f"{len(snap['segments'])} segments, {len(snap['device_traces'][0])} actions, "
          f"peak active {peak_active_bytes(snap) / 2**30:.3f} GiB")
    if a.check:
        check(snap, a.html)


if __name__ == "__main__":
    main()
