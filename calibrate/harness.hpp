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

#include "kernels/twin_kernels.cuh"

namespace twin::calibrate {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Median time in milliseconds of `launch` on stream s: `warmup` untimed runs, then `reps`
// runs each bracketed by events; `before` (untimed) runs ahead of each.
//
// lead_us = 0: each run on an idle GPU, the host waiting for it — the events then also time the
// host's enqueue (cuBLAS's host side: ~8 µs on an H100, as long as a small GEMM; 2026-12-05,
// reports/calibration/gemm-alone/README.md). lead_us > 0: as in the job, where the
// host runs ahead of the GPU — one GPU sleep of lead_us per run goes first, the host enqueues
// every run behind it (`before` must not wait for the GPU then), and the runs follow each other
// on the GPU, as calibrate/contention_bench.py times them.
inline double median_ms(cudaStream_t s, int warmup, int reps, const std::function<void()>& launch,
                        const std::function<void()>& before = {}, double lead_us = 0) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before();
    launch();
  }
  check(cudaStreamSynchronize(s), "warm-up");
  const std::size_t n = static_cast<std::size_t>(reps);
  std::vector<cudaEvent_t> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    check(cudaEventCreate(&a[i]), "event");
    check(cudaEventCreate(&b[i]), "event");
  }
  if (lead_us > 0)
    check(kernels::launch_gpu_sleep(static_cast<long long>(lead_us * 1e3 * reps), s), "lead");
  std::vector<float> ms(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (before) before();
    check(cudaEventRecord(a[i], s), "record");
    launch();
    check(cudaEventRecord(b[i], s), "record");
    if (lead_us <= 0) check(cudaEventSynchronize(b[i]), "sync");
  }
  check(cudaStreamSynchronize(s), "sync");
  for (std::size_t i = 0; i < n; ++i) {
    check(cudaEventElapsedTime(&ms[i], a[i], b[i]), "elapsed");
    cudaEventDestroy(a[i]);
    cudaEventDestroy(b[i]);
  }
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
