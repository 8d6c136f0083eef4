#!/usr/bin/env python3
"""Copies the raw slowdown curves of calibrate/contention_bench.py's files into a hardware profile,
under measurements.contention_curves, with each file's provenance (issue #15: the raw tables live
beside the fitted values). A later file's classes replace an earlier file's, as in
twin-fit-contention (calibrate/contention_fit.hpp). No GPU, no PyTorch.

Usage:
  python3 calibrate/contention_tables.py --profile hardware/profiles/h200-measured.json \\
      reports/calibration/contention/h200-2026-11-30-contention-a.json \\
      reports/calibration/contention/h200-2026-11-30-contention-b.json \\
      reports/calibration/contention/h200-2026-12-01-contention-c.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def tables(files: list[str]) -> dict:
    by_class, provenance = {}, []
    for path in files:
        with open(path) as f:
            doc = json.load(f)
        name = os.path.basename(path)
        p = doc.get("provenance", {})
        provenance.append({"file": name, "date": p.get("date"), "gpu": p.get("gpu"), "torch": p.get("torch"),
                           "command": p.get("command"), "holder_shape": doc.get("holder_shape")})
        here = {}
        for c in doc["cases"]:
            pts = [q for q in c["points"] if "slowdown" in q]
            here.setdefault(c["class"], []).append({
                "file": name, "class": c["class"], "kernel": c["kernel"], "shape": c["shape"],
                "alone_ms": c["alone_ms"], "held_sms": [q["held_sms"] for q in pts],
                "slowdown": [round(q["slowdown"], 4) for q in pts],
                "blocked_held_sms": [q["held_sms"] for q in c["points"] if "slowdown" not in q]})
        by_class.update(here)  # a later file's class replaces an earlier's
    cases = [c for cls in sorted(by_class) for c in by_class[cls]]
    return {"provenance": provenance, "source": "calibrate/contention_tables.py " + " ".join(files),
            "cases": cases}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", required=True, help="profile JSON to write measurements.contention_curves into")
    ap.add_argument("files", nargs="+", help="contention_bench.py result files, earliest first")
    a = ap.parse_args()
    with open(a.profile) as f:
        prof = json.load(f)
    prof.setdefault("measurements", {})["contention_curves"] = tables(a.files)
    with open(a.profile + ".tmp", "w") as f:
        json.dump(prof, f, indent=2)
        f.write("\n")
    os.replace(a.profile + ".tmp", a.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
