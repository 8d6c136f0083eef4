// The calibration harness's driver pieces, shaped like nccl-tests (src/common.h): a small
// descriptor per micro-benchmark and one driver that owns warm-up, repetitions, timing with
// CUDA events (medians) and error checks. Derived metrics are short named functions below.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace twin::calibrate {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Median time in milliseconds of `launch` on stream s: `warmup` untimed runs, then `reps`
// runs each bracketed by events; `before` (untimed) runs ahead of each.
inline double median_ms(cudaStream_t s, int warmup, int reps, const std::function<void()>& launch,
                        const std::function<void()>& before = {}) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before();
    launch();
  }
  check(cudaStreamSynchronize(s), "warm-up");
  std::vector<float> ms(static_cast<std::size_t>(reps));
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (auto& m : ms) {
    if (before) before();
    check(cudaEventRecord(a, s), "record");
    launch();
    check(cudaEventRecord(b, s), "record");
    check(cudaEventSynchronize(b), "sync");
    check(cudaEventElapsedTime(&m, a, b), "elapsed");
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Derived metrics (doc: calibrate/README.md).
inline double gemm_tflops(double m, double n, double k, double ms) {
  return 2 * m * n * k / (ms * 1e-3) / 1e12;
}
inline double bandwidth_GBps(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}
// Newton–Schulz FLOPs, 5 iterations on an m×n matrix (m ≤ n): 5·(4m²n + 2m³).
inline double ns_flops(double m, double n) {
  return 5 * (4 * m * m * n + 2 * m * m * m);
}

}  // namespace twin::calibrate
