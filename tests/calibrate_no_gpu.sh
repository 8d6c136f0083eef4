#!/usr/bin/env bash
# twin-calibrate without a GPU: exit 3 and says why, writing nothing (issue #19). Skipped (77)
# where a GPU is visible: there it would measure.
set -uo pipefail
bin=$1; out=$(mktemp -d)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: a GPU is visible here"; exit 77
fi
"$bin" --quick --out "$out/never-written.json" 2>"$out/err"; rc=$?
cat "$out/err"
[ "$rc" = 3 ] || { echo "expected exit 3, got $rc"; exit 1; }
grep -q "no CUDA GPU visible" "$out/err" || { echo "no reason given"; exit 1; }
[ ! -e "$out/never-written.json" ] || { echo "a profile was written"; exit 1; }
rm -rf "$out"
