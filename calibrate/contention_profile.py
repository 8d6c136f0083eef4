#!/usr/bin/env python3
"""Writes twin-fit-contention's section into the hardware profiles (issue #15).

The H200 profile takes the fitted `contention` section as it is ([meas]); the JUPITER GH200
profile takes the same values marked [est] (the same GH100 die; its power cap and GPC layout are
assumed alike). The files keep their layout: one line per leaf {"value", "source"}.

Usage: python3 calibrate/contention_profile.py reports/calibration/contention/fit.json \
           hardware/profiles/h200.json --est hardware/profiles/jupiter-gh200.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

EST = "[est] as measured on our H200 (the same Hopper die; the GH200 module's power cap and GPC layout may differ): "


def leaf(v: object) -> bool:
    return isinstance(v, dict) and "value" in v


def render(obj: dict, indent: int) -> str:
    """JSON with every {"value", "source"} leaf on one line, objects above it opened per key."""
    pad = " " * indent
    lines = ["{"]
    items = list(obj.items())
    for i, (k, v) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        if leaf(v) or not isinstance(v, dict):
            lines.append(f"{pad}  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}{comma}")
        else:
            lines.append(f"{pad}  {json.dumps(k)}: {render(v, indent + 2)}{comma}")
    lines.append(pad + "}")
    return "\n".join(lines)


def marked(section: dict, prefix: str) -> dict:
    if leaf(section):
        return {"value": section["value"], "source": prefix + section["source"]}
    return {k: marked(v, prefix) for k, v in section.items()}


def write(path: str, section: dict) -> None:
    with open(path) as f:
        prof = json.load(f)
    prof["contention"] = section
    text = render(prof, 0) + "\n"
    json.loads(text)  # what is written parses
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fit", help="twin-fit-contention --out file")
    ap.add_argument("profile", help="the measured GPU's profile ([meas])")
    ap.add_argument("--est", action="append", default=[], help="profiles that take the values as [est]")
    args = ap.parse_args()
    with open(args.fit) as f:
        section = json.load(f)["contention"]
    write(args.profile, section)
    for p in args.est:
        write(p, marked(section, EST))
    return 0


if __name__ == "__main__":
    sys.exit(main())
