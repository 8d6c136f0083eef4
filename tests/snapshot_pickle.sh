#!/usr/bin/env bash
# `twin memory --snapshot` → calibrate/snapshot_pickle.py → a pickle that loads as PyTorch's
# snapshot structure, whose trace's peak of active memory is the twin's rank-0 peak allocated.
set -euo pipefail
twin=$1 scenario=$2 out=$3
mkdir -p "$out"
summary=$("$twin" memory "$scenario" --snapshot "$out/snap.json")
converted=$(python3 "$(dirname "$0")/../calibrate/snapshot_pickle.py" "$out/snap.json" "$out/snap.pickle")
echo "$converted"
want=$(sed -n 's/^HBM, rank 0: peak allocated \([0-9.]*\) GiB.*/\1/p' <<<"$summary")
got=$(sed -n 's/.*peak active \([0-9.]*\) GiB.*/\1/p' <<<"$converted")
python3 - "$out/snap.pickle" <<'PY'
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
assert isinstance(s["segments"][0]["segment_pool_id"], tuple)
assert {e["action"] for e in s["device_traces"][0]} >= {"alloc", "free_requested", "free_completed"}
PY
[ -n "$want" ] && [ "$want" = "${got:0:${#want}}" ] || { echo "peak allocated ${want:-?} GiB, the trace's ${got:-?}" >&2; exit 1; }
