#!/usr/bin/env bash
# Every C++ and CUDA source of the project is as clang-format (Debian 12's, 14) writes it, with
# the root's .clang-format. Fix: git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i
# exit 77: skipped (no clang-format; ./test.sh installs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v clang-format >/dev/null || { echo "skipped: clang-format missing (apt-get install clang-format)"; exit 77; }
cd "$root"
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' 2>/dev/null || find . -name '*.[ch]pp' -not -path './build*')
[ ${#bad[@]} -eq 0 ] || { printf 'not formatted (clang-format -i FILE): %s\n' "${bad[@]}" >&2; exit 1; }
echo "formatted: every source"
