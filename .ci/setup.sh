#!/usr/bin/env bash
# Installs what twin needs from Debian's packages, then configures and builds it.
# Idempotent: when nothing is missing it only runs the (incremental) build.
# Usage: source .ci/setup.sh [build-dir] [extra cmake args...]
set -euo pipefail

twin_packages=(cmake g++ make libboost-graph-dev libeigen3-dev nlohmann-json3-dev libcli11-dev
               libfmt-dev libbenchmark-dev doctest-dev python3-pyflakes zlib1g-dev clang-format
               libtomlplusplus-dev)

twin_install_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "twin: installing missing packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "twin: need root (or sudo) to install: ${missing[*]}" >&2; return 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# The chart libraries `twin report` inlines (and the browser test's driver), from the npm registry
# at the versions of reports/web/package-lock.json; Node.js and npm from Debian if missing.
twin_web_setup() {
  command -v npm >/dev/null 2>&1 || twin_install_missing nodejs npm
  local stamp=reports/web/node_modules/.package-lock.json
  if [ ! -f "$stamp" ] || [ reports/web/package-lock.json -nt "$stamp" ]; then
    echo "twin: installing reports/web's packages (npm ci)"
    npm ci --prefix reports/web --no-audit --no-fund --loglevel=error
  fi
}

twin_build() {
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  grep -E "^CMake Warning|twin:" "$dir.configure.log" || true
  cmake --build "$dir" -j"$(nproc)"
}
