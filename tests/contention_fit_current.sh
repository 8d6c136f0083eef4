#!/usr/bin/env bash
# The committed contention fit (reports/calibration/contention/: fit.json, fit.log, plots/) is what
# twin-fit-contention makes of the committed measurements today, byte for byte: the README's
# command, run into a scratch folder.
set -euo pipefail
fit=$1 root=$2 out=$3
D=$root/reports/calibration/contention
rm -rf "$out" && mkdir -p "$out/plots"
"$fit" "$D/h200-2026-11-30-contention-a.json" "$D/h200-2026-11-30-contention-b.json" \
    "$D/h200-2026-12-01-contention-c.json" --clocks "$D/h200-2026-12-01-contention-d.json" \
    "$D/h200-2026-12-01-contention-e.json" "$D/h200-2026-12-01-contention-f.json" \
    --clusters "$root/reports/calibration/clusters/h200-2026-12-01-clusters.json" \
    --lone-cta "$D/h200-2026-12-04-contention-y.json" "$D/h200-2026-12-04-contention-lone-wide.json" \
    "$D/h200-2026-12-05-contention-lone-more.json" --split-k "$D/h200-2026-12-03-contention-s.json" \
    --split-k-waves "$D/h200-2026-12-05-contention-reduce.json" --split-k-waves-columns 2048 --held-out "$D/h200-2026-12-03-contention-p.json" \
    --out "$out/fit.json" --svg "$out/plots" > "$out/fit.log"
status=0
for f in fit.json fit.log $(cd "$out" && ls plots/*.svg); do
  cmp -s "$out/$f" "$D/$f" || { echo "reports/calibration/contention/$f differs from a fresh fit" >&2; status=1; }
done
[ "$status" = 0 ] && echo "fit.json, fit.log and $(ls "$out/plots" | wc -l) plots as committed"
exit $status
