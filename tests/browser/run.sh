#!/usr/bin/env bash
# The report as a person sees it (issue #19): `twin report` on europa.json with the ladder, the
# README's 100-point sweep and a plan-dp run, and on the micro-step beside its real trace, loaded
# in headless Chromium; fails on any console
# error, a chart not drawn or drawn without data. The page and its screenshot stay in OUT_DIR.
# Usage: tests/browser/run.sh TWIN_BINARY OUT_DIR      (exit 77: skipped, with the reason)
set -euo pipefail
twin=$1; out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
for need in node /usr/bin/chromium "$root/reports/web/node_modules/playwright-core"; do
  if ! command -v "$need" >/dev/null 2>&1 && [ ! -e "$need" ]; then
    echo "skipped: $need is missing (./test.sh installs Node.js, Chromium and reports/web's packages)"
    exit 77
  fi
done
mkdir -p "$out"
"$twin" sweep "$root/scenarios/europa.json" --grid nccl.max_ctas=8,16,24,32,40 \
  --grid training.seq_len=32768,49152,65536,81920,98304 --grid training.offload_fraction=0.5,0.7,0.86,1.0 \
  --jobs 2 --out "$out/sweep.csv"
"$twin" plan-dp "$root/scenarios/europa.json" --replicas 1,2,4,8,16,32,61 --jobs 2 --json >"$out/plan-dp.json"
"$twin" report "$root/scenarios/europa.json" --ladder --jobs 2 --sweep "$out/sweep.csv" \
  --plan-dp "$out/plan-dp.json" -o "$out/report.html"
node "$root/tests/browser/check_report.mjs" "$out/report.html" "$out/report.png"
# A real trace beside the twin (issue #20): the micro-step's plan as it ran on our H200.
"$twin" report "$root/scenarios/micro-step.json" \
  --kineto "$root/tests/data/traces/micro-step-max-ctas-16.trace.json.gz" -o "$out/compare.html"
node "$root/tests/browser/check_report.mjs" "$out/compare.html" "$out/compare.png"
echo "pages: $out/report.html, $out/compare.html; screenshots: $out/report.png, $out/compare.png"
