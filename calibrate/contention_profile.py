#!/usr/bin/env python3
"""Writes twin-fit-contention's section into the hardware profiles (issue #15).

The H200 profile takes the fitted `contention` section as it is ([meas]); the JUPITER GH200
profile takes the same values marked [est] (the same GH100 die; its GPC layout is assumed
alike). Its compute families' clock gain b_max is not the H200's (a kernel's clock alone there
was the clock of an idle GPU's first kernels): with --busy-clock-MHz F it is the clock measured
with 56-112 SMs held (fit.json `clock_plateau_MHz`) over F, the clock alone that the profile's
kernel efficiencies assume for a GPU kept busy. Both get `sat_hbm_GBps`, the measured GPU's HBM
bandwidth: the twin scales the elementwise families' a_sat by a profile's own over it (a_sat = R
/ r0, hardware/contention.hpp). The files keep their layout: one line per leaf {"value",
"source"}.

Usage: python3 calibrate/contention_profile.py reports/calibration/contention/fit.json \
           hardware/profiles/h200.json --est hardware/profiles/jupiter-gh200.json --busy-clock-MHz 1643
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


COMPUTE_FAMILIES = ("gemm", "gemm_fp8", "grouped_gemm", "attention", "attention_bwd")


def busy_gains(section: dict, plateau_MHz: float, busy_MHz: float) -> dict:
    """The section with every compute family's b_max = plateau / busy clock alone."""
    out = json.loads(json.dumps(section))
    gain = round(plateau_MHz / busy_MHz, 2)
    for f in COMPUTE_FAMILIES:
        out[f]["boost_max"] = {
            "value": gain,
            "source": f"[est] the SM clock with 56-112 SMs held, {plateau_MHz:.0f} MHz (our H200's compute kernels, "
                      f"isolated and kept busy alike: reports/calibration/contention/fit.json clock_plateau_MHz), over "
                      f"this profile's clock alone in a busy GPU, {busy_MHz:.0f} MHz (the clock its kernel efficiencies "
                      f"assume); on our H200 kept busy the same ratio per kernel predicts the measured curves "
                      f"(reports/calibration/contention/README.md, file h)"}
    return out


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
    ap.add_argument("--busy-clock-MHz", type=float, default=0,
                    help="the --est profiles' clock alone in a busy GPU: their compute b_max = plateau / this")
    args = ap.parse_args()
    with open(args.fit) as f:
        fit = json.load(f)
    with open(args.profile) as f:
        bw = json.load(f)["gpu"]["hbm_bw_GBps"]["value"]
    section = {"sat_hbm_GBps": {
        "value": bw, "source": "[meas] the HBM bandwidth (gpu.hbm_bw_GBps) of the GPU the elementwise families' "
                              "sat_sms were fitted on, our H200: a GPU of the same SMs and another HBM saturates at "
                              "sat_sms × its own over this (a_sat = R / r0: reports/calibration/contention/README.md, "
                              "file z)"}, **fit["contention"]}
    write(args.profile, section)
    est = marked(section, EST)
    if args.busy_clock_MHz > 0:
        if "clock_plateau_MHz" not in fit:
            print(f"{args.fit}: no clock_plateau_MHz (twin-fit-contention --clocks)", file=sys.stderr)
            return 1
        est = busy_gains(est, fit["clock_plateau_MHz"], args.busy_clock_MHz)
    for p in args.est:
        write(p, est)
    return 0


if __name__ == "__main__":
    sys.exit(main())
