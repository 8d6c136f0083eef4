#!/usr/bin/env bash
# Quick start: install what is missing, build in Release, run the main job on the default scenario.
# Extra arguments go to `twin`, e.g. ./run.sh --json
set -euo pipefail
cd "$(dirname "$0")"
source .ci/setup.sh
twin_install_missing "${twin_packages[@]}"
twin_build build >/dev/null
exec build/twin run scenarios/europa.json "$@"
