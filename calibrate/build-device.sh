#!/usr/bin/env bash
# Builds twin-calibrate with nvcc alone, for GPU machines that have CUDA but not the Debian
# header packages the full build uses: header-only dependencies (nlohmann/json, CLI11, Eigen)
# are taken from DEPS (default .deps/include, filled by `calibrate/build-device.sh --collect` on a
# machine that has them). NCCL is looked for in the system folders, beside CUDA and in
# Python's nvidia-nccl wheel. `--lib` builds only libtwin_kernels_c.so (for micro_step.py).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=${DEPS:-.deps/include}
if [ "${1:-}" = "--collect" ]; then
  mkdir -p "$deps"
  cp -r /usr/include/nlohmann /usr/include/CLI "$deps"/
  mkdir -p "$deps/eigen3" && cp -r /usr/include/eigen3/Eigen "$deps/eigen3/"
  echo "collected headers into $deps"; exit 0
fi
out=${OUT_DIR:-build-device}
mkdir -p "$out"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# The SM holder as a shared library for calibrate/micro_step.py (ctypes), cudart shared.
"$nvcc" -O2 -std=c++17 -arch=sm_90 -I. -shared -Xcompiler -fPIC -cudart shared \
  kernels/c_api.cu kernels/sm_hold.cu kernels/cluster_probe.cu kernels/grouped_gemm.cu kernels/fp8_block.cu -o "$out/libtwin_kernels_c.so"
echo "built $out/libtwin_kernels_c.so"
[ "${1:-}" = "--lib" ] && exit 0
cuda_home=$(dirname "$(dirname "$nvcc")")
nccl_flags=()
for inc in /usr/include "$cuda_home/include" $(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__)+"/include")' 2>/dev/null || true); do
  if [ -f "$inc/nccl.h" ]; then
    lib=$(dirname "$inc")/lib
    for l in "$lib" /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu "$cuda_home/lib64" "$cuda_home/lib"; do
      if ls "$l"/libnccl.so* >/dev/null 2>&1; then
        nccl_flags=(-DTWIN_HAVE_NCCL -I"$inc" -L"$l" -Xlinker -rpath="$l" -l:$(basename "$(ls "$l"/libnccl.so* | head -1)"))
        break 2
      fi
    done
  fi
done
[ ${#nccl_flags[@]} -gt 0 ] && echo "NCCL: ${nccl_flags[*]}" || echo "NCCL not found: collective benchmarks left out"
"$nvcc" -O2 -std=c++17 -arch=sm_90 -I. -I"$deps" -I"$deps/eigen3" -Xcompiler -fopenmp \
  kernels/sm_hold.cu kernels/cluster_probe.cu kernels/grouped_gemm.cu kernels/fp8_block.cu \
  calibrate/main.cpp calibrate/bench_gemm.cpp calibrate/bench_misc.cpp calibrate/bench_cpu.cpp \
  calibrate/bench_nccl.cpp calibrate/fit.cpp \
  "${nccl_flags[@]}" -lcublas -lgomp -o "$out/twin-calibrate"
echo "built $out/twin-calibrate"
