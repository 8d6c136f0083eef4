"""Writes fitted values into a hardware profile JSON (the calibration scripts' --profile)."""
from __future__ import annotations

import json
import os


def update_efficiency(path: str, values: dict) -> None:
    """Sets efficiency.<key> = {"value", "source"} for each key of `values` ({key: (value, source)})
    and replaces the file atomically (a temporary beside it, then a rename)."""
    with open(path) as f:
        prof = json.load(f)
    eff = prof.setdefault("efficiency", {})
    for key, (value, source) in values.items():
        eff[key] = {"value": value, "source": source}
    with open(path + ".tmp", "w") as f:
        json.dump(prof, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
