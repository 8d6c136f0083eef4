#!/bin/bash
# Predicts every scenario of scenarios/torchtitan/ (issue #22) and writes predictions.json, the
# figures tests/validation_torchtitan_test.cpp re-simulates. Usage, from the repository root after
# a build: reports/torchtitan/predict.sh [build/twin]
set -euo pipefail
twin=${1:-build/twin}
out=reports/torchtitan/predictions.json
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for f in scenarios/torchtitan/*.json; do
  "$twin" run "$f" --json
done | python3 -c '
import json, sys
dec = json.JSONDecoder()
text = sys.stdin.read()
rows, i = [], 0
while i < len(text):
    if text[i].isspace():
        i += 1
        continue
    d, i = dec.raw_decode(text, i)
    t = d["resolved_scenario"]
    rows.append({
        "scenario": d["scenario"],
        "gpus": t["parallel"]["replica_gpus"] * t["parallel"]["dp"],
        "step_time_s": d["step_time_s"],
        "tokens_per_s_per_gpu": d["tokens_per_s_per_gpu"],
        "mfu_bf16": d["flops"]["mfu"],
        "exposed_comm_s": d["exposed_comm_s"],
        "gpu_time_s": d["gpu_time_s"],
        "hbm_peak_reserved_GiB": d["memory"]["hbm_peak_reserved_GiB"],
        "hbm_peak_allocated_GiB": d["memory"]["hbm_peak_allocated_GiB"],
        "hbm_capacity_GiB": d["memory"]["hbm_capacity_GiB"],
    })
json.dump({"command": "reports/torchtitan/predict.sh", "predictions": rows}, sys.stdout, indent=1)
print()
' > "$tmp"
mv "$tmp" "$out"
echo "wrote $out"
