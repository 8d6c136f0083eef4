#!/usr/bin/env bash
# Quick start: install what is missing, build in Release, run the main job on the default scenario.
# Extra arguments go to `twin`, e.g. ./run.sh --json
set -euo pipefail
cd "$(dirname "$0")"
source .ci/setup.sh
twin_install_missing "${twin_packages[@]}"
twin_web_setup >&2  # the chart libraries of `twin report`
echo "twin: building in build/ (a few minutes the first time; log in build.log)" >&2
twin_build build >build.log 2>&1 || { tail -n 40 build.log >&2; exit 1; }
grep -E "^CMake Warning|twin:" build.configure.log >&2 || true  # what the configure step found (CUDA, NCCL)
exec build/twin run scenarios/europa.json "$@"
