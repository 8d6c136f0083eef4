#!/usr/bin/env bash
# The calibration harness's Python (issue #19 item 6): every script compiles, every public
# function has type hints, pyflakes finds nothing (unused imports, undefined names), and --help
# works without PyTorch or a GPU.
# exit 77: skipped (no pyflakes; ./test.sh installs python3-pyflakes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v pyflakes3 >/dev/null || { echo "skipped: pyflakes3 missing (apt-get install python3-pyflakes)"; exit 77; }
PYTHONDONTWRITEBYTECODE=1 python3 -c "import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]" "$root"/calibrate/*.py
python3 - "$root"/calibrate/*.py <<'PY'
import ast, sys
bad = [f"{f}:{n.lineno}: {n.name}() lacks type hints" for f in sys.argv[1:]
       for n in ast.parse(open(f).read()).body
       if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
       and (n.returns is None or any(a.annotation is None for a in n.args.args + n.args.kwonlyargs))]
print(*bad, sep="\n", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
pyflakes3 "$root"/calibrate/*.py
for f in "$root"/calibrate/*.py; do
  grep -q '__name__ == "__main__"' "$f" || continue  # a module the scripts import
  out=$(PYTHONDONTWRITEBYTECODE=1 python3 "$f" --help 2>&1) || { echo "$f --help failed:"; echo "$out"; exit 1; }
  grep -q "usage:" <<<"$out" || { echo "$f --help printed no usage"; exit 1; }
done
# The queue of device runs: its steps list, and an unknown step is refused before any GPU check.
bash -n "$root"/calibrate/device_queue.sh
queue=$("$root"/calibrate/device_queue.sh list)
grep -q "^contention " <<<"$queue" || { echo "device_queue.sh list lacks its steps"; exit 1; }
rc=0; "$root"/calibrate/device_queue.sh no-such-step 2>/dev/null || rc=$?
[ "$rc" = 2 ] || { echo "device_queue.sh took an unknown step (exit $rc)"; exit 1; }
echo "calibrate/*.py: compiled, typed, pyflakes clean, --help without PyTorch; device_queue.sh lists its steps"
