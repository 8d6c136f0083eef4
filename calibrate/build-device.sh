#!/usr/bin/env bash
# Builds the calibration kernels with nvcc alone, for GPU machines that have CUDA but not the
# Debian packages the full build uses: `--lib` builds libtwin_kernels_c.so (for the Python
# harnesses: contention_bench.py, micro_step.py, the probes). twin-calibrate: see the end.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT_DIR:-build-device}
mkdir -p "$out"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# The SM holder as a shared library for calibrate/micro_step.py (ctypes), cudart shared.
"$nvcc" -O2 -std=c++17 -arch=sm_90 -I. -shared -Xcompiler -fPIC -cudart shared \
  kernels/c_api.cu kernels/sm_hold.cu kernels/cluster_probe.cu kernels/grouped_gemm.cu kernels/fp8_block.cu -o "$out/libtwin_kernels_c.so"
echo "built $out/libtwin_kernels_c.so"
[ "${1:-}" = "--lib" ] && exit 0
# twin-calibrate itself links the project's hardware library (collective tables, nccl-tests
# logs, the GEMM cost model it fits), which needs fmt and Boost.Graph: nvcc alone no longer
# builds it (its link lacks them). Build it with CMake where those packages are and copy it over
# with the one library a GPU machine may lack (2026-12-05, reports/calibration/gemm-alone/):
#   cmake --build build --target twin-calibrate && mkdir -p build/devlib &&
#   cp /lib/x86_64-linux-gnu/libfmt.so.9* build/devlib/
#   # on the GPU machine: LD_LIBRARY_PATH=build/devlib build/twin-calibrate ...
echo "build-device.sh: builds only libtwin_kernels_c.so (--lib); twin-calibrate: see this script's end" >&2
exit 2
